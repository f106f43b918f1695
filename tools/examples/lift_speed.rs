//! Warm lift throughput of CLIF files: the fastest of N lifts of each file.
//!
//! `cargo run --release -p mergelift-tools --example lift_speed -- RUNS FILE...`

use jit_driver::lift_functions;
use std::time::Instant;

fn main() {
    if let Err(e) = run() {
        eprintln!("lift_speed: {e}");
        std::process::exit(1);
    }
}

/// An error, with the file it is about.
fn at(path: &str, e: impl std::fmt::Display) -> String {
    format!("{path}: {e}")
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let reps: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    for p in args {
        let text = std::fs::read_to_string(&p).map_err(|e| at(&p, e))?;
        let funcs = cranelift_reader::parse_functions(&text).map_err(|e| at(&p, e))?;
        let insts: usize = funcs.iter().map(|f| f.dfg.num_insts()).sum();
        let mut best = f64::MAX;
        let mut total = 0.0;
        for _ in 0..reps {
            let t = Instant::now();
            let m = lift_functions(funcs.iter(), &mut Default::default()).map_err(|e| at(&p, e))?;
            let e = t.elapsed().as_secs_f64();
            drop(std::hint::black_box(m));
            best = best.min(e);
            total += e;
        }
        println!(
            "{p}: {insts} insts, best {:.2} ms ({:.1} M/s), mean {:.2} ms",
            best * 1e3,
            insts as f64 / best / 1e6,
            total / reps as f64 * 1e3
        );
    }
    Ok(())
}
