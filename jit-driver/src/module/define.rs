//! How compiled code reaches the inner module, the books a flush keeps while it compiles, and
//! compiling a function for it.
//!
//! The plain module compiles in `define_function`, and Cranelift's verifier (when the ISA's
//! `enable_verifier` is on) checks the function at the start of its compile, again at the start
//! of `optimize`, and after each of its own passes. `MergeModule` verified each function at
//! define already, so where it may define code itself it compiles a function it did not change
//! with the same ISA but `enable_verifier` off, and then verifies the result once: what
//! Cranelift's own passes made of it, as the plain compile's last check does. A function a pass
//! rewrote is Mergelift's output: it is compiled with the inner module's ISA, so the verifier
//! runs on it as the ISA says.
//!
//! Code compiled here is handed to the inner module with `define_function_bytes`, which for a
//! `JITModule` (and for an object module whose builder writes no unwind information) records
//! what `define_function` does, except the exception table of a function with `try_call`: such
//! a function is always compiled by the inner module's own `define_function`. For any other
//! module the flush compiles through `define_function` only, on the caller's thread.

use super::error::{backend, panic_text};
use super::{Core, State};
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir;
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{CodegenError, Context};
use cranelift_entity::packed_option::PackedOption;
use cranelift_module::{FuncId, Module, ModuleError, ModuleReloc};
use midend::lir;
use rustc_hash::FxHashSet;
use std::time::Duration;

/// The books of stage 3 of a flush.
pub(super) struct Compiling<'a> {
    pub(super) lid_at: &'a [PackedOption<lir::FuncId>],
    /// Positions compiled from their input whatever their LIR says (merged into a function
    /// that failed).
    pub(super) from_input: Vec<bool>,
    /// Threads to compile on.
    pub(super) threads: usize,
    /// The functions that failed, with the error (none: a function of Mergelift's own, a
    /// shared body, which only its members miss) and the function as compiled.
    pub(super) failed: Vec<(FuncId, Option<ModuleError>, Option<ir::Function>)>,
    pub(super) is_failed: FxHashSet<FuncId>,
    /// The functions the passes made (shared bodies), not the host's.
    pub(super) ours: FxHashSet<FuncId>,
    /// (function compiled, module function it refers to), for every job.
    pub(super) refs: Vec<(FuncId, FuncId)>,
    pub(super) lower_time: Duration,
    pub(super) compile_time: Duration,
}

impl Compiling<'_> {
    pub(super) fn fail(&mut self, id: FuncId, e: ModuleError, func: Option<ir::Function>) {
        self.is_failed.insert(id);
        self.failed.push((id, Some(e), func));
    }

    pub(super) fn fail_quietly(&mut self, id: FuncId) {
        self.is_failed.insert(id);
        self.failed.push((id, None, None));
    }

    /// Does `func` refer to a function that failed?
    pub(super) fn refers_to_failed(&self, func: &ir::Function) -> bool {
        !self.failed.is_empty() && user_funcs(func).any(|g| self.is_failed.contains(&g))
    }
}

/// The module functions `func` refers to (calls, addresses).
pub(super) fn user_funcs(func: &ir::Function) -> impl Iterator<Item = FuncId> + '_ {
    func.params
        .user_named_funcs()
        .values()
        .filter(|u| u.namespace == 0)
        .map(|u| FuncId::from_u32(u.index))
}

/// How the code of a flush may reach the inner module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Definer {
    /// Only through its `define_function`, on the caller's thread (what else the module
    /// records there is not known).
    Exact,
    /// Also as bytes compiled here, on any thread (`define_function_bytes` records everything
    /// `define_function` would, but for exception tables).
    Bytes,
}

impl Definer {
    /// How code may reach `inner`.
    pub(crate) fn of<M: cranelift_module::Module + 'static>(inner: &M) -> Definer {
        let any: &dyn std::any::Any = inner;
        #[cfg(feature = "jit")]
        if any.is::<cranelift_jit::JITModule>() {
            return Definer::Bytes;
        }
        let _ = any;
        Definer::Exact
    }
}

/// Does `inner` give a merged function's name its survivor's code? An `ObjectModule` does
/// (`MergeModule::finish` makes alias symbols); a JIT resolves no alias.
pub(crate) fn makes_aliases<M: cranelift_module::Module + 'static>(inner: &M) -> bool {
    let any: &dyn std::any::Any = inner;
    #[cfg(feature = "object")]
    if any.is::<cranelift_object::ObjectModule>() {
        return true;
    }
    let _ = any;
    false
}

/// A function to compile, and whether Cranelift's verifier accepted it as it is (verified at
/// define, and changed since only in which function a call calls, of the same signature).
pub(crate) struct Job {
    pub id: FuncId,
    pub func: ir::Function,
    pub verified: bool,
}

impl Job {
    /// Must it go through the inner module's `define_function`? (Only that records a
    /// `try_call`'s exception table.)
    pub(crate) fn needs_define(&self) -> bool {
        !self.func.dfg.exception_tables.is_empty()
    }
}

/// `isa` with `enable_verifier` off (`None`: it is off already, or the ISA cannot be built
/// again from its settings, which leaves every function to the verifying ISA).
pub(crate) fn quiet_isa(isa: &dyn TargetIsa) -> Option<OwnedTargetIsa> {
    if !isa.flags().enable_verifier() {
        return None;
    }
    let mut shared = settings::builder();
    for v in isa.flags().iter() {
        let value = if v.name == "enable_verifier" {
            "false".to_string()
        } else {
            v.value_string()
        };
        shared.set(v.name, &value).ok()?;
    }
    let mut b = cranelift_codegen::isa::lookup(isa.triple().clone()).ok()?;
    for v in isa.isa_flags() {
        b.set(v.name, &v.value_string()).ok()?;
    }
    let quiet = b.finish(settings::Flags::new(shared)).ok()?;
    // The same target in every setting but the verifier, or not used at all.
    let strings = |vs: Vec<settings::Value>| -> Vec<(&str, String)> {
        vs.iter().map(|v| (v.name, v.value_string())).collect()
    };
    let same = strings(quiet.isa_flags()) == strings(isa.isa_flags())
        && (quiet.flags().iter().zip(isa.flags().iter()))
            .all(|(a, b)| a.name == "enable_verifier" || a.value_string() == b.value_string());
    same.then_some(quiet)
}

/// The ISAs a flush compiles with: the inner module's, and the same without the verifier.
#[derive(Clone, Copy)]
pub(crate) struct Isas<'a> {
    pub inner: &'a dyn TargetIsa,
    pub quiet: Option<&'a dyn TargetIsa>,
    /// Compile with disassembly (the host asked for it: `Context::set_disasm`).
    pub disasm: bool,
}

/// Code compiled here for the inner module: its bytes, alignment and relocations.
pub(crate) struct Code {
    pub bytes: Vec<u8>,
    pub alignment: u64,
    pub relocs: Vec<ModuleReloc>,
}

/// Why a function did not compile: what the plain module's `define_function` would have
/// returned (with the function, to show where), or a panic's message.
pub(crate) enum Failure {
    Error(ModuleError, Box<ir::Function>),
    Panic(String),
}

/// Compile `job`'s function in `ctx` for the inner module (a verified one without the
/// redundant verifier runs, then checked once), and take its code. `ctx` keeps the compiled
/// code, for the `on_compiled` hook.
pub(crate) fn compile(isas: Isas, ctx: &mut Context, job: Job) -> (FuncId, Result<Code, Failure>) {
    let Job { id, func, verified } = job;
    ctx.clear();
    ctx.func = func;
    ctx.set_disasm(isas.disasm);
    let quiet = isas.quiet.filter(|_| verified);
    let isa = quiet.unwrap_or(isas.inner);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let alignment = ctx
            .compile(isa, &mut ControlPlane::default())
            .map_err(|e| e.inner)?
            .buffer
            .alignment;
        if quiet.is_some() {
            // What Cranelift's own passes made of it, checked as the plain compile's last
            // verifier run checks it.
            ctx.verify(isas.inner).map_err(CodegenError::Verifier)?;
        }
        Ok::<_, CodegenError>(alignment)
    }));
    let alignment = match r {
        Ok(Ok(a)) => u64::from(a),
        Ok(Err(e)) => {
            let func = std::mem::replace(&mut ctx.func, ir::Function::new());
            return (
                id,
                Err(Failure::Error(ModuleError::Compilation(e), Box::new(func))),
            );
        }
        Err(p) => return (id, Err(Failure::Panic(panic_text(&p)))),
    };
    let compiled = ctx.compiled_code().expect("compiled");
    let relocs = (compiled.buffer.relocs().iter())
        .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, id))
        .collect();
    let code = Code {
        bytes: compiled.code_buffer().to_vec(),
        alignment,
        relocs,
    };
    (id, Ok(code))
}

impl Core {
    /// Define code compiled here as `id` in the inner module; `ctx` (when kept) holds it, for
    /// the hook.
    pub(super) fn define_code(
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
        // (The hook sees the host's ids: a shared body, Mergelift's own, it does not see.)
        if let (Some(h), Some(ctx), Some(hid)) = (&mut self.hook, ctx, self.host.host(id)) {
            h(hid, ctx);
        }
    }

    pub(super) fn fail_with(c: &mut Compiling, id: FuncId, f: Failure) {
        match f {
            Failure::Error(e, func) => c.fail(id, e, Some(*func)),
            Failure::Panic(msg) => c.fail(id, backend(format!("Cranelift panicked: {msg}")), None),
        }
    }

    /// Record that `id` was compiled to `bytes` bytes of machine code.
    pub(super) fn note_compiled(&mut self, id: FuncId, bytes: usize) {
        self.code_bytes[id] = bytes as u32;
        self.stats.add(midend::Counter::CodeBytes, bytes as u64);
        self.stats.add(midend::Counter::Compiled, 1);
        self.state[id] = State::Compiled;
    }

    /// Compile `job` into the inner module on this thread; a failure (a panic inside Cranelift
    /// included) goes to `c`. A function Cranelift's verifier accepted already is compiled
    /// here without the verifier's reruns and defined as bytes, where bytes are defined as
    /// `define_function` would ([`Definer::Bytes`]); any other through `define_function`.
    pub(super) fn compile(&mut self, inner: &mut dyn Module, job: Job, c: &mut Compiling) {
        let id = job.id;
        let quiet = self.quiet.as_deref();
        if self.definer == Definer::Bytes && job.verified && quiet.is_some() && !job.needs_define()
        {
            let isas = Isas {
                inner: inner.isa(),
                quiet,
                disasm: self.disasm,
            };
            let mut ctx = std::mem::replace(&mut self.ctx, Context::new());
            let (_, r) = compile(isas, &mut ctx, job);
            match r {
                Ok(code) => self.define_code(inner, id, code, Some(&ctx), c),
                Err(f) => Self::fail_with(c, id, f),
            }
            self.ctx = ctx;
            return;
        }
        self.ctx.clear();
        self.ctx.func = job.func;
        self.ctx.set_disasm(self.disasm);
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
        if let (Some(h), Some(hid)) = (&mut self.hook, self.host.host(id)) {
            h(hid, &self.ctx);
        }
    }
}
