//! `--target`: `opt`, `size`, `report` and `run` for x86-64, aarch64, riscv64 and s390x, and
//! files that name only foreign targets. The `run --target` tests need the target's cross gcc
//! and qemu-user (Debian's `gcc-<arch>-linux-gnu` and `qemu-user`): without them they say so
//! and pass, except under CI=true.

use mergelift_tools::cross::{toolchain_for_test, Arch};
use std::io::Write;

mod common;
use common::mergelift;

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mergelift-targets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::File::create(&p)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    p
}

/// Two equal functions and a caller of both (no header: compiled for the host or
/// `--target`).
const MODULE: &str = "function %a(i64, i64) -> i64 {
block0(v0: i64, v1: i64):
    v2 = imul v0, v1
    v3 = iadd v2, v0
    v4 = band v3, v1
    return v4
}

function %b(i64, i64) -> i64 {
block0(v0: i64, v1: i64):
    v2 = imul v0, v1
    v3 = iadd v2, v0
    v4 = band v3, v1
    return v4
}

function %c(i64) -> i64 {
    sig0 = (i64, i64) -> i64
    fn0 = %a sig0
    fn1 = %b sig0
block0(v0: i64):
    v1 = call fn0(v0, v0)
    v2 = call fn1(v1, v0)
    return v2
}
";

/// The ELF machine of an object file (`e_machine`, in the file's byte order).
fn elf_machine(bytes: &[u8]) -> u16 {
    assert_eq!(&bytes[..4], b"\x7fELF");
    let m = [bytes[18], bytes[19]];
    if bytes[5] == 2 {
        u16::from_be_bytes(m)
    } else {
        u16::from_le_bytes(m)
    }
}

fn json(out: &str) -> serde_json::Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// `size --target T` compiles for T (the object file says so), plainly and through the
/// passes, and the merge is the same on every target.
#[test]
fn size_compiles_for_each_target() {
    let f = temp_file("module.clif", MODULE);
    let f = f.to_str().unwrap();
    let mut plain_bytes = Vec::new();
    for (target, machine) in [
        ("x86_64", 62),
        ("aarch64", 183),
        ("riscv64 has_v", 243),
        ("s390x", 22),
    ] {
        let obj = temp_file(&format!("{}.o", target.replace(' ', "-")), "");
        let (code, out, err) = mergelift(&[
            "size",
            "--json",
            "--target",
            target,
            "--emit-object",
            obj.to_str().unwrap(),
            f,
        ]);
        assert_eq!(code, 0, "{target}: {err}");
        let r = json(&out);
        assert_eq!(r["merged"], 1, "{target}: {out}");
        let (before, after) = (
            r["code_bytes_before"].as_u64().unwrap(),
            r["code_bytes_after"].as_u64().unwrap(),
        );
        assert!(after < before, "{target}: {out}");
        plain_bytes.push(before);
        assert_eq!(
            elf_machine(&std::fs::read(&obj).unwrap()),
            machine,
            "{target}"
        );
    }
    // Four instruction sets: not all of one size.
    plain_bytes.dedup();
    assert!(plain_bytes.len() > 1, "{plain_bytes:?}");

    let (code, out, err) = mergelift(&["report", "--json", "--target", "aarch64", f]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["families"].as_array().unwrap().len(), 1, "{out}");
}

/// A file that names only foreign targets is compiled for its first (no `--target` needed);
/// with `--target`, for its line of that architecture; `--target` of an architecture it
/// does not name is an error naming the file and its targets.
#[test]
fn files_naming_foreign_targets() {
    let text = format!("set opt_level=speed\ntarget s390x\ntarget aarch64\n\n{MODULE}");
    let f = temp_file("foreign.clif", &text);
    let f = f.to_str().unwrap();
    let obj = temp_file("foreign.o", "");
    let obj = obj.to_str().unwrap();
    let (code, _, err) = mergelift(&["size", "--emit-object", obj, f]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(elf_machine(&std::fs::read(obj).unwrap()), 22);
    let (code, _, err) = mergelift(&["size", "--target", "aarch64", "--emit-object", obj, f]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(elf_machine(&std::fs::read(obj).unwrap()), 183);
    let (code, out, err) = mergelift(&["opt", "--emit", "clif", f]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("function %c("), "{out}");

    for cmd in ["opt", "size", "report"] {
        let (code, _, err) = mergelift(&[cmd, "--target", "riscv64", f]);
        assert_eq!(code, 2, "{cmd}: {err}");
        assert!(
            err.contains("foreign.clif: names no riscv64 target (its targets: s390x, aarch64)"),
            "{cmd}: {err}"
        );
    }
}

/// Bad `--target` values are one clear error each, exit 2.
#[test]
fn bad_targets_are_errors() {
    let f = temp_file("module-bad.clif", MODULE);
    let f = f.to_str().unwrap();
    for (target, says) in [
        (
            "mips64",
            "its targets are x86_64, aarch64, riscv64 and s390x",
        ),
        ("not-a-triple-at-all", "not a target triple"),
        ("aarch64 has_avx", "no ISA flag has_avx"),
    ] {
        let (code, _, err) = mergelift(&["size", "--target", target, f]);
        assert_eq!(code, 2, "{target}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(says),
            "{target}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let (code, _, err) = mergelift(&["run", "--target", "aarch64 has_lse", f]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no ISA flags"), "{err}");
    let (code, _, err) = mergelift(&["run", "--target", "aarch64-apple-darwin", f]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("Linux under qemu-user"), "{err}");
}

/// Without the cross gcc and qemu-user, `run --target` says which Debian packages to
/// install.
#[test]
fn run_target_names_missing_packages() {
    let f = temp_file("module-missing.clif", MODULE);
    let empty = f.with_file_name("no-tools");
    std::fs::create_dir_all(&empty).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mergelift"))
        .args(["run", "--target", "riscv64", f.to_str().unwrap()])
        .env("PATH", &empty)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("Debian package gcc-riscv64-linux-gnu")
            && err.contains("Debian package qemu-user")
            && err.contains("apt-get install gcc-riscv64-linux-gnu qemu-user"),
        "{err}"
    );
}

/// Run lines that pass, fail (a wrong value, a trap, a call that never returns) and print,
/// through the harness on each foreign target: each is judged, plainly and through the
/// passes, and the summary counts them.
#[test]
fn run_target_judges_every_line() {
    let text = "test run
set enable_multi_ret_implicit_sret
target aarch64
target riscv64 has_v
target s390x

function %add(i64, i64) -> i64 {
block0(v0: i64, v1: i64):
    v2 = iadd v0, v1
    return v2
}
; run: %add(1, 2) == 3
; run: %add(1, 2) == 4
; run: %add(-1, 1) != 1
; print: %add(5, 5)

function %wide(i128, i8x16, i16) -> i128 {
block0(v0: i128, v1: i8x16, v2: i16):
    v3 = extractlane v1, 15
    v4 = sextend.i16 v3
    v5 = iadd v2, v4
    v6 = sextend.i128 v5
    v7 = iadd v0, v6
    return v7
}
; run: %wide(0x0102030405060708090a0b0c0d0e0f10, [1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 -16], 3) == 0x0102030405060708090a0b0c0d0e0f03

function %trap(i32) -> i32 {
block0(v0: i32):
    v1 = iconst.i32 0
    v2 = udiv v0, v1
    return v2
}
; run: %trap(1) == 0

function %spin(i32) -> i32 {
block0(v0: i32):
    jump block1(v0)
block1(v1: i32):
    jump block1(v1)
}
; run: %spin(1) == 0
";
    let f = temp_file("judged.clif", text);
    let f = f.to_str().unwrap();
    for arch in Arch::ALL {
        if toolchain_for_test(arch).is_none() {
            continue;
        }
        let (code, out, err) = mergelift(&["run", "--timeout", "1", "--target", arch.name(), f]);
        assert_eq!(code, 1, "{arch}: {out}{err}");
        let last: Vec<&str> = out.lines().rev().take(2).collect();
        assert_eq!(
            last,
            [
                format!("4 passed, 3 failed ({arch}, through the pipeline; 0 fail only there)"),
                format!("plain compile ({arch}): 4 passed, 3 failed"),
            ],
            "{out}"
        );
        for side in ["plain compile: ", ""] {
            for line in [
                "judged.clif:13: %add(1, 2) == 4, got 3",
                "judged.clif:34: %trap(1) == 0, got trap (signal",
                "judged.clif:42: %spin(1) == 0, got timeout",
            ] {
                assert!(
                    out.lines().any(|l| l.starts_with(side) && l.contains(line)),
                    "{arch}: {side}{line}:\n{out}"
                );
            }
        }
    }
}

/// `tests/data/NAME`.
fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The numbers of a summary line (`P passed, F failed`, then what follows).
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// What the lift and lower must keep on every target (`tests/data/portable.clif`: `tail`
/// with extended arguments and `return_call`, i128 and vector arguments, aligned stack
/// slots, frame pointer and return address, atomics and a fence, near and far calls and
/// addresses, PIC and not; `tests/data/aarch64-conventions.clif`: Apple's and Winch's
/// conventions), through three pipelines: every run line passes plainly and through the
/// passes, which merge functions (exactly and as near-duplicates) on the way.
#[test]
fn target_features_survive_the_passes() {
    let pipelines: [&[&str]; 3] = [
        &["--passes", "merge,merge-similar"],
        &["--passes", "merge,merge-similar,lvn,gvn,dce", "--lower-all"],
        &["--passes", "merge,merge-similar,merge-aligned"],
    ];
    let portable = data("portable.clif");
    let conventions = data("aarch64-conventions.clif");
    // On the host, through the JIT: two targets of 16 lines.
    for p in pipelines {
        let (code, out, err) = mergelift(&[&["run"], p, &[portable.as_str()]].concat());
        assert_eq!(code, 0, "{p:?}: {out}{err}");
        assert_eq!(out.lines().last(), Some("32 passed, 0 failed"), "{out}");
    }
    let mut cases = vec![(Arch::Aarch64, conventions.as_str(), 20)];
    cases.extend(Arch::ALL.map(|a| (a, portable.as_str(), 32)));
    for (arch, file, lines) in cases {
        if toolchain_for_test(arch).is_none() {
            continue;
        }
        for p in pipelines {
            let args = [&["run", "-v", "--target", arch.name()], p, &[file]].concat();
            let (code, out, err) = mergelift(&args);
            assert_eq!(code, 0, "{arch} {p:?} {file}: {out}{err}");
            let last: Vec<&str> = out.lines().rev().take(3).collect();
            assert_eq!(
                last[0],
                format!(
                    "{lines} passed, 0 failed ({arch}, through the pipeline; 0 fail only there)"
                ),
                "{out}"
            );
            assert_eq!(
                last[1],
                format!("plain compile ({arch}): {lines} passed, 0 failed")
            );
            // `pipeline: N functions in; merged: E as equal, S by merge-similar, ...`
            let n = numbers(last[2]);
            assert!(
                last[2].starts_with("pipeline:") && n[1] > 0 && n[2] > 0,
                "{out}"
            );
        }
    }
}
