//! MergeFunctions scaling: generated template-heavy modules of 1k, 10k and 100k functions,
//! half of them duplicates (about 28 CLIF instructions, 4.4 blocks, 0.8 calls per function).
//! Throughput is per input function. Group `merge` runs the pass as the pipeline does (the
//! hashing walk of modules of 2048 functions or more on all cores); group `merge_1_thread`
//! runs every step on one thread.
//!
//! `cargo bench --bench merge`

mod common;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use midend::passes::merge::{merge_functions_with, MergeOptions};

fn merge_scaling(c: &mut Criterion) {
    let modules: Vec<_> = [1_000usize, 10_000, 100_000]
        .into_iter()
        .map(|n| (n, common::generated_module(n, 0.5)))
        .collect();
    for (group, opts) in [
        ("merge", MergeOptions::default()),
        ("merge_1_thread", MergeOptions { threads: 1 }),
    ] {
        let mut g = c.benchmark_group(group);
        g.sample_size(10);
        for (n, module) in &modules {
            g.throughput(Throughput::Elements(*n as u64));
            g.bench_function(format!("{n}_functions_50pct_dups"), |b| {
                b.iter_batched(
                    || module.clone(),
                    |mut m| {
                        let r = merge_functions_with(&mut m, &mut Default::default(), opts);
                        // Returned, so dropping the module is not timed.
                        (m, r)
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        g.finish();
    }
}

criterion_group!(benches, merge_scaling);
criterion_main!(benches);
