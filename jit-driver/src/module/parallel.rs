//! Compiling on several threads: Cranelift's `Context::compile` needs only the ISA, so the
//! functions of a flush are compiled on worker threads and their machine code defined in the
//! inner module afterwards (`define_function_bytes`), in order, on the caller's thread.

use super::panic_text;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir;
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::Context;
use cranelift_module::{FuncId, ModuleError, ModuleReloc};

/// A function compiled on a worker: its machine code, the code's alignment, its relocations
/// as the module wants them, and, when asked for (`keep_contexts`), the context that compiled
/// it (otherwise a worker reuses one context for all its functions: allocating and keeping a
/// context per function made two threads fight over the allocator and page faults).
pub(crate) struct Compiled {
    pub ctx: Option<Context>,
    pub code: Vec<u8>,
    pub alignment: u64,
    pub relocs: Vec<ModuleReloc>,
}

/// Why a function did not compile: the module's error, or a panic's message.
pub(crate) enum Failure {
    Error(ModuleError, Box<ir::Function>),
    Panic(String),
}

/// Compile `jobs` on `threads` threads; results in the order of `jobs`.
pub(crate) fn compile_all(
    isa: &dyn TargetIsa,
    jobs: Vec<(FuncId, ir::Function)>,
    threads: usize,
    keep_contexts: bool,
) -> Vec<(FuncId, Result<Compiled, Failure>)> {
    let n = jobs.len();
    let ids: Vec<FuncId> = jobs.iter().map(|j| j.0).collect();
    let threads = threads.clamp(1, n.max(1));
    // Interleaved shares: neighbours (often alike in size) go to different threads.
    let mut shares: Vec<Vec<(usize, FuncId, ir::Function)>> =
        (0..threads).map(|_| Vec::new()).collect();
    for (k, (id, f)) in jobs.into_iter().enumerate() {
        shares[k % threads].push((k, id, f));
    }
    let mut out: Vec<Option<(FuncId, Result<Compiled, Failure>)>> = (0..n).map(|_| None).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                s.spawn(move || {
                    let mut ctx = Context::new();
                    share
                        .into_iter()
                        .map(|(k, id, f)| (k, id, compile_one(isa, id, f, &mut ctx, keep_contexts)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            // A worker's panics are caught per function; should the thread die anyway, its
            // functions are reported below, never silently left uncompiled.
            if let Ok(done) = h.join() {
                for (k, id, r) in done {
                    out[k] = Some((id, r));
                }
            }
        }
    });
    out.into_iter()
        .zip(ids)
        .map(|(r, id)| {
            r.unwrap_or_else(|| (id, Err(Failure::Panic("a compile thread died".into()))))
        })
        .collect()
}

fn compile_one(
    isa: &dyn TargetIsa,
    id: FuncId,
    func: ir::Function,
    reused: &mut Context,
    keep: bool,
) -> Result<Compiled, Failure> {
    let mut own;
    let ctx = if keep {
        own = Context::for_function(func);
        &mut own
    } else {
        reused.clear();
        reused.func = func;
        reused
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ctx.compile(isa, &mut ControlPlane::default())
            .map(|c| c.buffer.alignment as u64)
            .map_err(|e| ModuleError::Compilation(e.inner))
    }));
    match r {
        Ok(Ok(alignment)) => {
            let code = ctx.compiled_code().expect("compiled");
            let relocs = code
                .buffer
                .relocs()
                .iter()
                .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, id))
                .collect();
            let code = code.code_buffer().to_vec();
            Ok(Compiled {
                ctx: keep.then(|| std::mem::replace(ctx, Context::new())),
                code,
                alignment,
                relocs,
            })
        }
        Ok(Err(e)) => Err(Failure::Error(
            e,
            Box::new(std::mem::replace(&mut ctx.func, ir::Function::new())),
        )),
        Err(p) => Err(Failure::Panic(panic_text(&p))),
    }
}

/// Plain Cranelift, no Mergelift: compile `funcs` and define them in `module`, on `threads`
/// threads (1: on the caller's thread with `Module::define_function`; more: compiled on
/// workers and defined in order with `define_function_bytes`, as [`MergeModule`] does with
/// [`MergeConfig::threads`]). The baseline `mergelift size` measures against, at the same
/// thread count. Returns the code bytes of each function, in order; an error gives the
/// function and a message naming it (by its declared name) and saying why Cranelift refused
/// or panicked.
///
/// [`MergeModule`]: super::MergeModule
/// [`MergeConfig::threads`]: super::MergeConfig::threads
pub fn define_plain(
    module: &mut dyn cranelift_module::Module,
    funcs: Vec<(FuncId, ir::Function)>,
    threads: usize,
) -> Result<Vec<usize>, (FuncId, String)> {
    let name = |m: &dyn cranelift_module::Module, id: FuncId| {
        m.declarations()
            .get_function_decl(id)
            .linkage_name(id)
            .into_owned()
    };
    // `why` follows "Cranelift cannot compile it".
    let refused = |m: &dyn cranelift_module::Module, id: FuncId, why: String| {
        let msg = format!("function {}: Cranelift cannot compile it{why}", name(m, id));
        Err((id, msg))
    };
    let mut bytes = Vec::with_capacity(funcs.len());
    if threads <= 1 || funcs.len() <= 1 {
        let mut ctx = Context::new();
        for (id, f) in funcs {
            ctx.clear();
            ctx.func = f;
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                module.define_function(id, &mut ctx)
            }));
            match r {
                Ok(Ok(())) => bytes.push(ctx.compiled_code().map_or(0, |c| c.code_buffer().len())),
                Ok(Err(e)) => {
                    let why = format!(": {}", super::error_text(&e, Some(&ctx.func)));
                    return refused(module, id, why);
                }
                Err(p) => {
                    return refused(module, id, format!(" (it panicked: {})", panic_text(&p)))
                }
            }
        }
        return Ok(bytes);
    }
    for (id, r) in compile_all(module.isa(), funcs, threads, false) {
        let c = match r {
            Ok(c) => c,
            Err(Failure::Error(e, f)) => {
                return refused(module, id, format!(": {}", super::error_text(&e, Some(&f))))
            }
            Err(Failure::Panic(p)) => return refused(module, id, format!(" (it panicked: {p})")),
        };
        module
            .define_function_bytes(id, c.alignment, &c.code, &c.relocs)
            .map_err(|e| (id, format!("function {}: {e:#}", name(module, id))))?;
        bytes.push(c.code.len());
    }
    Ok(bytes)
}
