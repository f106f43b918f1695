//! Local value numbering throughput, in LIR instructions per second: a generated module and
//! every module of the wasm corpus (when present).
//!
//! `cargo bench --bench lvn`

mod common;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use midend::passes::lvn::{LocalValueNumbering, LvnStats};

fn lvn_throughput(c: &mut Criterion) {
    let mut g = c.benchmark_group("lvn");
    g.sample_size(20);
    let mut inputs = vec![(
        "generated_10k".to_string(),
        common::generated_module(10_000, 0.5),
    )];
    for (name, funcs) in common::wasm_corpus() {
        let m = jit_driver::lift_functions(funcs.iter(), &mut Default::default()).unwrap();
        inputs.push((name, m));
    }
    for (name, module) in inputs {
        g.throughput(Throughput::Elements(module.inst_count() as u64));
        g.bench_function(name, |b| {
            b.iter_batched(
                || module.clone(),
                |mut m| {
                    let mut lvn = LocalValueNumbering::default();
                    let mut st = LvnStats::default();
                    lvn.run_module(&mut m, &mut Default::default(), &mut st);
                    // Returned, so dropping the module is not timed.
                    (m, st)
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, lvn_throughput);
criterion_main!(benches);
