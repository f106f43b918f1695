//! Compiling on several threads: Cranelift's `Context::compile` needs only the ISA, so the
//! functions of a flush are compiled on worker threads and their machine code defined in the
//! inner module afterwards (`define_function_bytes`), in order, on the caller's thread.

use super::define::Compiling;
use super::define::{self, Code, Failure, Isas, Job};
use super::error::panic_text;
use super::Core;
use cranelift_codegen::ir;
use cranelift_codegen::Context;
use cranelift_module::{FuncId, Module};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A function compiled on a worker: its code and, when asked for (`keep_contexts`), the
/// context that compiled it (otherwise a worker reuses one context for all its functions:
/// allocating and keeping a context per function made two threads fight over the allocator
/// and page faults).
pub(crate) struct Compiled {
    pub code: Code,
    pub ctx: Option<Context>,
}

/// Compile `jobs` on `threads` threads, the caller's among them; results in the order of
/// `jobs`. Each thread takes the next job not taken yet, so a long function does not hold up
/// the others' share.
pub(crate) fn compile_all(
    isas: Isas,
    jobs: Vec<Job>,
    threads: usize,
    keep_contexts: bool,
) -> Vec<(FuncId, Result<Compiled, Failure>)> {
    let n = jobs.len();
    let ids: Vec<FuncId> = jobs.iter().map(|j| j.id).collect();
    let jobs: Vec<Mutex<Option<Job>>> = jobs.into_iter().map(|j| Mutex::new(Some(j))).collect();
    let done: Vec<Mutex<Option<Result<Compiled, Failure>>>> =
        (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        let mut ctx = Context::new();
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(job) = jobs.get(k).and_then(|j| j.lock().unwrap().take()) else {
                break;
            };
            let mut own = keep_contexts.then(Context::new);
            let c = own.as_mut().unwrap_or(&mut ctx);
            let (_, r) = define::compile(isas, c, job);
            let r = r.map(|code| Compiled { code, ctx: own });
            *done[k].lock().unwrap() = Some(r);
        }
    };
    std::thread::scope(|s| {
        for _ in 1..threads.clamp(1, n.max(1)) {
            s.spawn(work);
        }
        // A panic outside Cranelift's compile (caught per function) ends only its thread; its
        // function is reported below, never silently left uncompiled.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    });
    (done.into_iter().zip(ids))
        .map(|(r, id)| {
            let r = r.into_inner().unwrap_or_else(|p| p.into_inner());
            (
                id,
                r.unwrap_or_else(|| Err(Failure::Panic("a compile thread died".into()))),
            )
        })
        .collect()
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
                    let why = format!(": {}", super::error::error_text(&e, Some(&ctx.func)));
                    return refused(module, id, why);
                }
                Err(p) => {
                    return refused(module, id, format!(" (it panicked: {})", panic_text(&p)))
                }
            }
        }
        return Ok(bytes);
    }
    let isas = Isas {
        inner: module.isa(),
        quiet: None,
        disasm: false,
    };
    let jobs = (funcs.into_iter())
        .map(|(id, func)| Job {
            id,
            func,
            verified: false,
        })
        .collect();
    for (id, r) in compile_all(isas, jobs, threads, false) {
        let c = match r {
            Ok(c) => c.code,
            Err(Failure::Error(e, f)) => {
                return refused(
                    module,
                    id,
                    format!(": {}", super::error::error_text(&e, Some(&f))),
                )
            }
            Err(Failure::Panic(p)) => return refused(module, id, format!(" (it panicked: {p})")),
        };
        module
            .define_function_bytes(id, c.alignment, &c.bytes, &c.relocs)
            .map_err(|e| (id, format!("function {}: {e:#}", name(module, id))))?;
        bytes.push(c.bytes.len());
    }
    Ok(bytes)
}

impl Core {
    /// Compile `jobs` on `threads` threads and define their code in the inner module, in order
    /// (`define_function_bytes`; a function that only `define_function` records fully, one
    /// with `try_call`, is compiled there, on this thread, in its turn).
    pub(super) fn compile_parallel(
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
        self.stats
            .add(midend::Counter::CompiledInParallel, parallel.len() as u64);
        let isas = Isas {
            inner: inner.isa(),
            quiet: self.quiet.as_deref(),
            disasm: self.disasm,
        };
        let mut done = compile_all(isas, parallel, threads, self.hook.is_some()).into_iter();
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
}
