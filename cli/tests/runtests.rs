//! Cranelift's run tests (`../shared/corpus/runtests`) through the `mergelift run` command:
//! every run line that targets x86-64 must pass after the pipeline, and on aarch64, riscv64
//! and s390x (`run --target`, under qemu-user) every run line the plain compile passes. Without
//! the corpus, or without a target's cross gcc and qemu-user, a test says so and passes, except
//! under CI=true, where a missing corpus or toolchain is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

fn corpus() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/runtests");
    if p.is_dir() {
        return Some(p);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "CI=true but the run-test corpus is missing at {}",
            p.display()
        );
    }
    eprintln!("skipping: no corpus at {}", p.display());
    None
}

/// Run the corpus with `passes`; return (passed, failed, skipped) and the output.
fn run(passes: &str, lower_all: bool, speed: bool) -> Option<(usize, usize, usize, String)> {
    let dir = corpus()?;
    let out = Command::new(env!("CARGO_BIN_EXE_mergelift"))
        .args(["run", "--passes", passes])
        .args(if lower_all { &["--lower-all"][..] } else { &[] })
        .args(if speed {
            &["--opt-level", "speed"][..]
        } else {
            &[]
        })
        .arg(&dir)
        .output()
        .expect("run mergelift");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let last = stdout.lines().last().unwrap_or_default().to_string();
    let nums: Vec<usize> = last
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert!(
        nums.len() >= 2,
        "no summary line in output:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some((nums[0], nums[1], nums.get(2).copied().unwrap_or(0), stdout))
}

/// Failure lines of a run (`file.clif:line: ...`).
fn unexpected(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.contains(".clif:")).collect()
}

/// Every x86-64 run line passes after `passes`.
fn check(passes: &str, lower_all: bool) {
    check_at(passes, lower_all, false)
}

/// `check`, at opt level `speed` when `speed`.
fn check_at(passes: &str, lower_all: bool, speed: bool) {
    let Some((passed, failed, _skipped, out)) = run(passes, lower_all, speed) else {
        return;
    };
    assert!(
        passed > 10_000,
        "only {passed} run lines passed with {passes}"
    );
    let bad = unexpected(&out);
    assert_eq!(failed, 0, "{failed} run lines failed with {passes}:\n{out}");
    assert!(
        bad.is_empty(),
        "{} failures with {passes}:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// Lift and lower every function, no pass.
#[test]
fn runtests_round_trip() {
    check("none", true);
}

/// Functions no pass changed compile from their input; calls to merged ones are redirected.
#[test]
fn runtests_merge_lvn() {
    check("merge,lvn", false);
}

#[test]
fn runtests_lvn_lowered() {
    check("lvn", true);
}

#[test]
fn runtests_merge_gvn_dce_lowered() {
    check("merge,gvn,dce", true);
}

/// Near-duplicates share a body; functions no pass changed compile from their input.
#[test]
fn runtests_merge_similar() {
    check("merge,merge-similar", false);
}

#[test]
fn runtests_merge_similar_lvn_gvn_dce_lowered() {
    check("merge,merge-similar,lvn,gvn,dce", true);
}

#[test]
fn runtests_merge_similar_lvn_speed() {
    check_at("merge,merge-similar,lvn", false, true);
}

/// Functions whose instructions differ share a body (`merge-aligned`), alone and before value
/// numbering, every function lowered.
#[test]
fn runtests_merge_aligned() {
    check("merge,merge-similar,merge-aligned", false);
}

#[test]
fn runtests_merge_aligned_lvn_gvn_dce_lowered() {
    check("merge,merge-similar,merge-aligned,lvn,gvn,dce", true);
}

/// The passes in reverse order, unchanged functions compiled from their input: the skip rule
/// holds whatever ran before `merge`.
#[test]
fn runtests_reverse_order() {
    check("dce,gvn,lvn,merge-similar,merge", false);
}

// ---------------------------------------------------------------------------------------
// Foreign targets, under qemu-user.

/// The counts of a `run --target` over the corpus.
struct CrossCounts {
    plain_passed: usize,
    plain_failed: usize,
    passed: usize,
    failed: usize,
    /// Lines failing only through the pipeline.
    only: usize,
}

/// Run the corpus on `arch` with `passes`: the counts and the output.
fn run_cross(
    arch: mergelift_tools::cross::Arch,
    passes: &str,
    lower_all: bool,
) -> Option<(CrossCounts, String)> {
    let dir = corpus()?;
    mergelift_tools::cross::toolchain_for_test(arch)?;
    let out = Command::new(env!("CARGO_BIN_EXE_mergelift"))
        .args(["run", "--target", arch.name(), "--passes", passes])
        .args(if lower_all { &["--lower-all"][..] } else { &[] })
        .arg(&dir)
        .output()
        .expect("run mergelift");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let numbers = |line: &str| -> Vec<usize> {
        line.split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .filter_map(|s| s.parse().ok())
            .collect()
    };
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.len() >= 2,
        "no summary lines in output:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `plain compile (aarch64): P passed, F failed, S skipped`, then `P passed, F failed, S
    // skipped (aarch64, through the pipeline; R fail only there)`.
    let plain = numbers(lines[lines.len() - 2].split_once(':').unwrap().1);
    let pipeline = numbers(&lines[lines.len() - 1].replace(arch.name(), ""));
    assert!(
        plain.len() >= 2 && pipeline.len() >= 4,
        "unexpected summary lines:\n{stdout}"
    );
    let counts = CrossCounts {
        plain_passed: plain[0],
        plain_failed: plain[1],
        passed: pipeline[0],
        failed: pipeline[1],
        only: *pipeline.last().unwrap(),
    };
    Some((counts, stdout))
}

/// On `arch`, every run line the plain compile passes passes through `passes` too; and the
/// plain compile passes every line it runs (what the emulator cannot run is skipped).
fn check_cross(arch: mergelift_tools::cross::Arch, passes: &str, lower_all: bool) {
    let Some((c, out)) = run_cross(arch, passes, lower_all) else {
        return;
    };
    assert!(
        c.plain_passed > 5_000,
        "only {} run lines passed plainly on {arch}",
        c.plain_passed
    );
    assert_eq!(
        c.only, 0,
        "{} lines fail only through {passes} on {arch}:\n{out}",
        c.only
    );
    assert_eq!(
        (c.passed, c.failed),
        (c.plain_passed, c.plain_failed),
        "{passes} on {arch}:\n{out}"
    );
    assert_eq!(c.plain_failed, 0, "the plain compile on {arch}:\n{out}");
}

#[test]
fn runtests_aarch64() {
    use mergelift_tools::cross::Arch;
    check_cross(Arch::Aarch64, "merge,merge-similar,lvn,gvn,dce", true);
    check_cross(Arch::Aarch64, "merge,merge-similar,merge-aligned", false);
}

#[test]
fn runtests_riscv64() {
    use mergelift_tools::cross::Arch;
    check_cross(Arch::Riscv64, "merge,merge-similar,lvn,gvn,dce", true);
    check_cross(Arch::Riscv64, "merge,merge-similar,merge-aligned", false);
}

#[test]
fn runtests_s390x() {
    use mergelift_tools::cross::Arch;
    check_cross(Arch::S390x, "merge,merge-similar,lvn,gvn,dce", true);
    check_cross(Arch::S390x, "merge,merge-similar,merge-aligned", false);
}
