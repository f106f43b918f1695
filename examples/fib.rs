//! The main job in one page: build a recursive `fib` with cranelift-frontend, run Mergelift's
//! pipeline (lift to LIR, merge, value-number, lower), JIT-compile it and call fib(30).
//!
//! `cargo run --example fib`

use cranelift_codegen::ir::{
    condcodes::IntCC, types, AbiParam, Function, InstBuilder, Signature, UserFuncName,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use mergelift::lir::{self, Linkage};
use mergelift::{Pipeline, PipelineOptions};

/// fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2), calling itself by `name`.
fn build_fib(name: &str) -> Function {
    let mut sig = Signature::new(CallConv::SystemV);
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));
    let mut func = Function::with_name_signature(UserFuncName::testcase(name), sig.clone());
    let mut fctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut func, &mut fctx);
    let callee_sig = b.import_signature(sig);
    let me = b.import_function(cranelift_codegen::ir::ExtFuncData {
        name: cranelift_codegen::ir::ExternalName::testcase(name),
        signature: callee_sig,
        colocated: true,
        patchable: false,
    });
    let entry = b.create_block();
    let base = b.create_block();
    let rec = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let n = b.block_params(entry)[0];
    let small = b.ins().icmp_imm_s(IntCC::SignedLessThan, n, 2);
    b.ins().brif(small, base, &[], rec, &[]);
    b.switch_to_block(base);
    b.ins().return_(&[n]);
    b.switch_to_block(rec);
    let n1 = b.ins().iadd_imm_s(n, -1);
    let n2 = b.ins().iadd_imm_s(n, -2);
    let c1 = b.ins().call(me, &[n1]);
    let f1 = b.inst_results(c1)[0];
    let c2 = b.ins().call(me, &[n2]);
    let f2 = b.inst_results(c2)[0];
    let sum = b.ins().iadd(f1, f2);
    b.ins().return_(&[sum]);
    b.seal_all_blocks();
    b.finalize(TargetFrontendConfig {
        default_call_conv: CallConv::SystemV,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    });
    func
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The LIR that the lifter makes of it, verified.
    let fib = build_fib("fib");
    let mut m = lir::Module::new();
    mergelift::jit_driver::lift_function(&mut m, &fib, Linkage::Export)?;
    lir::verify_module(&m, true)?;
    println!("LIR of fib:\n{m}");

    // 2. The whole pipeline: lift, passes, lower, JIT.
    let passes = std::env::args()
        .nth(1)
        .unwrap_or_else(|| PipelineOptions::default().passes);
    let mut p = Pipeline::new(PipelineOptions {
        passes,
        ..Default::default()
    });
    p.add_function(Linkage::Export, fib)?;
    let jit = p.compile()?;
    let f: extern "C" fn(i64) -> i64 = unsafe { jit.get("fib") }.ok_or("fib was not compiled")?;
    println!("fib(30) = {}", f(30));
    println!("statistics:");
    for (k, v) in &jit.stats.counters {
        println!("  {k}: {v}");
    }
    for (phase, d) in &jit.stats.times {
        println!("  time {phase}: {:.3} ms", d.as_secs_f64() * 1e3);
    }
    Ok(())
}
