//! The differential fuzzer on a foreign target (`mergelift fuzz --target
//! aarch64|riscv64|s390x`).
//!
//! The modules are those `fuzz` generates for the same seeds (with `return_call` wherever the
//! target compiles it). Each is compiled into two object files for the target
//! ([`crate::cross`]): plainly (cranelift-object alone) and through the pipeline
//! (`MergeModule<ObjectModule>`, in one batch or, with `--batch`, defined a batch at a time
//! with a `flush` after each, invalid functions mixed in as `fuzz` mixes them). Both run
//! under qemu-user, each wrapper called with the same inputs, and are compared with
//! cranelift-interpreter. Several modules share one harness program, each under a symbol
//! prefix of its own.
//!
//! A module fails when the pipeline's code disagrees with the interpreter; the failure is
//! minimized (each trial linked and run alone) and written as a `.clif` run test for the
//! target. A disagreement of the plain code is Cranelift's, the emulator's or the
//! interpreter's, not Mergelift's: counted apart (`FuzzReport::plain_failed`).

use crate::cross::{
    self, compile_object, decode_results, define_trampolines, encode_args, Arch, CallOutcome,
    CompiledObject, HarnessCall, Side, Target, Toolchain,
};
use crate::fuzz::{
    batch_plan, compare_outcomes, config_for_seed_on, define_uncompilable, define_unverifiable,
    failed_ids, interpret_on, minimize_with, module_for_seed_with, random_input,
    reproducer_text_for, verify_all, wrapper_signature, FuzzOptions, FuzzReport, GenConfig,
    GeneratedModule, Outcome, SplitMix64, EXTERN_SYMBOLS, INPUTS,
};
use cranelift_codegen::ir::{self, Function};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_module::{Linkage, Module as _, ModuleError};
use jit_driver::{MergeConfig, MergeModule};
use midend::parse_pass_list;
use std::collections::HashMap;
use std::time::Duration;

/// Modules linked into one harness program.
const MODULES_PER_PROGRAM: usize = 24;

/// The time one wrapper call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The ISA of the pipeline and the plain compile on `target`: opt level none, not PIC (the
/// harness links statically), frame pointers as the module's configuration says.
pub fn target_isa(target: &Target, frame_pointers: bool) -> Result<OwnedTargetIsa, String> {
    let arch = target
        .arch()
        .ok_or_else(|| format!("{}: not a foreign target", target.triple))?;
    let mut fb = settings::builder();
    for (k, v) in [
        ("opt_level", "none"),
        ("is_pic", "false"),
        ("use_colocated_libcalls", "false"),
        (
            "preserve_frame_pointers",
            if frame_pointers { "true" } else { "false" },
        ),
    ] {
        fb.set(k, v).map_err(|e| e.to_string())?;
    }
    let mut ib = cranelift_codegen::isa::lookup(arch.linux_triple()).map_err(|e| e.to_string())?;
    target.set_flags(&mut ib)?;
    ib.finish(settings::Flags::new(fb))
        .map_err(|e| e.to_string())
}

/// The `set` and `target` lines of a reproducer for `target`.
fn settings_lines(target: &Target, frame_pointers: bool) -> String {
    let mut s = String::new();
    if frame_pointers {
        s.push_str("set preserve_frame_pointers=true\n");
    }
    s.push_str("target ");
    s.push_str(&cross::arch_name(&target.triple));
    for (k, v) in &target.flags {
        s.push_str(&format!(" {k}={v}"));
    }
    s
}

/// How one module is compiled on the pipeline's side.
#[derive(Clone, Copy)]
struct Setup<'a> {
    passes: &'a str,
    lower_all: bool,
    frame_pointers: bool,
    /// 0: one batch.
    batch: usize,
    late_addresses: bool,
}

/// One side's object and the symbol of each function in it.
struct SideObject {
    object: CompiledObject,
    /// By the function's name in the module (without `%`).
    symbols: HashMap<String, String>,
}

/// A module generated, run by the interpreter and compiled on both sides.
struct Prepared<'a> {
    it: usize,
    seed: u64,
    cfg: GenConfig,
    gm: GeneratedModule,
    calls: Vec<(String, Vec<i64>)>,
    oracle: Vec<Outcome>,
    setup: Setup<'a>,
    /// Plain, then the pipeline.
    sides: [Result<SideObject, String>; 2],
}

/// The harness's stand-in for a libc symbol whose address generated code takes
/// (`EDGE_SYMBOLS`). The real ones may be indirect functions in a static libc, whose
/// relocations take no addend; only differences and equalities of one symbol's values are
/// observed, so any data symbol will do.
fn stand_in(name: &str) -> String {
    format!("ml_ext_{name}")
}

/// Every stand-in the harness defines.
fn stand_ins() -> Vec<String> {
    EXTERN_SYMBOLS.iter().map(|s| stand_in(s)).collect()
}

/// Point `symbol_value`s of libc symbols at their stand-ins.
fn use_stand_ins(f: &mut Function) {
    for (_, gv) in f.global_values.iter_mut() {
        if let ir::GlobalValueData::Symbol {
            name: ir::ExternalName::TestCase(t),
            ..
        } = gv
        {
            let n = String::from_utf8_lossy(t.raw()).into_owned();
            if EXTERN_SYMBOLS.contains(&n.as_str()) {
                if let ir::GlobalValueData::Symbol { name, .. } = gv {
                    *name = ir::ExternalName::testcase(stand_in(&n));
                }
            }
        }
    }
}

/// `funcs` renamed under `prefix`, with the linkage each has (the names of `locals` local).
fn renamed(
    funcs: &[Function],
    locals: &[String],
    prefix: &str,
) -> (Vec<(Linkage, Function)>, HashMap<String, String>) {
    let mut fs = funcs.to_vec();
    fs.iter_mut().for_each(use_stand_ins);
    let names = cross::prefix_names(&mut fs, prefix);
    let linked = (fs.into_iter().zip(&names))
        .map(|(f, (old, _))| {
            let l = if locals.contains(old) {
                Linkage::Local
            } else {
                Linkage::Export
            };
            (l, f)
        })
        .collect();
    (linked, names.into_iter().collect())
}

/// The pipeline's object of `linked` (its symbols under `prefix`) in batches (indices into
/// `linked`, as `batch_plan` makes them), each followed by `flush`, with the invalid functions `fuzz`'s batched compile mixes
/// in (one the verifier rejects, which `define_function` must refuse; one that fails to
/// compile, which that batch's flush must name alone).
fn batched_object(
    isa: OwnedTargetIsa,
    linked: Vec<(Linkage, Function)>,
    config: MergeConfig,
    plan: &[Vec<usize>],
    prefix: &str,
) -> Result<CompiledObject, String> {
    let backend = |e: String| ModuleError::Backend(anyhow::anyhow!(e));
    let n = linked.len();
    let run = || -> cranelift_module::ModuleResult<CompiledObject> {
        let inner = cross::object_module(isa, "mergelift").map_err(backend)?;
        let mut m = MergeModule::with_config(inner, config);
        let declared = jit_driver::declare_by_name(&mut m, linked)?;
        let mut bodies: Vec<Option<_>> = (declared.into_iter())
            .map(|(_, id, f)| Some((id, f)))
            .collect();
        let (mut refused, mut failed) = (0u64, 0u64);
        let mut ctx = cranelift_codegen::Context::new();
        let mut rng = SplitMix64::new(plan.len() as u64 ^ (n as u64) << 32);
        for (k, b) in plan.iter().enumerate() {
            let draw = rng.next_u64();
            let bad = (draw & 3 == 0).then(|| define_unverifiable(&mut m, prefix, k));
            let failing = (draw & 12 == 0).then(|| define_uncompilable(&mut m, prefix, k));
            for &i in b {
                let (id, f) = bodies[i].take().expect("each function in one batch");
                ctx.clear();
                ctx.func = f;
                cranelift_module::Module::define_function(&mut m, id, &mut ctx)?;
            }
            if let Some(bad) = bad {
                bad.map_err(backend)?;
                refused += 1;
            }
            match (m.flush(), &failing) {
                (Ok(()), None) => {}
                (Err(e), Some(Ok(id))) if failed_ids(&e) == Some(vec![*id]) => failed += 1,
                (r, failing) => {
                    return Err(backend(format!(
                        "batch {k}: flush returned {r:?}, with {failing:?} failing to compile"
                    )))
                }
            }
            // An object file defines every function it exports: each invalid one is defined
            // again, validly (as a user must before `finish`), in the next batch.
            for name in [
                format!("{prefix}__fuzz_unverifiable{k}"),
                format!("{prefix}__fuzz_uncompilable{k}"),
            ] {
                if let Some(cranelift_module::FuncOrDataId::Func(id)) =
                    m.declarations().get_name(&name)
                {
                    define_identity(&mut m, id)?;
                }
            }
        }
        let trampolines = define_trampolines(
            &mut m,
            &[wrapper_signature()],
            &format!("{prefix}trampoline"),
        )
        .map_err(backend)?;
        m.flush_last()?;
        let mut stats = m.stats().clone();
        stats.add_custom("fuzz.invalid_refused", refused);
        stats.add_custom("fuzz.invalid_failed", failed);
        let bytes = (m.finish()?.emit()).map_err(|e| backend(format!("object file: {e}")))?;
        Ok(CompiledObject {
            bytes,
            trampolines,
            stats,
        })
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
        .unwrap_or_else(|p| {
            Err(backend(format!(
                "the pipeline panicked: {}",
                jit_driver::module::panic_text(&p)
            )))
        })
        .map_err(|e| format!("{e:#}"))
}

/// Define `id`, an `(i64) -> i64`, as the identity.
fn define_identity<M: cranelift_module::Module>(
    m: &mut MergeModule<M>,
    id: cranelift_module::FuncId,
) -> cranelift_module::ModuleResult<()> {
    use cranelift_codegen::ir::InstBuilder;
    use cranelift_module::Module;
    let mut ctx = m.make_context();
    ctx.func.signature = m.declarations().get_function_decl(id).signature.clone();
    let mut fctx = cranelift_frontend::FunctionBuilderContext::new();
    let mut b = cranelift_frontend::FunctionBuilder::new(&mut ctx.func, &mut fctx);
    let block = b.create_block();
    b.append_block_params_for_function_params(block);
    b.switch_to_block(block);
    let x = b.block_params(block)[0];
    b.ins().return_(&[x]);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    m.define_function(id, &mut ctx)
}

/// Compile `gm`'s functions (`funcs`: all or a part) on one side under `prefix`.
fn compile_side(
    target: &Target,
    funcs: &[Function],
    locals: &[String],
    setup: Setup,
    pipeline: bool,
    prefix: &str,
) -> Result<SideObject, String> {
    let isa = target_isa(target, setup.frame_pointers)?;
    let (linked, symbols) = renamed(funcs, locals, prefix);
    let tramp = format!("{prefix}trampoline");
    let sigs = [wrapper_signature()];
    let object = if !pipeline {
        compile_object(isa, linked, Side::Plain, &sigs, &tramp)?
    } else {
        let config = MergeConfig {
            passes: parse_pass_list(setup.passes).map_err(|e| e.to_string())?,
            // The harness calls only the exported wrappers.
            fetch_locals: false,
            debug: jit_driver::DebugOptions {
                verify_lir: true,
                lower_all: setup.lower_all,
                ..Default::default()
            },
            ..Default::default()
        };
        if setup.batch > 0 {
            let plan = batch_plan(funcs, setup.batch, setup.late_addresses);
            batched_object(isa, linked, config, &plan, prefix)?
        } else {
            compile_object(isa, linked, Side::Pipeline(&config), &sigs, &tramp)?
        }
    };
    Ok(SideObject { object, symbols })
}

/// The harness calls of `calls` on one side.
fn harness_calls(arch: Arch, side: &SideObject, calls: &[(String, Vec<i64>)]) -> Vec<HarnessCall> {
    let tramp = side.object.trampolines[0].1.clone();
    calls
        .iter()
        .map(|(name, args)| {
            let args: Vec<_> = args
                .iter()
                .map(|&a| cranelift_codegen::data_value::DataValue::I64(a))
                .collect();
            HarnessCall {
                function: side.symbols[name].clone(),
                trampoline: tramp.clone(),
                args: encode_args(arch, &args, 4),
            }
        })
        .collect()
}

/// A harness outcome as the fuzzer's.
fn outcome(arch: Arch, o: &CallOutcome) -> Outcome {
    match o {
        CallOutcome::Returned(slots) => match decode_results(arch, &wrapper_signature(), slots) {
            Some(vs) => Outcome::Values(
                vs.iter()
                    .map(|v| match v {
                        cranelift_codegen::data_value::DataValue::I64(x) => *x as u64,
                        _ => 0,
                    })
                    .collect(),
            ),
            None => Outcome::Error("the harness printed too few result bytes".into()),
        },
        CallOutcome::Trap(s) => Outcome::Trap(format!("signal {s}")),
        CallOutcome::Timeout => Outcome::Error("timeout".into()),
        CallOutcome::Lost(why) => Outcome::Error(why.clone()),
    }
}

/// Run `calls` of one side alone: the outcomes, or why the program did not run.
fn run_alone(
    tc: &Toolchain,
    side: &SideObject,
    calls: &[(String, Vec<i64>)],
) -> Result<Vec<Outcome>, String> {
    let hc = harness_calls(tc.arch, side, calls);
    let outs = cross::run_harness(
        tc,
        std::slice::from_ref(&side.object.bytes),
        &hc,
        Some(CALL_TIMEOUT),
        &stand_ins(),
    )?;
    Ok(outs.iter().map(|o| outcome(tc.arch, o)).collect())
}

/// Compile the module `gm` for `target` (one batch; every function lowered when
/// `lower_all`), plainly or through `passes`, and run `calls` of its wrappers under qemu: the
/// outcome of each.
pub fn run_module(
    tc: &Toolchain,
    target: &Target,
    gm: &GeneratedModule,
    calls: &[(String, Vec<i64>)],
    passes: Option<&str>,
) -> Result<Vec<Outcome>, String> {
    let setup = Setup {
        passes: passes.unwrap_or("none"),
        lower_all: false,
        frame_pointers: true,
        batch: 0,
        late_addresses: false,
    };
    let side = compile_side(
        target,
        &gm.functions,
        &gm.locals,
        setup,
        passes.is_some(),
        "mlx_",
    )?;
    run_alone(tc, &side, calls)
}

/// Generate module `it` (seed `seed`), run it in the interpreter and compile both sides.
fn prepare<'a>(
    it: usize,
    seed: u64,
    opts: &'a FuzzOptions,
    target: &Target,
    report: &mut FuzzReport,
) -> Result<Prepared<'a>, String> {
    let tail = |fp: bool| {
        target_isa(target, fp)
            .map(|isa| jit_driver::module::tail_calls_allowed(&*isa))
            .unwrap_or(false)
    };
    let cfg = config_for_seed_on(seed, &tail);
    if cfg.edges != 0 {
        report.edge_modules += 1;
    }
    if cfg.near_dups {
        report.near_dup_modules += 1;
    }
    let gm = module_for_seed_with(seed, cfg).map_err(|e| format!("seed {seed:#x}: {e}"))?;
    verify_all(&gm.functions)
        .map_err(|e| format!("seed {seed:#x}: generator made an invalid function: {e}"))?;
    let mut rng = SplitMix64::new(seed ^ 0x5555_5555_5555_5555);
    let mut calls = Vec::new();
    for e in &gm.entries {
        for _ in 0..INPUTS {
            calls.push((e.clone(), random_input(&mut rng)));
        }
    }
    let big = target.arch().is_some_and(Arch::big_endian);
    let oracle: Vec<Outcome> = calls
        .iter()
        .map(|(n, a)| interpret_on(&gm.functions, n, a, big))
        .collect();
    let batch = opts.batch.size_for(seed);
    let setup = Setup {
        passes: &opts.passes,
        // Every other module compiles every function from its lowered LIR, as `fuzz` does.
        lower_all: seed & 1 == 1,
        frame_pointers: cfg.frame_pointers,
        batch,
        late_addresses: opts.late_addresses,
    };
    if batch > 0 {
        report.batched_modules += 1;
        report.batches += batch_plan(&gm.functions, batch, opts.late_addresses).len();
    }
    let sides = [false, true].map(|pipeline| {
        let prefix = format!("ml{}{it}_", if pipeline { "m" } else { "p" });
        compile_side(target, &gm.functions, &gm.locals, setup, pipeline, &prefix)
    });
    if let Ok(s) = &sides[1] {
        let stats = &s.object.stats;
        report.stats.merge_from(stats);
        let merged = stats.get(midend::Counter::MergedSimilar);
        report.merged_similar += merged;
        if merged > 0 {
            report.similar_modules += 1;
        }
    }
    Ok(Prepared {
        it,
        seed,
        cfg,
        gm,
        calls,
        oracle,
        setup,
        sides,
    })
}

/// The first disagreement with the oracle: (call index, description).
fn first_difference(oracle: &[Outcome], got: &[Outcome]) -> Option<(usize, String)> {
    oracle
        .iter()
        .zip(got)
        .enumerate()
        .filter(|(_, (o, _))| !matches!(o, Outcome::Error(_)))
        .find_map(|(i, (o, g))| compare_outcomes(o, g).map(|d| (i, d)))
}

/// Run the prepared modules in one program (each side alone when it does not link) and
/// judge them.
fn run_prepared(
    tc: &Toolchain,
    target: &Target,
    opts: &FuzzOptions,
    modules: Vec<Prepared>,
    report: &mut FuzzReport,
) {
    let mut objects = Vec::new();
    let mut calls = Vec::new();
    let mut ranges = HashMap::new();
    for (k, p) in modules.iter().enumerate() {
        for (s, side) in p.sides.iter().enumerate() {
            if let Ok(side) = side {
                objects.push(side.object.bytes.clone());
                let hc = harness_calls(tc.arch, side, &p.calls);
                ranges.insert((k, s), calls.len()..calls.len() + hc.len());
                calls.extend(hc);
            }
        }
    }
    let together = cross::run_harness(tc, &objects, &calls, Some(CALL_TIMEOUT), &stand_ins());
    for (k, p) in modules.into_iter().enumerate() {
        let got: Vec<Result<Vec<Outcome>, String>> = (0..2)
            .map(|s| match (&p.sides[s], &together) {
                (Err(e), _) => Err(e.clone()),
                (Ok(_), Ok(all)) => Ok(all[ranges[&(k, s)].clone()]
                    .iter()
                    .map(|o| outcome(tc.arch, o))
                    .collect()),
                (Ok(side), Err(_)) => run_alone(tc, side, &p.calls),
            })
            .collect();
        for (o, g) in p.oracle.iter().zip(got[1].as_deref().unwrap_or_default()) {
            if matches!(o, Outcome::Error(_)) {
                report.skipped_calls += 1;
                continue;
            }
            report.calls += 1;
            if matches!((o, g), (Outcome::Trap(_), Outcome::Trap(_))) {
                report.traps += 1;
            }
        }
        let plain = match &got[0] {
            Err(e) => Some(format!("plain compile error: {e}")),
            Ok(g) => first_difference(&p.oracle, g).map(|(i, d)| format!("%{}: {d}", p.calls[i].0)),
        };
        if let Some(d) = plain {
            report.plain_failed += 1;
            report
                .plain_failures
                .push(format!("iteration {}: seed {:#x}: {d}", p.it, p.seed));
        }
        let failure = match &got[1] {
            Err(e) => Some((0, format!("pipeline error: {e}"))),
            Ok(g) => first_difference(&p.oracle, g),
        };
        match failure {
            None => report.passed += 1,
            Some((i, d)) => {
                report.failed += 1;
                let f = reproduce(tc, target, opts, &p, i, &d);
                report.failures.push(format!("iteration {}: {f}", p.it));
            }
        }
    }
}

/// Minimize the failure of call `i` of `p` (each trial compiled through the pipeline and run
/// alone) and write a reproducer: the failure line.
fn reproduce(
    tc: &Toolchain,
    target: &Target,
    opts: &FuzzOptions,
    p: &Prepared,
    i: usize,
    desc: &str,
) -> String {
    let big = tc.arch.big_endian();
    let fails = |fs: &[Function], c: &(String, Vec<i64>)| -> Option<String> {
        let oracle = interpret_on(fs, &c.0, &c.1, big);
        if matches!(oracle, Outcome::Error(_)) {
            return None;
        }
        let names: Vec<String> = (fs.iter())
            .map(|f| jit_driver::opmap::func_name(&f.name))
            .collect();
        let locals: Vec<String> = (p.gm.locals.iter())
            .filter(|l| names.contains(l))
            .cloned()
            .collect();
        let got = compile_side(target, fs, &locals, p.setup, true, "mlr_")
            .and_then(|side| run_alone(tc, &side, std::slice::from_ref(c)));
        match got {
            Err(e) => Some(format!("pipeline error: {e}")),
            Ok(g) => compare_outcomes(&oracle, &g[0]),
        }
    };
    let (funcs, call, mdesc) =
        minimize_with(p.gm.functions.clone(), p.calls[i].clone(), true, &fails);
    let oracle = interpret_on(&funcs, &call.0, &call.1, big);
    let names: Vec<String> = (funcs.iter())
        .map(|f| jit_driver::opmap::func_name(&f.name))
        .collect();
    let locals: Vec<String> = (p.gm.locals.iter())
        .filter(|l| names.contains(l))
        .map(|l| format!("%{l}"))
        .collect();
    let batches = if p.setup.batch > 0 {
        let plan: Vec<String> = batch_plan(&funcs, p.setup.batch, p.setup.late_addresses)
            .iter()
            .map(|b| {
                let names: Vec<String> = b.iter().map(|&i| funcs[i].name.to_string()).collect();
                format!("[{}]", names.join(" "))
            })
            .collect();
        format!(
            "\nbatch mode `--batch {}`: batches of {} (all functions declared first; flush \
             after each batch): {}",
            opts.batch,
            p.setup.batch,
            plan.join(" ")
        )
    } else {
        String::new()
    };
    let header = format!(
        "mergelift fuzz --target {}: iteration seed {:#x}, passes `{}`{}{}, edge cases \
         {:#x}{batches}\nlocal functions (Linkage::Local; the others exported): {}\n{}\n\
         (before minimizing: {desc})",
        target,
        p.seed,
        opts.passes,
        if p.setup.lower_all {
            ", every function lowered"
        } else {
            ""
        },
        if p.setup.frame_pointers {
            ""
        } else {
            ", without frame pointers"
        },
        p.cfg.edges,
        if locals.is_empty() {
            "none".to_string()
        } else {
            locals.join(" ")
        },
        mdesc
    );
    let text = reproducer_text_for(
        &funcs,
        &call,
        &oracle,
        &header,
        &settings_lines(target, p.setup.frame_pointers),
    );
    let _ = std::fs::create_dir_all(&opts.out_dir);
    let arch = cross::arch_name(&target.triple);
    let path = if p.setup.batch > 0 {
        opts.out_dir.join(format!(
            "fuzz-{arch}-{:016x}-batch{}.clif",
            p.seed, p.setup.batch
        ))
    } else {
        opts.out_dir
            .join(format!("fuzz-{arch}-{:016x}.clif", p.seed))
    };
    let written = std::fs::write(&path, text).is_ok();
    format!(
        "seed {:#x}{}: %{}: {mdesc}{}",
        p.seed,
        if p.setup.batch > 0 {
            format!(" (batches of {})", p.setup.batch)
        } else {
            String::new()
        },
        call.0,
        if written {
            format!(" (reproducer: {})", path.display())
        } else {
            String::new()
        }
    )
}

/// Generate, run and compare `opts.iterations` random modules on `target` (a foreign
/// architecture, with `tc` its toolchain).
pub fn fuzz(opts: &FuzzOptions, tc: &Toolchain, target: &Target) -> FuzzReport {
    let mut report = FuzzReport::default();
    let mut rng = SplitMix64::new(opts.seed);
    let mut pending = Vec::new();
    for it in 0..opts.iterations {
        let seed = rng.next_u64();
        match prepare(it, seed, opts, target, &mut report) {
            Ok(p) => pending.push(p),
            Err(f) => {
                report.failed += 1;
                report.failures.push(format!("iteration {it}: {f}"));
            }
        }
        if pending.len() == MODULES_PER_PROGRAM {
            run_prepared(tc, target, opts, std::mem::take(&mut pending), &mut report);
        }
    }
    run_prepared(tc, target, opts, pending, &mut report);
    report
}
