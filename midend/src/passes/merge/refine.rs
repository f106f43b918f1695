//! Partition refinement: the classes of functions equal up to the classes of their callees.

use super::scope::ScopeMap;
use super::walk::{Callee, Walked};
use super::MergeReport;
use crate::hash::finish;
use crate::lir::*;
use core::hash::Hasher;
use rustc_hash::FxHasher;

/// Partition refinement: classes of functions equal up to the classes of their callees (the
/// coarsest stable partition, so recursive groups that call each other alike stay together).
///
/// This is the minimisation of a deterministic automaton: functions are states, the position
/// of a call among a function's calls is a letter, and the callee at that position is the
/// transition. Two functions are equal when their shapes are and, position by position, their
/// callees are.
///
/// 1. Shapes (found by `walk_module`): functions with equal (weak, local) hashes are split by
///    comparing token streams (equal streams = equal under the comparator up to callees).
/// 2. One round over every function with calls splits a class where its members' callee keys
///    differ (compared exactly, in the comparator's order): this also tells apart callees
///    that never change class (functions out of scope, and functions in scope that are not
///    candidates).
/// 3. Hopcroft's algorithm: every class is a splitter once; a class split by a splitter makes
///    the smaller part a splitter again (both, when the class was still waiting). Processing
///    a splitter visits only the calls into it and moves only the callers found, so the whole
///    costs O(e log n) for e calls among n candidates, whatever the shape of the call graph
///    (a chain of n functions, which takes n rounds of step 2, included).
///
/// The result is the greatest fixed point of step 2 (Hopcroft's algorithm computes the
/// coarsest stable refinement of the partition it starts from), so self- and mutually
/// recursive functions stay together. Class numbers depend on the order of splitting; what
/// merges depends only on which functions share a class.
///
/// `report.rounds` counts step 2 and the splitters processed.
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
    let mut next = w.shape_size.len() as u32;
    // Only functions with direct calls can split further (a shape fixes the call count).
    let with_calls: Vec<FuncId> = candidates
        .iter()
        .copied()
        .filter(|&f| w.calls[f].0 != w.calls[f].1)
        .collect();
    report.rounds += 1;
    split_by_callee_keys(w, &with_calls, &mut class, &mut next);
    Hopcroft::new(w, candidates, &class, base, m.functions.len())
        .run(w, &mut class, &mut next, report);
    let mut strong: ScopeMap<u64> = ScopeMap::new(base, m.functions.len(), 0);
    for &f in candidates {
        let mut h = FxHasher::default();
        h.write_u64(w.local[f]);
        h.write_u64(w.callee_hash(f, &class));
        strong[f] = finish(h.finish());
    }
    (class, strong)
}

/// One round of splitting: functions of a class whose callee keys differ go to new classes
/// (the first subgroup of a class keeps its number).
fn split_by_callee_keys(w: &Walked, funcs: &[FuncId], class: &mut ScopeMap<u32>, next: &mut u32) {
    let snapshot = class.clone();
    let mut order: Vec<(u32, u64, FuncId)> = funcs
        .iter()
        .map(|&f| (snapshot[f], w.callee_hash(f, &snapshot), f))
        .collect();
    order.sort_unstable();
    let same_callees = |a: FuncId, b: FuncId| {
        w.targets_of(a)
            .iter()
            .zip(w.targets_of(b))
            .all(|(x, y)| x.key(&snapshot) == y.key(&snapshot))
    };
    let mut rest: Vec<FuncId> = Vec::new();
    let mut remaining: Vec<FuncId> = Vec::new();
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
        let mut old = (kept != Some(key.0)).then_some(key.0);
        kept = Some(key.0);
        while let Some((&leader, others)) = rest.split_first() {
            let id = old.take().unwrap_or_else(|| {
                *next += 1;
                *next - 1
            });
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
}

/// Hopcroft's refinement over the candidates: a refinable partition (the candidates in one
/// array, each class a range of it) and, per candidate, the calls into it (caller, position).
struct Hopcroft {
    /// The candidates, class by class.
    elems: Vec<FuncId>,
    /// Each candidate's place in `elems`, and its class (dense: an index of `start`).
    at: ScopeMap<u32>,
    block: ScopeMap<u32>,
    /// Each class's range of `elems`, and how many of its first elements are marked.
    start: Vec<u32>,
    end: Vec<u32>,
    marked: Vec<u32>,
    /// The class number (as in `class`) of each dense class.
    number: Vec<u32>,
    /// Calls into each candidate: `calls[first[f]..first[f + 1]]`, as (position, caller).
    first: ScopeMap<u32>,
    calls: Vec<(u32, FuncId)>,
}

impl Hopcroft {
    fn new(w: &Walked, candidates: &[FuncId], class: &ScopeMap<u32>, base: u32, n: usize) -> Self {
        let mut elems = candidates.to_vec();
        elems.sort_unstable_by_key(|&f| (class[f], f));
        let mut at = ScopeMap::new(base, n, 0);
        let mut block = ScopeMap::new(base, n, 0);
        let (mut start, mut end, mut number) = (Vec::new(), Vec::new(), Vec::new());
        for (k, &f) in elems.iter().enumerate() {
            if k == 0 || class[elems[k - 1]] != class[f] {
                start.push(k as u32);
                end.push(k as u32);
                number.push(class[f]);
            }
            at[f] = k as u32;
            block[f] = start.len() as u32 - 1;
            *end.last_mut().expect("pushed") += 1;
        }
        // The calls into each candidate, by counting.
        let is_candidate = |g: FuncId| g.as_u32() >= base && elems.get(at[g] as usize) == Some(&g);
        let mut count: ScopeMap<u32> = ScopeMap::new(base, n + 1, 0);
        for &f in candidates {
            for t in w.targets_of(f) {
                if let Callee::Func(g) = *t {
                    if is_candidate(g) {
                        count[g] += 1;
                    }
                }
            }
        }
        let mut first: ScopeMap<u32> = ScopeMap::new(base, n + 1, 0);
        let mut sum = 0;
        for k in base..=n as u32 {
            let g = FuncId::from_u32(k);
            first[g] = sum;
            if (k as usize) < n {
                sum += count[g];
            }
        }
        let mut calls = vec![(0, FuncId::from_u32(0)); sum as usize];
        let mut fill = first.clone();
        for &f in candidates {
            for (i, t) in w.targets_of(f).iter().enumerate() {
                if let Callee::Func(g) = *t {
                    if is_candidate(g) {
                        calls[fill[g] as usize] = (i as u32, f);
                        fill[g] += 1;
                    }
                }
            }
        }
        let marked = vec![0; start.len()];
        Hopcroft {
            elems,
            at,
            block,
            start,
            end,
            marked,
            number,
            first,
            calls,
        }
    }

    /// Refine until stable, writing the classes to `class` (new classes numbered from
    /// `next`).
    fn run(
        mut self,
        w: &Walked,
        class: &mut ScopeMap<u32>,
        next: &mut u32,
        report: &mut MergeReport,
    ) {
        let _ = w;
        let mut waiting: Vec<u32> = (0..self.start.len() as u32).collect();
        let mut is_waiting = vec![true; self.start.len()];
        // The calls into the splitter, by position; the classes they marked.
        let mut into: Vec<(u32, FuncId)> = Vec::new();
        let mut touched: Vec<u32> = Vec::new();
        while let Some(s) = waiting.pop() {
            is_waiting[s as usize] = false;
            report.rounds += 1;
            into.clear();
            for k in self.start[s as usize]..self.end[s as usize] {
                let g = self.elems[k as usize];
                let (a, b) = (self.first[g], self.first[FuncId::from_u32(g.as_u32() + 1)]);
                into.extend_from_slice(&self.calls[a as usize..b as usize]);
            }
            into.sort_unstable_by_key(|&(i, f)| (i, f));
            let mut i = 0;
            while i < into.len() {
                let pos = into[i].0;
                let mut j = i;
                while j < into.len() && into[j].0 == pos {
                    self.mark(into[j].1, &mut touched);
                    j += 1;
                }
                for c in touched.drain(..) {
                    if let Some(new) = self.split(c, class, next) {
                        is_waiting.push(false);
                        let (small, big) = (new, c);
                        if is_waiting[c as usize] {
                            waiting.push(new);
                            is_waiting[new as usize] = true;
                        } else {
                            let smaller = if self.size(small) <= self.size(big) {
                                small
                            } else {
                                big
                            };
                            waiting.push(smaller);
                            is_waiting[smaller as usize] = true;
                        }
                    }
                }
                i = j;
            }
        }
    }

    fn size(&self, c: u32) -> u32 {
        self.end[c as usize] - self.start[c as usize]
    }

    /// Mark `f`: move it into the marked front of its class.
    fn mark(&mut self, f: FuncId, touched: &mut Vec<u32>) {
        let c = self.block[f] as usize;
        let front = self.start[c] + self.marked[c];
        let k = self.at[f];
        if k < front {
            return; // marked already
        }
        if self.marked[c] == 0 {
            touched.push(c as u32);
        }
        let other = self.elems[front as usize];
        self.elems.swap(front as usize, k as usize);
        self.at[other] = k;
        self.at[f] = front;
        self.marked[c] += 1;
    }

    /// Split the marked front of class `c` off as a new class, unless it is the whole class;
    /// the new class's index, if any.
    fn split(&mut self, c: u32, class: &mut ScopeMap<u32>, next: &mut u32) -> Option<u32> {
        let c = c as usize;
        let marked = core::mem::take(&mut self.marked[c]);
        if marked == self.end[c] - self.start[c] {
            return None;
        }
        let new = self.start.len() as u32;
        let (a, b) = (self.start[c], self.start[c] + marked);
        self.start.push(a);
        self.end.push(b);
        self.marked.push(0);
        self.number.push(*next);
        self.start[c] = b;
        for k in a..b {
            let f = self.elems[k as usize];
            self.block[f] = new;
            class[f] = *next;
        }
        *next += 1;
        Some(new)
    }
}
