//! Lift (CLIF -> LIR) and lower (LIR -> CLIF) throughput on a generated module and the wasm
//! corpus (when present): lift in CLIF instructions per second (the input), lower in LIR
//! instructions per second (the input: instructions placed in the live functions' blocks).
//!
//! `cargo bench --bench lift_lower`

mod common;

use cranelift_codegen::ir;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use jit_driver::{lift_functions, lower_function_with, LowerContext, OriginalNames};

fn config() -> cranelift_codegen::isa::TargetFrontendConfig {
    cranelift_codegen::isa::TargetFrontendConfig {
        default_call_conv: cranelift_codegen::isa::CallConv::SystemV,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    }
}

fn lift_lower(c: &mut Criterion) {
    let mut g = c.benchmark_group("lift_lower");
    g.sample_size(10);
    let mut inputs: Vec<(String, Vec<ir::Function>)> = vec![(
        "generated_10k".into(),
        common::generated_functions(10_000, 0.5),
    )];
    inputs.extend(
        common::wasm_corpus()
            .into_iter()
            .filter(|(n, _)| n == "rust-json" || n == "gcc-loops"),
    );
    for (name, funcs) in inputs {
        let insts: usize = funcs.iter().map(|f| f.dfg.num_insts()).sum();
        g.throughput(Throughput::Elements(insts as u64));
        // The lifted module is dropped outside the timing: freeing it is not lifting (and a
        // pipeline frees it once, at its end).
        g.bench_function(format!("lift/{name}"), |b| {
            b.iter_with_large_drop(|| {
                lift_functions(funcs.iter(), &mut Default::default()).unwrap()
            })
        });
        let m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
        let lir_insts: usize = m.live_functions().map(|(_, f)| f.inst_count()).sum();
        g.throughput(Throughput::Elements(lir_insts as u64));
        g.bench_function(format!("lower/{name}"), |b| {
            let mut fctx = LowerContext::new();
            b.iter(|| {
                let mut n = 0;
                for (_, f) in m.live_functions() {
                    n += lower_function_with(&m, f, &mut OriginalNames, config(), &mut fctx)
                        .unwrap()
                        .dfg
                        .num_insts();
                }
                n
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lift_lower);
criterion_main!(benches);
