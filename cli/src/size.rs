//! `mergelift size` and `mergelift report`: all inputs as one module, compiled without and
//! with the mid-end; the bytes and times, or the families of functions that merge.

use super::*;

/// The switches of `size` that shape the pipeline's side.
pub(super) struct SizeFlags {
    pub(super) lower_all: bool,
    pub(super) lift_all: bool,
    pub(super) local: bool,
    pub(super) fetch_locals: bool,
    pub(super) hot: Vec<String>,
    /// Functions per batch (`None`: one batch).
    pub(super) batch: Option<usize>,
    /// With `batch`: also measure one batch, and the order-limited ceiling.
    pub(super) ceiling: bool,
    pub(super) target: Option<String>,
}

pub(super) fn cmd_size(
    passes: &str,
    opt_level: &str,
    json: bool,
    (emit_object, map): (Option<&Path>, Option<&Path>),
    flags: SizeFlags,
    (threads, pipeline_first, quiet): (usize, bool, bool),
    files: &[PathBuf],
) -> Result<ExitCode> {
    let progress = Progress::new(quiet);
    let SizeFlags {
        lower_all,
        lift_all,
        local,
        fetch_locals,
        hot,
        batch,
        ceiling,
        target,
    } = flags;
    if ceiling && batch.is_none() {
        inputs::warn("--ceiling has no effect without --batch");
    }
    let target = target.as_deref().map(target_triple).transpose()?;
    let passes = inputs::pass_list(passes)?;
    if !fetch_locals && !local {
        inputs::warn("--no-fetch-locals has no effect without --local");
    }
    if lift_all {
        if lower_all {
            inputs::warn("--lift-all has no effect with --lower-all, which lifts every function");
        } else if !(passes.iter()).all(|p| matches!(p, PassKind::Merge | PassKind::MergeSimilar)) {
            inputs::warn(
                "--lift-all has no effect: every function is lifted when --passes has a pass \
                 other than merge and merge-similar",
            );
        }
    }
    let opt = OptLevel::parse(opt_level).ok_or_else(|| anyhow!("unknown opt level {opt_level}"))?;
    let (inputs, names, parse_ms) =
        read_inputs(files, &inputs::SIZE, map.is_some(), threads, &progress)?;
    inputs::check_hot(&hot, &passes, |name| {
        (inputs.iter())
            .flat_map(|f| &f.functions)
            .any(|f| jit_driver::opmap::func_name(&f.name) == name)
    });
    let opts = mergelift_tools::size::SizeOptions {
        config: jit_driver::MergeConfig {
            passes,
            threads: jit_driver::Threads::Count(threads),
            fetch_locals,
            hot: hot_functions(hot),
            debug: jit_driver::DebugOptions {
                verify_lir: false,
                lower_all,
                lift_all,
                on_stage: progress.stage_hook(),
                ..Default::default()
            },
            ..Default::default()
        },
        local,
        batch,
        opt_level: Some(opt),
        target,
        object: emit_object.is_some(),
        sides: if pipeline_first {
            mergelift_tools::size::Sides::PipelineFirst
        } else {
            mergelift_tools::size::Sides::PlainFirst
        },
    };
    let r = measure(&inputs, &opts, parse_ms, &progress)?;
    // (Saved bytes in one batch, and the most batches of `batch` could save.)
    let ceiling = match batch.filter(|_| ceiling) {
        Some(n) => {
            let one = mergelift_tools::size::SizeOptions {
                batch: None,
                object: false,
                ..opts.clone()
            };
            // (no progress shown: the bar ended with the measure above)
            let one = measure(&inputs, &one, parse_ms, &Progress::new(true))?;
            let saved = one.code_bytes_before as i64 - one.code_bytes_after as i64;
            Some((saved, mergelift_tools::size::order_limited_saving(&one, n)))
        }
        None => None,
    };
    if let (Some(path), Some(obj)) = (emit_object, &r.object) {
        std::fs::write(path, obj).map_err(|e| anyhow!("{}: cannot write: {e}", path.display()))?;
        if let Some(map) = map {
            let text = mergelift_tools::report::Report::new(&r, &names)
                .symbol_map(obj)
                .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            std::fs::write(map, text)
                .map_err(|e| anyhow!("{}: cannot write: {e}", map.display()))?;
        }
    }
    let mut out = Out::new();
    if json {
        let mut j = r.to_json();
        if let Some((one, limit)) = ceiling {
            j["one_flush_saved"] = serde_json::json!(one);
            j["order_limited_saved"] = serde_json::json!(limit);
        }
        out.line(&j.to_string())?;
    } else {
        // What the functions after are: input functions that keep code of their own, thunks
        // of merged functions, and bodies the passes made.
        let own = r.functions.iter().filter(|f| f.merged.is_none()).count();
        let thunks = (r.functions.iter())
            .filter(|f| f.merged.is_some() && f.bytes_after > 0)
            .count();
        let made = r.made.iter().filter(|f| f.bytes_after > 0).count();
        let no_code = (r.functions.iter())
            .filter(|f| f.merged.is_some() && f.bytes_after == 0)
            .count();
        out.line(&format!("{:<15} {:>10}    {:>10}", "", "plain", "pipeline"))?;
        out.line(&format!(
            "functions       {:>10} -> {:>10}  compiled: {own} with their own code, {thunks} \
             thunks of merged functions, {made} bodies the passes made",
            r.functions_in, r.functions_out
        ))?;
        out.line(&format!(
            "{:<15} {:>10}    {:>10}  {} thunked; {no_code} with no code of their own \
             (replaced {}, aliased {}, folded {})",
            "merged", "", r.merged, r.thunked, r.replaced, r.aliased, r.folded
        ))?;
        out.line(&format!(
            "LIR insts       {:>10} -> {:>10}  ({} no pass could merge, not lifted)",
            r.lir_insts_before,
            r.lir_insts_after,
            match r.not_lifted {
                1 => "1 function".to_string(),
                n => format!("{n} functions"),
            }
        ))?;
        let pct = if r.code_bytes_before > 0 {
            100.0 * (r.code_bytes_after as f64 / r.code_bytes_before as f64 - 1.0)
        } else {
            0.0
        };
        out.line(&format!(
            "code bytes      {:>10} -> {:>10}  ({pct:+.2}%)",
            r.code_bytes_before, r.code_bytes_after
        ))?;
        if let Some((one, limit)) = ceiling {
            let saved = r.code_bytes_before as i64 - r.code_bytes_after as i64;
            let share = |x: i64| match one {
                0 => 0.0,
                one => 100.0 * x as f64 / one as f64,
            };
            out.line(&format!(
                "saved bytes     {saved:>10} in batches, {one} in one batch, {limit} at most in \
                 batches (the order-limited ceiling): {:.1}% of one batch, {:.1}% of the \
                 ceiling",
                share(saved),
                match limit {
                    0 => 0.0,
                    l => 100.0 * saved as f64 / l as f64,
                }
            ))?;
        }
        let w = (r.time_ms.iter().map(|(p, _)| p.len()).max())
            .unwrap_or(0)
            .max(10);
        for (phase, ms) in &r.time_ms {
            out.line(&format!("time {phase:<w$} {ms:>10.1} ms"))?;
        }
        let before = r.time("compile_before");
        if before > 0.0 {
            let first = match r.sides {
                mergelift_tools::size::Sides::PlainFirst => "the plain compile",
                mergelift_tools::size::Sides::PipelineFirst => "the pipeline",
            };
            out.line(&format!(
                "pipeline / plain compile: {:.3} ({:.1} ms / {:.1} ms; {first} ran first, in \
                 memory the process had not used: see --first)",
                r.pipeline_ms() / before,
                r.pipeline_ms(),
                before
            ))?;
        }
    }
    out.finish()?;
    // The process ends here (see `cmd_opt`): no need to free the parsed input.
    std::mem::forget(inputs);
    Ok(ExitCode::SUCCESS)
}

/// A `.wasm` file is a module of its own: it is the only input, or an error says so.
pub(super) fn one_module(inputs: &[inputs::Input]) -> Result<()> {
    let wasm = inputs
        .iter()
        .filter(|i| i.format == inputs::Format::Wasm)
        .count();
    if wasm > 0 && inputs.len() > 1 {
        bail!(
            "a .wasm file is a module of its own: give one .wasm file, or .clif files that \
             form one module (got {} files, {wasm} of them .wasm)",
            inputs.len()
        );
    }
    Ok(())
}

/// Read and parse the inputs of `size` and `report` (`.clif`, `.lir`, `.wasm`, directories of
/// `.clif`, `-`): the files, the names of their functions (`with_names`; else none), and the
/// time it took in ms. A `.wasm` module is translated on `threads` threads. Inputs that
/// define no function are an error.
pub(super) fn read_inputs(
    files: &[PathBuf],
    accepts: &inputs::Accepts,
    with_names: bool,
    threads: usize,
    progress: &Progress,
) -> Result<(
    Vec<mergelift_tools::input::ClifFile>,
    mergelift_tools::names::FunctionNames,
    f64,
)> {
    let given = inputs::inputs(files, accepts)?;
    one_module(&given)?;
    let t = Instant::now();
    let mut parsed = Vec::new();
    let mut names = mergelift_tools::names::FunctionNames::default();
    let translate = inputs::Translate {
        threads: Some(threads),
        progress: Some(progress.translation()),
    };
    for input in &given {
        let p = &input.path;
        if input.format == inputs::Format::Wasm {
            // Parsed once, in the translation: no text to parse again.
            let funcs = (input.wasm_functions(&translate)).inspect_err(|_| progress.finish())?;
            let mut functions = Vec::with_capacity(funcs.len());
            for (symbol, f) in funcs {
                if with_names {
                    names.insert(&f.name.to_string(), &symbol);
                }
                functions.push(f);
            }
            parsed.push(mergelift_tools::input::wasm_file(p, functions).map_err(|e| anyhow!(e))?);
            continue;
        }
        let text = input.read_text()?;
        progress.phase("parse");
        if input.format == inputs::Format::Lir {
            parsed.push(inputs::lir_as_clif(p, &text)?);
            continue;
        }
        if with_names {
            names.extend(mergelift_tools::names::FunctionNames::from_clif(&text));
        }
        parsed.push(mergelift_tools::input::parse_clif(p, &text).map_err(|e| anyhow!(e))?);
    }
    if parsed.iter().all(|f| f.functions.is_empty()) {
        return Err(inputs::no_function(&given));
    }
    Ok((parsed, names, t.elapsed().as_secs_f64() * 1e3))
}

/// The progress bar of `size` and `report` on stderr: the phase by name (`translation`, with
/// the functions translated so far; `plain compile`, `passes`, `pipeline compile`), shown
/// once the command has run for a second, never when stderr is not a terminal or with
/// `--quiet`.
#[derive(Clone)]
pub(super) struct Progress {
    bar: indicatif::ProgressBar,
    /// Draw at all (stderr is a terminal and not `--quiet`).
    draw: bool,
    started: Instant,
    shown: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Cleared away: later phases (a second measure) draw nothing.
    finished: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Progress {
    pub(super) fn new(quiet: bool) -> Progress {
        let bar =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
        Progress {
            bar,
            draw: !quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()),
            started: Instant::now(),
            shown: Default::default(),
            finished: Default::default(),
        }
    }

    /// Draw from now on, once the command has run for a second.
    fn show(&self) {
        use std::sync::atomic::Ordering;
        if self.draw
            && !self.shown.load(Ordering::Relaxed)
            && self.started.elapsed().as_secs_f64() > 1.0
            && !self.shown.swap(true, Ordering::Relaxed)
        {
            self.bar
                .set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
    }

    /// A phase without a count: its name, a spinner and its time.
    fn phase(&self, name: &str) {
        if self.finished.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        self.bar.set_style(
            indicatif::ProgressStyle::with_template("{msg:>16} {spinner} {elapsed}")
                .expect("valid template"),
        );
        self.bar.set_message(name.to_string());
        self.bar
            .enable_steady_tick(std::time::Duration::from_millis(100));
        self.show();
    }

    /// What a `.wasm` translation tells: (k, n) functions.
    fn translation(&self) -> std::sync::Arc<dyn Fn(usize, usize) + Send + Sync> {
        let p = self.clone();
        let started = std::sync::Arc::new(std::sync::Once::new());
        std::sync::Arc::new(move |k, n| {
            started.call_once(|| {
                p.bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{msg:>16} [{bar:40}] {pos}/{len} functions",
                    )
                    .expect("valid template")
                    .progress_chars("=> "),
                );
                p.bar.set_message("translation");
                p.bar.set_length(n as u64);
            });
            p.bar.set_position(k as u64);
            p.show();
        })
    }

    /// The stages of the pipeline's flush as phases (`passes`, `pipeline compile`).
    fn stage_hook(&self) -> Option<jit_driver::StageHook> {
        let p = self.clone();
        Some(jit_driver::StageHook(std::sync::Arc::new(move |stage| {
            p.phase(if stage == "compile" {
                "pipeline compile"
            } else {
                stage
            })
        })))
    }

    fn finish(&self) {
        self.finished
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.bar.finish_and_clear();
    }
}

/// `size`'s measurement, with `progress` through its phases.
pub(super) fn measure(
    inputs: &[mergelift_tools::input::ClifFile],
    opts: &mergelift_tools::size::SizeOptions,
    parse_ms: f64,
    progress: &Progress,
) -> Result<mergelift_tools::size::SizeReport> {
    let r = mergelift_tools::size::measure(inputs, opts, parse_ms, |phase, _, _| {
        // (The pipeline's stages name themselves through `on_stage`.)
        if phase == "compile_before" {
            progress.phase("plain compile");
        }
    })
    .map_err(|e| anyhow!(e));
    progress.finish();
    r
}

/// How `report` writes its result.
pub(super) struct ReportOutput {
    pub(super) top: Option<usize>,
    pub(super) json: bool,
    pub(super) csv: bool,
    pub(super) svg: Option<PathBuf>,
    /// `None`: not given ([`DEFAULT_WIDTH`]).
    pub(super) width: Option<usize>,
    pub(super) kind: Option<String>,
    pub(super) target: Option<String>,
}

pub(super) fn cmd_report(
    passes: &str,
    opt_level: &str,
    out_opts: ReportOutput,
    (threads, quiet): (usize, bool),
    diff: Option<Vec<PathBuf>>,
    files: &[PathBuf],
) -> Result<ExitCode> {
    let progress = Progress::new(quiet);
    let passes = inputs::pass_list(passes)?;
    let opt = OptLevel::parse(opt_level).ok_or_else(|| anyhow!("unknown opt level {opt_level}"))?;
    if out_opts.width.is_some() && (out_opts.json || out_opts.csv) {
        inputs::warn(format_args!(
            "--width has no effect with {}: names are written whole",
            if out_opts.json { "--json" } else { "--csv" }
        ));
    }
    let width = out_opts.width.unwrap_or(DEFAULT_WIDTH);
    let opts = mergelift_tools::size::SizeOptions {
        config: jit_driver::MergeConfig {
            passes,
            threads: jit_driver::Threads::Count(threads),
            debug: jit_driver::DebugOptions {
                verify_lir: false,
                on_stage: progress.stage_hook(),
                ..Default::default()
            },
            ..Default::default()
        },
        opt_level: Some(opt),
        target: out_opts.target.as_deref().map(target_triple).transpose()?,
        ..Default::default()
    };
    let report_of = |files: &[PathBuf]| -> Result<mergelift_tools::report::Report> {
        let (inputs, names, parse_ms) =
            read_inputs(files, &inputs::REPORT, true, threads, &progress)?;
        let size = measure(&inputs, &opts, parse_ms, &progress)?;
        let mut r = mergelift_tools::report::Report::new(&size, &names);
        if let Some(k) = out_opts.kind.as_deref() {
            r.retain_kind(mergelift_tools::names::FunctionKind::parse(k).expect("clap checks it"));
        }
        Ok(r)
    };
    let top = out_opts.top.unwrap_or(10);
    let mut out = Out::new();
    if let Some(pair) = diff {
        let old = report_of(&pair[..1])?;
        let new = report_of(&pair[1..])?;
        let d = mergelift_tools::report::Diff::new(&old, &new);
        if out_opts.json {
            out.line(&d.to_json(out_opts.top).to_string())?;
        } else {
            out.put(&d.to_text(top, width))?;
        }
        out.finish()?;
        return Ok(ExitCode::SUCCESS);
    }
    let r = report_of(files)?;
    if let Some(path) = &out_opts.svg {
        std::fs::write(path, r.to_svg(top, &module_name(files)))
            .map_err(|e| anyhow!("{}: cannot write: {e}", path.display()))?;
    }
    if out_opts.json {
        out.line(&r.to_json(out_opts.top).to_string())?;
    } else if out_opts.csv {
        out.put(&r.to_csv(out_opts.top))?;
    } else {
        out.put(&r.to_text(top, width))?;
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// How a chart names the module the inputs `files` form: the file's name, or the names of
/// all.
pub(super) fn module_name(files: &[PathBuf]) -> String {
    let name = |p: &PathBuf| {
        if p == Path::new("-") {
            "<stdin>".to_string()
        } else {
            (p.file_name()).map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        }
    };
    match files {
        [one] => name(one),
        [first, rest @ ..] if rest.len() > 2 => format!("{} and {} more", name(first), rest.len()),
        _ => files.iter().map(name).collect::<Vec<_>>().join(" + "),
    }
}
