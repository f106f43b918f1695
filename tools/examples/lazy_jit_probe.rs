//! A lazy JIT, one function per `finalize_definitions`, timed in one process: 500 functions
//! compiled first, then N steps of a function unlike any before (`unique`) or equal to one
//! compiled before (`equal`); prints µs per step. With a third argument, plain cranelift-jit
//! instead of `MergeModule` (the same steps). The per-step figures of BENCHMARKS.md; also
//! what callgrind was run on (two step counts, the difference per step).
//!
//! `cargo run --release -p mergelift-tools --example lazy_jit_probe -- unique|equal STEPS [plain]`

use cranelift_codegen::ir::Function;
use cranelift_jit::JITModule;
use cranelift_module::{Linkage, Module};
use jit_driver::jit_builder;
use jit_driver::{host_isa, MergeModule, OptLevel};
use mergelift_tools::harness::{lazy_step_function, thread_cpu_us};

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let n: i64 = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let plain = std::env::args().nth(3).is_some();
    let isa = host_isa(OptLevel::None).unwrap();
    let fs: Vec<Function> = (0..n + 500)
        .map(|k| {
            lazy_step_function(
                isa.frontend_config(),
                if mode == "equal" && k >= 500 {
                    k % 500
                } else {
                    k
                },
            )
        })
        .collect();
    macro_rules! run {
        ($m:expr, $after:expr) => {{
            let mut m = $m;
            let mut t = std::time::Instant::now();
            let mut cpu = thread_cpu_us();
            for (k, f) in fs.iter().enumerate() {
                if k == 500 {
                    t = std::time::Instant::now();
                    cpu = thread_cpu_us();
                }
                let id = m
                    .declare_function(&format!("f{k}"), Linkage::Export, &f.signature)
                    .unwrap();
                let mut ctx = m.make_context();
                ctx.func = f.clone();
                m.define_function(id, &mut ctx).unwrap();
                m.finalize_definitions().unwrap();
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
            let cpu = (thread_cpu_us() - cpu) / n as f64;
            $after(&m);
            (us, cpu)
        }};
    }
    let (us, cpu) = if plain {
        run!(JITModule::new(jit_builder(isa, &[])), |_: &JITModule| ())
    } else {
        run!(
            // MERGELIFT_KEEP_LIR=1: keep every compiled function's LIR (memory per step).
            MergeModule::with_config(
                JITModule::new(jit_builder(isa, &[])),
                jit_driver::MergeConfig {
                    debug: jit_driver::DebugOptions {
                        keep_lir: std::env::var_os("MERGELIFT_KEEP_LIR").is_some(),
                        ..Default::default()
                    },
                    ..Default::default()
                }
            ),
            |m: &MergeModule<JITModule>| {
                // With MERGELIFT_PHASES set: each phase's mean over every step (warm ones too).
                if std::env::var_os("MERGELIFT_PHASES").is_some() {
                    let steps = (n + 500) as f64;
                    for (phase, d) in &m.stats().times {
                        println!(
                            "  {phase}: {:.2} us per step",
                            d.as_secs_f64() * 1e6 / steps
                        );
                    }
                }
            }
        )
    };
    println!(
        "{mode} {}: {us:.1} us per step ({cpu:.1} us on the CPU)",
        if plain { "plain" } else { "merge" }
    );
}
