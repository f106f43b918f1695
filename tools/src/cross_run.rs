//! Cranelift's run tests on a foreign target, under qemu-user (`mergelift run --target
//! aarch64|riscv64|s390x`).
//!
//! Each file is compiled for each of its `target` lines of that architecture twice, into
//! object files ([`crate::cross`]): plainly (cranelift-object alone) and through the pipeline
//! (`MergeModule<ObjectModule>`). Both are linked with a harness that calls the function each
//! `; run:` or `; print:` line follows with the line's arguments; each line is judged on both
//! sides. The plain compile is the reference: a line it fails is Cranelift's (or the
//! emulator's) and not Mergelift's, and a line that fails through the pipeline while it
//! passes plainly is a *regression*, listed apart.
//!
//! Skipped, each with its reason: files without `test run`, files with no target of the
//! architecture, targets whose ISA flags the emulated CPU lacks
//! ([`Arch::unsupported_flags`]), and files that throw exceptions (`try_call`: the harness
//! has no exception runtime for foreign code).

use crate::cross::{
    self, compile_object, decode_results, encode_args, slots_of, Arch, CallOutcome, CompiledObject,
    HarnessCall, Side, Toolchain,
};
use crate::runtest::{clip, judge, run_lines, RunLine, RunOptions, RunReport};
use cranelift_codegen::ir;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_module::Linkage;
use cranelift_reader::{IsaSpec, RunCommand};
use jit_driver::MergeConfig;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

/// What a run on a foreign target found: the pipeline's counts, the plain compile's, and the
/// lines only the pipeline fails.
#[derive(Clone, Debug)]
pub struct CrossReport {
    pub arch: Arch,
    /// Through the pipeline (input errors and skips are reported here).
    pub pipeline: RunReport,
    /// Plain cranelift-object (the same files and lines; skips counted alike).
    pub plain: RunReport,
    /// Run lines failing through the pipeline that pass plainly (each as in `failures`).
    pub regressions: Vec<String>,
}

impl CrossReport {
    /// What the pipeline did, summed over the files: functions in, merged (by which pass),
    /// lowered from LIR, passed through unlifted.
    pub fn pipeline_summary(&self) -> String {
        let s = &self.pipeline.stats;
        format!(
            "pipeline: {} functions in; merged: {} as equal, {} by merge-similar, {} by \
             merge-aligned; {} compiled from lowered LIR; {} passed through unlifted",
            s.get(midend::Counter::FunctionsIn),
            s.get(midend::Counter::Merged),
            s.get(midend::Counter::MergedSimilar),
            s.get(midend::Counter::MergedAligned),
            s.get(midend::Counter::Lowered),
            s.get(midend::Counter::PassedThrough)
        )
    }
}

/// Files (their targets) linked into one program: a link costs more than the run.
const UNITS_PER_PROGRAM: usize = 16;

/// One side of one unit: the object compiled (or why not) and each function's symbol.
struct SideObject {
    object: Result<CompiledObject, String>,
    /// Each function's symbol in the object, by its name in the file.
    symbols: HashMap<String, String>,
    /// The symbol prefix of the side (stripped from messages).
    prefix: String,
}

/// A file on one of its targets, compiled on both sides and waiting to be run.
struct Unit {
    file: String,
    /// ` [flags]` when the file has several targets of the architecture, else empty.
    tag: String,
    lines: Rc<Vec<RunLine>>,
    /// Plain, then the pipeline.
    sides: [SideObject; 2],
}

/// The outcome of each run line of a unit's side, in order (`Err`: why it has no result).
type Outcomes = Vec<Result<Vec<cranelift_codegen::data_value::DataValue>, String>>;

/// Run the run tests of `paths` for `tc`'s architecture.
pub fn run_files(paths: &[impl AsRef<Path>], opts: &RunOptions, tc: &Toolchain) -> CrossReport {
    let mut report = CrossReport {
        arch: tc.arch,
        pipeline: RunReport::default(),
        plain: RunReport::default(),
        regressions: Vec::new(),
    };
    let mut pending: Vec<Unit> = Vec::new();
    let mut next = 0usize;
    for p in paths {
        prepare(
            p.as_ref(),
            opts,
            tc.arch,
            &mut report,
            &mut pending,
            &mut next,
        );
        if pending.len() >= UNITS_PER_PROGRAM {
            run_units(tc, opts, std::mem::take(&mut pending), &mut report);
        }
    }
    run_units(tc, opts, pending, &mut report);
    report
}

fn skip(report: &mut CrossReport, file: &str, why: String) {
    report.pipeline.skipped += 1;
    report.plain.skipped += 1;
    report.pipeline.skips.push((file.to_string(), why));
}

/// Does a function of the file throw or catch exceptions?
fn uses_exceptions(funcs: &[ir::Function]) -> bool {
    funcs.iter().any(|f| {
        f.layout.blocks().any(|b| {
            f.layout.block_insts(b).any(|i| {
                matches!(
                    f.dfg.insts[i].opcode(),
                    ir::Opcode::TryCall | ir::Opcode::TryCallIndirect
                )
            })
        })
    })
}

/// The ISA flags of `isa` that differ from its architecture's defaults, as a target line
/// spells them (`has_c has_zcb`, `has_lse=false`).
fn flags_set(isa: &dyn cranelift_codegen::isa::TargetIsa) -> String {
    let default = cranelift_codegen::isa::lookup(isa.triple().clone())
        .ok()
        .and_then(|b| b.finish(isa.flags().clone()).ok());
    let default: Vec<(&str, String)> = default
        .map(|d| {
            (d.isa_flags().iter())
                .map(|v| (v.name, v.value_string()))
                .collect()
        })
        .unwrap_or_default();
    let set: Vec<String> = (isa.isa_flags().iter())
        .filter(|v| !default.contains(&(v.name, v.value_string())))
        .map(|v| match v.as_bool() {
            Some(true) => v.name.to_string(),
            _ => format!("{}={}", v.name, v.value_string()),
        })
        .collect();
    set.join(" ")
}

/// Read, check and compile one file for each of its targets of `arch`, adding the units to
/// `pending` (skips and input errors go to `report`).
fn prepare(
    path: &Path,
    opts: &RunOptions,
    arch: Arch,
    report: &mut CrossReport,
    pending: &mut Vec<Unit>,
    next: &mut usize,
) {
    let file = path.display().to_string();
    let text = match crate::input::read_text(path) {
        Ok(t) => t,
        Err(e) => return report.pipeline.error(e),
    };
    let test = match crate::input::parse_test_text(path, &text) {
        Ok(t) => t,
        Err(e) => return report.pipeline.error(e),
    };
    if !test.commands.iter().any(|c| c.command == "run") {
        return skip(report, &file, "interpret-only test (no `test run`)".into());
    }
    // The file's flags as they are (PIC or not: the harness links either statically).
    let mut overrides = Vec::new();
    if let Some(o) = opts.opt_level {
        overrides.push(("opt_level", o.name()));
    }
    let mut isas: Vec<OwnedTargetIsa> = Vec::new();
    match &test.isa_spec {
        IsaSpec::None(flags) => {
            let built = cranelift_codegen::isa::lookup(arch.linux_triple())
                .map_err(|e| e.to_string())
                .and_then(|b| b.finish(flags.clone()).map_err(|e| e.to_string()))
                .and_then(|isa| cross::linux_isa(arch, &*isa, &overrides));
            match built {
                Ok(i) => isas.push(i),
                Err(e) => skip(report, &file, e),
            }
        }
        IsaSpec::Some(list) => {
            let mut any = false;
            for isa in list.iter().filter(|i| Arch::of(i.triple()) == Some(arch)) {
                any = true;
                let lacking = cross::unrunnable_flags(arch, &**isa);
                if !lacking.is_empty() {
                    skip(
                        report,
                        &file,
                        format!(
                            "target {arch} {}: the emulated CPU lacks {}",
                            flags_set(&**isa),
                            lacking.join(", ")
                        ),
                    );
                    continue;
                }
                match cross::linux_isa(arch, &**isa, &overrides) {
                    Ok(i) => isas.push(i),
                    Err(e) => skip(report, &file, e),
                }
            }
            if !any {
                skip(report, &file, format!("no {arch} target"));
            }
        }
    }
    if isas.is_empty() {
        return;
    }
    let lines = run_lines(&test, &text, &file, &mut report.pipeline);
    if lines.is_empty() {
        return;
    }
    let funcs: Vec<ir::Function> = test.functions.iter().map(|(f, _)| f.clone()).collect();
    if uses_exceptions(&funcs) {
        return skip(
            report,
            &file,
            "throws exceptions (`try_call`): the harness has no exception runtime for foreign \
             code"
                .into(),
        );
    }
    // The input must be valid Cranelift IR before any pass: a fault here is the input's.
    for f in &funcs {
        if let Err(e) = crate::input::verify_clif(f, &*isas[0]) {
            return report.pipeline.error(format!(
                "{file}: function {}: invalid input: {}",
                jit_driver::opmap::func_name(&f.name),
                clip(&e)
            ));
        }
    }
    let sigs: Vec<ir::Signature> = lines.iter().map(|l| l.sig.clone()).collect();
    let lines = Rc::new(lines);
    let config = MergeConfig {
        passes: opts.passes.clone(),
        debug: jit_driver::DebugOptions {
            verify_lir: opts.verify,
            lower_all: opts.lower_all,
            ..Default::default()
        },
        ..Default::default()
    };
    let several = isas.len() > 1;
    for isa in isas {
        let tag = if several {
            format!(" [{arch} {}]", flags_set(&*isa))
        } else {
            String::new()
        };
        let n = *next;
        *next += 1;
        let side = |prefix: String, side: Side| {
            let mut fs = funcs.clone();
            let symbols = cross::prefix_names(&mut fs, &prefix).into_iter().collect();
            let linked = fs.into_iter().map(|f| (Linkage::Export, f)).collect();
            let object = compile_object(
                isa.clone(),
                linked,
                side,
                &sigs,
                &format!("{prefix}trampoline"),
            );
            SideObject {
                object,
                symbols,
                prefix,
            }
        };
        let plain = side(format!("mlp{n}_"), Side::Plain);
        let pipeline = side(format!("mlm{n}_"), Side::Pipeline(&config));
        if let Ok(o) = &pipeline.object {
            report.pipeline.stats.merge_from(&o.stats);
        }
        pending.push(Unit {
            file: file.clone(),
            tag,
            lines: lines.clone(),
            sides: [plain, pipeline],
        });
    }
}

/// A message of a side with its symbol prefix taken out (the names as the file has them).
fn unprefixed(msg: &str, side: &SideObject) -> String {
    msg.replace(&side.prefix, "")
}

/// The calls of a side's run lines (none when its object did not compile).
fn calls_of(arch: Arch, unit: &Unit, side: &SideObject) -> Vec<HarnessCall> {
    let Ok(object) = &side.object else {
        return Vec::new();
    };
    unit.lines
        .iter()
        .map(|rl| {
            let args = match &rl.cmd {
                RunCommand::Print(inv) | RunCommand::Run(inv, _, _) => &inv.args,
            };
            HarnessCall {
                function: side.symbols[&rl.name].clone(),
                trampoline: object.trampoline(&rl.sig).expect("defined").to_string(),
                args: encode_args(arch, args, slots_of(&rl.sig)),
            }
        })
        .collect()
}

/// What an outcome of the harness means for a run line of signature `sig`.
fn result_of(
    arch: Arch,
    sig: &ir::Signature,
    o: &CallOutcome,
    opts: &RunOptions,
) -> Result<Vec<cranelift_codegen::data_value::DataValue>, String> {
    match o {
        CallOutcome::Returned(slots) => decode_results(arch, sig, slots)
            .ok_or_else(|| "the harness printed too few result bytes".to_string()),
        CallOutcome::Trap(s) => Err(format!("trap (signal {s})")),
        CallOutcome::Timeout => Err(format!(
            "timeout: no result after {:.1} s (the limit is set with --timeout)",
            opts.timeout.unwrap_or_default().as_secs_f64()
        )),
        CallOutcome::Lost(why) => Err(why.clone()),
    }
}

/// Link the units into one program (or, when that does not link, each side alone), run it
/// and judge every run line on both sides.
fn run_units(tc: &Toolchain, opts: &RunOptions, units: Vec<Unit>, report: &mut CrossReport) {
    if units.is_empty() {
        return;
    }
    let arch = tc.arch;
    // Every side with an object, and its calls.
    let mut objects: Vec<Vec<u8>> = Vec::new();
    let mut calls: Vec<HarnessCall> = Vec::new();
    // (unit, side) -> the range of its calls.
    let mut ranges: HashMap<(usize, usize), std::ops::Range<usize>> = HashMap::new();
    for (u, unit) in units.iter().enumerate() {
        for (s, side) in unit.sides.iter().enumerate() {
            if let Ok(o) = &side.object {
                objects.push(o.bytes.clone());
                let c = calls_of(arch, unit, side);
                ranges.insert((u, s), calls.len()..calls.len() + c.len());
                calls.extend(c);
            }
        }
    }
    let together = cross::run_harness(tc, &objects, &calls, opts.timeout, &[]);
    for (u, unit) in units.iter().enumerate() {
        let mut outcomes: [Outcomes; 2] = [Vec::new(), Vec::new()];
        for (s, side) in unit.sides.iter().enumerate() {
            let n = unit.lines.len();
            let results: Result<Vec<CallOutcome>, String> = match (&side.object, &together) {
                (Err(e), _) => Err(unprefixed(e, side)),
                (Ok(_), Ok(all)) => Ok(all[ranges[&(u, s)].clone()].to_vec()),
                // Alone, so that one side that does not link fails only itself.
                (Ok(o), Err(_)) => cross::run_harness(
                    tc,
                    std::slice::from_ref(&o.bytes),
                    &calls_of(arch, unit, side),
                    opts.timeout,
                    &[],
                )
                .map_err(|e| unprefixed(&e, side)),
            };
            outcomes[s] = match results {
                Ok(rs) => (unit.lines.iter().zip(&rs))
                    .map(|(rl, o)| {
                        result_of(arch, &rl.sig, o, opts).map_err(|e| unprefixed(&e, side))
                    })
                    .collect(),
                Err(e) => {
                    let r = if s == 0 {
                        &mut report.plain
                    } else {
                        &mut report.pipeline
                    };
                    // One report for the unit, however many run lines it has; each line fails.
                    r.fail(format!(
                        "{}:{} {n} run lines not run: {}",
                        unit.file,
                        unit.tag,
                        clip(&e)
                    ));
                    r.failed += n - 1;
                    Vec::new()
                }
            };
        }
        let [plain, pipeline] = outcomes;
        let plain_ok: Vec<bool> = if plain.is_empty() {
            vec![false; unit.lines.len()]
        } else {
            (unit.lines.iter().zip(plain))
                .map(|(rl, got)| {
                    let before = report.plain.failed;
                    judge(&mut report.plain, &unit.file, &unit.tag, rl, got);
                    report.plain.failed == before
                })
                .collect()
        };
        if pipeline.is_empty() {
            if plain_ok.iter().any(|&ok| ok) {
                let last = report.pipeline.failures.last().cloned().unwrap_or_default();
                report.regressions.push(last);
            }
            continue;
        }
        for ((rl, got), ok) in unit.lines.iter().zip(pipeline).zip(plain_ok) {
            let before = report.pipeline.failed;
            judge(&mut report.pipeline, &unit.file, &unit.tag, rl, got);
            if report.pipeline.failed > before && ok {
                let last = report.pipeline.failures.last().cloned().unwrap_or_default();
                report.regressions.push(last);
            }
        }
    }
}
