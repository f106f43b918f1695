//! `MergeModule<M>`: a `cranelift_module::Module` that merges and value-numbers the functions
//! defined in it before handing them to the module it wraps (a `JITModule`, an
//! `ObjectModule`, or any other).
//!
//! Declarations go straight to the inner module, so ids are the inner module's own.
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

mod config;
mod define;
mod input_index;
#[cfg(feature = "jit")]
mod jit;
#[cfg(feature = "object")]
mod object;
mod parallel;
mod skip;
#[cfg(all(test, feature = "jit"))]
mod stages;
mod thunk;

pub use config::{AddressPolicy, MergeConfig, Threads};
pub use parallel::define_plain;

use crate::lift::{lift_function_with, LiftContext};
use crate::lower::{lower_function_with, special_name, LowerContext, NameResolver};
use crate::opmap::parse_user_name;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::{self, InstBuilder, InstructionData};
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::{CodegenError, Context};
use cranelift_entity::packed_option::PackedOption;
use cranelift_entity::SecondaryMap;
use cranelift_module::{
    DataDescription, DataId, FuncId, Linkage, Module, ModuleDeclarations, ModuleError, ModuleReloc,
    ModuleRelocTarget, ModuleResult,
};
use define::{Code, Definer, Failure, Isas, Job};
use midend::lir;
use midend::passes::aligned::HotFunctions;
use midend::state::{Edit, ExtraArg, MergeKind, MergedBy};
use midend::{PassKind, PassManager, PassOptions, PassState, Stats};
use rustc_hash::{FxHashMap, FxHashSet};
use std::time::{Duration, Instant};

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

/// A Cranelift module that merges equal functions and value-numbers the rest before they reach
/// the module it wraps. See the [module documentation](self).
pub struct MergeModule<M: Module> {
    inner: M,
    config: MergeConfig,
    core: Core,
}

/// The state that does not depend on the inner module's type.
struct Core {
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
    printer: input_index::Printer,
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
    print: input_index::Print,
    prints: input_index::Prints,
}

/// The smallest flush, in Cranelift instructions, that `Threads::Available` compiles on more
/// than the caller's thread.
const PARALLEL_MIN_INSTS: usize = 1000;

fn backend(msg: String) -> ModuleError {
    ModuleError::Backend(anyhow::anyhow!(msg))
}

/// The functions of a flush that failed to compile (after `define_function` returned `Ok`):
/// every failure that shows at `finalize_definitions`, `finish` or `flush` is a
/// `ModuleError::Backend` holding one, whatever the build profile:
///
/// ```
/// # use cranelift_module::ModuleError;
/// # fn report(e: ModuleError) {
/// if let ModuleError::Backend(b) = &e {
///     if let Some(f) = b.downcast_ref::<jit_driver::FunctionError>() {
///         for failed in &f.failures {
///             eprintln!("{} ({}): {}", failed.function, failed.id, failed.error);
///         }
///     }
/// }
/// # }
/// ```
///
/// The other functions of the batch were compiled; the failed ones are undefined again and
/// can be defined anew.
#[derive(Debug)]
pub struct FunctionError {
    /// Each function that failed, in the order they were compiled.
    pub failures: Vec<FailedFunction>,
}

/// One function that failed to compile.
#[derive(Debug)]
pub struct FailedFunction {
    /// Its id in the module.
    pub id: FuncId,
    /// Its name (`linkage_name`).
    pub function: String,
    /// What the inner module or Cranelift said: what the plain module would have returned
    /// from `define_function` (a Cranelift panic becomes `ModuleError::Backend`).
    pub error: ModuleError,
    /// The error as text, with verifier findings shown against the function's instructions.
    detail: String,
}

impl FunctionError {
    /// Every function of `batch` failed with `e` (a fault of Mergelift's own).
    fn of_batch(inner: &dyn Module, batch: &[(FuncId, ir::Function)], e: ModuleError) -> Self {
        let detail = error_text(&e, None);
        FunctionError {
            failures: batch
                .iter()
                .map(|(id, _)| FailedFunction {
                    id: *id,
                    function: Core::name(inner, *id),
                    error: backend(detail.clone()),
                    detail: detail.clone(),
                })
                .collect(),
        }
    }

    /// `e`, said of function `id`, named `name` (whose IR `func` shows where, if given).
    pub(crate) fn one(
        id: FuncId,
        name: String,
        e: ModuleError,
        func: Option<&ir::Function>,
    ) -> Self {
        let detail = error_text(&e, func);
        FunctionError {
            failures: vec![FailedFunction {
                id,
                function: name,
                error: e,
                detail,
            }],
        }
    }
}

impl std::fmt::Display for FailedFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "function {}: {}", self.function, self.detail)
    }
}

impl std::fmt::Display for FunctionError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match &self.failures[..] {
            [one] => write!(f, "{one}"),
            all => {
                write!(f, "{} functions failed to compile", all.len())?;
                for one in all {
                    write!(f, "\n{one}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for FunctionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.failures
            .first()
            .map(|f| &f.error as &(dyn std::error::Error + 'static))
    }
}

impl From<FunctionError> for ModuleError {
    fn from(e: FunctionError) -> Self {
        ModuleError::Backend(anyhow::Error::new(e))
    }
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
        Self::with_definer(inner, config, definer)
    }
}

impl<M: Module> MergeModule<M> {
    fn with_definer(inner: M, config: MergeConfig, definer: Definer) -> Self {
        let verified_at_define = config.verify_input || inner.isa().flags().enable_verifier();
        let declared = (
            inner.declarations().get_functions().count() as u32,
            inner.declarations().get_data_objects().count() as u32,
        );
        let mut m = MergeModule {
            inner,
            config,
            core: Core {
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
                ctx: Context::new(),
                fctx: LowerContext::new(),
                poisoned: None,
                passed_through: Vec::new(),
                unresolved: Vec::new(),
                late_data: Vec::new(),
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
                printer: Default::default(),
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

    /// The wrapped module.
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
    pub fn merged_into(&self, id: FuncId) -> Option<FuncId> {
        self.core.merged.get(id).copied().flatten().map(|m| m.into)
    }

    /// How a merged function was folded into its survivor.
    pub fn merge_kind(&self, id: FuncId) -> Option<MergeKind> {
        self.core.merged.get(id).copied().flatten().map(|m| m.kind)
    }

    /// Which pass merged a function away.
    pub fn merged_by(&self, id: FuncId) -> Option<MergedBy> {
        self.core.merged.get(id).copied().flatten().map(|m| m.by)
    }

    /// Every merged function with its survivor and kind, in id order.
    pub fn merges(&self) -> impl Iterator<Item = (FuncId, FuncId, MergeKind)> + '_ {
        self.core
            .merged
            .iter()
            .filter_map(|(g, m)| m.map(|m| (g, m.into, m.kind)))
    }

    /// Statistics of every flush so far: counters (`functions_in`, `merged`, `compiled`,
    /// `compiled_from_input`, `lowered`, `code_bytes`, and each pass's own) and phase times
    /// (`lift`, each pass, `lower`, `compile`, `verify`).
    pub fn stats(&self) -> &Stats {
        &self.core.stats
    }

    /// Machine-code bytes of a function compiled by a flush (`None`: merged away, pending, or
    /// not compiled by Mergelift).
    pub fn code_bytes(&self, id: FuncId) -> Option<usize> {
        match self.core.state.get(id) {
            Some(State::Compiled) => Some(self.core.code_bytes[id] as usize),
            _ => None,
        }
    }

    /// Machine-code bytes of every function compiled so far.
    pub fn total_code_bytes(&self) -> usize {
        self.core.stats.get("code_bytes") as usize
    }

    /// Call `hook` with each function compiled into the inner module, and the context holding
    /// its compiled code, right after it is defined (what `ctx.compiled_code()` would have
    /// shown after `define_function` on the inner module).
    pub fn on_compiled(&mut self, hook: impl FnMut(FuncId, &Context) + Send + 'static) {
        self.core.hook = Some(Box::new(hook));
    }

    /// The LIR of everything lifted so far (for inspection). The bodies of compiled and
    /// merged functions are there only with [`MergeConfig::keep_lir`]; without it they are
    /// freed once compiled (the functions stay, with their names and signatures).
    pub fn lir(&self) -> &lir::Module {
        &self.core.lir
    }

    /// Is `id` defined and waiting for the next flush?
    pub fn is_pending(&self, id: FuncId) -> bool {
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
    /// lifted at all: `MergeConfig::lift_all`). Functions defined afterwards still work; they
    /// just do not merge into these. What `finish` does for an object file; for a one-shot
    /// JIT compile, call it before `finalize_definitions`.
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
        self.core
            .flush(&mut self.inner, &self.config, last, fetch_locals)
    }

    /// Functions compiled as they came, never merged, because Mergelift cannot represent
    /// them (an instruction, type or calling convention its IR lacks), with the reason. They
    /// work as with the plain module; the stats count them as `passed_through`. Only
    /// functions Mergelift lifted are here: one that no pass could merge with anything is
    /// compiled from its input without being lifted (the stats count it as `not_lifted`).
    pub fn passed_through(&self) -> impl Iterator<Item = (FuncId, &str)> + '_ {
        self.core
            .passed_through
            .iter()
            .map(|(id, why)| (*id, why.as_str()))
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

    /// Flush, then give back the inner module.
    pub fn into_inner(mut self) -> ModuleResult<M> {
        self.flush()?;
        Ok(self.inner)
    }

    fn func_name(&self, id: FuncId) -> String {
        self.inner
            .declarations()
            .get_function_decl(id)
            .linkage_name(id)
            .into_owned()
    }
}

impl<M: Module> Module for MergeModule<M> {
    fn isa(&self) -> &dyn TargetIsa {
        self.inner.isa()
    }

    fn declarations(&self) -> &ModuleDeclarations {
        self.inner.declarations()
    }

    fn get_name(&self, name: &str) -> Option<cranelift_module::FuncOrDataId> {
        self.inner.get_name(name)
    }

    fn target_config(&self) -> cranelift_codegen::isa::TargetFrontendConfig {
        self.inner.target_config()
    }

    fn make_context(&self) -> Context {
        self.inner.make_context()
    }

    fn clear_context(&self, ctx: &mut Context) {
        self.inner.clear_context(ctx)
    }

    fn make_signature(&self) -> ir::Signature {
        self.inner.make_signature()
    }

    fn clear_signature(&self, sig: &mut ir::Signature) {
        self.inner.clear_signature(sig)
    }

    fn declare_function(
        &mut self,
        name: &str,
        linkage: Linkage,
        signature: &ir::Signature,
    ) -> ModuleResult<FuncId> {
        let id = self.inner.declare_function(name, linkage, signature)?;
        self.core.declared.0 = self.core.declared.0.max(id.as_u32() + 1);
        Ok(id)
    }

    fn declare_anonymous_function(&mut self, signature: &ir::Signature) -> ModuleResult<FuncId> {
        let id = self.inner.declare_anonymous_function(signature)?;
        self.core.declared.0 = self.core.declared.0.max(id.as_u32() + 1);
        Ok(id)
    }

    fn declare_data(
        &mut self,
        name: &str,
        linkage: Linkage,
        writable: bool,
        tls: bool,
    ) -> ModuleResult<DataId> {
        let id = self.inner.declare_data(name, linkage, writable, tls)?;
        self.core.declared.1 = self.core.declared.1.max(id.as_u32() + 1);
        Ok(id)
    }

    fn declare_anonymous_data(&mut self, writable: bool, tls: bool) -> ModuleResult<DataId> {
        let id = self.inner.declare_anonymous_data(writable, tls)?;
        self.core.declared.1 = self.core.declared.1.max(id.as_u32() + 1);
        Ok(id)
    }

    fn declare_func_in_func(&mut self, func_id: FuncId, func: &mut ir::Function) -> ir::FuncRef {
        self.inner.declare_func_in_func(func_id, func)
    }

    fn declare_data_in_func(&self, data: DataId, func: &mut ir::Function) -> ir::GlobalValue {
        self.inner.declare_data_in_func(data, func)
    }

    fn declare_func_in_data(&self, func_id: FuncId, data: &mut DataDescription) -> ir::FuncRef {
        self.inner.declare_func_in_data(func_id, data)
    }

    fn declare_data_in_data(&self, data_id: DataId, data: &mut DataDescription) -> ir::GlobalValue {
        self.inner.declare_data_in_data(data_id, data)
    }

    /// Keep the function for the next flush. Unlike the inner module, this does not compile:
    /// `ctx` is left holding an empty function and no compiled code (use
    /// [`MergeModule::on_compiled`] to see the code). Defining an import, defining twice, and a
    /// body whose signature differs from the declaration are errors here, at once.
    fn define_function_with_control_plane(
        &mut self,
        func: FuncId,
        ctx: &mut Context,
        _ctrl_plane: &mut ControlPlane,
    ) -> ModuleResult<()> {
        let decl = self.inner.declarations().get_function_decl(func);
        let name = || decl.linkage_name(func).into_owned();
        if !decl.linkage.is_definable() {
            return Err(ModuleError::InvalidImportDefinition(name()));
        }
        if self.core.state[func] != State::Declared {
            return Err(ModuleError::DuplicateDefinition(name()));
        }
        if ctx.func.signature != decl.signature {
            return Err(ModuleError::IncompatibleSignature(
                name(),
                decl.signature.clone(),
                ctx.func.signature.clone(),
            ));
        }
        // Cranelift's verifier, where the plain module's compile would run it: at define.
        let isa = self.inner.isa();
        if self.config.verify_input || isa.flags().enable_verifier() {
            let t = Instant::now();
            let r = verify_caught(&ctx.func, isa);
            self.core.verify_time += t.elapsed();
            match r {
                Ok(()) => {}
                Err(VerifyFailure::Rejected(e)) => {
                    return Err(ModuleError::Compilation(CodegenError::Verifier(e)))
                }
                Err(VerifyFailure::Panicked(p)) => {
                    let e = backend(format!("Cranelift's verifier panicked: {p}"));
                    return Err(FunctionError::one(func, name(), e, None).into());
                }
            }
        }
        self.core.check_references(&self.inner, func, &ctx.func)?;
        let f = std::mem::replace(&mut ctx.func, ir::Function::new());
        self.core.state[func] = State::Pending;
        self.core.pending.push((func, f));
        Ok(())
    }

    /// Passed straight to the inner module (machine code cannot be merged).
    fn define_function_bytes(
        &mut self,
        func_id: FuncId,
        alignment: u64,
        bytes: &[u8],
        relocs: &[ModuleReloc],
    ) -> ModuleResult<()> {
        if self.core.state[func_id] != State::Declared {
            return Err(ModuleError::DuplicateDefinition(self.func_name(func_id)));
        }
        self.inner
            .define_function_bytes(func_id, alignment, bytes, relocs)?;
        self.core.state[func_id] = State::Bytes;
        Ok(())
    }

    /// Passed to the inner module at once. A function whose address the data holds keeps an
    /// address of its own (it is never merged away); an address of a function merged away
    /// before is written as its survivor's (through survivors merged in turn), except for a
    /// function folded into a shared body (another signature), which gets a thunk of its own
    /// at the next flush.
    fn define_data(&mut self, data_id: DataId, data: &DataDescription) -> ModuleResult<()> {
        let mut rewritten: Option<DataDescription> = None;
        for (fr, target) in data.function_decls.iter() {
            if let ModuleRelocTarget::User {
                namespace: 0,
                index,
            } = *target
            {
                let g = FuncId::from_u32(index);
                self.core.taken[g] = true;
                let f = self.core.code_of(g, false);
                if self.core.state[f] == State::Merged {
                    self.core.late_data.push(f);
                }
                if f != g {
                    rewritten.get_or_insert_with(|| data.clone()).function_decls[fr] =
                        ModuleRelocTarget::user(0, f.as_u32());
                }
            }
        }
        self.inner
            .define_data(data_id, rewritten.as_ref().unwrap_or(data))
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

/// LIR linkage of a module linkage (`Import` has no body and never reaches here).
fn lir_linkage(l: Linkage) -> lir::Linkage {
    match l {
        Linkage::Local => lir::Linkage::Local,
        Linkage::Preemptible => lir::Linkage::Preemptible,
        Linkage::Import => lir::Linkage::Import,
        Linkage::Hidden | Linkage::Export => lir::Linkage::Export,
    }
}

/// LIR symbols name module functions `u0:N` and data objects `u1:N`, as Cranelift prints
/// `UserExternalName`s.
fn func_symbol_name(id: FuncId) -> String {
    format!("u0:{}", id.as_u32())
}

/// Names of lowered functions: LIR symbols back to the module's ids, through merge aliases.
struct ModuleNames<'a> {
    sym_func: &'a SecondaryMap<lir::Symbol, PackedOption<FuncId>>,
}

impl ModuleNames<'_> {
    fn user(func: &mut ir::Function, namespace: u32, index: u32) -> ir::ExternalName {
        ir::ExternalName::user(
            func.declare_imported_user_function(ir::UserExternalName { namespace, index }),
        )
    }
    fn other(m: &lir::Module, func: &mut ir::Function, sym: lir::Symbol) -> ir::ExternalName {
        let name = &m.symbols[sym].name;
        if let Some(u) = parse_user_name(name) {
            return Self::user(func, u.namespace, u.index);
        }
        special_name(name).unwrap_or_else(|| ir::ExternalName::testcase(name))
    }
}

impl NameResolver for ModuleNames<'_> {
    fn function(
        &mut self,
        m: &lir::Module,
        func: &mut ir::Function,
        sym: lir::Symbol,
        _sig: ir::SigRef,
    ) -> ir::ExternalName {
        // A merged function's name means its survivor, unless it has code of its own again
        // (a late thunk: `thunk_for_address`).
        let own = m.symbols[sym].def.expand().is_some_and(|d| !m.removed[d]);
        let sym = if own { sym } else { m.resolve_alias(sym) };
        match self.sym_func.get(sym).and_then(|f| f.expand()) {
            Some(id) => Self::user(func, 0, id.as_u32()),
            None => Self::other(m, func, sym),
        }
    }
    fn data(
        &mut self,
        m: &lir::Module,
        func: &mut ir::Function,
        sym: lir::Symbol,
    ) -> ir::ExternalName {
        match self.sym_func.get(sym).and_then(|f| f.expand()) {
            // A function symbol used as data: its address in a global value.
            Some(id) => Self::user(func, 0, id.as_u32()),
            None => Self::other(m, func, sym),
        }
    }
}

/// What stage 1 of a flush made of the batch.
struct Lifted {
    /// The lifted functions, in batch order.
    batch: Vec<(FuncId, lir::FuncId)>,
    /// The LIR function of each position of the batch (none: not lifted).
    lid_at: Vec<PackedOption<lir::FuncId>>,
    /// Functions merged away by an earlier batch whose address this batch takes.
    late: Vec<FuncId>,
    /// The batch surveyed: the shape key of each position (none: every function was
    /// lifted).
    survey: skip::Survey,
    /// The prints of the positions left unlifted, to index (`skip::Plan::prints`).
    prints: input_index::Prints,
    /// The positions merged by their prints, not lifted (`Core::merge_by_print`).
    by_print: Vec<u32>,
}

/// The books of stage 3 of a flush.
struct Compiling<'a> {
    lid_at: &'a [PackedOption<lir::FuncId>],
    /// Positions compiled from their input whatever their LIR says (merged into a function
    /// that failed).
    from_input: Vec<bool>,
    /// Threads to compile on.
    threads: usize,
    /// The functions that failed, with the error (none: a function of Mergelift's own, a
    /// shared body, which only its members miss) and the function as compiled.
    failed: Vec<(FuncId, Option<ModuleError>, Option<ir::Function>)>,
    is_failed: FxHashSet<FuncId>,
    /// The functions the passes made (shared bodies), not the host's.
    ours: FxHashSet<FuncId>,
    /// (function compiled, module function it refers to), for every job.
    refs: Vec<(FuncId, FuncId)>,
    lower_time: Duration,
    compile_time: Duration,
}

impl Compiling<'_> {
    fn fail(&mut self, id: FuncId, e: ModuleError, func: Option<ir::Function>) {
        self.is_failed.insert(id);
        self.failed.push((id, Some(e), func));
    }

    fn fail_quietly(&mut self, id: FuncId) {
        self.is_failed.insert(id);
        self.failed.push((id, None, None));
    }

    /// Does `func` refer to a function that failed?
    fn refers_to_failed(&self, func: &ir::Function) -> bool {
        !self.failed.is_empty() && user_funcs(func).any(|g| self.is_failed.contains(&g))
    }
}

/// The module functions relocations refer to.
fn reloc_funcs(relocs: &[ModuleReloc]) -> impl Iterator<Item = FuncId> + '_ {
    relocs.iter().filter_map(|r| match r.name {
        ModuleRelocTarget::User {
            namespace: 0,
            index,
        } => Some(FuncId::from_u32(index)),
        _ => None,
    })
}

/// The module functions `func` refers to (calls, addresses).
fn user_funcs(func: &ir::Function) -> impl Iterator<Item = FuncId> + '_ {
    func.params
        .user_named_funcs()
        .values()
        .filter(|u| u.namespace == 0)
        .map(|u| FuncId::from_u32(u.index))
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
        let verify_time = std::mem::take(&mut self.verify_time);
        if verify_time > Duration::ZERO {
            self.stats.add_time("verify", verify_time);
        }
        self.pass_state.allow_tail_calls = tail_calls_allowed(inner.isa());
        self.pass_state.incremental = !last;
        // (Lifting records the merges of functions equal to one compiled unlifted before.)
        let merges_before = self.pass_state.merges.len();
        let lifted = self.lift_batch(inner, config, last, &mut pending);
        let hot =
            (config.hot.as_ref()).map(|h| Self::hot_in_lir(h, inner, &self.lir, &lifted.batch));
        // (A batch of which nothing was lifted gives the passes nothing to merge.)
        let passes = if lifted.batch.is_empty() {
            Ok(())
        } else {
            self.run_passes(config, (last, fetch_locals), hot, &lifted.batch)
        };
        let made = passes.and_then(|()| self.record_merges(inner, &lifted, merges_before));
        let made = match made {
            Ok(made) => made,
            Err(e) => {
                // A fault of Mergelift's own (a pass, or the inner module refusing a shared
                // body): the LIR can no longer be trusted.
                let e = FunctionError::of_batch(inner, &pending, e);
                self.poisoned = Some(e.to_string());
                return Err(e.into());
            }
        };
        let failed = self.compile_batch(inner, config, &mut pending, &lifted, made);
        // What was compiled never changes again; later batches merge into it.
        let open = self.pass_state.open_function_ids(&self.lir);
        midend::passes::merge::freeze(&mut self.lir, &mut self.pass_state, &open, !last);
        self.index_batch(&pending, lifted, last);
        if !config.keep_lir && !last {
            // Later batches merge into these by the fingerprints just taken: the bodies
            // are no longer needed.
            for &lid in &open {
                self.lir.functions[lid].drop_body();
            }
        }
        self.stats.add("flushes", 1);
        // (Its room, for the next batch.)
        pending.clear();
        self.pending = pending;
        match failed {
            None => Ok(()),
            Some(e) => Err(e.into()),
        }
    }

    /// Stage 1: lift the batch, except functions no pass could merge (`skip`) and functions
    /// the lifter cannot represent (passed through: compiled as they came, never merged).
    fn lift_batch(
        &mut self,
        inner: &dyn Module,
        config: &MergeConfig,
        last: bool,
        pending: &mut [(FuncId, ir::Function)],
    ) -> Lifted {
        let t = Instant::now();
        let skip::Plan {
            skip,
            stand_ins,
            prints,
            merged_at,
        } = self.plan_lift(inner, config, last, pending);
        // (Taken for the flush, given back by `index_batch`; empty when every function is
        // lifted.)
        let mut survey = std::mem::take(&mut self.scratch.survey);
        if skip.is_empty() {
            survey.fill(std::iter::empty());
        }
        self.lift_stand_ins(inner, config, stand_ins);
        let mut batch: Vec<(FuncId, lir::FuncId)> = Vec::with_capacity(pending.len());
        // The LIR function of each position of `pending` (none: not lifted).
        let mut lid_at: Vec<PackedOption<lir::FuncId>> = Vec::with_capacity(pending.len());
        // Positions of the functions the lifter could not represent.
        let mut passed: Vec<u32> = Vec::new();
        self.lir.functions.reserve(pending.len());
        // The input of each function stays in `pending` (moved out when compiled as is): a
        // copy of each (960 bytes, to memory not touched yet) cost a sixth of the lift of a
        // module of small functions.
        // Whether the function at a position is lifted.
        let lifted = |j: usize| !skip.get(j).copied().unwrap_or(false);
        // The symbol of a function left unlifted is a function's from the start, as its lift
        // would make it: lifted code may take its address (a symbol global value) before it
        // calls it, and a later batch's code may refer to it.
        let mut name = String::new();
        for (pos, (id, _)) in pending.iter().enumerate() {
            if !lifted(pos) {
                use std::fmt::Write as _;
                name.clear();
                let _ = write!(name, "u0:{}", id.as_u32());
                let sym = self.lir.symbol(&name, lir::SymbolKind::Function);
                self.lir.symbols[sym].kind = lir::SymbolKind::Function;
                self.sym_func[sym] = (*id).into();
            }
        }
        let mut merged_at = merged_at.into_iter().peekable();
        let mut by_print = Vec::new();
        for (pos, (id, func)) in pending.iter_mut().enumerate() {
            let id = *id;
            let decl = inner.declarations().get_function_decl(id);
            func.name = ir::UserFuncName::user(0, id.as_u32());
            if let Some((_, into)) = merged_at.next_if(|&(p, _)| p as usize == pos) {
                let lid = self.merge_by_print(id, func, decl.linkage, into);
                lid_at.push(lid.into());
                by_print.push(pos as u32);
                continue;
            }
            if !lifted(pos) {
                lid_at.push(None.into());
                continue;
            }
            let linkage = lir_linkage(decl.linkage);
            let lid = match lift_function_with(&mut self.lir, func, linkage, &mut self.lift_ctx) {
                Ok(lid) => lid,
                Err(e) => {
                    self.pass_through(id, e.to_string());
                    passed.push(pos as u32);
                    lid_at.push(None.into());
                    continue;
                }
            };
            // The function's own symbol, which lifting named `u0:N` (looked up by name only
            // if the LIR did not record it).
            let sym = match self.lir.symbol_of(lid) {
                Some(sym) => sym,
                None => self
                    .lir
                    .symbol(&func_symbol_name(id), lir::SymbolKind::Function),
            };
            debug_assert_eq!(self.lir.symbols[sym].name, func_symbol_name(id));
            if config.verify_lir {
                // The input as lifted, before any pass. Cranelift accepted the function at
                // define, so a fault here is the lifter's: the function is passed through.
                if let Err(e) =
                    midend::verifier::verify_function(&self.lir, &self.lir.functions[lid], true)
                {
                    self.pass_state.remove_function(&mut self.lir, lid);
                    self.lir.symbols[sym].def = None.into();
                    self.pass_through(id, format!("LIR verifier: {e}"));
                    passed.push(pos as u32);
                    lid_at.push(None.into());
                    continue;
                }
            }
            self.sym_func[sym] = id.into();
            self.lifted[id] = lid.into();
            if config.address_policy == AddressPolicy::Distinct && decl.linkage != Linkage::Local {
                self.lir.functions[lid].address_significant = true;
            }
            batch.push((id, lid));
            lid_at.push(lid.into());
        }
        // What a passed-through function observes of the others, surveyed as `skip` surveys
        // the functions it does not lift (when it skipped none, it surveyed none).
        if !passed.is_empty() && survey.keys.is_empty() {
            survey = skip::Survey::of(passed.iter().map(|&p| &pending[p as usize].1));
            for r in &mut survey.refs {
                r.0 = passed[r.0 as usize];
            }
            for n in &mut survey.near {
                n.0 = passed[n.0 as usize];
            }
        }
        let observed = if batch.len() < pending.len() {
            self.observe_unlifted(&lid_at, &survey)
        } else {
            Vec::new()
        };

        // Addresses taken in the new code, and stored in data: such functions keep an address
        // of their own.
        let taken = std::mem::take(&mut self.lift_ctx.taken);
        // Functions an earlier batch merged away (no code) whose address the new code takes:
        // they get code below, a thunk to their survivor.
        let mut late: Vec<FuncId> = std::mem::take(&mut self.late_data);
        late.extend(
            observed
                .into_iter()
                .filter(|&g| self.state[g] == State::Merged),
        );
        for &s in &taken {
            if let Some(g) = self.func_of(s) {
                self.taken[g] = true;
                if self.state[g] == State::Merged {
                    late.push(g);
                }
            }
        }
        self.lift_ctx.taken = taken;
        self.lift_ctx.taken.clear();
        for &(id, lid) in &batch {
            if self.taken[id] {
                self.lir.functions[lid].address_significant = true;
            }
        }
        self.stats.add_time("lift", t.elapsed());
        self.stats.add("functions_in", pending.len() as u64);
        let unlifted = pending.len() - batch.len() - passed.len();
        if unlifted > 0 {
            self.stats.add("not_lifted", unlifted as u64);
        }
        Lifted {
            batch,
            lid_at,
            late,
            survey,
            prints,
            by_print,
        }
    }

    /// Merge `id` (defined as `func`) into `into`, a function an earlier flush compiled
    /// unlifted whose print and callees `func` shares (`plan_lift` checked that it needs no
    /// address of its own), as the merge pass merges a function into a frozen one: an alias
    /// (a local one replaced), its calls redirected. Its LIR is what a merged function's is
    /// once its body is gone: a name and a signature, for a thunk should a later batch take
    /// its address. Returns it (`None`: the signature is not LIR's; then it is compiled).
    fn merge_by_print(
        &mut self,
        id: FuncId,
        func: &ir::Function,
        linkage: Linkage,
        into: FuncId,
    ) -> Option<lir::FuncId> {
        let lid = crate::lift::lift_header(
            &mut self.lir,
            func,
            lir_linkage(linkage),
            &mut self.lift_ctx,
        )
        .ok()?;
        let gs = self.lir.symbol_of(lid)?;
        let fs = (self.lir).symbol(&func_symbol_name(into), lir::SymbolKind::Function);
        self.sym_func[gs] = id.into();
        self.sym_func[fs] = into.into();
        self.lifted[id] = lid.into();
        self.pass_state.remove_function(&mut self.lir, lid);
        self.lir.symbols[gs].def = None.into();
        self.lir.aliases.insert(gs, fs);
        self.pass_state.move_external_calls(gs, fs);
        let kind = if linkage == Linkage::Local {
            MergeKind::Replaced
        } else {
            MergeKind::Aliased
        };
        self.pass_state.merges.push(midend::state::MergeRecord {
            merged: gs,
            survivor: fs,
            kind,
            by: MergedBy::Exact,
            callers_redirected: true,
        });
        self.stats.add("merged", 1);
        self.stats.add("merge.by_print", 1);
        Some(lid)
    }

    /// Lift the stand-ins of functions compiled unlifted by earlier flushes and freeze them,
    /// as their own lift and freeze would have: the passes then merge into them as into any
    /// function compiled before.
    fn lift_stand_ins(
        &mut self,
        inner: &dyn Module,
        config: &MergeConfig,
        stand_ins: Vec<(FuncId, ir::Function)>,
    ) {
        if stand_ins.is_empty() {
            return;
        }
        let mut lids = Vec::with_capacity(stand_ins.len());
        for (id, mut func) in stand_ins {
            let decl = inner.declarations().get_function_decl(id);
            func.name = ir::UserFuncName::user(0, id.as_u32());
            let linkage = lir_linkage(decl.linkage);
            // (The function it stands for is compiled; one that cannot be lifted stays as
            // it is, never merged into.)
            let Ok(lid) = lift_function_with(&mut self.lir, &func, linkage, &mut self.lift_ctx)
            else {
                continue;
            };
            let sym = match self.lir.symbol_of(lid) {
                Some(sym) => sym,
                None => (self.lir).symbol(&func_symbol_name(id), lir::SymbolKind::Function),
            };
            self.sym_func[sym] = id.into();
            self.lifted[id] = lid.into();
            if self.taken[id]
                || (config.address_policy == AddressPolicy::Distinct
                    && decl.linkage != Linkage::Local)
            {
                self.lir.functions[lid].address_significant = true;
            }
            lids.push(lid);
            self.stats.add("stand_ins", 1);
        }
        // What they take and call was recorded when the functions they stand for were
        // compiled.
        self.lift_ctx.taken.clear();
        midend::passes::merge::freeze(&mut self.lir, &mut self.pass_state, &lids, true);
        for &lid in &lids {
            self.lir.functions[lid].drop_body();
        }
    }

    /// What later batches find this one's functions by: the shape keys of the lifted ones
    /// (frozen, with their fingerprints), and the prints of those compiled unlifted.
    fn index_batch(&mut self, pending: &[(FuncId, ir::Function)], lifted: Lifted, last: bool) {
        if !last {
            let mut by_print = lifted.by_print.iter().peekable();
            for (pos, &key) in lifted.survey.keys.iter().enumerate() {
                if by_print.next_if(|&&p| p as usize == pos).is_some() {
                    continue;
                }
                if lifted.lid_at[pos].is_some() {
                    self.lifted_shapes.insert(key);
                }
            }
            for (pos, key, words, callees) in lifted.prints.iter() {
                let id = pending[pos as usize].0;
                if self.state[id] == State::Compiled {
                    self.input_index.insert(id, key, words, callees);
                }
            }
        }
        self.scratch.survey = lifted.survey;
        self.scratch.prints = lifted.prints;
    }

    /// `id` is compiled as it came, never merged: the lifter cannot represent it (`why`).
    fn pass_through(&mut self, id: FuncId, why: String) {
        self.stats.add("passed_through", 1);
        self.passed_through.push((id, why));
    }

    /// What the functions not lifted observe of the others (addresses taken, `try_call`
    /// targets, near references): marked as a lifted caller would have them. Returns the
    /// module functions whose address they observe.
    fn observe_unlifted(
        &mut self,
        lid_at: &[PackedOption<lir::FuncId>],
        survey: &skip::Survey,
    ) -> Vec<FuncId> {
        let mut observed = Vec::new();
        let unlifted = |pos: u32| lid_at[pos as usize].is_none();
        let mut near: Vec<(u32, u32, bool)> = (survey.near.iter())
            .filter(|&&(pos, ..)| unlifted(pos))
            .map(|&(_, ns, i, func)| (ns, i, func))
            .collect();
        // (A name referred to both ways is made a function.)
        near.sort_unstable_by_key(|&(ns, i, func)| (ns, i, !func));
        near.dedup_by_key(|n| (n.0, n.1));
        for &(pos, r) in &survey.refs {
            if !unlifted(pos) {
                continue;
            }
            let (skip::Reference::Observed(i) | skip::Reference::Called(i)) = r;
            if let (skip::Reference::Observed(_), true) = (r, i < self.declared.0) {
                let g = FuncId::from_u32(i);
                self.taken[g] = true;
                observed.push(g);
            }
            let Some(lid) = (i < self.declared.0)
                .then(|| self.lifted[FuncId::from_u32(i)].expand())
                .flatten()
            else {
                continue;
            };
            match r {
                skip::Reference::Observed(_) => {
                    self.lir.functions[lid].address_significant = true;
                }
                skip::Reference::Called(_) => {
                    if let Some(sym) = self.lir.symbol_of(lid) {
                        self.pass_state.external_calls[sym] += 1;
                    }
                }
            }
        }
        // Marked near as the lifter would mark them, made if no lifted code names them yet
        // (a later batch's may: it must find them near, as with this function lifted).
        for (ns, i, func) in near {
            let kind = if func {
                lir::SymbolKind::Function
            } else {
                lir::SymbolKind::Data
            };
            let sym = self.lir.symbol(&format!("u{ns}:{i}"), kind);
            self.lir.symbols[sym].colocated = true;
        }
        observed
    }

    /// The host's hot functions (`MergeConfig::hot`, which names them as they were declared)
    /// among the batch's, as the passes ask for them: by their names in LIR.
    fn hot_in_lir(
        hot: &HotFunctions,
        inner: &dyn Module,
        lir: &lir::Module,
        batch: &[(FuncId, lir::FuncId)],
    ) -> HotFunctions {
        let names: Vec<String> = (batch.iter())
            .filter(|(id, _)| hot.contains(&Self::name(inner, *id)))
            .map(|(_, lid)| lir.functions[*lid].name.to_string())
            .collect();
        HotFunctions::named(names)
    }

    /// Stage 2: the passes, over the new functions (frozen ones only survive). `hot`: the
    /// batch's hot functions, by LIR name.
    fn run_passes(
        &mut self,
        config: &MergeConfig,
        (last, fetch_locals): (bool, bool),
        hot: Option<HotFunctions>,
        batch: &[(FuncId, lir::FuncId)],
    ) -> Result<(), ModuleError> {
        let insts = |lir: &lir::Module| -> u64 {
            batch
                .iter()
                .filter(|(_, lid)| !lir.removed[*lid])
                .map(|(_, lid)| lir.functions[*lid].inst_count() as u64)
                .sum()
        };
        self.stats.add("lir_insts_in", insts(&self.lir));
        // A function merged away has no code, and without `keep_lir` its body goes at once
        // (unless this is the last batch: then the module's end frees it, and freeing it here
        // would only slow the passes).
        self.pass_state.free_removed = !config.keep_lir && !last;
        // (Made again only when `fetch_locals` changes, an object module flushed before its
        // `finish`, or for each batch's hot functions. A pass keeps only scratch buffers from
        // one run to the next.)
        if hot.is_some()
            || self
                .passes
                .as_ref()
                .is_none_or(|(named, _)| *named != fetch_locals)
        {
            let mut pm = PassManager::from_kinds_with(
                &config.passes,
                &PassOptions {
                    threads: config.threads.get(),
                    locals_named: fetch_locals,
                    hot,
                },
            );
            pm.verify = config.verify_lir;
            self.passes = Some((fetch_locals, pm));
        }
        let (_, pm) = self.passes.as_mut().expect("made above");
        pm.run(&mut self.lir, &mut self.pass_state, &mut self.stats)
            .map_err(|e| backend(e.to_string()))?;
        self.stats.add("lir_insts_out", insts(&self.lir));
        Ok(())
    }

    /// Stage 2, continued: declare the functions the passes made (shared bodies of
    /// `merge-similar`) in the inner module as local anonymous functions, record what was
    /// merged into what, and give a thunk to each function an earlier batch merged away whose
    /// address this batch takes. Returns the functions to compile besides the batch's own.
    fn record_merges(
        &mut self,
        inner: &mut dyn Module,
        lifted: &Lifted,
        merges_before: usize,
    ) -> Result<Vec<(FuncId, lir::FuncId)>, ModuleError> {
        let mut made: Vec<(FuncId, lir::FuncId)> = Vec::new();
        let first_made = lifted
            .batch
            .last()
            .map_or(0, |&(_, lid)| lid.as_u32() + 1)
            .max(self.pass_state.first_open);
        let made_ids = (first_made..self.lir.functions.len() as u32)
            .map(lir::FuncId::from_u32)
            .filter(|&lid| !self.lir.removed[lid])
            .collect::<Vec<_>>();
        for lid in made_ids {
            let sig = crate::lower::clif_signature(&self.lir.functions[lid].sig);
            let id = inner.declare_anonymous_function(&sig)?;
            self.declared.0 = self.declared.0.max(id.as_u32() + 1);
            if let Some(sym) = self.lir.symbol_of(lid) {
                self.sym_func[sym] = id.into();
            }
            self.lifted[id] = lid.into();
            made.push((id, lid));
        }
        for r in &self.pass_state.merges[merges_before..] {
            let (Some(g), Some(f)) = (self.func_of(r.merged), self.func_of(r.survivor)) else {
                continue;
            };
            self.merged[g] = Some(Merged {
                into: f,
                kind: r.kind,
                by: r.by,
                redirect: r.callers_redirected,
            });
            self.any_merged = true;
        }
        // A function merged away by an earlier batch whose address this batch takes becomes a
        // thunk to its survivor, compiled with the batch: the address exists, and is its own.
        // (A fold's thunk may take the address of another such function: a worklist.)
        let mut late = lifted.late.clone();
        while let Some(g) = late.pop() {
            if self.state[g] != State::Merged {
                continue;
            }
            let Some(lid) = self.lifted[g].expand() else {
                continue;
            };
            if !midend::passes::merge::thunk_for_address(&mut self.lir, &mut self.pass_state, lid) {
                continue;
            }
            let mut next = Vec::new();
            self.lir.functions[lid].for_each_taken_symbol(|s| next.push(s));
            late.extend(next.into_iter().filter_map(|s| self.func_of(s)));
            self.state[g] = State::Pending;
            self.taken[g] = true;
            self.stats.add("late_thunks", 1);
            made.push((g, lid));
        }
        // Survivors merged in turn (into a function of an earlier batch): point at the last.
        for &(g, _) in &lifted.batch {
            if let Some(mg) = self.merged[g] {
                if mg.redirect {
                    let last = self.call_target(mg.into).unwrap_or(mg.into);
                    self.merged[g] = Some(Merged { into: last, ..mg });
                }
            }
        }
        Ok(made)
    }

    /// The threads to compile a flush on: one, unless code may be defined as bytes; with
    /// `Threads::Available`, only for a flush of at least `PARALLEL_MIN_INSTS` instructions
    /// (below that, starting threads costs more than they save).
    fn compile_threads(
        &self,
        threads: Threads,
        pending: &[(FuncId, ir::Function)],
        made: usize,
    ) -> usize {
        if self.definer != Definer::Bytes || pending.len() + made < 2 {
            return 1;
        }
        if threads == Threads::Available {
            let insts: usize = pending.iter().map(|(_, f)| f.dfg.num_insts()).sum();
            if insts < PARALLEL_MIN_INSTS {
                return 1;
            }
        }
        threads.get()
    }

    /// Stage 3: compile. First what other functions' code stands on (the functions the passes
    /// made, and the survivors of this batch's merges), so that where one of those fails, the
    /// functions merged into it get code of their own (from their input) before any caller is
    /// compiled; then the rest. Returns the functions that failed, if any.
    fn compile_batch(
        &mut self,
        inner: &mut dyn Module,
        config: &MergeConfig,
        pending: &mut [(FuncId, ir::Function)],
        lifted: &Lifted,
        made: Vec<(FuncId, lir::FuncId)>,
    ) -> Option<FunctionError> {
        let mut c = Compiling {
            lid_at: &lifted.lid_at,
            from_input: vec![false; pending.len()],
            // Decided once for the flush, so that the code does not depend on its rounds.
            threads: self.compile_threads(config.threads, pending, made.len()),
            failed: Vec::new(),
            is_failed: FxHashSet::default(),
            ours: FxHashSet::default(),
            refs: Vec::new(),
            lower_time: Duration::ZERO,
            compile_time: Duration::ZERO,
        };
        self.compile_made(inner, made, &mut c);
        // The survivors of this batch's merges, then the rest.
        let survivors: FxHashSet<FuncId> = (pending.iter())
            .filter_map(|(g, _)| self.merged[*g].map(|m| m.into))
            .collect();
        let (first, rest): (Vec<usize>, Vec<usize>) =
            (0..pending.len()).partition(|&pos| survivors.contains(&pending[pos].0));
        let mut jobs = Vec::with_capacity(first.len());
        for pos in self.unmerge_members_of_failed(pending, &mut c) {
            c.from_input[pos] = true;
        }
        for &pos in &first {
            if let Some(job) = self.job(inner, config, pending, pos, &mut c) {
                jobs.push(job);
            }
        }
        self.compile_jobs(inner, jobs, &mut c);
        // Then the rest; and, while functions fail, what was merged into them.
        // (Each round compiles only functions not seen before, or merged away when seen and
        // unmerged since: every function is compiled at most twice, so the rounds end.)
        let mut seen = vec![false; pending.len()];
        for &pos in &first {
            seen[pos] = true;
        }
        let mut round = rest;
        loop {
            for pos in self.unmerge_members_of_failed(pending, &mut c) {
                c.from_input[pos] = true;
                if seen[pos] {
                    round.push(pos);
                }
            }
            if round.is_empty() {
                break;
            }
            let mut jobs = Vec::with_capacity(round.len());
            for pos in std::mem::take(&mut round) {
                seen[pos] = true;
                if let Some(job) = self.job(inner, config, pending, pos, &mut c) {
                    jobs.push(job);
                }
            }
            self.compile_jobs(inner, jobs, &mut c);
        }
        self.stats.add_time("lower", c.lower_time);
        self.stats.add_time("compile", c.compile_time);
        if c.failed.is_empty() {
            return None;
        }
        // Failed functions that code compiled now refers to: the inner module cannot be
        // finalized before they are defined again, and then they must keep code of their own.
        for &(from, to) in &c.refs {
            if c.is_failed.contains(&to)
                && !c.is_failed.contains(&from)
                && !self.unresolved.contains(&to)
            {
                self.unresolved.push(to);
                self.taken[to] = true;
            }
        }
        let mut failures = Vec::new();
        for (id, error, func) in c.failed {
            self.undefine(id);
            if let (Some(error), false) = (error, c.ours.contains(&id)) {
                let detail = error_text(&error, func.as_ref());
                failures.push(FailedFunction {
                    id,
                    function: Self::name(inner, id),
                    error,
                    detail,
                });
            }
        }
        (!failures.is_empty()).then_some(FunctionError { failures })
    }

    /// Compile the functions the passes made (shared bodies, and thunks for addresses taken
    /// late), lowered from LIR, before anything that stands on them. One that refers to
    /// another is compiled after it (in rounds, by Kahn's order over their references; a
    /// cycle goes in one round), and not at all when that one failed.
    fn compile_made(
        &mut self,
        inner: &mut dyn Module,
        made: Vec<(FuncId, lir::FuncId)>,
        c: &mut Compiling,
    ) {
        let config_fe = inner.isa().frontend_config();
        let mut funcs: Vec<(FuncId, Option<ir::Function>)> = Vec::with_capacity(made.len());
        for (id, lid) in made {
            let t = Instant::now();
            let mut names = ModuleNames {
                sym_func: &self.sym_func,
            };
            let f = &self.lir.functions[lid];
            let lowered = lower_function_with(&self.lir, f, &mut names, config_fe, &mut self.fctx);
            c.lower_time += t.elapsed();
            // A shared body is Mergelift's own, not the host's: its failure is not reported
            // (what was merged into it gets code of its own).
            if self.state[id] != State::Pending {
                c.ours.insert(id);
            }
            match lowered {
                Ok(mut func) => {
                    func.name = ir::UserFuncName::user(0, id.as_u32());
                    self.stats.add("lowered", 1);
                    funcs.push((id, Some(func)));
                }
                Err(e) if !c.ours.contains(&id) => c.fail(id, backend(e.to_string()), None),
                Err(_) => c.fail_quietly(id),
            }
        }
        let index: FxHashMap<FuncId, usize> = (funcs.iter().enumerate())
            .map(|(k, (id, _))| (*id, k))
            .collect();
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); funcs.len()];
        let mut waits = vec![0u32; funcs.len()];
        for (k, (_, func)) in funcs.iter().enumerate() {
            for g in user_funcs(func.as_ref().expect("lowered")) {
                if let Some(&j) = index.get(&g).filter(|&&j| j != k) {
                    users[j].push(k);
                    waits[k] += 1;
                }
            }
        }
        let mut level: Vec<usize> = (0..funcs.len()).filter(|&k| waits[k] == 0).collect();
        let mut left = funcs.len();
        while left > 0 {
            if level.is_empty() {
                level = (0..funcs.len()).filter(|&k| funcs[k].1.is_some()).collect();
            }
            let mut jobs = Vec::with_capacity(level.len());
            for &k in &level {
                let (id, func) = (funcs[k].0, funcs[k].1.take().expect("once"));
                if !c.refers_to_failed(&func) {
                    jobs.push(Job {
                        id,
                        func,
                        verified: false,
                    });
                } else if c.ours.contains(&id) {
                    c.fail_quietly(id);
                } else {
                    let e = "its thunk refers to a function that failed to compile";
                    c.fail(id, backend(e.into()), None);
                }
            }
            left -= level.len();
            self.compile_jobs(inner, jobs, c);
            let mut next = Vec::new();
            for &k in &level {
                for &u in &users[k] {
                    waits[u] -= 1;
                    if waits[u] == 0 && funcs[u].1.is_some() {
                        next.push(u);
                    }
                }
            }
            level = next;
        }
    }

    /// The job that compiles the function at `pos` of the batch, if it needs one: none for a
    /// function merged away, or one whose code was defined already (a native thunk).
    fn job(
        &mut self,
        inner: &mut dyn Module,
        config: &MergeConfig,
        pending: &mut [(FuncId, ir::Function)],
        pos: usize,
        c: &mut Compiling,
    ) -> Option<Job> {
        let id = pending[pos].0;
        // For a lifted function compiled as defined: whether a pass rewrote its calls.
        let mut pass_rewrote = None;
        if let (Some(lid), false) = (c.lid_at[pos].expand(), c.from_input[pos]) {
            if self.lir.removed[lid] {
                // Merged away: no code (its LIR is its survivor's, which is compiled).
                self.state[id] = State::Merged;
                return None;
            }
            let f = &self.lir.functions[lid];
            let edit = self.pass_state.edit(lid);
            if edit == Edit::Modified && config.native_thunks && !config.lower_all {
                let sym_func = &self.sym_func;
                let mut target = |s: lir::Symbol| {
                    let id = sym_func.get(s).and_then(|f| f.expand())?;
                    Some(ModuleRelocTarget::user(0, id.as_u32()))
                };
                let native = thunk::native_thunk(&self.lir, f, inner.isa(), &mut target);
                // (Not when it would jump to a function that failed: then it is compiled from
                // its input below.)
                let native =
                    native.filter(|t| !reloc_funcs(&t.relocs).any(|g| c.is_failed.contains(&g)));
                if let Some(t) = native {
                    let t0 = Instant::now();
                    let r = inner.define_function_bytes(id, thunk::ALIGNMENT, &t.bytes, &t.relocs);
                    c.compile_time += t0.elapsed();
                    match r {
                        Ok(()) => {
                            self.note_compiled(id, t.bytes.len());
                            self.stats.add("native_thunks", 1);
                            c.refs.extend(reloc_funcs(&t.relocs).map(|g| (id, g)));
                        }
                        Err(e) => c.fail(id, e, None),
                    }
                    return None;
                }
            }
            if edit == Edit::Modified || config.lower_all {
                let t = Instant::now();
                let mut names = ModuleNames {
                    sym_func: &self.sym_func,
                };
                let lowered = lower_function_with(
                    &self.lir,
                    f,
                    &mut names,
                    inner.isa().frontend_config(),
                    &mut self.fctx,
                );
                c.lower_time += t.elapsed();
                match lowered {
                    // Code that calls a function that failed is compiled from its input
                    // instead, where calls go to the functions merged into the failed one.
                    Ok(func) if !c.refers_to_failed(&func) => {
                        let mut func = func;
                        func.name = ir::UserFuncName::user(0, id.as_u32());
                        self.stats.add("lowered", 1);
                        return Some(Job {
                            id,
                            func,
                            verified: false,
                        });
                    }
                    // A function the lowerer cannot represent is compiled from its input:
                    // every pass keeps a function's behaviour, so that is the same function.
                    Ok(_) | Err(_) => {}
                }
            } else {
                pass_rewrote = Some(edit == Edit::CallsRewritten);
            }
        }
        // Compiled as defined (no pass changed it, it was not lifted, or its lowered form
        // cannot be used), its calls redirected. Each position is compiled once: what is left
        // behind is an empty function.
        let mut func = std::mem::replace(&mut pending[pos].1, ir::Function::new());
        let t = Instant::now();
        let mut names = ModuleNames {
            sym_func: &self.sym_func,
        };
        let rewritten = self.redirect_calls(&mut func, &mut names);
        c.lower_time += t.elapsed();
        self.stats.add("compiled_from_input", 1);
        if pass_rewrote.unwrap_or(rewritten) {
            self.stats.add("calls_rewritten_in_input", 1);
        }
        // Verified at define, unless calls were rewritten to pass extra arguments (moving a
        // call to a survivor of the same signature changes nothing the verifier checks).
        let verified = self.verified_at_define && !rewritten;
        Some(Job { id, func, verified })
    }

    /// Compile `jobs` into the inner module, on `c.threads` threads; failures go to `c`.
    fn compile_jobs(&mut self, inner: &mut dyn Module, jobs: Vec<Job>, c: &mut Compiling) {
        for j in &jobs {
            c.refs.extend(user_funcs(&j.func).map(|g| (j.id, g)));
        }
        let t = Instant::now();
        if c.threads > 1 && jobs.len() > 1 {
            self.compile_parallel(inner, jobs, c.threads, c);
        } else {
            for job in jobs {
                self.compile(inner, job, c);
            }
        }
        c.compile_time += t.elapsed();
    }

    /// The batch functions merged into a function that failed, at their positions: each gets
    /// code of its own, from its input, and calls to it call it again.
    fn unmerge_members_of_failed(
        &mut self,
        pending: &[(FuncId, ir::Function)],
        c: &mut Compiling,
    ) -> Vec<usize> {
        let mut members = Vec::new();
        if c.failed.is_empty() {
            return members;
        }
        for (pos, (g, _)) in pending.iter().enumerate() {
            let Some(m) = self.merged[*g] else { continue };
            if !c.is_failed.contains(&m.into) || c.from_input[pos] {
                continue;
            }
            self.merged[*g] = None;
            self.state[*g] = State::Pending;
            if let Some(sym) = self.lifted[*g].expand().and_then(|l| self.lir.symbol_of(l)) {
                self.pass_state.remove_call_rewrite(sym);
                self.lir.aliases.remove(&sym);
            }
            members.push(pos);
        }
        members
    }

    /// `id` failed to compile: it is undefined again (it may be defined anew), and nothing
    /// later merges into it.
    fn undefine(&mut self, id: FuncId) {
        self.state[id] = State::Declared;
        self.merged[id] = None;
        if let Some(lid) = self.lifted[id].take() {
            if let Some(sym) = self.lir.symbol_of(lid) {
                self.lir.symbols[sym].def = None.into();
                self.lir.aliases.remove(&sym);
            }
            if !self.lir.removed[lid] {
                self.pass_state.remove_function(&mut self.lir, lid);
            }
        }
    }

    /// Which functions of `pending` to lift (`skip::Plan`). None is left unlifted unless every
    /// pass merges functions (a per-function pass would change functions on their own), and
    /// neither `lift_all`, `lower_all` nor `keep_lir` asks for the LIR of every function.
    /// Otherwise a function is lifted when another of the batch has its shape key (the passes
    /// might merge the two), when a function lifted by an earlier flush has it (it might equal
    /// that frozen function), or when its print equals that of a function an earlier flush
    /// left unlifted (then a copy of it is lifted and frozen in that function's place: a
    /// stand-in). A function left unlifted by a flush that is not the last keeps its print,
    /// for later flushes to find it by.
    fn plan_lift(
        &mut self,
        inner: &dyn Module,
        config: &MergeConfig,
        last: bool,
        pending: &[(FuncId, ir::Function)],
    ) -> skip::Plan {
        let merging_only = config
            .passes
            .iter()
            .all(|p| matches!(p, PassKind::Merge | PassKind::MergeSimilar));
        let mut plan = skip::Plan {
            prints: std::mem::take(&mut self.scratch.prints),
            ..Default::default()
        };
        plan.prints.clear();
        if !merging_only || config.lift_all || config.lower_all || config.keep_lir {
            return plan;
        }
        let survey = &mut self.scratch.survey;
        survey.fill(pending.iter().map(|(_, f)| f));
        // How many functions have each key, up to two.
        let count = &mut self.scratch.count;
        count.clear();
        for &k in &survey.keys {
            let c = count.entry(k).or_insert(0);
            *c = (*c + 1).min(2);
        }
        plan.skip.reserve(pending.len());
        let print = &mut self.scratch.print;
        // The module functions whose address the batch observes (made when first needed).
        let mut observed: Option<FxHashSet<u32>> = None;
        for (pos, (id, func)) in pending.iter().enumerate() {
            let key = survey.keys[pos];
            // A function of this shape was left unlifted before: is this one equal to it?
            let (mut printed, mut found) = (false, false);
            if self.input_index.has_shape(key) {
                printed = self.printer.print(func, print);
                if printed {
                    // Equal, callees and all: merged into it as the merge pass would, where
                    // that makes it an alias (and nothing needs its body).
                    let decls = inner.declarations();
                    let linkage = decls.get_function_decl(*id).linkage;
                    let observed = observed.get_or_insert_with(|| {
                        (survey.refs.iter())
                            .filter_map(|&(_, r)| match r {
                                skip::Reference::Observed(i) => Some(i),
                                skip::Reference::Called(_) => None,
                            })
                            .collect()
                    });
                    let own_address = self.taken[*id]
                        || observed.contains(&id.as_u32())
                        || linkage == Linkage::Preemptible
                        || (config.address_policy == AddressPolicy::Distinct
                            && linkage != Linkage::Local);
                    let same = |callees: &[u32]| {
                        (print.callees.iter().zip(callees)).all(|(&a, &b)| {
                            // (`u32::MAX`: not a module function, spelt out in the words.)
                            let fin = |c: u32| match c {
                                u32::MAX => c,
                                c => final_target(&self.merged, FuncId::from_u32(c)).as_u32(),
                            };
                            fin(a) == fin(b)
                        })
                    };
                    let into = (!own_address)
                        .then(|| {
                            (self.input_index.equal(key, print).into_iter())
                                .find(|&(f, callees)| {
                                    self.state[f] == State::Compiled
                                        && decls.get_function_decl(f).linkage
                                            != Linkage::Preemptible
                                        && *id != f
                                        && same(callees)
                                })
                                .map(|(f, _)| f)
                        })
                        .flatten();
                    if let Some(f) = into {
                        plan.merged_at.push((pos as u32, f));
                        plan.skip.push(true);
                        continue;
                    }
                    for (f, callees) in self.input_index.take_equal(key, print) {
                        let stand_in = input_index::with_callees(func, &callees);
                        plan.stand_ins.push((f, stand_in));
                        found = true;
                    }
                }
            }
            let lift = found || count[&key] > 1 || self.lifted_shapes.contains(&key);
            if lift || last {
                plan.skip.push(!lift);
                continue;
            }
            // Left unlifted, and later flushes must be able to find it: by its print (a
            // function without one is lifted).
            if !printed && !self.printer.print(func, print) {
                plan.skip.push(false);
                continue;
            }
            plan.skip.push(true);
            plan.prints.push(pos as u32, key, print);
        }
        plan
    }

    /// References the inner module could not link: a `colocated` (near) reference to an
    /// imported function or data object, which a JIT places anywhere in the address space.
    fn check_references(
        &self,
        inner: &dyn Module,
        id: FuncId,
        func: &ir::Function,
    ) -> ModuleResult<()> {
        let decls = inner.declarations();
        let user = |r: ir::UserExternalNameRef| func.params.user_named_funcs().get(r).cloned();
        let bad = |what: &str, name: String| {
            let e = backend(format!(
                "refers to the imported {what} {name} as `colocated` (a near reference), but \
                 an import may be anywhere in memory: declare the reference without \
                 `colocated` (Module::declare_func_in_func does)"
            ));
            Err(FunctionError::one(id, Self::name(inner, id), e, None).into())
        };
        for (_, ext) in func.dfg.ext_funcs.iter() {
            if let (true, ir::ExternalName::User(r)) = (ext.colocated, &ext.name) {
                if let Some(u) = user(*r) {
                    if u.namespace == 0 && u.index < self.declared.0 {
                        let f = FuncId::from_u32(u.index);
                        let d = decls.get_function_decl(f);
                        if d.linkage == Linkage::Import {
                            return bad("function", d.linkage_name(f).into_owned());
                        }
                    }
                }
            }
        }
        for (_, gv) in func.global_values.iter() {
            if let ir::GlobalValueData::Symbol {
                name: ir::ExternalName::User(r),
                colocated: true,
                ..
            } = gv
            {
                if let Some(u) = user(*r) {
                    if u.namespace == 1 && u.index < self.declared.1 {
                        let d = DataId::from_u32(u.index);
                        let dd = decls.get_data_decl(d);
                        if dd.linkage == Linkage::Import {
                            return bad("data object", dd.linkage_name(d).into_owned());
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Point the direct calls of an unchanged function at the survivors of merged callees
    /// (a merged function may have no code at all). Addresses (`func_addr`) stay: a function
    /// whose address is taken keeps code of its own. Calls (`call`, `return_call`) of a
    /// function merged by `merge-similar` call its shared body with its extra arguments, as
    /// the pass rewrote them in LIR (`PassState::call_rewrites`; a member behaves as its
    /// shared body called with its extras, so the rewrite is exact wherever it is made).
    ///
    /// Returns whether some call was rewritten for `merge-similar`.
    fn redirect_calls(&self, func: &mut ir::Function, names: &mut ModuleNames) -> bool {
        if !self.any_merged && self.pass_state.call_rewrites.is_empty() {
            return false;
        }
        let mut moves: Vec<(ir::FuncRef, FuncId)> = Vec::new();
        let mut rewrites: Vec<(ir::FuncRef, lir::Symbol)> = Vec::new();
        for (fr, ext) in func.dfg.ext_funcs.iter() {
            if let ir::ExternalName::User(r) = ext.name {
                let u = func.params.user_named_funcs()[r].clone();
                if u.namespace == 0 {
                    let g = FuncId::from_u32(u.index);
                    let t = self.call_target(g);
                    if let Some(f) = t {
                        moves.push((fr, f));
                    }
                    // The callee's LIR symbol, if merge-similar rewrote its calls.
                    let rewritten = self
                        .lifted
                        .get(t.unwrap_or(g))
                        .and_then(|l| l.expand())
                        .and_then(|l| self.lir.symbol_of(l))
                        .filter(|&sym| self.pass_state.call_rewrite(sym).is_some());
                    if let Some(sym) = rewritten {
                        rewrites.push((fr, sym));
                    }
                }
            }
        }
        if moves.is_empty() && rewrites.is_empty() {
            return false;
        }
        let mut rewritten = false;
        // A new function reference per redirected one, used by calls only.
        let mut new_ref: SecondaryMap<ir::FuncRef, PackedOption<ir::FuncRef>> = SecondaryMap::new();
        for (fr, f) in moves {
            let ext = func.dfg.ext_funcs[fr].clone();
            let nr = func.declare_imported_user_function(ir::UserExternalName {
                namespace: 0,
                index: f.as_u32(),
            });
            new_ref[fr] = func
                .import_function(ir::ExtFuncData {
                    name: ir::ExternalName::user(nr),
                    ..ext
                })
                .into();
        }
        // The shared body's reference, per rewritten callee reference, made when first used.
        let mut rewrite_for: SecondaryMap<
            ir::FuncRef,
            Option<(lir::Symbol, PackedOption<ir::FuncRef>)>,
        > = SecondaryMap::new();
        for (fr, sym) in rewrites {
            rewrite_for[fr] = Some((sym, None.into()));
        }
        let blocks: Vec<ir::Block> = func.layout.blocks().collect();
        let mut extra_vals: Vec<ir::Value> = Vec::new();
        for b in blocks {
            let mut cur = func.layout.first_inst(b);
            while let Some(i) = cur {
                cur = func.layout.next_inst(i);
                match func.dfg.insts[i] {
                    InstructionData::Call {
                        opcode: ir::Opcode::Call | ir::Opcode::ReturnCall,
                        func_ref,
                        ..
                    } if rewrite_for[func_ref].is_some() => {
                        let (sym, shared) = rewrite_for[func_ref].expect("checked");
                        let rw = self.pass_state.call_rewrite(sym).expect("checked");
                        let shared = match shared.expand() {
                            Some(s) => s,
                            None => {
                                let s = self.import_symbol(func, names, rw.shared, &rw.sig);
                                rewrite_for[func_ref] = Some((sym, s.into()));
                                s
                            }
                        };
                        extra_vals.clear();
                        let mut pos = FuncCursor::new(func).at_inst(i);
                        for e in &rw.extras {
                            let v = match e {
                                ExtraArg::Const(ty, lir::Operand::Int(x)) => {
                                    pos.ins().iconst(crate::opmap::clif_type(*ty), *x)
                                }
                                ExtraArg::Const(_, lir::Operand::F32(x)) => {
                                    pos.ins().f32const(ir::immediates::Ieee32::with_bits(*x))
                                }
                                ExtraArg::Const(_, lir::Operand::F64(x)) => {
                                    pos.ins().f64const(ir::immediates::Ieee64::with_bits(*x))
                                }
                                ExtraArg::Const(_, other) => {
                                    unreachable!("merge-similar passes constants only: {other:?}")
                                }
                                ExtraArg::FuncAddr(s, sig) => {
                                    let fr = self.import_symbol(pos.func, names, *s, sig);
                                    pos.ins().func_addr(ir::types::I64, fr)
                                }
                            };
                            extra_vals.push(v);
                        }
                        let dfg = &mut func.dfg;
                        if let InstructionData::Call { func_ref, args, .. } = &mut dfg.insts[i] {
                            *func_ref = shared;
                            args.extend(extra_vals.iter().copied(), &mut dfg.value_lists);
                            rewritten = true;
                        }
                    }
                    _ => {
                        if let InstructionData::Call { func_ref, .. }
                        | InstructionData::TryCall { func_ref, .. } = &mut func.dfg.insts[i]
                        {
                            if let Some(n) = new_ref[*func_ref].expand() {
                                *func_ref = n;
                            }
                        }
                    }
                }
            }
        }
        rewritten
    }

    /// A reference in `func` to the function of LIR symbol `sym`, with signature `sig`, named
    /// and placed (`colocated`) as lowering names it.
    fn import_symbol(
        &self,
        func: &mut ir::Function,
        names: &mut ModuleNames,
        sym: lir::Symbol,
        sig: &lir::Signature,
    ) -> ir::FuncRef {
        let signature = func.import_signature(crate::lower::clif_signature(sig));
        let name = names.function(&self.lir, func, sym, signature);
        func.import_function(ir::ExtFuncData {
            name,
            signature,
            colocated: self.lir.symbols[sym].colocated,
            patchable: false,
        })
    }

    /// Compile `jobs` on `threads` threads and define their code in the inner module, in order
    /// (`define_function_bytes`; a function that only `define_function` records fully, one
    /// with `try_call`, is compiled there, on this thread, in its turn).
    fn compile_parallel(
        &mut self,
        inner: &mut dyn Module,
        jobs: Vec<Job>,
        threads: usize,
        c: &mut Compiling,
    ) {
        // Which jobs stay on this thread, in the order of the jobs.
        let on_caller: Vec<bool> = jobs.iter().map(Job::needs_define).collect();
        let (serial, parallel): (Vec<Job>, Vec<Job>) =
            jobs.into_iter().partition(Job::needs_define);
        let isas = Isas {
            inner: inner.isa(),
            quiet: self.quiet.as_deref(),
        };
        let mut done =
            parallel::compile_all(isas, parallel, threads, self.hook.is_some()).into_iter();
        let mut serial = serial.into_iter();
        // Defined in the order of the jobs, whatever the number of threads.
        for here in on_caller {
            if here {
                let job = serial.next().expect("one per serial job");
                self.compile(inner, job, c);
                continue;
            }
            let (id, r) = done.next().expect("one per compiled job");
            match r {
                Ok(comp) => self.define_code(inner, id, comp.code, comp.ctx.as_ref(), c),
                Err(f) => Self::fail_with(c, id, f),
            }
        }
    }

    /// Define code compiled here as `id` in the inner module; `ctx` (when kept) holds it, for
    /// the hook.
    fn define_code(
        &mut self,
        inner: &mut dyn Module,
        id: FuncId,
        code: Code,
        ctx: Option<&Context>,
        c: &mut Compiling,
    ) {
        if let Err(e) = inner.define_function_bytes(id, code.alignment, &code.bytes, &code.relocs) {
            return c.fail(id, e, None);
        }
        self.note_compiled(id, code.bytes.len());
        if let (Some(h), Some(ctx)) = (&mut self.hook, ctx) {
            h(id, ctx);
        }
    }

    fn fail_with(c: &mut Compiling, id: FuncId, f: Failure) {
        match f {
            Failure::Error(e, func) => c.fail(id, e, Some(*func)),
            Failure::Panic(msg) => c.fail(id, backend(format!("Cranelift panicked: {msg}")), None),
        }
    }

    /// Record that `id` was compiled to `bytes` bytes of machine code.
    fn note_compiled(&mut self, id: FuncId, bytes: usize) {
        self.code_bytes[id] = bytes as u32;
        self.stats.add("code_bytes", bytes as u64);
        self.stats.add("compiled", 1);
        self.state[id] = State::Compiled;
    }

    /// Compile `job` into the inner module on this thread; a failure (a panic inside Cranelift
    /// included) goes to `c`. A function Cranelift's verifier accepted already is compiled
    /// here without the verifier's reruns and defined as bytes, where bytes are defined as
    /// `define_function` would ([`Definer::Bytes`]); any other through `define_function`.
    fn compile(&mut self, inner: &mut dyn Module, job: Job, c: &mut Compiling) {
        let id = job.id;
        let quiet = self.quiet.as_deref();
        if self.definer == Definer::Bytes && job.verified && quiet.is_some() && !job.needs_define()
        {
            let isas = Isas {
                inner: inner.isa(),
                quiet,
            };
            let mut ctx = std::mem::replace(&mut self.ctx, Context::new());
            let (_, r) = define::compile(isas, &mut ctx, job);
            match r {
                Ok(code) => self.define_code(inner, id, code, Some(&ctx), c),
                Err(f) => Self::fail_with(c, id, f),
            }
            self.ctx = ctx;
            return;
        }
        self.ctx.clear();
        self.ctx.func = job.func;
        let ctx = &mut self.ctx;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            inner.define_function(id, ctx)
        }));
        match r {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                let func = std::mem::replace(&mut self.ctx.func, ir::Function::new());
                return c.fail(id, e, Some(func));
            }
            Err(p) => {
                let msg = format!("Cranelift panicked: {}", panic_text(&p));
                return c.fail(id, backend(msg), None);
            }
        }
        let bytes = self
            .ctx
            .compiled_code()
            .map_or(0, |c| c.code_buffer().len());
        self.note_compiled(id, bytes);
        if let Some(h) = &mut self.hook {
            h(id, &self.ctx);
        }
    }
}

/// Can `isa` compile `return_call`? On x86-64 Cranelift needs frame pointers for it.
pub fn tail_calls_allowed(isa: &dyn TargetIsa) -> bool {
    isa.triple().architecture != target_lexicon::Architecture::X86_64
        || isa.flags().preserve_frame_pointers()
}

/// A module error as text, with the verifier's findings spelled out (against `func` when
/// given, so they show the instructions).
pub fn error_text(e: &ModuleError, func: Option<&ir::Function>) -> String {
    match e {
        ModuleError::Compilation(CodegenError::Verifier(errs)) => match func {
            Some(f) => format!(
                "Cranelift's verifier rejects it:\n{}",
                cranelift_codegen::print_errors::pretty_verifier_error(f, None, errs.clone())
            ),
            None => format!("Cranelift's verifier rejects it: {errs}"),
        },
        // `Backend` shows its whole chain of causes.
        ModuleError::Backend(b) => format!("{b:#}"),
        other => other.to_string(),
    }
}

/// Why [`verify_caught`] failed.
#[derive(Debug)]
pub enum VerifyFailure {
    /// Cranelift's verifier found these faults.
    Rejected(cranelift_codegen::verifier::VerifierErrors),
    /// The verifier panicked (it does on some malformed input), with this message.
    Panicked(String),
}

/// Cranelift's verifier on `func`, with its panics caught.
pub fn verify_caught<'a>(
    func: &ir::Function,
    fisa: impl Into<cranelift_codegen::settings::FlagsOrIsa<'a>>,
) -> Result<(), VerifyFailure> {
    let fisa = fisa.into();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        cranelift_codegen::verify_function(func, fisa)
    })) {
        Ok(r) => r.map_err(VerifyFailure::Rejected),
        Err(p) => Err(VerifyFailure::Panicked(panic_text(&p))),
    }
}

/// The message of a caught panic.
pub fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}

const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<Core>();
};
