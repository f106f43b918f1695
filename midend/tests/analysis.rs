//! Analyses: control-flow graph, dominator tree, call graph.

use midend::analysis::{Cfg, DomTree};
use midend::lir::*;
use midend::verifier::*;
use proptest::prelude::*;

fn parse_one(src: &str) -> Module {
    let m = parse_module(src).unwrap_or_else(|e| panic!("{e} in:\n{src}"));
    verify_module(&m, true).unwrap_or_else(|e| panic!("{e}"));
    m
}

fn bb(n: u32) -> Block {
    Block::from_u32(n)
}

fn blocks(v: &[u32]) -> Vec<Block> {
    v.iter().map(|&n| bb(n)).collect()
}

/// Is there a path from `from` to `to` (of length zero or more)?
fn reaches(cfg: &Cfg, from: Block, to: Block) -> bool {
    let mut seen = vec![from];
    let mut stack = vec![from];
    while let Some(b) = stack.pop() {
        if b == to {
            return true;
        }
        for &s in &cfg.succs[b] {
            if !seen.contains(&s) {
                seen.push(s);
                stack.push(s);
            }
        }
    }
    false
}

/// Check that `cfg.rpo` is a reverse post-order of the reachable blocks: the entry first, every
/// block once, `rpo_index` its inverse, and every edge that goes backwards in it a retreating
/// edge (its target reaches its source: no edge outside a cycle goes backwards).
fn check_rpo(cfg: &Cfg, entry: Block) {
    assert_eq!(cfg.rpo.first(), Some(&entry));
    for (i, &b) in cfg.rpo.iter().enumerate() {
        assert_eq!(cfg.rpo_index[b], i as u32);
        assert!(cfg.is_reachable(b));
    }
    for &b in &cfg.rpo {
        for &s in &cfg.succs[b] {
            if cfg.rpo_index[b] >= cfg.rpo_index[s] {
                assert!(
                    reaches(cfg, s, b),
                    "edge {b} -> {s} goes backwards in {:?}",
                    cfg.rpo
                );
            }
        }
    }
}

const DIAMOND: &str = "function @d(i32) -> i32 system_v export {
bb0:
    %vr0 = copy.i32 arg0
    brif.i32 ne %vr0, bb1, bb2
bb1:
    %vr1 = add.i32 %vr0, 1
    jump bb3
bb2:
    %vr2 = sub.i32 %vr0, 1
    jump bb3
bb3:
    %vr3 = phi.i32 [%vr1, bb1], [%vr2, bb2]
    ret %vr3
}
";

#[test]
fn cfg_of_a_diamond() {
    let m = parse_one(DIAMOND);
    let f = &m.functions[FuncId::from_u32(0)];
    let cfg = Cfg::compute(f);
    assert_eq!(cfg.succs[bb(0)].to_vec(), blocks(&[1, 2]));
    assert_eq!(cfg.succs[bb(1)].to_vec(), blocks(&[3]));
    assert_eq!(cfg.succs[bb(2)].to_vec(), blocks(&[3]));
    assert!(cfg.succs[bb(3)].is_empty());
    assert!(cfg.preds[bb(0)].is_empty());
    assert_eq!(cfg.preds[bb(1)].to_vec(), blocks(&[0]));
    assert_eq!(cfg.preds[bb(2)].to_vec(), blocks(&[0]));
    assert_eq!(cfg.preds[bb(3)].to_vec(), blocks(&[1, 2]));
    // The entry first, the join last, the arms in between.
    assert_eq!(cfg.rpo.len(), 4);
    assert_eq!((cfg.rpo[0], cfg.rpo[3]), (bb(0), bb(3)));
    let mut arms = cfg.rpo[1..3].to_vec();
    arms.sort();
    assert_eq!(arms, blocks(&[1, 2]));
    check_rpo(&cfg, bb(0));
}

#[test]
fn domtree_of_a_diamond() {
    let m = parse_one(DIAMOND);
    let cfg = Cfg::compute(&m.functions[FuncId::from_u32(0)]);
    let dt = DomTree::compute(&cfg);
    for b in 0..4 {
        assert!(dt.dominates(bb(0), bb(b)), "entry dominates bb{b}");
        assert!(dt.dominates(bb(b), bb(b)), "bb{b} dominates itself");
    }
    for (a, b) in [(1, 3), (2, 3), (1, 2), (2, 1), (3, 1), (3, 0), (1, 0)] {
        assert!(!dt.dominates(bb(a), bb(b)), "bb{a} must not dominate bb{b}");
    }
    assert_eq!(dt.idom[bb(0)].expand(), None);
    for b in 1..4 {
        assert_eq!(dt.idom[bb(b)].expand(), Some(bb(0)), "idom of bb{b}");
    }
    let mut kids = dt.children[bb(0)].clone();
    kids.sort();
    assert_eq!(kids, blocks(&[1, 2, 3]));
}

const LOOP: &str = "function @l(i32) -> i32 system_v export {
bb0:
    %vr0 = copy.i32 arg0
    %vr1 = copy.i32 0
    jump bb1
bb1:
    %vr2 = phi.i32 [%vr1, bb0], [%vr4, bb2]
    %vr3 = icmp.i32 slt %vr2, %vr0
    brif.i8 ne %vr3, bb2, bb3
bb2:
    %vr4 = add.i32 %vr2, 1
    jump bb1
bb3:
    ret %vr2
bb4:
    jump bb3
}
";

#[test]
fn cfg_of_a_loop() {
    let m = parse_one(LOOP);
    let f = &m.functions[FuncId::from_u32(0)];
    let cfg = Cfg::compute(f);
    assert_eq!(cfg.succs[bb(0)].to_vec(), blocks(&[1]));
    assert_eq!(cfg.succs[bb(1)].to_vec(), blocks(&[2, 3]));
    assert_eq!(cfg.succs[bb(2)].to_vec(), blocks(&[1]));
    assert_eq!(cfg.preds[bb(1)].to_vec(), blocks(&[0, 2]));
    // bb4 is unreachable, but its edge still counts as a predecessor of bb3.
    assert_eq!(cfg.preds[bb(3)].to_vec(), blocks(&[1, 4]));
    assert!(!cfg.is_reachable(bb(4)));
    assert_eq!(cfg.rpo_index[bb(4)], u32::MAX);
    assert_eq!(cfg.rpo.len(), 4);
    assert_eq!(&cfg.rpo[..2], &blocks(&[0, 1])[..]);
    check_rpo(&cfg, bb(0));
    // The back edge bb2 -> bb1 goes backwards.
    assert!(cfg.rpo_index[bb(2)] > cfg.rpo_index[bb(1)]);
}

#[test]
fn domtree_of_a_loop() {
    let m = parse_one(LOOP);
    let cfg = Cfg::compute(&m.functions[FuncId::from_u32(0)]);
    let dt = DomTree::compute(&cfg);
    assert!(dt.dominates(bb(1), bb(2)));
    assert!(dt.dominates(bb(1), bb(3)));
    assert!(dt.dominates(bb(0), bb(3)));
    assert!(
        !dt.dominates(bb(2), bb(1)),
        "the latch does not dominate the header"
    );
    assert!(!dt.dominates(bb(2), bb(3)));
    assert!(!dt.dominates(bb(3), bb(2)));
    assert_eq!(dt.idom[bb(1)].expand(), Some(bb(0)));
    assert_eq!(dt.idom[bb(2)].expand(), Some(bb(1)));
    assert_eq!(dt.idom[bb(3)].expand(), Some(bb(1)));
    assert_eq!(dt.idom[bb(4)].expand(), None, "unreachable");
}

#[test]
fn duplicate_edges_count_once() {
    let src = "function @f(i32) -> i32 system_v export {
bb0:
    %vr0 = copy.i32 arg0
    brif.i32 ne %vr0, bb1, bb1
bb1:
    br_table.i32 %vr0, bb2, [bb2, bb3, bb2]
bb2:
    ret %vr0
bb3:
    ret %vr0
}
";
    let m = parse_one(src);
    let cfg = Cfg::compute(&m.functions[FuncId::from_u32(0)]);
    assert_eq!(cfg.succs[bb(0)].to_vec(), blocks(&[1]));
    assert_eq!(cfg.preds[bb(1)].to_vec(), blocks(&[0]));
    assert_eq!(cfg.succs[bb(1)].to_vec(), blocks(&[2, 3]));
    assert_eq!(cfg.preds[bb(2)].to_vec(), blocks(&[1]));
}

#[test]
fn exception_edges_are_cfg_edges() {
    let src = "function @f(i32) -> i32 system_v export {
    sig0 = (i32) -> i32 system_v
bb0:
    %vr0 = copy.i32 arg0
    %vr1 = try_call @g(%vr0), sig0, bb1, [tag1: bb2, context %vr0, default: bb3]
bb1:
    ret %vr1
bb2:
    ret %vr0
bb3:
    %vr2 = exn_handler_addr.i64 bb1, 0
    ret %vr0
}
";
    let m = parse_one(src);
    let cfg = Cfg::compute(&m.functions[FuncId::from_u32(0)]);
    assert_eq!(cfg.succs[bb(0)].to_vec(), blocks(&[1, 2, 3]));
    // `exn_handler_addr` names a block but is no edge.
    assert!(cfg.succs[bb(3)].is_empty());
    assert_eq!(cfg.preds[bb(1)].to_vec(), blocks(&[0]));
}

// ---------------------------------------------------------------------------------------------
// Dominators on random CFGs, against the textbook data-flow definition.

/// A function whose block `i` branches to `targets[i]` (0, 1, 2 or more targets).
fn cfg_function(targets: &[Vec<usize>]) -> Function {
    let mut m = Module::new();
    let mut sig = Signature::new(CallConv::SystemV);
    sig.params.push(AbiParam::new(Type::I32));
    let mut b = Builder::new(&mut m, "f", sig, Linkage::Local);
    let bs: Vec<Block> = targets.iter().map(|_| b.create_block()).collect();
    for (i, t) in targets.iter().enumerate() {
        b.switch_to_block(bs[i]);
        let x = b.arg(0);
        match t.len() {
            0 => b.ret(&[]),
            1 => b.jump(bs[t[0]]),
            2 => b.brif(Cond::Ne, x, None, bs[t[0]], bs[t[1]]),
            _ => {
                let ops: Vec<Operand> = std::iter::once(x)
                    .chain(t.iter().map(|&s| Operand::Block(bs[s])))
                    .collect();
                b.ins(Opcode::BrTable, Type::I32, &[], &ops);
            }
        }
    }
    b.func
}

fn naive_dominators(n: usize, succs: &[Vec<usize>]) -> (Vec<bool>, Vec<u64>) {
    let mut reach = vec![false; n];
    let mut stack = vec![0];
    reach[0] = true;
    while let Some(b) = stack.pop() {
        for &s in &succs[b] {
            if !reach[s] {
                reach[s] = true;
                stack.push(s);
            }
        }
    }
    let all = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    let mut dom = vec![all; n];
    dom[0] = 1;
    let mut changed = true;
    while changed {
        changed = false;
        for b in 1..n {
            if !reach[b] {
                continue;
            }
            let mut d = all;
            for p in 0..n {
                if reach[p] && succs[p].contains(&b) {
                    d &= dom[p];
                }
            }
            d |= 1 << b;
            if d != dom[b] {
                dom[b] = d;
                changed = true;
            }
        }
    }
    (reach, dom)
}

fn arb_cfg() -> impl Strategy<Value = Vec<Vec<usize>>> {
    (1usize..12).prop_flat_map(|n| prop::collection::vec(prop::collection::vec(0..n, 0..4), n))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn cfg_and_domtree_match_definitions(targets in arb_cfg()) {
        let n = targets.len();
        let f = cfg_function(&targets);
        let cfg = Cfg::compute(&f);
        let dt = DomTree::compute(&cfg);
        let (reach, dom) = naive_dominators(n, &targets);
        // Successors: the distinct targets in order; predecessors their inverse.
        for (i, t) in targets.iter().enumerate() {
            let mut distinct: Vec<Block> = Vec::new();
            for &s in t {
                if !distinct.contains(&bb(s as u32)) {
                    distinct.push(bb(s as u32));
                }
            }
            prop_assert_eq!(cfg.succs[bb(i as u32)].to_vec(), distinct);
            for j in 0..n {
                let is_pred = cfg.preds[bb(j as u32)].contains(&bb(i as u32));
                prop_assert_eq!(is_pred, t.contains(&j));
            }
        }
        for (b, &r) in reach.iter().enumerate() {
            prop_assert_eq!(cfg.is_reachable(bb(b as u32)), r);
        }
        prop_assert_eq!(cfg.rpo.len(), reach.iter().filter(|&&r| r).count());
        check_rpo(&cfg, bb(0));
        // The order alone (what lowering uses) is the same order.
        prop_assert_eq!(Cfg::reverse_post_order(&f), cfg.rpo.clone());
        for a in (0..n).filter(|&a| reach[a]) {
            for b in (0..n).filter(|&b| reach[b]) {
                prop_assert_eq!(dt.dominates(bb(a as u32), bb(b as u32)), dom[b] & (1 << a) != 0, "bb{} dom bb{}", a, b);
            }
            // The immediate dominator is the closest strict dominator.
            if a != 0 {
                let strict = dom[a] & !(1 << a);
                let idom = (0..n).find(|&d| strict & (1 << d) != 0 && dom[d] == strict).unwrap();
                prop_assert_eq!(dt.idom[bb(a as u32)].expand(), Some(bb(idom as u32)));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Call graph.

const CALLS: &str = "declare function @ext
declare data @g

function @main(i64) -> i64 system_v export {
    sig0 = (i64) -> i64 system_v
    gv0 = symbol @g + 8
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = call @a(%vr0), sig0
    %vr2 = call @b(%vr1), sig0
    %vr3 = call @a(%vr2), sig0
    %vr4 = func_addr.i64 @ext, sig0
    %vr5 = call %vr4(%vr3), sig0
    %vr6 = symbol_value.i64 @g
    ret %vr5
}

function @a(i64) -> i64 system_v local {
    sig0 = (i64) -> i64 system_v
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = call @a(%vr0), sig0
    tail_call @b(%vr1), sig0
}

function @b(i64) -> i64 system_v local {
    sig0 = (i64) -> i64 system_v
    gv0 = vmctx
    gv1 = symbol colocated @main
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = try_call @ext(%vr0), sig0, bb1, [default: bb2]
bb1:
    ret %vr1
bb2:
    ret %vr0
}

function @dead(i64) -> i64 system_v local {
    sig0 = (i64) -> i64 system_v
bb0:
    %vr0 = copy.i64 arg0
    %vr1 = call @a(%vr0), sig0
    %vr2 = func_addr.i64 @b, sig0
    ret %vr1
}
";

#[test]
fn call_graph_callers_callees_address_takers() {
    let mut m = parse_one(CALLS);
    let sym = |m: &Module, n: &str| m.lookup_symbol(n).unwrap();
    let fid = |m: &Module, n: &str| m.defined(m.lookup_symbol(n).unwrap()).unwrap();
    let (main, a, b, ext, g, dead) = (
        sym(&m, "main"),
        sym(&m, "a"),
        sym(&m, "b"),
        sym(&m, "ext"),
        sym(&m, "g"),
        sym(&m, "dead"),
    );
    let (fmain, fa, fb, fdead) = (fid(&m, "main"), fid(&m, "a"), fid(&m, "b"), fid(&m, "dead"));

    let cg = m.call_graph();
    // Direct callees, deduplicated, in first-use order (the indirect call is not an edge).
    assert_eq!(cg.callees[fmain], vec![a, b]);
    assert_eq!(cg.callees[fa], vec![a, b], "recursion and tail calls count");
    assert_eq!(cg.callees[fb], vec![ext], "try_call counts");
    assert_eq!(cg.callees[fdead], vec![a]);
    assert_eq!(cg.callers[a], vec![fmain, fa, fdead]);
    assert_eq!(cg.callers[b], vec![fmain, fa]);
    assert_eq!(cg.callers[ext], vec![fb]);
    assert!(cg.callers[main].is_empty());
    assert!(cg.callers[dead].is_empty());
    // Address takers: func_addr, symbol_value and symbol global values.
    assert_eq!(cg.address_takers[ext], vec![fmain]);
    assert_eq!(
        cg.address_takers[g],
        vec![fmain],
        "symbol_value and a global value, counted once"
    );
    assert_eq!(cg.address_takers[main], vec![fb], "a symbol global value");
    assert_eq!(cg.address_takers[b], vec![fdead]);
    assert!(cg.address_takers[a].is_empty());

    // Removed functions drop out.
    m.removed[fdead] = true;
    let cg = m.call_graph();
    assert_eq!(cg.callers[a], vec![fmain, fa]);
    assert!(cg.address_takers[b].is_empty());
    assert!(cg.callees[fdead].is_empty());
}
