//! The template-heavy CLIF generator: determinism, validity (reader + Cranelift verifier), shape
//! statistics, and that MergeFunctions merges exactly the generated duplicates and none of the
//! near-duplicates.

use cranelift_codegen::ir::Function;
use cranelift_codegen::settings;
use mergelift_tools::gen::{generate, GenOptions, GenOutput};

fn opts(functions: usize, dup_ratio: f64, near_ratio: f64, seed: u64) -> GenOptions {
    GenOptions {
        functions,
        dup_ratio,
        near_ratio,
        edit_ratio: 0.0,
        seed,
    }
}

fn parse(out: &GenOutput) -> Vec<Function> {
    cranelift_reader::parse_functions(&out.text).unwrap_or_else(|e| panic!("parse: {e}"))
}

fn merged(funcs: &[Function]) -> midend::passes::merge::MergeReport {
    let mut m = jit_driver::lift_functions(funcs.iter(), &mut midend::Stats::default())
        .unwrap_or_else(|e| panic!("lift: {e}"));
    midend::passes::merge::merge_functions(&mut m, &mut midend::PassState::default())
}

#[test]
fn deterministic() {
    let a = generate(&opts(300, 0.4, 0.1, 7));
    let b = generate(&opts(300, 0.4, 0.1, 7));
    assert_eq!(a.text, b.text);
    assert_eq!(a.duplicates, b.duplicates);
    let c = generate(&opts(300, 0.4, 0.1, 8));
    assert_ne!(a.text, c.text);
}

#[test]
fn parses_and_verifies() {
    let flags = settings::Flags::new(settings::builder());
    for (seed, dup, near) in [(1, 0.5, 0.1), (2, 0.0, 0.0), (3, 0.8, 0.1), (4, 0.2, 0.4)] {
        let out = generate(&opts(400, dup, near, seed));
        let funcs = parse(&out);
        assert_eq!(funcs.len(), 400);
        assert_eq!(out.functions, 400);
        let mut names = std::collections::HashSet::new();
        for f in &funcs {
            assert!(
                names.insert(f.name.to_string()),
                "duplicate name {}",
                f.name
            );
            cranelift_codegen::verifier::verify_function(f, &flags)
                .unwrap_or_else(|e| panic!("verify {}: {e}\n{}", f.name, f.display()));
        }
        // Every callee is defined in the module.
        for f in &funcs {
            for (_, ext) in f.dfg.ext_funcs.iter() {
                let callee = ext.name.display(Some(&f.params)).to_string();
                assert!(
                    names.contains(&callee),
                    "{}: undefined callee {callee}",
                    f.name
                );
            }
        }
        // The counted statistics match the text.
        let insts: usize = funcs
            .iter()
            .map(|f| {
                f.layout
                    .blocks()
                    .map(|b| f.layout.block_insts(b).count())
                    .sum::<usize>()
            })
            .sum();
        let blocks: usize = funcs.iter().map(|f| f.layout.blocks().count()).sum();
        assert_eq!(insts, out.clif_insts);
        assert_eq!(blocks, out.blocks);
    }
}

#[test]
fn averages_for_1000_functions() {
    for seed in [0, 1] {
        let out = generate(&opts(1000, 0.3, 0.1, seed));
        let n = out.functions as f64;
        let (i, b, c) = (
            out.clif_insts as f64 / n,
            out.blocks as f64 / n,
            out.calls as f64 / n,
        );
        assert!((20.0..=45.0).contains(&i), "insts/function {i}");
        assert!((3.0..=6.0).contains(&b), "blocks/function {b}");
        assert!((0.4..=1.2).contains(&c), "calls/function {c}");
        // Calls counted match the text.
        let calls = out.text.matches(" = call fn").count();
        assert_eq!(calls, out.calls);
    }
}

#[test]
fn ratios_roughly_hold() {
    for (dup, near) in [(0.0, 0.0), (0.5, 0.1), (0.8, 0.1), (0.3, 0.3)] {
        let out = generate(&opts(2000, dup, near, 5));
        let n = out.functions as f64;
        assert!(
            (out.duplicates as f64 / n - dup).abs() < 0.03,
            "dup {dup}: {}",
            out.duplicates
        );
        assert!(
            (out.near_duplicates as f64 / n - near).abs() < 0.03,
            "near {near}: {}",
            out.near_duplicates
        );
    }
}

/// The merge pass merges exactly the generated duplicates (direct and transitive through
/// callees of the same source type): every specialisation holds a unique key constant, so
/// nothing else can merge; near-duplicates differ from their base in that key only, and must
/// not merge.
#[test]
fn merge_finds_exactly_the_duplicates() {
    for (n, dup, near, seed) in [
        (500, 0.5, 0.1, 11),
        (500, 0.8, 0.1, 12),
        (300, 0.0, 0.5, 13),
    ] {
        let out = generate(&opts(n, dup, near, seed));
        let funcs = parse(&out);
        let report = merged(&funcs);
        assert_eq!(
            report.merged, out.duplicates,
            "dup_ratio {dup}: merged {} vs generated duplicates {}",
            report.merged, out.duplicates
        );
    }
}

/// Near-duplicates are one constant away from an earlier function: with the function's own name
/// and its key constant (the only `iconst` >= 100) normalised away, at least `near_duplicates`
/// functions equal an earlier one; yet none merge.
#[test]
fn near_duplicates_are_one_constant_away() {
    let out = generate(&opts(200, 0.0, 0.5, 21));
    assert!(out.near_duplicates >= 90, "{}", out.near_duplicates);
    let funcs = parse(&out);
    let mut seen = std::collections::HashSet::new();
    let mut repeats = 0;
    for f in &funcs {
        let name = f.name.to_string();
        let text = f.display().to_string().replace(&name, "%SELF");
        let norm: Vec<String> = text
            .lines()
            // Drop the printer's `; v3 = 107` comments.
            .map(|l| l.split_once(" ;").map_or(l, |(code, _)| code))
            .map(|l| match l.split_once("iconst.") {
                Some((head, rest)) => match rest.split_once(' ') {
                    Some((ty, k)) if k.parse::<i64>().is_ok_and(|k| k >= 100) => {
                        format!("{head}iconst.{ty} K")
                    }
                    _ => l.to_string(),
                },
                None => l.to_string(),
            })
            .collect();
        if !seen.insert(norm.join("\n")) {
            repeats += 1;
        }
    }
    assert!(
        repeats >= out.near_duplicates,
        "{repeats} < {}",
        out.near_duplicates
    );
    assert_eq!(merged(&funcs).merged, 0, "near-duplicates must not merge");
}

/// Measurements for the report: `cargo test -p mergelift-tools --test gen -- --ignored --nocapture`.
#[test]
#[ignore]
fn report() {
    for n in [1000, 10000] {
        let out = generate(&opts(n, 0.3, 0.1, 1));
        let f = out.functions as f64;
        println!(
            "n={n}: insts/fn {:.2} blocks/fn {:.2} calls/fn {:.2}",
            out.clif_insts as f64 / f,
            out.blocks as f64 / f,
            out.calls as f64 / f
        );
    }
    for dup in [0.5, 0.8] {
        for n in [1000, 10000] {
            let out = generate(&opts(n, dup, 0.1, 1));
            let funcs = parse(&out);
            // Duplicates identical before any merging (same text up to the own name).
            let mut seen = std::collections::HashSet::new();
            let direct = funcs
                .iter()
                .filter(|f| {
                    let name = f.name.to_string();
                    !seen.insert(f.display().to_string().replace(&name, "%SELF"))
                })
                .count();
            let t = std::time::Instant::now();
            let r = merged(&funcs);
            println!(
                "n={n} dup_ratio={dup} near=0.1: duplicates {} (direct {direct}, transitive {}), near {}, merged {} in {:?}",
                out.duplicates,
                out.duplicates - direct,
                out.near_duplicates,
                r.merged,
                t.elapsed()
            );
        }
    }
}

/// Every generated function terminates and computes the same values (return value and memory)
/// unoptimised and after `merge,lvn`.
#[test]
fn executes_the_same_with_and_without_merge() {
    use cranelift_codegen::ir::types;
    use cranelift_jit::JITModule;
    use cranelift_module::Linkage;
    use jit_driver::{MergeConfig, MergeModule};
    let out = generate(&opts(100, 0.5, 0.1, 31));
    let funcs = parse(&out);
    let run = |passes: &str| -> Vec<(i64, [i64; 8])> {
        let config = MergeConfig::with_passes(&midend::parse_pass_list(passes).unwrap());
        let isa = jit_driver::host_isa(jit_driver::OptLevel::None).unwrap();
        let jit = JITModule::new(jit_driver::jit_builder(isa, &[]));
        let mut m = MergeModule::with_config(jit, config);
        let named = funcs.iter().map(|f| (Linkage::Export, f.clone())).collect();
        let ids = jit_driver::define_by_name(&mut m, named)
            .unwrap_or_else(|e| panic!("define {passes}: {e}"));
        m.flush_last()
            .unwrap_or_else(|e| panic!("compile {passes}: {e}"));
        m.finalize_definitions()
            .unwrap_or_else(|e| panic!("finalize {passes}: {e}"));
        let mut results = Vec::new();
        for f in &funcs {
            let name = f.name.to_string();
            let name = name.trim_start_matches('%');
            let id = (ids.iter().find(|(n, _)| n == name)).unwrap_or_else(|| panic!("no {name}"));
            let ptr = m.get_finalized_function(id.1);
            let mut buf: [i64; 8] = [3, -7, 11, 100, -2, 5, 64, 9];
            let bp = buf.as_mut_ptr();
            let params: Vec<_> = f.signature.params.iter().map(|p| p.value_type).collect();
            // SAFETY: the signatures below are exactly the generated ones (system_v), and every
            // pointer argument points to 64 writable bytes.
            let r = unsafe {
                match (params.len(), params[params.len() - 1] == types::I32) {
                    (1, true) => {
                        std::mem::transmute::<*const u8, extern "C" fn(i32) -> i32>(ptr)(13) as i64
                    }
                    (1, false) => {
                        std::mem::transmute::<*const u8, extern "C" fn(i64) -> i64>(ptr)(13)
                    }
                    (2, true) => {
                        std::mem::transmute::<*const u8, extern "C" fn(*mut i64, i32) -> i32>(ptr)(
                            bp, 29,
                        ) as i64
                    }
                    (2, false) => std::mem::transmute::<
                        *const u8,
                        extern "C" fn(*mut i64, i64) -> i64,
                    >(ptr)(bp, 29),
                    (3, true) => std::mem::transmute::<
                        *const u8,
                        extern "C" fn(*mut i64, i32, i32) -> i32,
                    >(ptr)(bp, 21, 5) as i64,
                    (3, false) => std::mem::transmute::<
                        *const u8,
                        extern "C" fn(*mut i64, i64, i64) -> i64,
                    >(ptr)(bp, 21, 5),
                    _ => unreachable!("{name}"),
                }
            };
            results.push((r, buf));
        }
        results
    };
    let base = run("none");
    let opt = run("merge,lvn");
    for (i, (a, b)) in base.iter().zip(&opt).enumerate() {
        assert_eq!(a, b, "{}", funcs[i].name);
    }
}

/// The hashing walk of a large module runs on several threads; the result (which functions
/// merge into which, and how) is the same for any number of threads, and the merges validate.
#[test]
fn merge_is_the_same_on_any_number_of_threads() {
    use midend::passes::merge::{merge_functions_with, MergeOptions};
    let out = generate(&opts(3000, 0.5, 0.1, 11));
    let funcs = parse(&out);
    let lifted = jit_driver::lift_functions(funcs.iter(), &mut midend::Stats::default())
        .unwrap_or_else(|e| panic!("lift: {e}"));
    let run = |threads: usize| {
        let mut m = lifted.clone();
        let mut ps = midend::PassState::default();
        let r = merge_functions_with(&mut m, &mut ps, MergeOptions { threads });
        midend::verifier::verify_module(&m, true).unwrap_or_else(|e| panic!("{e}"));
        let removed: Vec<bool> = m.functions.keys().map(|f| m.removed[f]).collect();
        (r.pairs, r.merged, r.aliased, ps.merges, removed)
    };
    let one = run(1);
    assert_eq!(one.1, out.duplicates, "every duplicate merges");
    for threads in [2, 3, 7] {
        assert!(run(threads) == one, "{threads} threads differ from one");
    }
}

/// The call-graph shapes (`gen --shape`): valid CLIF, and merged exactly as an independent
/// oracle says. Two functions of these modules are equal when their own bodies are and their
/// callees are, position by position, recursively; on a ring all are; elsewhere the call
/// graph has no cycle, so a function's class is its body and its callees' classes, computed
/// here from the leaves up.
#[test]
fn call_graph_shapes_merge_as_the_oracle_says() {
    use mergelift_tools::gen::{generate_shape, CallShape};
    use std::collections::HashMap;
    let flags = settings::Flags::new(settings::builder());
    for (name, shape) in CallShape::ALL {
        for n in [1, 2, 3, 64, 67, 300] {
            let mut text = Vec::new();
            generate_shape(shape, n, &mut text).unwrap();
            let text = String::from_utf8(text).unwrap();
            let funcs = cranelift_reader::parse_functions(&text).unwrap();
            assert_eq!(funcs.len(), n);
            for f in &funcs {
                cranelift_codegen::verify_function(f, &flags).unwrap();
            }
            // Each function's body (its constant), and its callees by index.
            let body: Vec<(String, Vec<usize>)> = funcs
                .iter()
                .map(|f| {
                    let s = f.display().to_string();
                    let k = s
                        .lines()
                        .find(|l| l.contains("iconst"))
                        .unwrap()
                        .to_string();
                    let callees = f
                        .dfg
                        .ext_funcs
                        .values()
                        .map(|e| {
                            let n = e.name.display(Some(&f.params)).to_string();
                            n.trim_start_matches("%c").parse().unwrap()
                        })
                        .collect();
                    (k, callees)
                })
                .collect();
            let want = if shape == CallShape::Ring {
                n - 1
            } else {
                let mut class: Vec<Option<usize>> = vec![None; n];
                let mut ids: HashMap<(String, Vec<usize>), usize> = HashMap::new();
                fn class_of(
                    i: usize,
                    body: &[(String, Vec<usize>)],
                    class: &mut Vec<Option<usize>>,
                    ids: &mut HashMap<(String, Vec<usize>), usize>,
                ) -> usize {
                    if let Some(c) = class[i] {
                        return c;
                    }
                    let callees: Vec<usize> = (body[i].1.iter())
                        .map(|&c| class_of(c, body, class, ids))
                        .collect();
                    let next = ids.len();
                    let c = *ids.entry((body[i].0.clone(), callees)).or_insert(next);
                    class[i] = Some(c);
                    c
                }
                for i in (0..n).rev() {
                    class_of(i, &body, &mut class, &mut ids);
                }
                n - ids.len()
            };
            let got = merged(&funcs).merged;
            assert_eq!(got, want, "{name} of {n}");
        }
    }
}
