//! The `mergelift` command: `opt`, `run`, `size`, `report`, `gen`, `fuzz`.

mod generate;
mod inputs;
mod load;
mod mem;
mod opt;
mod run;
mod size;

use anyhow::{anyhow, bail, Result};
use clap::{Parser, Subcommand};
use cranelift_codegen::ir;
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
use generate::*;
use jit_driver::{
    lift_function_with, lower_function, mark_taken, LiftContext, OptLevel, OriginalNames,
};
use load::*;
use mergelift_tools::runtest::{run_file, RunOptions, RunReport};
use midend::lir;
use midend::state::MergeKind;
use midend::verifier;
use midend::{PassKind, PassManager, PassState, Stats};
use opt::*;
use run::*;
use size::*;
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

/// The help of `--threads` of `size` and `report`.
const THREADS_HELP: &str = "Threads that compile, on both sides alike (the plain compile and \
the pipeline's), so that the ratio stays fair, and that translate a .wasm module: 1 to 64; 1 = \
everything on one thread. The output is the same for any number [default: every core, at \
most 64]";

/// The help of `--quiet`.
const QUIET_HELP: &str = "Show no progress bar (one is shown on stderr, when it is a \
terminal, once the command has run for a second: the phase and its progress)";

/// `--threads` as given, or every core (at most 64).
fn threads_or_cores(threads: Option<u64>) -> usize {
    threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get().min(64)),
        |n| n as usize,
    )
}

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
        /// The output is the same either way in one batch (with --batch, a family of
        /// merge-similar may differ by a member: a function compiled unlifted is found again
        /// by its print).
        #[arg(long)]
        lift_all: bool,
        #[arg(long, help = THREADS_HELP, value_parser = clap::value_parser!(u64).range(1..=64))]
        threads: Option<u64>,
        #[arg(long, short, help = QUIET_HELP)]
        quiet: bool,
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
        /// With --batch: also compile the pipeline's side in one batch, and report what one
        /// batch saves beside the order-limited ceiling: what merging could save when each
        /// function merges only with functions of its own batch or an earlier one (a family
        /// of merge-similar whose first batch holds one member keeps that member's code)
        #[arg(long)]
        ceiling: bool,
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
        #[arg(long, help = THREADS_HELP, value_parser = clap::value_parser!(u64).range(1..=64))]
        threads: Option<u64>,
        #[arg(long, short, help = QUIET_HELP)]
        quiet: bool,
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
        /// With --batch: the threads each batch of the pipeline side compiles on, 1 to 64
        /// (`MergeConfig::threads`: `Threads::Count(N)`, which starts them for any batch of
        /// two functions or more) [default: `MergeModule`'s, under which a fuzzed batch,
        /// below 1,000 instructions, compiles on the caller's thread]
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
        threads: Option<u64>,
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
            quiet,
            first,
            local,
            no_fetch_locals,
            hot,
            batch,
            ceiling,
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
                ceiling,
                target,
            },
            (threads_or_cores(threads), first == "pipeline", quiet),
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
            quiet,
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
            (threads_or_cores(threads), quiet),
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
            threads,
            target,
        } => cmd_fuzz(
            iterations as usize,
            seed,
            &passes,
            out_dir,
            (batch, late_addresses, threads),
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

/// The functions `--hot` names, for `merge-aligned`.
fn hot_functions(names: Vec<String>) -> Option<midend::passes::aligned::HotFunctions> {
    (!names.is_empty()).then(|| {
        midend::passes::aligned::HotFunctions::named(
            names
                .into_iter()
                .map(|n| n.trim().trim_start_matches('%').to_string()),
        )
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
