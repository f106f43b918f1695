//! The `mergelift` command on bad input: clear errors naming the file and position, a non-zero
//! exit, never a panic; and `opt` on good input.

use std::io::Write;
use std::process::Command;

fn mergelift(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mergelift"))
        .args(args)
        .output()
        .expect("run mergelift");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

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
