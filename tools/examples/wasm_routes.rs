//! The two routes from a `.wasm` module to its Cranelift IR, side by side: wasmtime's own
//! `emit_clif` (one file per function in `$TMPDIR`) and the in-process capture `mergelift`
//! uses. Prints, per module, the time of each and whether their texts are equal, function by
//! function (the first difference, if any).
//!
//!     cargo run --release -p mergelift-tools --features wasm --example wasm_routes -- FILE.wasm...

use std::time::Instant;

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: wasm_routes FILE.wasm...");
        std::process::exit(2);
    }
    let t = mergelift_tools::wasm::Translation::default();
    let mut differ = false;
    for f in files {
        let bytes = std::fs::read(&f).unwrap_or_else(|e| panic!("{f}: {e}"));
        let s = Instant::now();
        let files_text = mergelift_tools::wasm::wasm_to_clif_by_files(&bytes, t.threads)
            .unwrap_or_else(|e| panic!("{f}: {e}"));
        let by_files = s.elapsed();
        let s = Instant::now();
        let captured = mergelift_tools::wasm::wasm_to_clif_captured(&bytes, &t)
            .unwrap_or_else(|e| panic!("{f}: {e}"))
            .unwrap_or_else(|| panic!("{f}: the capture did not run"));
        let in_process = s.elapsed();
        let split = |text: &str| -> Vec<String> {
            text.split(";; Intermediate Representation of function <")
                .map(str::to_string)
                .collect()
        };
        let (a, b) = (split(&files_text), split(&captured));
        let first = a.iter().zip(&b).position(|(x, y)| x != y);
        println!(
            "{f}: {} functions; emit_clif {:.2} s, in process {:.2} s; {}",
            a.len() - 1,
            by_files.as_secs_f64(),
            in_process.as_secs_f64(),
            match (first, a.len() == b.len()) {
                (None, true) => "equal".to_string(),
                (None, false) => format!("{} against {} functions", a.len(), b.len()),
                (Some(k), _) =>
                    format!("differ:\n--- emit_clif\n{}\n--- in process\n{}", a[k], b[k]),
            }
        );
        differ |= first.is_some() || a.len() != b.len();
    }
    std::process::exit(differ as i32);
}
