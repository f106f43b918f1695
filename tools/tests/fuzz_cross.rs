//! The differential fuzzer on aarch64, riscv64 and s390x under qemu-user (`fuzz --target`):
//! bounded runs in one batch and in batches, and the comparison's sensitivity. Without a
//! target's cross gcc and qemu-user the test says which packages are missing and passes,
//! except under CI=true.

use mergelift_tools::cross::{toolchain_for_test, Arch, Target};
use mergelift_tools::fuzz::{
    compare_outcomes, interpret_on, module_for_seed, BatchMode, FuzzOptions, Outcome,
};
use mergelift_tools::fuzz_cross::{fuzz, run_module};

fn out_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mergelift-fuzz-cross-{}", std::process::id()))
}

/// Modules per run (`MERGELIFT_CROSS_FUZZ_ITERATIONS`; CI runs the default).
fn iterations() -> usize {
    std::env::var("MERGELIFT_CROSS_FUZZ_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24)
}

/// On each target, in one batch and in random batches (invalid functions mixed in): no
/// module disagrees with the interpreter, plainly or through the pipeline, and the passes
/// have work (merge-similar merges in most modules; batches merge into frozen code).
#[test]
fn bounded_cross_fuzz_runs_find_no_mismatch() {
    let n = iterations();
    for arch in Arch::ALL {
        let Some(tc) = toolchain_for_test(arch) else {
            continue;
        };
        let target = Target::parse(arch.name()).unwrap();
        for batch in [BatchMode::One, BatchMode::Random] {
            let opts = FuzzOptions {
                iterations: n,
                seed: 0x6372_6f73_7366_757a,
                out_dir: out_dir(),
                batch,
                ..Default::default()
            };
            let r = fuzz(&opts, &tc, &target);
            let what = format!("{arch}, --batch {batch}");
            assert_eq!(r.failed, 0, "{what}:\n{}", r.failures.join("\n"));
            assert_eq!(
                r.plain_failed,
                0,
                "{what}:\n{}",
                r.plain_failures.join("\n")
            );
            assert_eq!(r.passed, n, "{what}");
            assert!(r.calls > n, "{what}: {} calls compared", r.calls);
            assert!(
                r.similar_modules * 3 >= n * 2,
                "{what}: merge-similar merged in {} of {n} modules",
                r.similar_modules
            );
            if batch == BatchMode::Random {
                assert_eq!(r.batched_modules, n, "{what}");
                assert!(
                    r.stats.get(midend::Counter::MergeIntoFrozen) > 0,
                    "{what}: no merge.into_frozen"
                );
                for k in ["fuzz.invalid_refused", "fuzz.invalid_failed"] {
                    assert!(r.stats.custom(k) > Some(0), "{what}: no {k}");
                }
            }
        }
    }
}

/// The comparison can fail: on s390x (big-endian) the wrappers' buffer checksums agree with
/// a big-endian interpreter and, for some module, not with a little-endian one; on each
/// target a tampered result is a difference.
#[test]
fn cross_outcomes_are_compared_for_real() {
    for arch in Arch::ALL {
        let Some(tc) = toolchain_for_test(arch) else {
            continue;
        };
        let target = Target::parse(arch.name()).unwrap();
        let mut endian_sensitive = false;
        for seed in 0..8 {
            let m = module_for_seed(seed).unwrap();
            let calls: Vec<(String, Vec<i64>)> = (m.entries.iter())
                .map(|e| (e.clone(), vec![5, -6, 7, 1 << 40]))
                .collect();
            let got = run_module(&tc, &target, &m, &calls, Some("merge,merge-similar,lvn"))
                .unwrap_or_else(|e| panic!("{arch}, module {seed}: {e}"));
            for ((name, args), g) in calls.iter().zip(&got) {
                let oracle = interpret_on(&m.functions, name, args, arch.big_endian());
                assert_eq!(compare_outcomes(&oracle, g), None, "{arch}, module {seed}");
                let other = interpret_on(&m.functions, name, args, !arch.big_endian());
                endian_sensitive |= compare_outcomes(&other, g).is_some();
                if let Outcome::Values(v) = g {
                    let tampered = Outcome::Values(v.iter().map(|x| x ^ 1).collect());
                    assert!(compare_outcomes(&oracle, &tampered).is_some());
                }
            }
        }
        assert!(
            endian_sensitive,
            "{arch}: no module's results depend on the byte order"
        );
    }
}
