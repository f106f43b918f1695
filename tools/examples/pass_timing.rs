//! Time one pass (`merge` or `lvn`) on a generated template-heavy module, run after run, the
//! way `cargo bench` sets it up (the module cloned before each run, dropped after), and
//! print each run and the fastest and median: a quick look without criterion's statistics.
//!
//! `cargo run --release -p mergelift-tools --example pass_timing -- merge 100000 [RUNS]` (or a `.clif` file instead
//! of the number of functions to generate; `MERGE_THREADS=1` for
//! the single-threaded walk, `PHASES=1` to print the merge phases of each run).

use mergelift_tools::gen::{generate, GenOptions};
use midend::passes::lvn::{LocalValueNumbering, LvnStats};
use midend::passes::merge::{merge_functions_with, MergeOptions};
use midend::PassState;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let pass = args.first().map(String::as_str).unwrap_or("merge");
    let what = args.get(1).map(String::as_str).unwrap_or("10000");
    let runs: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(15);
    let text = match what.parse::<usize>() {
        Ok(n) => {
            generate(&GenOptions {
                functions: n,
                dup_ratio: 0.5,
                near_ratio: 0.1,
                edit_ratio: 0.0,
                seed: 1,
            })
            .text
        }
        // A `.clif` file (a module of the wasm corpus, say).
        Err(_) => std::fs::read_to_string(what).unwrap_or_else(|e| panic!("{what}: {e}")),
    };
    let funcs = cranelift_reader::parse_functions(&text).expect("CLIF parses");
    let n = funcs.len();
    let module = jit_driver::lift_functions(funcs.iter(), &mut Default::default()).expect("lifts");
    drop(funcs);
    let insts = module.inst_count();
    let mut times = Vec::new();
    for _ in 0..runs {
        let mut m = module.clone();
        let t = Instant::now();
        match pass {
            "lvn" => {
                let mut st = LvnStats::default();
                LocalValueNumbering::default().run_module(
                    &mut m,
                    &mut PassState::default(),
                    &mut st,
                );
            }
            "lvn-again" => {
                // A second run over the same (numbered) module: its data is in the caches.
                let mut st = LvnStats::default();
                let mut lvn = LocalValueNumbering::default();
                lvn.run_module(&mut m, &mut PassState::default(), &mut st);
                let t2 = Instant::now();
                lvn.run_module(&mut m, &mut PassState::default(), &mut st);
                times.push(t2.elapsed().as_secs_f64());
                continue;
            }
            _ => {
                let mut opts = MergeOptions::default();
                if let Ok(t) = std::env::var("MERGE_THREADS") {
                    opts.threads = t.parse().expect("MERGE_THREADS is a number");
                }
                let r = merge_functions_with(&mut m, &mut PassState::default(), opts);
                if std::env::var_os("PHASES").is_some() {
                    let p: Vec<String> = r
                        .times
                        .iter()
                        .map(|(n, d)| format!("{n} {:.1}", d.as_secs_f64() * 1e3))
                        .collect();
                    eprintln!("{}", p.join(", "));
                }
            }
        }
        times.push(t.elapsed().as_secs_f64());
        drop(m);
    }
    let each: Vec<String> = times.iter().map(|t| format!("{:.1}", t * 1e3)).collect();
    println!(
        "{pass} on {n} functions ({insts} LIR instructions), ms per run: {}",
        each.join(" ")
    );
    times.sort_by(f64::total_cmp);
    let (best, median) = (times[0], times[times.len() / 2]);
    println!(
        "fastest {:.2} ms ({:.3} us/function, {:.1} M inst/s), median {:.2} ms ({:.3} us/function, {:.1} M inst/s)",
        best * 1e3,
        best * 1e6 / n as f64,
        insts as f64 / best / 1e6,
        median * 1e3,
        median * 1e6 / n as f64,
        insts as f64 / median / 1e6
    );
}
