//! `.wasm` input: a core WebAssembly module translated to Cranelift IR by wasmtime's own
//! translation, in process (wasmtime 48.0.8, built on the same Cranelift 0.135.8).
//!
//! The IR is what wasmtime compiles, as its `Config::emit_clif` would write it: each function
//! after wasmtime's translation and Cranelift's steps before code generation at opt level
//! none (unreachable code removed, constant block parameters removed, aliases resolved). The
//! module is compiled at opt level none so that the pipeline sees unoptimised IR (as with the
//! corpus).
//!
//! How the IR leaves wasmtime. `emit_clif` writes one file per function through an
//! unbuffered `File`, one `write` system call per fragment of the text (millions for a large
//! module: most of the time goes to the kernel). Instead, Cranelift's `trace-log` feature
//! makes `Context::optimize` log each function it is handed (`Optimizing (opt level None):`
//! and its text): a logger installed here keeps those records of wasmtime's compiling threads,
//! in memory, and the steps `optimize` takes at opt level none are then taken on each parsed
//! function, as `emit_clif` would see it. The file route stays as a fallback (another logger
//! already installed in the process) and as the reference the tests compare with.
//! docs/wasmtime-emit-clif.md has the measurements and the change upstream that would make
//! the file route cheap.
//!
//! The module handed to wasmtime has no name section: wasmtime names its files after the
//! names there and panics on one with a `/`, and cuts them at 96 characters. The names are
//! read here instead, in full, and written into the comments.

use cranelift_codegen::ir;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// How a module is translated.
#[derive(Clone)]
pub struct Translation {
    /// Threads wasmtime compiles on (and the IR is read back on): 1 is the calling thread
    /// alone.
    pub threads: usize,
    /// Called with (k, n) as the k-th of the module's n functions is translated, from
    /// wasmtime's threads.
    pub progress: Option<Arc<dyn Fn(usize, usize) + Send + Sync>>,
}

impl Default for Translation {
    /// Every core, no progress.
    fn default() -> Self {
        Translation {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            progress: None,
        }
    }
}

/// The Cranelift IR of a wasm module: every function wasmtime compiles for it (the module's
/// functions, trampolines, builtins it uses, start-up code), in one `.clif` text with the
/// symbol of each in the comment before it (see [`crate::names::FunctionNames::from_clif`]).
pub fn wasm_to_clif(bytes: &[u8]) -> Result<String, String> {
    wasm_to_clif_with(bytes, &Translation::default())
}

/// [`wasm_to_clif`] on `t.threads` threads, with progress.
pub fn wasm_to_clif_with(bytes: &[u8], t: &Translation) -> Result<String, String> {
    let (stripped, names, defined) = prepare(bytes)?;
    let funcs = match captured_functions(&stripped, t, (defined, names.imported))? {
        Some(funcs) => displayed(funcs),
        None => emitted_functions(&stripped, t.threads)?,
    };
    Ok(module_text(funcs, &names.names))
}

/// The functions of [`wasm_to_clif_with`]'s text, parsed, each with the symbol of its
/// comment, in the text's order: without the text (the in-process route parses each
/// function once).
pub fn wasm_to_functions(
    bytes: &[u8],
    t: &Translation,
) -> Result<Vec<(String, ir::Function)>, String> {
    let (stripped, names, defined) = prepare(bytes)?;
    let funcs = match captured_functions(&stripped, t, (defined, names.imported))? {
        Some(funcs) => funcs,
        None => {
            let mut parsed = Vec::new();
            for (symbol, body) in emitted_functions(&stripped, t.threads)? {
                let f = cranelift_reader::parse_functions(&body)
                    .map_err(|e| format!("wasmtime's IR of {symbol} does not parse: {e}"))?;
                parsed.extend(f.into_iter().map(|f| (symbol.clone(), f)));
            }
            parsed
        }
    };
    let mut funcs: Vec<_> = (funcs.into_iter())
        .map(|(symbol, f)| {
            let symbol = full_symbol(&symbol, &names.names);
            (sort_key(&symbol), symbol, f)
        })
        .collect();
    // (Symbols are unique: the order is the text's.)
    funcs.sort_unstable_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    Ok(funcs.into_iter().map(|(_, s, f)| (s, f)).collect())
}

/// Each function's text.
fn displayed(funcs: Vec<(String, ir::Function)>) -> Vec<Func> {
    (funcs.into_iter())
        .map(|(symbol, f)| (symbol, f.display().to_string()))
        .collect()
}

/// The same text by wasmtime's own `Config::emit_clif`, which writes one file per function
/// into a temporary directory (in `$TMPDIR`): the route the in-process capture replaces, and
/// its reference.
pub fn wasm_to_clif_by_files(bytes: &[u8], threads: usize) -> Result<String, String> {
    let (stripped, names, _) = prepare(bytes)?;
    Ok(module_text(
        emitted_functions(&stripped, threads)?,
        &names.names,
    ))
}

/// The text by the in-process capture alone: `None` when it cannot run in this process
/// (another logger is installed) or did not see every function.
pub fn wasm_to_clif_captured(bytes: &[u8], t: &Translation) -> Result<Option<String>, String> {
    let (stripped, names, defined) = prepare(bytes)?;
    Ok(captured_functions(&stripped, t, (defined, names.imported))?
        .map(|funcs| module_text(displayed(funcs), &names.names)))
}

/// What the name section says and what wasmtime's symbols need.
struct ModuleNames {
    /// Function names by function index (imported functions counted).
    names: HashMap<u32, String>,
    /// Imported functions: a defined function's index is its defined index plus these.
    imported: u32,
}

/// One function: its symbol and text (after the symbol comment).
type Func = (String, String);

/// The module without its name section, its names, and how many functions it defines.
fn prepare(bytes: &[u8]) -> Result<(Vec<u8>, ModuleNames, usize), String> {
    strip_names(bytes).map_err(|e| bad(&e))
}

/// A module wasmparser or wasmtime refuses: its message on one line (some span several).
fn bad(e: &dyn std::fmt::Display) -> String {
    let e = e.to_string();
    format!(
        "not a valid WebAssembly module: {}",
        e.split_whitespace().collect::<Vec<_>>().join(" ")
    )
}

/// wasmtime's compile of `stripped` for the host at opt level none, with `config` set as
/// `configure` asks, on `threads` threads (a pool of its own; 1: the calling thread);
/// `on_thread` runs first on each thread that compiles.
fn precompile(
    stripped: &[u8],
    threads: usize,
    configure: impl FnOnce(&mut wasmtime::Config),
    on_thread: impl Fn() + Send + Sync + 'static,
) -> Result<(), String> {
    let mut config = wasmtime::Config::new();
    config
        .cranelift_opt_level(wasmtime::OptLevel::None)
        .parallel_compilation(threads > 1);
    configure(&mut config);
    let engine = wasmtime::Engine::new(&config).map_err(|e| format!("wasmtime: {e:#}"))?;
    // wasmtime returns its errors; a panic in it (a bug there) is an error here all the same.
    let run = || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            engine.precompile_module(stripped)
        }))
    };
    let result = if threads > 1 {
        let on_thread = Arc::new(on_thread);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .start_handler(move |_| on_thread())
            .build()
            .map_err(|e| format!("cannot start {threads} threads: {e}"))?;
        pool.install(run)
    } else {
        on_thread();
        run()
    };
    match result {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(bad(&format_args!("{e:#}"))),
        Err(_) => Err("wasmtime panicked translating the module".into()),
    }
}

/// The functions as wasmtime's `emit_clif` writes them, read back from its directory.
fn emitted_functions(stripped: &[u8], threads: usize) -> Result<Vec<Func>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary directory: {e}"))?;
    let path = dir.path().to_path_buf();
    precompile(
        stripped,
        threads,
        |config| {
            config.emit_clif(&path);
        },
        || {},
    )?;
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
        funcs.push((symbol.to_string(), body.to_string()));
    }
    Ok(funcs)
}

/// The module's text: its functions sorted, each after its comment, with the name
/// section's names in the symbols.
fn module_text(funcs: Vec<Func>, names: &HashMap<u32, String>) -> String {
    let mut funcs: Vec<_> = (funcs.into_iter())
        .map(|(symbol, body)| {
            let symbol = full_symbol(&symbol, names);
            (sort_key(&symbol), symbol, body)
        })
        .collect();
    funcs.sort_unstable();
    let mut out = String::with_capacity(funcs.iter().map(|f| f.2.len() + 64).sum());
    for (_, symbol, body) in funcs {
        out.push_str(";; Intermediate Representation of function <");
        out.push_str(&symbol);
        out.push_str(">:\n");
        out.push_str(&body);
        if !body.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// What the capture of one translation keeps.
struct Capture {
    /// The text of each function Cranelift's `optimize` was handed, as logged.
    texts: Mutex<Vec<String>>,
    /// The module's own functions seen so far, and how many it defines.
    seen: AtomicUsize,
    defined: usize,
    progress: Option<Arc<dyn Fn(usize, usize) + Send + Sync>>,
}

thread_local! {
    /// The capture this thread's records go to (none: they are dropped).
    static CAPTURE: RefCell<Option<Arc<Capture>>> = const { RefCell::new(None) };
}

/// The target of the records of Cranelift's `Context` (`optimize` logs there).
const CONTEXT_TARGET: &str = "cranelift_codegen::context";
/// How `optimize` starts its record of the function it is handed.
const OPTIMIZING: &str = "Optimizing (opt level ";

/// The process's logger while this module is linked in: it keeps `optimize`'s records for
/// the capture of the thread that logs them, and drops everything else.
struct CaptureLogger;

impl log::Log for CaptureLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target() == CONTEXT_TARGET && CAPTURE.with(|c| c.borrow().is_some())
    }

    fn log(&self, record: &log::Record) {
        if record.target() != CONTEXT_TARGET {
            return;
        }
        CAPTURE.with(|c| {
            let Some(capture) = &*c.borrow() else {
                return;
            };
            let text = record.args().to_string();
            let Some(rest) = text.strip_prefix(OPTIMIZING) else {
                return;
            };
            let Some((_, func)) = rest.split_once('\n') else {
                return;
            };
            if func.starts_with("function u0:") {
                // (namespace 0: a function of the module, `FuncKey::DefinedWasmFunction`)
                let k = capture.seen.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(p) = &capture.progress {
                    p(k, capture.defined);
                }
            }
            let func = func.to_string();
            capture
                .texts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(func);
        });
    }

    fn flush(&self) {}
}

static LOGGER: CaptureLogger = CaptureLogger;

/// Is [`CaptureLogger`] the process's logger (installed now if no logger is)?
fn logger_installed() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(|| log::set_logger(&LOGGER).is_ok())
}

/// The functions wasmtime compiles for `stripped`, captured in process (see the module's
/// documentation); `None` when the capture cannot run here or missed a function of the
/// module.
fn captured_functions(
    stripped: &[u8],
    t: &Translation,
    (defined, imported): (usize, u32),
) -> Result<Option<Vec<(String, ir::Function)>>, String> {
    if !logger_installed() {
        return Ok(None);
    }
    // One capture at a time: the log level is the process's.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let capture = Arc::new(Capture {
        texts: Mutex::new(Vec::new()),
        seen: AtomicUsize::new(0),
        defined,
        progress: t.progress.clone(),
    });
    let level = log::max_level();
    log::set_max_level(log::LevelFilter::Trace);
    let threads = t.threads.max(1);
    let on_thread = {
        let capture = capture.clone();
        move || CAPTURE.with(|c| *c.borrow_mut() = Some(capture.clone()))
    };
    // The IR is captured before code generation, whose machine code is thrown away: the
    // register allocator that takes least time does (the IR is the same with either).
    let result = precompile(
        stripped,
        threads,
        |config| {
            config.cranelift_regalloc_algorithm(wasmtime::RegallocAlgorithm::SinglePass);
        },
        on_thread,
    );
    CAPTURE.with(|c| *c.borrow_mut() = None);
    log::set_max_level(level);
    result?;
    let texts = std::mem::take(&mut *capture.texts.lock().unwrap_or_else(|e| e.into_inner()));
    if capture.seen.load(Ordering::Relaxed) != defined {
        return Ok(None);
    }
    let funcs: Result<Vec<_>, String> = if threads > 1 {
        use rayon::prelude::*;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| format!("cannot start {threads} threads: {e}"))?;
        pool.install(|| {
            texts
                .into_par_iter()
                .map(|text| prepared_function(text, imported))
                .collect()
        })
    } else {
        texts
            .into_iter()
            .map(|text| prepared_function(text, imported))
            .collect()
    };
    funcs.map(Some)
}

/// A function as `optimize` was handed it, made what `emit_clif` writes after the compile:
/// parsed, then taken through `optimize`'s steps at opt level none (wasmtime canonicalises no
/// NaNs by default; its verifier is off).
fn prepared_function(text: String, imported: u32) -> Result<(String, ir::Function), String> {
    let mut funcs = cranelift_reader::parse_functions(&text)
        .map_err(|e| format!("wasmtime's IR does not parse: {e}: {text}"))?;
    let func = match (funcs.pop(), funcs.is_empty()) {
        (Some(f), true) => f,
        _ => return Err(format!("wasmtime's IR is not one function: {text}")),
    };
    let cranelift_codegen::ir::UserFuncName::User(name) = &func.name else {
        return Err(format!("wasmtime's IR names no function key: {text}"));
    };
    let key = wasmtime_environ::FuncKey::from_raw_parts(name.namespace, name.index);
    let symbol =
        symbol_of(key, imported).ok_or_else(|| format!("no symbol for wasmtime's {key:?}"))?;
    let mut flags = cranelift_codegen::settings::builder();
    cranelift_codegen::settings::Configurable::set(&mut flags, "enable_verifier", "false")
        .expect("a Cranelift setting");
    let flags = cranelift_codegen::settings::Flags::new(flags);
    let mut cx = cranelift_codegen::Context::for_function(func);
    cx.compute_cfg();
    cx.compute_domtree();
    let steps = cx
        .eliminate_unreachable_code(&flags)
        .and_then(|()| cx.remove_constant_phis(&flags));
    steps.map_err(|e| format!("{symbol}: {e}"))?;
    cx.func.dfg.resolve_all_aliases();
    Ok((symbol, cx.func))
}

/// The symbol wasmtime gives the function of `key` (its `emit_clif` comment), for a module
/// without a name section. (wasmtime 48's `compile.rs` spells them so; a test compares.)
/// A defined function's index counts the `imported` functions.
fn symbol_of(key: wasmtime_environ::FuncKey, imported: u32) -> Option<String> {
    use wasmtime_environ::FuncKey as K;
    Some(match key {
        K::DefinedWasmFunction(m, f) => {
            format!("wasm[{}]::function[{}]", m.as_u32(), imported + f.as_u32())
        }
        K::ArrayToWasmTrampoline(m, f) => format!(
            "wasm[{}]::array_to_wasm_trampoline[{}]",
            m.as_u32(),
            imported + f.as_u32()
        ),
        K::WasmToArrayTrampoline(t) => {
            format!("signatures[{}]::wasm_to_array_trampoline", t.as_u32())
        }
        K::WasmToBuiltinTrampoline(b) => format!("wasmtime_builtin_{}", b.name()),
        K::PatchableToBuiltinTrampoline(b) => format!("wasmtime_patchable_builtin_{}", b.name()),
        K::ModuleStartup(abi, m) => format!("module_start[{}]::{abi:?}", m.as_u32()),
        _ => return None,
    })
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

/// The module without its name section, the function names it had (by function index,
/// imported functions counted) with the number of imported functions, and the number of
/// functions it defines. A name section that does not parse is ignored, as wasmtime ignores
/// it.
fn strip_names(bytes: &[u8]) -> Result<(Vec<u8>, ModuleNames, usize), String> {
    use wasmparser::{Encoding, KnownCustom, Name, Parser, Payload, TypeRef};
    let mut out = Vec::with_capacity(bytes.len());
    let mut names = HashMap::new();
    let (mut imported, mut defined) = (0u32, 0usize);
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
            Payload::ImportSection(reader) => {
                for import in reader.clone().into_imports() {
                    let import = import.map_err(|e| e.to_string())?;
                    if matches!(import.ty, TypeRef::Func(_) | TypeRef::FuncExact(_)) {
                        imported += 1;
                    }
                }
            }
            Payload::FunctionSection(reader) => defined = reader.count() as usize,
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
    Ok((out, ModuleNames { names, imported }, defined))
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
