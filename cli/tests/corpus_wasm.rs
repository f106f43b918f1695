//! The wasm corpus (`../shared/corpus/wasm`): every function of every module lifts, lowers,
//! passes Cranelift's verifier and compiles, through `mergelift size`. A pure round trip
//! (`--passes none --lower-all`) must not grow code by more than 1%; with `merge,lvn` the
//! numbers must add up. Without the corpus the test says so and passes, except under CI=true.

use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/wasm");
    if p.is_dir() {
        return Some(p);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but the wasm corpus is missing at {}", p.display());
    }
    eprintln!("skipping: no corpus at {}", p.display());
    None
}

fn size(args: &[&str], file: &Path) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_mergelift"))
        .args(["size", "--json"])
        .args(args)
        .arg(file)
        .output()
        .expect("run mergelift size");
    assert!(
        out.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

fn modules() -> Vec<PathBuf> {
    let Some(dir) = corpus() else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "clif"))
        .collect();
    v.sort();
    v
}

#[test]
fn wasm_round_trip_compiles_and_keeps_size() {
    for m in modules() {
        // Every function through lift and lower, none compiled from its input.
        let r = size(&["--passes", "none", "--lower-all"], &m);
        assert_eq!(r["functions_in"], r["functions_out"]);
        assert_eq!(r["functions_in"], r["lowered"]);
        let (before, after) = (
            r["code_bytes_before"].as_f64().unwrap(),
            r["code_bytes_after"].as_f64().unwrap(),
        );
        assert!(
            after <= before * 1.01,
            "{}: round trip grew code from {before} to {after} bytes",
            m.display()
        );
    }
}

#[test]
fn wasm_merge_lvn_compiles_and_adds_up() {
    for m in modules() {
        let r = size(&["--passes", "merge,lvn"], &m);
        let (fin, fout, merged) = (
            r["functions_in"].as_u64().unwrap(),
            r["functions_out"].as_u64().unwrap(),
            r["merged"].as_u64().unwrap(),
        );
        let (rep, ali, thu) = (
            r["replaced"].as_u64().unwrap(),
            r["aliased"].as_u64().unwrap(),
            r["thunked"].as_u64().unwrap(),
        );
        assert_eq!(merged, rep + ali + thu, "{}", m.display());
        // Thunks keep a body; replaced and aliased functions are gone.
        assert_eq!(fout, fin - rep - ali, "{}", m.display());
        assert!(r["lir_insts_after"].as_u64().unwrap() <= r["lir_insts_before"].as_u64().unwrap());
    }
}

/// `merge-similar` on top of `merge` never saves less than `merge` alone on any module, and
/// its shared bodies and thunks are all accounted for.
#[test]
fn wasm_merge_similar_saves_at_least_what_merge_saves() {
    let (mut saved_merge, mut saved_similar) = (0u64, 0u64);
    for m in modules() {
        let a = size(&["--passes", "merge"], &m);
        let b = size(&["--passes", "merge,merge-similar"], &m);
        let before = a["code_bytes_before"].as_u64().unwrap();
        let (am, bm) = (
            a["code_bytes_after"].as_u64().unwrap(),
            b["code_bytes_after"].as_u64().unwrap(),
        );
        assert!(
            bm <= am,
            "{}: merge,merge-similar gives {bm} bytes, merge alone {am}",
            m.display()
        );
        assert!(b["merged"].as_u64().unwrap() >= a["merged"].as_u64().unwrap());
        let n = |k: &str| b[k].as_u64().unwrap();
        assert_eq!(
            n("merged"),
            n("replaced") + n("aliased") + n("thunked") + n("folded"),
            "{}",
            m.display()
        );
        saved_merge += before - am;
        saved_similar += before - bm;
    }
    if saved_merge > 0 {
        eprintln!("corpus: merge saves {saved_merge} bytes, merge,merge-similar {saved_similar}");
    }
}

/// `opt` takes every module as it is (its input verification needs the ISA: wasm code reads
/// the frame pointer) and keeps every function in the CLIF it emits.
#[test]
fn wasm_opt_verifies_and_emits_every_function() {
    for m in modules() {
        let out = Command::new(env!("CARGO_BIN_EXE_mergelift"))
            .args(["opt", "--emit", "none", "--stats"])
            .arg(&m)
            .output()
            .expect("run mergelift opt");
        assert!(
            out.status.success(),
            "{}: {}",
            m.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `size --threads 2` compiles both sides on two threads and measures the same module: the
/// same functions, merges and code bytes as one thread.
#[test]
fn wasm_size_threads_measure_the_same_code() {
    for m in modules().into_iter().filter(|m| {
        m.file_name()
            .is_some_and(|n| n == "richards.clif" || n == "quicksort.clif")
    }) {
        let a = size(&[], &m);
        let b = size(&["--threads", "2"], &m);
        for k in [
            "functions_in",
            "functions_out",
            "merged",
            "lowered",
            "code_bytes_before",
            "code_bytes_after",
        ] {
            assert_eq!(a[k], b[k], "{}: {k}", m.display());
        }
    }
}

/// Compiled in batches of 50 functions, as a JIT compiles as it goes: the functions nothing so
/// far could merge with are not lifted, and later batches still merge into them. The merges
/// are those of lifting every function (`--lift-all`) but where the order of the merges
/// changes which of two ways a function merges: a function of a later batch whose callee
/// is compiled unlifted in its own batch is compared at once (an unlifted function never
/// merges away), and one equal to an unlifted function merges before the passes run (by
/// its print), so a caller of it may merge exactly where with every function lifted it
/// joins a shared body. Over a module that moves a few merges either way and at most a few
/// bytes in ten thousand.
#[test]
fn wasm_batches_merge_as_when_everything_is_lifted() {
    for m in modules() {
        let lazy = size(&["--batch", "50"], &m);
        let all = size(&["--batch", "50", "--lift-all"], &m);
        let n = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap() as f64;
        let what = m.display();
        assert!(
            n(&lazy, "merged") >= 0.99 * n(&all, "merged"),
            "{what}: {} merged, {} with every function lifted",
            n(&lazy, "merged"),
            n(&all, "merged")
        );
        assert!(
            n(&lazy, "code_bytes_after") <= 1.0005 * n(&all, "code_bytes_after"),
            "{what}: {} code bytes, {} with every function lifted",
            n(&lazy, "code_bytes_after"),
            n(&all, "code_bytes_after")
        );
        assert!(n(&lazy, "not_lifted") > 0.0, "{what}");
        assert_eq!(n(&all, "not_lifted"), 0.0, "{what}");
    }
}

/// A function no pass could merge is compiled from its input without being lifted (the
/// default): the object file is byte for byte the one every function lifted gives
/// (`--lift-all`), and on every module of a few hundred functions most are not lifted.
#[test]
fn wasm_unlifted_functions_give_the_same_object() {
    let dir = std::env::temp_dir().join(format!("mergelift-skip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for m in modules() {
        let (a, b) = (dir.join("skip.o"), dir.join("all.o"));
        let skip = size(&["--emit-object", a.to_str().unwrap()], &m);
        let all = size(&["--lift-all", "--emit-object", b.to_str().unwrap()], &m);
        assert!(
            std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
            "{}: the object files differ",
            m.display()
        );
        for k in ["merged", "aliased", "thunked", "folded", "code_bytes_after"] {
            assert_eq!(skip[k], all[k], "{}: {k}", m.display());
        }
        assert_eq!(all["not_lifted"], 0);
        let (fin, skipped) = (
            skip["functions_in"].as_u64().unwrap(),
            skip["not_lifted"].as_u64().unwrap(),
        );
        if fin >= 400 {
            assert!(
                skipped * 3 >= fin,
                "{}: only {skipped} of {fin} functions not lifted",
                m.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
