//! Functions no merging pass could merge are compiled from their input without being lifted
//! (`MergeConfig::lift_all` off, one last flush): the object file is the same, byte for byte,
//! as with every function lifted. Generated modules, with duplicates, near-duplicates (folded
//! by `merge-similar`, their callers rewritten) and functions of their own; the wasm corpus
//! is checked the same way in `cli/tests/corpus_wasm.rs`.

use jit_driver::MergeConfig;
use mergelift_tools::gen::{generate, GenOptions};
use mergelift_tools::input::parse_clif;
use mergelift_tools::size::{measure, SizeOptions, SizeReport};
use std::path::Path;

fn size(text: &str, lift_all: bool) -> SizeReport {
    size_in_batches(text, lift_all, None)
}

fn size_in_batches(text: &str, lift_all: bool, batch: Option<usize>) -> SizeReport {
    let file = parse_clif(Path::new("generated.clif"), text).unwrap();
    let opts = SizeOptions {
        config: MergeConfig {
            debug: jit_driver::DebugOptions {
                lift_all,
                verify_lir: true,
                ..Default::default()
            },
            ..Default::default()
        },
        opt_level: None,
        object: true,
        batch,
        ..Default::default()
    };
    measure(&[file], &opts, 0.0, |_, _, _| {}).unwrap()
}

/// Compiled in batches, as a JIT compiles as it goes: a function that nothing defined so far
/// could merge with is not lifted, and one of a later batch equal to it still merges into it
/// (through its print), so the exact merges are those of lifting everything, and the code
/// bytes within a percent.
#[test]
fn batches_merge_as_when_everything_is_lifted() {
    for (seed, dup_ratio, near_ratio, batch) in [
        (2, 0.5, 0.0, 31),
        (1, 0.3, 0.2, 7),
        (3, 0.2, 0.4, 1),
        (4, 0.4, 0.1, 100),
    ] {
        let text = generate(&GenOptions {
            functions: 240,
            dup_ratio,
            near_ratio,
            edit_ratio: 0.0,
            seed,
        })
        .text;
        let lazy = size_in_batches(&text, false, Some(batch));
        let all = size_in_batches(&text, true, Some(batch));
        let what = format!("seed {seed}, batches of {batch}");
        assert!(lazy.not_lifted > 0, "{what}: nothing was left unlifted");
        assert!(lazy.merged > 0, "{what}: nothing merged");
        // Exact merges (aliases, replaced) are the same. A family of `merge-similar` may differ by a member: a
        // function compiled alone is found again by its print, not by its LIR, so the
        // family starts from other members (or lacks one whose print differs in more than
        // constants).
        assert_eq!(
            (lazy.aliased, lazy.replaced),
            (all.aliased, all.replaced),
            "{what}"
        );
        let (a, b) = (lazy.code_bytes_after as f64, all.code_bytes_after as f64);
        assert!((a / b - 1.0).abs() < 0.01, "{what}: {a} bytes against {b}");
        assert!(lazy.lir_insts_before < all.lir_insts_before, "{what}");
    }
}

/// What unlifted functions tell the passes is what lifted ones would: `%u0`..`%u29` (each of
/// its own shape) call near-duplicates `%m0`/`%m1` many times (`merge-similar`'s cost model
/// counts those call sites: here too many to rewrite the callers of the members' thunks), and
/// `%u30` calls `%k` as `colocated` where the near-duplicates `%n0`/`%n1` do not (the lifter
/// marks a symbol near once any reference is, and the shared body calls `%k`); `%q0`/`%q1`
/// take the address of `%k` and call it.
fn hand_made() -> String {
    let mut t = String::new();
    for (k, c) in [(0, 11), (1, 12)] {
        t += &format!(
            "function %m{k}(i64) -> i64 {{
             block0(v0: i64):
                 v1 = iconst.i64 {c}
                 v2 = imul v0, v1
                 v3 = iconst.i64 1099511627776
                 v4 = iadd v2, v3
                 v5 = iconst.i64 -9
                 v6 = imul v4, v5
                 v7 = bxor v6, v2
                 return v7
             }}\n"
        );
    }
    for j in 0..30 {
        t += &format!(
            "function %u{j}(i64) -> i64 {{
                 fn0 = %m0(i64) -> i64
                 fn1 = %m1(i64) -> i64
             block0(v0: i64):\n"
        );
        for c in 0..=j {
            t += &format!("    v{} = call fn{}(v{c})\n", c + 1, c % 2);
        }
        t += &format!("    return v{}\n}}\n", j + 1);
    }
    t += "function %k(i64) -> i64 {
          block0(v0: i64):
              v1 = bnot v0
              return v1
          }\n";
    for (k, c) in [(0, 5), (1, 6)] {
        t += &format!(
            "function %n{k}(i64) -> i64 {{
                 fn0 = %k(i64) -> i64
             block0(v0: i64):
                 v1 = iconst.i64 {c}
                 v2 = iadd v0, v1
                 v3 = call fn0(v2)
                 v4 = imul v3, v2
                 v5 = call fn0(v4)
                 v6 = bxor v5, v3
                 v7 = call fn0(v6)
                 return v7
             }}\n"
        );
    }
    // `%q0`/`%q1` take `%k`'s address, then call it.
    for (k, c) in [(0, 3), (1, 4)] {
        t += &format!(
            "function %q{k}(i64) -> i64 {{
                 gv0 = symbol colocated %k+8
                 fn0 = colocated %k(i64) -> i64
             block0(v0: i64):
                 v1 = symbol_value.i64 gv0
                 v2 = iconst.i64 {c}
                 v3 = iadd v1, v2
                 v4 = bxor v0, v3
                 v5 = call fn0(v4)
                 return v5
             }}\n"
        );
    }
    t += "function %u30(i64) -> i64 {
              fn0 = colocated %k(i64) -> i64
          block0(v0: i64):
              v1 = call fn0(v0)
              v2 = call fn0(v1)
              v3 = call fn0(v2)
              v4 = call fn0(v3)
              v5 = bnot v4
              return v5
          }\n";
    t
}

#[test]
fn unlifted_functions_tell_the_passes_what_lifted_ones_would() {
    let text = hand_made();
    let (skip, all) = (size(&text, false), size(&text, true));
    assert_eq!(skip.not_lifted, 32, "%u0..%u30 and %k");
    assert_eq!(skip.merged, all.merged);
    assert_eq!(skip.code_bytes_after, all.code_bytes_after);
    assert!(skip.object == all.object, "the object files differ");
}

#[test]
fn unlifted_functions_compile_to_the_same_object() {
    for (seed, dup_ratio, near_ratio) in [(1, 0.2, 0.3), (2, 0.0, 0.5), (3, 0.4, 0.1)] {
        let text = generate(&GenOptions {
            functions: 240,
            dup_ratio,
            near_ratio,
            edit_ratio: 0.0,
            seed,
        })
        .text;
        let (skip, all) = (size(&text, false), size(&text, true));
        let what = format!("seed {seed}");
        assert!(skip.not_lifted > 0, "{what}: nothing was left unlifted");
        assert_eq!(all.not_lifted, 0, "{what}");
        assert!(skip.merged > 0, "{what}: nothing merged");
        assert_eq!(
            (skip.merged, skip.aliased, skip.thunked, skip.folded),
            (all.merged, all.aliased, all.thunked, all.folded),
            "{what}"
        );
        assert_eq!(skip.code_bytes_after, all.code_bytes_after, "{what}");
        assert!(skip.object == all.object, "{what}: the object files differ");
        assert!(skip.lir_insts_before < all.lir_insts_before, "{what}");
    }
}

/// A fuzzer's find: `%f1`'s address is taken (symbol global values) before it is called, in
/// functions that are lifted, while `%f1` itself is not: its symbol must still be a function.
#[test]
fn unlifted_callee_of_a_taken_address_stays_a_function() {
    use mergelift_tools::runtest::{run_file, RunOptions, RunReport};
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/unlifted_callee_symbol_kind.clif");
    let mut r = RunReport::default();
    run_file(
        &path,
        &RunOptions {
            passes: midend::parse_pass_list("merge,merge-similar").unwrap(),
            verify: true,
            ..Default::default()
        },
        &mut r,
        true,
    );
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.failed, 0, "{r:?}");
    assert!(r.passed > 0, "{r:?}");
}

/// Functions the passes merge though their Cranelift IR differs in ways the lifter or the
/// passes make disappear: a block no path from the entry reaches (the passes compare what
/// the entry reaches), and an edge the lifter splits (`%s0` reaches `block1` twice with
/// different arguments; `%s1` spells the split block out). Each pair still merges when its
/// functions are not lifted (their shape keys must be equal), so the object is the same.
#[test]
fn shapes_the_passes_do_not_see_do_not_keep_functions_apart() {
    let text = "
        function %r0(i64) -> i64 {
        block0(v0: i64):
            v1 = iconst.i64 77
            v2 = imul v0, v1
            v3 = iadd v2, v0
            return v3
        }
        function %r1(i64) -> i64 {
        block0(v0: i64):
            v1 = iconst.i64 77
            v2 = imul v0, v1
            v3 = iadd v2, v0
            return v3
        block1:
            trap user1
        }
        function %s0(i64) -> i64 {
        block0(v0: i64):
            v1 = iconst.i64 5
            v2 = iadd v0, v1
            brif v0, block1(v0), block1(v2)
        block1(v3: i64):
            v4 = bxor v3, v1
            return v4
        }
        function %s1(i64) -> i64 {
        block0(v0: i64):
            v1 = iconst.i64 5
            v2 = iadd v0, v1
            brif v0, block1(v0), block2
        block2:
            jump block1(v2)
        block1(v3: i64):
            v4 = bxor v3, v1
            return v4
        }
    ";
    let (skip, all) = (size(text, false), size(text, true));
    assert_eq!(all.merged, 2, "both pairs merge when everything is lifted");
    assert_eq!(
        skip.merged, all.merged,
        "and when what need not be lifted is not"
    );
    assert_eq!(skip.code_bytes_after, all.code_bytes_after);
    assert!(skip.object == all.object, "the object files differ");
}
