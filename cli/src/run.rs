//! `mergelift run`: the `; run:` lines of Cranelift test files, after the passes, natively or
//! under qemu for another target.

use super::*;

/// The options of `run` besides passes and files.
pub(super) struct RunCli<'a> {
    pub(super) opt_level: Option<&'a str>,
    pub(super) verbose: bool,
    pub(super) lower_all: bool,
    pub(super) timeout: f64,
    pub(super) verify: bool,
    pub(super) target: Option<&'a str>,
}

pub(super) fn cmd_run(passes: &str, cli: &RunCli, files: &[PathBuf]) -> Result<ExitCode> {
    if !(cli.timeout >= 0.0 && cli.timeout.is_finite()) {
        bail!("--timeout must be a number of seconds, 0 or more");
    }
    let opts = RunOptions {
        passes: inputs::pass_list(passes)?,
        opt_level: cli.opt_level.and_then(OptLevel::parse),
        lower_all: cli.lower_all,
        timeout: (cli.timeout > 0.0).then(|| Duration::from_secs_f64(cli.timeout)),
        verify: cli.verify,
    };
    let given = inputs::inputs(files, &inputs::RUN)?;
    let target = cli.target.map(target_triple).transpose()?;
    if target.as_ref().is_some_and(|t| !t.flags.is_empty()) {
        bail!("run --target takes an architecture or a triple, no ISA flags: each file's target lines say its flags");
    }
    if let Some(t) = target.as_ref().filter(|t| t.arch().is_some()) {
        use target_lexicon::OperatingSystem as Os;
        if !matches!(t.triple.operating_system, Os::Linux | Os::Unknown) {
            bail!(
                "run --target {}: foreign code runs on Linux under qemu-user; give the \
                 architecture alone",
                t.triple
            );
        }
    }
    if let Some(arch) = target.as_ref().and_then(|t| t.arch()) {
        if Some(arch) != mergelift_tools::cross::Arch::of(&target_lexicon::Triple::host()) {
            let paths: Vec<PathBuf> = given.iter().map(|i| i.path.clone()).collect();
            return cmd_run_cross(arch, &opts, cli.verbose, &paths);
        }
    }
    let mut report = RunReport::default();
    // Files by what became of them: run (some run line ran), skipped (no target or test
    // this host runs), without a run line, with an input error; and targets skipped in
    // files that ran.
    let (mut ran, mut skipped, mut without, mut bad, mut targets_skipped) = (0, 0, 0, 0, 0);
    for input in &given {
        let before = (
            report.passed + report.failed,
            report.skips.len(),
            report.errors.len(),
        );
        let has_runs = inputs::has_run_line(&input.path);
        run_file(&input.path, &opts, &mut report, cli.verbose);
        let skips = report.skips.len() - before.1;
        if report.errors.len() > before.2 {
            bad += 1;
        } else if report.passed + report.failed > before.0 {
            ran += 1;
            targets_skipped += skips;
        } else if skips > 0 && has_runs {
            skipped += 1;
        } else {
            // (a file without run lines is skipped too, as `test interpret` only, unless it
            // says `test run`: either way it has nothing to run)
            report.skips.truncate(before.1);
            without += 1;
        }
    }
    if ran + skipped + bad == 0 {
        let names: Vec<String> = given.iter().map(|i| i.path.display().to_string()).collect();
        match &names[..] {
            [one] => bail!("{one}: no run line in it (a `; run:` or `; print:` line)"),
            [first, rest @ ..] => bail!(
                "no run line in the {} inputs ({first} and {} more): none has a `; run:` or \
                 `; print:` line",
                names.len(),
                rest.len()
            ),
            [] => unreachable!("an empty input list is refused"),
        }
    }
    let mut out = Out::new();
    for f in &report.failures {
        out.line(f)?;
    }
    if cli.verbose {
        for (file, why) in &report.skips {
            out.line(&format!("skipped {file}: {why}"))?;
        }
    }
    let mut files_line = format!("files: {} read, {ran} run", given.len());
    if targets_skipped > 0 {
        files_line.push_str(&format!(" ({targets_skipped} of their targets skipped)"));
    }
    if skipped > 0 {
        files_line.push_str(&format!(", {skipped} skipped"));
    }
    if skipped + targets_skipped > 0 && !cli.verbose {
        files_line.push_str(" (--verbose says why)");
    }
    if without > 0 {
        files_line.push_str(&format!(", {without} without a run line"));
    }
    if bad > 0 {
        files_line.push_str(&format!(", {bad} with an input error"));
    }
    out.line(&files_line)?;
    // Run lines, each counted once per target it ran on.
    let mut summary = format!("{} passed, {} failed", report.passed, report.failed);
    if !report.errors.is_empty() {
        summary.push_str(&format!(", {} input errors", report.errors.len()));
    }
    out.line(&summary)?;
    out.finish()?;
    for e in &report.errors {
        let _ = writeln!(std::io::stderr(), "error: {e}");
    }
    Ok(if !report.errors.is_empty() {
        ExitCode::from(EXIT_BAD_INPUT)
    } else if report.failed > 0 {
        ExitCode::from(EXIT_FAILURES)
    } else {
        ExitCode::SUCCESS
    })
}

/// `run --target` for a foreign architecture: under qemu-user, plainly and through the
/// pipeline.
pub(super) fn cmd_run_cross(
    arch: mergelift_tools::cross::Arch,
    opts: &RunOptions,
    verbose: bool,
    paths: &[PathBuf],
) -> Result<ExitCode> {
    let tc = mergelift_tools::cross::Toolchain::find(arch).map_err(|e| anyhow!(e))?;
    let r = mergelift_tools::cross_run::run_files(paths, opts, &tc);
    let mut out = Out::new();
    for f in &r.plain.failures {
        out.line(&format!("plain compile: {f}"))?;
    }
    for f in &r.pipeline.failures {
        out.line(f)?;
    }
    if verbose {
        for (file, why) in &r.pipeline.skips {
            out.line(&format!("skipped {file}: {why}"))?;
        }
        out.line(&r.pipeline_summary())?;
    }
    out.line(&format!("plain compile ({arch}): {}", r.plain.summary()))?;
    out.line(&format!(
        "{} ({arch}, through the pipeline; {} fail only there)",
        r.pipeline.summary(),
        r.regressions.len()
    ))?;
    out.finish()?;
    for e in &r.pipeline.errors {
        let _ = writeln!(std::io::stderr(), "error: {e}");
    }
    Ok(if !r.pipeline.errors.is_empty() {
        ExitCode::from(EXIT_BAD_INPUT)
    } else if r.pipeline.failed > 0 {
        ExitCode::from(EXIT_FAILURES)
    } else {
        ExitCode::SUCCESS
    })
}

/// A `--target` value: an architecture name or a triple, then ISA flags.
pub(super) fn target_triple(s: &str) -> Result<mergelift_tools::cross::Target> {
    mergelift_tools::cross::Target::parse(s).map_err(|e| anyhow!(e))
}
