//! Partition refinement: the classes of functions equal up to the classes of their callees.

use super::scope::ScopeMap;
use super::walk::Walked;
use super::MergeReport;
use crate::hash::finish;
use crate::lir::*;
use core::hash::Hasher;
use rustc_hash::FxHasher;

/// Partition refinement: classes of functions equal up to the classes of their callees (the
/// coarsest stable partition, so recursive groups that call each other alike stay together).
///
/// 1. Shapes (found by `walk_module`): functions with equal (weak, local) hashes are split by
///    comparing token streams (equal streams = equal under the comparator up to callees).
/// 2. Rounds: a class splits where its members' callee classes differ (compared exactly, in
///    the comparator's order, no body walk), until no class splits (as lld's ICF iterates
///    over relocations). Classes only split, so equal-at-the-end implies never split.
///
/// Returns the classes and the strong hashes (local hash plus callee classes).
pub(super) fn refine_classes(
    m: &Module,
    w: &Walked,
    candidates: &[FuncId],
    report: &mut MergeReport,
) -> (ScopeMap<u32>, ScopeMap<u64>) {
    let base = w.weak.base();
    let mut class: ScopeMap<u32> = ScopeMap::new(base, m.functions.len(), 0);
    // Functions in scope that are not candidates (unique weak hash, no body) are callees too:
    // each has a class of its own, never shared with a candidate class. (Functions out of
    // scope are compared by identity: `Callee::Other`.)
    for k in base..m.functions.len() as u32 {
        class[FuncId::from_u32(k)] = u32::MAX - k;
    }
    // The first stage, shapes, was done by the walk: the candidates' shapes are the first
    // classes.
    for &f in candidates {
        class[f] = w.shape[f];
    }
    let mut count = w.shape_size.len() as u32;
    let mut rest: Vec<FuncId> = Vec::new();
    let mut remaining: Vec<FuncId> = Vec::new();

    // Only functions with direct calls can split further (a shape fixes the call count).
    let mut order: Vec<(u32, u64, FuncId)> = Vec::new();
    let with_calls: Vec<FuncId> = candidates
        .iter()
        .copied()
        .filter(|&f| w.calls[f].0 != w.calls[f].1)
        .collect();
    loop {
        report.rounds += 1;
        let snapshot = class.clone();
        order.clear();
        order.extend(
            with_calls
                .iter()
                .map(|&f| (snapshot[f], w.callee_hash(f, &snapshot), f)),
        );
        order.sort_unstable();
        let same_callees = |a: FuncId, b: FuncId| {
            w.targets_of(a)
                .iter()
                .zip(w.targets_of(b))
                .all(|(x, y)| x.key(&snapshot) == y.key(&snapshot))
        };
        let mut next = count;
        let mut kept: Option<u32> = None;
        let mut i = 0;
        while i < order.len() {
            let key = (order[i].0, order[i].1);
            let mut j = i + 1;
            while j < order.len() && (order[j].0, order[j].1) == key {
                j += 1;
            }
            rest.clear();
            rest.extend(order[i..j].iter().map(|x| x.2));
            // Stable numbering: the first subgroup of an old class keeps its number, split-off
            // subgroups get new ones, so an unchanged partition keeps unchanged classes.
            let mut old = if kept == Some(key.0) {
                None
            } else {
                Some(key.0)
            };
            kept = Some(key.0);
            while let Some((&leader, others)) = rest.split_first() {
                let id = match old.take() {
                    Some(o) => o,
                    None => {
                        next += 1;
                        next - 1
                    }
                };
                class[leader] = id;
                remaining.clear();
                for &x in others {
                    if same_callees(leader, x) {
                        class[x] = id;
                    } else {
                        remaining.push(x);
                    }
                }
                core::mem::swap(&mut rest, &mut remaining);
            }
            i = j;
        }
        if next == count {
            break;
        }
        count = next;
    }
    let mut strong: ScopeMap<u64> = ScopeMap::new(base, m.functions.len(), 0);
    for &f in candidates {
        let mut h = FxHasher::default();
        h.write_u64(w.local[f]);
        h.write_u64(w.callee_hash(f, &class));
        strong[f] = finish(h.finish());
    }
    (class, strong)
}
