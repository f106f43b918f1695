//! `merge-aligned`: pairs of functions that differ in their instructions, run through
//! lift → passes → lower → JIT with and without the pass (each run line in a forked child).
//! Every case asserts both what runs and that the pass merged the pair, so that a case the
//! pass stops merging fails instead of passing vacuously. Expected values come from an
//! evaluator of the same operations in Rust. Independent of `../shared/corpus`.

use mergelift_tools::runtest::{run_file, RunOptions, RunReport};
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

const HEADER: &str = "test run\ntarget x86_64\n";
const ALIGNED: &str = "merge,merge-similar,merge-aligned";
const ALIGNED_VN: &str = "merge,merge-similar,merge-aligned,lvn,gvn,dce";

fn run_with(name: &str, text: &str, passes: &str) -> RunReport {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mergelift-aligned-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p: PathBuf = dir.join(format!("{name}-{n}.clif"));
    std::fs::write(&p, text).unwrap();
    let mut r = RunReport::default();
    run_file(
        &p,
        &RunOptions {
            passes: midend::parse_pass_list(passes).unwrap(),
            opt_level: None,
            lower_all: true,
            ..Default::default()
        },
        &mut r,
        true,
    );
    let _ = std::fs::remove_file(&p);
    r
}

/// Run `body` without passes and with `merge-aligned` (alone and before value numbering):
/// every run line passes each time, and the pass merges `merged` functions, `with_runs` of
/// the groups with unmatched instructions, making `diamonds` diamonds (unmatched runs in
/// blocks that branch on the identifier).
fn check(name: &str, body: &str, merged: u64, with_runs: u64, diamonds: u64) {
    check_groups(name, body, merged, with_runs, diamonds, 0);
}

/// As `check`, and `groups_3plus` of the merged bodies have three or more members.
fn check_groups(
    name: &str,
    body: &str,
    merged: u64,
    with_runs: u64,
    diamonds: u64,
    groups_3plus: u64,
) {
    let text = format!("{HEADER}{body}");
    if let Some(d) = std::env::var_os("MERGELIFT_ALIGNED_DUMP") {
        std::fs::write(std::path::Path::new(&d).join(format!("{name}.clif")), &text).unwrap();
    }
    let lines = text.lines().filter(|l| l.starts_with("; run:")).count();
    assert!(lines > 0);
    for passes in ["none", ALIGNED, ALIGNED_VN] {
        let r = run_with(name, &text, passes);
        eprintln!("{name} [{passes}]: {}", r.summary());
        assert!(r.errors.is_empty(), "{name}: {:?}", r.errors);
        assert_eq!(r.failed, 0, "{name} [{passes}]:\n{}", r.failures.join("\n"));
        assert_eq!(r.passed, lines, "{name} [{passes}]: skips {:?}", r.skips);
        if passes != "none" {
            assert_eq!(
                r.stats.get(midend::Counter::MergedAligned),
                merged,
                "{name} [{passes}]"
            );
            assert_eq!(
                r.stats.get(midend::Counter::AlignedWithUnmatchedRuns),
                with_runs,
                "{name} [{passes}]"
            );
            assert_eq!(
                r.stats.get(midend::Counter::AlignedDiamonds),
                diamonds,
                "{name} [{passes}]"
            );
            assert_eq!(
                r.stats.get(midend::Counter::AlignedGroups3Plus),
                groups_3plus,
                "{name} [{passes}]"
            );
        }
    }
}

/// One operation of a chain: `acc = op acc, k` (`Arg`: the second parameter instead of `k`).
#[derive(Clone, Copy)]
enum Op {
    Add(i64),
    Sub(i64),
    Mul(i64),
    Xor(i64),
    /// Unsigned division by a constant that is not zero (an instruction that may trap, so
    /// unmatched it goes into a diamond).
    Udiv(i64),
    AddArg,
}

impl Op {
    fn eval(self, acc: i64, arg: i64) -> i64 {
        match self {
            Op::Add(k) => acc.wrapping_add(k),
            Op::Sub(k) => acc.wrapping_sub(k),
            Op::Mul(k) => acc.wrapping_mul(k),
            Op::Xor(k) => acc ^ k,
            Op::Udiv(k) => ((acc as u64) / (k as u64)) as i64,
            Op::AddArg => acc.wrapping_add(arg),
        }
    }
}

/// The template the pairs are instances of: fourteen operations, then those again with other
/// constants (long enough that what a merge saves pays for the selects a few edits need).
fn base() -> Vec<Op> {
    let first = first_half();
    let again = first.iter().map(|&op| match op {
        Op::Add(k) => Op::Add(k + 100),
        Op::Xor(k) => Op::Xor(k << 4),
        op => op,
    });
    first.iter().copied().chain(again).collect()
}

fn first_half() -> Vec<Op> {
    use Op::*;
    vec![
        Add(3),
        Mul(5),
        Xor(0x77),
        AddArg,
        Sub(9),
        Mul(3),
        Add(11),
        Xor(0x1234),
        Mul(7),
        AddArg,
        Sub(2),
        Xor(0x55),
        Add(13),
        Mul(9),
    ]
}

/// CLIF for `acc = op acc, ..` over `ops`, from value `acc` (values numbered from `*next`).
fn chain(out: &mut String, ops: &[Op], acc: &str, arg: &str, next: &mut u32) -> String {
    let mut acc = acc.to_string();
    for op in ops {
        let (name, rhs) = match *op {
            Op::Add(k) => ("iadd", Some(k)),
            Op::Sub(k) => ("isub", Some(k)),
            Op::Mul(k) => ("imul", Some(k)),
            Op::Xor(k) => ("bxor", Some(k)),
            Op::Udiv(k) => ("udiv", Some(k)),
            Op::AddArg => ("iadd", None),
        };
        let rhs = match rhs {
            Some(k) => {
                let c = format!("v{next}");
                *next += 1;
                let _ = writeln!(out, "    {c} = iconst.i64 {k}");
                c
            }
            None => arg.to_string(),
        };
        let v = format!("v{next}");
        *next += 1;
        let _ = writeln!(out, "    {v} = {name} {acc}, {rhs}");
        acc = v;
    }
    acc
}

fn eval(ops: &[Op], acc: i64, arg: i64) -> i64 {
    ops.iter().fold(acc, |a, op| op.eval(a, arg))
}

/// A straight-line function `name(x, y) = ops applied to x`, with run lines.
fn straight(name: &str, ops: &[Op]) -> String {
    let mut s = format!("function %{name}(i64, i64) -> i64 {{\nblock0(v0: i64, v1: i64):\n");
    let mut next = 2;
    let r = chain(&mut s, ops, "v0", "v1", &mut next);
    let _ = writeln!(s, "    return {r}\n}}");
    for (x, y) in [(0, 0), (1, 2), (-7, 1000), (i64::MAX, -1)] {
        let _ = writeln!(s, "; run: %{name}({x}, {y}) == {}", eval(ops, x, y));
    }
    s.push('\n');
    s
}

/// The base with an operation replaced, one inserted and one removed.
fn edited() -> Vec<Op> {
    let mut ops = base();
    ops[3] = Op::Sub(4); // replaced (an `iadd` of the argument becomes an `isub` of a constant)
    ops.insert(7, Op::Mul(31)); // inserted
    ops.remove(11); // removed
    ops
}

#[test]
fn straight_line_with_inserted_removed_and_replaced_instructions() {
    let body = straight("a", &base()) + &straight("b", &edited());
    check("straight", &body, 2, 1, 0);
}

/// The base with other edits than `edited`'s: two replaced, one inserted.
fn edited_again() -> Vec<Op> {
    let mut ops = base();
    ops[1] = Op::Mul(6);
    ops[8] = Op::Xor(0x99);
    ops.insert(4, Op::Add(21));
    ops
}

#[test]
fn groups_of_three_and_four() {
    // Three instances of the template, each edited its own way, make one body.
    let body = straight("a", &base()) + &straight("b", &edited()) + &straight("c", &edited_again());
    check_groups("three", &body, 3, 1, 0, 1);
    // A fourth, edited its own way too: still one body.
    let mut fourth = base();
    fourth.remove(2);
    fourth[10] = Op::Mul(23);
    fourth.insert(6, Op::Xor(3));
    check_groups("four", &(body + &straight("d", &fourth)), 4, 1, 0, 1);
}

#[test]
fn a_diamond_of_one_member_in_a_group_of_three() {
    // Only the first member checks its second argument (`trapz`, a diamond the other two
    // skip), then only the second: the branches on the identifier reach each member's part
    // and the join from every other. `taken` adds a run line for each with the second
    // argument zero: only the guarded member traps.
    for guarded in ["ga", "gb"] {
        let members = [("ga", base()), ("gb", edited()), ("gc", edited_again())];
        let (body, taken) = guarded_chains(&members, guarded);
        check_groups(guarded, &body, 3, 1, 1, 1);
        let r = only_the_guarded_traps(&taken, guarded);
        assert_eq!(r.stats.get(midend::Counter::AlignedGroups3Plus), 1);
    }
}

/// Straight-line functions `name(x, y) = ops applied to x`, the one named `guarded` first
/// checking its second argument (`trapz`). Returns them with run lines, and with a run line
/// more for each, the second argument zero (a run line belongs to the function before it).
fn guarded_chains(members: &[(&str, Vec<Op>)], guarded: &str) -> (String, String) {
    let (mut body, mut taken) = (String::new(), String::new());
    for (name, ops) in members {
        let mut f = format!("function %{name}(i64, i64) -> i64 {{\nblock0(v0: i64, v1: i64):\n");
        if *name == guarded {
            f.push_str("    trapz v1, user1\n");
        }
        let mut next = 2;
        let r = chain(&mut f, ops, "v0", "v1", &mut next);
        let _ = writeln!(f, "    return {r}\n}}");
        for (x, y) in [(1, 2), (-5, 9)] {
            let _ = writeln!(f, "; run: %{name}({x}, {y}) == {}", eval(ops, x, y));
        }
        body.push_str(&f);
        body.push('\n');
        taken.push_str(&f);
        let _ = writeln!(taken, "; run: %{name}(1, 0) == {}\n", eval(ops, 1, 0));
    }
    (body, taken)
}

/// Run `taken` (from `guarded_chains`) through the merging passes: only the guarded
/// function's run line with a zero traps.
fn only_the_guarded_traps(taken: &str, guarded: &str) -> RunReport {
    let r = run_with("traps_taken", &format!("{HEADER}{taken}"), ALIGNED);
    assert_eq!(r.failed, 1, "{:?}", r.failures);
    assert!(
        r.failures[0].contains(&format!("%{guarded}(1, 0)")) && r.failures[0].contains("trap"),
        "{:?}",
        r.failures
    );
    r
}

#[test]
fn loops_of_three_with_values_crossing_diamonds() {
    // As `loops_with_values_crossing_an_unmatched_run_into_phis`, with a third member whose
    // loop body divides elsewhere: two diamonds, values of each crossing into phis.
    let mut b = base();
    b.push(Op::Xor(0x0f0f));
    b[12] = Op::Mul(17);
    b.push(Op::Udiv(3));
    let mut c = base();
    c.insert(5, Op::Udiv(7));
    c[12] = Op::Mul(19);
    let body = looped("la", &base()) + &looped("lb", &b) + &looped("lc", &c);
    check_groups("loops3", &body, 3, 1, 2, 1);
}

#[test]
fn equal_functions_are_left_to_merge() {
    // Equal bodies merge exactly (`merge`), not by alignment.
    let body = straight("a", &base()) + &straight("b", &base());
    let text = format!("{HEADER}{body}");
    let r = run_with("equal", &text, ALIGNED);
    assert_eq!(r.failed, 0, "{}", r.failures.join("\n"));
    assert_eq!(r.stats.get(midend::Counter::Merged), 1);
    assert_eq!(r.stats.get(midend::Counter::MergedAligned), 0);
}

/// `name(x, y)`: ten rounds of `acc = ops(acc)` with the loop counter added, in a loop whose
/// header carries the counter and the accumulator as block parameters (phis).
fn looped(name: &str, ops: &[Op]) -> String {
    let mut s = format!(
        "function %{name}(i64, i64) -> i64 {{\nblock0(v0: i64, v1: i64):\n    v2 = iconst.i64 0\n    \
         jump block1(v2, v0)\nblock1(v3: i64, v4: i64):\n    v5 = iconst.i64 10\n    \
         v6 = icmp ult v3, v5\n    brif v6, block2, block3\nblock2:\n    v7 = iadd v4, v3\n"
    );
    let mut next = 8;
    let r = chain(&mut s, ops, "v7", "v1", &mut next);
    let one = next;
    let _ = writeln!(
        s,
        "    v{one} = iconst.i64 1\n    v{} = iadd v3, v{one}\n    jump block1(v{}, {r})\nblock3:\n    return v4\n}}",
        one + 1,
        one + 1
    );
    for (x, y) in [(0, 0), (5, -3), (123456, 789)] {
        let mut acc: i64 = x;
        for i in 0..10 {
            acc = eval(ops, acc.wrapping_add(i), y);
        }
        let _ = writeln!(s, "; run: %{name}({x}, {y}) == {acc}");
    }
    s.push('\n');
    s
}

#[test]
fn loops_with_values_crossing_an_unmatched_run_into_phis() {
    // In `b` the loop body's last operations differ: values made in the unmatched run reach
    // the back edge (a phi source) and the operations after it.
    // The last is a division: it may trap, so it runs in a diamond whose join passes its
    // result on through a phi.
    let mut b = base();
    b.push(Op::Xor(0x0f0f));
    b[12] = Op::Mul(17);
    b.push(Op::Udiv(3));
    let body = looped("la", &base()) + &looped("lb", &b);
    check("loops", &body, 2, 1, 1);
}

#[test]
fn memory_operations_keep_their_order_and_flags() {
    // `b` stores once more between the stores and the loads (its load then sees `x`), and
    // reads the first word with other flags (no `notrap`): neither may move across another
    // access, and the flags stay as each member had them.
    let mut body = String::new();
    for (name, extra_store, flags) in [("ma", false, "notrap aligned"), ("mb", true, "aligned")] {
        let _ = write!(
            body,
            "function %{name}(i64, i64) -> i64 {{\n    ss0 = explicit_slot 16\nblock0(v0: i64, v1: i64):\n    \
             v2 = stack_addr.i64 ss0\n    store notrap aligned v0, v2\n    store notrap aligned v1, v2+8\n"
        );
        if extra_store {
            body.push_str("    store notrap aligned v0, v2+8\n");
        }
        let _ = write!(
            body,
            "    v3 = load.i64 {flags} v2\n    v4 = load.i64 notrap aligned v2+8\n    v5 = imul v3, v4\n"
        );
        let mut next = 6;
        let r = chain(&mut body, &base(), "v5", "v1", &mut next);
        let _ = writeln!(body, "    return {r}\n}}");
        for (x, y) in [(2i64, 3i64), (-1, 40), (7, 0)] {
            let second = if extra_store { x } else { y };
            let want = eval(&base(), x.wrapping_mul(second), y);
            let _ = writeln!(body, "; run: %{name}({x}, {y}) == {want}");
        }
        body.push('\n');
    }
    check("memory", &body, 2, 1, 1);
}

#[test]
fn differing_stack_slots_stay_apart() {
    // `sb`'s slot is larger and its address differs: it gets a slot of its own in the body.
    let mut body = String::new();
    for (name, size, off, extra) in [("sa", 16, 8, false), ("sb", 32, 24, true)] {
        let _ = write!(
            body,
            "function %{name}(i64, i64) -> i64 {{\n    ss0 = explicit_slot {size}\nblock0(v0: i64, v1: i64):\n    \
             v2 = stack_addr.i64 ss0\n    store notrap aligned v0, v2+{off}\n    v3 = load.i64 notrap aligned v2+{off}\n"
        );
        let mut next = 4;
        let ops = if extra { edited() } else { base() };
        let r = chain(&mut body, &ops, "v3", "v1", &mut next);
        let _ = writeln!(body, "    return {r}\n}}");
        for (x, y) in [(2, 3), (-9, 1)] {
            let _ = writeln!(body, "; run: %{name}({x}, {y}) == {}", eval(&ops, x, y));
        }
        body.push('\n');
    }
    check("stack", &body, 2, 1, 1);
}

#[test]
fn calls_to_other_callees_and_to_themselves() {
    // `ca` calls `%g` where `cb` calls `%h` (an unmatched call), and each calls itself (the
    // merged body calls itself with the identifier it got).
    let mut body = String::from(
        "function %g(i64) -> i64 {\nblock0(v0: i64):\n    v1 = iconst.i64 100\n    v2 = iadd v0, v1\n    return v2\n}\n\n\
         function %h(i64) -> i64 {\nblock0(v0: i64):\n    v1 = iconst.i64 3\n    v2 = imul v0, v1\n    return v2\n}\n\n",
    );
    let g = |x: i64| x.wrapping_add(100);
    let h = |x: i64| x.wrapping_mul(3);
    for (name, callee, ops) in [("ca", "g", base()), ("cb", "h", edited())] {
        // name(n, y) = n <= 0 ? y : ops(callee(name(n - 1, y)))
        let _ = write!(
            body,
            "function %{name}(i64, i64) -> i64 {{\n    fn0 = %{name}(i64, i64) -> i64\n    fn1 = %{callee}(i64) -> i64\n\
             block0(v0: i64, v1: i64):\n    v2 = iconst.i64 0\n    v3 = icmp sle v0, v2\n    brif v3, block2(v1), block1\n\
             block1:\n    v4 = iconst.i64 1\n    v5 = isub v0, v4\n    v6 = call fn0(v5, v1)\n    v7 = call fn1(v6)\n"
        );
        let mut next = 8;
        let r = chain(&mut body, &ops, "v7", "v1", &mut next);
        let _ = writeln!(
            body,
            "    jump block2({r})\nblock2(v{next}: i64):\n    return v{next}\n}}"
        );
        for (n, y) in [(0, 5), (1, 5), (4, -2)] {
            let mut acc: i64 = y;
            for _ in 0..n {
                let c = if callee == "g" { g(acc) } else { h(acc) };
                acc = eval(&ops, c, y);
            }
            let _ = writeln!(body, "; run: %{name}({n}, {y}) == {acc}");
        }
        body.push('\n');
    }
    check("calls", &body, 2, 1, 1);
}

#[test]
fn traps_in_unmatched_runs() {
    // `tb` checks its second argument once more (`trapz`): taken only in `tb`. `taken` has
    // a run line more for each, with the second argument zero (a run line belongs to the
    // function before it).
    let (body, taken) = guarded_chains(&[("ta", base()), ("tb", edited())], "tb");
    check("traps", &body, 2, 1, 1);
    // With the second argument zero the merged `tb` still traps, and `ta` does not.
    let r = only_the_guarded_traps(&taken, "tb");
    assert_eq!(r.stats.get(midend::Counter::MergedAligned), 2);
}

#[test]
fn functions_with_try_call_are_left_alone() {
    // Two copies of a function with `try_call`, one edited: exception tables are not
    // merged by this pass; both keep working.
    let mut body = String::from(
        "function %thrower(i64, i32, i64, i64) tail {\n    sig0 = (i64, i64, i64, i32, i64, i64)\n    \
         fn0 = %__cranelift_throw(i64, i64, i64, i32, i64, i64)\nblock0(v0: i64, v1: i32, v2: i64, v3: i64):\n    \
         brif v1, block1, block2\nblock1:\n    v4 = get_frame_pointer.i64\n    v5 = get_return_address.i64\n    \
         v6 = load.i64 v5\n    v7 = func_addr.i64 fn0\n    call_indirect sig0, v7(v0, v4, v6, v1, v2, v3)\n    return\nblock2:\n    return\n}\n\n",
    );
    for (name, ops) in [("xa", base()), ("xb", edited())] {
        let _ = write!(
            body,
            "function %{name}(i64, i32) -> i64 tail {{\n    sig0 = (i64, i32, i64, i64) tail\n    \
             fn0 = %thrower(i64, i32, i64, i64) tail\nblock0(v0: i64, v1: i32):\n    v2 = iconst.i64 42\n    \
             v3 = iconst.i64 100\n    try_call fn0(v0, v1, v2, v3), sig0, block1(), [ tag1: block2(exn0, exn1) ]\n\
             block1:\n    v4 = iconst.i64 1\n"
        );
        let mut next = 5;
        let r = chain(&mut body, &ops, "v4", "v4", &mut next);
        let _ = writeln!(
            body,
            "    return {r}\nblock2(v{next}: i64, v{}: i64):\n    v{} = isub v{}, v{next}\n    return v{}\n}}\n",
            next + 1,
            next + 2,
            next + 1,
            next + 2
        );
        let _ = writeln!(
            body,
            "function %e{name}(i32) -> i64 tail {{\n    fn0 = %{name}(i64, i32) -> i64 tail\nblock0(v0: i32):\n    \
             v1 = get_frame_pointer.i64\n    v2 = call fn0(v1, v0)\n    return v2\n}}\n; run: %e{name}(0) == {}\n; run: %e{name}(1) == 58\n",
            eval(&ops, 1, 1)
        );
    }
    let text = format!("test run\nset preserve_frame_pointers=true\ntarget x86_64\n{body}");
    for passes in ["none", ALIGNED] {
        let r = run_with("try_call", &text, passes);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.failed, 0, "[{passes}] {}", r.failures.join("\n"));
        assert_eq!(r.passed, 4, "[{passes}] skips {:?}", r.skips);
        assert_eq!(r.stats.get(midend::Counter::MergedAligned), 0);
    }
}

/// Run `passes` over the functions of `body` (lifted), with `hot` as the hot functions.
fn pass_stats(body: &str, hot: Option<midend::passes::aligned::HotFunctions>) -> midend::Stats {
    run_passes(body, hot).1
}

/// `merge-aligned`'s report on `body` lifted, run alone with `min_similarity`.
fn aligned_report(body: &str, min_similarity: f64) -> midend::passes::aligned::AlignedReport {
    let funcs = cranelift_reader::parse_functions(body).unwrap();
    let mut m = jit_driver::lift_functions(funcs.iter(), &mut midend::Stats::default()).unwrap();
    let opts = midend::passes::aligned::AlignedOptions {
        min_similarity,
        ..Default::default()
    };
    midend::passes::aligned::merge_aligned(&mut m, &mut midend::PassState::default(), &opts)
}

/// `pass_stats`, and the module after the passes.
fn run_passes(
    body: &str,
    hot: Option<midend::passes::aligned::HotFunctions>,
) -> (midend::lir::Module, midend::Stats) {
    let funcs = cranelift_reader::parse_functions(body).unwrap();
    let mut stats = midend::Stats::default();
    let mut m = jit_driver::lift_functions(funcs.iter(), &mut stats).unwrap();
    let mut pm = midend::PassManager::from_kinds_with(
        &midend::parse_pass_list(ALIGNED).unwrap(),
        &midend::passes::PassOptions {
            hot,
            ..Default::default()
        },
    );
    pm.verify = true;
    pm.run(&mut m, &mut midend::PassState::default(), &mut stats)
        .unwrap();
    (m, stats)
}

#[test]
fn hot_functions_are_never_merged_by_alignment() {
    let body = straight("a", &base()) + &straight("b", &edited());
    assert_eq!(
        pass_stats(&body, None).get(midend::Counter::MergedAligned),
        2
    );
    for hot in ["a", "b"] {
        let stats = pass_stats(
            &body,
            Some(midend::passes::aligned::HotFunctions::named([hot])),
        );
        assert_eq!(stats.get(midend::Counter::MergedAligned), 0, "{hot} is hot");
        assert_eq!(stats.get(midend::Counter::AlignedHot), 1);
    }
}

#[test]
fn function_addresses_keep_their_signatures() {
    // `fb` takes `%g`'s address and calls through it, where `fa` does not: the merged body
    // must give that `func_addr` `fb`'s signature of `%g`, not what `fa`'s table has at
    // that index.
    let mut body = String::from(
        "function %g(i64) -> i64 {\nblock0(v0: i64):\n    v1 = iconst.i64 100\n    v2 = iadd v0, v1\n    return v2\n}\n\n",
    );
    body += &straight("fa", &base());
    let ops = edited();
    body += "function %fb(i64, i64) -> i64 {\n    sig0 = (i64) -> i64\n    fn0 = %g sig0\n\
             block0(v0: i64, v1: i64):\n    v2 = func_addr.i64 fn0\n    v3 = call_indirect sig0, v2(v0)\n";
    let mut next = 4;
    let r = chain(&mut body, &ops, "v3", "v1", &mut next);
    let _ = writeln!(body, "    return {r}\n}}");
    for (x, y) in [(1, 2), (-5, 9)] {
        let _ = writeln!(body, "; run: %fb({x}, {y}) == {}", eval(&ops, x + 100, y));
    }
    check("func_addr", &body, 2, 1, 1);
    // In the merged body, the `func_addr` names `%g`'s signature.
    let (m, _) = run_passes(&body, None);
    let merged = m
        .functions
        .values()
        .find(|f| f.name.starts_with("__mergelift_aligned"))
        .expect("a merged body");
    let addr = merged
        .insts
        .values()
        .find(|d| d.opcode == midend::lir::Opcode::FuncAddr)
        .expect("the func_addr of fb");
    let sig = &merged.sigs[midend::lir::SigRef::from_u32(addr.aux)];
    assert_eq!(
        (sig.params.len(), sig.returns.len()),
        (1, 1),
        "func_addr with signature {sig:?}"
    );
}

/// Through `MergeModule` (as `mergelift size --hot` runs it): the host names hot functions as
/// it declared them, not by the names they have in the IR (`u0:N` after `declare_function`).
#[test]
fn merge_module_takes_hot_functions_by_their_declared_names() {
    let body = straight("a", &base()) + &straight("b", &edited());
    let file = mergelift_tools::input::parse_clif(std::path::Path::new("hot.clif"), &body).unwrap();
    let aligned = |hot: Option<&str>| {
        let opts = mergelift_tools::size::SizeOptions {
            config: jit_driver::MergeConfig {
                passes: midend::parse_pass_list(ALIGNED).unwrap(),
                hot: hot.map(|h| midend::passes::aligned::HotFunctions::named([h])),
                ..Default::default()
            },
            ..Default::default()
        };
        let r =
            mergelift_tools::size::measure(std::slice::from_ref(&file), &opts, 0.0, |_, _, _| {})
                .unwrap();
        (r.functions.iter())
            .filter(|f| {
                f.merged
                    .as_ref()
                    .is_some_and(|m| m.by == midend::state::MergedBy::Aligned)
            })
            .count()
    };
    assert_eq!(aligned(None), 2);
    assert_eq!(aligned(Some("a")), 0);
    assert_eq!(aligned(Some("b")), 0);
    assert_eq!(
        aligned(Some("u0:0")),
        2,
        "IR names are not what the host declared"
    );
}

/// `name(x, y)`: `p` on `x`; if that is even, `p + 7`; else `q` on it, and then (`exit`)
/// the result itself if its bit 1 is clear, else `r` on it. The blocks in layout
/// order: the entry, `q`'s block, with `exit` the early return, `r`'s block, `p + 7`.
/// Returns the function with run lines.
fn branchy(name: &str, p: &[Op], q: &[Op], r: &[Op], exit: bool) -> String {
    let mut s = format!("function %{name}(i64, i64) -> i64 {{\nblock0(v0: i64, v1: i64):\n");
    let mut next = 2;
    let pv = chain(&mut s, p, "v0", "v1", &mut next);
    let (one, odd) = (next, next + 1);
    next += 2;
    let _ = writeln!(
        s,
        "    v{one} = iconst.i64 1\n    v{odd} = band {pv}, v{one}\n    brif v{odd}, block1, block3\nblock1:"
    );
    let qv = chain(&mut s, q, &pv, "v1", &mut next);
    if exit {
        let (three, low) = (next, next + 1);
        next += 2;
        let _ = writeln!(
            s,
            "    v{three} = iconst.i64 2\n    v{low} = band {qv}, v{three}\n    brif v{low}, block2, block4\nblock4:\n    return {qv}"
        );
    } else {
        s.push_str("    jump block2\n");
    }
    s.push_str("block2:\n");
    let rv = chain(&mut s, r, &qv, "v1", &mut next);
    let seven = next;
    let _ = writeln!(
        s,
        "    return {rv}\nblock3:\n    v{seven} = iconst.i64 7\n    v{} = iadd {pv}, v{seven}\n    return v{}\n}}",
        seven + 1,
        seven + 1
    );
    let mut hit = [false; 3];
    for (x, y) in (-4i64..8).flat_map(|x| [(x, 3 - x), (x, 2 * x + 5)]) {
        let pr = eval(p, x, y);
        let want = if pr & 1 == 0 {
            hit[0] = true;
            pr.wrapping_add(7)
        } else {
            let qr = eval(q, pr, y);
            if exit && qr & 2 == 0 {
                hit[1] = true;
                qr
            } else {
                hit[2] = true;
                eval(r, qr, y)
            }
        };
        let _ = writeln!(s, "; run: %{name}({x}, {y}) == {want}");
    }
    assert!(
        hit[0] && hit[2] && (hit[1] || !exit),
        "{name}: every path taken {hit:?}"
    );
    s.push('\n');
    s
}

#[test]
fn an_extra_block_on_one_side() {
    // `xb` has an early return `xa` lacks: its `q` block ends in a branch where `xa`'s
    // jumps on, so the two blocks stay each member's own. The blocks before and after are
    // one body's; `q`'s result, made in each member's own block, reaches the shared `r`
    // block through a phi, and the entry's branch goes to each member's own block.
    let body = branchy("xa", &base(), &first_half(), &base(), false)
        + &branchy("xb", &edited(), &first_half(), &edited_again(), true);
    check("extra_block", &body, 2, 1, 1);
    let r = run_with("extra_block", &format!("{HEADER}{body}"), ALIGNED);
    assert_eq!(r.stats.get(midend::Counter::AlignedWithExtraBlocks), 1);
}

#[test]
fn blocks_of_one_member_in_a_loop() {
    // Each round ends in a branch to a block of each member's own: `la` adds 100 and goes
    // on (a phi source from its own block), `lb` returns early. The loop's blocks are one
    // body's otherwise, and its branch on the identifier runs in every round.
    let mut body = String::new();
    for (name, ops, exit) in [("la", base(), false), ("lb", edited(), true)] {
        // name(x, y): ten rounds of acc = ops(acc + i), then if acc is not a multiple of 8
        // it goes on as it is, else `la` goes on with acc + 100 and `lb` returns it.
        let _ = write!(
            body,
            "function %{name}(i64, i64) -> i64 {{\nblock0(v0: i64, v1: i64):\n    v2 = iconst.i64 0\n    \
             jump block1(v2, v0)\nblock1(v3: i64, v4: i64):\n    v5 = iconst.i64 10\n    \
             v6 = icmp ult v3, v5\n    brif v6, block2, block5\nblock2:\n    v7 = iadd v4, v3\n"
        );
        let mut next = 8;
        let r = chain(&mut body, &ops, "v7", "v1", &mut next);
        let (seven, low) = (next, next + 1);
        next += 2;
        let _ = writeln!(
            body,
            "    v{seven} = iconst.i64 7\n    v{low} = band {r}, v{seven}\n    brif v{low}, block3({r}), block4\nblock4:"
        );
        if exit {
            let _ = writeln!(body, "    return {r}");
        } else {
            let (hundred, more) = (next, next + 1);
            next += 2;
            let _ = writeln!(
                body,
                "    v{hundred} = iconst.i64 100\n    v{more} = iadd {r}, v{hundred}\n    jump block3(v{more})"
            );
        }
        let (acc, one, i1) = (next, next + 1, next + 2);
        let _ = writeln!(
            body,
            "block3(v{acc}: i64):\n    v{one} = iconst.i64 1\n    v{i1} = iadd v3, v{one}\n    \
             jump block1(v{i1}, v{acc})\nblock5:\n    return v4\n}}"
        );
        let mut hit = false;
        for (x, y) in [
            (0, 0),
            (5, -3),
            (123456, 789),
            (1, 1),
            (2, 9),
            (77, 4),
            (8, 8),
            (3, 0),
        ] {
            let mut acc: i64 = x;
            for i in 0..10 {
                acc = eval(&ops, acc.wrapping_add(i), y);
                if acc & 7 == 0 {
                    hit = true;
                    if exit {
                        break;
                    }
                    acc = acc.wrapping_add(100);
                }
            }
            let _ = writeln!(body, "; run: %{name}({x}, {y}) == {acc}");
        }
        assert!(hit, "{name}: the own block is taken");
        body.push('\n');
    }
    check("loop_extra_block", &body, 2, 1, 1);
    let r = run_with("loop_extra_block", &format!("{HEADER}{body}"), ALIGNED);
    assert_eq!(r.stats.get(midend::Counter::AlignedWithExtraBlocks), 1);
}

#[test]
fn calls_in_blocks_of_one_member() {
    // The recursive step is a block of each member's own (`ra` calls `%g` and jumps on,
    // `rb` branches on the result's low bit, returning it when clear); each calls itself
    // there, which in the merged body calls the body with the identifier passed on.
    let mut body = String::from(
        "function %g(i64) -> i64 {\nblock0(v0: i64):\n    v1 = iconst.i64 100\n    v2 = iadd v0, v1\n    return v2\n}\n\n",
    );
    for (name, ops, other) in [("ra", base(), false), ("rb", edited(), true)] {
        let _ = write!(
            body,
            "function %{name}(i64, i64) -> i64 {{\n    fn0 = %{name}(i64, i64) -> i64\n    fn1 = %g(i64) -> i64\n\
             block0(v0: i64, v1: i64):\n    v2 = iconst.i64 0\n    v3 = icmp sle v0, v2\n    brif v3, block3, block1\n\
             block1:\n    v4 = iconst.i64 1\n    v5 = isub v0, v4\n    v6 = call fn0(v5, v1)\n"
        );
        if other {
            body.push_str(
                "    v7 = iconst.i64 1\n    v8 = band v6, v7\n    brif v8, block2(v6), block4\nblock4:\n    return v6\n",
            );
        } else {
            body.push_str("    v8 = call fn1(v6)\n    jump block2(v8)\n");
        }
        let mut next = 10;
        body.push_str("block2(v9: i64):\n");
        let r = chain(&mut body, &ops, "v9", "v1", &mut next);
        let _ = writeln!(body, "    return {r}\nblock3:\n    return v1\n}}");
        for (n, y) in [(0, 5), (1, 5), (2, -3), (4, 7), (3, 12), (5, 1)] {
            let mut acc: i64 = y;
            for _ in 0..n {
                acc = if other {
                    if acc & 1 != 0 {
                        eval(&ops, acc, y)
                    } else {
                        acc
                    }
                } else {
                    eval(&ops, acc.wrapping_add(100), y)
                };
            }
            let _ = writeln!(body, "; run: %{name}({n}, {y}) == {acc}");
        }
        body.push('\n');
    }
    check("own_calls", &body, 2, 1, 1);
    let r = run_with("own_calls", &format!("{HEADER}{body}"), ALIGNED);
    assert_eq!(r.stats.get(midend::Counter::AlignedWithExtraBlocks), 1);
}

/// `straight`, with a stack limit loaded from `vmctx` (at `offset` in the block it points
/// to), as wasmtime's functions have (no run lines: the pass only).
fn with_stack_limit(name: &str, ops: &[Op], offset: i32) -> String {
    let mut s = format!(
        "function %{name}(i64 vmctx, i64) -> i64 {{\n    gv0 = vmctx\n    \
         gv1 = load.i64 notrap aligned readonly gv0+8\n    \
         gv2 = load.i64 notrap aligned gv1+{offset}\n    stack_limit = gv2\n\n\
         block0(v0: i64, v1: i64):\n"
    );
    let mut next = 2;
    let r = chain(&mut s, ops, "v0", "v1", &mut next);
    let _ = writeln!(s, "    return {r}\n}}\n");
    s
}

/// A function adding `arg` to `x` twenty times, then returning it (no run lines).
fn sums(name: &str, arg: &str) -> String {
    let mut s = format!("function %{name}(i64, i64) -> i64 {{\nblock0(v0: i64, v1: i64):\n");
    let mut acc = "v0".to_string();
    for k in 2..22 {
        let _ = writeln!(s, "    v{k} = iadd {acc}, {arg}");
        acc = format!("v{k}");
    }
    let _ = writeln!(s, "    return {acc}\n}}\n");
    s
}

#[test]
fn rejections_are_counted_by_reason() {
    // Every constant differs: a select each, more than the pair would save. The estimate,
    // taken from the alignment, rejects the pair before its body is built.
    let other: Vec<Op> = base()
        .into_iter()
        .map(|op| match op {
            Op::Add(k) => Op::Add(k + 1000),
            Op::Sub(k) => Op::Sub(k + 1000),
            Op::Mul(k) => Op::Mul(k + 1000),
            Op::Xor(k) => Op::Xor(k + 1000),
            op => op,
        })
        .collect();
    // The similarity screen turns it away first: no instruction with a constant has a
    // token in common with the other's. (Under the degenerate hasher of the suite's second
    // run every token falls in one of four buckets: the screen lets the pair through, and
    // the estimate rejects it.)
    let pair = straight("a", &base()) + &straight("b", &other);
    let stats = pass_stats(&pair, None);
    let (screened, estimated) = if midend::hash::DEGENERATE {
        (0, 1)
    } else {
        (1, 0)
    };
    assert_eq!(stats.get(midend::Counter::MergedAligned), 0);
    assert_eq!(stats.get(midend::Counter::AlignedAligned), 1);
    assert_eq!(
        stats.get(midend::Counter::AlignedRejectedDissimilar),
        screened
    );
    assert_eq!(
        stats.get(midend::Counter::AlignedRejectedEstimate),
        estimated
    );
    assert_eq!(stats.get(midend::Counter::AlignedUnprofitable), 1);
    // Without the screen, the estimate rejects it.
    let report = aligned_report(&pair, 0.0);
    assert_eq!((report.merged, report.aligned), (0, 1));
    assert_eq!(report.rejected.dissimilar, 0);
    assert_eq!(report.rejected.estimate, 1);
    // A near pair (an instruction replaced, one inserted, one removed) passes the screen and
    // merges.
    let stats = pass_stats(&(straight("a", &base()) + &straight("b", &edited())), None);
    assert_eq!(stats.get(midend::Counter::MergedAligned), 2);
    assert_eq!(stats.get(midend::Counter::AlignedRejectedDissimilar), 0);

    // Only registers differ: each `iadd` reads the other parameter, a select each. The
    // estimate counts selects on registers too, so this pair is not built either.
    let stats = pass_stats(&(sums("a", "v1") + &sums("b", "v0")), None);
    assert_eq!(stats.get(midend::Counter::MergedAligned), 0);
    assert_eq!(stats.get(midend::Counter::AlignedAligned), 1);
    assert_eq!(stats.get(midend::Counter::AlignedRejectedEstimate), 1);
    assert_eq!(stats.get(midend::Counter::AlignedRejectedSaving), 0);

    // A pair that merges with equal global values, and is not alignable when one loads its
    // stack limit from elsewhere: the merged body has one table of global values.
    let same = with_stack_limit("a", &base(), 24) + &with_stack_limit("b", &edited(), 24);
    let stats = pass_stats(&same, None);
    assert_eq!(stats.get(midend::Counter::MergedAligned), 2);
    assert_eq!(stats.get(midend::Counter::AlignedNotAlignable), 0);
    let apart = with_stack_limit("a", &base(), 24) + &with_stack_limit("b", &edited(), 32);
    let stats = pass_stats(&apart, None);
    assert_eq!(stats.get(midend::Counter::MergedAligned), 0);
    assert_eq!(stats.get(midend::Counter::AlignedRejectedTables), 1);
    assert_eq!(stats.get(midend::Counter::AlignedNotAlignable), 1);
}
