//! What `merge-similar` costs at run time: calls of merged functions in a hot loop, without
//! the pass (`none`: every function has its own code) and with `merge,merge-similar`.
//!
//! - `merged_calls/thunk/{none,similar}`: the host calls an exported member; with the pass it
//!   is a thunk that passes the member's constant and calls the shared body.
//! - `merged_calls/rewritten/{none,similar}`: the host calls `main`, which calls four local
//!   members that differ in one constant; with the pass `main` calls the shared body with the
//!   constant as an extra argument (no thunk).
//! - `merged_calls/indirect/{none,similar}`: as `rewritten`, but the members differ in the
//!   function they call; with the pass the shared body calls through a pointer parameter.
//! - `merged_calls/aligned/{none,similar,aligned}`: the host calls an exported member of a
//!   pair that differs in its operations (one has an operation more in two rounds and
//!   another operation in one), which only `merge-aligned` merges: a thunk passing the
//!   function identifier, and a body with selects on it. `*/aligned` is every case built
//!   with `merge,merge-similar,merge-aligned` (the cost of the pass beside `*/similar`).
//!
//! `cargo bench --bench merged_calls`. Times are per call from the host (one call of `main`
//! makes four member calls).

#[path = "../tests/common/mod.rs"]
mod common;
use common::jit::{Jit, JitBatch};
use cranelift_module::Linkage;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use mergelift::MergeConfig;

/// A member: about 40 instructions around the constant `k`, calling `callee` once when given.
fn member(name: &str, k: i64, callee: Option<&str>) -> String {
    member_edited(name, k, callee, (&[], None))
}

/// `member`, with an operation more in the rounds `extra` and another operation in the round
/// `other`.
fn member_edited(
    name: &str,
    k: i64,
    callee: Option<&str>,
    (extra, other): (&[usize], Option<usize>),
) -> String {
    let mut s = format!("function %{name}(i64) -> i64 {{\n");
    if let Some(c) = callee {
        s += &format!("    fn0 = %{c}(i64) -> i64\n");
    }
    s += &format!("block0(v0: i64):\n    v1 = iconst.i64 {k}\n");
    let mut prev = "v0".to_string();
    for j in 0..12 {
        let (a, b, c) = (10 + 3 * j, 11 + 3 * j, 12 + 3 * j);
        let op = if other == Some(j) { "isub" } else { "iadd" };
        s += &format!(
            "    v{a} = imul {prev}, v1\n    v{b} = {op} v{a}, v0\n    v{c} = bxor v{b}, v1\n"
        );
        prev = format!("v{c}");
        if extra.contains(&j) {
            s += &format!("    v{} = rotl {prev}, v1\n", 200 + j);
            prev = format!("v{}", 200 + j);
        }
    }
    if callee.is_some() {
        s += &format!("    v90 = call fn0({prev})\n");
        prev = "v90".into();
    }
    s += &format!("    return {prev}\n}}\n");
    s
}

/// A leaf `x * m + 1`, a callee that differs between members.
fn leaf(name: &str, m: i64) -> String {
    format!(
        "function %{name}(i64) -> i64 {{\nblock0(v0: i64):\n    v1 = iconst.i64 {m}\n    v2 = imul v0, v1\n    v3 = iconst.i64 1\n    v4 = iadd v2, v3\n    return v4\n}}\n"
    )
}

/// `name(x)` = the sum of `callees(x)`.
fn caller(name: &str, callees: &[&str]) -> String {
    let mut s = format!("function %{name}(i64) -> i64 {{\n");
    for (k, c) in callees.iter().enumerate() {
        s += &format!("    fn{k} = %{c}(i64) -> i64\n");
    }
    s += "block0(v0: i64):\n    v1 = iconst.i64 0\n";
    let mut acc = "v1".to_string();
    for k in 0..callees.len() {
        s += &format!(
            "    v{} = call fn{k}(v0)\n    v{} = iadd {acc}, v{}\n",
            100 + 2 * k,
            101 + 2 * k,
            100 + 2 * k
        );
        acc = format!("v{}", 101 + 2 * k);
    }
    s += &format!("    return {acc}\n}}\n");
    s
}

fn module_text() -> String {
    let mut s = String::new();
    // Exported members (thunks with the pass).
    for (k, name) in ["xa", "xb", "xc", "xd"].iter().enumerate() {
        s += &member(name, 3 + 4 * k as i64, None);
    }
    // Local members called from `main`.
    for (k, name) in ["la", "lb", "lc", "ld"].iter().enumerate() {
        s += &member(name, 5 + 2 * k as i64, None);
    }
    s += &caller("main", &["la", "lb", "lc", "ld"]);
    // Local members that differ in their callee.
    for (k, name) in ["pa", "pb", "pc", "pd"].iter().enumerate() {
        let l = format!("leaf{k}");
        s += &leaf(&l, 2 + k as i64);
        s += &member(name, 9, Some(&l));
    }
    s += &caller("mainp", &["pa", "pb", "pc", "pd"]);
    // Exported members that differ in their operations.
    s += &member_edited("ya", 3, None, (&[5], None));
    s += &member_edited("yb", 3, None, (&[3, 9], Some(6)));
    s
}

fn compile(passes: &str) -> Jit {
    let local = ["la", "lb", "lc", "ld", "pa", "pb", "pc", "pd"];
    let mut p = JitBatch::new(MergeConfig::with_passes(
        &midend::parse_pass_list(passes).unwrap(),
    ));
    for f in cranelift_reader::parse_functions(&module_text()).unwrap() {
        let name = f.name.to_string();
        let linkage = if local.contains(&name.trim_start_matches('%')) {
            Linkage::Local
        } else {
            Linkage::Export
        };
        p.add_function(linkage, f);
    }
    p.compile().unwrap()
}

fn entry(m: &Jit, name: &str) -> extern "C" fn(i64) -> i64 {
    // SAFETY: every entry point here has the signature `(i64) -> i64`.
    unsafe { m.get(name) }.unwrap()
}

fn merged_calls(c: &mut Criterion) {
    let plain = compile("none");
    let similar = compile("merge,merge-similar");
    let aligned = compile("merge,merge-similar,merge-aligned");
    let s = similar.stats();
    println!(
        "merge-similar: {} groups, {} members merged, {} thunks, {} call sites rewritten",
        s.get(mergelift::Counter::SimilarGroups),
        s.get(mergelift::Counter::MergedSimilar),
        s.get(mergelift::Counter::SimilarThunks),
        s.get(mergelift::Counter::SimilarCallersRewritten)
    );
    println!(
        "merge-aligned: {} groups, {} members merged",
        aligned.stats().get(mergelift::Counter::AlignedGroups),
        aligned.stats().get(mergelift::Counter::MergedAligned),
    );
    // `ya` and `yb`, and the shared bodies of `la`.. and `pa`.. (alike but for the call).
    assert_eq!(aligned.stats().get(mergelift::Counter::MergedAligned), 4);
    // Every build computes the same.
    for name in ["xa", "xd", "main", "mainp", "ya", "yb"] {
        for x in [-3, 0, 7, 1 << 20] {
            let want = entry(&plain, name)(x);
            assert_eq!(want, entry(&similar, name)(x), "{name}({x})");
            assert_eq!(want, entry(&aligned, name)(x), "{name}({x})");
        }
    }
    let mut g = c.benchmark_group("merged_calls");
    for (case, name) in [
        ("thunk", "xb"),
        ("rewritten", "main"),
        ("indirect", "mainp"),
        ("aligned", "yb"),
    ] {
        for (label, m) in [
            ("none", &plain),
            ("similar", &similar),
            ("aligned", &aligned),
        ] {
            let f = entry(m, name);
            g.bench_function(format!("{case}/{label}"), |b| {
                let mut x = 1i64;
                b.iter(|| {
                    x = f(black_box(x)) & 0xffff;
                    x
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, merged_calls);
criterion_main!(benches);
