//! What the subcommands read, checked alike by all of them: the paths of the command line
//! (`-` is standard input), the kinds of file each subcommand takes, `.lir` for `size` and
//! `report`, and input that defines no function. And the one way options that have no
//! effect are reported: a `warning:` line on stderr.

use anyhow::{anyhow, bail, Result};
use mergelift_tools::input::{cannot_read, collect_files, not_a_regular_file, ClifFile};
use midend::lir;
use midend::verifier::{self, VerifierError};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The kind of an input: by its extension, or on standard input by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Clif,
    Lir,
    Wasm,
}

impl Format {
    fn of_path(p: &Path) -> Option<Format> {
        match p.extension()?.to_str()? {
            "clif" => Some(Format::Clif),
            "lir" => Some(Format::Lir),
            "wasm" => Some(Format::Wasm),
            _ => None,
        }
    }

    fn extension(self) -> &'static str {
        match self {
            Format::Clif => ".clif",
            Format::Lir => ".lir",
            Format::Wasm => ".wasm",
        }
    }

    /// The format of standard input: the wasm magic number; LIR's first word (`declare`,
    /// `alias`, or `function @`); else CLIF.
    fn sniff(bytes: &[u8]) -> Format {
        if bytes.starts_with(b"\0asm") {
            return Format::Wasm;
        }
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 16)]);
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with(';'))
            .unwrap_or("");
        let lir = first.starts_with("declare ")
            || first.starts_with("alias ")
            || first
                .strip_prefix("function")
                .is_some_and(|r| r.trim_start().starts_with('@'));
        if lir {
            Format::Lir
        } else {
            Format::Clif
        }
    }
}

/// One input: a file, or standard input read whole.
pub struct Input {
    /// The path as given, or `<stdin>`.
    pub path: PathBuf,
    pub format: Format,
    /// Standard input's text; `None` for a file, which its reader opens, and for a `.wasm`
    /// module on standard input (`wasm`).
    pub text: Option<String>,
    /// A `.wasm` module read from standard input, translated when its text is read.
    pub wasm: Option<Vec<u8>>,
}

/// How a `.wasm` input is translated to Cranelift IR.
#[derive(Clone, Default)]
pub struct Translate {
    /// Threads wasmtime compiles on (`None`: every core).
    pub threads: Option<usize>,
    /// Told (k, n) as the k-th of the module's n functions is translated.
    pub progress: Option<std::sync::Arc<dyn Fn(usize, usize) + Send + Sync>>,
}

/// What a subcommand reads.
pub struct Accepts {
    pub command: &'static str,
    pub formats: &'static [Format],
    /// Directories are searched for `.clif` files.
    pub directories: bool,
    /// `-` reads standard input.
    pub stdin: bool,
}

/// `opt`: files, or standard input.
pub const OPT: Accepts = Accepts {
    command: "opt",
    formats: &[Format::Clif, Format::Lir, Format::Wasm],
    directories: false,
    stdin: true,
};

/// `size` and `report`: files, directories, or standard input.
pub const SIZE: Accepts = Accepts {
    command: "size",
    formats: &[Format::Clif, Format::Lir, Format::Wasm],
    directories: true,
    stdin: true,
};

pub const REPORT: Accepts = Accepts {
    command: "report",
    ..SIZE
};

/// `run`: `.clif` run tests, files or directories.
pub const RUN: Accepts = Accepts {
    command: "run",
    formats: &[Format::Clif],
    directories: true,
    stdin: false,
};

impl Accepts {
    /// What it takes, for messages: `.clif, .lir or .wasm files, directories of .clif files,
    /// or - (standard input)`.
    fn takes(&self) -> String {
        let exts: Vec<&str> = self.formats.iter().map(|f| f.extension()).collect();
        let mut kinds = vec![match exts.split_last() {
            Some((last, [])) => format!("{last} files"),
            Some((last, rest)) => format!("{} or {last} files", rest.join(", ")),
            None => String::new(),
        }];
        if self.directories {
            kinds.push("directories of .clif files".into());
        }
        if self.stdin {
            kinds.push("- (standard input)".into());
        }
        match kinds.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{}, or {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// Is `p` standard input (`-`, or `/dev/stdin` named as such)?
fn is_stdin(p: &Path) -> bool {
    p == Path::new("-") || p == Path::new("/dev/stdin")
}

/// The inputs of a subcommand, from the paths of its command line, in order. Every path is
/// checked the same way whatever the subcommand (it exists, can be read, and is a regular
/// file, or a directory where the subcommand searches them, or `-`), and its kind is one
/// the subcommand takes. Directories are searched for `.clif` files (one with none is an
/// error); a file is taken once however often or however it is named.
pub fn inputs(paths: &[PathBuf], accepts: &Accepts) -> Result<Vec<Input>> {
    let mut out: Vec<Input> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut stdin_read = false;
    for p in paths {
        if is_stdin(p) {
            if !accepts.stdin {
                bail!(
                    "{}: {} does not read standard input: it takes {}",
                    p.display(),
                    accepts.command,
                    accepts.takes()
                );
            }
            if stdin_read {
                bail!("{}: standard input is named twice", p.display());
            }
            stdin_read = true;
            out.push(read_stdin(accepts)?);
            continue;
        }
        let meta = std::fs::metadata(p).map_err(|e| anyhow!(cannot_read(p, &e)))?;
        let files = if meta.is_dir() {
            if !accepts.directories {
                bail!(
                    "{}: cannot read: a directory ({} takes {})",
                    p.display(),
                    accepts.command,
                    accepts.takes()
                );
            }
            let files = collect_files(std::slice::from_ref(p)).map_err(|e| anyhow!(e))?;
            if files.is_empty() {
                bail!(
                    "{}: no .clif file in this directory ({} takes {})",
                    p.display(),
                    accepts.command,
                    accepts.takes()
                );
            }
            files
        } else {
            if !meta.is_file() {
                let msg = not_a_regular_file(p, &meta);
                match msg.strip_suffix(')').filter(|_| accepts.stdin) {
                    Some(m) => bail!("{m}; `-` reads standard input)"),
                    None => bail!(msg),
                }
            }
            std::fs::File::open(p).map_err(|e| anyhow!(cannot_read(p, &e)))?;
            vec![p.clone()]
        };
        for f in files {
            let format = Format::of_path(&f)
                .filter(|k| accepts.formats.contains(k))
                .ok_or_else(|| {
                    anyhow!(
                        "{}: not an input {} takes, by its name: it takes {}",
                        f.display(),
                        accepts.command,
                        accepts.takes()
                    )
                })?;
            let key = std::fs::canonicalize(&f).unwrap_or_else(|_| f.clone());
            if seen.insert(key) {
                out.push(Input {
                    path: f,
                    format,
                    text: None,
                    wasm: None,
                });
            }
        }
    }
    Ok(out)
}

/// Standard input, read whole, its format found by its first bytes.
fn read_stdin(accepts: &Accepts) -> Result<Input> {
    let path = PathBuf::from("<stdin>");
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(mergelift_tools::input::MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| anyhow!(cannot_read(&path, &e)))?;
    if bytes.len() as u64 > mergelift_tools::input::MAX_INPUT_BYTES {
        bail!(
            "{}: cannot read: more than the {} bytes an input may have",
            path.display(),
            mergelift_tools::input::MAX_INPUT_BYTES
        );
    }
    let format = Format::sniff(&bytes);
    if !accepts.formats.contains(&format) {
        bail!(
            "{}: {} does not take {} input",
            path.display(),
            accepts.command,
            format.extension()
        );
    }
    if format == Format::Wasm {
        // (translated when read: checked now, with the module's threads later)
        no_wasm(&path)?;
        return Ok(Input {
            path,
            format,
            text: None,
            wasm: Some(bytes),
        });
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow!("{}: cannot read: not UTF-8 text", path.display()))?;
    Ok(Input {
        path,
        format,
        text: Some(text),
        wasm: None,
    })
}

#[cfg(feature = "wasm")]
fn no_wasm(_: &Path) -> Result<()> {
    Ok(())
}

#[cfg(not(feature = "wasm"))]
fn no_wasm(path: &Path) -> Result<()> {
    bail!(
        "{}: this mergelift was built without WebAssembly input (build it with `--features \
         wasm`)",
        path.display()
    )
}

#[cfg(feature = "wasm")]
fn translation(t: &Translate) -> mergelift_tools::wasm::Translation {
    let mut translation = mergelift_tools::wasm::Translation::default();
    if let Some(n) = t.threads {
        translation.threads = n;
    }
    translation.progress = t.progress.clone();
    translation
}

impl Input {
    /// Its whole text: standard input's, or the file's (a `.wasm` module translated to CLIF
    /// on every core).
    pub fn read_text(&self) -> Result<String> {
        self.read_text_with(&Translate::default())
    }

    /// Its whole text, a `.wasm` module translated as `t` says.
    #[cfg(feature = "wasm")]
    pub fn read_text_with(&self, t: &Translate) -> Result<String> {
        let path = &self.path;
        match (&self.text, &self.wasm) {
            (Some(text), _) => Ok(text.clone()),
            (None, Some(bytes)) => mergelift_tools::wasm::wasm_to_clif_with(bytes, &translation(t))
                .map_err(|e| anyhow!("{}: {e}", path.display())),
            (None, None) => mergelift_tools::input::read_text_with(path, &translation(t))
                .map_err(|e| anyhow!(e)),
        }
    }

    /// A `.wasm` module's functions, each with its symbol, translated as `t` says.
    #[cfg(feature = "wasm")]
    pub fn wasm_functions(
        &self,
        t: &Translate,
    ) -> Result<Vec<(String, cranelift_codegen::ir::Function)>> {
        let path = &self.path;
        match &self.wasm {
            Some(bytes) => mergelift_tools::wasm::wasm_to_functions(bytes, &translation(t))
                .map_err(|e| anyhow!("{}: {e}", path.display())),
            None => mergelift_tools::input::read_wasm_functions(path, &translation(t))
                .map_err(|e| anyhow!(e)),
        }
    }

    /// Without the `wasm` feature: the error a `.wasm` input gets.
    #[cfg(not(feature = "wasm"))]
    pub fn wasm_functions(
        &self,
        _: &Translate,
    ) -> Result<Vec<(String, cranelift_codegen::ir::Function)>> {
        no_wasm(&self.path)?;
        Ok(Vec::new())
    }

    /// Its whole text (without the `wasm` feature there is no `.wasm` input to translate).
    #[cfg(not(feature = "wasm"))]
    pub fn read_text_with(&self, t: &Translate) -> Result<String> {
        // (no module to translate: a `.wasm` file is refused by its reader)
        let _ = (&t.threads, &t.progress);
        match &self.text {
            Some(t) => Ok(t.clone()),
            None => mergelift_tools::input::read_text(&self.path).map_err(|e| anyhow!(e)),
        }
    }
}

/// The error of inputs that define no function.
pub fn no_function(inputs: &[Input]) -> anyhow::Error {
    let names: Vec<String> = inputs
        .iter()
        .map(|i| i.path.display().to_string())
        .collect();
    match &names[..] {
        [one] => anyhow!("{one}: no function in it (an input must define at least one)"),
        _ => anyhow!(
            "no function in the inputs {} (they must define at least one)",
            names.join(", ")
        ),
    }
}

/// Parse and verify `.lir` text: every verifier error with its line; opaque instructions are
/// checked as lowering needs them.
pub fn parse_lir(path: &Path, text: &str) -> Result<lir::Module> {
    let (m, lines) =
        lir::parse::parse_module_with_lines(text).map_err(|e| anyhow!("{}:{e}", path.display()))?;
    verifier::verify_module_for_lowering(&m, true).map_err(|errs| {
        let at = |e: &VerifierError| match lines.error_line(e) {
            Some(n) => format!("{}:{n}: {e}", path.display()),
            None => format!("{}: {e}", path.display()),
        };
        let mut msg = at(&errs.0[0]);
        for e in &errs.0[1..] {
            msg.push_str("\n    ");
            msg.push_str(&at(e));
        }
        anyhow!(msg)
    })?;
    Ok(m)
}

/// A `.lir` module as the Cranelift IR `size` and `report` compile: each function lowered
/// as `opt --emit clif` prints it (a function merged away, an alias, is not there: its
/// survivor is).
pub fn lir_as_clif(path: &Path, text: &str) -> Result<ClifFile> {
    let m = parse_lir(path, text)?;
    let mut clif = String::new();
    for (_, f) in m.live_functions() {
        let func = jit_driver::lower_function(
            &m,
            f,
            &mut jit_driver::OriginalNames,
            crate::frontend_config(),
        )
        .map_err(|e| anyhow!("{}: function {}: {e}", path.display(), f.name))?;
        clif.push_str(&func.display().to_string());
        clif.push('\n');
    }
    mergelift_tools::input::parse_clif(path, &clif)
        .map_err(|e| anyhow!("{}: its functions as Cranelift IR: {e}", path.display()))
}

/// Does the `.clif` file at `path` have a run line (a comment `; run: ...` or `; print:
/// ...`, as cranelift-reader reads them)? A file that cannot be read has none.
pub fn has_run_line(path: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with(';') && {
            let rest = l.trim_start_matches([' ', ';']);
            ["run", "print"].iter().any(|w| {
                rest.strip_prefix(w).is_some_and(|after| {
                    !after.starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            })
        }
    })
}

/// Report an option that has no effect as given: one `warning:` line on stderr.
pub fn warn(msg: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "warning: {msg}");
}

/// A pass list (`--passes`), with a warning for a pass listed more than once (it runs each
/// time it is listed).
pub fn pass_list(list: &str) -> Result<Vec<midend::PassKind>> {
    let passes = midend::parse_pass_list(list)?;
    let mut warned = Vec::new();
    for p in &passes {
        let n = passes.iter().filter(|q| *q == p).count();
        if n > 1 && !warned.contains(p) {
            warned.push(*p);
            warn(format_args!(
                "--passes lists {} {n} times: it runs {n} times",
                p.name()
            ));
        }
    }
    Ok(passes)
}

/// `--hot`: a warning when it cannot have an effect, because `merge-aligned` (the only pass
/// it affects) is not in `passes`, or for names no function of the input has (`defined`).
pub fn check_hot(hot: &[String], passes: &[midend::PassKind], defined: impl Fn(&str) -> bool) {
    if hot.is_empty() {
        return;
    }
    if !passes.contains(&midend::PassKind::MergeAligned) {
        warn(
            "--hot has no effect: it keeps functions out of merge-aligned, which --passes does \
             not run",
        );
        return;
    }
    let missing: Vec<&str> = (hot.iter())
        .map(|n| n.trim().trim_start_matches('%'))
        .filter(|n| !defined(n))
        .collect();
    if !missing.is_empty() {
        warn(format_args!(
            "--hot names no function of the input: {}",
            missing.join(", ")
        ));
    }
}
