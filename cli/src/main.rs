//! The `mergelift` command: `opt`, `run`, `size`, `gen`, `fuzz`.

use anyhow::{anyhow, bail, Context as _, Result};
use clap::{Parser, Subcommand};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use jit_driver::{lift_functions, lower_function, OptLevel, OriginalNames};
use mergelift_tools::input::collect_files;
use mergelift_tools::runtest::{run_file, RunOptions, RunReport};
use midend::lir::{self, MergeKind};
use midend::{PassManager, Stats};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "mergelift",
    version,
    about = "A mid-end optimizer for Cranelift: MergeFunctions and value numbering over LIR",
    long_about = "Mergelift lifts Cranelift IR into its own low-level IR (LIR), merges equal functions \
(LLVM's MergeFunctions design), value-numbers what is left, lowers back to Cranelift IR and \
JIT-compiles it for x86-64.\n\nPasses (--passes, a comma list): merge, lvn, gvn, dce; `none` means \
lift and lower only. Default: merge,lvn."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Transform `.lir` or `.clif` files and print the result on stdout.
    Opt {
        /// Comma list of passes (merge, lvn, gvn, dce; `none` = round trip only).
        #[arg(long, default_value = "merge,lvn")]
        passes: String,
        /// What to print: the LIR, the lowered Cranelift IR, or nothing.
        #[arg(long, default_value = "lir", value_parser = ["clif", "lir", "none"])]
        emit: String,
        /// Print one JSON object of statistics as the last line on stderr.
        #[arg(long)]
        stats: bool,
        /// Input files (`.lir` or `.clif`); all functions of all inputs form one module.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Run the `; run:` lines of Cranelift test files through the pipeline and the JIT.
    Run {
        #[arg(long, default_value = "merge,lvn")]
        passes: String,
        /// Override the files' Cranelift opt level (none or speed).
        #[arg(long, value_parser = ["none", "speed"])]
        opt_level: Option<String>,
        /// Also print why files or targets were skipped.
        #[arg(long, short)]
        verbose: bool,
        /// Compile every function from its lowered LIR (by default a function that no pass
        /// changed is compiled from its input, exactly as given).
        #[arg(long)]
        lower_all: bool,
        /// `.clif` files or directories (searched recursively).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Compile all functions of all inputs (one module) without and with the mid-end, and
    /// report functions, instructions, machine-code bytes and phase times.
    Size {
        #[arg(long, default_value = "merge,lvn")]
        passes: String,
        /// Cranelift opt level of both compiles.
        #[arg(long, default_value = "none", value_parser = ["none", "speed"])]
        opt_level: String,
        /// Print one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Also write the optimised module as an object file (for `size`, `nm`, bloaty).
        #[arg(long, value_name = "FILE")]
        emit_object: Option<PathBuf>,
        /// Compile every function from its lowered LIR (by default a function that no pass
        /// changed is compiled from its input, exactly as given).
        #[arg(long)]
        lower_all: bool,
        /// `.clif` files or directories.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Generate a deterministic template-heavy CLIF module on stdout; counts on stderr.
    Gen {
        /// Number of functions.
        #[arg(long, default_value_t = 1000)]
        functions: usize,
        /// Fraction of identical duplicates (including those equal only after their callees merge).
        #[arg(long, default_value_t = 0.5)]
        dup_ratio: f64,
        /// Fraction of near-duplicates (one constant apart).
        #[arg(long, default_value_t = 0.1)]
        near_ratio: f64,
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Differential fuzzing: random CLIF modules run by cranelift-interpreter (the oracle) and
    /// through the pipeline + JIT; mismatches write minimized reproducers.
    Fuzz {
        #[arg(long, default_value_t = 1000)]
        iterations: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value = "merge,lvn")]
        passes: String,
        /// Where reproducers of failures are written.
        #[arg(long, default_value = "fuzz-failures")]
        out_dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Opt {
            passes,
            emit,
            stats,
            files,
        } => cmd_opt(&passes, &emit, stats, &files),
        Cmd::Run {
            passes,
            opt_level,
            verbose,
            lower_all,
            files,
        } => cmd_run(&passes, opt_level.as_deref(), verbose, lower_all, &files),
        Cmd::Size {
            passes,
            opt_level,
            json,
            emit_object,
            lower_all,
            files,
        } => cmd_size(
            &passes,
            &opt_level,
            json,
            emit_object.as_deref(),
            lower_all,
            &files,
        ),
        Cmd::Gen {
            functions,
            dup_ratio,
            near_ratio,
            seed,
        } => cmd_gen(functions, dup_ratio, near_ratio, seed),
        Cmd::Fuzz {
            iterations,
            seed,
            passes,
            out_dir,
        } => cmd_fuzz(iterations, seed, &passes, out_dir),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn frontend_config() -> TargetFrontendConfig {
    TargetFrontendConfig {
        default_call_conv: CallConv::SystemV,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    }
}

/// Parse `.lir` and `.clif` inputs into one LIR module.
fn load_module(files: &[PathBuf], stats: &mut Stats) -> Result<lir::Module> {
    let mut module = lir::Module::new();
    let mut clif_funcs = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read", path.display()))?;
        let t = Instant::now();
        if path.extension().is_some_and(|e| e == "lir") {
            let m = lir::parse_module(&text).map_err(|e| anyhow!("{}:{e}", path.display()))?;
            stats.add_time("parse", t.elapsed());
            if files.len() > 1 {
                bail!("{}: .lir input must be the only input", path.display());
            }
            lir::verify_module(&m, true).map_err(|e| anyhow!("{}: {e}", path.display()))?;
            module = m;
        } else {
            let test =
                cranelift_reader::parse_test(&text, cranelift_reader::ParseOptions::default())
                    .map_err(|e| {
                        anyhow!(
                            "{}:{}: {}",
                            path.display(),
                            e.location.line_number,
                            e.message
                        )
                    })?;
            stats.add_time("parse", t.elapsed());
            clif_funcs.extend(test.functions.into_iter().map(|(f, _)| (path.clone(), f)));
        }
    }
    if !clif_funcs.is_empty() {
        let funcs: Vec<&cranelift_codegen::ir::Function> =
            clif_funcs.iter().map(|(_, f)| f).collect();
        module = lift_functions(funcs, stats).map_err(|e| {
            let file = clif_funcs
                .first()
                .map(|(p, _)| p.display().to_string())
                .unwrap_or_default();
            anyhow!("{file}: {e}")
        })?;
    }
    Ok(module)
}

fn cmd_opt(passes: &str, emit: &str, want_stats: bool, files: &[PathBuf]) -> Result<ExitCode> {
    let mut stats = Stats::default();
    let mut module = load_module(files, &mut stats)?;
    let functions_in = module.live_functions().count();
    let insts_before = module.inst_count();
    let mut pm = PassManager::from_names(passes)?;
    pm.run(&mut module, &mut stats)?;
    let mut out = String::new();
    match emit {
        "lir" => out = module.to_string(),
        "clif" => {
            let t = Instant::now();
            for (_, f) in module.live_functions() {
                let func = lower_function(&module, f, &mut OriginalNames, frontend_config())?;
                out.push_str(&func.display().to_string());
                out.push('\n');
            }
            stats.add_time("lower", t.elapsed());
        }
        _ => {}
    }
    print!("{out}");
    if want_stats {
        let count = |k: MergeKind| module.merges.iter().filter(|r| r.kind == k).count();
        let mut time = serde_json::Map::new();
        for (phase, d) in &stats.times {
            time.insert(phase.clone(), serde_json::json!(d.as_secs_f64() * 1e3));
        }
        for phase in ["parse", "lift", "lower"] {
            time.entry(phase.to_string())
                .or_insert(serde_json::json!(0.0));
        }
        let mut obj = serde_json::json!({
            "functions_in": functions_in,
            "functions_out": module.live_functions().count(),
            "merged": module.merges.len(),
            "replaced": count(MergeKind::Replaced),
            "aliased": count(MergeKind::Aliased),
            "thunked": count(MergeKind::Thunked),
            "lir_insts_before": insts_before,
            "lir_insts_after": module.inst_count(),
            "time_ms": time,
        });
        for (k, v) in &stats.counters {
            obj[k.as_str()] = serde_json::json!(v);
        }
        eprintln!("{obj}");
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_run(
    passes: &str,
    opt_level: Option<&str>,
    verbose: bool,
    lower_all: bool,
    files: &[PathBuf],
) -> Result<ExitCode> {
    PassManager::from_names(passes)?;
    let opts = RunOptions {
        passes: midend::parse_pass_list(passes)?,
        opt_level: opt_level.and_then(OptLevel::parse),
        lower_all,
    };
    let paths = collect_files(files).map_err(|e| anyhow!(e))?;
    let mut report = RunReport::default();
    for p in &paths {
        run_file(Path::new(p), &opts, &mut report, verbose);
    }
    for f in &report.failures {
        println!("{f}");
    }
    if verbose {
        for (file, why) in &report.skips {
            println!("skipped {file}: {why}");
        }
    }
    println!("{}", report.summary());
    Ok(if report.failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn cmd_size(
    passes: &str,
    opt_level: &str,
    json: bool,
    emit_object: Option<&Path>,
    lower_all: bool,
    files: &[PathBuf],
) -> Result<ExitCode> {
    let passes = midend::parse_pass_list(passes)?;
    let opt = OptLevel::parse(opt_level).ok_or_else(|| anyhow!("unknown opt level {opt_level}"))?;
    let paths = collect_files(files).map_err(|e| anyhow!(e))?;
    let t = Instant::now();
    let mut inputs = Vec::new();
    for p in &paths {
        let text = mergelift_tools::input::read_text(p).map_err(|e| anyhow!(e))?;
        inputs.push(mergelift_tools::input::parse_clif(p, &text).map_err(|e| anyhow!(e))?);
    }
    let parse_ms = t.elapsed().as_secs_f64() * 1e3;
    // A progress bar on stderr once the run takes more than a second; never when stderr is
    // not a terminal.
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::hidden());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:>15} [{bar:40}] {pos}/{len}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let started = Instant::now();
    let mut shown = false;
    let opts = mergelift_tools::size::SizeOptions {
        config: jit_driver::MergeConfig {
            passes,
            verify_lir: false,
            lower_all,
            ..Default::default()
        },
        opt_level: Some(opt),
        object: emit_object.is_some(),
    };
    let r = mergelift_tools::size::measure(&inputs, &opts, parse_ms, |phase, k, n| {
        if tty && !shown && started.elapsed().as_secs_f64() > 1.0 {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            shown = true;
        }
        if k == 0 {
            bar.set_length(n as u64);
            bar.set_message(phase.to_string());
        }
        bar.set_position(k as u64 + 1);
    })
    .map_err(|e| anyhow!(e))?;
    bar.finish_and_clear();
    if let (Some(path), Some(obj)) = (emit_object, &r.object) {
        std::fs::write(path, obj).with_context(|| format!("{}: cannot write", path.display()))?;
    }
    if json {
        println!("{}", r.to_json());
    } else {
        println!(
            "functions       {:>10} -> {:>10}  (merged {}: replaced {}, aliased {}, thunked {})",
            r.functions_in, r.functions_out, r.merged, r.replaced, r.aliased, r.thunked
        );
        println!(
            "LIR insts       {:>10} -> {:>10}",
            r.lir_insts_before, r.lir_insts_after
        );
        let pct = if r.code_bytes_before > 0 {
            100.0 * (r.code_bytes_after as f64 / r.code_bytes_before as f64 - 1.0)
        } else {
            0.0
        };
        println!(
            "code bytes      {:>10} -> {:>10}  ({pct:+.2}%)",
            r.code_bytes_before, r.code_bytes_after
        );
        for (phase, ms) in &r.time_ms {
            println!("time {phase:<14} {ms:>10.1} ms");
        }
        let before = r.time("compile_before");
        if before > 0.0 {
            println!(
                "pipeline / plain compile: {:.3} ({:.1} ms / {:.1} ms)",
                r.pipeline_ms() / before,
                r.pipeline_ms(),
                before
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_gen(functions: usize, dup_ratio: f64, near_ratio: f64, seed: u64) -> Result<ExitCode> {
    if !(0.0..=1.0).contains(&dup_ratio)
        || !(0.0..=1.0).contains(&near_ratio)
        || dup_ratio + near_ratio > 1.0
    {
        bail!("--dup-ratio and --near-ratio must be in [0, 1] and add up to at most 1");
    }
    let out = mergelift_tools::gen::generate(&mergelift_tools::gen::GenOptions {
        functions,
        dup_ratio,
        near_ratio,
        seed,
    });
    print!("{}", out.text);
    eprintln!(
        "generated {} functions ({} CLIF instructions, {} blocks, {} calls): {} identical duplicates (counting transitive ones), {} near-duplicates",
        out.functions, out.clif_insts, out.blocks, out.calls, out.duplicates, out.near_duplicates
    );
    Ok(ExitCode::SUCCESS)
}

fn cmd_fuzz(iterations: usize, seed: u64, passes: &str, out_dir: PathBuf) -> Result<ExitCode> {
    PassManager::from_names(passes)?;
    let r = mergelift_tools::fuzz::fuzz(&mergelift_tools::fuzz::FuzzOptions {
        iterations,
        seed,
        passes: passes.to_string(),
        out_dir,
    });
    for f in &r.failures {
        println!("{f}");
    }
    println!("{}", r.summary());
    Ok(if r.failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
