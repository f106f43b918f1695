//! Run Cranelift's `.clif` run tests through the pipeline: parse with cranelift-reader, keep
//! the targets of the host's architecture that this host can run (the other architectures run
//! under qemu-user: `cross_run`), lift every function of the file into one LIR module, run the
//! passes, JIT-compile, and execute every `; run:` and `; print:` line. Each call runs in a
//! forked child, so a trap fails that line and the run goes on.

use crate::harness::Harness;
use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::ir;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_reader::{parse_run_command, Comparison, IsaSpec, RunCommand};
use jit_driver::{MergeConfig, OptLevel};
use midend::{PassKind, Stats};
use std::path::Path;
use std::time::{Duration, Instant};

/// Options of `mergelift run`.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The passes (empty: lift only).
    pub passes: Vec<PassKind>,
    /// Override the files' `opt_level`.
    pub opt_level: Option<OptLevel>,
    /// Compile every function from its lowered LIR (`MergeConfig::lower_all`).
    pub lower_all: bool,
    /// How long one run line may take before it is killed and fails (`None`: no limit).
    pub timeout: Option<Duration>,
    /// Run the LIR verifier after every pass (`MergeConfig::verify_lir`).
    pub verify: bool,
}

/// The default time limit of one run line.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            passes: Vec::new(),
            opt_level: None,
            lower_all: false,
            timeout: Some(DEFAULT_TIMEOUT),
            verify: true,
        }
    }
}

/// What a run over files found.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// One line per failure: `file:line: %f(args) == expected, got actual`, or one line per
    /// file whose functions did not compile (its run lines all count as failed).
    pub failures: Vec<String>,
    /// Input errors, one per file: it cannot be read, does not parse, is not valid Cranelift
    /// IR, or has a malformed run line (`mergelift run` exits with 2).
    pub errors: Vec<String>,
    /// (file, reason) per skipped file or target.
    pub skips: Vec<(String, String)>,
    pub stats: Stats,
}

impl RunReport {
    pub fn summary(&self) -> String {
        let mut s = format!("{} passed, {} failed", self.passed, self.failed);
        if self.skipped > 0 {
            s.push_str(&format!(", {} skipped", self.skipped));
        }
        if !self.errors.is_empty() {
            s.push_str(&format!(", {} input errors", self.errors.len()));
        }
        s
    }
    pub(crate) fn fail(&mut self, line: String) {
        self.failed += 1;
        self.failures.push(line);
    }
    pub(crate) fn error(&mut self, line: String) {
        self.errors.push(line);
    }
}

/// Bool ISA flags of the host.
fn host_flags() -> Vec<(String, bool)> {
    let Ok(b) = cranelift_native::builder() else {
        return Vec::new();
    };
    let Ok(isa) = b.finish(settings::Flags::new(settings::builder())) else {
        return Vec::new();
    };
    isa.isa_flags()
        .iter()
        .filter_map(|v| v.as_bool().map(|b| (v.name.to_string(), b)))
        .collect()
}

/// Rebuild a test-file ISA for the JIT: the file's shared flags and `isa`'s triple and ISA
/// flags, but not PIC (and `opt` overriding the opt level).
fn jit_isa(
    isa: &dyn cranelift_codegen::isa::TargetIsa,
    flags: &settings::Flags,
    opt: Option<OptLevel>,
) -> Result<OwnedTargetIsa, String> {
    let mut fb = settings::builder();
    for v in flags.iter() {
        let _ = fb.set(v.name, &v.value_string());
    }
    let _ = fb.set("is_pic", "false");
    let _ = fb.set("use_colocated_libcalls", "false");
    if let Some(o) = opt {
        let _ = fb.set("opt_level", o.name());
    }
    let mut ib = cranelift_codegen::isa::lookup(isa.triple().clone()).map_err(|e| e.to_string())?;
    for v in isa.isa_flags() {
        let _ = ib.set(v.name, &v.value_string());
    }
    ib.finish(settings::Flags::new(fb))
        .map_err(|e| e.to_string())
}

pub(crate) fn line_of(text: &str, sub: &str) -> usize {
    let off = (sub.as_ptr() as usize)
        .saturating_sub(text.as_ptr() as usize)
        .min(text.len());
    text[..off].bytes().filter(|&b| b == b'\n').count() + 1
}

/// Run one call in a forked child; a signal (trap) becomes an error, and so does a call that
/// has not returned within `timeout` (the child is killed).
fn call_isolated(
    module: &Harness,
    name: &str,
    sig: &ir::Signature,
    args: &[DataValue],
    timeout: Option<Duration>,
) -> Result<Vec<DataValue>, String> {
    let slots = sig.params.len().max(sig.returns.len()).max(1);
    let mut buf = vec![0u128; slots];
    for (i, a) in args.iter().enumerate() {
        let bytes: &mut [u8] = bytemuck_slot(&mut buf[i]);
        a.write_to_slice_ne(bytes);
    }
    let mut fds = [0i32; 2];
    // SAFETY: plain POSIX calls; the child only runs the JIT code, writes to a pipe and exits.
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            return Err("pipe failed".into());
        }
        let pid = libc::fork();
        if pid < 0 {
            return Err("fork failed".into());
        }
        if pid == 0 {
            libc::close(fds[0]);
            let ok = module.call_raw(name, sig, &mut buf).is_ok();
            let len = std::mem::size_of_val(buf.as_slice());
            if ok {
                libc::write(fds[1], buf.as_ptr() as *const libc::c_void, len);
            }
            libc::_exit(if ok { 0 } else { 3 });
        }
        libc::close(fds[1]);
        let mut out = vec![0u8; std::mem::size_of_val(buf.as_slice())];
        let mut got = 0usize;
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut timed_out = false;
        while got < out.len() {
            if let Some(d) = deadline {
                // Wait for the child's answer (or its end) until the deadline.
                let left = d.saturating_duration_since(Instant::now());
                let mut pfd = libc::pollfd {
                    fd: fds[0],
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = left.as_millis().min(i32::MAX as u128) as i32;
                let r = libc::poll(&mut pfd, 1, ms);
                if r < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                    continue;
                }
                if r == 0 {
                    timed_out = true;
                    libc::kill(pid, libc::SIGKILL);
                    break;
                }
            }
            let n = libc::read(
                fds[0],
                out[got..].as_mut_ptr() as *mut libc::c_void,
                out.len() - got,
            );
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        libc::close(fds[0]);
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        if timed_out {
            return Err(format!(
                "timeout: no result after {:.1} s (the limit is set with --timeout)",
                timeout.unwrap_or_default().as_secs_f64()
            ));
        }
        if libc::WIFSIGNALED(status) {
            return Err(format!("trap (signal {})", libc::WTERMSIG(status)));
        }
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 || got != out.len() {
            return Err("the call did not complete".into());
        }
        Ok(sig
            .returns
            .iter()
            .enumerate()
            .map(|(i, r)| DataValue::read_from_slice_ne(&out[i * 16..i * 16 + 16], r.value_type))
            .collect())
    }
}

/// The first lines of a long message (a verifier error quotes the whole function).
pub(crate) fn clip(e: &str) -> String {
    const LINES: usize = 12;
    let n = e.lines().count();
    if n <= LINES {
        return e.to_string();
    }
    let mut s: String = e.lines().take(LINES).collect::<Vec<_>>().join("\n");
    s.push_str(&format!("\n    ... ({} more lines)", n - LINES));
    s
}

fn bytemuck_slot(x: &mut u128) -> &mut [u8] {
    // SAFETY: a u128 is 16 initialised bytes.
    unsafe { std::slice::from_raw_parts_mut(x as *mut u128 as *mut u8, 16) }
}

fn show(vals: &[DataValue]) -> String {
    let v: Vec<String> = vals.iter().map(|v| v.to_string()).collect();
    if v.len() == 1 {
        v[0].clone()
    } else {
        format!("[{}]", v.join(", "))
    }
}

/// Run one test file, adding to `report`.
pub fn run_file(path: &Path, opts: &RunOptions, report: &mut RunReport, verbose_skips: bool) {
    let file = path.display().to_string();
    let text = match crate::input::read_text(path) {
        Ok(t) => t,
        Err(e) => return report.error(e),
    };
    let test = match crate::input::parse_test_text(path, &text) {
        Ok(t) => t,
        Err(e) => return report.error(e),
    };
    // `test interpret` alone runs only on Cranelift's interpreter: no native target.
    if !test.commands.iter().any(|c| c.command == "run") {
        report.skipped += 1;
        report.skips.push((
            file,
            "interpret-only test (no `test run`): no native target".into(),
        ));
        return;
    }
    // The x86-64 ISAs of the file that this host can run.
    let host = host_flags();
    let mut isas: Vec<OwnedTargetIsa> = Vec::new();
    let mut reasons = Vec::new();
    match &test.isa_spec {
        IsaSpec::None(flags) => {
            match jit_driver::host_isa(opts.opt_level.unwrap_or(OptLevel::None)) {
                Ok(h) => match jit_isa(&*h, flags, opts.opt_level) {
                    Ok(i) => isas.push(i),
                    Err(e) => reasons.push(e),
                },
                Err(e) => reasons.push(e.to_string()),
            }
        }
        IsaSpec::Some(list) => {
            for isa in list {
                if !crate::cross::same_arch(isa.triple(), &target_lexicon::Triple::host()) {
                    continue;
                }
                let missing: Vec<String> = isa
                    .isa_flags()
                    .iter()
                    .filter(|v| v.as_bool() == Some(true))
                    .filter(|v| !host.iter().any(|(n, b)| n == v.name && *b))
                    .map(|v| v.name.to_string())
                    .collect();
                if !missing.is_empty() {
                    reasons.push(format!("host lacks {}", missing.join(", ")));
                    continue;
                }
                match jit_isa(&**isa, isa.flags(), opts.opt_level) {
                    Ok(i) => isas.push(i),
                    Err(e) => reasons.push(e),
                }
            }
            if isas.is_empty() && reasons.is_empty() {
                reasons.push(format!(
                    "no {} target (`--target aarch64|riscv64|s390x` runs the others under \
                     qemu-user)",
                    target_lexicon::Triple::host().architecture
                ));
            }
        }
    }
    for r in reasons {
        report.skipped += 1;
        let _ = verbose_skips;
        report.skips.push((file.clone(), r));
    }
    if isas.is_empty() {
        return;
    }
    let commands = run_lines(&test, &text, &file, report);
    if commands.is_empty() {
        return;
    }
    // The input must be valid Cranelift IR before any pass: a fault here is the input's.
    for (func, _) in &test.functions {
        if let Err(e) = crate::input::verify_clif(func, &*isas[0]) {
            return report.error(format!(
                "{file}: function {}: invalid input: {}",
                jit_driver::opmap::func_name(&func.name),
                clip(&e)
            ));
        }
    }
    let sigs: Vec<ir::Signature> = commands.iter().map(|c| c.sig.clone()).collect();
    for isa in isas {
        let funcs: Vec<ir::Function> = test.functions.iter().map(|(f, _)| f.clone()).collect();
        let config = MergeConfig {
            passes: opts.passes.clone(),
            debug: jit_driver::DebugOptions {
                verify_lir: opts.verify,
                lower_all: opts.lower_all,
                ..Default::default()
            },
            ..Default::default()
        };
        let compiled = match Harness::compile(isa, funcs, config, &sigs) {
            Ok(c) => {
                report.stats.merge_from(c.stats());
                c
            }
            Err(e) => {
                // One report for the file, however many run lines it has; each line fails.
                report.fail(format!(
                    "{file}: {} run lines not run: {}",
                    commands.len(),
                    clip(&e)
                ));
                report.failed += commands.len() - 1;
                continue;
            }
        };
        for rl in &commands {
            // As in Cranelift's filetests, a run line calls the function it follows; the name
            // it spells is informational.
            let args = match &rl.cmd {
                RunCommand::Print(inv) | RunCommand::Run(inv, _, _) => &inv.args,
            };
            let got = call_isolated(&compiled, &rl.name, &rl.sig, args, opts.timeout);
            judge(report, &file, "", rl, got);
        }
    }
}

/// One `; run:` or `; print:` line of a file: its line number, the function it follows (its
/// name and signature) and the command.
pub(crate) struct RunLine {
    pub line: usize,
    pub name: String,
    pub sig: ir::Signature,
    pub cmd: RunCommand,
}

/// The run lines of `test` (the parse of `text`); a malformed one is an input error of
/// `file`.
pub(crate) fn run_lines(
    test: &cranelift_reader::TestFile,
    text: &str,
    file: &str,
    report: &mut RunReport,
) -> Vec<RunLine> {
    let mut out = Vec::new();
    for (func, details) in &test.functions {
        for c in &details.comments {
            match parse_run_command(c.text, &func.signature) {
                Ok(Some(cmd)) => out.push(RunLine {
                    line: line_of(text, c.text),
                    name: jit_driver::opmap::func_name(&func.name),
                    sig: func.signature.clone(),
                    cmd,
                }),
                Ok(None) => {}
                Err(e) => report.error(format!(
                    "{file}:{}: bad run command: {}",
                    line_of(text, c.text),
                    e.message
                )),
            }
        }
    }
    out
}

/// Count the outcome of run line `rl` of `file` in `report`: `got` is what the call returned
/// or why it did not. A failure line names the file and line (then `tag`, when not empty),
/// the call, what was expected and what came.
pub(crate) fn judge(
    report: &mut RunReport,
    file: &str,
    tag: &str,
    rl: &RunLine,
    got: Result<Vec<DataValue>, String>,
) {
    let (inv, expect) = match &rl.cmd {
        RunCommand::Print(inv) => (inv, None),
        RunCommand::Run(inv, cmp, vals) => (inv, Some((cmp, vals))),
    };
    let call = format!(
        "%{}({})",
        inv.func,
        inv.args
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let at = format!("{file}:{}:{tag}", rl.line);
    match (got, expect) {
        (Ok(_), None) => report.passed += 1,
        (Ok(actual), Some((cmp, expected))) => {
            let eq = actual.len() == expected.len()
                && actual
                    .iter()
                    .zip(expected.iter())
                    .all(|(a, b)| a.bitwise_eq(b));
            let ok = match cmp {
                Comparison::Equals => eq,
                Comparison::NotEquals => !eq,
            };
            if ok {
                report.passed += 1;
            } else {
                report.fail(format!(
                    "{at} {call} {cmp} {}, got {}",
                    show(expected),
                    show(&actual)
                ));
            }
        }
        (Err(e), Some((cmp, expected))) => {
            report.fail(format!("{at} {call} {cmp} {}, got {e}", show(expected)))
        }
        (Err(e), None) => report.fail(format!("{at} {call}, got {e}")),
    }
}
