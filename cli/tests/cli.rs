//! The `mergelift` command on bad input: clear errors naming the file and position, a non-zero
//! exit, never a panic; and `opt` on good input.

use std::io::Write;

mod common;
use common::mergelift;

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mergelift-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::File::create(&p)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    p
}

const FIB_LIR: &str = "function @fib(i64) -> i64 system_v export {
    sig0 = (i64) -> i64 system_v
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = icmp.i64 slt %vr0, 2
    brif.i8 ne %vr1, bb1, bb2
bb1:
    ret %vr0
bb2:
    %vr2 = sub.i64 %vr0, 1
    %vr3 = call @fib(%vr2), sig0
    %vr4 = sub.i64 %vr0, 2
    %vr5 = call @fib(%vr4), sig0
    %vr6 = add.i64 %vr3, %vr5
    ret %vr6
}
";

#[test]
fn opt_prints_verified_lir() {
    let p = temp_file("fib.lir", FIB_LIR);
    let (code, out, err) = mergelift(&[
        "opt",
        "--passes",
        "none",
        "--emit",
        "lir",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("function @fib(i64) -> i64 system_v export {"),
        "{out}"
    );
    assert!(out.contains("%vr3 = call @fib(%vr2), sig0"), "{out}");
    // Printing what was printed gives the same text.
    let p2 = temp_file("fib2.lir", &out);
    let (_, out2, _) = mergelift(&[
        "opt",
        "--passes",
        "none",
        "--emit",
        "lir",
        p2.to_str().unwrap(),
    ]);
    assert_eq!(out, out2);
}

#[test]
fn opt_emits_clif_and_stats() {
    let p = temp_file("fib3.lir", FIB_LIR);
    let (code, out, err) = mergelift(&[
        "opt",
        "--passes",
        "merge,lvn",
        "--emit",
        "clif",
        "--stats",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("function %fib(i64) -> i64 system_v"), "{out}");
    let last = err.lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    for k in [
        "functions_in",
        "functions_out",
        "merged",
        "lir_insts_before",
        "lir_insts_after",
    ] {
        assert!(v.get(k).is_some(), "missing {k} in {last}");
    }
    for k in ["parse", "lift", "merge", "lvn", "lower"] {
        assert!(
            v["time_ms"].get(k).is_some(),
            "missing time_ms.{k} in {last}"
        );
    }
}

#[test]
fn malformed_lir_reports_file_line_col() {
    let p = temp_file(
        "bad.lir",
        "function @f() system_v export {\nbb0:\n    %vr0 = frobnicate.i32 1\n    ret\n}\n",
    );
    let (code, _, err) = mergelift(&["opt", p.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("bad.lir:3:5: unknown opcode 'frobnicate'"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn lir_verifier_failure_names_function_block_instruction() {
    let p = temp_file("unverified.lir", "function @g(i32) -> i32 system_v export {\nbb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = add.i32 %vr0, %vr9\n    ret %vr1\n}\n");
    let (code, _, err) = mergelift(&["opt", p.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("function g, bb0, `%vr1 = add.i32 %vr0, %vr9`"),
        "{err}"
    );
}

#[test]
fn malformed_clif_reports_file_and_line() {
    let p = temp_file(
        "bad.clif",
        "function %f(i32) -> i32 {\nblock0(v0: i32):\n    v1 = iadd v0\n    return v1\n}\n",
    );
    let (code, _, err) = mergelift(&["opt", "--emit", "clif", p.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("bad.clif:") && err.contains("expected"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn clif_round_trip_keeps_the_function() {
    let p = temp_file("ok.clif", "function %add3(i32, i32, i32) -> i32 {\nblock0(v0: i32, v1: i32, v2: i32):\n    v3 = iadd v0, v1\n    v4 = iadd v3, v2\n    return v4\n}\n");
    let (code, out, err) = mergelift(&[
        "opt",
        "--passes",
        "none",
        "--emit",
        "clif",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("function %add3(i32, i32, i32) -> i32"),
        "{out}"
    );
    assert_eq!(out.matches("iadd").count(), 2, "{out}");
}

/// The bodies the merging passes make have names the Cranelift reader takes back: `opt --emit
/// clif` of a module they merged is itself input `opt` reads, to the same module.
#[test]
fn emitted_clif_with_merged_bodies_reads_back() {
    let (code, module, err) = mergelift(&[
        "gen",
        "--functions",
        "200",
        "--dup-ratio",
        "0.3",
        "--near-ratio",
        "0.3",
        "--edit-ratio",
        "0.3",
    ]);
    assert_eq!(code, 0, "{err}");
    let p = temp_file("merged-in.clif", &module);
    let passes = "merge,merge-similar,merge-aligned";
    let emit = |p: &std::path::Path| {
        let (code, out, err) = mergelift(&[
            "opt",
            "--passes",
            passes,
            "--emit",
            "clif",
            p.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{err}");
        out
    };
    let once = emit(&p);
    assert!(once.contains("%__mergelift_similar_"), "no shared body");
    assert!(once.contains("%__mergelift_aligned_"), "no aligned body");
    let q = temp_file("merged-out.clif", &once);
    let (code, again, err) = mergelift(&[
        "opt",
        "--passes",
        "none",
        "--emit",
        "clif",
        q.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "the emitted CLIF does not read back: {err}");
    assert_eq!(
        again.matches("\nfunction ").count(),
        once.matches("\nfunction ").count()
    );
}

#[test]
fn unknown_pass_is_an_error() {
    let p = temp_file("fib4.lir", FIB_LIR);
    let (code, _, err) = mergelift(&["opt", "--passes", "frob", p.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("unknown pass 'frob'"), "{err}");
}

#[test]
fn run_reports_failures_and_summary() {
    // A deliberately wrong expectation fails its line and the run goes on; a trap is a failure.
    let p = temp_file(
        "wrong.clif",
        "test run\ntarget x86_64\n\nfunction %two() -> i32 {\nblock0:\n    v0 = iconst.i32 2\n    return v0\n}\n; run: %two() == 3\n; run: %two() == 2\n\nfunction %boom(i32) -> i32 {\nblock0(v0: i32):\n    v1 = iconst.i32 0\n    v2 = udiv v0, v1\n    return v2\n}\n; run: %boom(1) == 0\n",
    );
    let (code, out, _) = mergelift(&["run", "--passes", "merge,lvn", p.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("wrong.clif:9: %two() == 3, got 2"), "{out}");
    assert!(
        out.contains("wrong.clif:18: %boom(1) == 0, got trap"),
        "{out}"
    );
    assert!(out.lines().last().unwrap() == "1 passed, 2 failed", "{out}");
}

/// `opt --low-memory` frees merged bodies early and changes nothing else: the same LIR, the
/// same Cranelift IR (every function kept, merged ones as thunks), the same counters, on a
/// generated module with exact and near duplicates.
#[test]
fn low_memory_gives_the_same_output() {
    let (code, clif, _) = mergelift(&["gen", "--functions", "400", "--seed", "5"]);
    assert_eq!(code, 0);
    let input = temp_file("low_memory.clif", &clif);
    let input = input.to_str().unwrap();
    for emit in ["lir", "clif"] {
        let (c1, plain, e1) = mergelift(&["opt", "--stats", "--emit", emit, input]);
        let (c2, low, e2) = mergelift(&["opt", "--stats", "--low-memory", "--emit", emit, input]);
        assert_eq!((c1, c2), (0, 0), "{e1}{e2}");
        assert_eq!(plain, low, "--emit {emit}");
        let counters = |e: &str| -> serde_json::Value {
            let mut v: serde_json::Value = serde_json::from_str(e.lines().last().unwrap()).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("time_ms");
            // Measured, not counted: the peak memory after loading and at the end, which
            // never falls (Linux only).
            if let Some(p) = o.remove("peak_rss_kib") {
                let (load, end) = (p["after_load"].as_u64(), p["end"].as_u64());
                assert!(
                    matches!((load, end), (Some(l), Some(e)) if 0 < l && l <= e),
                    "{p}"
                );
            } else if cfg!(target_os = "linux") {
                panic!("--stats reports peak_rss_kib on Linux");
            }
            v
        };
        let (a, b) = (counters(&e1), counters(&e2));
        assert_eq!(a, b);
        assert!(a["merged"].as_u64().unwrap() > 0 && a["merged_similar"].as_u64().unwrap() > 0);
    }
}

/// A module in which `%f` declares `%g` with a signature that is not `%g`'s own: `run` and
/// `size` refuse it through cranelift-module (`IncompatibleSignature`), and so does `opt`,
/// with one error naming the file, both functions and both signatures; whether the callee
/// comes before or after the call, in the same file or another, by test-case or user name.
#[test]
fn opt_refuses_a_call_whose_signature_is_not_the_callees() {
    let caller = "function %f(i64) -> i64 {
    sig0 = (i64, i64) -> i64
    fn0 = %g sig0
block0(v0: i64):
    v1 = call fn0(v0, v0)
    return v1
}
";
    let callee = "function %g(i64) -> i64 {
block0(v0: i64):
    return v0
}
";
    let check = |files: &[&std::path::Path], file: &str, other: Option<&str>| {
        let mut args = vec!["opt", "--emit", "clif"];
        args.extend(files.iter().map(|p| p.to_str().unwrap()));
        let (code, out, err) = mergelift(&args);
        assert_eq!(code, 2, "{err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!(
                "error: {}",
                files[0].parent().unwrap().join(file).display()
            )),
            "{err}"
        );
        for needle in [
            "function f ",
            "function g ",
            "(i64, i64) -> i64",
            "is defined",
            "with signature (i64) -> i64",
        ] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
        if let Some(other) = other {
            assert!(
                err.contains(&format!(
                    "defined in {}",
                    files[0].parent().unwrap().join(other).display()
                )),
                "{err}"
            );
        }
        assert!(!err.contains("panicked"), "{err}");
    };
    let after = temp_file("sig-after.clif", &format!("{caller}\n{callee}"));
    check(&[&after], "sig-after.clif", None);
    let before = temp_file("sig-before.clif", &format!("{callee}\n{caller}"));
    check(&[&before], "sig-before.clif", None);
    let (c, g) = (
        temp_file("sig-f.clif", caller),
        temp_file("sig-g.clif", callee),
    );
    check(&[&c, &g], "sig-f.clif", Some("sig-g.clif"));
    check(&[&g, &c], "sig-f.clif", Some("sig-g.clif"));

    // User names, as wasmtime writes them; the call conventions differ, the types do not.
    let user = temp_file(
        "sig-user.clif",
        "function u0:1(i64) -> i64 system_v {
    sig0 = (i64) -> i64 tail
    fn0 = u0:2 sig0
block0(v0: i64):
    v1 = call fn0(v0)
    return v1
}

function u0:2(i64) -> i64 system_v {
block0(v0: i64):
    return v0
}
",
    );
    let (code, _, err) = mergelift(&["opt", user.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    for needle in [
        "function u0:1 ",
        "function u0:2 ",
        "-> i64 tail",
        "-> i64 system_v",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }

    // The right signature, and names no function defines (imports), with any signature.
    let ok = temp_file(
        "sig-ok.clif",
        &format!(
            "{callee}
function %f(i64) -> i64 {{
    sig0 = (i64) -> i64
    sig1 = (i32) -> i32
    fn0 = %g sig0
    fn1 = %imported sig1
block0(v0: i64):
    v1 = call fn0(v0)
    return v1
}}

function %h(i64) -> i64 {{
    sig0 = (i64, i64) -> i64
    fn0 = %imported sig0
block0(v0: i64):
    v1 = call fn0(v0, v0)
    return v1
}}
"
        ),
    );
    let (code, _, err) = mergelift(&["opt", ok.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
}

/// A module with functions LIR cannot represent (`patchable` calls, here of `%n`), beside two
/// equal functions and a function calling one of those passed through. `%t` takes the
/// address of `%b` before the lifter stops at its patchable call: that address is not the
/// passes' to know (`%b` merges as it does without `%t`).
const PASSTHROUGH_CLIF: &str = "set tls_model=elf_gd
target x86_64

function %a(i64) -> i64 {
block0(v0: i64):
    v1 = iadd v0, v0
    return v1
}

function %t() -> i64 {
    sig0 = (i64) -> i64
    fn0 = %b sig0
    sig1 = (i64)
    fn1 = colocated patchable %n sig1
block0:
    v0 = func_addr.i64 fn0
    call fn1(v0)
    v2 = iadd v0, v0
    return v2
}

function %n(i64) {
block0(v0: i64):
    return
}

function %p(i64) -> i64 {
    sig0 = (i64)
    fn0 = colocated patchable %n sig0
block0(v0: i64):
    call fn0(v0)
    return v0
}

function %b(i64) -> i64 {
block0(v0: i64):
    v1 = iadd v0, v0
    return v1
}

function %use(i64) -> i64 {
    sig0 = () -> i64
    fn0 = %t sig0
block0(v0: i64):
    v1 = call fn0()
    v2 = iadd v0, v1
    return v2
}
";

/// `PASSTHROUGH_CLIF` without the functions LIR cannot represent.
fn without_passthrough() -> String {
    let mut s = String::new();
    for part in PASSTHROUGH_CLIF.split("\nfunction ") {
        if !(part.starts_with("%t(") || part.starts_with("%p(")) {
            if !s.is_empty() {
                s.push_str("\nfunction ");
            }
            s.push_str(part);
        }
    }
    s
}

/// The last line of stderr, `--stats`' JSON.
fn stats_of(err: &str) -> serde_json::Value {
    serde_json::from_str(err.lines().last().expect("stats")).expect("stats JSON")
}

/// A function that passes Cranelift's verifier but that LIR cannot represent is passed
/// through unmerged, never an error: `--emit clif` prints it as Cranelift prints it, in its
/// place; `--emit lir` writes a comment line naming it and why; `--stats` counts it; and the
/// rest of the module merges exactly as it does without it.
#[test]
fn opt_passes_through_functions_lir_cannot_represent() {
    let full = temp_file("passthrough.clif", PASSTHROUGH_CLIF);
    let reduced = temp_file("passthrough-reduced.clif", &without_passthrough());
    let (full, reduced) = (full.to_str().unwrap(), reduced.to_str().unwrap());

    // --emit clif: the reduced module's output, with the two functions in their places as
    // Cranelift prints them.
    let (code, out, err) = mergelift(&["opt", "--emit", "clif", "--stats", full]);
    assert_eq!(code, 0, "{err}");
    let (code, out_reduced, err_reduced) =
        mergelift(&["opt", "--emit", "clif", "--stats", reduced]);
    assert_eq!(code, 0, "{err_reduced}");
    let parsed =
        cranelift_reader::parse_test(PASSTHROUGH_CLIF, cranelift_reader::ParseOptions::default())
            .unwrap();
    let shown = |name: &str| {
        let f = parsed
            .functions
            .iter()
            .find(|(f, _)| f.name.to_string() == name)
            .unwrap();
        format!("{}\n", f.0.display())
    };
    let chunks: Vec<&str> = out_reduced.split_inclusive("\n}\n\n").collect();
    assert_eq!(chunks.len(), 4, "{out_reduced}");
    let expected = [
        chunks[0],
        &shown("%t"),
        chunks[1],
        &shown("%p"),
        chunks[2],
        chunks[3],
    ]
    .concat();
    assert_eq!(out, expected);
    assert!(out.contains("fn0 = colocated patchable %n sig0"), "{out}");

    // --stats: the two count as input (and output) functions; the merges are the same.
    let (s, r) = (stats_of(&err), stats_of(&err_reduced));
    assert_eq!(s["passed_through"], 2, "{s}");
    assert_eq!(r["passed_through"], 0, "{r}");
    assert_eq!(s["functions_in"], 6, "{s}");
    assert_eq!(s["functions_out"], 5, "{s}");
    assert_eq!(s["merged"], 1, "{s}");
    assert_eq!(s["aliased"], 1, "{s}");
    for k in [
        "merged",
        "aliased",
        "thunked",
        "replaced",
        "folded",
        "lir_insts_before",
        "lir_insts_after",
    ] {
        assert_eq!(s[k], r[k], "{k}: {s} / {r}");
    }

    // The output is a module `opt` takes again.
    let again = temp_file(
        "passthrough-again.clif",
        &format!("set tls_model=elf_gd\ntarget x86_64\n\n{out}"),
    );
    let (code, _, err) = mergelift(&["opt", "--emit", "clif", "--stats", again.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(stats_of(&err)["passed_through"], 2, "{err}");

    // --emit lir: a comment line for each, in its place; the functions are the reduced
    // module's. (The declarations may differ: a symbol the lifter met in a function before
    // it stopped stays declared.)
    let (code, lir, err) = mergelift(&["opt", "--emit", "lir", full]);
    assert_eq!(code, 0, "{err}");
    let (_, lir_reduced, _) = mergelift(&["opt", "--emit", "lir", reduced]);
    let comments: Vec<&str> = lir.lines().filter(|l| l.starts_with(';')).collect();
    assert_eq!(
        comments,
        [
            "; not lifted: %t: patchable calls are not supported",
            "; not lifted: %p: patchable calls are not supported",
        ],
        "{lir}"
    );
    let at = |s: &str| lir.find(s).unwrap();
    assert!(at("function @a(") < at("; not lifted: %t"), "{lir}");
    assert!(at("; not lifted: %t") < at("function @n("), "{lir}");
    assert!(at("function @n(") < at("; not lifted: %p"), "{lir}");
    assert!(at("; not lifted: %p") < at("function @use("), "{lir}");
    let functions = |text: &str| -> String {
        text.lines()
            .filter(|l| !l.starts_with(';') && !l.starts_with("declare ") && !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(functions(&lir), functions(&lir_reduced));
    // The LIR parser takes the comments.
    let p = temp_file("passthrough.lir", &lir);
    let (code, _, err) = mergelift(&[
        "opt",
        "--passes",
        "none",
        "--emit",
        "lir",
        p.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
}

/// More functions the lifter refuses today: dynamic stack slots, and the `preserve_all`
/// calling convention (passed through while LIR lacks it, lifted once it has it: never an
/// error either way). A function the lifter refuses as invalid input stays an error
/// (hostile.rs: `stack_limit` naming a global value that does not exist).
#[test]
fn opt_passes_through_dynamic_stack_slots_and_preserve_all() {
    let dss = temp_file(
        "passthrough-dss.clif",
        "target x86_64 has_avx
function %d() {
    gv0 = dyn_scale_target_const.i32x4
    dt0 = i32x4*gv0
    dss0 = explicit_dynamic_slot dt0
block0:
    return
}
",
    );
    let (code, lir, err) = mergelift(&["opt", "--emit", "lir", "--stats", dss.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        lir.contains("; not lifted: %d: dynamic stack slots are not supported\n"),
        "{lir}"
    );
    assert_eq!(stats_of(&err)["functions_in"], 1, "{err}");
    assert_eq!(stats_of(&err)["passed_through"], 1, "{err}");

    let pa = temp_file(
        "passthrough-pa.clif",
        "function %pa(i64, i64) preserve_all {
block0(v0: i64, v1: i64):
    store v1, v0
    return
}

function %callpa(i64) -> i64 {
    sig0 = (i64, i64) preserve_all
    fn0 = %pa sig0
block0(v0: i64):
    call fn0(v0, v0)
    return v0
}
",
    );
    let (code, lir, err) = mergelift(&["opt", "--emit", "lir", "--stats", pa.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let passed = stats_of(&err)["passed_through"].as_u64().unwrap();
    let comments = lir.lines().filter(|l| l.starts_with(';')).count() as u64;
    assert_eq!(passed, comments, "{lir}");
    if passed > 0 {
        assert!(
            lir.contains("; not lifted: %pa: unsupported calling convention preserve_all\n"),
            "{lir}"
        );
    }
    let (code, clif, err) = mergelift(&["opt", "--emit", "clif", pa.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        clif.contains("function %pa(i64, i64) preserve_all {"),
        "{clif}"
    );
    assert!(clif.contains("call fn0("), "{clif}");
}

/// `tls_value` lifts (as LIR's `tls_value`), merges, and lowers back: two equal functions
/// reading a thread-local variable merge, and the survivor, lowered, compiles.
#[test]
fn tls_value_lifts_merges_and_lowers() {
    let f = temp_file(
        "tls.clif",
        "set tls_model=elf_gd
target x86_64

function %t(i64) -> i64 {
    gv0 = symbol tls %tlsvar
block0(v0: i64):
    v1 = tls_value.i64 gv0
    v2 = load.i64 v1
    v3 = iadd v0, v2
    return v3
}

function %t2(i64) -> i64 {
    gv0 = symbol tls %tlsvar
block0(v0: i64):
    v1 = tls_value.i64 gv0
    v2 = load.i64 v1
    v3 = iadd v0, v2
    return v3
}
",
    );
    let f = f.to_str().unwrap();
    let (code, lir, err) = mergelift(&["opt", "--emit", "lir", "--stats", f]);
    assert_eq!(code, 0, "{err}");
    assert!(lir.contains("= tls_value.i64 gv0"), "{lir}");
    assert_eq!(stats_of(&err)["passed_through"], 0, "{err}");
    assert_eq!(stats_of(&err)["merged"], 1, "{err}");
    let (code, out, err) = mergelift(&["size", "--lift-all", "--lower-all", "--json", f]);
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["merged"], 1, "{out}");
    assert!(r["code_bytes_after"].as_u64().unwrap() > 0, "{out}");
}

/// Cranelift's `stack_switch` filetest (`stack_switch_model=basic`, x86-64): a function
/// Cranelift compiles and LIR cannot represent passes through. `opt --emit clif` exits 0 and
/// prints it exactly as Cranelift prints it, `--emit lir` says why it was not lifted, and
/// `size` compiles it beside a function that merges.
#[test]
fn stack_switch_passes_through() {
    let text = "test compile precise-output
set opt_level=speed
set stack_switch_model=basic
target x86_64

function %switch(i64, i64, i64) -> i64 {
block0(v0: i64, v1: i64, v2: i64):
    v3 = stack_switch v0, v1, v2
    return v3
}

function %a(i64) -> i64 {
block0(v0: i64):
    v1 = iadd v0, v0
    return v1
}

function %b(i64) -> i64 {
block0(v0: i64):
    v1 = iadd v0, v0
    return v1
}
";
    let f = temp_file("stack_switch.clif", text);
    let f = f.to_str().unwrap();
    let parsed =
        cranelift_reader::parse_test(text, cranelift_reader::ParseOptions::default()).unwrap();
    let switch = format!("{}\n", parsed.functions[0].0.display());

    let (code, out, err) = mergelift(&["opt", "--emit", "clif", "--stats", f]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&switch), "{out}");
    assert_eq!(stats_of(&err)["passed_through"], 1, "{err}");
    assert_eq!(stats_of(&err)["merged"], 1, "{err}");

    let (code, lir, err) = mergelift(&["opt", "--emit", "lir", f]);
    assert_eq!(code, 0, "{err}");
    assert!(
        lir.contains("; not lifted: %switch: unsupported instruction stack_switch\n"),
        "{lir}"
    );

    let (code, out, err) = mergelift(&["size", "--json", f]);
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["functions_in"], 3, "{out}");
    assert_eq!(r["merged"], 1, "{out}");
}
