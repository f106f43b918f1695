//! `.wasm` input: a core WebAssembly module translated to Cranelift IR by wasmtime's own
//! translation, in process (wasmtime 48.0.8, built on the same Cranelift 0.135.8).
//!
//! wasmtime writes the Cranelift IR of each function it compiles when `Config::emit_clif`
//! names a directory: one file per function, each starting with a `;; Intermediate
//! Representation of function <SYMBOL>:` comment. It writes it after its own compile, so the
//! module is compiled at opt level none and the pipeline sees unoptimised IR (as with the
//! corpus). The module handed to wasmtime has no name section: wasmtime names its files
//! after the names there and panics on one with a `/`, and cuts them at 96 characters. The
//! names are read here instead, in full, and written into the comments.

use std::collections::HashMap;

/// The Cranelift IR of a wasm module: every function wasmtime compiles for it (the module's
/// functions, trampolines, builtins it uses, start-up code), in one `.clif` text with the
/// symbol of each in the comment before it (see [`crate::names::FunctionNames::from_clif`]).
pub fn wasm_to_clif(bytes: &[u8]) -> Result<String, String> {
    // (on one line: some of wasmparser's and wasmtime's messages span several)
    let bad = |e: &dyn std::fmt::Display| {
        let e = e.to_string();
        format!(
            "not a valid WebAssembly module: {}",
            e.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    };
    let (stripped, names) = strip_names(bytes).map_err(|e| bad(&e))?;
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let mut config = wasmtime::Config::new();
    config
        .cranelift_opt_level(wasmtime::OptLevel::None)
        .emit_clif(dir.path());
    let engine = wasmtime::Engine::new(&config).map_err(|e| format!("wasmtime: {e:#}"))?;
    // wasmtime returns its errors; a panic in it (a bug there) is an error here all the same.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        engine.precompile_module(&stripped)
    })) {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(bad(&format_args!("{e:#}"))),
        Err(_) => return Err("wasmtime panicked translating the module".into()),
    }
    let mut funcs = Vec::new();
    let entries = std::fs::read_dir(dir.path()).map_err(|e| format!("wasmtime's output: {e}"))?;
    for e in entries {
        let path = e.map_err(|e| format!("wasmtime's output: {e}"))?.path();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("wasmtime's output {}: {e}", path.display()))?;
        let (first, body) = text.split_once('\n').unwrap_or((&text, ""));
        let symbol = first
            .strip_prefix(";; Intermediate Representation of function <")
            .and_then(|s| s.strip_suffix(">:"))
            .ok_or_else(|| format!("wasmtime's output {}: no symbol comment", path.display()))?;
        let symbol = full_symbol(symbol, &names);
        funcs.push((sort_key(&symbol), symbol, body.to_string()));
    }
    funcs.sort();
    let mut out = String::new();
    for (_, symbol, body) in funcs {
        out.push_str(";; Intermediate Representation of function <");
        out.push_str(&symbol);
        out.push_str(">:\n");
        out.push_str(&body);
        if !body.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// `wasm[0]::function[F]` with the name section's name of F, if it has one, appended; other
/// symbols as they are. (A name the section gives to more than one function is told apart
/// by its index in the symbol, which `report` shows beside such names.)
fn full_symbol(symbol: &str, names: &HashMap<u32, String>) -> String {
    let index = symbol
        .strip_prefix("wasm[0]::function[")
        .and_then(|s| s.strip_suffix(']'))
        .and_then(|s| s.parse::<u32>().ok());
    match index.and_then(|f| names.get(&f)) {
        // (one line: a name's control characters would end the comment)
        Some(name) => {
            let clean = name.replace(|c: char| c.is_control(), "?");
            format!("{symbol}::{clean}")
        }
        None => symbol.to_string(),
    }
}

/// Functions of the module in index order, then what wasmtime adds, each kind in index order.
fn sort_key(symbol: &str) -> (u8, String, u64) {
    let kind = if symbol.starts_with("wasm[0]::function[") {
        0
    } else {
        1
    };
    let index = symbol
        .split(['[', ']'])
        .rev()
        .find_map(|s| s.parse::<u64>().ok())
        .unwrap_or(0);
    let prefix = symbol.split('[').next().unwrap_or("").to_string();
    (kind, prefix, index)
}

/// The module without its name section, and the function names it had (by function index,
/// imported functions counted). A name section that does not parse is ignored, as wasmtime
/// ignores it.
fn strip_names(bytes: &[u8]) -> Result<(Vec<u8>, HashMap<u32, String>), String> {
    use wasmparser::{Encoding, KnownCustom, Name, Parser, Payload};
    let mut out = Vec::with_capacity(bytes.len());
    let mut names = HashMap::new();
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|e| e.to_string())?;
        match &payload {
            Payload::Version {
                encoding, range, ..
            } => {
                if *encoding != Encoding::Module {
                    return Err("a component; only core modules are read".into());
                }
                out.extend_from_slice(&bytes[range.clone()]);
                continue;
            }
            Payload::CustomSection(c) if c.name() == "name" => {
                if let KnownCustom::Name(reader) = c.as_known() {
                    for sub in reader {
                        let Ok(Name::Function(map)) = sub else {
                            continue;
                        };
                        for n in map.into_iter().flatten() {
                            names.insert(n.index, n.name.to_string());
                        }
                    }
                }
                continue;
            }
            _ => {}
        }
        if let Some((id, range)) = payload.as_section() {
            // (The parser hands out a section's range before it reads the section: one that
            // runs past the end of a cut file is the file's fault.)
            if range.end > bytes.len() {
                return Err(format!(
                    "unexpected end of file: a section of {} bytes at offset {} runs past its \
                     end ({} bytes)",
                    range.len(),
                    range.start,
                    bytes.len()
                ));
            }
            out.push(id);
            let mut n = range.len();
            loop {
                let b = (n & 0x7f) as u8;
                n >>= 7;
                if n == 0 {
                    out.push(b);
                    break;
                }
                out.push(b | 0x80);
            }
            out.extend_from_slice(&bytes[range]);
        }
    }
    Ok((out, names))
}

/// The size of the `.text` section of wasmtime's own compile of a module (`Engine::
/// precompile_module`, for the host, at opt level `speed` or not): what `mergelift size`
/// compares against: the section (every function wasmtime compiles for the module, each
/// aligned, the section padded to a page), and the sum of its function symbols' sizes.
pub fn wasmtime_text_bytes(bytes: &[u8], speed: bool) -> Result<(u64, u64), String> {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
    let mut config = wasmtime::Config::new();
    config.cranelift_opt_level(if speed {
        wasmtime::OptLevel::Speed
    } else {
        wasmtime::OptLevel::None
    });
    let engine = wasmtime::Engine::new(&config).map_err(|e| format!("wasmtime: {e:#}"))?;
    let elf = engine
        .precompile_module(bytes)
        .map_err(|e| format!("not a valid WebAssembly module: {e:#}"))?;
    let file = object::File::parse(&*elf).map_err(|e| format!("wasmtime's output: {e}"))?;
    let text: u64 = (file.sections())
        .filter(|s| s.name() == Ok(".text"))
        .map(|s| s.size())
        .sum();
    let functions: u64 = (file.symbols())
        .filter(|s| s.kind() == SymbolKind::Text)
        .map(|s| s.size())
        .sum();
    Ok((text, functions))
}
