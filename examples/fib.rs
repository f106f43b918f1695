//! The main job in one page: a cranelift-jit program (build a recursive `fib` with
//! cranelift-frontend, declare and define it through `cranelift_module::Module`, finalize,
//! call it) with one line changed: the `JITModule` is wrapped in a `MergeModule`. Two copies of
//! fib are defined; the second merges into the first and costs no code.
//!
//! `cargo run --example fib [-- PASSES]` (default `merge,merge-similar`, as
//! `MergeConfig::default()`; `none` for no pass). Run with `RUST_LOG`-style logging set up by
//! the host to see Mergelift's `log` events; this example prints its reports itself.

use cranelift_codegen::ir::{condcodes::IntCC, types, AbiParam, InstBuilder};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, FuncId, Linkage, Module};
use mergelift::{Counter, MergeConfig, MergeModule};

/// Define `fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)` as `id`, calling itself.
fn define_fib(m: &mut impl Module, id: FuncId) -> Result<(), Box<dyn std::error::Error>> {
    let mut ctx = m.make_context();
    ctx.func.signature = m.declarations().get_function_decl(id).signature.clone();
    let mut fctx = FunctionBuilderContext::new();
    let me = m.declare_func_in_func(id, &mut ctx.func);
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let (entry, base, rec) = (b.create_block(), b.create_block(), b.create_block());
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
    b.finalize(m.target_config());
    m.define_function(id, &mut ctx)?;
    m.clear_context(&mut ctx);
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let passes = match std::env::args().nth(1) {
        Some(list) => mergelift::parse_pass_list(&list)?,
        None => MergeConfig::default().passes,
    };
    let mut flags = settings::builder();
    flags.set("opt_level", "speed")?;
    let isa = cranelift_native::builder()?.finish(settings::Flags::new(flags))?;
    let jit = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));

    let config = MergeConfig::with_passes(&passes);
    // The one line that differs from a cranelift-jit program:
    let mut m = MergeModule::with_config(jit, config);

    let mut sig = m.make_signature();
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));
    let fib = m.declare_function("fib", Linkage::Export, &sig)?;
    let fib_copy = m.declare_function("fib_copy", Linkage::Export, &sig)?;
    define_fib(&mut m, fib)?;
    define_fib(&mut m, fib_copy)?;
    m.finalize_definitions()?;

    // SAFETY: both were defined with the signature `(i64) -> i64` in the host's convention.
    let f: extern "C" fn(i64) -> i64 =
        unsafe { std::mem::transmute(m.get_finalized_function(fib)) };
    let g: extern "C" fn(i64) -> i64 =
        unsafe { std::mem::transmute(m.get_finalized_function(fib_copy)) };
    println!("fib(30) = {}, fib_copy(30) = {}", f(30), g(30));
    // Names as the host declared them.
    let name = |id: FuncId| {
        m.declarations()
            .get_function_decl(id)
            .linkage_name(id)
            .into_owned()
    };
    for (merged, survivor, kind) in m.merges() {
        match survivor {
            Some(s) => println!("{} merged into {} ({kind:?})", name(merged), name(s)),
            None => println!("{} merged into a shared body ({kind:?})", name(merged)),
        }
    }
    if m.merged_into(fib_copy).is_none() {
        println!("fib_copy was not merged");
    }
    let flush = m.last_flush();
    println!(
        "last flush: {} functions defined, {} merged, {} compiled ({} bytes), in {:.3} ms",
        flush.defined.len(),
        flush.merged.len(),
        flush.stats.get(Counter::Compiled),
        flush.stats.get(Counter::CodeBytes),
        flush.time.as_secs_f64() * 1e3
    );
    println!("statistics:");
    for (k, v) in m.stats().counters_by_name() {
        println!("  {k}: {v}");
    }
    for (phase, d) in m.stats().times() {
        println!("  time {phase}: {:.3} ms", d.as_secs_f64() * 1e3);
    }
    Ok(())
}
