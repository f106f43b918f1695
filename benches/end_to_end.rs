//! End to end: plain Cranelift compiling every function, against Mergelift's pipeline (lift,
//! merge, lvn, lower) plus Cranelift compiling what is left, on generated modules of 2,000
//! functions with 0%, 50% and 80% duplicates. Opt level none.
//!
//! `cargo bench --bench end_to_end` (the 10k-function figures in BENCHMARKS.md come from
//! `mergelift size`).

mod common;

use cranelift_codegen::Context;
use criterion::{criterion_group, criterion_main, Criterion};
use mergelift::jit_driver::jit::code_size;
use mergelift::jit_driver::{
    host_isa, lift_functions, lower_function_with, OptLevel, OriginalNames,
};
use mergelift::midend::PassManager;

fn end_to_end(c: &mut Criterion) {
    let mut g = c.benchmark_group("end_to_end");
    g.sample_size(10);
    let isa = host_isa(OptLevel::None).unwrap();
    for dup in [0.0, 0.5, 0.8] {
        let funcs = common::generated_functions(2_000, dup);
        let pct = (dup * 100.0) as u32;
        g.bench_function(format!("plain_cranelift/{pct}pct_dups"), |b| {
            let mut ctx = Context::new();
            b.iter(|| {
                funcs
                    .iter()
                    .map(|f| code_size(f.clone(), &*isa, &mut ctx).unwrap())
                    .sum::<usize>()
            })
        });
        g.bench_function(format!("mergelift/{pct}pct_dups"), |b| {
            let mut ctx = Context::new();
            let mut fctx = cranelift_frontend::FunctionBuilderContext::new();
            b.iter(|| {
                let mut m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
                PassManager::from_names("merge,lvn")
                    .unwrap()
                    .run(&mut m, &mut Default::default())
                    .unwrap();
                let mut bytes = 0;
                for (_, f) in m.live_functions() {
                    let func = lower_function_with(
                        &m,
                        f,
                        &mut OriginalNames,
                        isa.frontend_config(),
                        &mut fctx,
                    )
                    .unwrap();
                    bytes += code_size(func, &*isa, &mut ctx).unwrap();
                }
                bytes
            })
        });
    }
    g.finish();
}

criterion_group!(benches, end_to_end);
criterion_main!(benches);
