//! The `mergelift` command: `opt`, `run`, `size`, `report`, `gen`, `fuzz`.

mod inputs;

use anyhow::{anyhow, bail, Result};
use clap::{Parser, Subcommand};
use cranelift_codegen::ir;
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use jit_driver::{
    lift_function_with, lower_function, mark_taken, LiftContext, OptLevel, OriginalNames,
};
use mergelift_tools::runtest::{run_file, RunOptions, RunReport};
use midend::lir;
use midend::state::MergeKind;
use midend::verifier;
use midend::{PassKind, PassManager, PassState, Stats};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Exit status of a run with test failures (`run`: a run line failed; `fuzz`: a mismatch).
const EXIT_FAILURES: u8 = 1;
/// Exit status of bad input or usage, and of any other error.
const EXIT_BAD_INPUT: u8 = 2;

/// The default pipeline of `opt`, `run` and `size`: the library's (`MergeConfig::default`).
/// `lvn` is left out: on the wasm corpus it saves a few bytes at most, and every function it
/// changes must be lowered instead of compiled from its input (BENCHMARKS.md).
const DEFAULT_PASSES: &str = "merge,merge-similar";

/// The largest module `gen` makes (about 900 MB of CLIF text).
const GEN_MAX_FUNCTIONS: u64 = 1_000_000;

#[derive(Parser)]
#[command(
    name = "mergelift",
    version,
    about = "A mid-end optimizer for Cranelift: MergeFunctions and value numbering over LIR",
    long_about = "Mergelift lifts Cranelift IR into its own low-level IR (LIR), merges equal functions \
(LLVM's MergeFunctions design), value-numbers what is left, lowers back to Cranelift IR and \
compiles it for x86-64, aarch64, riscv64 or s390x (`--target`; by default the host's or the \
input's target).\n\nPasses (--passes, a comma list, run in the order given): merge, merge-similar, merge-aligned, \
lvn, gvn, dce; `none` means lift and lower only. Default: merge,merge-similar (the library's \
default). `merge-aligned` also merges functions whose instructions differ, into one body that \
branches and selects on a function identifier; `--hot NAMES` keeps named functions out of it.\n\nExit status: 0 success; 1 test \
failures (`run`: a run line failed or its file did not compile; `fuzz`: a mismatch); 2 bad input \
or usage (a file that cannot be read, parsed or verified, input with no function, an unknown \
pass, a bad option) and any other error, reported as one `error:` line on stderr. An option that has no effect as \
given is reported by one `warning:` line on stderr. A closed stdout (`| head`) ends a \
command quietly with 0."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// The help of `--passes`, alike in every subcommand (clap adds the default).
const PASSES_HELP: &str = "Comma list of passes, run in the order given: merge, merge-similar, \
merge-aligned, lvn, gvn, dce; `none`: lift and lower only";

/// The help of `--hot`.
const HOT_HELP: &str = "Functions merge-aligned must not merge (hot code that should not \
branch on a function identifier): names separated by commas, as the input spells them, without \
`%` [default: none]";

/// The help of `--threads`.
const THREADS_HELP: &str = "Threads that compile, on both sides alike (the plain compile and \
the pipeline's), so that the ratio stays fair: 1 to 64; 1 = everything on one thread";

/// How many characters of a name `report`'s tables show by default.
const DEFAULT_WIDTH: usize = 100;

/// `--width`: 0, or at least 5 (the cut keeps a head, `...` and a tail).
fn parse_width(s: &str) -> std::result::Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n == 0 || n >= 5 => Ok(n),
        Ok(_) => Err("0 (names are not cut) or at least 5".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Transform `.lir`, `.clif` or `.wasm` input and print the result on stdout.
    Opt {
        #[arg(long, default_value = DEFAULT_PASSES, help = PASSES_HELP)]
        passes: String,
        #[arg(long, value_name = "NAMES", value_delimiter = ',', help = HOT_HELP)]
        hot: Vec<String>,
        /// What to print: the LIR, the lowered Cranelift IR, or nothing.
        #[arg(long, default_value = "lir", value_parser = ["clif", "lir", "none"])]
        emit: String,
        /// Print one JSON object of statistics as the last line on stderr: counts, the time
        /// of each pass and phase (`time_ms`), and on Linux the peak resident memory after
        /// loading and at the end (`peak_rss_kib`).
        #[arg(long)]
        stats: bool,
        /// Do not run the LIR verifier after each pass (it runs by default: a pass that breaks
        /// the IR is reported by name; its cost is `time_ms.verify` in --stats).
        #[arg(long)]
        no_verify: bool,
        /// Free the body of each function a pass merges away when that pass ends, rather
        /// than at exit: a lower peak of memory on large modules, for a little more time per
        /// merged function in the passes (BENCHMARKS.md).
        #[arg(long)]
        low_memory: bool,
        /// Compile for this target where the inputs name none: an architecture (x86_64,
        /// aarch64, riscv64, s390x: Linux) or a triple (aarch64-apple-darwin), then ISA flags
        /// as a `target` line spells them ("riscv64 has_v"). Inputs with `target` lines use
        /// their line of this architecture (these flags on top) [default: the host, or the
        /// first target an input names when none is the host's]
        #[arg(long, value_name = "TRIPLE")]
        target: Option<String>,
        /// Input files (`.lir` or `.clif`), or one `.wasm` core module (with the `wasm`
        /// feature: translated to Cranelift IR as wasmtime 48 does); `-` reads standard input
        /// (its kind found by its first bytes). All functions of all inputs form one module,
        /// which must have at least one. Every input function is in the output: a merged one
        /// as a thunk calling its survivor.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Run the `; run:` lines of Cranelift test files through the pipeline and the JIT (with
    /// `--target aarch64|riscv64|s390x`: as object files under qemu-user, plainly and through
    /// the pipeline).
    ///
    /// Prints one line per failure, a line of files (run, skipped, without a run line), and
    /// last `N passed, M failed`: run lines, each counted once per target its file names (a
    /// file naming no target runs on the host). Inputs without any run line are an error.
    Run {
        #[arg(long, default_value = DEFAULT_PASSES, help = PASSES_HELP)]
        passes: String,
        /// Override the files' Cranelift opt level [default: each file's own `set
        /// opt_level`, or none]
        #[arg(long, value_parser = ["none", "speed"])]
        opt_level: Option<String>,
        /// Also print why files or targets were skipped.
        #[arg(long, short)]
        verbose: bool,
        /// Compile every function from its lowered LIR (by default a function that no pass
        /// changed is compiled from its input, exactly as given).
        #[arg(long)]
        lower_all: bool,
        /// Seconds one run line may take before it is killed and counted as failed: 0 or
        /// more, fractions allowed; 0: no limit.
        #[arg(
            long,
            default_value_t = 10.0,
            value_name = "SECONDS",
            allow_negative_numbers = true
        )]
        timeout: f64,
        /// Do not run the LIR verifier after each pass.
        #[arg(long)]
        no_verify: bool,
        /// Run the files' targets of this architecture: the host's (the default) through the
        /// JIT, or aarch64, riscv64 or s390x as object files (cranelift-object) linked with a
        /// C harness by the cross gcc and run under qemu-user, both plainly and through the
        /// pipeline (the plain compile's counts are printed beside). Needs Debian's
        /// `qemu-user` and `gcc-<arch>-linux-gnu` [default: the host's]
        #[arg(long, value_name = "TRIPLE")]
        target: Option<String>,
        /// `.clif` files or directories (searched recursively; each directory once, however
        /// many links lead to it; only regular files).
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Compile all functions of all inputs (one module) without and with the mid-end, and
    /// report functions, instructions, machine-code bytes and phase times.
    ///
    /// "functions" counts the functions compiled on each side: after the passes, the input
    /// functions that keep their own code, the thunks merged functions keep, and the bodies
    /// the passes made; a merged function with no code of its own (an alias of its
    /// survivor) is not among them.
    Size {
        #[arg(long, default_value = DEFAULT_PASSES, help = PASSES_HELP)]
        passes: String,
        /// Cranelift opt level of both compiles.
        #[arg(long, default_value = "none", value_parser = ["none", "speed"])]
        opt_level: String,
        /// Print one JSON object on stdout.
        #[arg(long)]
        json: bool,
        /// Also write the optimised module as an object file (for `size`, `nm`, bloaty). Its
        /// symbols are the input's names (`u0:12`, `fib` for `%fib`); `--map` maps them to
        /// the names `report` gives.
        #[arg(long, value_name = "FILE")]
        emit_object: Option<PathBuf>,
        /// With --emit-object: also write a map of its function symbols, one tab-separated
        /// line each: symbol, the name `report` gives it (demangled), its bytes (as `nm -S`
        /// shows them), and its code (`own code`, `thunk to SYMBOL`, `alias of SYMBOL`,
        /// `shared body`).
        #[arg(long, value_name = "FILE", requires = "emit_object")]
        map: Option<PathBuf>,
        /// Compile every function from its lowered LIR (by default a function that no pass
        /// changed is compiled from its input, exactly as given).
        #[arg(long)]
        lower_all: bool,
        /// Lift every function. By default a function no merging pass could merge (its
        /// shape, signature, blocks and opcodes, is its own) is compiled from its
        /// input without being lifted, when the passes are `merge` and `merge-similar` only.
        /// The output is the same either way.
        #[arg(long)]
        lift_all: bool,
        #[arg(long, default_value_t = 1, help = THREADS_HELP,
              value_parser = clap::value_parser!(u64).range(1..=64))]
        threads: u64,
        /// Which side compiles first in this process. The first runs in a heap the process
        /// has not used yet; the second reuses what the first freed, which can make it
        /// faster. Alternate it across runs (as `scripts/ratios.sh` does) for a fair ratio.
        #[arg(long, default_value = "plain", value_parser = ["plain", "pipeline"])]
        first: String,
        /// Declare every function local (a JIT runtime's internal functions) instead of
        /// exported. `merge-similar` folds a local function into a shared body; as the host
        /// may still fetch it, it keeps a small thunk (`--no-fetch-locals`: none).
        #[arg(long)]
        local: bool,
        /// With `--local`: the host never fetches a local function, so one folded into a
        /// shared body needs no code of its own (`MergeConfig::fetch_locals` off).
        #[arg(long)]
        no_fetch_locals: bool,
        #[arg(long, value_name = "NAMES", value_delimiter = ',', help = HOT_HELP)]
        hot: Vec<String>,
        /// Compile the pipeline's side in batches of N functions (N at least 1), in input
        /// order, as a JIT that finalizes after every N definitions: each batch merges with
        /// itself and into what earlier batches compiled [default: the whole module in one
        /// batch, as an object file's `finish` compiles it]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        batch: Option<u64>,
        /// Compile for this target where the inputs name none: an architecture (x86_64,
        /// aarch64, riscv64, s390x: Linux) or a triple (aarch64-apple-darwin), then ISA flags
        /// as a `target` line spells them ("riscv64 has_v"). Inputs with `target` lines use
        /// their line of this architecture (these flags on top) [default: the host, or the
        /// first target an input names when none is the host's]
        #[arg(long, value_name = "TRIPLE")]
        target: Option<String>,
        /// `.clif` or `.lir` files, directories of `.clif` files, one `.wasm` module (with
        /// the `wasm` feature), or `-` (standard input): one module, with at least one
        /// function.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Where the code bytes go: families of functions that merging folds into one body,
    /// largest saving first, each with its members (demangled names, code bytes, how each
    /// joined); then the largest functions and totals per kind.
    ///
    /// How a member joined: `survivor` (its code is the family's body), `exact` (merged by
    /// `merge`: equal to its survivor), `similar` (by `merge-similar`: equal up to constants and
    /// callees, folded into a shared body the pass made), `aligned` (by `merge-aligned`). A
    /// family without a survivor shares a body a pass made.
    ///
    /// FILES are one module: `.clif` (wasmtime's `;; Intermediate Representation of function
    /// <NAME>` comments name its functions), `.lir`, or a `.wasm` core module (with the `wasm`
    /// feature); `-` is standard input. Code bytes are measured as `size` measures them, for
    /// the host's ISA (or `--target`) at `--opt-level`: a family's saving is its members' plain bytes less the body
    /// they share, and what no family accounts for (thunks, extra arguments set up in
    /// callers, lowering) is reported apart, so the two add up to the saving `size` reports.
    /// The totals per kind add up too: a body a pass made counts under its members' kind
    /// (`mixed` when they are of several).
    ///
    /// Every row names one function: a name several functions share carries the wasm
    /// function's index (`[wasm function 12]`), or else its symbol (`[u0:12]`). The JSON and
    /// CSV rows also give each function's symbol, as the object file of `size
    /// --emit-object` names it.
    Report {
        #[arg(long, default_value = DEFAULT_PASSES, help = PASSES_HELP)]
        passes: String,
        /// Cranelift opt level of both compiles.
        #[arg(long, default_value = "none", value_parser = ["none", "speed"])]
        opt_level: String,
        /// How many families and largest functions to show: 0 or more [default: 10 in the
        /// table and the chart; all families and 10 largest functions in --json and --csv]
        #[arg(long, value_name = "N")]
        top: Option<usize>,
        /// JSON: {"total_bytes", "saved_bytes", "other_saved_bytes", "functions" (their
        /// number), "families": [{"saved_bytes", "body_bytes", "body_symbol", "kinds",
        /// "members": [{"name", "symbol", "bytes", "how", "kind"}]}], "largest", "kinds"}.
        /// `other_saved_bytes` is what no family accounts for, usually negative: the thunks
        /// merged functions keep, arguments set up in callers, code that lowers differently,
        /// other passes. With --diff: {"old_total_bytes", "new_total_bytes",
        /// "old_saved_bytes", "new_saved_bytes", "functions", "families": [{"name", "change",
        /// "old_count", "new_count", ...}]}.
        #[arg(long, conflicts_with = "csv")]
        json: bool,
        /// CSV, one row per family member:
        /// family,family_saved_bytes,family_body_bytes,how,kind,bytes,symbol,name.
        #[arg(long)]
        csv: bool,
        /// Also write a bar chart of the top families by saving to FILE (SVG).
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Compare two builds of one program, OLD and NEW (each a file): functions and
        /// families that appeared, grew, shrank or went away, matched by demangled name
        /// without Rust's legacy hash suffix, and without the wasm index where the name is
        /// unique in both builds (by name and index where it is not).
        #[arg(long, num_args = 2, value_names = ["OLD", "NEW"], conflicts_with_all = ["files", "csv", "svg"])]
        diff: Option<Vec<PathBuf>>,
        #[arg(long, default_value_t = 1, help = THREADS_HELP,
              value_parser = clap::value_parser!(u64).range(1..=64))]
        threads: u64,
        /// Cut names to this many characters in the table (their middle goes): 0 (names
        /// are not cut) or at least 5 [default: 100]
        #[arg(long, value_name = "CHARS", value_parser = parse_width)]
        width: Option<usize>,
        /// Show only families with a member of this kind of code, and only such functions
        /// among the largest: `function` (the program's own), or what wasmtime adds to a
        /// module: `trampoline`, `builtin`, `startup`. Totals stay the module's [default:
        /// every kind]
        #[arg(long, value_parser = ["function", "trampoline", "builtin", "startup"])]
        kind: Option<String>,
        /// Compile for this target where the inputs name none: an architecture (x86_64,
        /// aarch64, riscv64, s390x: Linux) or a triple (aarch64-apple-darwin), then ISA flags
        /// as a `target` line spells them ("riscv64 has_v"). Inputs with `target` lines use
        /// their line of this architecture (these flags on top) [default: the host, or the
        /// first target an input names when none is the host's]
        #[arg(long, value_name = "TRIPLE")]
        target: Option<String>,

        /// `.clif`, `.lir` or `.wasm` files, directories of `.clif` files, or `-` (standard
        /// input): one module, with at least one function.
        #[arg(required_unless_present = "diff")]
        files: Vec<PathBuf>,
    },
    /// Generate a deterministic template-heavy CLIF module on stdout; counts on stderr.
    Gen {
        /// Number of functions: 1 to 1,000,000 (written as they are made).
        #[arg(long, default_value_t = 1000,
              value_parser = clap::value_parser!(u64).range(1..=GEN_MAX_FUNCTIONS))]
        functions: u64,
        /// Fraction of identical duplicates (including those equal only after their callees
        /// merge): 0 to 1; the three ratios add up to at most 1.
        #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
        dup_ratio: f64,
        /// Fraction of near-duplicates (one constant apart): 0 to 1.
        #[arg(long, default_value_t = 0.1, allow_negative_numbers = true)]
        near_ratio: f64,
        /// Fraction of structural near-duplicates, 0 to 1: copies of another function
        /// with another constant and with operations inserted, removed or replaced (what
        /// `merge-aligned` merges and `merge-similar` does not).
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
        edit_ratio: f64,
        /// Seed of the generator: any number from 0 to 2^64 - 1 (the same seed gives the
        /// same module).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Instead of a template-heavy module, small functions calling each other in one
        /// shape: `chain` (each calls the next; the last calls none, so none are equal),
        /// `chain-const` (a chain with the constant i % 7), `ring` (a cycle of equal
        /// functions), `star` (callers of two equal leaves each), `tree` (a binary call
        /// tree), `fan-in` (all call one), `fan-out` (dispatchers of 64 leaves each). For
        /// measuring how merging scales with the call graph [default: none, a template-heavy
        /// module]
        #[arg(long, value_parser = ["chain", "chain-const", "ring", "star", "tree", "fan-in", "fan-out"],
              conflicts_with_all = ["dup_ratio", "near_ratio", "edit_ratio", "seed"])]
        shape: Option<String>,
        /// What to write: `clif` (Cranelift IR), or `ll`, the same module as textual LLVM IR
        /// (each Cranelift instruction as one LLVM instruction or a short fixed sequence,
        /// block parameters as phis) for timing LLVM's MergeFunctions on it
        /// (`opt -passes=mergefunc`; see `scripts/llvm_mergefunc.sh`).
        #[arg(long, default_value = "clif", value_parser = ["clif", "ll"])]
        emit: String,
    },
    /// Differential fuzzing: random CLIF modules run by cranelift-interpreter (the oracle) and
    /// through the pipeline + JIT (with `--target`: as object files under qemu-user);
    /// mismatches write minimized reproducers.
    Fuzz {
        /// Modules to generate and compare: 1 or more.
        #[arg(long, default_value_t = 1000,
              value_parser = clap::value_parser!(u64).range(1..))]
        iterations: u64,
        /// Seed of the run, from which each module's seed is drawn: any number from 0 to
        /// 2^64 - 1 (the same seed gives the same modules; a failure's reproducer names its
        /// module's seed).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[arg(long, default_value = DEFAULT_PASSES, help = PASSES_HELP)]
        passes: String,
        /// Where reproducers of failures are written (made when a failure is found).
        #[arg(long, default_value = "fuzz-failures")]
        out_dir: PathBuf,
        /// Define and finalize the pipeline side in batches of N functions, as a lazy JIT
        /// does (all declared first; `finalize_definitions` after each batch; later batches
        /// merge into the frozen code of earlier ones; a function waits for what it calls,
        /// and recursive ones share a batch): N from 1 up; 0: one batch; `random`: 1 to 4
        /// per module.
        #[arg(long, default_value = "0", value_name = "N|random")]
        batch: mergelift_tools::fuzz::BatchMode,
        /// With --batch: let a function take the address of one defined in an earlier batch
        /// (by default the two share a batch). Exercises the late thunks MergeModule gives a
        /// function merged away in an earlier batch when a later one takes its address.
        #[arg(long)]
        late_addresses: bool,
        /// Compile for this target: the host's architecture (the default) through the JIT,
        /// or aarch64, riscv64 or s390x (then ISA flags, "riscv64 has_zbb") as object files
        /// linked with a C harness and run under qemu-user, plainly and through the pipeline
        /// (with --batch: `flush` after each batch), both compared with the interpreter.
        /// Needs Debian's `qemu-user` and `gcc-<arch>-linux-gnu` [default: the host's]
        #[arg(long, value_name = "TRIPLE")]
        target: Option<String>,
    },
}

/// The last panic's message and place. Cranelift panics on some input it cannot compile; the
/// tools catch those panics and report them as errors naming the function, so the default
/// hook's report (with a backtrace) would only repeat them as noise.
static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn main() -> ExitCode {
    let cli = Cli::parse();
    {
        std::panic::set_hook(Box::new(|info| {
            let p = info.payload();
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            // With `RUST_BACKTRACE` set, a backtrace (shown only if the panic is not caught).
            let bt = std::backtrace::Backtrace::capture();
            let bt = match bt.status() {
                std::backtrace::BacktraceStatus::Captured => format!("\n{bt}"),
                _ => String::new(),
            };
            if let Ok(mut last) = LAST_PANIC.lock() {
                *last = Some(format!("{msg}{at}{bt}"));
            }
        }));
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli))) {
        Ok(code) => code,
        Err(_) => {
            let msg = LAST_PANIC
                .lock()
                .ok()
                .and_then(|mut l| l.take())
                .unwrap_or_else(|| "panic".into());
            let _ = writeln!(
                std::io::stderr(),
                "error: internal error, a bug in mergelift (please report it with the input): {msg}"
            );
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

fn run(cli: Cli) -> ExitCode {
    let r = match cli.cmd {
        Cmd::Opt {
            passes,
            hot,
            emit,
            stats,
            no_verify,
            low_memory,
            target,
            files,
        } => target
            .as_deref()
            .map(target_triple)
            .transpose()
            .and_then(|target| {
                cmd_opt(
                    &passes,
                    &hot,
                    &emit,
                    stats,
                    (!no_verify, low_memory),
                    target.as_ref(),
                    &files,
                )
            }),
        Cmd::Run {
            passes,
            opt_level,
            verbose,
            lower_all,
            timeout,
            no_verify,
            target,
            files,
        } => {
            let opts = RunCli {
                opt_level: opt_level.as_deref(),
                verbose,
                lower_all,
                timeout,
                verify: !no_verify,
                target: target.as_deref(),
            };
            cmd_run(&passes, &opts, &files)
        }
        Cmd::Size {
            passes,
            opt_level,
            json,
            emit_object,
            map,
            lower_all,
            lift_all,
            threads,
            first,
            local,
            no_fetch_locals,
            hot,
            batch,
            target,
            files,
        } => cmd_size(
            &passes,
            &opt_level,
            json,
            (emit_object.as_deref(), map.as_deref()),
            SizeFlags {
                lower_all,
                lift_all,
                local,
                fetch_locals: !no_fetch_locals,
                hot,
                batch: batch.map(|b| b as usize),
                target,
            },
            (threads as usize, first == "pipeline"),
            &files,
        ),
        Cmd::Report {
            passes,
            opt_level,
            top,
            json,
            csv,
            svg,
            diff,
            threads,
            width,
            kind,
            target,
            files,
        } => cmd_report(
            &passes,
            &opt_level,
            ReportOutput {
                top,
                json,
                csv,
                svg,
                width,
                kind,
                target,
            },
            threads as usize,
            diff,
            &files,
        ),
        Cmd::Gen {
            functions,
            dup_ratio,
            near_ratio,
            edit_ratio,
            seed,
            shape,
            emit,
        } => match shape {
            Some(shape) => cmd_gen_shape(&shape, functions, emit == "ll"),
            None => cmd_gen(
                functions,
                [dup_ratio, near_ratio, edit_ratio],
                seed,
                emit == "ll",
            ),
        },
        Cmd::Fuzz {
            iterations,
            seed,
            passes,
            out_dir,
            batch,
            late_addresses,
            target,
        } => cmd_fuzz(
            iterations as usize,
            seed,
            &passes,
            out_dir,
            (batch, late_addresses),
            target.as_deref(),
        ),
    };
    match r {
        Ok(code) => code,
        // The reader of stdout went away (`| head`): a normal end.
        Err(e) if e.downcast_ref::<ClosedStdout>().is_some() => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e:#}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

/// Stdout was closed by its reader.
#[derive(Debug)]
struct ClosedStdout;

impl std::fmt::Display for ClosedStdout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout was closed")
    }
}

impl std::error::Error for ClosedStdout {}

fn stdout_error(e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        anyhow::Error::new(ClosedStdout)
    } else {
        anyhow!("writing to stdout: {e}")
    }
}

/// Buffered stdout whose every failure is an error: a closed pipe ([`ClosedStdout`]) or, say,
/// a full disk; never a panic.
struct Out(std::io::BufWriter<std::io::Stdout>);

impl Out {
    fn new() -> Self {
        Out(std::io::BufWriter::with_capacity(
            1 << 16,
            std::io::stdout(),
        ))
    }
    fn put(&mut self, s: &str) -> Result<()> {
        self.0.write_all(s.as_bytes()).map_err(stdout_error)
    }
    fn line(&mut self, s: &str) -> Result<()> {
        self.put(s)?;
        self.put("\n")
    }
    /// Flush: an error not reported here would be lost.
    fn finish(mut self) -> Result<()> {
        self.0.flush().map_err(stdout_error)
    }
}

fn frontend_config() -> TargetFrontendConfig {
    TargetFrontendConfig {
        default_call_conv: CallConv::SystemV,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    }
}

/// Parse `.lir` and `.clif` inputs into one LIR module. Every `.clif` function must pass
/// Cranelift's verifier, every reference to a function of the module must declare that
/// function's signature, and the lifted module must pass the LIR verifier, before any pass: a
/// fault there is the input's, and the error names its file and function. A `.clif` function
/// LIR cannot represent is passed through (returned apart, its text kept if `keep_text`).
fn load_module(
    inputs: &[inputs::Input],
    keep_text: bool,
    target: Option<&mergelift_tools::cross::Target>,
    stats: &mut Stats,
) -> Result<(lir::Module, Vec<PassedThrough>)> {
    let mut module = lir::Module::new();
    let mut ctx = LiftContext::default();
    // The file of each lifted function, by LIR function id.
    let mut file_of: Vec<usize> = Vec::new();
    let mut passed: Vec<PassedThrough> = Vec::new();
    let mut sigs = SignatureCheck::default();
    let mut lift_time = Duration::ZERO;
    let mut verify_time = Duration::ZERO;
    one_module(inputs)?;
    let files: Vec<PathBuf> = inputs.iter().map(|i| i.path.clone()).collect();
    let files = &files[..];
    for (k, input) in inputs.iter().enumerate() {
        let path = &input.path;
        if input.format == inputs::Format::Lir {
            if files.len() > 1 {
                bail!("{}: .lir input must be the only input", path.display());
            }
            let text = input.read_text()?;
            let t = Instant::now();
            let m = inputs::parse_lir(path, &text)?;
            stats.add_time("parse", t.elapsed());
            return Ok((m, passed));
        }
        // One function at a time: parsed, verified, lifted and dropped (a large module never
        // has all its text or all its Cranelift IR in memory).
        let t = Instant::now();
        let mut stream = match &input.text {
            Some(text) => mergelift_tools::input::clif_stream(
                path,
                Box::new(std::io::Cursor::new(text.clone().into_bytes())),
            ),
            None => mergelift_tools::input::open_clif(path),
        }
        .map_err(|e| anyhow!(e))?;
        let mut parse_time = t.elapsed();
        // Verify as `run` and `size` compile: for the file's target (or `--target`, or the
        // host) with its flags (a file with no `set` or `target` line keeps frame pointers, as
        // wasmtime's CLIF needs); some instructions (`get_frame_pointer`) are checked only
        // against an ISA. A file naming no target of `--target`'s architecture is an error.
        let isa = match mergelift_tools::input::file_isa(&stream.file, None, target) {
            Ok(isa) => Some(isa),
            Err(e) if target.is_some() => bail!(e),
            Err(_) => None,
        };
        loop {
            let t = Instant::now();
            let Some(f) = stream.next_function() else {
                break;
            };
            let f = f.map_err(|e| anyhow!(e))?;
            parse_time += t.elapsed();
            let f = &f;
            let t = Instant::now();
            let verified = match &isa {
                Some(isa) => mergelift_tools::input::verify_clif(f, &**isa),
                None => mergelift_tools::input::verify_clif(f, &stream.file.flags),
            };
            verified.map_err(|e| {
                anyhow!(
                    "{}: function {}: invalid input: {e}",
                    path.display(),
                    jit_driver::opmap::func_name(&f.name),
                )
            })?;
            // A name a function passed through defines (the module does not know it).
            if !sigs.passed.is_empty() {
                let name = jit_driver::opmap::func_lir_name(&f.name);
                if sigs.passed.contains_key(name.as_str()) {
                    bail!("{}: function {name} is defined twice", path.display());
                }
            }
            verify_time += t.elapsed();
            let t = Instant::now();
            let taken = ctx.taken.len();
            let read = match lift_function_with(&mut module, f, lir::Linkage::Export, &mut ctx) {
                Ok(id) => {
                    // The lifter reserves room to grow; a module held whole does not need it.
                    module.functions[id].shrink_to_fit();
                    file_of.push(k);
                    Read::Lifted(id)
                }
                Err(e) => {
                    let Some(reason) = unrepresentable(&e) else {
                        return Err(anyhow!("{}: {e}", path.display()));
                    };
                    let key = jit_driver::opmap::func_name(&f.name);
                    if module
                        .lookup_symbol(&key)
                        .and_then(|s| module.defined(s))
                        .is_some()
                    {
                        bail!("{}: function {key} is defined twice", path.display());
                    }
                    // Nothing of it reaches the passes: not the addresses it took before the
                    // lifter stopped.
                    ctx.taken.truncate(taken);
                    passed.push(PassedThrough {
                        before: module.functions.len(),
                        name: f.name.to_string(),
                        key,
                        file: k,
                        reason: reason.replace(['\n', '\r'], " "),
                        text: keep_text.then(|| f.display().to_string()),
                    });
                    Read::Passed(passed.len() as u32 - 1)
                }
            };
            lift_time += t.elapsed();
            let t = Instant::now();
            let src = Sources {
                files,
                module: &module,
                file_of: &file_of,
                passed: &passed,
            };
            sigs.record(f, read, &src);
            verify_time += t.elapsed();
        }
        stats.add_time("parse", parse_time);
    }
    let t = Instant::now();
    sigs.finish(&Sources {
        files,
        module: &module,
        file_of: &file_of,
        passed: &passed,
    })?;
    verify_time += t.elapsed();
    mark_taken(&mut module, &ctx.taken);
    stats.add_time("lift", lift_time);
    let t = Instant::now();
    for (id, f) in module.functions.iter() {
        verifier::verify_function(&module, f, true).map_err(|e| {
            anyhow!(
                "{}: invalid input (as lifted to LIR): {e}",
                files[file_of[id.as_u32() as usize]].display()
            )
        })?;
    }
    stats.add_time("verify_input", verify_time + t.elapsed());
    Ok((module, passed))
}

/// A `.clif` function that passed Cranelift's verifier but that LIR cannot represent (an
/// instruction, type, calling convention or construct the lifter does not take): `opt` passes
/// it through unmerged, as it came in.
struct PassedThrough {
    /// The number of functions lifted before it: its place among them.
    before: usize,
    /// Its name as Cranelift prints it (`%f`, `u0:3`).
    name: String,
    /// Its name as the module's symbols and errors spell it (`f`, `u0:3`:
    /// `opmap::func_name`).
    key: String,
    /// Its file, by index in the inputs.
    file: usize,
    /// Why the lifter refused it.
    reason: String,
    /// The function as Cranelift prints it (kept for `--emit clif` only).
    text: Option<String>,
}

/// Is `e` the lifter refusing a function LIR cannot represent (passed through by `opt`),
/// rather than a fault of the input that Cranelift's verifier let through (`stack_limit`
/// naming a global value that does not exist, a branch out of the layout, ...) or a name
/// defined twice, which stay errors? The lifter says which by its words: every limit of LIR
/// is "unsupported ...", "... not supported" or "LIR supports at most ...".
fn unrepresentable(e: &jit_driver::Error) -> Option<&str> {
    match e {
        jit_driver::Error::Lift { msg, .. }
            if msg.contains("unsupported")
                || msg.contains("not supported")
                || msg.contains("LIR supports at most") =>
        {
            Some(msg)
        }
        _ => None,
    }
}

/// A function read from `.clif` input: lifted into the module, or passed through (its index
/// in the list of those).
#[derive(Clone, Copy)]
enum Read {
    Lifted(lir::FuncId),
    Passed(u32),
}

/// A callee as a reference names it: the module's symbol of that name, or (when the module
/// has none: only a function that was passed through, or a reference no instruction uses,
/// names it) the name itself, by its index in `SignatureCheck::names`.
#[derive(Clone, Copy)]
enum Callee {
    Symbol(lir::Symbol),
    Name(u32),
}

/// A reference to a function the module had not defined when it was read.
struct PendingRef {
    /// The referring function and its place in reading order.
    caller: Read,
    seq: u32,
    /// Its `fnN`, the callee, and the signature it declares (by index in `sigs`).
    fref: u32,
    callee: Callee,
    sig: u32,
}

/// The module-level check that `run` and `size` get from cranelift-module, which refuses
/// (`IncompatibleSignature`) a reference `fnN = name sigN` to a function of the module whose
/// declared signature is not the function's own (parameters, returns and calling convention,
/// compared whole). `opt` reads `.clif` input one function at a time, so it records each
/// definition's signature and checks each reference against it as it goes; references to
/// functions defined later wait for the end of the input. References to names no function
/// defines (imports), libcalls and known symbols are not checked. Names are looked up in the
/// LIR module's symbols, which the lifter makes for every function and callee: the check
/// keeps no name of its own but for functions passed through.
#[derive(Default)]
struct SignatureCheck {
    /// Each distinct signature once, and its index.
    sigs: Vec<ir::Signature>,
    sig_index: HashMap<ir::Signature, u32>,
    /// The signature of each lifted function, by id.
    lifted: Vec<u32>,
    /// Functions passed through, by name (`PassedThrough::key`): their signature and index
    /// among those.
    passed: HashMap<String, (u32, u32)>,
    /// Callee names the module has no symbol for (see `Callee::Name`).
    names: Vec<String>,
    pending: Vec<PendingRef>,
    /// The first mismatch found, by the referring function's place in reading order and its
    /// `fnN`, and its message.
    first: Option<((u32, u32), String)>,
    /// Functions read so far.
    seq: u32,
    /// Scratch: a callee's name.
    name: String,
}

/// Where a function read stands, for messages: its file, name and place.
struct Sources<'a> {
    files: &'a [PathBuf],
    module: &'a lir::Module,
    file_of: &'a [usize],
    passed: &'a [PassedThrough],
}

impl Sources<'_> {
    fn file(&self, r: Read) -> &Path {
        match r {
            Read::Lifted(id) => &self.files[self.file_of[id.as_u32() as usize]],
            Read::Passed(k) => &self.files[self.passed[k as usize].file],
        }
    }
    /// The name as errors write it (`f` for `%f`, as `opmap::func_name`).
    fn name(&self, r: Read) -> String {
        match r {
            Read::Lifted(id) => self.module.functions[id].name.to_string(),
            Read::Passed(k) => self.passed[k as usize].key.clone(),
        }
    }
}

impl SignatureCheck {
    fn intern(&mut self, s: &ir::Signature) -> u32 {
        if let Some(&k) = self.sig_index.get(s) {
            return k;
        }
        let k = self.sigs.len() as u32;
        self.sigs.push(s.clone());
        self.sig_index.insert(s.clone(), k);
        k
    }

    /// Is a function named `name` defined already (lifted or passed through)?
    fn defined(&self, module: &lir::Module, name: &str) -> Option<Read> {
        if let Some(id) = module.lookup_symbol(name).and_then(|s| module.defined(s)) {
            return Some(Read::Lifted(id));
        }
        self.passed.get(name).map(|&(_, k)| Read::Passed(k))
    }

    /// The signature a function read is defined with.
    fn sig_of(&self, r: Read, passed: &[PassedThrough]) -> u32 {
        match r {
            Read::Lifted(id) => self.lifted[id.as_u32() as usize],
            Read::Passed(k) => self.passed[&passed[k as usize].key].0,
        }
    }

    /// Record function `f`, just read as `r` (lifted, or the last passed through), and check
    /// its references to functions defined already.
    fn record(&mut self, f: &ir::Function, r: Read, src: &Sources) {
        let module = src.module;
        let sig = self.intern(&f.signature);
        match r {
            Read::Lifted(id) => {
                debug_assert_eq!(self.lifted.len(), id.as_u32() as usize);
                self.lifted.push(sig);
            }
            Read::Passed(k) => {
                self.passed
                    .insert(src.passed[k as usize].key.clone(), (sig, k));
            }
        }
        let seq = self.seq;
        self.seq += 1;
        for (fr, ext) in f.dfg.ext_funcs.iter() {
            // (libcalls and known symbols name no function of the module; neither does a
            // user name the function does not declare, which cranelift-reader takes)
            let named = match &ext.name {
                ir::ExternalName::User(r) => f.params.user_named_funcs().get(*r).is_some(),
                ir::ExternalName::TestCase(_) => true,
                ir::ExternalName::LibCall(_) | ir::ExternalName::KnownSymbol(_) => false,
            };
            if !named {
                continue;
            }
            // (cranelift-reader fills a gap in the numbering of `fnN` with an entry that has
            // no signature; Cranelift neither prints nor checks it)
            let Some(declared) = f.dfg.signatures.get(ext.signature) else {
                continue;
            };
            jit_driver::opmap::write_symbol_name(&mut self.name, f, &ext.name);
            let sym = module.lookup_symbol(&self.name);
            let def = match sym.and_then(|s| module.defined(s)) {
                Some(id) => Some(Read::Lifted(id)),
                None => self.passed.get(&self.name).map(|&(_, k)| Read::Passed(k)),
            };
            let fref = fr.as_u32();
            match def {
                Some(d) => {
                    let defined = self.sig_of(d, src.passed);
                    if self.sigs[defined as usize] != *declared {
                        let msg = mismatch(
                            src,
                            r,
                            fref,
                            &self.name,
                            declared,
                            d,
                            &self.sigs[defined as usize],
                        );
                        self.note((seq, fref), msg);
                    }
                }
                None => {
                    let callee = match sym {
                        Some(s) => Callee::Symbol(s),
                        None => {
                            self.names.push(self.name.clone());
                            Callee::Name(self.names.len() as u32 - 1)
                        }
                    };
                    let sig = self.intern(declared);
                    self.pending.push(PendingRef {
                        caller: r,
                        seq,
                        fref,
                        callee,
                        sig,
                    });
                }
            }
        }
    }

    fn note(&mut self, at: (u32, u32), msg: String) {
        if self.first.as_ref().is_none_or(|(k, _)| at < *k) {
            self.first = Some((at, msg));
        }
    }

    /// Check the references to functions defined after them; the first mismatch in reading
    /// order is the error.
    fn finish(mut self, src: &Sources) -> Result<()> {
        let module = src.module;
        let pending = std::mem::take(&mut self.pending);
        for p in &pending {
            if self
                .first
                .as_ref()
                .is_some_and(|(k, _)| *k < (p.seq, p.fref))
            {
                break;
            }
            let name = match p.callee {
                Callee::Symbol(s) => module.symbol_name(s),
                Callee::Name(k) => &self.names[k as usize],
            };
            let Some(d) = self.defined(module, name) else {
                continue; // an import
            };
            let defined = self.sig_of(d, src.passed);
            if defined != p.sig {
                let msg = mismatch(
                    src,
                    p.caller,
                    p.fref,
                    name,
                    &self.sigs[p.sig as usize],
                    d,
                    &self.sigs[defined as usize],
                );
                self.note((p.seq, p.fref), msg);
                break;
            }
        }
        match self.first {
            Some((_, msg)) => Err(anyhow!(msg)),
            None => Ok(()),
        }
    }
}

/// The error of a reference whose signature is not its callee's.
fn mismatch(
    src: &Sources,
    caller: Read,
    fref: u32,
    callee: &str,
    declared: &ir::Signature,
    def: Read,
    defined: &ir::Signature,
) -> String {
    let (file, def_file) = (src.file(caller), src.file(def));
    let elsewhere = if def_file != file {
        format!(" in {}", def_file.display())
    } else {
        String::new()
    };
    format!(
        "{}: function {} refers to function {callee} (fn{fref}) with signature {declared}, but \
         {callee} is defined{elsewhere} with signature {defined}",
        file.display(),
        src.name(caller),
    )
}

/// The functions `--hot` names, for `merge-aligned`.
fn hot_functions(names: Vec<String>) -> Option<midend::passes::merge::HotFunctions> {
    (!names.is_empty()).then(|| {
        midend::passes::merge::HotFunctions::named(
            names
                .into_iter()
                .map(|n| n.trim().trim_start_matches('%').to_string()),
        )
    })
}

fn cmd_opt(
    passes: &str,
    hot: &[String],
    emit: &str,
    want_stats: bool,
    (verify, low_memory): (bool, bool),
    target: Option<&mergelift_tools::cross::Target>,
    files: &[PathBuf],
) -> Result<ExitCode> {
    let kinds = inputs::pass_list(passes)?;
    let merging = kinds.iter().any(|k| {
        matches!(
            k,
            PassKind::Merge | PassKind::MergeSimilar | PassKind::MergeAligned
        )
    });
    if low_memory && !merging {
        inputs::warn("--low-memory has no effect: --passes merges no function");
    }
    if !verify && kinds.is_empty() {
        inputs::warn("--no-verify has no effect with --passes none (no pass to verify after)");
    }
    let mut pm = PassManager::from_kinds_with(
        &kinds,
        &midend::passes::PassOptions {
            hot: hot_functions(hot.to_vec()),
            ..Default::default()
        },
    );
    pm.verify = verify;
    let mut stats = Stats::default();
    let inputs = inputs::inputs(files, &inputs::OPT)?;
    let (mut module, passed) = load_module(&inputs, emit == "clif", target, &mut stats)?;
    if module.functions.is_empty() && passed.is_empty() {
        return Err(inputs::no_function(&inputs));
    }
    inputs::check_hot(hot, &kinds, |name| {
        module
            .lookup_symbol(name)
            .and_then(|s| module.defined(s))
            .is_some()
            || passed.iter().any(|p| p.key == name)
    });
    let mut state = PassState::default();
    state.free_removed = low_memory;
    let functions_in = module.live_functions().count() + passed.len();
    let insts_before = module.inst_count();
    // Functions from here on are made by the passes (merge-similar's shared bodies).
    let n_input = module.functions.len();
    // Functions folded by merge-similar are emitted as they came in (they are local, and
    // nothing calls them any more, but the output keeps every input function).
    let input = (emit == "clif" && kinds.contains(&PassKind::MergeSimilar)).then(|| module.clone());
    let peak_after_load = midend::mem::peak_rss_kib();
    pm.run(&mut module, &mut state, &mut stats)?;
    let functions_out = module.live_functions().count() + passed.len();
    let insts_after = module.inst_count();
    let mut out = Out::new();
    match emit {
        "lir" => write_lir(&mut out, &module, &passed)?,
        "clif" => {
            let t = Instant::now();
            midend::passes::merge::thunk_merged(&mut module, &mut state);
            // Functions passed through, each in its place among the lifted ones (before the
            // bodies the passes made, which come after all input functions).
            let mut through = passed.iter().peekable();
            for (id, f) in module.functions.iter() {
                let at = (id.as_u32() as usize).min(n_input);
                while let Some(p) = through.next_if(|p| p.before <= at) {
                    out.put(p.text.as_deref().unwrap_or_default())?;
                    out.put("\n")?;
                }
                let (m, f) = if !module.removed[id] {
                    (&module, f)
                } else if let Some(input) = &input {
                    (input, &input.functions[id])
                } else {
                    continue;
                };
                let func = lower_function(m, f, &mut OriginalNames, frontend_config())?;
                out.put(&func.display().to_string())?;
                out.put("\n")?;
            }
            for p in through {
                out.put(p.text.as_deref().unwrap_or_default())?;
                out.put("\n")?;
            }
            stats.add_time("lower", t.elapsed());
        }
        _ => {}
    }
    out.finish()?;
    if want_stats {
        let count = |k: MergeKind| state.merges.iter().filter(|r| r.kind == k).count();
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
            "functions_out": functions_out,
            "merged": state.merges.len(),
            "replaced": count(MergeKind::Replaced),
            "aliased": count(MergeKind::Aliased),
            "thunked": count(MergeKind::Thunked),
            "folded": count(MergeKind::Folded),
            "passed_through": passed.len(),
            "lir_insts_before": insts_before,
            "lir_insts_after": insts_after,
            "time_ms": time,
        });
        for (k, v) in &stats.counters {
            // (`merge` counts its own merges as `merged`; above, `merged` counts every pass's,
            // as `size` does)
            let k = if k == "merged" { "merged_exact" } else { k };
            obj[k] = serde_json::json!(v);
        }
        if let (Some(load), Some(end)) = (peak_after_load, midend::mem::peak_rss_kib()) {
            obj["peak_rss_kib"] = serde_json::json!({ "after_load": load, "end": end });
        }
        let _ = writeln!(std::io::stderr(), "{obj}");
    }
    // The process ends here: the system takes back the module's memory at once, where
    // freeing it function by function would take a second on a large module.
    std::mem::forget(module);
    std::mem::forget(input);
    Ok(ExitCode::SUCCESS)
}

/// Print `module` as LIR (`lir::print::write_module`) with a comment line for each function
/// passed through, in its place among the live functions: `; not lifted: %f: reason`.
fn write_lir(out: &mut Out, module: &lir::Module, passed: &[PassedThrough]) -> Result<()> {
    let text = module.to_string();
    let comment = |p: &PassedThrough| format!("; not lifted: {}: {}\n", p.name, p.reason);
    if passed.is_empty() {
        return out.put(&text);
    }
    // The module's text is its declarations, then each live function after an empty line:
    // cut it there, by the length of each function's own text.
    let mut funcs = Vec::new();
    let mut f_text = String::new();
    for (id, f) in module.live_functions() {
        f_text.clear();
        lir::print::write_function(&mut f_text, module, f)?;
        funcs.push((id, 1 + f_text.len()));
    }
    let body: usize = funcs.iter().map(|(_, n)| n).sum();
    let Some(head) = text.len().checked_sub(body).filter(|&h| {
        text.is_char_boundary(h) && (funcs.is_empty() || text[h..].starts_with("\nfunction "))
    }) else {
        // (not the layout expected: the comments first)
        for p in passed {
            out.put(&comment(p))?;
        }
        return out.put(&text);
    };
    out.put(&text[..head])?;
    let mut at = head;
    let mut through = passed.iter().peekable();
    for (id, n) in funcs {
        while let Some(p) = through.next_if(|p| p.before <= (id.as_u32() as usize)) {
            out.put("\n")?;
            out.put(&comment(p))?;
        }
        out.put(&text[at..at + n])?;
        at += n;
    }
    for p in through {
        out.put("\n")?;
        out.put(&comment(p))?;
    }
    Ok(())
}

/// The options of `run` besides passes and files.
struct RunCli<'a> {
    opt_level: Option<&'a str>,
    verbose: bool,
    lower_all: bool,
    timeout: f64,
    verify: bool,
    target: Option<&'a str>,
}

fn cmd_run(passes: &str, cli: &RunCli, files: &[PathBuf]) -> Result<ExitCode> {
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
fn cmd_run_cross(
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
fn target_triple(s: &str) -> Result<mergelift_tools::cross::Target> {
    mergelift_tools::cross::Target::parse(s).map_err(|e| anyhow!(e))
}

/// The switches of `size` that shape the pipeline's side.
struct SizeFlags {
    lower_all: bool,
    lift_all: bool,
    local: bool,
    fetch_locals: bool,
    hot: Vec<String>,
    /// Functions per batch (`None`: one batch).
    batch: Option<usize>,
    target: Option<String>,
}

fn cmd_size(
    passes: &str,
    opt_level: &str,
    json: bool,
    (emit_object, map): (Option<&Path>, Option<&Path>),
    flags: SizeFlags,
    (threads, pipeline_first): (usize, bool),
    files: &[PathBuf],
) -> Result<ExitCode> {
    let SizeFlags {
        lower_all,
        lift_all,
        local,
        fetch_locals,
        hot,
        batch,
        target,
    } = flags;
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
    let (inputs, names, parse_ms) = read_inputs(files, &inputs::SIZE, map.is_some())?;
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
    let r = measure(&inputs, &opts, parse_ms)?;
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
        out.line(&r.to_json().to_string())?;
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
fn one_module(inputs: &[inputs::Input]) -> Result<()> {
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
/// time it took in ms. Inputs that define no function are an error.
fn read_inputs(
    files: &[PathBuf],
    accepts: &inputs::Accepts,
    with_names: bool,
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
    for input in &given {
        let text = input.read_text()?;
        let p = &input.path;
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

/// `size`'s measurement, with a progress bar on stderr once it takes more than a second
/// (never when stderr is not a terminal).
fn measure(
    inputs: &[mergelift_tools::input::ClifFile],
    opts: &mergelift_tools::size::SizeOptions,
    parse_ms: f64,
) -> Result<mergelift_tools::size::SizeReport> {
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
    let r = mergelift_tools::size::measure(inputs, opts, parse_ms, |phase, k, n| {
        if tty && !shown && started.elapsed().as_secs_f64() > 1.0 {
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            shown = true;
        }
        if k == 0 {
            bar.set_length(n as u64);
        }
        bar.set_message(phase.to_string());
        bar.set_position(k as u64 + 1);
    })
    .map_err(|e| anyhow!(e));
    bar.finish_and_clear();
    r
}

/// How `report` writes its result.
struct ReportOutput {
    top: Option<usize>,
    json: bool,
    csv: bool,
    svg: Option<PathBuf>,
    /// `None`: not given ([`DEFAULT_WIDTH`]).
    width: Option<usize>,
    kind: Option<String>,
    target: Option<String>,
}

fn cmd_report(
    passes: &str,
    opt_level: &str,
    out_opts: ReportOutput,
    threads: usize,
    diff: Option<Vec<PathBuf>>,
    files: &[PathBuf],
) -> Result<ExitCode> {
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
                ..Default::default()
            },
            ..Default::default()
        },
        opt_level: Some(opt),
        target: out_opts.target.as_deref().map(target_triple).transpose()?,
        ..Default::default()
    };
    let report_of = |files: &[PathBuf]| -> Result<mergelift_tools::report::Report> {
        let (inputs, names, parse_ms) = read_inputs(files, &inputs::REPORT, true)?;
        let size = measure(&inputs, &opts, parse_ms)?;
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
fn module_name(files: &[PathBuf]) -> String {
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

/// Write a generated CLIF module to stdout, as it is or (`ll`) as LLVM IR.
fn write_generated(
    ll: bool,
    make: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let mut out = Out::new();
    if ll {
        let mut clif = Vec::new();
        make(&mut clif)?;
        let funcs = cranelift_reader::parse_functions(std::str::from_utf8(&clif)?)
            .map_err(|e| anyhow!("the generated module does not parse: {e}"))?;
        out.put(&mergelift_tools::llvm::module_to_llvm(&funcs)?)?;
    } else {
        make(&mut out.0).map_err(stdout_error)?;
    }
    out.finish()
}

fn cmd_gen(functions: u64, ratios: [f64; 3], seed: u64, ll: bool) -> Result<ExitCode> {
    let [dup_ratio, near_ratio, edit_ratio] = ratios;
    if ratios.iter().any(|r| !(0.0..=1.0).contains(r)) || ratios.iter().sum::<f64>() > 1.0 {
        bail!(
            "--dup-ratio, --near-ratio and --edit-ratio must be in [0, 1] and add up to at most 1"
        );
    }
    let mut r = None;
    write_generated(ll, |w| {
        let opts = mergelift_tools::gen::GenOptions {
            functions: functions as usize,
            dup_ratio,
            near_ratio,
            edit_ratio,
            seed,
        };
        r = Some(mergelift_tools::gen::generate_to(&opts, w)?);
        Ok(())
    })?;
    let r = r.expect("generated");
    let _ = writeln!(
        std::io::stderr(),
        "generated {} functions ({} CLIF instructions, {} blocks, {} calls): {} identical duplicates (counting transitive ones), {} near-duplicates, {} edited duplicates",
        r.functions, r.clif_insts, r.blocks, r.calls, r.duplicates, r.near_duplicates, r.edited_duplicates
    );
    Ok(ExitCode::SUCCESS)
}

fn cmd_gen_shape(shape: &str, functions: u64, ll: bool) -> Result<ExitCode> {
    let shape = mergelift_tools::gen::CallShape::parse(shape)
        .ok_or_else(|| anyhow!("unknown shape {shape}"))?;
    let mut calls = 0;
    write_generated(ll, |w| {
        calls = mergelift_tools::gen::generate_shape(shape, functions as usize, w)?;
        Ok(())
    })?;
    let _ = writeln!(
        std::io::stderr(),
        "generated {functions} functions ({calls} calls)"
    );
    Ok(ExitCode::SUCCESS)
}

fn cmd_fuzz(
    iterations: usize,
    seed: u64,
    passes: &str,
    out_dir: PathBuf,
    (batch, late_addresses): (mergelift_tools::fuzz::BatchMode, bool),
    target: Option<&str>,
) -> Result<ExitCode> {
    inputs::pass_list(passes)?;
    if late_addresses && batch == mergelift_tools::fuzz::BatchMode::One {
        inputs::warn("--late-addresses has no effect without --batch N or --batch random");
    }
    let target = target.map(target_triple).transpose()?;
    let opts = mergelift_tools::fuzz::FuzzOptions {
        iterations,
        seed,
        passes: passes.to_string(),
        out_dir,
        batch,
        late_addresses,
    };
    let host = mergelift_tools::cross::Arch::of(&target_lexicon::Triple::host());
    let foreign = target.filter(|t| t.arch().is_some() && t.arch() != host);
    let r = match &foreign {
        Some(t) => {
            let arch = t.arch().expect("foreign");
            let tc = mergelift_tools::cross::Toolchain::find(arch).map_err(|e| anyhow!(e))?;
            mergelift_tools::fuzz_cross::fuzz(&opts, &tc, t)
        }
        None => mergelift_tools::fuzz::fuzz(&opts),
    };
    let mut out = Out::new();
    for f in &r.plain_failures {
        out.line(&format!("plain compile: {f}"))?;
    }
    for f in &r.failures {
        out.line(f)?;
    }
    if let Some(t) = &foreign {
        out.line(&format!(
            "plain compile ({}): {} modules disagree with the interpreter",
            mergelift_tools::cross::arch_name(&t.triple),
            r.plain_failed
        ))?;
    }
    out.line(&r.summary())?;
    out.finish()?;
    let _ = writeln!(
        std::io::stderr(),
        "{} modules ({} with edge cases), {} calls compared ({} trapped on both sides, {} undecided \
         by the interpreter); merged {}, merged_similar {}, merged_aligned {}",
        r.passed + r.failed,
        r.edge_modules,
        r.calls,
        r.traps,
        r.skipped_calls,
        r.stats.get("merged"),
        r.stats.get("merged_similar"),
        r.stats.get("merged_aligned"),
    );
    if batch != mergelift_tools::fuzz::BatchMode::One {
        let _ = writeln!(
            std::io::stderr(),
            "batch mode {batch}: {} modules in {} batches; merge.into_frozen {}, flushes {}, \
             compiled {}; invalid functions mixed in: {} refused at define, {} failed to \
             compile alone",
            r.batched_modules,
            r.batches,
            r.stats.get("merge.into_frozen"),
            r.stats.get("flushes"),
            r.stats.get("compiled"),
            r.stats.get("fuzz.invalid_refused"),
            r.stats.get("fuzz.invalid_failed"),
        );
    }
    Ok(if r.failed > 0 {
        ExitCode::from(EXIT_FAILURES)
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command's default pipeline is the library's.
    #[test]
    fn default_passes_are_the_librarys() {
        assert_eq!(
            midend::parse_pass_list(DEFAULT_PASSES).unwrap(),
            jit_driver::MergeConfig::default().passes
        );
    }
}
