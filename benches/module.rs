//! Plain `JITModule` against `MergeModule<JITModule>`, as a JIT runtime uses them:
//!
//! - `module_batch/{plain,merge}/{0,50}pct_dups`: declare, define and finalize a generated
//!   module of 2,000 functions (0% and 50% duplicates) in one batch;
//! - `lazy_jit/{plain,merge}/{unique,equal}`: a lazy JIT, one function per
//!   `finalize_definitions`, into a module that already holds 500 compiled functions: a
//!   function unlike any compiled before (`unique`), and one equal to a compiled one
//!   (`equal`, which MergeModule merges without compiling).
//!
//! `cargo bench --bench module`. The code bytes of the batch compiles are printed once.

mod common;

use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage, Module};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use jit_driver::jit_builder;
use mergelift::tools::{host_isa, OptLevel};
use mergelift::{MergeConfig, MergeModule};
use mergelift_tools::harness::{lazy_step_function, merge_jit, plain_jit};

fn isa() -> OwnedTargetIsa {
    host_isa(OptLevel::None).unwrap()
}

fn module_batch(c: &mut Criterion) {
    let mut g = c.benchmark_group("module_batch");
    g.sample_size(10);
    for dup in [0.0, 0.5] {
        let funcs = common::generated_functions(2_000, dup);
        let pct = (dup * 100.0) as u32;
        let plain_bytes = plain_jit(isa(), &funcs).unwrap();
        let (merged_bytes, _) = merge_jit(isa(), &funcs, MergeConfig::default()).unwrap();
        println!(
            "module_batch {pct}% duplicates: code bytes plain {plain_bytes}, MergeModule {merged_bytes} ({:.2}x)",
            merged_bytes as f64 / plain_bytes as f64
        );
        g.bench_function(format!("plain/{pct}pct_dups"), |b| {
            b.iter(|| plain_jit(isa(), &funcs).unwrap())
        });
        g.bench_function(format!("merge/{pct}pct_dups"), |b| {
            b.iter(|| merge_jit(isa(), &funcs, MergeConfig::default()).unwrap())
        });
    }
    g.finish();
}

/// Define `f` as a new exported function and finalize: one step of a lazy JIT.
fn step<M: Module>(m: &mut M, finalize: impl Fn(&mut M), name: &str, f: &Function) -> FuncId {
    let id = m
        .declare_function(name, Linkage::Export, &f.signature)
        .unwrap();
    let mut ctx = m.make_context();
    ctx.func = f.clone();
    m.define_function(id, &mut ctx).unwrap();
    finalize(m);
    id
}

/// A module with `n` functions compiled one finalize at a time.
fn warm<M: Module>(mut m: M, finalize: impl Fn(&mut M), n: i64) -> M {
    for k in 0..n {
        let f = lazy_step_function(m.target_config(), k);
        step(&mut m, &finalize, &format!("warm{k}"), &f);
    }
    m
}

fn lazy_jit(c: &mut Criterion) {
    let mut g = c.benchmark_group("lazy_jit");
    g.sample_size(20);
    const WARM: i64 = 500;
    for equal in [false, true] {
        let what = if equal { "equal" } else { "unique" };
        // Functions to define: new constants, or the constants of compiled functions.
        let key = move |i: i64| if equal { i % WARM } else { WARM + i };
        g.bench_function(format!("plain/{what}"), |b| {
            let mut m = warm(
                JITModule::new(jit_builder(isa(), &[])),
                |m| m.finalize_definitions().unwrap(),
                WARM,
            );
            let mut i = 0;
            let cfg = m.target_config();
            b.iter_batched(
                || {
                    i += 1;
                    (lazy_step_function(cfg, key(i)), format!("f{i}"))
                },
                |(f, name)| step(&mut m, |m| m.finalize_definitions().unwrap(), &name, &f),
                BatchSize::SmallInput,
            )
        });
        g.bench_function(format!("merge/{what}"), |b| {
            let mut m = warm(
                MergeModule::new(JITModule::new(jit_builder(isa(), &[]))),
                |m| m.finalize_definitions().unwrap(),
                WARM,
            );
            let mut i = 0;
            let cfg = m.target_config();
            b.iter_batched(
                || {
                    i += 1;
                    (lazy_step_function(cfg, key(i)), format!("f{i}"))
                },
                |(f, name)| step(&mut m, |m| m.finalize_definitions().unwrap(), &name, &f),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, module_batch, lazy_jit);
criterion_main!(benches);
