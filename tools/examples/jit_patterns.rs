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
//! `--every N` finalizes every N definitions instead (the REPL patterns' default is 1).
//! `--phases` also prints `MergeModule`'s time in each phase (`MergeModule::stats`, every
//! function's). `--plain` runs cranelift-jit alone; `--verifier` sets Cranelift's `enable_verifier` (default
//! on, Cranelift's default); `--threads` is `MergeConfig::threads`: `1` is `Threads::None`,
//! `default` the default. Prints the µs per function of the timed part (wall and this thread's
//! CPU) and the number of functions timed. Instructions: run it under `valgrind
//! --tool=callgrind --toggle-collect='*jit_patterns::measured*'` and divide the total by that
//! number.
//!
//! `cargo run --release -p mergelift-tools --example jit_patterns -- repl-unique 3000`

use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
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
         [--plain] [--verifier on|off] [--opt none|speed] [--threads 1|default] [--every N]"
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

/// Declare every function, then define and finalize them `w.batch` at a time; the part after
/// the first `w.warm` functions is `measured`. Also returns the code bytes the steps'
/// contexts hold right after each define (a plain module's: it compiles at define).
fn run<M: Module>(mut m: M, finalize: impl Fn(&mut M), w: &Work) -> ((f64, f64), M, usize) {
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
        m.define_function(id, &mut ctx).unwrap();
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
    let mut it = args[1..].iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--plain" => plain = true,
            "--phases" => phases = true,
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
    let config = MergeConfig {
        threads: match threads {
            "1" => Threads::None,
            "default" => MergeConfig::default().threads,
            _ => usage(),
        },
        ..Default::default()
    };
    let jit = JITModule::new(jit_builder(isa, &[]));
    let (us, cpu, bytes) = if plain {
        let ((us, cpu), _, bytes) = run(jit, |m| m.finalize_definitions().unwrap(), &w);
        (us, cpu, bytes)
    } else {
        let ((us, cpu), m, _) = run(
            MergeModule::with_config(jit, config),
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
        "{pattern} {} verifier={} opt={opt} threads={threads}: {us:.1} us per function \
         ({cpu:.1} us on the CPU), {} functions timed, {bytes} code bytes",
        if plain { "plain" } else { "merge" },
        if verifier { "on" } else { "off" },
        w.funcs.len() - w.warm,
    );
}
