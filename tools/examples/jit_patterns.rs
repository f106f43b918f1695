//! The JIT patterns of BENCHMARKS.md: plain cranelift-jit against `MergeModule`, per function,
//! in one process.
//!
//! ```text
//! jit_patterns PATTERN [--plain] [--verifier on|off] [--opt none|speed] [--threads 1|default]
//!   repl-unique N   500 functions compiled first, then N steps of declare, define and
//!                   finalize, each a function unlike any before (a REPL)
//!   repl-equal N    the same, each step equal to one of the first 500
//!   repl-near N     the same, each step equal to one of the first 500 but for its constant
//!                   (`merge-similar` merges it into a family)
//!   batch N B       N generated functions with no duplicates (a tenth near-duplicates),
//!                   finalized every B
//!   batch-dup N B   the same with half of them duplicates
//! ```
//!
//! `--incremental-cache miss|hit` (with the `incremental-cache` feature) runs plain
//! cranelift-jit but compiles each function with Cranelift's incremental cache
//! (`Context::compile_with_cache` on an in-memory store, then `define_function_bytes`): `miss`
//! starts from an empty store (the warm-up fills it, as a REPL's earlier inputs would), `hit`
//! from a store that already holds every function of the pattern (compiled once before, with
//! no module).
//!
//! `--emit-clif` prints the pattern's functions as CLIF instead of running it.
//! `--every N` finalizes every N definitions instead (the REPL patterns' default is 1).
//! `--phases` also prints `MergeModule`'s time in each phase (`MergeModule::stats`, every
//! function's). `--plain` runs cranelift-jit alone; `--verifier` sets Cranelift's `enable_verifier` (default
//! on, Cranelift's default); `--threads` is `MergeConfig::threads`: `1` is `Threads::None`,
//! `default` the default. Prints the µs per function of the timed part (wall and this thread's
//! CPU) and the number of functions timed. Instructions: run it under `valgrind
//! --tool=callgrind --toggle-collect='*jit_patterns::measured*'` and divide the total by that
//! number. Last, prints the process's peak RSS (`VmHWM`) and its RSS before the first define
//! (the pattern's functions, built up front, are most of it).
//!
//! `cargo run --release -p mergelift-tools --example jit_patterns -- repl-unique 3000`

use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage, Module};
use jit_driver::jit_builder;
use jit_driver::{declare_by_name, MergeConfig, MergeModule, Threads};
use mergelift_tools::gen::{generate, GenOptions};
use mergelift_tools::harness::{lazy_near_function, thread_cpu_us};

/// Functions compiled before a REPL pattern's timed steps.
const WARM: usize = 500;

fn usage() -> ! {
    eprintln!(
        "usage: jit_patterns repl-unique N | repl-equal N | repl-near N | batch N B | batch-dup N B \
         [--plain | --incremental-cache miss|hit] [--verifier on|off] [--opt none|speed] \
         [--threads 1|default] [--every N]"
    );
    std::process::exit(2)
}

fn isa(opt: &str, verifier: bool) -> OwnedTargetIsa {
    let mut fb = settings::builder();
    fb.set("opt_level", opt).unwrap_or_else(|_| usage());
    fb.set("is_pic", "false").unwrap();
    fb.set("preserve_frame_pointers", "true").unwrap();
    fb.set("enable_verifier", if verifier { "true" } else { "false" })
        .unwrap();
    cranelift_native::builder()
        .unwrap()
        .finish(settings::Flags::new(fb))
        .unwrap()
}

/// What one pattern compiles: every function with its linkage, and after how many
/// definitions each finalize comes (a REPL: 1).
struct Work {
    funcs: Vec<(String, Function)>,
    batch: usize,
    /// Functions compiled before the timed part.
    warm: usize,
}

fn work(pattern: &str, args: &[usize], cfg: cranelift_codegen::isa::TargetFrontendConfig) -> Work {
    match (pattern, args) {
        ("repl-unique" | "repl-equal" | "repl-near", &[n]) => {
            let funcs = (0..WARM + n)
                .map(|k| {
                    // (Its shape, and its constant.)
                    let (shape, c) = match pattern {
                        "repl-equal" if k >= WARM => (k % WARM, k % WARM),
                        "repl-near" if k >= WARM => (k % WARM, k),
                        _ => (k, k),
                    };
                    let f = lazy_near_function(cfg, shape as i64, c as i64);
                    (format!("f{k}"), f)
                })
                .collect();
            Work {
                funcs,
                batch: 1,
                warm: WARM,
            }
        }
        ("batch" | "batch-dup", &[n, b]) => {
            // (`mergelift gen --functions N --dup-ratio 0|0.5 --seed 1`: a tenth of the
            // functions are near-duplicates, which `merge-similar` merges.)
            let text = generate(&GenOptions {
                functions: n,
                dup_ratio: if pattern == "batch-dup" { 0.5 } else { 0.0 },
                seed: 1,
                ..Default::default()
            })
            .text;
            let funcs = cranelift_reader::parse_functions(&text)
                .unwrap()
                .into_iter()
                .map(|f| (String::new(), f))
                .collect();
            Work {
                funcs,
                batch: b.max(1),
                warm: 0,
            }
        }
        _ => usage(),
    }
}

/// Declare every function, then define (`define`) and finalize them `w.batch` at a time; the
/// part after the first `w.warm` functions is `measured`. Also returns the code bytes the
/// steps' contexts hold right after each define (a plain module's: it compiles at define).
fn run<M: Module>(
    mut m: M,
    mut define: impl FnMut(&mut M, FuncId, &mut Context),
    finalize: impl Fn(&mut M),
    w: &Work,
) -> ((f64, f64), M, usize) {
    // A generated module's functions, declared first, with their references to each other
    // made module references (`declare_by_name`).
    let declared: Vec<(FuncId, Function)> = if w.warm > 0 {
        Vec::new()
    } else {
        let funcs = w
            .funcs
            .iter()
            .map(|(_, f)| (Linkage::Export, f.clone()))
            .collect();
        declare_by_name(&mut m, funcs)
            .unwrap()
            .into_iter()
            .map(|(_, id, f)| (id, f))
            .collect()
    };
    // One context for every definition, cleared in between, as cranelift-jit-demo keeps one.
    let mut ctx = m.make_context();
    let mut bytes = 0;
    let mut step = |m: &mut M, k: usize| {
        let (id, f) = match declared.get(k) {
            Some((id, f)) => (*id, f),
            None => {
                let (name, f) = &w.funcs[k];
                let id = m
                    .declare_function(name, Linkage::Export, &f.signature)
                    .unwrap();
                (id, f)
            }
        };
        m.clear_context(&mut ctx);
        ctx.func = f.clone();
        define(m, id, &mut ctx);
        bytes += ctx.compiled_code().map_or(0, |c| c.code_buffer().len());
        if (k + 1).is_multiple_of(w.batch) || k + 1 == w.funcs.len() {
            finalize(m);
        }
    };
    for k in 0..w.warm {
        step(&mut m, k);
    }
    let t = std::time::Instant::now();
    let cpu = thread_cpu_us();
    measured(&mut m, w.warm..w.funcs.len(), step);
    let n = (w.funcs.len() - w.warm) as f64;
    let times = (
        t.elapsed().as_secs_f64() * 1e6 / n,
        (thread_cpu_us() - cpu) / n,
    );
    (times, m, bytes)
}

/// The timed part (callgrind's `--toggle-collect` names it).
#[inline(never)]
fn measured<M>(m: &mut M, steps: std::ops::Range<usize>, mut step: impl FnMut(&mut M, usize)) {
    for k in steps {
        step(m, k);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(pattern) = args.first() else { usage() };
    let mut nums = Vec::new();
    let (mut plain, mut verifier, mut opt, mut threads) = (false, true, "none", "1");
    let mut phases = false;
    let mut every = None;
    let mut emit = false;
    // (`--incremental-cache`: whether the store starts with every function.)
    let mut cache = None;
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--plain" => plain = true,
            "--incremental-cache" => {
                cache = match it.next().map(String::as_str) {
                    Some("miss") => Some(false),
                    Some("hit") => Some(true),
                    _ => usage(),
                }
            }
            "--phases" => phases = true,
            "--emit-clif" => emit = true,
            "--verifier" => verifier = it.next().map(|s| s == "on").unwrap_or_else(|| usage()),
            "--opt" => opt = it.next().map(String::as_str).unwrap_or_else(|| usage()),
            "--threads" => threads = it.next().map(String::as_str).unwrap_or_else(|| usage()),
            "--every" => {
                every = it.next().and_then(|s| s.parse::<usize>().ok());
                every.filter(|&n| n > 0).unwrap_or_else(|| usage());
            }
            n => nums.push(n.parse::<usize>().unwrap_or_else(|_| usage())),
        }
    }
    let isa = isa(opt, verifier);
    let mut w = work(pattern, &nums, isa.frontend_config());
    if let Some(n) = every {
        w.batch = n;
    }
    if emit {
        // The pattern's functions as CLIF text, for `mergelift size --batch N --ceiling`.
        for (k, (name, f)) in w.funcs.iter().enumerate() {
            let mut f = f.clone();
            if !name.is_empty() {
                f.name = cranelift_codegen::ir::UserFuncName::testcase(name);
            } else {
                f.name = cranelift_codegen::ir::UserFuncName::testcase(format!("g{k}"));
            }
            println!("{}", f.display());
        }
        return;
    }
    let config = MergeConfig {
        threads: match threads {
            "1" => Threads::None,
            "default" => MergeConfig::default().threads,
            _ => usage(),
        },
        ..Default::default()
    };
    let rss_before = status_kb("VmRSS");
    let jit = JITModule::new(jit_builder(isa.clone(), &[]));
    let mode = match cache {
        Some(true) => "cache-hit",
        Some(false) => "cache-miss",
        None if plain => "plain",
        None => "merge",
    };
    let (us, cpu, bytes) = if let Some(warm_store) = cache {
        incremental(jit, &isa, warm_store, &w)
    } else if plain {
        let ((us, cpu), _, bytes) = run(
            jit,
            |m, id, ctx| m.define_function(id, ctx).unwrap(),
            |m| m.finalize_definitions().unwrap(),
            &w,
        );
        (us, cpu, bytes)
    } else {
        let ((us, cpu), m, _) = run(
            MergeModule::with_config(jit, config),
            |m, id, ctx| m.define_function(id, ctx).unwrap(),
            |m| m.finalize_definitions().unwrap(),
            &w,
        );
        if phases {
            for (c, n) in m.stats().counters() {
                println!("  {}: {n}", c.name());
            }
            for (phase, d) in m.stats().times() {
                println!("  {phase}: {:.2} ms", d.as_secs_f64() * 1e3);
            }
        }
        (us, cpu, m.total_code_bytes())
    };
    println!(
        "{pattern} {mode} verifier={} opt={opt} threads={threads}: {us:.1} us per function \
         ({cpu:.1} us on the CPU), {} functions timed, {bytes} code bytes",
        if verifier { "on" } else { "off" },
        w.funcs.len() - w.warm,
    );
    println!(
        "peak RSS {} kB ({} kB before the first define)",
        status_kb("VmHWM").unwrap_or(0),
        rss_before.unwrap_or(0),
    );
}

/// A field of `/proc/self/status` in kB (`VmHWM`: the peak resident set size).
fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    (status.lines())
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Plain cranelift-jit with Cranelift's incremental cache (`--incremental-cache`): each define
/// compiles through `compile_with_cache` on an in-memory store, empty or (`warm_store`) filled
/// with every function of the pattern first. Prints how many defines the cache answered.
#[cfg(feature = "incremental-cache")]
fn incremental(
    jit: JITModule,
    isa: &OwnedTargetIsa,
    warm_store: bool,
    w: &Work,
) -> (f64, f64, usize) {
    use cranelift_codegen::control::ControlPlane;
    let mut store = cache::MemoryStore::default();
    if warm_store {
        let mut ctx = Context::new();
        for (_, f) in &w.funcs {
            ctx.clear();
            ctx.func = f.clone();
            let r = ctx.compile_with_cache(&**isa, &mut store, &mut ControlPlane::default());
            r.map_err(|e| e.inner).unwrap();
        }
    }
    let mut hits = 0;
    let ((us, cpu), _, bytes) = run(
        jit,
        |m, id, ctx| hits += usize::from(cache::define(m, &mut store, id, ctx)),
        |m| m.finalize_definitions().unwrap(),
        w,
    );
    println!(
        "incremental cache: {hits} of {} defines hit, {} entries",
        w.funcs.len(),
        store.len()
    );
    (us, cpu, bytes)
}

#[cfg(not(feature = "incremental-cache"))]
fn incremental(_: JITModule, _: &OwnedTargetIsa, _: bool, _: &Work) -> (f64, f64, usize) {
    eprintln!("jit_patterns: --incremental-cache needs `--features incremental-cache`");
    std::process::exit(2)
}

/// Cranelift's incremental cache (`cranelift_codegen::incremental_cache`) in memory.
#[cfg(feature = "incremental-cache")]
mod cache {
    use cranelift_codegen::control::ControlPlane;
    use cranelift_codegen::incremental_cache::CacheKvStore;
    use cranelift_codegen::Context;
    use cranelift_jit::JITModule;
    use cranelift_module::{FuncId, Module, ModuleReloc};
    use std::borrow::Cow;
    use std::collections::HashMap;

    /// Serialized compiled code by cache key (the SHA-256 of the function and the ISA).
    #[derive(Default)]
    pub struct MemoryStore(HashMap<Vec<u8>, Vec<u8>>);

    impl MemoryStore {
        pub fn len(&self) -> usize {
            self.0.len()
        }
    }

    impl CacheKvStore for MemoryStore {
        fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
            self.0.get(key).map(|v| Cow::Borrowed(v.as_slice()))
        }

        fn insert(&mut self, key: &[u8], val: Vec<u8>) {
            self.0.insert(key.to_vec(), val);
        }
    }

    /// Compile `ctx.func` through the cache and define the code as bytes, with the relocations
    /// `JITModule::define_function` would make of it. Returns whether the cache had it.
    pub fn define(
        m: &mut JITModule,
        store: &mut MemoryStore,
        id: FuncId,
        ctx: &mut Context,
    ) -> bool {
        let (code, hit) = ctx
            .compile_with_cache(m.isa(), store, &mut ControlPlane::default())
            .map_err(|e| e.inner)
            .unwrap();
        let alignment = u64::from(code.buffer.alignment);
        let code = ctx.compiled_code().expect("compiled");
        let relocs: Vec<ModuleReloc> = (code.buffer.relocs().iter())
            .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, id))
            .collect();
        m.define_function_bytes(id, alignment, code.code_buffer(), &relocs)
            .unwrap();
        hit
    }
}
