//! A lazy JIT, one function per `finalize_definitions`, timed in one process: 500 functions
//! compiled first, then N steps of a function unlike any before (`unique`) or equal to one
//! compiled before (`equal`); prints µs per step. With a third argument, plain cranelift-jit
//! instead of `MergeModule` (the same steps). The per-step figures of BENCHMARKS.md; also
//! what callgrind was run on (two step counts, the difference per step).
//!
//! `cargo run --release --example lazy_jit_probe -- unique|equal STEPS [plain]`

use cranelift_codegen::ir::{types, AbiParam, Function, InstBuilder, Signature, UserFuncName};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::{Linkage, Module};
use mergelift::jit_driver::jit::jit_builder;
use mergelift::{host_isa, MergeModule, OptLevel};

/// A function of about 25 instructions whose constant `k` makes it unique (as in
/// `benches/module.rs`).
fn poly(cfg: TargetFrontendConfig, k: i64) -> Function {
    let mut sig = Signature::new(cfg.default_call_conv);
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));
    let mut f = Function::with_name_signature(UserFuncName::default(), sig);
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut f, &mut fctx);
    let e = b.create_block();
    b.append_block_params_for_function_params(e);
    b.switch_to_block(e);
    let x = b.block_params(e)[0];
    let kk = b.ins().iconst(types::I64, k);
    let mut v = x;
    for j in 0..8 {
        let m = b.ins().imul(v, kk);
        let s = b.ins().iadd_imm_s(m, j);
        v = b.ins().bxor(s, x);
    }
    b.ins().return_(&[v]);
    b.seal_all_blocks();
    b.finalize(cfg);
    f
}

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
            poly(
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
        ($m:expr) => {{
            let mut m = $m;
            let mut t = std::time::Instant::now();
            for (k, f) in fs.iter().enumerate() {
                if k == 500 {
                    t = std::time::Instant::now();
                }
                let id = m
                    .declare_function(&format!("f{k}"), Linkage::Export, &f.signature)
                    .unwrap();
                let mut ctx = m.make_context();
                ctx.func = f.clone();
                m.define_function(id, &mut ctx).unwrap();
                m.finalize_definitions().unwrap();
            }
            t.elapsed().as_secs_f64() * 1e6 / n as f64
        }};
    }
    let us = if plain {
        run!(JITModule::new(jit_builder(isa, &[])))
    } else {
        run!(MergeModule::new(JITModule::new(jit_builder(isa, &[]))))
    };
    println!(
        "{mode} {}: {us:.1} us per step",
        if plain { "plain" } else { "merge" }
    );
}
