//! What thunks cost per target: for each `.clif` module, the functions merged into thunks
//! (their own code: a call of the survivor with its arguments and extra constants), their
//! code bytes, and the time of the pipeline's compile with thunks compiled by Cranelift and,
//! on x86-64, written as machine code (`MergeConfig::native_thunks`). The measure of whether
//! native thunks pay on another target.
//!
//! `cargo run --release -p mergelift-tools --example thunk_cost -- RUNS TARGET FILE...`
//! (TARGET as `--target` takes it: `x86_64`, `aarch64`, ...; the fastest of RUNS compiles).

use jit_driver::MergeConfig;
use mergelift_tools::cross::Target;
use mergelift_tools::size::{measure, SizeOptions, SizeReport};

fn main() {
    if let Err(e) = run() {
        eprintln!("thunk_cost: {e}");
        std::process::exit(1);
    }
}

/// Thunks and their code bytes (exported functions merged into thunks, and the thunks of
/// members folded into shared bodies).
fn thunks(r: &SizeReport) -> (usize, usize) {
    let mut n = 0;
    let mut bytes = 0;
    for f in r.functions.iter().chain(&r.made) {
        // (a merged function with code of its own is a thunk)
        if f.merged.is_some() && f.bytes_after > 0 {
            n += 1;
            bytes += f.bytes_after;
        }
    }
    (n, bytes)
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    let target = Target::parse(&args.next().ok_or("no target")?)?;
    let (mut all_n, mut all_bytes, mut all_code) = (0, 0, 0);
    let (mut all_ms, mut all_ms_native) = (0.0, 0.0);
    for p in args {
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{p}: {e}"))?;
        let file = mergelift_tools::input::parse_clif(std::path::Path::new(&p), &text)?;
        let best = |native: bool| -> Result<(SizeReport, f64), String> {
            let opts = SizeOptions {
                config: MergeConfig {
                    debug: jit_driver::DebugOptions {
                        native_thunks: native,
                        verify_lir: false,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                target: Some(target.clone()),
                ..Default::default()
            };
            let mut fastest = f64::MAX;
            let mut last = None;
            for _ in 0..runs.max(1) {
                let r = measure(std::slice::from_ref(&file), &opts, 0.0, |_, _, _| {})?;
                fastest = fastest.min(r.time("compile_after"));
                last = Some(r);
            }
            Ok((last.expect("one run"), fastest))
        };
        let (r, ms) = best(false)?;
        let (n, bytes) = thunks(&r);
        let (native, ms_native) = best(true)?;
        all_n += n;
        all_bytes += bytes;
        all_code += r.code_bytes_after;
        all_ms += ms;
        all_ms_native += ms_native;
        println!(
            "{p}: {n} thunks, {bytes} bytes compiled by Cranelift ({:.2}% of {} code bytes); \
             compile {ms:.1} ms; with native thunks {} of them native, {} code bytes, compile \
             {ms_native:.1} ms",
            100.0 * bytes as f64 / r.code_bytes_after.max(1) as f64,
            r.code_bytes_after,
            native.native_thunks,
            native.code_bytes_after,
        );
    }
    println!(
        "all: {all_n} thunks, {all_bytes} bytes ({:.2}% of {all_code}), {:.1} bytes each; \
         compile {all_ms:.1} ms, with native thunks {all_ms_native:.1} ms",
        100.0 * all_bytes as f64 / all_code.max(1) as f64,
        all_bytes as f64 / all_n.max(1) as f64
    );
    Ok(())
}
