//! Reading the inputs of the tools: collecting `.clif` files from directories, reading and
//! parsing them with cranelift-reader, and choosing the ISA their `set` and `target` lines ask
//! for.

use crate::cross::Target;
use cranelift_codegen::ir;
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_reader::{parse_test, IsaSpec, ParseOptions};
use jit_driver::OptLevel;
use std::path::{Path, PathBuf};
use target_lexicon::Triple;

/// A parsed `.clif` file: its functions and the ISA settings its header asks for.
pub struct ClifFile {
    pub path: PathBuf,
    pub functions: Vec<ir::Function>,
    /// The `set` lines (shared flags).
    pub flags: settings::Flags,
    /// The targets its `target` lines name, in order (none: it is compiled for the host, or
    /// for the tool's `--target`).
    pub targets: Vec<OwnedTargetIsa>,
    /// The file has no `set` and no `target` line: it is compiled with [`HEADERLESS_FLAGS`].
    pub headerless: bool,
}

/// The settings of a file with no `set` or `target` line, besides Cranelift's defaults:
/// frame pointers are kept, as wasmtime keeps them (its CLIF reads them).
pub const HEADERLESS_FLAGS: &[(&str, &str)] = &[("preserve_frame_pointers", "true")];

/// Does the text have a `set` or `target` line before its first function?
fn has_header(text: &str) -> bool {
    for line in text.lines() {
        let l = line.trim_start();
        if l.starts_with("function") {
            return false;
        }
        if l.starts_with("set ") || l.starts_with("target ") {
            return true;
        }
    }
    false
}

/// The largest input file read (bytes): larger ones are refused before reading.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

#[cfg(feature = "wasm")]
fn wasm_text(path: &Path) -> Result<String, String> {
    wasm_text_with(path, &crate::wasm::Translation::default())
}

#[cfg(feature = "wasm")]
fn wasm_text_with(path: &Path, t: &crate::wasm::Translation) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| cannot_read(path, &e))?;
    crate::wasm::wasm_to_clif_with(&bytes, t).map_err(|e| format!("{}: {e}", path.display()))
}

/// A `.wasm` module's functions as the [`ClifFile`] [`parse_clif`] makes of its text (a text
/// with no `set` or `target` line), from the functions of
/// `wasm::wasm_to_functions` (the `wasm` feature).
pub fn wasm_file(path: &Path, functions: Vec<ir::Function>) -> Result<ClifFile, String> {
    let mut file = parse_clif(path, "")?;
    file.functions = functions;
    Ok(file)
}

/// [`crate::wasm::wasm_to_functions`] of the `.wasm` file `path`.
#[cfg(feature = "wasm")]
pub fn read_wasm_functions(
    path: &Path,
    t: &crate::wasm::Translation,
) -> Result<Vec<(String, ir::Function)>, String> {
    check_input_file(path)?;
    let bytes = std::fs::read(path).map_err(|e| cannot_read(path, &e))?;
    crate::wasm::wasm_to_functions(&bytes, t).map_err(|e| format!("{}: {e}", path.display()))
}

/// [`read_text`], a `.wasm` file translated as `t` says (threads, progress).
#[cfg(feature = "wasm")]
pub fn read_text_with(path: &Path, t: &crate::wasm::Translation) -> Result<String, String> {
    check_input_file(path)?;
    if is_wasm(path) {
        return wasm_text_with(path, t);
    }
    std::fs::read_to_string(path).map_err(|e| cannot_read(path, &e))
}

#[cfg(not(feature = "wasm"))]
fn wasm_text(path: &Path) -> Result<String, String> {
    Err(format!(
        "{}: this mergelift was built without WebAssembly input (build it with `--features \
         wasm`)",
        path.display()
    ))
}

/// Is `path` a `.wasm` file (by its name)?
pub fn is_wasm(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "wasm")
}

/// Read `path` as UTF-8 text. Only regular files are read (a FIFO, socket or device would
/// block or never end), and at most [`MAX_INPUT_BYTES`]. A `.wasm` file is read as the
/// Cranelift IR wasmtime translates it to (with the `wasm` feature; an error without).
pub fn read_text(path: &Path) -> Result<String, String> {
    check_input_file(path)?;
    if is_wasm(path) {
        return wasm_text(path);
    }
    std::fs::read_to_string(path).map_err(|e| cannot_read(path, &e))
}

/// Why an input cannot be read, in the words every command uses: `PATH: cannot read:
/// REASON` (`no such file or directory`, `permission denied`, ...).
pub fn cannot_read(path: &Path, e: &std::io::Error) -> String {
    let reason = match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::InvalidData => "not UTF-8 text".to_string(),
        _ => {
            // The system's words, without "(os error N)", in lower case as ours.
            let s = e.to_string();
            let s = s.split(" (os error").next().unwrap_or(&s);
            let mut c = s.chars();
            c.next()
                .map(|f| f.to_lowercase().chain(c).collect())
                .unwrap_or_default()
        }
    };
    format!("{}: cannot read: {reason}", path.display())
}

/// The error for an input that is not a regular file: a directory where files are read, a
/// FIFO, socket or device (which could block or never end).
pub fn not_a_regular_file(path: &Path, meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        return format!("{}: cannot read: a directory", path.display());
    }
    let what = if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a file"
    };
    format!(
        "{}: cannot read: not a regular file ({what})",
        path.display()
    )
}

/// A regular file of at most [`MAX_INPUT_BYTES`].
fn check_input_file(path: &Path) -> Result<(), String> {
    let meta = std::fs::metadata(path).map_err(|e| cannot_read(path, &e))?;
    if !meta.is_file() {
        return Err(not_a_regular_file(path, &meta));
    }
    if meta.len() > MAX_INPUT_BYTES {
        return Err(format!(
            "{}: cannot read: {} bytes is more than the {} bytes an input may have",
            path.display(),
            meta.len(),
            MAX_INPUT_BYTES
        ));
    }
    Ok(())
}

/// The entity prefixes cranelift-reader numbers (`v12`, `block3`, `ss0`, ...): it allocates
/// every entity up to the largest number it reads, so `v99999999` in a 90-byte file would
/// take gigabytes.
const DENSE_ENTITY_PREFIXES: &[&str] = &[
    "v",
    "block",
    "ss",
    "dss",
    "dt",
    "gv",
    "mt",
    "const",
    "fn",
    "sig",
    "userextname",
    "extable",
    "tag",
    "region",
    "ret",
    "exn",
];

/// How many entities the functions of a `.clif` text of `len` bytes may number in all (the
/// sum, over functions and entity kinds, of the largest number used). Honest inputs use well
/// under one per 10 bytes (Cranelift's run tests and the wasm corpus: at most 0.09).
pub fn entity_budget(len: usize) -> u64 {
    (1 << 20) + 4 * len as u64
}

/// Check, before cranelift-reader sees it, that `text` numbers no absurd entities (see
/// `DENSE_ENTITY_PREFIXES`): the largest number of each kind in each function, summed, must
/// stay within [`entity_budget`]. The error names the line and the entity.
pub fn prescan_clif(text: &str) -> Result<(), (usize, String)> {
    let budget = entity_budget(text.len());
    let mut total: u64 = 0;
    let mut maxima = [0u64; DENSE_ENTITY_PREFIXES.len()];
    for (k, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("function") {
            total += maxima.iter().sum::<u64>();
            maxima = [0; DENSE_ENTITY_PREFIXES.len()];
        }
        let code = line.split(';').next().unwrap_or("");
        let b = code.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            let starts_word = (c.is_ascii_alphabetic() || c == b'_')
                && (i == 0
                    || !(b[i - 1].is_ascii_alphanumeric() || matches!(b[i - 1], b'_' | b'%')));
            if !starts_word {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let word = &code[start..i];
            let digits = word
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(word.len());
            let (prefix, number) = word.split_at(digits);
            if number.is_empty() || !number.bytes().all(|d| d.is_ascii_digit()) {
                continue;
            }
            let Some(kind) = DENSE_ENTITY_PREFIXES.iter().position(|p| *p == prefix) else {
                continue;
            };
            let n = number.parse::<u64>().unwrap_or(u64::MAX);
            if n > budget || total.saturating_add(n) > budget {
                return Err((
                    k + 1,
                    format!(
                        "entity `{word}` is numbered beyond what this input may use (at most \
                         {budget} {prefix} entities in all for {} bytes of text; \
                         cranelift-reader allocates every number up to the largest)",
                        text.len()
                    ),
                ));
            }
            maxima[kind] = maxima[kind].max(n + 1);
            if total + maxima.iter().sum::<u64>() > budget {
                return Err((
                    k + 1,
                    format!(
                        "the functions number more entities than {} bytes of text may use (at \
                         most {budget} in all; cranelift-reader allocates every number up to \
                         the largest)",
                        text.len()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Parse `.clif` text with cranelift-reader after [`prescan_clif`]; errors are
/// `file:line: message`, with the offending line quoted.
pub fn parse_test_text<'a>(
    path: &Path,
    text: &'a str,
) -> Result<cranelift_reader::TestFile<'a>, String> {
    parse_part(path, text, 1, ParseOptions::default())
}

/// [`parse_test_text`] on a part of a file whose first line is line `first_line` of the file
/// (errors name the file's line numbers).
fn parse_part<'a>(
    path: &Path,
    text: &'a str,
    first_line: usize,
    options: ParseOptions<'a>,
) -> Result<cranelift_reader::TestFile<'a>, String> {
    let line_of = |n: usize| n + first_line - 1;
    prescan_clif(text).map_err(|(n, e)| format!("{}:{}: {e}", path.display(), line_of(n)))?;
    // cranelift-reader panics on some malformed input (e.g. a dynamic type over a scalar).
    let parsed = std::panic::catch_unwind(|| parse_test(text, options)).map_err(|p| {
        format!(
            "{}: cranelift-reader cannot parse it (it panicked: {})",
            path.display(),
            jit_driver::module::panic_text(&p)
        )
    })?;
    parsed.map_err(|e| {
        let n = e.location.line_number;
        let mut msg = format!("{}:{}: {}", path.display(), line_of(n), e.message);
        if let Some(src) = n.checked_sub(1).and_then(|k| text.lines().nth(k)) {
            let src = src.trim_end();
            if !src.is_empty() && src.len() <= 300 {
                let n = line_of(n);
                msg.push_str(&format!("\n    {n} | {src}"));
                // A column where the message quotes a token found on the line.
                if let Some(col) = quoted(&e.message).and_then(|q| src.find(q)) {
                    let pad = " ".repeat(n.to_string().len() + 3 + col + 4);
                    msg.push_str(&format!("\n{pad}^ column {}", col + 1));
                }
            }
        }
        msg
    })
}

/// Does `line` start a function (its first word is `function`)?
fn starts_function(line: &str) -> bool {
    line.trim_start()
        .strip_prefix("function")
        .is_some_and(|r| r.is_empty() || r.starts_with(|c: char| c.is_whitespace() || c == '%'))
}

/// A `.clif` file read one function at a time, so that a large module never has all of its
/// text or all of its parsed functions in memory at once: read the header (`test`, `set` and
/// `target` lines) with [`open_clif`], then take the functions with
/// [`ClifStream::next_function`]. Each function is parsed as [`parse_clif`] parses it (same
/// default calling convention, same entity budget per function, same error messages with the
/// file's line numbers).
pub struct ClifStream {
    /// The file's header: `functions` stays empty.
    pub file: ClifFile,
    reader: Box<dyn std::io::BufRead>,
    /// The next function's first line, read ahead, and its line number.
    next: Option<(String, usize)>,
    /// The number of the last line read.
    line: usize,
    call_conv: cranelift_codegen::isa::CallConv,
    /// Set after an error: the stream ends.
    failed: bool,
}

/// Open a `.clif` file for [`ClifStream`]: checks it as [`read_text`] does (a regular file of
/// at most [`MAX_INPUT_BYTES`], UTF-8) and parses its header.
/// A `.wasm` file is translated first ([`read_text`]).
pub fn open_clif(path: &Path) -> Result<ClifStream, String> {
    let reader: Box<dyn std::io::BufRead> = if is_wasm(path) {
        Box::new(std::io::Cursor::new(read_text(path)?))
    } else {
        check_input_file(path)?;
        let f = std::fs::File::open(path).map_err(|e| cannot_read(path, &e))?;
        Box::new(std::io::BufReader::with_capacity(1 << 16, f))
    };
    clif_stream(path, reader)
}

/// A [`ClifStream`] over `reader` (standard input, or text read already), its messages
/// naming `path`.
pub fn clif_stream(
    path: &Path,
    mut reader: Box<dyn std::io::BufRead>,
) -> Result<ClifStream, String> {
    let mut header = String::new();
    let mut line = 0;
    let next = read_until_function(&mut reader, &mut line, &mut header)
        .map_err(|(n, e)| read_error(path, n, e))?;
    let test = parse_part(path, &header, 1, ParseOptions::default())?;
    let run = test.commands.iter().any(|c| c.command == "run");
    let call_conv = if run {
        cranelift_codegen::isa::CallConv::triple_default(&target_lexicon::Triple::host())
    } else {
        ParseOptions::default().default_calling_convention
    };
    let (flags, targets) = isa_of(test.isa_spec);
    Ok(ClifStream {
        file: ClifFile {
            path: path.to_path_buf(),
            functions: Vec::new(),
            flags,
            targets,
            headerless: !has_header(&header),
        },
        reader,
        next,
        line,
        call_conv,
        failed: false,
    })
}

impl ClifStream {
    /// The next function of the file, or `None` at its end (or after an error).
    pub fn next_function(&mut self) -> Option<Result<ir::Function, String>> {
        if self.failed {
            return None;
        }
        let (mut text, first) = self.next.take()?;
        match read_until_function(&mut self.reader, &mut self.line, &mut text) {
            Ok(next) => self.next = next,
            Err((n, e)) => {
                self.failed = true;
                return Some(Err(read_error(&self.file.path, n, e)));
            }
        }
        let options = ParseOptions {
            default_calling_convention: self.call_conv,
            ..ParseOptions::default()
        };
        let r = parse_part(&self.file.path, &text, first, options).and_then(|t| {
            let mut fs = t.functions.into_iter();
            match (fs.next(), fs.next()) {
                (Some((f, _)), None) => Ok(f),
                _ => Err(format!(
                    "{}:{first}: expected one function here",
                    self.file.path.display()
                )),
            }
        });
        self.failed = r.is_err();
        Some(r)
    }
}

/// Append lines of `reader` to `text` up to the next line that starts a function, which is
/// returned with its number (`None` at the end); `line` counts the lines read. An error comes
/// with the number of the line that could not be read.
fn read_until_function(
    reader: &mut impl std::io::BufRead,
    line: &mut usize,
    text: &mut String,
) -> Result<Option<(String, usize)>, (usize, std::io::Error)> {
    loop {
        let mut l = String::new();
        if reader.read_line(&mut l).map_err(|e| (*line + 1, e))? == 0 {
            return Ok(None);
        }
        *line += 1;
        if starts_function(&l) {
            return Ok(Some((l, *line)));
        }
        text.push_str(&l);
    }
}

fn read_error(path: &Path, line: usize, e: std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::InvalidData {
        format!("{}:{line}: cannot read: not UTF-8 text", path.display())
    } else {
        cannot_read(path, &e)
    }
}

/// The first quoted (`'x'` or `"x"` or `` `x` ``) token of a message.
fn quoted(msg: &str) -> Option<&str> {
    for q in ['\'', '"', '`'] {
        if let Some(a) = msg.find(q) {
            if let Some(len) = msg[a + 1..].find(q) {
                let t = &msg[a + 1..a + 1 + len];
                if !t.trim().is_empty() {
                    return Some(t);
                }
            }
        }
    }
    None
}

/// Parse the text of a `.clif` file.
pub fn parse_clif(path: &Path, text: &str) -> Result<ClifFile, String> {
    let test = parse_test_text(path, text)?;
    let (flags, targets) = isa_of(test.isa_spec);
    Ok(ClifFile {
        path: path.to_path_buf(),
        functions: test.functions.into_iter().map(|(f, _)| f).collect(),
        flags,
        targets,
        headerless: !has_header(text),
    })
}

/// The shared flags and the targets.
fn isa_of(spec: IsaSpec) -> (settings::Flags, Vec<OwnedTargetIsa>) {
    match spec {
        IsaSpec::None(flags) => (flags, Vec::new()),
        IsaSpec::Some(list) => {
            let flags = list
                .first()
                .map(|i| i.flags().clone())
                .unwrap_or_else(|| settings::Flags::new(settings::builder()));
            (flags, list)
        }
    }
}

/// Build an ISA for `target` (the host when `None`), with the ISA flags of `isa_flags` (when
/// given: a target line's) and then `target`'s, the shared `flags`, then `overrides`.
pub fn build_isa(
    target: Option<&Target>,
    isa_flags: Option<&dyn TargetIsa>,
    flags: &settings::Flags,
    overrides: &[(&str, &str)],
) -> Result<OwnedTargetIsa, String> {
    let mut fb = settings::builder();
    for v in flags.iter() {
        let _ = fb.set(v.name, &v.value_string());
    }
    for (k, v) in overrides {
        fb.set(k, v).map_err(|e| format!("setting {k}={v}: {e}"))?;
    }
    let mut ib = match target {
        Some(t) => t.builder()?,
        None => cranelift_native::builder()
            .map_err(|e| format!("this host is not supported by Cranelift: {e}"))?,
    };
    if let Some(isa) = isa_flags {
        for v in isa.isa_flags() {
            let _ = ib.set(v.name, &v.value_string());
        }
        if let Some(t) = target {
            t.set_flags(&mut ib)?;
        }
    }
    ib.finish(settings::Flags::new(fb))
        .map_err(|e| e.to_string())
}

/// The target line of `file` a compile for `target` (the host when `None`) takes: its first
/// target of that architecture; without `target`, its first target when none is of the
/// host's (Mergelift compiles for the ISA the input names). An error when `target` is given
/// and the file names targets, none of its architecture.
pub fn file_target<'a>(
    file: &'a ClifFile,
    target: Option<&Target>,
) -> Result<Option<&'a dyn TargetIsa>, String> {
    if file.targets.is_empty() {
        return Ok(None);
    }
    let want = target.map_or_else(Triple::host, |t| t.triple.clone());
    let same = file
        .targets
        .iter()
        .find(|i| crate::cross::same_arch(i.triple(), &want));
    match (same, target) {
        (Some(i), _) => Ok(Some(&**i)),
        (None, None) => Ok(Some(&*file.targets[0])),
        (None, Some(t)) => {
            let named: Vec<String> = (file.targets.iter())
                .map(|i| crate::cross::arch_name(i.triple()))
                .collect();
            Err(format!(
                "{}: names no {} target (its targets: {}); leave out --target to compile for \
                 the first",
                file.path.display(),
                crate::cross::arch_name(&t.triple),
                named.join(", ")
            ))
        }
    }
}

/// The ISA of a file for `target` ([`file_target`]'s target line, for `target`'s triple and
/// with its flags when given; `target` itself, or the host, when the file names none), with
/// its `set` lines, the opt level overridden by `opt`.
pub fn file_isa(
    file: &ClifFile,
    opt: Option<OptLevel>,
    target: Option<&Target>,
) -> Result<OwnedTargetIsa, String> {
    let line = file_target(file, target)?;
    // (a target line without `--target`: its own triple)
    let own;
    let target = match (target, line) {
        (Some(t), _) => Some(t),
        (None, Some(l)) => {
            own = Target {
                triple: l.triple().clone(),
                flags: Vec::new(),
            };
            Some(&own)
        }
        (None, None) => None,
    };
    let o = opt.map(|o| o.name());
    let mut overrides: Vec<(&str, &str)> = Vec::new();
    if file.headerless {
        overrides.extend_from_slice(HEADERLESS_FLAGS);
    }
    overrides.extend(o.iter().map(|o| ("opt_level", *o)));
    build_isa(target, line, &file.flags, &overrides)
        .map_err(|e| format!("{}: {e}", file.path.display()))
}

/// The settings that decide code generation, as text, to tell whether two files agree.
pub fn isa_signature(file: &ClifFile) -> String {
    let mut s: Vec<String> = file
        .flags
        .iter()
        .map(|v| format!("{}={}", v.name, v.value_string()))
        .collect();
    if file.headerless {
        s.push("headerless".into());
    }
    for t in &file.targets {
        s.push(t.triple().to_string());
        s.extend(
            t.isa_flags()
                .iter()
                .map(|v| format!("{}={}", v.name, v.value_string())),
        );
    }
    s.join(" ")
}

/// Collect `.clif` files from files and directories (recursively, sorted). Each directory is
/// walked once, however many links lead to it (a symlink loop ends), each file is taken once
/// (by its canonical path), and only regular files are taken from directories.
pub fn collect_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut seen_dirs = std::collections::HashSet::new();
    let mut seen_files = std::collections::HashSet::new();
    let mut take = |path: PathBuf, out: &mut Vec<PathBuf>| {
        let key = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if seen_files.insert(key) {
            out.push(path);
        }
    };
    for p in inputs {
        let meta = std::fs::metadata(p).map_err(|e| cannot_read(p, &e))?;
        if !meta.is_dir() {
            // Named on the command line: taken as it is (reading it says what is wrong).
            take(p.clone(), &mut out);
            continue;
        }
        let mut stack = vec![p.clone()];
        while let Some(d) = stack.pop() {
            let Ok(dm) = std::fs::metadata(&d) else {
                continue;
            };
            if !seen_dirs.insert((dm.dev(), dm.ino())) {
                continue; // walked already (a link back up, or two links to one place)
            }
            let rd = std::fs::read_dir(&d).map_err(|e| cannot_read(&d, &e))?;
            for e in rd.flatten() {
                let path = e.path();
                // Follows links; a dangling link is skipped.
                let Ok(m) = std::fs::metadata(&path) else {
                    continue;
                };
                if m.is_dir() {
                    stack.push(path);
                } else if m.is_file() && path.extension().is_some_and(|x| x == "clif") {
                    take(path, &mut out);
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Cranelift's verifier on `func`, with its panics (it has some on malformed input) turned
/// into errors: the message, one error per line.
pub fn verify_clif<'a>(
    func: &ir::Function,
    fisa: impl Into<cranelift_codegen::settings::FlagsOrIsa<'a>>,
) -> Result<(), String> {
    use jit_driver::module::{verify_caught, VerifyFailure};
    verify_caught(func, fisa).map_err(|e| match e {
        VerifyFailure::Rejected(e) => format!(
            "Cranelift's verifier rejects it: {}",
            e.to_string().trim_end()
        ),
        VerifyFailure::Panicked(p) => {
            format!("Cranelift's verifier cannot check it (it panicked: {p})")
        }
    })
}
