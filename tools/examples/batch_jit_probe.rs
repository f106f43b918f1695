//! A JIT that compiles a generated module in batches: every function declared first, then
//! `finalize_definitions` after each BATCH functions, in one process; prints µs per function
//! (wall and CPU). With `plain`, cranelift-jit alone (the same batches). What a runtime that
//! compiles a few functions at a time pays per function, and whether that grows with the
//! module: per-flush work proportional to the whole module would make it grow.
//!
//! `cargo run --release -p mergelift-tools --example batch_jit_probe -- FUNCTIONS BATCH [plain | PASSES]`
//! (PASSES: a comma list for `MergeModule`, e.g. `merge,lvn`; default: its default passes)

use cranelift_jit::JITModule;
use cranelift_module::Module;
use jit_driver::declare_by_name;
use jit_driver::jit_builder;
use jit_driver::{host_isa, MergeConfig, MergeModule, OptLevel};
use mergelift_tools::gen::{generate, GenOptions};
use mergelift_tools::harness::thread_cpu_us;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let batch: usize = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10)
        .max(1);
    let third = args.next();
    let plain = third.as_deref() == Some("plain");
    let config = match &third {
        Some(p) if !plain => MergeConfig::with_passes(&midend::parse_pass_list(p).unwrap()),
        _ => MergeConfig::default(),
    };
    let text = generate(&GenOptions {
        functions: n,
        seed: 1,
        ..Default::default()
    })
    .text;
    let funcs: Vec<_> = cranelift_reader::parse_functions(&text)
        .unwrap()
        .into_iter()
        .map(|f| (cranelift_module::Linkage::Export, f))
        .collect();
    let isa = host_isa(OptLevel::None).unwrap();
    macro_rules! run {
        ($m:expr) => {{
            let mut m = $m;
            let declared = declare_by_name(&mut m, funcs).unwrap();
            let t = std::time::Instant::now();
            let cpu = thread_cpu_us();
            let mut ctx = m.make_context();
            for chunk in declared.chunks(batch) {
                for (_, id, f) in chunk {
                    ctx.clear();
                    ctx.func = f.clone();
                    m.define_function(*id, &mut ctx).unwrap();
                }
                m.finalize_definitions().unwrap();
            }
            let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
            (us, (thread_cpu_us() - cpu) / n as f64)
        }};
    }
    let (us, cpu) = if plain {
        run!(JITModule::new(jit_builder(isa, &[])))
    } else {
        run!(MergeModule::with_config(
            JITModule::new(jit_builder(isa, &[])),
            config
        ))
    };
    println!(
        "{n} functions in batches of {batch}, {}: {us:.1} us per function ({cpu:.1} us on the CPU)",
        if plain { "plain" } else { "merge" }
    );
}
