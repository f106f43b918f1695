//! End to end on a generated module: plain Cranelift compiling every function against
//! Mergelift (lift, `merge,lvn`, lower) plus Cranelift compiling what is left, opt level none.
//! Both are measured in one process, interleaved, and the fastest of 8 rounds is kept, so a
//! slow phase of a shared machine does not favour either side.
//!
//! `cargo run --release --example end_to_end_ratio [-- DUP_RATIO [FUNCTIONS]]`
//! (defaults 0.5 and 2000)

use cranelift_codegen::Context;
use mergelift::jit_driver::jit::code_size;
use mergelift::jit_driver::{
    host_isa, lift_functions, lower_function_with, OptLevel, OriginalNames,
};
use mergelift::midend::PassManager;
use mergelift_tools::gen::{generate, GenOptions};
use std::time::Instant;
fn main() {
    let dup: f64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0.5);
    let n: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(2000);
    let out = generate(&GenOptions {
        functions: n,
        dup_ratio: dup,
        near_ratio: 0.1_f64.min(1.0 - dup),
        seed: 1,
    });
    let funcs = cranelift_reader::parse_functions(&out.text).unwrap();
    let isa = host_isa(OptLevel::None).unwrap();
    let mut ctx = Context::new();
    let mut fctx = cranelift_frontend::FunctionBuilderContext::new();
    let mut best = [f64::MAX; 6];
    for _ in 0..8 {
        let t = Instant::now();
        let n: usize = funcs
            .iter()
            .map(|f| code_size(f.clone(), &*isa, &mut ctx).unwrap())
            .sum();
        std::hint::black_box(n);
        let plain = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
        let lift = t.elapsed().as_secs_f64();
        let t = Instant::now();
        PassManager::from_names("merge,lvn")
            .unwrap()
            .run(&mut m, &mut Default::default())
            .unwrap();
        let passes = t.elapsed().as_secs_f64();
        let (mut lower, mut comp) = (0.0, 0.0);
        for (_, f) in m.live_functions() {
            let t = Instant::now();
            let func =
                lower_function_with(&m, f, &mut OriginalNames, isa.frontend_config(), &mut fctx)
                    .unwrap();
            lower += t.elapsed().as_secs_f64();
            let t = Instant::now();
            std::hint::black_box(code_size(func, &*isa, &mut ctx).unwrap());
            comp += t.elapsed().as_secs_f64();
        }
        for (b, v) in best.iter_mut().zip([
            plain,
            lift,
            passes,
            lower,
            comp,
            lift + passes + lower + comp,
        ]) {
            *b = b.min(v);
        }
    }
    println!("{n} functions, dup {dup}: plain {:.1} ms | lift {:.1} passes {:.1} lower {:.1} compile {:.1} = {:.1} ms | ratio {:.2}",
        best[0]*1e3, best[1]*1e3, best[2]*1e3, best[3]*1e3, best[4]*1e3, best[5]*1e3, best[5]/best[0]);
}
