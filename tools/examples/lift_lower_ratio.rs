//! Lift + lower time against Cranelift's own compile time (opt level none) on the wasm
//! corpus: the fastest of N runs of each phase per module (warm, as criterion measures).
//!
//! `cargo run --release -p mergelift-tools --example lift_lower_ratio [-- RUNS [MODULE]]` (default 5 runs)

use jit_driver::{lift_functions, lower_function_with, LowerContext, OriginalNames};
use std::time::Instant;
fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus/wasm");
    let reps: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse().unwrap())
        .unwrap_or(5);
    let only = std::env::args().nth(2);
    let (mut tl, mut tw, mut tc) = (0.0, 0.0, 0.0);
    let Ok(rd) = std::fs::read_dir(dir) else {
        eprintln!("no wasm corpus at {dir}: nothing to measure");
        std::process::exit(1);
    };
    let mut files: Vec<_> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "clif"))
        .collect();
    files.sort();
    let isa = jit_driver::host_isa(jit_driver::OptLevel::None).unwrap();
    let config = isa.frontend_config();
    for p in files {
        if let Some(o) = &only {
            if !p.to_string_lossy().contains(o.as_str()) {
                continue;
            }
        }
        let funcs =
            cranelift_reader::parse_functions(&std::fs::read_to_string(&p).unwrap()).unwrap();
        let mut lift = f64::MAX;
        let mut lower = f64::MAX;
        let mut comp = f64::MAX;
        let mut fctx = LowerContext::new();
        for _ in 0..reps {
            let t = Instant::now();
            let m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
            lift = lift.min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            let mut n = 0;
            for (_, f) in m.live_functions() {
                n += lower_function_with(&m, f, &mut OriginalNames, config, &mut fctx)
                    .unwrap()
                    .dfg
                    .num_insts();
            }
            std::hint::black_box(n);
            lower = lower.min(t.elapsed().as_secs_f64());
        }
        let mut ctx = cranelift_codegen::Context::new();
        for _ in 0..reps.min(3) {
            let copies = funcs.clone();
            let t = Instant::now();
            for f in copies {
                ctx.clear();
                ctx.func = f;
                let _ = ctx.compile(&*isa, &mut Default::default());
            }
            comp = comp.min(t.elapsed().as_secs_f64());
        }
        println!(
            "{:16} lift {:7.1} ms lower {:7.1} ms compile {:7.1} ms  ratio {:.1}%",
            p.file_stem().unwrap().to_string_lossy(),
            lift * 1e3,
            lower * 1e3,
            comp * 1e3,
            100.0 * (lift + lower) / comp
        );
        tl += lift;
        tw += lower;
        tc += comp;
    }
    println!(
        "total lift {:.1} lower {:.1} compile {:.1} ratio {:.1}%",
        tl * 1e3,
        tw * 1e3,
        tc * 1e3,
        100.0 * (tl + tw) / tc
    );
}
