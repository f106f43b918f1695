//! End to end: a plain `JITModule` compiling every function, against `MergeModule<JITModule>`
//! (lift, `merge,lvn`, compile what is left), on generated modules of 2,000 functions with 0%,
//! 50% and 80% duplicates. Opt level none.
//!
//! `cargo bench --bench end_to_end` (the 10k-function figures in BENCHMARKS.md come from
//! `mergelift size`).

mod common;

use criterion::{criterion_group, criterion_main, Criterion};
use mergelift::tools::{host_isa, OptLevel};
use mergelift::MergeConfig;
use mergelift_tools::harness::{merge_jit, plain_jit};

fn end_to_end(c: &mut Criterion) {
    let mut g = c.benchmark_group("end_to_end");
    g.sample_size(10);
    for dup in [0.0, 0.5, 0.8] {
        let funcs = common::generated_functions(2_000, dup);
        let pct = (dup * 100.0) as u32;
        g.bench_function(format!("plain_cranelift/{pct}pct_dups"), |b| {
            b.iter(|| plain_jit(host_isa(OptLevel::None).unwrap(), &funcs).unwrap())
        });
        g.bench_function(format!("mergelift/{pct}pct_dups"), |b| {
            b.iter(|| {
                merge_jit(
                    host_isa(OptLevel::None).unwrap(),
                    &funcs,
                    MergeConfig::default(),
                )
                .unwrap()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, end_to_end);
criterion_main!(benches);
