//! `merge-similar` end to end: every hole kind (integer, f32 and f64 constants, direct callees,
//! tail callees, self-calls), every reason not to merge, and self-recursive near-duplicates.
//! Each module runs unoptimised and with `merge,merge-similar` (and with `lvn` after it): the
//! results must be equal, and the statistics and merge kinds say what was shared.

mod common;
use common::jit::{Jit, JitBatch};
use cranelift_codegen::ir::Function;
use cranelift_module::Linkage;
use mergelift::{MergeConfig, MergeKind};

fn parse(src: &str) -> Vec<Function> {
    cranelift_reader::parse_functions(src).unwrap_or_else(|e| panic!("{e} in:\n{src}"))
}

/// Compile `src` with `passes`; functions named in `local` are local, the others exported.
/// Every function is lifted (`lift_all`), so the pass's statistics count every caller. The
/// host fetches only exported functions (`fetch_locals` off), so a local member folded into a
/// shared body needs no code of its own.
fn compile(src: &str, passes: &str, local: &[&str]) -> Jit {
    compile_with(src, passes, local, true)
}

fn compile_with(src: &str, passes: &str, local: &[&str], lift_all: bool) -> Jit {
    let mut p = JitBatch::new(MergeConfig {
        fetch_locals: false,
        debug: mergelift::tools::DebugOptions {
            lift_all,
            ..Default::default()
        },
        ..MergeConfig::with_passes(&mergelift::parse_pass_list(passes).unwrap())
    });
    for f in parse(src) {
        let name = f.name.to_string();
        let linkage = if local.contains(&name.trim_start_matches('%')) {
            Linkage::Local
        } else {
            Linkage::Export
        };
        p.add_function(linkage, f);
    }
    p.compile()
        .unwrap_or_else(|e| panic!("compile with {passes}: {e}"))
}

fn call(m: &Jit, name: &str, x: i64) -> i64 {
    // SAFETY: every entry point called here has the signature `(i64) -> i64`.
    let f: extern "C" fn(i64) -> i64 = unsafe { m.get(name) }.unwrap();
    f(x)
}

/// Run `entry` on several inputs unoptimised and with each pass list (and with the default
/// passes, functions no pass could merge not lifted); all must agree. Returns the module
/// compiled with `merge,merge-similar`, every function lifted.
fn check(src: &str, entry: &str, local: &[&str]) -> Jit {
    let plain = compile(src, "none", local);
    let want: Vec<i64> = [-7, 0, 1, 5, 40]
        .iter()
        .map(|&x| call(&plain, entry, x))
        .collect();
    for passes in ["merge,merge-similar,lvn", "merge-similar"] {
        let m = compile(src, passes, local);
        let got: Vec<i64> = [-7, 0, 1, 5, 40]
            .iter()
            .map(|&x| call(&m, entry, x))
            .collect();
        assert_eq!(got, want, "{passes} changed results of {entry}");
    }
    let m = compile_with(src, "merge,merge-similar", local, false);
    let got: Vec<i64> = [-7, 0, 1, 5, 40]
        .iter()
        .map(|&x| call(&m, entry, x))
        .collect();
    assert_eq!(got, want, "unlifted functions changed results of {entry}");
    compile(src, "merge,merge-similar", local)
}

/// A body of about 40 instructions around one hole `HOLE`, of type `ty` (`i64`, `f32`, `f64`).
fn body(name: &str, ty: &str, hole: &str) -> String {
    let mut s = format!("function %{name}(i64) -> i64 {{\nblock0(v0: i64):\n");
    match ty {
        "i64" => s += &format!("    v1 = iconst.i64 {hole}\n"),
        "f32" => {
            s += &format!("    v100 = f32const {hole}\n");
            s += "    v101 = fcvt_from_sint.f32 v0\n    v102 = fmul v101, v100\n";
            s += "    v1 = fcvt_to_sint_sat.i64 v102\n";
        }
        "f64" => {
            s += &format!("    v100 = f64const {hole}\n");
            s += "    v101 = fcvt_from_sint.f64 v0\n    v102 = fmul v101, v100\n";
            s += "    v1 = fcvt_to_sint_sat.i64 v102\n";
        }
        _ => unreachable!(),
    }
    let mut prev = "v0".to_string();
    for k in 0..12 {
        let (a, b, c) = (10 + 3 * k, 11 + 3 * k, 12 + 3 * k);
        s += &format!(
            "    v{a} = imul {prev}, v1\n    v{b} = iadd v{a}, v0\n    v{c} = bxor v{b}, v1\n"
        );
        prev = format!("v{c}");
    }
    s += &format!("    return {prev}\n}}\n");
    s
}

fn main_calling(callees: &[&str]) -> String {
    let mut s = String::from("function %main(i64) -> i64 {\n");
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

/// By default the host may fetch a local function: a folded local member keeps a thunk
/// passing its constant, and fetched, each member gives its own results.
#[test]
fn local_members_stay_fetchable_by_default() {
    let names = ["a", "b", "c"];
    let src = [
        body("a", "i64", "3"),
        body("b", "i64", "7"),
        body("c", "i64", "-11"),
    ]
    .concat();
    let build = |passes: &str| {
        let mut p = JitBatch::new(MergeConfig {
            debug: mergelift::tools::DebugOptions {
                lift_all: true,
                ..Default::default()
            },
            ..MergeConfig::with_passes(&mergelift::parse_pass_list(passes).unwrap())
        });
        for f in parse(&src) {
            p.add_function(Linkage::Local, f);
        }
        p.compile().unwrap()
    };
    let plain = build("none");
    let m = build("merge,merge-similar");
    assert_eq!(m.module().stats().get(mergelift::Counter::MergedSimilar), 3);
    assert_eq!(m.module().stats().get(mergelift::Counter::SimilarThunks), 3);
    for f in names {
        assert_eq!(
            m.module().merge_kind(m.id(f).unwrap()),
            Some(MergeKind::Thunked)
        );
        for x in [-7, 0, 1, 5, 40] {
            assert_eq!(call(&m, f, x), call(&plain, f, x), "{f}({x})");
        }
    }
}

#[test]
fn integer_constant_holes() {
    let src = [
        body("a", "i64", "3"),
        body("b", "i64", "7"),
        body("c", "i64", "-11"),
    ]
    .concat()
        + &main_calling(&["a", "b", "c"]);
    let m = check(&src, "main", &["a", "b", "c"]);
    let s = m.stats();
    assert_eq!(s.get(mergelift::Counter::SimilarGroups), 1);
    assert_eq!(s.get(mergelift::Counter::MergedSimilar), 3);
    assert_eq!(s.get(mergelift::Counter::SimilarParams), 1);
    assert_eq!(
        s.get(mergelift::Counter::SimilarThunks),
        0,
        "local members need no code"
    );
    assert_eq!(s.get(mergelift::Counter::SimilarCallersRewritten), 3);
    for f in ["a", "b", "c"] {
        assert_eq!(
            m.module().merge_kind(m.id(f).unwrap()),
            Some(MergeKind::Folded)
        );
    }
}

#[test]
fn float_constant_holes() {
    for ty in ["f32", "f64"] {
        let src = [
            body("a", ty, "0x1.8p0"),
            body("b", ty, "-0x1.2p1"),
            body("c", ty, "0x1.8p3"),
        ]
        .concat()
            + &main_calling(&["a", "b", "c"]);
        let m = check(&src, "main", &["a", "b", "c"]);
        assert_eq!(m.stats().get(mergelift::Counter::MergedSimilar), 3, "{ty}");
    }
}

/// Exported members keep a thunk with their own name and signature: the host calls them.
#[test]
fn exported_members_keep_thunks() {
    let src = [body("a", "i64", "3"), body("b", "i64", "7")].concat() + &main_calling(&["a", "b"]);
    let m = check(&src, "main", &[]);
    assert_eq!(m.stats().get(mergelift::Counter::SimilarThunks), 2);
    let plain = compile(&src, "none", &[]);
    for f in ["a", "b"] {
        assert_eq!(
            m.module().merge_kind(m.id(f).unwrap()),
            Some(MergeKind::Thunked)
        );
        for x in [-3, 9] {
            assert_eq!(call(&m, f, x), call(&plain, f, x));
        }
    }
}

/// Functions differing only in which function they call share a body that calls through a
/// function-pointer parameter.
#[test]
fn callee_holes() {
    let leaf = |n: &str, k: i64| {
        format!(
            "function %{n}(i64) -> i64 {{\nblock0(v0: i64):\n    v9 = iconst.i64 {k}\n    v1 = imul v0, v9\n    v2 = iadd v1, v9\n    return v2\n}}\n"
        )
    };
    let caller = |n: &str, callee: &str| {
        let mut s = format!(
            "function %{n}(i64) -> i64 {{\n    fn0 = %{callee}(i64) -> i64\nblock0(v0: i64):\n"
        );
        let mut prev = "v0".to_string();
        for k in 0..10 {
            s += &format!(
                "    v{} = call fn0({prev})\n    v{} = iadd v{}, v0\n    v{} = bxor v{}, {prev}\n",
                10 + 3 * k,
                11 + 3 * k,
                10 + 3 * k,
                12 + 3 * k,
                11 + 3 * k
            );
            prev = format!("v{}", 12 + 3 * k);
        }
        s += &format!("    return {prev}\n}}\n");
        s
    };
    let src = [
        leaf("l2", 2),
        leaf("l3", 3),
        leaf("l5", 5),
        caller("c2", "l2"),
        caller("c3", "l3"),
        caller("c5", "l5"),
    ]
    .concat()
        + &main_calling(&["c2", "c3", "c5"]);
    let m = check(&src, "main", &["c2", "c3", "c5", "l2", "l3", "l5"]);
    assert!(
        m.stats().get(mergelift::Counter::MergedSimilar) >= 3,
        "{:?}",
        m.stats()
    );
}

/// Self-recursive near-duplicates: two countdowns with different steps share one body that
/// calls itself, passing its step on.
#[test]
fn self_recursive_countdowns() {
    let countdown = |n: &str, step: i64| {
        let mut s = format!(
            "function %{n}(i64) -> i64 {{\n    fn0 = %{n}(i64) -> i64\nblock0(v0: i64):\n    v9 = iconst.i64 0\n    v1 = icmp sle v0, v9\n    brif v1, block1, block2\nblock1:\n    v2 = iconst.i64 0\n    return v2\nblock2:\n    v8 = iconst.i64 {step}\n    v3 = isub v0, v8\n    v4 = call fn0(v3)\n"
        );
        let mut prev = "v4".to_string();
        for k in 0..10 {
            s += &format!(
                "    v{} = iadd {prev}, v0\n    v{} = bxor v{}, v3\n",
                10 + 2 * k,
                11 + 2 * k,
                10 + 2 * k
            );
            prev = format!("v{}", 11 + 2 * k);
        }
        s += &format!("    return {prev}\n}}\n");
        s
    };
    let src = [countdown("by1", 1), countdown("by3", 3)].concat() + &main_calling(&["by1", "by3"]);
    let m = check(&src, "main", &["by1", "by3"]);
    assert_eq!(m.stats().get(mergelift::Counter::MergedSimilar), 2);
    assert_eq!(
        m.stats().get(mergelift::Counter::SimilarParams),
        1,
        "the step; the self-call is no parameter"
    );
}

/// A tail call of differing callees becomes an indirect tail call (the `tail` convention and
/// frame pointers, which the pipeline's ISA keeps, allow it).
#[test]
fn tail_callee_holes() {
    let leaf = |n: &str, k: i64| {
        format!(
            "function %{n}(i64) -> i64 tail {{\nblock0(v0: i64):\n    v9 = iconst.i64 {k}\n    v1 = imul v0, v9\n    return v1\n}}\n"
        )
    };
    let tc = |n: &str, callee: &str| {
        let mut s = format!(
            "function %{n}(i64) -> i64 tail {{\n    fn0 = %{callee}(i64) -> i64 tail\nblock0(v0: i64):\n"
        );
        let mut prev = "v0".to_string();
        for k in 0..12 {
            s += &format!(
                "    v{} = imul {prev}, v0\n    v{} = iadd v{}, v0\n",
                10 + 2 * k,
                11 + 2 * k,
                10 + 2 * k
            );
            prev = format!("v{}", 11 + 2 * k);
        }
        s += &format!("    return_call fn0({prev})\n}}\n");
        s
    };
    let main = "function %main(i64) -> i64 {
    fn0 = %t2(i64) -> i64 tail
    fn1 = %t3(i64) -> i64 tail
block0(v0: i64):
    v1 = call fn0(v0)
    v2 = call fn1(v0)
    v3 = iadd v1, v2
    return v3
}
";
    let src = [leaf("l2", 2), leaf("l3", 3), tc("t2", "l2"), tc("t3", "l3")].concat() + main;
    let m = check(&src, "main", &["t2", "t3", "l2", "l3"]);
    assert!(
        m.stats().get(mergelift::Counter::MergedSimilar) >= 2,
        "{:?}",
        m.stats()
    );
}

/// No group: the functions differ in something other than a constant or a callee.
#[test]
fn reasons_not_to_merge() {
    let a = body("a", "i64", "3");
    // A type differs (i32 arithmetic in one).
    let b_type = body("b", "i64", "7").replacen(
        "    v10 = imul v0, v1\n",
        "    v90 = ireduce.i32 v0\n    v91 = ireduce.i32 v1\n    v92 = imul v90, v91\n    v10 = sextend.i64 v92\n",
        1,
    );
    // The calling convention differs.
    let b_conv = body("b", "i64", "7").replacen("-> i64 {", "-> i64 system_v {", 1);
    let a_conv = a.replacen("-> i64 {", "-> i64 tail {", 1);
    for (what, src) in [
        ("type", [a.clone(), b_type].concat()),
        ("calling convention", [a_conv, b_conv].concat()),
    ] {
        let src = src + &main_calling(&["a", "b"]);
        if what == "calling convention" {
            // main calls them with their own conventions.
            let src = src
                .replace("fn0 = %a(i64) -> i64", "fn0 = %a(i64) -> i64 tail")
                .replace("fn1 = %b(i64) -> i64", "fn1 = %b(i64) -> i64 system_v");
            let m = check(&src, "main", &["a", "b"]);
            assert_eq!(
                m.stats().get(mergelift::Counter::MergedSimilar),
                0,
                "{what}"
            );
        } else {
            let m = check(&src, "main", &["a", "b"]);
            assert_eq!(
                m.stats().get(mergelift::Counter::MergedSimilar),
                0,
                "{what}"
            );
        }
    }
    // Memory flags differ.
    let load = |n: &str, flags: &str, k: i64| {
        let mut s = format!(
            "function %{n}(i64) -> i64 {{\n    ss0 = explicit_slot 8\nblock0(v0: i64):\n    v1 = iconst.i64 {k}\n    v2 = stack_addr.i64 ss0\n    store notrap aligned v0, v2\n    v3 = load.i64 {flags} v2\n"
        );
        let mut prev = "v3".to_string();
        for j in 0..12 {
            s += &format!(
                "    v{} = imul {prev}, v1\n    v{} = bxor v{}, v0\n",
                10 + 2 * j,
                11 + 2 * j,
                10 + 2 * j
            );
            prev = format!("v{}", 11 + 2 * j);
        }
        s += &format!("    return {prev}\n}}\n");
        s
    };
    let src = [load("a", "notrap aligned", 3), load("b", "aligned", 7)].concat()
        + &main_calling(&["a", "b"]);
    let m = check(&src, "main", &["a", "b"]);
    assert_eq!(m.stats().get(mergelift::Counter::MergedSimilar), 0, "flags");
}

/// More differing constants than max(4, size / 100) parameters allow: not merged.
#[test]
fn too_many_parameters() {
    let f = |n: &str, base: i64| {
        let mut s = format!("function %{n}(i64) -> i64 {{\nblock0(v0: i64):\n");
        let mut prev = "v0".to_string();
        for k in 0..6 {
            s += &format!(
                "    v{} = iconst.i64 {}\n    v{} = imul {prev}, v{}\n    v{} = iadd v{}, v0\n",
                10 + 3 * k,
                base + k,
                11 + 3 * k,
                10 + 3 * k,
                12 + 3 * k,
                11 + 3 * k
            );
            prev = format!("v{}", 12 + 3 * k);
        }
        s += &format!("    return {prev}\n}}\n");
        s
    };
    let src = [f("a", 100), f("b", 200)].concat() + &main_calling(&["a", "b"]);
    let m = check(&src, "main", &["a", "b"]);
    assert_eq!(m.stats().get(mergelift::Counter::MergedSimilar), 0);
    assert!(m.stats().get(mergelift::Counter::SimilarTooManyParams) >= 1);
}

/// A tiny function called from many places: the extra arguments would cost more than the
/// body saves.
#[test]
fn unprofitable_groups_stay() {
    let tiny = |n: &str, k: i64| {
        format!(
            "function %{n}(i64) -> i64 {{\nblock0(v0: i64):\n    v1 = iconst.i64 {k}\n    v2 = iadd v0, v1\n    v3 = imul v2, v1\n    return v3\n}}\n"
        )
    };
    let callers: Vec<&str> = ["a", "b", "a", "b", "a", "b", "a", "b"].to_vec();
    let src = [tiny("a", 3), tiny("b", 9)].concat() + &main_calling(&callers);
    let m = check(&src, "main", &[]);
    assert_eq!(m.stats().get(mergelift::Counter::MergedSimilar), 0);
    assert!(m.stats().get(mergelift::Counter::SimilarUnprofitable) >= 1);
}

/// A local member whose address is taken keeps a thunk: addresses stay distinct.
#[test]
fn address_significant_members_keep_thunks() {
    let src = [body("a", "i64", "3"), body("b", "i64", "7")].concat()
        + "function %addrs_differ(i64) -> i64 {
    fn0 = %a(i64) -> i64
    fn1 = %b(i64) -> i64
block0(v0: i64):
    v1 = func_addr.i64 fn0
    v2 = func_addr.i64 fn1
    v3 = icmp ne v1, v2
    v4 = uextend.i64 v3
    v5 = call fn0(v0)
    v6 = call fn1(v0)
    v7 = iadd v5, v6
    v8 = iadd v7, v4
    return v8
}
";
    let m = check(&src, "addrs_differ", &["a", "b"]);
    assert_eq!(m.stats().get(mergelift::Counter::SimilarThunks), 2);
    assert_eq!(
        m.module().merge_kind(m.id("a").unwrap()),
        Some(MergeKind::Thunked)
    );
}

/// Preemptible functions are left alone.
#[test]
fn preemptible_members_are_left_alone() {
    let src = [body("a", "i64", "3"), body("b", "i64", "7")].concat() + &main_calling(&["a", "b"]);
    let mut p = JitBatch::new(MergeConfig::with_passes(
        &mergelift::parse_pass_list("merge-similar").unwrap(),
    ));
    for f in parse(&src) {
        let l = if f.name.to_string() == "%main" {
            Linkage::Export
        } else {
            Linkage::Preemptible
        };
        p.add_function(l, f);
    }
    let m = p.compile().unwrap();
    assert_eq!(m.stats().get(mergelift::Counter::MergedSimilar), 0);
}
