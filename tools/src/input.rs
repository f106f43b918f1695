//! Reading the inputs of the tools: collecting `.clif` files from directories, reading and
//! parsing them with cranelift-reader, and choosing the ISA their `set` and `target` lines ask
//! for.

use cranelift_codegen::ir;
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_reader::{parse_test, IsaSpec, ParseOptions};
use jit_driver::OptLevel;
use std::path::{Path, PathBuf};

/// A parsed `.clif` file: its functions and the ISA settings its header asks for.
pub struct ClifFile {
    pub path: PathBuf,
    pub functions: Vec<ir::Function>,
    /// The `set` lines (shared flags) and, when the file names targets, the first x86-64 one.
    pub flags: settings::Flags,
    pub target: Option<OwnedTargetIsa>,
    /// The file names targets, but none is x86-64.
    pub foreign_only: bool,
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

/// Read `path` as UTF-8 text.
pub fn read_text(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))
}

/// Parse the text of a `.clif` file.
pub fn parse_clif(path: &Path, text: &str) -> Result<ClifFile, String> {
    let test = parse_test(text, ParseOptions::default()).map_err(|e| {
        format!(
            "{}:{}: {}",
            path.display(),
            e.location.line_number,
            e.message
        )
    })?;
    let (flags, target, foreign_only) = match test.isa_spec {
        IsaSpec::None(flags) => (flags, None, false),
        IsaSpec::Some(list) => {
            let flags = list
                .first()
                .map(|i| i.flags().clone())
                .unwrap_or_else(|| settings::Flags::new(settings::builder()));
            let x64 = list
                .into_iter()
                .find(|i| i.triple().architecture == target_lexicon::Architecture::X86_64);
            let foreign = x64.is_none();
            (flags, x64, foreign)
        }
    };
    Ok(ClifFile {
        path: path.to_path_buf(),
        functions: test.functions.into_iter().map(|(f, _)| f).collect(),
        flags,
        target,
        foreign_only,
        headerless: !has_header(text),
    })
}

/// Rebuild an ISA: `base`'s triple and ISA flags (the host's when `base` is `None`), the
/// shared `flags`, then `overrides`.
pub fn build_isa(
    base: Option<&dyn TargetIsa>,
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
    let ib = match base {
        Some(isa) => {
            let mut ib =
                cranelift_codegen::isa::lookup(isa.triple().clone()).map_err(|e| e.to_string())?;
            for v in isa.isa_flags() {
                let _ = ib.set(v.name, &v.value_string());
            }
            ib
        }
        None => cranelift_native::builder()
            .map_err(|e| format!("this host is not supported by Cranelift: {e}"))?,
    };
    ib.finish(settings::Flags::new(fb))
        .map_err(|e| e.to_string())
}

/// The ISA of a file (its x86-64 target, or the host, with its `set` lines), the opt level
/// overridden by `opt`.
pub fn file_isa(file: &ClifFile, opt: Option<OptLevel>) -> Result<OwnedTargetIsa, String> {
    if file.foreign_only {
        return Err(format!(
            "{}: names no x86_64 target (Mergelift compiles for x86-64)",
            file.path.display()
        ));
    }
    let o = opt.map(|o| o.name());
    let mut overrides: Vec<(&str, &str)> = Vec::new();
    if file.headerless {
        overrides.extend_from_slice(HEADERLESS_FLAGS);
    }
    overrides.extend(o.iter().map(|o| ("opt_level", *o)));
    build_isa(file.target.as_deref(), &file.flags, &overrides)
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
    if let Some(t) = &file.target {
        s.push(t.triple().to_string());
        s.extend(
            t.isa_flags()
                .iter()
                .map(|v| format!("{}={}", v.name, v.value_string())),
        );
    }
    s.join(" ")
}

/// Collect `.clif` files from files and directories (recursively, sorted).
pub fn collect_files(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for p in inputs {
        if p.is_dir() {
            let mut stack = vec![p.clone()];
            while let Some(d) = stack.pop() {
                let rd = std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
                for e in rd.flatten() {
                    let path = e.path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path.extension().is_some_and(|x| x == "clif") {
                        out.push(path);
                    }
                }
            }
        } else if p.exists() {
            out.push(p.clone());
        } else {
            return Err(format!("{}: no such file or directory", p.display()));
        }
    }
    out.sort();
    Ok(out)
}
