//! Bounded differential fuzzing of the pipeline against Cranelift's interpreter.

use mergelift_tools::fuzz::{
    batch_plan, compare_outcomes, fuzz, generate_module, interpret, module_for_seed, verify_all,
    BatchMode, FuzzOptions, Outcome, SplitMix64,
};
use std::path::PathBuf;

fn out_dir() -> PathBuf {
    if let Ok(d) = std::env::var("MERGELIFT_FUZZ_OUT") {
        return PathBuf::from(d);
    }
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mergelift-fuzz-{}", std::process::id()))
}

#[test]
fn bounded_fuzz_run_finds_no_mismatch() {
    let iterations = std::env::var("MERGELIFT_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let opts = FuzzOptions {
        iterations,
        seed: std::env::var("MERGELIFT_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0x6d65_7267_656c_6966),
        passes: std::env::var("MERGELIFT_FUZZ_PASSES")
            .unwrap_or_else(|_| "merge,merge-similar,lvn".into()),
        out_dir: out_dir(),
        ..Default::default()
    };
    let t = std::time::Instant::now();
    let report = fuzz(&opts);
    eprintln!(
        "fuzz: {} in {:?} ({} modules with edge cases, {} with near-duplicates, {} with similar \
         merges); {} calls compared ({} trapped on both sides), {} skipped; merged {}, \
         merged_similar {}, similar.groups {}, similar.params {}, similar.thunks {}, \
         similar.callers_rewritten {}, lvn.removed {}",
        report.summary(),
        t.elapsed(),
        report.edge_modules,
        report.near_dup_modules,
        report.similar_modules,
        report.calls,
        report.traps,
        report.skipped_calls,
        report.stats.get(midend::Counter::Merged),
        report.merged_similar,
        report.stats.get(midend::Counter::SimilarGroups),
        report.stats.get(midend::Counter::SimilarParams),
        report.stats.get(midend::Counter::SimilarThunks),
        report.stats.get(midend::Counter::SimilarCallersRewritten),
        report.stats.get(midend::Counter::LvnRemoved)
    );
    assert!(report.calls > iterations, "too few calls compared");
    // Every module has near-duplicates, and merge-similar merges in most of them:
    // folding local members, keeping thunks, rewriting callers.
    assert_eq!(report.near_dup_modules, iterations);
    if opts.passes.split(',').any(|p| p == "merge-similar") {
        assert!(
            report.similar_modules * 3 >= iterations * 2,
            "merge-similar merged in only {} of {iterations} modules",
            report.similar_modules
        );
        assert_eq!(
            report.merged_similar,
            report.stats.get(midend::Counter::MergedSimilar)
        );
        for counter in [
            midend::Counter::SimilarGroups,
            midend::Counter::SimilarParams,
            midend::Counter::SimilarThunks,
            midend::Counter::SimilarCallersRewritten,
        ] {
            assert!(report.stats.get(counter) > 0, "no {counter:?}");
        }
        assert!(
            report.merged_similar > report.stats.get(midend::Counter::SimilarThunks),
            "no member folded away"
        );
    }
    // About one module in three exercises edge cases.
    assert!(
        report.edge_modules * 5 >= iterations,
        "too few modules with edge cases: {} of {iterations}",
        report.edge_modules
    );
    for f in &report.failures {
        eprintln!("  {f}");
    }
    assert_eq!(report.passed + report.failed, iterations);
    assert_eq!(report.failed, 0, "{}", report.failures.join("\n"));
}

/// `merge-aligned` on modules with structural near-duplicates: about half of
/// the mutated clones differ in their operations, and the pass merges some of them in most
/// runs, diamonds and groups of three or more included. Some clones have an extra block (a
/// block split in two by a jump), which the pass merges with blocks of one member only. No
/// call may differ from the interpreter.
#[test]
fn aligned_fuzz_run_finds_no_mismatch() {
    let iterations = 400;
    let opts = FuzzOptions {
        iterations,
        seed: 0x0061_6c69_676e_6564,
        passes: "merge,merge-similar,merge-aligned".into(),
        out_dir: out_dir(),
        ..Default::default()
    };
    let report = fuzz(&opts);
    eprintln!(
        "aligned fuzz: {}; merged_aligned {}, aligned.groups {}, aligned.with_unmatched_runs {}, \
         aligned.diamonds {}, aligned.folded {}, aligned.groups_3plus {}, \
         aligned.with_extra_blocks {}",
        report.summary(),
        report.stats.get(midend::Counter::MergedAligned),
        report.stats.get(midend::Counter::AlignedGroups),
        report.stats.get(midend::Counter::AlignedWithUnmatchedRuns),
        report.stats.get(midend::Counter::AlignedDiamonds),
        report.stats.get(midend::Counter::AlignedFolded),
        report.stats.get(midend::Counter::AlignedGroups3Plus),
        report.stats.get(midend::Counter::AlignedWithExtraBlocks),
    );
    assert_eq!(report.failed, 0, "{}", report.failures.join("\n"));
    assert_eq!(report.passed, iterations);
    assert!(report.stats.get(midend::Counter::AlignedGroups) * 4 >= iterations as u64);
    assert!(report.stats.get(midend::Counter::AlignedGroups3Plus) > 0);
    assert!(report.stats.get(midend::Counter::AlignedWithExtraBlocks) > 0);
    assert!(report.stats.get(midend::Counter::AlignedWithUnmatchedRuns) > 0);
    assert!(report.stats.get(midend::Counter::AlignedDiamonds) > 0);
    // Local members folded away, their callers calling the merged body (linked modules).
    assert!(report.stats.get(midend::Counter::AlignedFolded) > 0);
    assert!(report.stats.get(midend::Counter::AlignedCallersRewritten) > 0);
}

#[test]
fn generated_modules_verify_and_run_in_the_interpreter() {
    let mut rng = SplitMix64::new(7);
    for _ in 0..50 {
        let bytes = rng.bytes(16 * 1024);
        let mut u = arbitrary::Unstructured::new(&bytes);
        let m = generate_module(&mut u).expect("enough bytes");
        verify_all(&m.functions).unwrap();
        assert!(!m.entries.is_empty());
        for e in &m.entries {
            match interpret(&m.functions, e, &[1, 2, 3, 4]) {
                Outcome::Values(v) => assert_eq!(v.len(), 2),
                Outcome::Trap(_) => {}
                Outcome::Error(err) => panic!("interpreter error on %{e}: {err}"),
            }
        }
    }
    // Without near-duplicates (all functions exported, 0 to 4 copies).
    for seed in 0..20u64 {
        let cfg = mergelift_tools::fuzz::GenConfig {
            near_dups: false,
            ..Default::default()
        };
        let m = mergelift_tools::fuzz::module_for_seed_with(seed, cfg).unwrap();
        verify_all(&m.functions).unwrap();
        assert!(m.locals.is_empty());
        for e in &m.entries {
            if let Outcome::Error(err) = interpret(&m.functions, e, &[1, 2, 3, 4]) {
                panic!("interpreter error on %{e}: {err}");
            }
        }
    }
    // Deterministic per seed.
    let a = module_for_seed(42).unwrap();
    let b = module_for_seed(42).unwrap();
    let show = |m: &mergelift_tools::fuzz::GeneratedModule| {
        m.functions
            .iter()
            .map(|f| f.display().to_string())
            .collect::<String>()
    };
    assert_eq!(show(&a), show(&b));
}

#[test]
fn generator_makes_duplicates_loops_calls_and_memory() {
    let mut text = String::new();
    for s in 0..40u64 {
        let m = module_for_seed(s).unwrap();
        for f in &m.functions {
            text.push_str(&format!("{}\n", f.display()));
        }
    }
    for needle in [
        "_dup",
        "_near",
        "br_table",
        "brif",
        "call fn",
        "stack_addr",
        "load.",
        "store ",
        "select",
        "fadd",
        "sdiv",
        "f64",
        "f32",
        "i8",
        "i16",
    ] {
        assert!(
            text.contains(needle),
            "no `{needle}` in 40 generated modules"
        );
    }
}

#[test]
fn the_comparison_detects_differences() {
    let a = Outcome::Values(vec![1, 2]);
    assert_eq!(compare_outcomes(&a, &a.clone()), None);
    assert!(compare_outcomes(&a, &Outcome::Values(vec![1, 3]))
        .unwrap()
        .contains("memory differs"));
    assert!(compare_outcomes(&a, &Outcome::Values(vec![0, 2]))
        .unwrap()
        .contains("results differ"));
    assert!(compare_outcomes(&a, &Outcome::Trap("signal 8".into())).is_some());
    assert!(compare_outcomes(&Outcome::Trap("int divz".into()), &a).is_some());
    assert_eq!(
        compare_outcomes(
            &Outcome::Trap("x".into()),
            &Outcome::Trap("signal 8".into())
        ),
        None
    );
}

#[test]
fn a_broken_pipeline_is_detected() {
    // The harness must be able to fail: run a module's wrapper in the interpreter and through
    // the pipeline, then tamper with the pipeline's answer.
    let m = module_for_seed(3).unwrap();
    let e = &m.entries[0];
    let oracle = interpret(&m.functions, e, &[5, 6, 7, 8]);
    let compiled = mergelift_tools::fuzz::compile_pipeline(&m.functions, "merge,lvn").unwrap();
    let got = mergelift_tools::fuzz::run_jit(&compiled, &[(e.clone(), vec![5, 6, 7, 8])]);
    assert_eq!(compare_outcomes(&oracle, &got[0]), None);
    let broken = match &got[0] {
        Outcome::Values(v) => Outcome::Values(v.iter().map(|x| x ^ 1).collect()),
        _ => Outcome::Values(vec![0, 0]),
    };
    assert!(compare_outcomes(&oracle, &broken).is_some());
}

#[test]
fn reproducers_parse_as_run_tests() {
    let m = module_for_seed(11).unwrap();
    let call = (m.entries[0].clone(), vec![1, 2, 3, 4]);
    let o = interpret(&m.functions, &call.0, &call.1);
    let text = mergelift_tools::fuzz::reproducer_text(&m.functions, &call, &o, "header");
    let t = cranelift_reader::parse_test(&text, cranelift_reader::ParseOptions::default())
        .expect("reproducer parses");
    assert_eq!(t.functions.len(), m.functions.len());
    if matches!(o, Outcome::Values(_)) {
        assert!(text.contains("; run: %run_"));
    }
}

#[test]
fn edge_modules_verify_and_run_in_the_interpreter() {
    use mergelift_tools::fuzz::{module_for_seed_with, GenConfig, EDGE_ALL};
    let mut bits: Vec<u32> = (0..5).map(|b| 1 << b).collect();
    bits.push(EDGE_ALL);
    for edges in bits {
        for seed in 0..12u64 {
            let cfg = GenConfig {
                edges,
                ..GenConfig::default()
            };
            let m = module_for_seed_with(seed, cfg).unwrap();
            verify_all(&m.functions).unwrap_or_else(|e| panic!("edges {edges}, seed {seed}: {e}"));
            for e in &m.entries {
                if let Outcome::Error(err) = interpret(&m.functions, e, &[1, -2, i64::MIN, 4]) {
                    // Fuel may run out on long chains in deep call trees; nothing else may fail.
                    assert!(
                        err.contains("fuel"),
                        "edges {edges}, seed {seed}: interpreter error on %{e}: {err}"
                    );
                }
            }
        }
    }
}

#[test]
fn generator_makes_edge_cases() {
    use mergelift_tools::fuzz::{module_for_seed_with, GenConfig, EDGE_ALL};
    let mut text = String::new();
    let mut max_blocks = 0;
    for s in 0..60u64 {
        let cfg = GenConfig {
            edges: EDGE_ALL,
            ..GenConfig::default()
        };
        let m = module_for_seed_with(s, cfg).unwrap();
        for f in &m.functions {
            max_blocks = max_blocks.max(f.layout.blocks().count());
            text.push_str(&format!("{}\n", f.display()));
        }
    }
    let mut needles = vec![
        " tail",
        "func_addr",
        "call_indirect",
        "symbol_value",
        "+0x7fff_",
        "-0x8000_0000",
        "0x0100_0000_0000",
        "symbol %malloc",
        "ishl",
        "rotr",
        "mulhi",
        "sdiv",
        "srem",
        "-9223372036854775808",
        "0x7fff_ffff_ffff_ffff",
        "explicit_slot 65536",
    ];
    if mergelift_tools::fuzz::host_tail_calls() {
        needles.extend(["return_call ", "return_call_indirect"]);
    }
    for needle in needles {
        assert!(
            text.contains(needle),
            "no `{needle}` in 60 generated edge modules"
        );
    }
    assert!(
        max_blocks >= 200,
        "no long block chain ({max_blocks} blocks at most)"
    );
    // The mix: about one module in three has edge cases.
    let edge = (0..300u64)
        .filter(|&s| mergelift_tools::fuzz::config_for_seed(s).edges != 0)
        .count();
    assert!((60..=140).contains(&edge), "{edge} edge modules in 300");
}

#[test]
fn the_oracle_form_gives_cranelift_semantics() {
    // A negative load offset and two symbol values: the interpreter alone zero-extends the
    // offset and cannot resolve symbols.
    let text = "function %f(i64, i64, i64, i64) -> i64, i64 {
    ss0 = explicit_slot 16
    gv0 = symbol %malloc+1099511627776
    gv1 = symbol %malloc-8
block0(v0: i64, v1: i64, v2: i64, v3: i64):
    v4 = stack_addr.i64 ss0
    store.i64 v0, v4
    v5 = iconst.i64 2147483648
    v6 = iadd v4, v5
    v7 = load.i64 v6-2147483648
    v8 = symbol_value.i64 gv0
    v9 = symbol_value.i64 gv1
    v10 = isub v8, v9
    return v7, v10
}";
    let funcs = cranelift_reader::parse_functions(text).unwrap();
    let o = interpret(&funcs, "f", &[77, 0, 0, 0]);
    assert_eq!(o, Outcome::Values(vec![77, (1u64 << 40) + 8]));
}

#[test]
fn near_duplicate_clones_are_folded_and_thunked() {
    // Near-duplicate mode: clones with other constants and callees are merged by
    // merge-similar, the local ones folded (callers rewritten), the others kept as thunks.
    use mergelift_tools::fuzz::{compile_pipeline_linked, config_for_seed};
    use midend::state::MergeKind;
    let (mut folded, mut thunked, mut clones, mut with_merged_clone) = (0, 0, 0, 0);
    let (mut local, mut int_holes, mut float_holes, mut swapped) = (0, 0, 0, 0);
    let modules = 60u64;
    for seed in 0..modules {
        let cfg = config_for_seed(seed);
        assert!(cfg.near_dups);
        let m = module_for_seed(seed).unwrap();
        local += m.locals.len();
        let find = |n: &str| {
            m.functions
                .iter()
                .find(|g| g.name.to_string() == n)
                .unwrap()
        };
        for f in &m.functions {
            let name = f.name.to_string();
            let Some((orig, _)) = name.split_once("_near") else {
                continue;
            };
            if name.starts_with("%run_") {
                continue;
            }
            let o = find(orig);
            // Constants in layout order, by kind: which kinds of holes the clone has.
            let consts = |g: &cranelift_codegen::ir::Function, kind: &str| -> Vec<String> {
                g.display()
                    .to_string()
                    .lines()
                    .filter(|l| l.contains(kind))
                    .map(|l| l.split_once('=').map_or(l, |(_, r)| r).to_string())
                    .collect()
            };
            int_holes += (consts(f, "iconst") != consts(o, "iconst")) as usize;
            float_holes += (consts(f, "f32const") != consts(o, "f32const")
                || consts(f, "f64const") != consts(o, "f64const"))
                as usize;
            // Direct callees in layout order (calls of itself as calls of the original): a
            // clone calling another function at some site has a swapped callee.
            let callees = |g: &cranelift_codegen::ir::Function| -> Vec<String> {
                let me = g.name.to_string();
                g.layout
                    .blocks()
                    .flat_map(|b| g.layout.block_insts(b))
                    .filter_map(|i| match g.dfg.insts[i] {
                        cranelift_codegen::ir::InstructionData::Call { func_ref, .. } => {
                            let n = g.dfg.ext_funcs[func_ref]
                                .name
                                .display(Some(&g.params))
                                .to_string();
                            Some(if n == me { orig.to_string() } else { n })
                        }
                        _ => None,
                    })
                    .collect()
            };
            swapped += (callees(f) != callees(o)) as usize;
        }
        let mut stats = midend::Stats::default();
        let j = compile_pipeline_linked(
            cfg.frame_pointers,
            &m.functions,
            &m.locals,
            "merge,merge-similar,lvn",
            seed % 2 == 1,
            &mut stats,
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let mut any = false;
        for e in &m.entries {
            let name = e.trim_start_matches("run_");
            if !name.contains("_near") {
                continue;
            }
            clones += 1;
            match j.merge_kind(name) {
                Some(MergeKind::Folded) => {
                    assert!(m.locals.iter().any(|l| l == name), "%{name} is not local");
                    folded += 1;
                    any = true;
                }
                Some(MergeKind::Thunked) => {
                    thunked += 1;
                    any = true;
                }
                _ => {}
            }
        }
        with_merged_clone += any as u64;
    }
    eprintln!(
        "{clones} near clones in {modules} modules: {folded} folded, {thunked} thunks; \
         {with_merged_clone} modules with a merged clone; {local} local functions; clones with \
         other integer constants {int_holes}, other float constants {float_holes}, other \
         callees {swapped}"
    );
    assert!(folded * 5 >= clones, "too few clones folded");
    assert!(thunked * 10 >= clones, "too few clones kept as thunks");
    assert!(
        with_merged_clone * 2 >= modules,
        "too few modules with a merged clone"
    );
    assert!(int_holes * 3 >= clones, "too few integer holes");
    assert!(float_holes * 8 >= clones, "too few float holes");
    assert!(swapped * 10 >= clones, "too few swapped callees");
}

/// Every order of the five passes (120), on random modules against the interpreter: each
/// module is compiled either with every function lowered or with unchanged functions from
/// their input (the skip), by its seed, so both rules meet every order.
#[test]
fn every_pass_order_keeps_behaviour() {
    let passes = ["merge", "merge-similar", "lvn", "gvn", "dce"];
    let iterations = std::env::var("MERGELIFT_FUZZ_ORDER_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let mut orders: Vec<Vec<&str>> = vec![Vec::new()];
    for _ in 0..passes.len() {
        orders = orders
            .into_iter()
            .flat_map(|o| {
                passes
                    .iter()
                    .filter(|p| !o.contains(p))
                    .map(|p| {
                        let mut o = o.clone();
                        o.push(p);
                        o
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    assert_eq!(orders.len(), 120);
    let mut failures = Vec::new();
    let mut calls = 0;
    for (k, order) in orders.iter().enumerate() {
        let opts = FuzzOptions {
            iterations,
            seed: 0x6f72_6465_7200 + k as u64,
            passes: order.join(","),
            out_dir: out_dir(),
            ..Default::default()
        };
        let report = fuzz(&opts);
        calls += report.calls;
        assert_eq!(report.passed + report.failed, iterations);
        failures.extend(
            report
                .failures
                .iter()
                .map(|f| format!("{}: {f}", opts.passes)),
        );
    }
    eprintln!(
        "{} orders x {iterations} modules: {calls} calls compared",
        orders.len()
    );
    assert!(calls > orders.len() * iterations);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Batched mode (`--batch`): the pipeline defines each module a few functions at a time with
/// `finalize_definitions` after each batch, as a lazy JIT does, so later batches merge into
/// frozen code (`merge_one` for batches of one, `merge_into_frozen` for larger ones). Every
/// call must still agree with the interpreter, and merges into frozen functions must happen.
/// The passes are the library's default (`merge,merge-similar`): with `lvn` after `merge`,
/// few functions merge into frozen ones (a frozen function is indexed as `lvn` left it, a new
/// one looked up as defined), and the count would not show that the path was exercised.
#[test]
fn batched_fuzz_run_merges_into_frozen_code() {
    let iterations = std::env::var("MERGELIFT_FUZZ_BATCH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    for (k, batch) in [BatchMode::Size(1), BatchMode::Size(2), BatchMode::Random]
        .into_iter()
        .enumerate()
    {
        let opts = FuzzOptions {
            iterations,
            seed: 0x6261_7463_6800 + k as u64,
            passes: "merge,merge-similar".into(),
            out_dir: out_dir(),
            batch,
            late_addresses: false,
            threads: Default::default(),
        };
        let t = std::time::Instant::now();
        let report = fuzz(&opts);
        let into_frozen = report.stats.get(midend::Counter::MergeIntoFrozen);
        eprintln!(
            "fuzz --batch {batch}: {} in {:?}; {} calls compared, {} batches, merged {}, \
             merge.into_frozen {into_frozen}, merged_similar {}",
            report.summary(),
            t.elapsed(),
            report.calls,
            report.batches,
            report.stats.get(midend::Counter::Merged),
            report.merged_similar,
        );
        assert_eq!(report.passed + report.failed, iterations);
        assert_eq!(report.failed, 0, "{}", report.failures.join("\n"));
        assert!(report.calls > iterations, "too few calls compared");
        assert_eq!(report.batched_modules, iterations);
        assert!(
            report.batches > 2 * iterations,
            "modules were not split: {} batches",
            report.batches
        );
        // (A flush per batch, and one per module that gives late thunks to the functions a
        // last data object holds.)
        let flushes = report.stats.get(midend::Counter::Flushes);
        assert!(
            (report.batches as u64..=(report.batches + report.batched_modules) as u64)
                .contains(&flushes),
            "{flushes} flushes for {} batches",
            report.batches
        );
        assert!(
            into_frozen > 0,
            "--batch {batch}: nothing merged into frozen code"
        );
        // Invalid functions were mixed into batches, refused at define or failing alone.
        assert!(
            report.stats.custom("fuzz.invalid_refused") > Some(0),
            "{batch}"
        );
        assert!(
            report.stats.custom("fuzz.invalid_failed") > Some(0),
            "{batch}"
        );
    }
}

/// Batches compiled on two threads, invalid functions mixed in and addresses taken across
/// batches: the same behaviour as the interpreter's, and the threads really compiled.
#[test]
fn batched_fuzz_run_on_two_threads_finds_no_mismatch() {
    let opts = FuzzOptions {
        iterations: 100,
        seed: 0x7468_7265_6164,
        passes: "merge,merge-similar,lvn".into(),
        out_dir: out_dir(),
        batch: BatchMode::Random,
        late_addresses: true,
        threads: jit_driver::Threads::Count(2),
    };
    let report = fuzz(&opts);
    eprintln!(
        "fuzz --batch random --late-addresses --threads 2: {}; {} batches, {} compiled in parallel",
        report.summary(),
        report.batches,
        report.stats.get(midend::Counter::CompiledInParallel),
    );
    assert_eq!(report.failed, 0, "{}", report.failures.join("\n"));
    assert_eq!(report.passed, opts.iterations);
    assert!(report.stats.get(midend::Counter::CompiledInParallel) > 0);
    assert!(report.stats.custom("fuzz.invalid_failed") > Some(0));
}

/// Batches through `merge-aligned`: members folded by one batch (no code of their own) are
/// called by later batches through the merged body, and a later batch's pairs fold too.
#[test]
fn batched_aligned_fuzz_run_finds_no_mismatch() {
    for (k, batch) in [BatchMode::Size(2), BatchMode::Random]
        .into_iter()
        .enumerate()
    {
        let opts = FuzzOptions {
            iterations: 100,
            seed: 0x616c_6962_6174 + k as u64,
            passes: "merge,merge-similar,merge-aligned".into(),
            out_dir: out_dir(),
            batch,
            late_addresses: false,
            threads: Default::default(),
        };
        let report = fuzz(&opts);
        eprintln!(
            "aligned fuzz --batch {batch}: {}; {} batches, merged_aligned {}, aligned.folded {}, \
             aligned.callers_rewritten {}",
            report.summary(),
            report.batches,
            report.stats.get(midend::Counter::MergedAligned),
            report.stats.get(midend::Counter::AlignedFolded),
            report.stats.get(midend::Counter::AlignedCallersRewritten),
        );
        assert_eq!(report.failed, 0, "{}", report.failures.join("\n"));
        assert_eq!(report.passed, opts.iterations);
        assert!(
            report.stats.get(midend::Counter::AlignedFolded) > 0,
            "{batch}"
        );
    }
}

/// A batch plan places every function once, never before what it refers to (a callee is in
/// the same batch or an earlier one), keeps batches at the size asked for unless recursion
/// ties more functions together, and is module order when nothing refers forward.
#[test]
fn batch_plans_respect_references() {
    for seed in 0..40u64 {
        let m = module_for_seed(seed).unwrap();
        let funcs = &m.functions;
        for size in 1..=4 {
            let plan = batch_plan(funcs, size, false);
            let mut batch_of = vec![usize::MAX; funcs.len()];
            for (b, fs) in plan.iter().enumerate() {
                assert!(!fs.is_empty());
                for &i in fs {
                    assert_eq!(batch_of[i], usize::MAX, "placed twice");
                    batch_of[i] = b;
                }
            }
            assert!(batch_of.iter().all(|&b| b != usize::MAX), "not placed");
            let index = |name: &str| funcs.iter().position(|f| f.name.to_string() == name);
            for (i, f) in funcs.iter().enumerate() {
                for e in f.dfg.ext_funcs.values() {
                    let name = e.name.display(Some(&f.params)).to_string();
                    if let Some(j) = index(&name) {
                        assert!(
                            batch_of[j] <= batch_of[i],
                            "seed {seed}: {} is defined after its caller {}",
                            name,
                            f.name
                        );
                    }
                }
                // Addresses are taken in the batch of the function (not `late_addresses`).
                for b in f.layout.blocks() {
                    for inst in f.layout.block_insts(b) {
                        if let cranelift_codegen::ir::InstructionData::FuncAddr {
                            func_ref, ..
                        } = f.dfg.insts[inst]
                        {
                            let e = &f.dfg.ext_funcs[func_ref];
                            let name = e.name.display(Some(&f.params)).to_string();
                            if let Some(j) = index(&name) {
                                assert_eq!(batch_of[j], batch_of[i], "seed {seed}: {name}");
                            }
                        }
                    }
                }
            }
        }
    }
    // No references: module order, in batches of the size.
    let m = module_for_seed(1).unwrap();
    let leaves: Vec<_> = m
        .functions
        .iter()
        .filter(|f| f.dfg.ext_funcs.is_empty() && f.global_values.is_empty())
        .cloned()
        .collect();
    if leaves.len() >= 2 {
        let plan = batch_plan(&leaves, 2, false);
        let flat: Vec<usize> = plan.iter().flatten().copied().collect();
        assert_eq!(flat, (0..leaves.len()).collect::<Vec<_>>());
        assert!(plan.iter().all(|b| b.len() <= 2));
    }
}

/// A JIT `MergeModule` with `config` over `linked`, all declared first, then defined in order
/// with `finalize_definitions` after each function whose position is in `ends`; `check` runs
/// after each of those finalizes with the position and the ids.
fn jit_in_batches(
    config: jit_driver::MergeConfig,
    linked: Vec<(cranelift_module::Linkage, cranelift_codegen::ir::Function)>,
    ends: &[usize],
    mut check: impl FnMut(
        usize,
        &jit_driver::MergeModule<cranelift_jit::JITModule>,
        &[cranelift_module::FuncId],
    ),
) -> (
    jit_driver::MergeModule<cranelift_jit::JITModule>,
    Vec<cranelift_module::FuncId>,
) {
    use cranelift_module::Module;
    let isa = jit_driver::host_isa(jit_driver::OptLevel::None).unwrap();
    let jit = cranelift_jit::JITModule::new(jit_driver::jit_builder(isa, &[]));
    let mut m = jit_driver::MergeModule::with_config(jit, config);
    let declared = jit_driver::declare_by_name(&mut m, linked).unwrap();
    let ids: Vec<_> = declared.iter().map(|(_, id, _)| *id).collect();
    let mut ctx = cranelift_codegen::Context::new();
    for (k, (_, id, f)) in declared.into_iter().enumerate() {
        ctx.clear();
        ctx.func = f;
        m.define_function(id, &mut ctx).unwrap();
        if ends.contains(&k) {
            m.finalize_definitions().unwrap();
            check(k, &m, &ids);
        }
    }
    (m, ids)
}

/// Found by `--batch --late-addresses`: a later batch that takes the address (`func_addr`) of
/// a function an earlier batch merged away (no code of its own: an exact merge of a local or
/// exported function, or a `merge-similar` fold) made cranelift-jit panic `can't resolve
/// symbol g` at the finalize. Now the function gets code in the later batch: a thunk to its
/// survivor, with an address of its own.
#[test]
fn address_taken_after_an_earlier_batch_merged_the_function() {
    use cranelift_module::Linkage;
    let text = "
function %f(i64) -> i64 {
block0(v0: i64):
    v1 = iconst.i64 7
    v2 = iadd v0, v1
    return v2
}
function %g(i64) -> i64 {
block0(v0: i64):
    v1 = iconst.i64 7
    v2 = iadd v0, v1
    return v2
}
function %h() -> i64 {
    sig0 = (i64) -> i64
    fn0 = colocated %g sig0
block0:
    v0 = func_addr.i64 fn0
    return v0
}
";
    let funcs = cranelift_reader::parse_functions(text).unwrap();
    for g_linkage in [Linkage::Local, Linkage::Export] {
        let linked = vec![
            (Linkage::Export, funcs[0].clone()),
            (g_linkage, funcs[1].clone()),
            (Linkage::Export, funcs[2].clone()),
        ];
        // Batch 1: f and g; g merges into f. Batch 2: h takes g's address.
        let (m, ids) = jit_in_batches(Default::default(), linked, &[1, 2], |k, m, ids| {
            if k == 1 {
                assert_eq!(m.merged_into(ids[1]), Some(ids[0]), "{g_linkage:?}");
            }
        });
        // SAFETY: h is `() -> i64`.
        let h: extern "C" fn() -> i64 =
            unsafe { std::mem::transmute(m.get_finalized_function(ids[2])) };
        let g: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(h() as usize) };
        assert_eq!(g(1), 8);
        // Its own address, not its survivor's.
        assert_ne!(h() as usize, m.get_finalized_function(ids[0]) as usize);
        assert_eq!(m.merged_into(ids[1]), Some(ids[0]));
        // SAFETY: nothing runs any more.
        unsafe { m.free_memory() };
    }
}

/// Regression (found by `--batch 2`): a call, in a later batch, to a function that `merge`
/// aliased to a member `merge-similar` then folded (no code of its own: `f0_dup1` -> `f0`,
/// folded into a shared body) was not rewritten to call the shared body, and cranelift-jit
/// panicked `can't resolve symbol f0`. `merge-similar` now looks the callee up through
/// aliases when it rewrites calls of members merged by earlier batches.
#[test]
fn later_batch_calls_a_folded_member_through_an_alias() {
    let opts = FuzzOptions {
        passes: "merge,merge-similar,lvn".into(),
        out_dir: out_dir(),
        batch: BatchMode::Size(2),
        ..Default::default()
    };
    let mut report = mergelift_tools::fuzz::FuzzReport::default();
    let failure = mergelift_tools::fuzz::fuzz_one(0x4c32_5863_daa5_8e82, &opts, &mut report);
    assert_eq!(failure, None);
    assert!(report.calls > 0);
}

/// A function a pass after `merge` changed (lvn removes a redundant add here) is indexed, once
/// compiled, by its body as defined: an equal function defined in a later batch merges into it
/// (it was looked up by its own body as defined, so it did not match the optimised one).
#[test]
fn later_batch_merges_into_a_function_lvn_changed() {
    use cranelift_module::Linkage;
    use jit_driver::MergeConfig;
    use midend::PassKind;
    let body = "(i64, i64) -> i64 {
block0(v0: i64, v1: i64):
    v2 = iadd v0, v1
    v3 = iadd v0, v1
    v4 = imul v2, v3
    return v4
}
";
    let text = format!("function %f{body}function %g{body}");
    let funcs = cranelift_reader::parse_functions(&text).unwrap();
    for passes in [
        &[PassKind::Merge, PassKind::Lvn][..],
        &[
            PassKind::Merge,
            PassKind::MergeSimilar,
            PassKind::Lvn,
            PassKind::Gvn,
            PassKind::Dce,
        ],
    ] {
        let linked = funcs.iter().map(|f| (Linkage::Export, f.clone())).collect();
        let config = MergeConfig::with_passes(passes);
        let (m, ids) = jit_in_batches(config, linked, &[0, 1], |k, m, _| {
            if k == 0 {
                // The first batch's passes changed f (the second add is gone).
                let (i, o) = (
                    m.stats().get(midend::Counter::LirInstsIn),
                    m.stats().get(midend::Counter::LirInstsOut),
                );
                assert!(o < i, "{passes:?}: {o:?} < {i:?}");
            }
        });
        assert_eq!(m.merged_into(ids[1]), Some(ids[0]), "{passes:?}");
        // SAFETY: both are `(i64, i64) -> i64`.
        let g: extern "C" fn(i64, i64) -> i64 =
            unsafe { std::mem::transmute(m.get_finalized_function(ids[1])) };
        assert_eq!(g(2, 3), 25);
        // SAFETY: nothing runs any more.
        unsafe { m.free_memory() };
    }
}
