//! MergeFunctions scaling: generated template-heavy modules of 1k, 10k and 100k functions,
//! half of them duplicates (about 28 CLIF instructions, 4.4 blocks, 0.8 calls per function).
//! Throughput is per input function.
//!
//! `cargo bench --bench merge`

mod common;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mergelift::midend::passes::merge::merge_functions;

fn merge_scaling(c: &mut Criterion) {
    let mut g = c.benchmark_group("merge");
    g.sample_size(10);
    for n in [1_000usize, 10_000, 100_000] {
        let module = common::generated_module(n, 0.5);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_function(format!("{n}_functions_50pct_dups"), |b| {
            b.iter_batched(
                || module.clone(),
                |mut m| {
                    let r = merge_functions(&mut m);
                    // Returned, so dropping the module is not timed.
                    (m, r)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, merge_scaling);
criterion_main!(benches);
