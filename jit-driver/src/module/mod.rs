//! `MergeModule<M>`: a `cranelift_module::Module` that merges and value-numbers the functions
//! defined in it before handing them to the module it wraps (a `JITModule`, an
//! `ObjectModule`, or any other).
//!
//! Declarations go to the inner module and to the host's own declarations (`ids`): the host
//! sees the plain module's ids, the inner module and everything behind it the inner ids.
//! `define_function` checks the function as the plain module's compile would reject it
//! (Cranelift's verifier, the signature, a second definition) and keeps it; the passes run
//! when the definitions are flushed (`finalize_definitions` for a JIT, `finish` for an object
//! file, or `flush`):
//!
//! 1. every pending function is lifted to LIR (in a module's one and last batch, only those
//!    some other function shares a shape with: see `skip`; the others are never merged; a
//!    function the lifter cannot represent is passed through, compiled as it came);
//! 2. the passes run over the new functions, merging them with each other and with the
//!    functions compiled by earlier flushes (those are *frozen*: they survive, never change);
//! 3. each new function is compiled into the inner module: a merged one not at all (its id
//!    resolves to the survivor), a function a pass changed from its lowered LIR, and every
//!    other function from the Cranelift IR it was defined with (exact: nothing to lower), with
//!    direct calls to merged functions pointed at their survivors. Shared bodies are
//!    compiled first, then survivors, then the rest: where one fails, what was merged into
//!    it is compiled from its own input before any caller is. A function that fails is reported, with all the
//!    others that failed, in one [`FunctionError`], and is undefined again.
//!
//! The module is incremental: what was compiled stays in the LIR module, frozen, so a later
//! function equal to one compiled before gets that code without any compile.
//!
//! When the plan finds nothing to lift, merge or start (every function of the flush is
//! *lone*), the flush takes a short path instead (`lone`): each function compiled from its
//! definition, and indexed.
//!
//! `Core::flush` runs those stages by name, each in its own file: `lift` (with `skip`, which
//! decides what needs no lifting, `fingerprint`, the one walk over a function that gives its
//! shape key and the digests of its print, and `input_index`, the digests of what was left
//! unlifted), `passes`, `compile` (which decides what each function is compiled from), `redirect` (the
//! calls of functions compiled from their input), and `define` (compiling on the caller's
//! thread and defining the code; `parallel` compiles on workers). `trait_impl` is the
//! `Module` implementation, `names` the spelling of module functions in LIR, `error` the
//! error a flush returns.

mod compile;
mod config;
mod define;
mod error;
mod fingerprint;
mod ids;
mod input_index;
#[cfg(feature = "jit")]
mod jit_module;
mod lift;
mod lone;
mod names;
#[cfg(feature = "object")]
mod object;
mod parallel;
mod passes;
mod redirect;
mod report;
mod skip;
#[cfg(all(test, feature = "jit"))]
mod tests;
mod thunk;
mod trait_impl;

pub use config::{AddressPolicy, DebugOptions, MergeConfig, StageHook, Threads};
pub use error::{FailedFunction, FunctionError};
pub use report::FlushReport;
#[doc(hidden)]
pub use report::OwnFunction;
// For the tools: the plain compile `mergelift size` measures against, and Cranelift's verifier
// and panics as text.
#[doc(hidden)]
pub use error::{panic_text, verify_caught, VerifyFailure};
#[doc(hidden)]
pub use parallel::define_plain;
#[doc(hidden)]
pub use passes::tail_calls_allowed;

use crate::lift::LiftContext;
use crate::lower::LowerContext;
use crate::opmap::parse_user_name;
use cranelift_codegen::ir;
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::Context;
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::SecondaryMap;
use cranelift_module::{FuncId, Module, ModuleError, ModuleResult};
use define::Definer;
use error::backend;
use midend::lir;
use midend::state::{MergeKind, MergedBy};
use midend::{PassManager, PassState, Stats};
use rustc_hash::{FxHashMap, FxHashSet};
use std::time::Duration;

/// What became of a defined function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    /// Declared, not defined (or an import).
    #[default]
    Declared,
    /// Defined, waiting for the next flush.
    Pending,
    /// Compiled into the inner module (possibly as a thunk).
    Compiled,
    /// Merged away: no code; its id resolves to its survivor.
    Merged,
    /// Defined with `define_function_bytes` (passed straight through).
    Bytes,
}

/// A merged function: its survivor, how it was merged, and whether its direct calls go to
/// the survivor (not for a preemptible function, nor for one folded by `merge-similar`,
/// whose callers pass extra arguments and were rewritten in the IR).
#[derive(Clone, Copy, Debug)]
struct Merged {
    into: FuncId,
    kind: MergeKind,
    by: MergedBy,
    redirect: bool,
}

/// A hook called with each function compiled into the inner module and the context holding
/// its compiled code (`ctx.compiled_code()`).
pub type CompiledHook = Box<dyn FnMut(FuncId, &Context) + Send>;

/// A Cranelift module that merges equal and similar functions before they reach the module it
/// wraps: a drop-in `cranelift_module::Module` for a `JITModule` (or, with the feature
/// `object`, an `ObjectModule`).
///
/// `define_function` checks and keeps the function; the passes run and the code is compiled
/// at the flush (`finalize_definitions`, `finish`, or [`flush`](MergeModule::flush)), in
/// stages: every pending function is lifted to Mergelift's IR (those no other function
/// could merge with are not), the passes merge them with each other and with what earlier
/// flushes compiled, and each function is compiled into the inner module: a merged one not
/// at all (its id resolves to its survivor's code, or to a small thunk of its own), an
/// unchanged one from the Cranelift IR it was defined with. The crate documentation of
/// `mergelift` lists every way this differs from the plain module.
///
/// ```
/// use cranelift_jit::{JITBuilder, JITModule};
/// use cranelift_module::{default_libcall_names, Module};
/// use mergelift::{MergeConfig, MergeModule, Threads};
///
/// let jit = JITModule::new(JITBuilder::new(default_libcall_names()).unwrap());
/// // A host that runs its own compile threads keeps Mergelift on the caller's thread.
/// let config = MergeConfig { threads: Threads::None, ..Default::default() };
/// let mut m = MergeModule::with_config(jit, config);
/// // ... declare and define functions through `Module`, as with the JITModule ...
/// m.finalize_definitions().unwrap();
/// for (merged, survivor, kind) in m.merges() {
///     match survivor {
///         Some(s) => println!("{merged} uses the code of {s} ({kind:?})"),
///         None => println!("{merged} uses a shared body ({kind:?})"),
///     }
/// }
/// println!("{} bytes of code", m.total_code_bytes());
/// ```
pub struct MergeModule<M: Module> {
    inner: M,
    config: MergeConfig,
    core: Core,
    last_flush: FlushReport,
    /// Room for the ids of a flush's functions, kept from one report to the next.
    report_ids: Vec<FuncId>,
}

/// The state that does not depend on the inner module's type.
struct Core {
    /// The host's declarations and ids, and the map to the inner module's (`ids`).
    host: ids::HostView,
    lir: lir::Module,
    /// What the passes share over `lir`, batch after batch.
    pass_state: PassState,
    /// The LIR function and symbol of each module function lifted so far.
    lifted: SecondaryMap<FuncId, PackedOption<lir::FuncId>>,
    /// The module function of each LIR symbol that names one.
    sym_func: SecondaryMap<lir::Symbol, PackedOption<FuncId>>,
    state: SecondaryMap<FuncId, State>,
    /// What each merged function became (a thunk counts).
    merged: SecondaryMap<FuncId, Option<Merged>>,
    pending: Vec<(FuncId, ir::Function)>,
    /// Functions whose address is observed: taken in IR or stored in data.
    taken: SecondaryMap<FuncId, bool>,
    stats: Stats,
    code_bytes: SecondaryMap<FuncId, u32>,
    hook: Option<CompiledHook>,
    /// The host defined a function from a context that asked for disassembly: every
    /// function compiled since is compiled with it, for the hook.
    disasm: bool,
    ctx: Context,
    fctx: LowerContext,
    /// Set when a flush failed in Mergelift's own code (a pass): the module can no longer be
    /// trusted.
    poisoned: Option<String>,
    /// Functions passed through unmerged (the lifter cannot represent them), and why.
    passed_through: Vec<(FuncId, String)>,
    /// Functions that failed to compile while compiled code refers to them: the inner module
    /// cannot be finalized until they are defined again.
    unresolved: Vec<FuncId>,
    /// Functions folded away by an earlier flush whose address data now holds: the next
    /// flush gives each a thunk.
    late_data: Vec<FuncId>,
    /// Functions not defined yet that pending functions refer to (`note_undefined_callees`).
    undefined_callees: Vec<FuncId>,
    /// The inner module gives a merged function's name its survivor's code (an object file's
    /// alias symbol), so compiled code may call a function that merges later by name.
    aliases: bool,
    /// Time spent verifying functions at define, not yet added to `stats`.
    verify_time: Duration,
    /// Functions and data objects declared through this module (ids below are valid).
    declared: (u32, u32),
    /// Some function was merged (calls may need redirecting).
    any_merged: bool,
    lift_ctx: LiftContext,
    /// The passes, made at the first flush, with the `fetch_locals` they were made for.
    passes: Option<(bool, PassManager)>,
    /// How compiled code may reach the inner module.
    definer: Definer,
    /// The inner module's ISA with Cranelift's verifier off, for functions it accepted at
    /// define already (`define`; none when the verifier is off, or code cannot be defined
    /// as bytes).
    quiet: Option<cranelift_codegen::isa::OwnedTargetIsa>,
    /// Functions are verified at define (`enable_verifier`, or `MergeConfig::verify_input`).
    verified_at_define: bool,
    /// The functions earlier flushes compiled without lifting them, by their prints.
    input_index: input_index::InputIndex,
    /// The shape keys of the functions earlier flushes lifted: a function of a later batch
    /// with one of them is lifted (it may equal one of those, which are frozen).
    lifted_shapes: FxHashSet<u64>,
    walker: fingerprint::Walker,
    /// Room a flush uses and the next reuses.
    scratch: Scratch,
}

/// What every flush needs room for, kept from one flush to the next (a JIT that finalizes
/// one function at a time would otherwise allocate it all for each).
#[derive(Default)]
struct Scratch {
    survey: skip::Survey,
    /// How many functions of the batch have each shape key, up to two.
    count: FxHashMap<u64, u8>,
    /// The positions a batch indexes by their prints.
    indexed: Vec<u32>,
}

impl<M: Module + 'static> MergeModule<M> {
    /// Wrap `inner` with the default configuration (`merge` and `merge-similar`, shared
    /// addresses, large flushes compiled on every core).
    pub fn new(inner: M) -> Self {
        Self::with_config(inner, MergeConfig::default())
    }

    /// Wrap `inner` with `config`.
    pub fn with_config(inner: M, config: MergeConfig) -> Self {
        let definer = Definer::of(&inner);
        let mut m = Self::with_definer(inner, config, definer);
        m.core.aliases = define::makes_aliases(&m.inner);
        m
    }
}

impl<M: Module> MergeModule<M> {
    fn with_definer(inner: M, config: MergeConfig, definer: Definer) -> Self {
        let verified_at_define = config.verify_input || inner.isa().flags().enable_verifier();
        let declared = (
            inner.declarations().get_functions().count() as u32,
            inner.declarations().get_data_objects().count() as u32,
        );
        let host = ids::HostView::of(&inner);
        let mut m = MergeModule {
            inner,
            config,
            last_flush: FlushReport::default(),
            report_ids: Vec::new(),
            core: Core {
                host,
                lir: lir::Module::new(),
                pass_state: PassState::default(),
                lifted: SecondaryMap::new(),
                sym_func: SecondaryMap::new(),
                state: SecondaryMap::new(),
                merged: SecondaryMap::new(),
                pending: Vec::new(),
                taken: SecondaryMap::new(),
                stats: Stats::default(),
                code_bytes: SecondaryMap::new(),
                hook: None,
                disasm: false,
                ctx: Context::new(),
                fctx: LowerContext::new(),
                poisoned: None,
                passed_through: Vec::new(),
                unresolved: Vec::new(),
                late_data: Vec::new(),
                undefined_callees: Vec::new(),
                aliases: false,
                verify_time: Duration::ZERO,
                declared,
                any_merged: false,
                lift_ctx: LiftContext::default(),
                passes: None,
                definer: Definer::Exact,
                quiet: None,
                verified_at_define,
                input_index: Default::default(),
                lifted_shapes: Default::default(),
                walker: Default::default(),
                scratch: Default::default(),
            },
        };
        m.core.set_definer(m.inner.isa(), definer);
        m
    }

    /// The configuration.
    pub fn config(&self) -> &MergeConfig {
        &self.config
    }

    /// The id in the inner module of the function the host declared as `id` (for
    /// [`inner`](MergeModule::inner), [`inner_mut`](MergeModule::inner_mut) and
    /// [`into_inner`](MergeModule::into_inner)): `id` itself until a pass made a shared body,
    /// which the inner module numbers among the host's functions.
    pub fn inner_id(&self, id: FuncId) -> FuncId {
        self.core.host.inner_or_same(id)
    }

    /// The wrapped module (its ids: [`inner_id`](MergeModule::inner_id)). A function merged
    /// away has no code in it (its calls and fetches resolve through `MergeModule`:
    /// `get_finalized_function`, `get_address`); [`into_inner`](MergeModule::into_inner)
    /// gives each one code before handing the module over.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The wrapped module, mutably. Functions defined in it directly bypass Mergelift (they
    /// are not merged, and calls to them are not redirected).
    pub fn inner_mut(&mut self) -> &mut M {
        &mut self.inner
    }

    /// The survivor of a merged function: the function whose code `id` now uses (directly, or
    /// through a thunk of its own when its address had to stay distinct). `None` for a
    /// function that was not merged.
    ///
    /// The survivor is a function the host declared. A function merged into a shared body
    /// that a pass made (`merge-similar`, `merge-aligned`: one body for several functions,
    /// with extra parameters) has no such survivor: `None` here, and
    /// [`in_shared_body`](MergeModule::in_shared_body) says so.
    pub fn merged_into(&self, id: FuncId) -> Option<FuncId> {
        self.merge_of(id).and_then(|m| self.core.host.host(m.into))
    }

    /// Was `id` merged into a shared body a pass made (code of Mergelift's own, which the
    /// host never declared)? Its code is that body's, through a thunk of its own when the
    /// host may fetch it.
    pub fn in_shared_body(&self, id: FuncId) -> bool {
        self.merge_of(id)
            .is_some_and(|m| self.core.host.host(m.into).is_none())
    }

    /// How a merged function was folded into its survivor.
    pub fn merge_kind(&self, id: FuncId) -> Option<MergeKind> {
        self.merge_of(id).map(|m| m.kind)
    }

    /// Which pass merged a function away.
    pub fn merged_by(&self, id: FuncId) -> Option<MergedBy> {
        self.merge_of(id).map(|m| m.by)
    }

    /// The merge of host function `id`, if it was merged.
    fn merge_of(&self, id: FuncId) -> Option<Merged> {
        let inner = self.core.host.inner(id)?;
        self.core.merged.get(inner).copied().flatten()
    }

    /// Every merged function with its survivor (`None`: a shared body a pass made, as in
    /// [`merged_into`](MergeModule::merged_into)) and kind, in id order.
    pub fn merges(&self) -> impl Iterator<Item = (FuncId, Option<FuncId>, MergeKind)> + '_ {
        let host = &self.core.host;
        (self.core.merged.iter())
            .filter_map(|(g, m)| Some((host.host(g)?, (*m)?)))
            .map(|(g, m)| (g, host.host(m.into), m.kind))
    }

    /// Statistics of every flush so far: typed counters ([`Counter`](midend::Counter):
    /// `FunctionsIn`, `Merged`, `Compiled`, `CompiledFromInput`, `Lowered`, `CodeBytes`, and
    /// each pass's own) and phase times (`lift`, each pass, `lower`, `compile`, `verify`).
    /// [`last_flush`](MergeModule::last_flush) gives one flush's alone.
    pub fn stats(&self) -> &Stats {
        &self.core.stats
    }

    /// Machine-code bytes of a function compiled by a flush (`None`: merged away, pending, or
    /// not compiled by Mergelift).
    pub fn code_bytes(&self, id: FuncId) -> Option<usize> {
        let id = self.core.host.inner(id)?;
        match self.core.state.get(id) {
            Some(State::Compiled) => Some(self.core.code_bytes[id] as usize),
            _ => None,
        }
    }

    /// Machine-code bytes of every function compiled so far.
    pub fn total_code_bytes(&self) -> usize {
        self.core.stats.get(midend::Counter::CodeBytes) as usize
    }

    /// Call `hook` with each function compiled into the inner module, and the context holding
    /// its compiled code, right after it is defined (what `ctx.compiled_code()` would have
    /// shown after `define_function` on the inner module).
    ///
    /// Once the host defines a function from a context that asked for disassembly
    /// (`ctx.set_disasm(true)`), every function compiled afterwards is compiled with it, and
    /// `ctx.compiled_code().unwrap().vcode` holds it. The hook sees the host's functions,
    /// and the thunks Cranelift compiles for merged ones (under the merged function's id).
    /// It does not see the shared bodies `merge-similar` and `merge-aligned` make (Mergelift's
    /// own, with no id of the host's: [`total_code_bytes`](MergeModule::total_code_bytes)
    /// counts their code), nor the thunks written directly as machine code on x86-64 (a few
    /// `mov`s and a jump, with no `Context`:
    /// [`last_flush`](MergeModule::last_flush)`().stats.get(Counter::NativeThunks)` counts
    /// them).
    ///
    /// ```
    /// # use cranelift_jit::{JITBuilder, JITModule};
    /// # let jit = JITModule::new(JITBuilder::new(cranelift_module::default_libcall_names()).unwrap());
    /// let mut m = mergelift::MergeModule::new(jit);
    /// m.on_compiled(|id, ctx| {
    ///     let code = ctx.compiled_code().unwrap();
    ///     println!("{id}: {} bytes", code.code_buffer().len());
    ///     if let Some(text) = &code.vcode {
    ///         println!("{text}");
    ///     }
    /// });
    /// ```
    pub fn on_compiled(&mut self, hook: impl FnMut(FuncId, &Context) + Send + 'static) {
        self.core.hook = Some(Box::new(hook));
    }

    /// The LIR of everything lifted so far, for Mergelift's own tools: the bodies of compiled
    /// and merged functions are freed once compiled unless a tool asked to keep them, and
    /// functions are named by id (`u0:N`), not as declared.
    #[doc(hidden)]
    pub fn lir(&self) -> &lir::Module {
        &self.core.lir
    }

    /// Is `id` defined and waiting for the next flush?
    pub fn is_pending(&self, id: FuncId) -> bool {
        let id = self.core.host.inner_or_same(id);
        self.core.state.get(id) == Some(&State::Pending)
    }

    /// Run the passes over the functions defined since the last flush and define them in the
    /// inner module. `finalize_definitions` and `finish` call it; call it yourself to use
    /// another inner module.
    pub fn flush(&mut self) -> ModuleResult<()> {
        self.flush_batch(false, self.config.fetch_locals)
    }

    /// `flush`, as the last batch: nothing compiled now is fingerprinted for later batches to
    /// merge into (cheaper: a function whose weak hash no other shares is not walked in full,
    /// and, when this is also the first batch, a function whose shape no other shares is not
    /// lifted at all; the code is the same). Functions defined afterwards still work; they
    /// just do not merge into these. What `finish` does for an object file; for a one-shot
    /// JIT compile, call it before `finalize_definitions`.
    ///
    /// ```
    /// # use cranelift_jit::{JITBuilder, JITModule};
    /// # let jit = JITModule::new(JITBuilder::new(cranelift_module::default_libcall_names()).unwrap());
    /// let mut m = mergelift::MergeModule::new(jit);
    /// // ... declare and define every function of the program ...
    /// m.flush_last()?;
    /// m.finalize_definitions()?;
    /// # Ok::<(), cranelift_module::ModuleError>(())
    /// ```
    pub fn flush_last(&mut self) -> ModuleResult<()> {
        self.flush_batch(true, self.config.fetch_locals)
    }

    /// `flush`; a `last` one is followed by no other batch. With `fetch_locals`, a local
    /// function folded by `merge-similar` keeps a thunk, for the host to fetch.
    pub(crate) fn flush_batch(&mut self, last: bool, fetch_locals: bool) -> ModuleResult<()> {
        if let Some(p) = &self.core.poisoned {
            return Err(backend(format!(
                "an earlier flush failed inside Mergelift ({p}); this module cannot be used \
                 further"
            )));
        }
        let before = self.report_begin();
        let r = (self.core).flush(&mut self.inner, &self.config, last, fetch_locals);
        self.report_end(before);
        r.map_err(|e| self.core.error_to_host(&self.inner, e))
    }

    /// Functions compiled as they came, never merged, because Mergelift cannot represent
    /// them (an instruction, type or calling convention its IR lacks), with the reason. They
    /// work as with the plain module; the stats count them as `passed_through`. Only
    /// functions Mergelift lifted are here: one that no pass could merge with anything is
    /// compiled from its input without being lifted (the stats count it as `not_lifted`).
    pub fn passed_through(&self) -> impl Iterator<Item = (FuncId, &str)> + '_ {
        (self.core.passed_through.iter())
            .filter_map(|(id, why)| Some((self.core.host.host(*id)?, why.as_str())))
    }

    /// Functions that failed to compile while code compiled since refers to them: until each
    /// is defined again, the inner module cannot be finalized (a JIT could not resolve them).
    pub(crate) fn unresolved(&mut self) -> Option<ModuleError> {
        let state = &self.core.state;
        self.core
            .unresolved
            .retain(|&g| !matches!(state[g], State::Compiled | State::Bytes));
        if self.core.unresolved.is_empty() {
            return None;
        }
        let names: Vec<String> = (self.core.unresolved.iter())
            .map(|&g| self.func_name(g))
            .collect();
        Some(backend(format!(
            "compiled code refers to {}, which failed to compile: define {} again before \
             finalizing",
            names.join(", "),
            if names.len() == 1 { "it" } else { "them" }
        )))
    }

    /// Flush, then give back the inner module, in which every function the host defined has
    /// code of its own: each function merged away (which until now resolved to its
    /// survivor's code through `MergeModule`) is given a small thunk calling its survivor,
    /// so the inner module's own accessors (`JITModule::get_finalized_function` after its
    /// `finalize_definitions`, an object file's symbols) resolve it. What `MergeModule`
    /// knew is gone with it: later definitions in the inner module are not merged.
    ///
    /// With the module comes the map from the host's ids to the inner module's: they are the
    /// same until the first shared body a pass made, which takes the inner module's next id;
    /// a function the host declared after it has another id there.
    ///
    /// ```
    /// # use cranelift_jit::{JITBuilder, JITModule};
    /// # let jit = JITModule::new(JITBuilder::new(cranelift_module::default_libcall_names()).unwrap());
    /// let m = mergelift::MergeModule::new(jit);
    /// // ... declare and define functions, finalize, use them ...
    /// let (mut jit, inner_id) = m.into_inner()?;
    /// jit.finalize_definitions()?;
    /// // `jit.get_finalized_function(inner_id(id))` for each function `id` the host defined.
    /// # Ok::<(), cranelift_module::ModuleError>(())
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn into_inner(mut self) -> ModuleResult<(M, Box<dyn Fn(FuncId) -> FuncId + Send + Sync>)> {
        self.flush()?;
        // (A thunk's code, like a late one's: `late_data` gives each a thunk at the flush.)
        let merged = (self.core.state.iter())
            .filter(|&(_, s)| *s == State::Merged)
            .map(|(id, _)| id);
        self.core.late_data.extend(merged);
        self.flush()?;
        let host = std::mem::replace(&mut self.core.host, ids::HostView::of(&self.inner));
        Ok((self.inner, Box::new(move |id| host.inner_or_same(id))))
    }

    /// The host's name of inner function `id`.
    fn func_name(&self, id: FuncId) -> String {
        self.core.host.name(&self.inner, id)
    }
}

/// Where direct calls of `g` go: through the survivors of merges that redirect them, to the
/// last (`g` itself when they stay).
fn final_target(merged: &SecondaryMap<FuncId, Option<Merged>>, mut g: FuncId) -> FuncId {
    // (Each step goes to a survivor: the chain is no longer than the module.)
    for _ in 0..=merged.capacity() {
        match merged.get(g) {
            Some(Some(Merged {
                into: f,
                redirect: true,
                ..
            })) => g = *f,
            _ => break,
        }
    }
    g
}

impl Core {
    /// Let code reach the inner module as `definer` says (with Bytes, verified functions
    /// compile without the verifier's reruns).
    fn set_definer(&mut self, isa: &dyn TargetIsa, definer: Definer) {
        self.definer = definer;
        self.quiet = match definer {
            Definer::Bytes => define::quiet_isa(isa),
            Definer::Exact => None,
        };
    }

    fn name(inner: &dyn Module, id: FuncId) -> String {
        inner
            .declarations()
            .get_function_decl(id)
            .linkage_name(id)
            .into_owned()
    }

    /// The module function a LIR symbol names, if any.
    fn func_of(&self, s: lir::Symbol) -> Option<FuncId> {
        if let Some(f) = self.sym_func.get(s).and_then(|f| f.expand()) {
            return Some(f);
        }
        match parse_user_name(&self.lir.symbols[s].name) {
            Some(u) if u.namespace == 0 => Some(FuncId::from_u32(u.index)),
            _ => None,
        }
    }

    /// The final survivor of `g` when direct calls to it go elsewhere.
    fn call_target(&self, g: FuncId) -> Option<FuncId> {
        let f = final_target(&self.merged, g);
        (f != g).then_some(f)
    }

    /// The function whose code `g` uses: `g` itself, or, through merged functions (a chain
    /// of survivors merged in turn), the first that is not merged away. Through a fold into a
    /// shared body (another signature) only `through_folds`.
    fn code_of(&self, mut g: FuncId, through_folds: bool) -> FuncId {
        // (Each step goes to a survivor: the chain is no longer than the module.)
        for _ in 0..=self.merged.capacity() {
            match (self.state.get(g), self.merged.get(g).copied().flatten()) {
                (Some(State::Merged), Some(m)) if through_folds || m.kind != MergeKind::Folded => {
                    g = m.into
                }
                _ => break,
            }
        }
        g
    }

    /// Compile the pending functions: lift them, run the passes over them, compile what is
    /// left. A `last` flush (an object file's `finish`) is followed by no other: what it
    /// compiles is not indexed for later batches. With `fetch_locals`, the host may fetch a
    /// local function (a JIT), so one folded into a shared body keeps a thunk of its own.
    ///
    /// A function that fails to compile fails alone: the rest of the batch is compiled, the
    /// failed functions are undefined again, and the error ([`FunctionError`]) names them all.
    fn flush(
        &mut self,
        inner: &mut dyn Module,
        config: &MergeConfig,
        last: bool,
        fetch_locals: bool,
    ) -> ModuleResult<()> {
        if self.pending.is_empty() && self.late_data.is_empty() {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut self.pending);
        // Code compiled now refers by name to the functions no batch has defined yet: each
        // keeps code under its name when it comes, as one whose address is taken does.
        for g in std::mem::take(&mut self.undefined_callees) {
            if self.state[g] == State::Declared {
                self.taken[g] = true;
            }
        }
        self.begin_batch(inner.isa(), last);
        // (Lifting records the merges of functions equal to one compiled unlifted before.)
        let merges_before = self.pass_state.merges.len();
        let stage = |name: &str| {
            if let Some(hook) = &config.debug.on_stage {
                (hook.0)(name);
            }
        };
        stage("passes");
        let plan = self.plan_lift(inner, config, last, &pending);
        if self.all_lone(&plan) && self.compile_threads(config.threads, &pending, 0) == 1 {
            // The short path: nothing to lift, merge or freeze.
            stage("compile");
            let failed = self.flush_lone(inner, last, plan, &mut pending);
            return self.end_flush(pending, failed);
        }
        let lifted = self.lift_batch(inner, config, plan, &mut pending);
        let made = match self.passes(inner, config, (last, fetch_locals), &lifted, merges_before) {
            Ok(made) => made,
            Err(e) => {
                // A fault of Mergelift's own (a pass, or the inner module refusing a shared
                // body): the LIR can no longer be trusted.
                let e = FunctionError::of_batch(inner, &pending, e);
                self.poisoned = Some(e.to_string());
                return Err(e.into());
            }
        };
        stage("compile");
        let failed = self.compile_batch(inner, config, &mut pending, &lifted, made);
        self.freeze_batch(config, &pending, lifted, last);
        self.end_flush(pending, failed)
    }

    /// After a flush: its room kept for the next, and its failures reported.
    fn end_flush(
        &mut self,
        mut pending: Vec<(FuncId, ir::Function)>,
        failed: Option<FunctionError>,
    ) -> ModuleResult<()> {
        self.stats.add(midend::Counter::Flushes, 1);
        pending.clear();
        self.pending = pending;
        match failed {
            None => Ok(()),
            Some(e) => Err(e.into()),
        }
    }

    /// Before a batch: the time spent verifying at define goes to the stats, and the passes
    /// learn what the target allows and whether later batches follow.
    fn begin_batch(&mut self, isa: &dyn TargetIsa, last: bool) {
        let verify_time = std::mem::take(&mut self.verify_time);
        if verify_time > Duration::ZERO {
            self.stats.add_time("verify", verify_time);
        }
        self.pass_state.allow_tail_calls = tail_calls_allowed(isa);
        self.pass_state.incremental = !last;
    }

    /// The last stage: what was compiled never changes again; later batches merge into it,
    /// by the fingerprints taken here and by the index of what was left unlifted.
    fn freeze_batch(
        &mut self,
        config: &MergeConfig,
        pending: &[(FuncId, ir::Function)],
        lifted: lift::Lifted,
        last: bool,
    ) {
        let open = self.pass_state.open_function_ids(&self.lir);
        let rekeyed =
            midend::passes::merge::freeze(&mut self.lir, &mut self.pass_state, &open, !last);
        self.stats
            .add(midend::Counter::MergeRekeyed, rekeyed as u64);
        self.index_batch(pending, lifted, last);
        let stand_ins = std::mem::take(&mut self.pass_state.similar_frozen);
        if !config.debug.keep_lir && !last {
            // Later batches merge into these by the fingerprints just taken, and join their
            // families by what `merge-similar` kept: the bodies are no longer needed.
            for &lid in open.iter().chain(&stand_ins) {
                self.lir.functions[lid].drop_body();
            }
        }
    }
}

const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Core>();
};
