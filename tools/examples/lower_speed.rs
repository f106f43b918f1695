//! Warm lower throughput (LIR -> Cranelift IR) of CLIF files, every function lowered (as
//! `--lower-all` does): the fastest of N lowerings of each file, in LIR instructions per
//! second, the lowered functions dropped inside the timed loop (as `cargo bench --bench
//! lift_lower` times them).
//!
//! `cargo run --release -p mergelift-tools --example lower_speed -- RUNS FILE...`

use jit_driver::{lift_functions, lower_function_with, LowerContext, OriginalNames};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let isa = jit_driver::host_isa(jit_driver::OptLevel::None).unwrap();
    let config = isa.frontend_config();
    for p in args {
        let text = std::fs::read_to_string(&p).unwrap();
        let funcs = cranelift_reader::parse_functions(&text).unwrap();
        let m = lift_functions(funcs.iter(), &mut Default::default()).unwrap();
        drop(funcs);
        let insts: usize = m.live_functions().map(|(_, f)| f.inst_count()).sum();
        let mut fctx = LowerContext::new();
        let mut best = f64::MAX;
        let mut total = 0.0;
        for _ in 0..reps {
            let t = Instant::now();
            let mut n = 0;
            for (_, f) in m.live_functions() {
                let func = lower_function_with(&m, f, &mut OriginalNames, config, &mut fctx)
                    .unwrap_or_else(|e| panic!("{p}: {e}"));
                n += func.dfg.num_insts();
            }
            let e = t.elapsed().as_secs_f64();
            std::hint::black_box(n);
            best = best.min(e);
            total += e;
        }
        println!(
            "{p}: {insts} LIR insts, best {:.2} ms ({:.1} M/s), mean {:.2} ms",
            best * 1e3,
            insts as f64 / best / 1e6,
            total / reps as f64 * 1e3
        );
    }
}
