//! End to end on a generated module: a plain `JITModule` compiling every function against
//! `MergeModule<JITModule>` (lift, `merge,lvn`, compile what is left), opt level none. Both are
//! measured in one process, interleaved, and the fastest of 8 rounds is kept, so a slow phase
//! of a shared machine does not favour either side.
//!
//! `cargo run --release -p mergelift-tools --example end_to_end_ratio [-- DUP_RATIO [FUNCTIONS]]`
//! (defaults 0.5 and 2000)

use jit_driver::{host_isa, MergeConfig, OptLevel};
use mergelift_tools::gen::{generate, GenOptions};
use mergelift_tools::harness::{merge_jit, plain_jit};
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
        edit_ratio: 0.0,
        seed: 1,
    });
    let funcs = cranelift_reader::parse_functions(&out.text).unwrap();
    let (mut plain, mut merged) = (f64::MAX, f64::MAX);
    let mut last = None;
    for _ in 0..8 {
        let t = Instant::now();
        std::hint::black_box(plain_jit(host_isa(OptLevel::None).unwrap(), &funcs).unwrap());
        plain = plain.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let r = merge_jit(
            host_isa(OptLevel::None).unwrap(),
            &funcs,
            MergeConfig::default(),
        );
        merged = merged.min(t.elapsed().as_secs_f64());
        last = Some(r.unwrap());
    }
    let (_, stats) = last.unwrap();
    let phases: Vec<String> = stats
        .times()
        .iter()
        .map(|(p, d)| format!("{p} {:.1}", d.as_secs_f64() * 1e3))
        .collect();
    println!(
        "{n} functions, dup {dup}: plain {:.1} ms | mergelift {:.1} ms (last run: {} ms) | ratio {:.2}",
        plain * 1e3,
        merged * 1e3,
        phases.join(", "),
        merged / plain
    );
}
