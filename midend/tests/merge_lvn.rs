//! MergeFunctions and local value numbering: one test per comparator category (functions that
//! differ only there must not merge), the positive merge kinds, the order laws of the
//! FunctionComparator (proptest), and LVN's seed examples plus what it must not optimise.

use cranelift_entity::SecondaryMap;
use midend::lir::*;
use midend::passes::lvn::{LocalValueNumbering, LvnStats};
use midend::passes::merge::internals::{function_hashes, HashScratch, WalkOut};
use midend::passes::merge::{function_hash, merge_functions, validate_merge, FunctionComparator};
use midend::state::MergeKind;
use midend::verifier::*;
use midend::{PassManager, PassState, Stats};
use proptest::prelude::*;
use std::cmp::Ordering;

#[track_caller]
fn parse(src: &str) -> Module {
    let m = parse_module(src).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
    verify_module(&m, true).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
    m
}

#[track_caller]
fn run(m: &mut Module, passes: &str) -> Stats {
    run_with(m, &mut PassState::default(), passes)
}

#[track_caller]
fn run_with(m: &mut Module, ps: &mut PassState, passes: &str) -> Stats {
    let mut pm = PassManager::from_names(passes).unwrap();
    let mut stats = Stats::default();
    pm.run(m, ps, &mut stats).unwrap();
    verify_module(m, true).unwrap_or_else(|e| panic!("{e} in:\n{}", module_to_string(m)));
    stats
}

fn fid(m: &Module, name: &str) -> FuncId {
    m.defined(m.lookup_symbol(name).unwrap()).unwrap()
}

/// Every live function in a class of its own, except those listed together.
fn classes_all_zero(m: &Module) -> SecondaryMap<FuncId, u32> {
    let mut c = SecondaryMap::new();
    for (id, _) in m.functions.iter() {
        c[id] = 0;
    }
    c
}

// ---------------------------------------------------------------------------------------------
// MergeFunctions: categories that must keep two functions apart.
// ---------------------------------------------------------------------------------------------

/// A function touching every comparator category; `NAME` is replaced by the function name.
const TEMPLATE: &str = r#"function @NAME(i32, i32) -> i32 system_v export {
    stack_obj.0 = size 16, align 8
    sig0 = (i32) -> i32 system_v
    region0 = 1 "a"
bb0:
    %vr0 = copy.i32 arg0
    %vr1 = add.i32 %vr0, 7
    %vr2 = icmp.i32 slt %vr1, 3
    store.i32 aligned region0 [stack_obj.0 + 4], %vr1
    %vr3 = load.i32 aligned region0 [stack_obj.0 + 4]
    %vr4 = call @ext0(%vr3), sig0
    %vr5 = stack_addr.i64 stack_obj.0 + 0
    %vr6 = uextend.i64 %vr0
    %vr7 = load.i32 [%vr5 + %vr6*4 + 8]
    %vr8: i32 = opaque "y" [0x1] pure %vr7
    %vr9 = copy.i32 5
    %vr10 = add.i32 %vr4, %vr8
    brif.i8 ne %vr2, bb1, bb2
bb1:
    ret %vr10
bb2:
    trap user1
}
"#;

const DECLS: &str = "declare function @ext0\ndeclare function @ext1\n\n";

/// A module with `f` from the template and `g` from the template with `from` replaced by `to`.
#[track_caller]
fn pair(from: &str, to: &str) -> Module {
    let f = TEMPLATE.replace("NAME", "f");
    let g = TEMPLATE.replace("NAME", "g");
    if !from.is_empty() {
        assert!(g.contains(from), "{from:?} not in the template");
    }
    let g = if from.is_empty() {
        g
    } else {
        g.replacen(from, to, 1)
    };
    parse(&format!("{DECLS}{f}\n{g}"))
}

#[track_caller]
fn assert_not_merged(from: &str, to: &str) {
    let mut m = pair(from, to);
    let (f, g) = (fid(&m, "f"), fid(&m, "g"));
    let classes = classes_all_zero(&m);
    let mut c = FunctionComparator::new(&m, &classes);
    let o = c.compare(&m.functions[f], &m.functions[g]);
    assert_ne!(o, Ordering::Equal, "{from:?} -> {to:?} compares equal");
    assert_eq!(
        c.compare(&m.functions[g], &m.functions[f]),
        o.reverse(),
        "antisymmetry"
    );
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    assert_eq!(r.merged, 0, "{from:?} -> {to:?} merged");
    assert!(ps.merges.is_empty());
    verify_module(&m, true).unwrap();
}

#[test]
fn template_pair_merges() {
    // The control: without a difference, the two functions merge (so each negative test below
    // fails only because of its one difference).
    let mut m = pair("", "");
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    assert_eq!(r.merged, 1);
    assert_eq!(r.aliased, 1);
    verify_module(&m, true).unwrap();
}

#[test]
fn differ_param_type() {
    assert_not_merged("(i32, i32) -> i32", "(i32, i64) -> i32");
}

#[test]
fn differ_call_conv() {
    assert_not_merged("-> i32 system_v export", "-> i32 fast export");
}

#[test]
fn differ_return_ext() {
    assert_not_merged("-> i32 system_v export", "-> i32 sext system_v export");
}

#[test]
fn differ_inst_type() {
    assert_not_merged("%vr9 = copy.i32 5", "%vr9 = copy.i64 5");
}

#[test]
fn differ_constant() {
    assert_not_merged("add.i32 %vr0, 7", "add.i32 %vr0, 8");
}

#[test]
fn differ_predicate() {
    assert_not_merged("icmp.i32 slt", "icmp.i32 sle");
}

#[test]
fn differ_opcode() {
    assert_not_merged("add.i32 %vr0, 7", "sub.i32 %vr0, 7");
}

#[test]
fn differ_branch_targets() {
    assert_not_merged("bb1, bb2", "bb2, bb1");
}

#[test]
fn differ_block_structure() {
    // The same instructions, but bb1 reached through an extra jump block.
    assert_not_merged(
        "bb1:\n    ret %vr10\n",
        "bb1:\n    jump bb3\nbb3:\n    ret %vr10\n",
    );
}

#[test]
fn differ_memflags_aligned() {
    assert_not_merged(
        "store.i32 aligned region0 [stack_obj.0 + 4]",
        "store.i32 region0 [stack_obj.0 + 4]",
    );
}

#[test]
fn differ_alias_region_id() {
    assert_not_merged("region0 = 1 \"a\"", "region0 = 2 \"a\"");
}

#[test]
fn differ_mem_disp() {
    assert_not_merged("%vr6*4 + 8]", "%vr6*4 + 12]");
}

#[test]
fn differ_mem_scale() {
    assert_not_merged("%vr6*4 + 8]", "%vr6*8 + 8]");
}

#[test]
fn differ_stack_object_offset() {
    assert_not_merged(
        "load.i32 aligned region0 [stack_obj.0 + 4]",
        "load.i32 aligned region0 [stack_obj.0 + 8]",
    );
}

#[test]
fn differ_stack_object_size() {
    assert_not_merged("size 16, align 8", "size 32, align 8");
}

#[test]
fn differ_callee() {
    assert_not_merged("call @ext0(", "call @ext1(");
}

#[test]
fn differ_opaque_name() {
    assert_not_merged("opaque \"y\"", "opaque \"z\"");
}

#[test]
fn differ_opaque_imms() {
    assert_not_merged("[0x1]", "[0x2]");
}

#[test]
fn differ_trap_code() {
    assert_not_merged("trap user1", "trap user2");
}

// ---------------------------------------------------------------------------------------------
// MergeFunctions: positive cases.
// ---------------------------------------------------------------------------------------------

fn simple(name: &str, linkage: &str, k: i64) -> String {
    format!(
        "function @{name}(i64) -> i64 system_v {linkage} {{\nbb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = mul.i64 %vr0, {k}\n    %vr2 = add.i64 %vr1, 1\n    ret %vr2\n}}\n"
    )
}

fn caller(name: &str, callee: &str) -> String {
    format!(
        "function @{name}(i64) -> i64 system_v export {{\n    sig0 = (i64) -> i64 system_v\nbb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = call @{callee}(%vr0), sig0\n    ret %vr1\n}}\n"
    )
}

/// Does function `f` call `sym` directly?
fn calls(m: &Module, f: FuncId, sym: &str) -> bool {
    let s = m.lookup_symbol(sym).unwrap();
    let func = &m.functions[f];
    func.layout.iter().any(|&b| {
        func.block_insts(b).iter().any(|&i| {
            func.insts[i].opcode.is_call() && func.operands(i).first() == Some(Operand::Sym(s, 0))
        })
    })
}

#[test]
fn exported_duplicate_is_aliased() {
    let mut m = parse(&format!(
        "{}\n{}",
        simple("f", "export", 3),
        simple("g", "export", 3)
    ));
    let (f, g) = (fid(&m, "f"), fid(&m, "g"));
    let classes = classes_all_zero(&m);
    validate_merge(&m, &classes, f, g).unwrap();
    let mut ps = PassState::default();
    let stats = run_with(&mut m, &mut ps, "merge");
    assert_eq!(stats.get(midend::Counter::Merged), 1);
    assert_eq!(stats.get(midend::Counter::MergeAliased), 1);
    assert_eq!(ps.merges.len(), 1);
    assert_eq!(ps.merges[0].kind, MergeKind::Aliased);
    assert_eq!(
        (
            m.symbol_name(ps.merges[0].merged),
            m.symbol_name(ps.merges[0].survivor)
        ),
        ("g", "f")
    );
    assert!(m.removed[g] && !m.removed[f]);
    validate_merge(&m, &classes, f, g).unwrap();
    let (gs, fs) = (m.lookup_symbol("g").unwrap(), m.lookup_symbol("f").unwrap());
    assert_eq!(m.aliases.get(&gs), Some(&fs));
}

/// With `PassState::free_removed`, a merged function's body is freed as the pass removes it; its
/// slot keeps the name and signature, so `thunk_merged` can give it a thunk again.
#[test]
fn free_removed_drops_merged_bodies() {
    let text = format!(
        "{}\n{}\n{}",
        simple("f", "export", 3),
        simple("g", "export", 3),
        caller("h", "g")
    );
    let mut kept = parse(&text);
    let mut freed = parse(&text);
    let (mut kept_ps, mut freed_ps) = (PassState::default(), PassState::default());
    freed_ps.free_removed = true;
    let g = fid(&freed, "g");
    run_with(&mut kept, &mut kept_ps, "merge");
    run_with(&mut freed, &mut freed_ps, "merge");
    assert_eq!(kept.to_string(), freed.to_string());
    assert!(freed.removed[g] && kept.removed[g]);
    assert!(kept.functions[g].inst_count() > 0);
    assert_eq!(freed.functions[g].inst_count(), 0);
    assert!(freed.functions[g].entry().is_none());
    assert_eq!(freed.functions[g].name, "g");
    assert_eq!(freed.functions[g].sig, kept.functions[g].sig);
    midend::passes::merge::thunk_merged(&mut kept, &mut kept_ps);
    midend::passes::merge::thunk_merged(&mut freed, &mut freed_ps);
    verify_module(&freed, true).unwrap();
    assert_eq!(kept.to_string(), freed.to_string());
}

#[test]
fn local_duplicate_is_replaced_and_callers_redirected() {
    let mut m = parse(&format!(
        "{}\n{}\n{}",
        simple("f", "export", 3),
        simple("g", "local", 3),
        caller("h", "g")
    ));
    let (f, g, h) = (fid(&m, "f"), fid(&m, "g"), fid(&m, "h"));
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    verify_module(&m, true).unwrap();
    assert_eq!((r.merged, r.replaced), (1, 1));
    assert_eq!(r.pairs, vec![(g, f)]);
    assert_eq!(ps.merges[0].kind, MergeKind::Replaced);
    assert!(m.removed[g]);
    // The removed body still maps onto the survivor's.
    validate_merge(&m, &classes_all_zero(&m), f, g).unwrap();
    assert!(calls(&m, h, "f"), "h must now call f");
    assert!(!calls(&m, h, "g"));
}

#[test]
fn address_significant_duplicate_is_thunked() {
    let src = format!(
        "{}\n{}\n{}",
        simple("f", "export", 3),
        simple("g", "export address_significant", 3),
        caller("h", "g")
    );
    let mut m = parse(&src);
    let (f, g, h) = (fid(&m, "f"), fid(&m, "g"), fid(&m, "h"));
    validate_merge(&m, &classes_all_zero(&m), f, g).unwrap();
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    verify_module(&m, true).unwrap();
    assert_eq!((r.merged, r.thunked), (1, 1));
    assert_eq!(r.pairs, vec![(g, f)]);
    assert_eq!(ps.merges[0].kind, MergeKind::Thunked);
    assert!(!m.removed[g], "a thunk keeps its own code");
    assert!(m.functions[g].address_significant);
    // The thunk's body: copies of the arguments, a call to f, a return.
    let t = &m.functions[g];
    let insts: Vec<Inst> = t
        .layout
        .iter()
        .flat_map(|&b| t.block_insts(b).to_vec())
        .collect();
    let ops: Vec<Opcode> = insts.iter().map(|&i| t.insts[i].opcode).collect();
    assert!(
        ops == [Opcode::Copy, Opcode::Call, Opcode::Ret] || ops == [Opcode::Copy, Opcode::TailCall],
        "{ops:?}"
    );
    assert!(calls(&m, g, "f"));
    assert!(calls(&m, h, "f"), "direct callers of a strong thunk call f");
}

/// The thunk of a `tail` function tail-calls its survivor when the target allows tail calls,
/// and otherwise calls and returns (issue 13: x86-64 without frame pointers cannot compile
/// `return_call`, and a pass must not make input uncompilable).
#[test]
fn tail_conv_thunk_tail_calls_only_where_allowed() {
    let body = |name: &str, attrs: &str| {
        format!(
            "function @{name}(i64) -> i64 tail {attrs} {{\nbb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = add.i64 %vr0, 9\n    ret %vr1\n}}\n"
        )
    };
    for allow in [true, false] {
        let mut m = parse(&format!(
            "{}\n{}",
            body("f", "export"),
            body("g", "export address_significant")
        ));
        let mut ps = PassState::default();
        ps.allow_tail_calls = allow;
        let g = fid(&m, "g");
        run_with(&mut m, &mut ps, "merge");
        let t = &m.functions[g];
        let ops: Vec<Opcode> = t
            .block_insts(t.layout[0])
            .iter()
            .map(|&i| t.insts[i].opcode)
            .collect();
        if allow {
            assert_eq!(ops, [Opcode::Copy, Opcode::TailCall]);
        } else {
            assert_eq!(ops, [Opcode::Copy, Opcode::Call, Opcode::Ret]);
        }
        assert!(calls(&m, g, "f"));
    }
}

fn fact(name: &str, callee: &str) -> String {
    format!(
        "function @{name}(i64) -> i64 system_v export {{\n    sig0 = (i64) -> i64 system_v\nbb0:\n    %vr0 = copy.i64 arg0\n    brif.i64 sle %vr0, 1, bb1, bb2\nbb1:\n    ret 1\nbb2:\n    %vr1 = sub.i64 %vr0, 1\n    %vr2 = call @{callee}(%vr1), sig0\n    %vr3 = mul.i64 %vr0, %vr2\n    ret %vr3\n}}\n"
    )
}

#[test]
fn self_recursive_functions_merge() {
    let src = format!("{}\n{}", fact("fact0", "fact0"), fact("fact1", "fact1"));
    let mut m = match parse_module(&src) {
        Ok(m) => m,
        Err(_) => {
            // `ret 1` may not be accepted: use a register.
            let src = src.replace("    ret 1\n", "    %vr9 = copy.i64 1\n    ret %vr9\n");
            parse(&src)
        }
    };
    verify_module(&m, true).unwrap();
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    verify_module(&m, true).unwrap();
    assert_eq!(r.merged, 1);
    assert_eq!(m.symbol_name(ps.merges[0].survivor), "fact0");
    assert_eq!(m.symbol_name(ps.merges[0].merged), "fact1");
}

#[test]
fn mutually_recursive_functions_merge() {
    let pp = |name: &str, other: &str| {
        format!(
            "function @{name}(i64) -> i64 system_v local {{\n    sig0 = (i64) -> i64 system_v\nbb0:\n    %vr0 = copy.i64 arg0\n    brif.i64 eq %vr0, bb1, bb2\nbb1:\n    %vr9 = copy.i64 0\n    ret %vr9\nbb2:\n    %vr1 = sub.i64 %vr0, 1\n    %vr2 = call @{other}(%vr1), sig0\n    ret %vr2\n}}\n"
        )
    };
    // ping ↔ pong and ping2 ↔ pong2: two isomorphic groups (all four are one class).
    let src = format!(
        "{}\n{}\n{}\n{}\n{}",
        pp("ping", "pong"),
        pp("pong", "ping"),
        pp("ping2", "pong2"),
        pp("pong2", "ping2"),
        caller("main", "ping2")
    );
    let mut m = parse(&src);
    let main = fid(&m, "main");
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    verify_module(&m, true).unwrap();
    assert_eq!(r.merged, 3, "{:?}", ps.merges);
    let live: Vec<&str> = m
        .live_functions()
        .map(|(_, f)| f.name.as_str())
        .filter(|n| *n != "main")
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");
    assert!(calls(&m, main, live[0]));
}

#[test]
fn equal_after_callees_merge() {
    let src = format!(
        "{}\n{}\n{}\n{}",
        simple("x", "local", 5),
        simple("y", "local", 5),
        caller("a", "x"),
        caller("b", "y")
    );
    let mut m = parse(&src);
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    verify_module(&m, true).unwrap();
    assert_eq!(r.merged, 2, "{:?}", ps.merges);
    let names: Vec<(&str, &str)> = ps
        .merges
        .iter()
        .map(|r| (m.symbol_name(r.merged), m.symbol_name(r.survivor)))
        .collect();
    assert!(names.contains(&("y", "x")), "{names:?}");
    assert!(names.contains(&("b", "a")), "{names:?}");
}

#[test]
fn near_duplicate_by_one_constant_does_not_merge() {
    let src = format!(
        "{}\n{}\n{}\n{}",
        simple("x", "local", 5),
        simple("y", "local", 6),
        caller("a", "x"),
        caller("b", "y")
    );
    let mut m = parse(&src);
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    assert_eq!(r.merged, 0, "{:?}", ps.merges);
}

#[test]
fn preemptible_pair_left_alone() {
    let mut m = parse(&format!(
        "{}\n{}",
        simple("f", "preemptible", 3),
        simple("g", "preemptible", 3)
    ));
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    assert_eq!(r.merged, 0);
    assert!(ps.merges.is_empty());
    assert!(m.live_functions().count() == 2);
}

#[test]
fn preemptible_duplicate_of_strong_is_thunked_and_callers_kept() {
    let mut m = parse(&format!(
        "{}\n{}\n{}",
        simple("f", "export", 3),
        simple("g", "preemptible", 3),
        caller("h", "g")
    ));
    let h = fid(&m, "h");
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    verify_module(&m, true).unwrap();
    assert_eq!(r.thunked, 1);
    assert!(
        calls(&m, h, "g"),
        "a preemptible g may be replaced at link time"
    );
}

/// Callees that are not merge candidates (unique hash) must keep classes of their own:
/// `a` calls `x1` (returns 1) and `b` calls `x2` (returns 2); `c` calls `a`, `d` calls `b`.
/// `c` and `d` must not merge.
#[test]
fn callers_of_distinct_unique_functions_do_not_merge() {
    let src = "function @x1() -> i64 system_v export {\nbb0:\n    %vr0 = copy.i64 1\n    ret %vr0\n}\n\
function @x2() -> i64 system_v export {\nbb0:\n    %vr0 = copy.i64 2\n    %vr1 = add.i64 %vr0, 0\n    ret %vr1\n}\n\
function @a() -> i64 system_v export {\n    sig0 = () -> i64 system_v\nbb0:\n    %vr0 = call @x1(), sig0\n    ret %vr0\n}\n\
function @b() -> i64 system_v export {\n    sig0 = () -> i64 system_v\nbb0:\n    %vr0 = call @x2(), sig0\n    ret %vr0\n}\n\
function @c() -> i64 system_v export {\n    sig0 = () -> i64 system_v\nbb0:\n    %vr0 = call @a(), sig0\n    ret %vr0\n}\n\
function @d() -> i64 system_v export {\n    sig0 = () -> i64 system_v\nbb0:\n    %vr0 = call @b(), sig0\n    ret %vr0\n}\n";
    let mut m = parse(src);
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    verify_module(&m, true).unwrap();
    assert_eq!(r.merged, 0, "wrongly merged: {:?}", ps.merges);
}

// ---------------------------------------------------------------------------------------------
// FunctionComparator order laws.
// ---------------------------------------------------------------------------------------------

/// A small random function description.
#[derive(Clone, Debug)]
struct FnDesc {
    /// (opcode index, constant) per instruction of the entry block.
    ops: Vec<(u8, i64)>,
    /// 0: one block; 1: a diamond; 2: a loop.
    shape: u8,
    /// 0: no call; 1: self call; 2: call ext0; 3: call ext1; 4: call fn0.
    call: u8,
}

fn fn_desc() -> impl Strategy<Value = FnDesc> {
    (
        prop::collection::vec((0u8..4, -2i64..3), 1..4),
        0u8..3,
        0u8..5,
    )
        .prop_map(|(ops, shape, call)| FnDesc { ops, shape, call })
}

fn render(name: &str, d: &FnDesc) -> String {
    let mut s = format!(
        "function @{name}(i64) -> i64 system_v export {{\n    sig0 = (i64) -> i64 system_v\nbb0:\n    %vr0 = copy.i64 arg0\n"
    );
    let mut last = 0;
    for (k, &(op, c)) in d.ops.iter().enumerate() {
        let opn = ["add", "sub", "mul", "xor"][op as usize];
        s += &format!("    %vr{} = {opn}.i64 %vr{last}, {c}\n", k + 1);
        last = k + 1;
    }
    let callee = match d.call {
        1 => Some(name.to_string()),
        2 => Some("ext0".to_string()),
        3 => Some("ext1".to_string()),
        4 => Some("fn0".to_string()),
        _ => None,
    };
    if let Some(c) = callee {
        s += &format!("    %vr50 = call @{c}(%vr{last}), sig0\n");
        last = 50;
    }
    match d.shape {
        0 => s += &format!("    ret %vr{last}\n"),
        1 => {
            s += &format!(
                "    brif.i64 eq %vr{last}, bb1, bb2\nbb1:\n    %vr60 = add.i64 %vr{last}, 1\n    jump bb3\nbb2:\n    %vr61 = sub.i64 %vr{last}, 1\n    jump bb3\nbb3:\n    %vr62 = phi.i64 [%vr60, bb1], [%vr61, bb2]\n    ret %vr62\n"
            );
        }
        _ => {
            s += &format!(
                "    jump bb1\nbb1:\n    %vr70 = phi.i64 [%vr{last}, bb0], [%vr71, bb1]\n    %vr71 = sub.i64 %vr70, 1\n    brif.i64 eq %vr71, bb2, bb1\nbb2:\n    ret %vr71\n"
            );
        }
    }
    s += "}\n";
    s
}

fn module_strategy() -> impl Strategy<Value = (Vec<FnDesc>, Vec<(usize, usize, i64)>)> {
    (
        prop::collection::vec(fn_desc(), 2..5),
        // Near-identical copies: (source function, instruction, new constant).
        prop::collection::vec((0usize..8, 0usize..4, -2i64..3), 0..4),
    )
}

fn build_module(descs: &[FnDesc], copies: &[(usize, usize, i64)]) -> Module {
    let mut all: Vec<FnDesc> = descs.to_vec();
    for &(src, inst, c) in copies {
        let mut d = descs[src % descs.len()].clone();
        let k = inst % d.ops.len();
        d.ops[k].1 = c;
        all.push(d.clone());
        all.push(descs[src % descs.len()].clone()); // an exact copy too
    }
    let mut text = String::from(DECLS);
    for (k, d) in all.iter().enumerate() {
        text += &render(&format!("fn{k}"), d);
        text += "\n";
    }
    parse(&text)
}

fn check_laws(m: &Module, classes: &SecondaryMap<FuncId, u32>) -> Result<(), TestCaseError> {
    let ids: Vec<FuncId> = m.functions.keys().collect();
    let mut c = FunctionComparator::new(m, classes);
    let mut ord = |a: FuncId, b: FuncId| c.compare(&m.functions[a], &m.functions[b]);
    for &a in &ids {
        prop_assert_eq!(ord(a, a), Ordering::Equal);
        for &b in &ids {
            let ab = ord(a, b);
            prop_assert_eq!(ab, ord(b, a).reverse(), "antisymmetry {} {}", a, b);
            if ab == Ordering::Equal {
                prop_assert_eq!(
                    function_hash(&m.functions[a]),
                    function_hash(&m.functions[b])
                );
            }
            for &x in &ids {
                let bx = ord(b, x);
                if ab == bx && ab != Ordering::Greater {
                    let ax = ord(a, x);
                    prop_assert_eq!(ax, ab, "transitivity {} {} {}", a, b, x);
                }
                if ab == Ordering::Equal {
                    prop_assert_eq!(ord(a, x), bx, "equal elements order alike");
                }
            }
        }
    }
    Ok(())
}

/// The token streams of `function_hashes` are equal exactly when the comparator, with callees
/// compared by position only, finds the functions equal; and then the hashes are equal too.
fn check_tokens(m: &Module) -> Result<(), TestCaseError> {
    let ids: Vec<FuncId> = m.functions.keys().collect();
    let mut scratch = HashScratch::default();
    let walked: Vec<(u64, u64, Vec<u32>)> = ids
        .iter()
        .map(|&f| {
            let mut out = WalkOut::default();
            let (w, l) = function_hashes(&m.functions[f], &mut scratch, &mut out);
            (w, l, out.tokens)
        })
        .collect();
    let none = SecondaryMap::new();
    let mut c = FunctionComparator::new(m, &none);
    c.set_modulo_callees(true);
    for (i, &a) in ids.iter().enumerate() {
        for (j, &b) in ids.iter().enumerate() {
            let eq = c.compare(&m.functions[a], &m.functions[b]) == Ordering::Equal;
            prop_assert_eq!(
                eq,
                walked[i].2 == walked[j].2,
                "tokens vs comparator {} {}",
                a,
                b
            );
            if eq {
                prop_assert_eq!(walked[i].0, walked[j].0);
                prop_assert_eq!(walked[i].1, walked[j].1);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn token_streams_match_the_comparator((descs, copies) in module_strategy()) {
        check_tokens(&build_module(&descs, &copies))?;
    }

    #[test]
    fn comparator_order_laws((descs, copies) in module_strategy()) {
        let m = build_module(&descs, &copies);
        check_laws(&m, &classes_all_zero(&m))?;
        let mut distinct = SecondaryMap::new();
        for (id, _) in m.functions.iter() {
            distinct[id] = id.as_u32();
        }
        check_laws(&m, &distinct)?;
        // Merging keeps the module valid, and every merge pair validates.
        let mut m2 = m.clone();
        let r = merge_functions(&mut m2, &mut PassState::default());
        verify_module(&m2, true).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for &(g, f) in &r.pairs {
            // Before merging, f and g compare equal when callees compare by one class.
            prop_assert!(validate_merge(&m, &classes_all_zero(&m), f, g).is_ok());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Local value numbering.
// ---------------------------------------------------------------------------------------------

fn lvn_fn(preamble: &str, body: &str) -> Module {
    parse(&format!(
        "function @f(i64, i64, i64) -> i64 system_v export {{\n{preamble}bb0:\n    %vr0 = copy.i64 arg0\n    %vr2 = copy.i64 arg1\n    %vr5 = copy.i64 arg2\n{body}}}\n"
    ))
}

fn lvn(m: &mut Module) -> Stats {
    run(m, "lvn")
}

fn body_of(m: &Module) -> String {
    let s = module_to_string(m);
    s[s.find("bb0:").unwrap()..].to_string()
}

fn count(m: &Module, op: Opcode) -> usize {
    let f = &m.functions[FuncId::from_u32(0)];
    f.layout
        .iter()
        .flat_map(|&b| f.block_insts(b).iter())
        .filter(|&&i| f.insts[i].opcode == op)
        .count()
}

#[test]
fn lvn_seed_stack_objects_walkthrough() {
    let mut m = parse(
        "function @f() -> i32 system_v export {\n    stack_obj.0 = size 8, align 8\n    stack_obj.1 = size 16, align 4\nbb0:\n    %vr1 = load.i32 [stack_obj.0]\n    store.i32 [stack_obj.1 + 4], %vr1\n    %vr2 = load.i32 [stack_obj.0]\n    %vr3 = load.i32 [stack_obj.1 + 4]\n    %vr4 = add.i32 %vr2, %vr3\n    ret %vr4\n}\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnLoadsRemoved), 1);
    assert_eq!(st.get(midend::Counter::LvnForwarded), 1);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 2);
    assert_eq!(
        body_of(&m),
        "bb0:\n    %vr1 = load.i32 [stack_obj.0]\n    store.i32 [stack_obj.1 + 4], %vr1\n    %vr4 = add.i32 %vr1, %vr1\n    ret %vr4\n}\n"
    );
}

#[test]
fn lvn_direct_api_counts() {
    let mut m = parse(
        "function @f(i32, i32) -> i32 system_v export {\nbb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = copy.i32 arg1\n    %vr2 = add.i32 %vr0, %vr1\n    %vr3 = add.i32 %vr1, %vr0\n    %vr4 = mul.i32 %vr2, %vr3\n    ret %vr4\n}\n",
    );
    let mut st = LvnStats::default();
    let f = FuncId::from_u32(0);
    assert!(LocalValueNumbering::default().run(&mut m.functions[f], &mut st));
    verify_module(&m, true).unwrap();
    assert_eq!(st.removed, 1);
    assert_eq!(
        body_of(&m),
        "bb0:\n    %vr0 = copy.i32 arg0\n    %vr1 = copy.i32 arg1\n    %vr2 = add.i32 %vr0, %vr1\n    %vr4 = mul.i32 %vr2, %vr2\n    ret %vr4\n}\n"
    );
}

#[test]
fn lvn_commutative_add() {
    let mut m = lvn_fn(
        "",
        "    %vr3 = add.i64 %vr0, %vr2\n    %vr4 = add.i64 %vr2, %vr0\n    %vr6 = sub.i64 %vr3, %vr0\n    %vr7 = sub.i64 %vr0, %vr4\n    %vr8 = add.i64 %vr6, %vr7\n    ret %vr8\n",
    );
    let st = lvn(&mut m);
    // add b,a ≡ add a,b; sub is not commutative (both subs stay).
    assert_eq!(st.get(midend::Counter::LvnRemoved), 1);
    assert_eq!(count(&m, Opcode::Add), 2);
    assert_eq!(count(&m, Opcode::Sub), 2);
}

#[test]
fn lvn_swapped_compare() {
    let mut m = lvn_fn(
        "",
        "    %vr3 = icmp.i64 sle %vr0, %vr2\n    %vr4 = icmp.i64 sge %vr2, %vr0\n    %vr6 = icmp.i64 sge %vr0, %vr2\n    %vr7 = xor.i8 %vr3, %vr4\n    %vr8 = xor.i8 %vr7, %vr6\n    %vr9 = uextend.i64 %vr8\n    ret %vr9\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 1, "{}", body_of(&m));
    assert_eq!(count(&m, Opcode::Icmp), 2);
}

#[test]
fn lvn_redundant_load_with_generic_store_between() {
    let mut m = lvn_fn(
        "",
        "    %vr1 = load.i64 [%vr0 + 8]\n    store.i64 [%vr2], %vr1\n    %vr3 = load.i64 [%vr0 + 8]\n    %vr4 = load.i64 [%vr0 + 8]\n    %vr6 = add.i64 %vr3, %vr4\n    ret %vr6\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnLoadsRemoved), 1);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 1);
    assert_eq!(count(&m, Opcode::Load), 2);
    assert!(
        body_of(&m).contains("add.i64 %vr3, %vr3"),
        "{}",
        body_of(&m)
    );
}

#[test]
fn lvn_keeps_identical_calls() {
    let mut m = parse(
        "declare function @ext0\n\nfunction @f(i64) -> i64 system_v export {\n    sig0 = (i64) -> i64 system_v\nbb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = call @ext0(%vr0), sig0\n    %vr2 = call @ext0(%vr0), sig0\n    %vr3 = add.i64 %vr1, %vr2\n    ret %vr3\n}\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0);
    assert_eq!(count(&m, Opcode::Call), 2);
}

#[test]
fn lvn_load_after_may_alias_generic_store() {
    // store [%vr2] may write [%vr0 + 8]: the second load stays (and is not forwarded).
    let mut m = lvn_fn(
        "",
        "    %vr1 = load.i64 [%vr0 + 8]\n    %vr3 = add.i64 %vr1, 1\n    store.i64 [%vr2], %vr3\n    %vr4 = load.i64 [%vr0 + 8]\n    ret %vr4\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0, "{}", body_of(&m));
    assert_eq!(count(&m, Opcode::Load), 2);
}

#[test]
fn lvn_generic_store_then_other_address_load_not_forwarded() {
    let mut m = lvn_fn(
        "",
        "    store.i64 [%vr0], %vr2\n    %vr3 = load.i64 [%vr5]\n    %vr4 = load.i32 [%vr0]\n    %vr6 = uextend.i64 %vr4\n    %vr7 = add.i64 %vr3, %vr6\n    ret %vr7\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnForwarded), 0, "{}", body_of(&m));
    assert_eq!(count(&m, Opcode::Load), 2);
}

#[test]
fn lvn_wide_store_then_narrow_stack_loads_not_forwarded() {
    let mut m = lvn_fn(
        "    stack_obj.0 = size 8, align 8\n",
        "    store.i64 [stack_obj.0], %vr0\n    %vr1 = load.i32 [stack_obj.0 + 4]\n    %vr3 = load.i32 [stack_obj.0]\n    %vr4 = load.i64 [stack_obj.0]\n    %vr6 = uextend.i64 %vr1\n    %vr7 = uextend.i64 %vr3\n    %vr8 = add.i64 %vr6, %vr7\n    %vr9 = add.i64 %vr8, %vr4\n    ret %vr9\n",
    );
    let st = lvn(&mut m);
    // Only the i64 reload is forwarded... unless the narrow loads split the segment; either
    // way the narrow loads stay.
    assert_eq!(
        count(&m, Opcode::Load),
        2 + (st.get(midend::Counter::LvnForwarded) == 0) as usize
    );
    let b = body_of(&m);
    assert!(b.contains("load.i32 [stack_obj.0 + 4]"), "{b}");
    assert!(b.contains("load.i32 [stack_obj.0]"), "{b}");
}

#[test]
fn lvn_overlapping_store_to_stack_object() {
    // store.i32 at +2 overlaps the i32 at +0: the reload of +0 is neither removed nor
    // forwarded from the first store.
    let mut m = lvn_fn(
        "    stack_obj.0 = size 8, align 8\n",
        "    %vr1 = ireduce.i32 %vr0\n    %vr3 = ireduce.i32 %vr2\n    store.i32 [stack_obj.0], %vr1\n    store.i32 [stack_obj.0 + 2], %vr3\n    %vr4 = load.i32 [stack_obj.0]\n    %vr6 = uextend.i64 %vr4\n    ret %vr6\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0, "{}", body_of(&m));
    assert_eq!(count(&m, Opcode::Load), 1);
}

#[test]
fn lvn_narrow_store_then_wide_load_not_forwarded() {
    let mut m = lvn_fn(
        "    stack_obj.0 = size 8, align 8\n",
        "    store.i64 [stack_obj.0], %vr0\n    istore8.i64 [stack_obj.0 + 1], %vr2\n    %vr3 = load.i64 [stack_obj.0]\n    ret %vr3\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0, "{}", body_of(&m));
}

#[test]
fn lvn_store_load_different_type_not_forwarded() {
    let mut m = lvn_fn(
        "    stack_obj.0 = size 8, align 8\n",
        "    %vr1 = fcvt_from_sint.f64 %vr0\n    store.i64 [stack_obj.0], %vr0\n    %vr3 = load.f64 [stack_obj.0]\n    %vr4 = fadd.f64 %vr3, %vr1\n    %vr6 = fcvt_to_sint_sat.i64 %vr4\n    ret %vr6\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnForwarded), 0, "{}", body_of(&m));
}

#[test]
fn lvn_loads_separated_by_call() {
    let mut m = parse(
        "declare function @ext0\n\nfunction @f(i64) -> i64 system_v export {\n    stack_obj.0 = size 8, align 8\n    sig0 = (i64) -> i64 system_v\nbb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = load.i64 [%vr0 + 8]\n    %vr9 = load.i64 [stack_obj.0]\n    %vr2 = call @ext0(%vr0), sig0\n    %vr3 = load.i64 [%vr0 + 8]\n    %vr8 = load.i64 [stack_obj.0]\n    %vr4 = add.i64 %vr1, %vr3\n    %vr5 = add.i64 %vr4, %vr2\n    %vr6 = add.i64 %vr5, %vr8\n    %vr7 = add.i64 %vr6, %vr9\n    ret %vr7\n}\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0, "{}", body_of(&m));
    assert_eq!(count(&m, Opcode::Load), 4);
}

#[test]
fn lvn_readonly_load_survives_store() {
    let mut m = lvn_fn(
        "",
        "    %vr1 = load.i64 notrap readonly [%vr0 + 8]\n    store.i64 [%vr2], %vr1\n    %vr3 = load.i64 notrap readonly [%vr0 + 8]\n    %vr4 = add.i64 %vr1, %vr3\n    ret %vr4\n",
    );
    let st = lvn(&mut m);
    assert_eq!(
        st.get(midend::Counter::LvnLoadsRemoved),
        1,
        "{}",
        body_of(&m)
    );
    assert_eq!(count(&m, Opcode::Load), 1);
}

#[test]
fn lvn_store_in_other_region_does_not_block() {
    let mut m = lvn_fn(
        "    region0 = 1 \"a\"\n    region1 = 2 \"b\"\n",
        "    %vr1 = load.i64 notrap aligned region1 [%vr0 + 8]\n    store.i64 notrap aligned region0 [%vr2], %vr1\n    %vr3 = load.i64 notrap aligned region1 [%vr0 + 8]\n    %vr4 = add.i64 %vr1, %vr3\n    ret %vr4\n",
    );
    let st = lvn(&mut m);
    assert_eq!(
        st.get(midend::Counter::LvnLoadsRemoved),
        1,
        "{}",
        body_of(&m)
    );
    assert_eq!(count(&m, Opcode::Load), 1);
}

#[test]
fn lvn_store_in_same_region_blocks() {
    let mut m = lvn_fn(
        "    region0 = 1 \"a\"\n",
        "    %vr1 = load.i64 notrap aligned region0 [%vr0 + 8]\n    store.i64 notrap aligned region0 [%vr2], %vr1\n    %vr3 = load.i64 notrap aligned region0 [%vr0 + 8]\n    %vr4 = add.i64 %vr1, %vr3\n    ret %vr4\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0, "{}", body_of(&m));
}

#[test]
fn lvn_unregioned_store_blocks_regioned_load() {
    let mut m = lvn_fn(
        "    region0 = 1 \"a\"\n",
        "    %vr1 = load.i64 notrap aligned region0 [%vr0 + 8]\n    store.i64 [%vr2], %vr1\n    %vr3 = load.i64 notrap aligned region0 [%vr0 + 8]\n    %vr4 = add.i64 %vr1, %vr3\n    ret %vr4\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0, "{}", body_of(&m));
}

#[test]
fn lvn_regioned_store_blocks_unregioned_load() {
    let mut m = lvn_fn(
        "    region0 = 1 \"a\"\n",
        "    %vr1 = load.i64 [%vr0 + 8]\n    store.i64 notrap aligned region0 [%vr2], %vr1\n    %vr3 = load.i64 [%vr0 + 8]\n    %vr4 = add.i64 %vr1, %vr3\n    ret %vr4\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0, "{}", body_of(&m));
}

#[test]
fn lvn_stack_store_blocks_generic_load() {
    // The address of stack_obj.0 escapes into %vr3; a store to the object may change what a
    // generic load through any pointer reads.
    let mut m = lvn_fn(
        "    stack_obj.0 = size 8, align 8\n",
        "    %vr3 = stack_addr.i64 stack_obj.0 + 0\n    %vr1 = load.i64 [%vr3]\n    store.i64 [stack_obj.0], %vr2\n    %vr4 = load.i64 [%vr3]\n    %vr6 = add.i64 %vr1, %vr4\n    ret %vr6\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0, "{}", body_of(&m));
}

#[test]
fn lvn_generic_store_blocks_stack_load() {
    let mut m = lvn_fn(
        "    stack_obj.0 = size 8, align 8\n",
        "    store.i64 [stack_obj.0], %vr0\n    %vr3 = stack_addr.i64 stack_obj.0 + 0\n    store.i64 [%vr3], %vr2\n    %vr4 = load.i64 [stack_obj.0]\n    ret %vr4\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0, "{}", body_of(&m));
}

/// `global_value` of a non-readonly `load` global reads memory: a store in between may change
/// it.
#[test]
fn lvn_global_value_load_across_store() {
    let mut m = parse(
        "function @f(i64 vmctx, i64) -> i64 system_v export {\n    gv0 = vmctx\n    gv1 = load.i64 notrap aligned gv0 + 8\nbb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = copy.i64 arg1\n    %vr2 = global_value.i64 gv1\n    store.i64 notrap aligned [%vr0 + 8], %vr1\n    %vr3 = global_value.i64 gv1\n    %vr4 = add.i64 %vr2, %vr3\n    ret %vr4\n}\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 0, "{}", body_of(&m));
}

#[test]
fn lvn_readonly_global_value_is_numbered() {
    let mut m = parse(
        "function @f(i64 vmctx, i64) -> i64 system_v export {\n    gv0 = vmctx\n    gv1 = load.i64 notrap aligned readonly gv0 + 8\nbb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = copy.i64 arg1\n    %vr2 = global_value.i64 gv1\n    store.i64 notrap aligned [%vr0 + 16], %vr1\n    %vr3 = global_value.i64 gv1\n    %vr4 = add.i64 %vr2, %vr3\n    ret %vr4\n}\n",
    );
    let st = lvn(&mut m);
    assert_eq!(st.get(midend::Counter::LvnRemoved), 1, "{}", body_of(&m));
}

/// `g`'s address is taken (`func_addr`) but the text does not say `address_significant` (the
/// `.lir` path never runs the lifter's `mark_address_taken`): merging must still keep a
/// distinct `g` (a thunk), so `func_addr @f != func_addr @g` stays true.
#[test]
fn taken_address_without_flag_is_thunked() {
    let src = format!(
        "{}\n{}\nfunction @cmp() -> i8 system_v export {{\n    sig0 = (i64) -> i64 system_v\nbb0:\n    %vr0 = func_addr.i64 @f, sig0\n    %vr1 = func_addr.i64 @g, sig0\n    %vr2 = icmp.i64 eq %vr0, %vr1\n    ret %vr2\n}}\n",
        simple("f", "export", 3),
        simple("g", "local", 3),
    );
    let mut m = parse(&src);
    let g = fid(&m, "g");
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    verify_module(&m, true).unwrap();
    assert_eq!(r.merged, 1);
    assert_eq!(ps.merges[0].kind, MergeKind::Thunked, "{:?}", ps.merges);
    assert!(!m.removed[g]);
    assert!(calls(&m, g, "f"));
}

/// A second merge run that folds a survivor of the first: aliases made by the first run
/// resolve (`Module::resolve_alias`) to the final survivor, a defined function.
#[test]
fn second_merge_run_resolves_old_aliases() {
    let body = "bb0:\n    %vr0 = copy.i64 7\n    %vr1 = add.i64 %vr0, 1\n    ret %vr1\n}\n";
    let mut m = parse(&format!(
        "function @a() -> i64 system_v local {{\n{body}\nfunction @b() -> i64 system_v local {{\n{body}"
    ));
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    assert_eq!(r.merged, 1);
    let c = parse(&format!("function @c() -> i64 system_v export {{\n{body}"));
    let cf = c.functions.values().next().unwrap().clone();
    m.add_function(cf).unwrap();
    let r = merge_functions(&mut m, &mut ps);
    assert_eq!(r.merged, 1, "{:?}", ps.merges);
    verify_module(&m, true).unwrap();
    let cs = m.lookup_symbol("c").unwrap();
    for name in ["a", "b"] {
        let s = m.lookup_symbol(name).unwrap();
        let t = m.resolve_alias(s);
        assert_eq!(t, cs, "{name} must resolve to c");
        assert!(m.defined(t).is_some());
    }
}

/// LVN on `src`, in a thread: the test fails if it does not finish within 30 s (a cycle of
/// renames would loop forever).
fn lvn_finishes(src: &str) -> Module {
    let (tx, rx) = std::sync::mpsc::channel();
    let src = src.to_string();
    std::thread::spawn(move || {
        let mut m = parse(&src);
        lvn(&mut m);
        let _ = tx.send(m);
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .expect("lvn did not finish (a cycle of renames?)")
}

#[test]
fn lvn_unreachable_uses_before_definitions_terminate() {
    // The verifier checks dominance only in reachable blocks, so an unreachable block may use
    // a register before its definition. Copies there once renamed in a cycle.
    for src in [
        "function @f(i64) -> i64 system_v export {\nbb0:\n    %vr0 = copy.i64 arg0\n    ret %vr0\n\
         bb1:\n    %vr3 = copy.i64 %vr2\n    ret %vr3\nbb2:\n    %vr2 = copy.i64 %vr4\n    \
         %vr4 = copy.i64 %vr3\n    ret %vr4\n}\n",
        "function @f(i32) -> i32 system_v export {\nbb0:\n    %vr0 = copy.i32 arg0\n    ret %vr0\n\
         bb1:\n    %vr1 = copy.i32 %vr2\n    %vr2 = copy.i32 %vr3\n    %vr3 = copy.i32 %vr1\n    \
         ret %vr3\n}\n",
    ] {
        let m = lvn_finishes(src);
        // The reachable block is untouched.
        assert!(
            body_of(&m).starts_with("bb0:\n    %vr0 = copy"),
            "{}",
            module_to_string(&m)
        );
    }
}

#[test]
fn lvn_does_not_forward_symbol_accesses_beyond_the_segment_span() {
    // Offsets of 2^41 and 2^42 lie outside the span memory objects are split over: they are
    // generic references, and the load must read memory, not the second store's value.
    let m = lvn_finishes(
        "declare data @g\n\nfunction @f(i32, i32) -> i32 system_v export {\nbb0:\n    \
         %vr0 = copy.i32 arg0\n    %vr1 = copy.i32 arg1\n    \
         store.i32 [@g + 2199023255552], %vr0\n    store.i32 [@g + 4398046511104], %vr1\n    \
         %vr2 = load.i32 [@g + 2199023255552]\n    ret %vr2\n}\n",
    );
    assert_eq!(count(&m, Opcode::Load), 1, "{}", module_to_string(&m));
    assert!(body_of(&m).contains("ret %vr2"), "{}", module_to_string(&m));
}

#[test]
fn lvn_takes_an_empty_access_to_a_stack_object() {
    let m = lvn_finishes(
        "function @f(i64) -> i64 system_v export {\n    stack_obj.0 = size 16, align 8\nbb0:\n    \
         %vr0 = copy.i64 arg0\n    %vr1 = load.void [stack_obj.0 + 4]\n    ret %vr0\n}\n",
    );
    assert_eq!(count(&m, Opcode::Load), 1, "{}", module_to_string(&m));
}

/// A function `@NAME(i64, i64) -> i64` whose body is `body` after two argument copies
/// (`%vr0`, `%vr1`), returning `%vrN` where `N` is `ret`.
fn small_fn(name: &str, body: &str, ret: u32) -> String {
    format!(
        "function @{name}(i64, i64) -> i64 system_v export {{\nbb0:\n    %vr0 = copy.i64 arg0\n    \
         %vr1 = copy.i64 arg1\n{body}    ret %vr{ret}\n}}\n"
    )
}

/// The compact forms of the walk's token stream at their edges: constants and callee or
/// symbol offsets in one word (25 bits) or more, displacements in the memory word (16 bits)
/// or after it, two registers in one word. Streams must stay equal exactly when the
/// functions are (two copies of every variant are in the module), so each value just inside
/// an edge is told apart from the one just outside it, and from the one that shares its low
/// bits.
#[test]
fn compact_stream_forms_at_their_edges() {
    let mut src = String::new();
    let mut k = 0;
    let mut add = |body: String, ret: u32| {
        for _ in 0..2 {
            src.push_str(&small_fn(&format!("f{k}"), &body, ret));
            k += 1;
        }
    };
    let imms: [i64; 16] = [
        0,
        1,
        -1,
        (1 << 24) - 1,
        -(1 << 24),
        1 << 24,
        -(1 << 24) - 1,
        1 + (1 << 25),
        (1 << 25) - 1,
        1 << 25,
        i32::MAX as i64,
        i32::MIN as i64,
        i32::MAX as i64 + 1,
        1 << 32,
        -(1 << 32),
        i64::MIN,
    ];
    for x in imms {
        add(format!("    %vr2 = add.i64 %vr0, {x}\n"), 2);
        add(format!("    %vr2 = copy.i64 {x}\n"), 2);
    }
    let disps: [i64; 10] = [
        0,
        8,
        32767,
        -32768,
        32768,
        -32769,
        8 + 65536,
        8 - 65536,
        i32::MAX as i64,
        i32::MIN as i64,
    ];
    for d in disps {
        for scale in [1, 8] {
            add(
                format!("    %vr2 = load.i64 notrap [%vr0 + %vr1*{scale} + {d}]\n"),
                2,
            );
        }
        add(format!("    %vr2 = load.i64 notrap [%vr0 + {d}]\n"), 2);
    }
    // Register operands, paired or not.
    add("    %vr2 = add.i64 %vr0, %vr1\n".into(), 2);
    add("    %vr2 = add.i64 %vr1, %vr0\n".into(), 2);
    add("    %vr2 = add.i64 %vr0, %vr0\n".into(), 2);
    add("    %vr2 = add.i64 %vr1, %vr1\n".into(), 2);
    add("    %vr2 = select.i64 %vr0, %vr1, %vr0\n".into(), 2);
    add("    %vr2 = select.i64 %vr0, %vr0, %vr1\n".into(), 2);
    add("    %vr2 = select.i64 %vr1, %vr0, %vr0\n".into(), 2);
    add(
        "    %vr2 = add.i64 %vr0, 1\n    %vr3 = add.i64 %vr2, %vr1\n".into(),
        3,
    );
    add(
        "    %vr2 = add.i64 %vr0, 1\n    %vr3 = add.i64 %vr1, %vr2\n".into(),
        3,
    );
    let m = parse(&src);
    check_tokens(&m).unwrap();
    // Only the copies merge.
    let mut m = m;
    let mut ps = PassState::default();
    let r = merge_functions(&mut m, &mut ps);
    assert_eq!(r.merged, k / 2);
}

/// Two registers share a word only when the second's serial number is under 4096: around
/// that edge (and past 65535, where a register takes two words) operand order and identity
/// still tell functions apart.
#[test]
fn register_pairs_past_their_edge() {
    let mut body = String::new();
    for r in 2..70_000 {
        body.push_str(&format!("    %vr{r} = add.i64 %vr{}, 1\n", r - 1));
    }
    let mut src = String::new();
    let mut k = 0;
    let uses = [
        (4094, 4095),
        (4095, 4094),
        (4095, 4096),
        (4096, 4095),
        (4096, 4097),
        (65_534, 65_535),
        (65_535, 65_536),
        (65_536, 65_535),
        (65_536, 69_999),
        (69_999, 65_536),
        (1, 69_999),
    ];
    for (a, b) in uses {
        for _ in 0..2 {
            let last = format!("{body}    %vr70000 = sub.i64 %vr{a}, %vr{b}\n");
            src.push_str(&small_fn(&format!("f{k}"), &last, 70_000));
            k += 1;
        }
    }
    let m = parse(&src);
    check_tokens(&m).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Memory: what passes keep.
// ---------------------------------------------------------------------------------------------

/// A local function of about 30 instructions around the constant `k`: a member of a
/// `merge-similar` group with any other `similar_body` of the same length.
fn similar_body(name: &str, k: i64) -> String {
    let mut s = format!("function @{name}(i64) -> i64 system_v local {{\nbb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = mul.i64 %vr0, {k}\n");
    for j in 0..14 {
        let (a, b) = (2 + 2 * j, 3 + 2 * j);
        s += &format!(
            "    %vr{a} = add.i64 %vr{}, %vr0\n    %vr{b} = xor.i64 %vr{a}, %vr1\n",
            a - 1
        );
    }
    s += "    ret %vr29\n}\n";
    s
}

/// The heap bytes of a function's tables (`Function::heap_blocks`).
fn heap_bytes(f: &Function) -> usize {
    let mut n = 0;
    f.heap_blocks(|_, b| n += b);
    n
}

/// A call that `merge-similar` rewrites (to call the shared body with an extra argument)
/// grows the caller's tables by what the rewrite needs, not by `Vec`'s doubling of every
/// table it touches: on a large module most callers are rewritten once, and doubling them all
/// added half the module again in memory (`Function::reserve_edit`). The merged members'
/// bodies, with `free_removed`, are freed by the end of the pass.
#[test]
fn similar_rewrites_grow_callers_by_what_they_need() {
    // A caller of 60 instructions whose tables are cut to size, as after lifting.
    let mut text = String::from(
        "function @main(i64) -> i64 system_v export {\n    sig0 = (i64) -> i64 system_v\nbb0:\n    %vr0 = copy.i64 arg0\n    %vr1 = call @b(%vr0), sig0\n",
    );
    for j in 2..60 {
        text += &format!("    %vr{j} = add.i64 %vr{}, %vr0\n", j - 1);
    }
    text += "    ret %vr59\n}\n";
    for (name, k) in [("a", 3), ("b", 5), ("c", 7)] {
        text += &similar_body(name, k);
    }
    let mut kept = parse(&text);
    let mut m = parse(&text);
    let mut ps = PassState::default();
    ps.free_removed = true;
    for (_, f) in m.functions.iter_mut() {
        f.shrink_to_fit();
    }
    let (main, b) = (fid(&m, "main"), fid(&m, "b"));
    let before = heap_bytes(&m.functions[main]);
    let stats = run_with(&mut m, &mut ps, "merge-similar");
    run(&mut kept, "merge-similar");
    assert_eq!(
        stats.get(midend::Counter::MergedSimilar),
        3,
        "{}",
        module_to_string(&m)
    );
    assert_eq!(stats.get(midend::Counter::SimilarCallersRewritten), 1);
    assert!(!calls(&m, main, "b"), "main calls the shared body now");
    let after = heap_bytes(&m.functions[main]);
    assert!(
        after <= before + before / 8,
        "the caller grew from {before} to {after} bytes for one rewritten call"
    );
    // The same module as without freeing; the folded members' bodies are gone.
    assert_eq!(kept.to_string(), m.to_string());
    assert!(m.removed[b] && kept.removed[b]);
    assert_eq!(m.functions[b].inst_count(), 0);
    assert!(kept.functions[b].inst_count() > 0);
}

/// `reserve_block_edit` before each of many insertions keeps every block's list in order (a
/// list that moves takes its instructions along), and the array of lists stays within a small
/// multiple of the instructions it lists.
#[test]
fn block_edits_keep_lists_in_order() {
    let mut m = parse(&similar_body("f", 3));
    let id = fid(&m, "f");
    let f = &mut m.functions[id];
    // A second block after the entry, so that the entry's list is not the last.
    let b1 = f.new_block();
    let r = f.new_reg(Type::I64);
    let i = f.make_inst(Opcode::Copy, Type::I64, &[r], &[Operand::Int(1)]);
    f.append_inst(b1, i);
    f.shrink_to_fit();
    let entry = f.entry().unwrap();
    let mut model: Vec<Inst> = f.block_insts(entry).to_vec();
    for k in 0..200usize {
        f.reserve_block_edit(entry, 1);
        let r = f.new_reg(Type::I64);
        let i = f.make_inst(Opcode::Copy, Type::I64, &[r], &[Operand::Int(k as i64)]);
        let pos = (k * 7) % (model.len() + 1);
        f.insert_inst(entry, pos, i);
        model.insert(pos, i);
        assert_eq!(f.block_insts(entry), &model[..]);
        assert_eq!(f.block_insts(b1), &[model_b1(f, b1)][..]);
    }
    let mut order = 0;
    f.heap_blocks(|name, b| {
        if name == "inst_order" {
            order = b;
        }
    });
    // The lists, their room to grow, and the copy the entry's list left behind when it
    // moved to the end (once: it then grows in place).
    assert!(
        order <= 4 * 3 * model.len(),
        "{order} bytes of lists for {} instructions",
        model.len()
    );
}

fn model_b1(f: &Function, b1: Block) -> Inst {
    f.block_insts(b1)[0]
}
