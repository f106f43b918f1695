//! Compiling on several threads: Cranelift's `Context::compile` needs only the ISA, so the
//! functions of a flush are compiled on worker threads and their machine code defined in the
//! inner module afterwards (`define_function_bytes`), in order, on the caller's thread.

use super::panic_text;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir;
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::Context;
use cranelift_module::{FuncId, ModuleError, ModuleReloc};

/// A function compiled on a worker: its context (holding the compiled code), the code's
/// alignment, and its relocations as the module wants them.
pub(crate) struct Compiled {
    pub ctx: Context,
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
                    share
                        .into_iter()
                        .map(|(k, id, f)| (k, id, compile_one(isa, id, f)))
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

fn compile_one(isa: &dyn TargetIsa, id: FuncId, func: ir::Function) -> Result<Compiled, Failure> {
    let mut ctx = Context::for_function(func);
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
            Ok(Compiled {
                ctx,
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
