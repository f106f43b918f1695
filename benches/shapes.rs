//! Merging by the shape of the call graph (`mergelift gen --shape`): chains of equal and of
//! near-equal functions, a ring, a star, a binary tree, wide fan-in and fan-out, at 10k and
//! 100k functions. `merge` and `merge-similar` as the pipeline runs them, one thread.
//! Throughput is per input function: for every shape, the time per function at 100k should
//! be at most twice that at 10k (refinement is O(e log n) whatever the shape).
//!
//! `cargo bench --bench shapes`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mergelift_tools::gen::{generate_shape, CallShape};
use midend::{PassKind, PassManager, PassOptions, Stats};

fn shapes(c: &mut Criterion) {
    let mut g = c.benchmark_group("merge_shapes");
    g.sample_size(10);
    for (name, shape) in CallShape::ALL {
        for n in [10_000usize, 100_000] {
            let mut text = Vec::new();
            generate_shape(shape, n, &mut text).expect("writes to memory");
            let text = String::from_utf8(text).expect("UTF-8");
            let funcs = cranelift_reader::parse_functions(&text).expect("generated CLIF parses");
            let module =
                jit_driver::lift_functions(funcs.iter(), &mut Stats::default()).expect("lifts");
            drop(funcs);
            g.throughput(Throughput::Elements(n as u64));
            g.bench_function(format!("{name}_{n}"), |b| {
                b.iter_batched(
                    || module.clone(),
                    |mut m| {
                        let mut pm = PassManager::from_kinds_with(
                            &[PassKind::Merge, PassKind::MergeSimilar],
                            &PassOptions::default(),
                        );
                        pm.verify = false;
                        pm.run(&mut m, &mut Default::default(), &mut Stats::default())
                            .expect("passes run");
                        // Returned, so dropping the module is not timed.
                        m
                    },
                    BatchSize::PerIteration,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, shapes);
criterion_main!(benches);
