//! wasmtime's own compile of `.wasm` modules beside Mergelift's plain compile of the same
//! code: the `.text` bytes of `Engine::precompile_module` at opt level none and speed.
//!
//!     cargo run --release -p mergelift-tools --features wasm --example wasmtime_text -- FILE.wasm...
//!
//! Prints one markdown row per module; `mergelift size --json --opt-level none|speed
//! FILE.wasm` gives the other side (`code_bytes_before`).

fn main() {
    let files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        eprintln!("usage: wasmtime_text FILE.wasm...");
        std::process::exit(2);
    }
    println!("| module | opt level | wasmtime .text | its function symbols |");
    println!("|---|---|---:|---:|");
    for f in files {
        let bytes = std::fs::read(&f).unwrap_or_else(|e| panic!("{f}: {e}"));
        let size = |speed| {
            mergelift_tools::wasm::wasmtime_text_bytes(&bytes, speed)
                .unwrap_or_else(|e| panic!("{f}: {e}"))
        };
        for (level, speed) in [("none", false), ("speed", true)] {
            let (text, functions) = size(speed);
            println!("| {f} | {level} | {text} | {functions} |");
        }
    }
}
