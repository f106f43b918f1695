//! Exact merging: FnTree and Deferred (seeds 000 and 001), the lookup of frozen functions, and
//! folding each merged function into its survivor.

#[cfg(debug_assertions)]
use super::comparator::validate_merge;
use super::comparator::FunctionComparator;
use super::index::{fingerprint, fingerprint_of};
use super::refine::refine_classes;
use super::scope::{ScopeMap, SymIndex, SymTable};
use super::walk::{
    function_hashes, priority, walk_module, Callee, HashScratch, WalkOut, PRIO_FROZEN,
    PRIO_PREEMPTIBLE,
};
use super::{MergeOptions, MergeReport};
use crate::hash::HashMap;
use crate::lir::*;
use crate::state::*;
use core::cmp::Ordering;
use cranelift_entity::packed_option::PackedOption;
use smallvec::SmallVec;
use std::time::Instant;

/// Buffers of the pass kept from one run to the next: a lazy JIT runs it once per function,
/// and a batch of one function needs nothing else (see `merge_one`).
#[derive(Default)]
pub struct MergeScratch {
    ids: Vec<FuncId>,
    hash: HashScratch,
    walk: WalkOut,
    fp: Vec<u32>,
}

/// Run MergeFunctions on the open functions of a module (all of them, unless some were frozen
/// by an incremental compile: then frozen functions are found by fingerprint and survive).
///
/// Bounded work, in the input's shape (n open functions, e direct calls among them): one walk
/// of every body; refinement in O(e log n) (`refine_classes`); then Deferred, which takes each
/// function once and re-queues the callers of a function when it merges (each function
/// merges at most once, so at most e re-queues from merges, plus the callers of what the
/// merged function had absorbed, moved with it); each lookup is one hash probe and, within
/// a bucket of one strong hash, comparisons only between different classes. Frozen functions
/// of earlier batches are found by fingerprint, one probe per open function.
pub fn merge_functions_with(m: &mut Module, ps: &mut PassState, opts: MergeOptions) -> MergeReport {
    merge_functions_reusing(m, ps, opts, &mut MergeScratch::default())
}

/// `merge_functions_with`, with buffers kept across runs in `scratch`.
pub fn merge_functions_reusing(
    m: &mut Module,
    ps: &mut PassState,
    opts: MergeOptions,
    scratch: &mut MergeScratch,
) -> MergeReport {
    scratch.ids.clear();
    scratch.ids.extend(
        ps.open_functions(m)
            .filter(|(_, f)| f.entry().is_some())
            .map(|(id, _)| id),
    );
    if let [g] = scratch.ids[..] {
        if !ps.frozen.is_empty() || ps.incremental {
            return merge_one(m, ps, g, scratch);
        }
    }
    let mut report = MergeReport::default();
    let base = ps.first_open;
    let ids: Vec<FuncId> = scratch.ids.clone();
    // One walk over every body: hashes, direct calls, taken addresses.
    let mut clock = Instant::now();
    let w = walk_module(m, ps, base, &ids, opts.threads, &mut report);
    report.lap("merge.walk", &mut clock);
    // The hash filter: only functions sharing a shape with another (so a weak hash, a local
    // hash and a token stream) are candidates; no other function can ever merge.
    let candidates: Vec<FuncId> = ids
        .iter()
        .copied()
        .filter(|&f| w.shape_size[w.shape[f] as usize] > 1)
        .collect();
    let (class, strong) = refine_classes(m, &w, &candidates, &mut report);
    report.lap("merge.refine", &mut clock);

    // The symbol of each function, and the candidates calling each symbol (to re-queue them).
    let n = m.functions.len();
    let mut sym_of: ScopeMap<Option<Symbol>> = ScopeMap::new(base, n, None);
    for &f in &ids {
        sym_of[f] = m.symbol_of(f);
    }
    // Each (callee, caller) pair once: a caller's callees are deduplicated among themselves
    // (a short list); candidates come in id order, so `SymIndex`'s grouping, which keeps
    // order, lists each symbol's callers in id order with no sort of the whole list.
    let mut callers: Vec<(Symbol, FuncId)> = Vec::new();
    let mut callees: SmallVec<[Symbol; 16]> = SmallVec::new();
    for &c in &candidates {
        let (a, b) = w.calls[c];
        callees.clear();
        callees.extend(w.sites[a as usize..b as usize].iter().map(|&(s, _)| s));
        callees.sort_unstable();
        callees.dedup();
        callers.extend(callees.iter().map(|&s| (s, c)));
    }
    // The symbols this run touches: its functions' and their callees'.
    let touched = ids.len() + callers.len();
    let symbols = m.symbols.len();
    // The callers of each symbol (looked up once per merge), by `SymIndex`'s rule.
    let callers = SymIndex::new(&callers, touched, symbols);
    let callers_of = |s: Symbol| callers.get(s).iter().copied();

    let mut in_tree: ScopeMap<bool> = ScopeMap::new(base, n, false);
    let mut merged_into: ScopeMap<Option<FuncId>> = ScopeMap::new(base, n, None);
    if !candidates.is_empty() {
        // Deferred: strong functions first, then preemptible ones.
        let mut deferred = by_priority(&candidates, |f| w.prio[f]);
        deferred.reverse(); // pop from the end
        let mut state = Some(FunctionComparator::new(m, &class).into_state());
        // FnTree: ordered by (strong hash, FunctionComparator); each entry is the short list of
        // unique functions sharing a strong hash, kept in comparator order. Refinement proved
        // members of one class equal under the comparator, so a lookup meeting its own class
        // needs no body walk; any other meeting is compared in full. Nothing walks the tree in
        // order, so its first level, the strong hash, is a hash map: one probe per lookup
        // instead of a descent through a B-tree, a cache miss per level.
        let mut fn_tree: HashMap<u64, SmallVec<[FuncId; 1]>> = HashMap::default();
        fn_tree.reserve(candidates.len() / 2);
        let mut requeue: Vec<FuncId> = Vec::new();
        // Symbols folded into each survivor symbol (their callers now call the survivor), as
        // a list per survivor: first and last member, and each member's successor. Indexed by
        // symbol when the run touches enough symbols (no hashing, no regrowth as merges fill
        // them), else hash maps.
        let none: PackedOption<Symbol> = None.into();
        let mut absorbed: SymTable<(PackedOption<Symbol>, PackedOption<Symbol>)> =
            SymTable::new((none, none), touched, symbols);
        let mut absorbed_next: SymTable<PackedOption<Symbol>> =
            SymTable::new(none, touched, symbols);
        while let Some(g) = deferred.pop() {
            if m.removed[g] || merged_into[g].is_some() {
                continue;
            }
            let found = {
                // The comparator is made only when a lookup meets another class (a bucket
                // holding its own class alone, the common case, needs none).
                let mut cmpr: Option<FunctionComparator> = None;
                let bucket = fn_tree.entry(strong[g]).or_default();
                let pos = bucket.binary_search_by(|&x| {
                    if class[x] == class[g] {
                        return Ordering::Equal;
                    }
                    report.comparisons += 1;
                    cmpr.get_or_insert_with(|| {
                        FunctionComparator::from_state(m, &class, state.take().unwrap())
                    })
                    .compare(&m.functions[x], &m.functions[g])
                });
                if let Some(c) = cmpr {
                    state = Some(c.into_state());
                }
                match pos {
                    Err(p) => {
                        bucket.insert(p, g);
                        in_tree[g] = true;
                        None
                    }
                    Ok(p) => {
                        let f = bucket[p];
                        // The better survivor stays in the tree.
                        if w.prio[g] < w.prio[f] {
                            bucket[p] = g;
                            in_tree[g] = true;
                            in_tree[f] = false;
                            Some((g, f))
                        } else {
                            Some((f, g))
                        }
                    }
                }
            };
            let Some((f, g)) = found else { continue };
            if w.prio[f] == PRIO_PREEMPTIBLE {
                continue; // no safe survivor (see the module comment)
            }
            if w.prio[g] == PRIO_FROZEN {
                continue; // both compiled already: neither may change
            }
            // The merge validator re-checks every pair in debug builds (and in tests).
            #[cfg(debug_assertions)]
            if let Err(e) = validate_merge(m, &class, f, g) {
                panic!("merge validator: {e}");
            }
            let (fs, gs) = (sym_of[f].expect("symbol"), sym_of[g].expect("symbol"));
            let significant = w.significant[g] || w.taken.contains(&gs);
            merge_two(m, ps, g, w.linkage[g], (fs, gs), significant, &mut report);
            merged_into[g] = Some(f);
            report.pairs.push((g, f));
            // G's callers now call F (unless G is preemptible): they leave FnTree and return
            // to Deferred.
            if w.prio[g] != PRIO_PREEMPTIBLE {
                requeue.clear();
                requeue.extend(callers_of(gs));
                // G and what G absorbed move to F's list.
                let mut moved = (gs, gs);
                let (first, last) = absorbed.take(gs);
                if let (Some(first), Some(last)) = (first.expand(), last.expand()) {
                    let mut s = Some(first);
                    while let Some(x) = s {
                        requeue.extend(callers_of(x));
                        s = absorbed_next.get(x).expand();
                    }
                    absorbed_next.set(gs, first.into());
                    moved.1 = last;
                }
                let entry = absorbed.get_mut(fs);
                match (entry.0.expand(), entry.1.expand()) {
                    (Some(first), Some(last)) => {
                        *entry = (first.into(), moved.1.into());
                        absorbed_next.set(last, moved.0.into());
                    }
                    _ => *entry = (moved.0.into(), moved.1.into()),
                }
                for &c in &requeue {
                    if in_tree[c] && c != f {
                        if let Some(bucket) = fn_tree.get_mut(&strong[c]) {
                            bucket.retain(|x| *x != c);
                        }
                        in_tree[c] = false;
                        deferred.push(c);
                    }
                }
            }
        }
    }
    report.lap("merge.fn_tree", &mut clock);

    // Functions compiled by earlier batches: a survivor equal to one merges into it (and in an
    // incremental module every survivor's walk is kept for freezing it).
    if !ps.frozen.is_empty() || ps.incremental {
        merge_into_frozen(m, ps, &w, &ids, &sym_of, &mut merged_into, &mut report);
        report.lap("merge.frozen", &mut clock);
    }

    // Direct calls to a merged function call its final survivor (a preemptible G may be
    // replaced at link time: calls to it stay).
    let final_of = |mut f: FuncId| {
        while let Some(Some(h)) = merged_into.get(f) {
            f = *h;
        }
        f
    };
    // The survivor's symbol for each merged symbol (a `SymTable`, made once anything
    // merged).
    let (touched, symbols) = if report.pairs.is_empty() {
        (0, 0)
    } else {
        (touched, symbols)
    };
    let mut redirect: SymTable<PackedOption<Symbol>> = SymTable::new(None.into(), touched, symbols);
    let mut redirected = false;
    for &(g, _) in &report.pairs {
        if w.prio[g] == PRIO_PREEMPTIBLE {
            continue;
        }
        let f = final_of(g);
        if let (Some(gs), Some(fs)) = (sym_of[g], m.symbol_of(f)) {
            redirect.set(gs, fs.into());
            redirected = true;
        }
    }
    if redirected {
        // The call sites to rewrite, found from the walk's tables alone; then each rewrite,
        // with the instruction data of the next functions on its way into the cache.
        let mut edits: Vec<(FuncId, Inst, Symbol, Symbol)> = Vec::new();
        for &c in &ids {
            if m.removed[c] || merged_into[c].is_some() {
                continue; // deleted, or its body is now a thunk
            }
            let (a, b) = w.calls[c];
            for &(s, inst) in &w.sites[a as usize..b as usize] {
                if let Some(t) = redirect.get(s).expand() {
                    edits.push((c, inst, s, t));
                }
            }
        }
        for &(c, inst, s, t) in &edits {
            let f = &mut m.functions[c];
            if f.operand(inst, 0) == Operand::Sym(s, 0) {
                f.set_operand(inst, 0, Operand::Sym(t, 0));
            }
        }
    }
    report.lap("merge.redirect", &mut clock);
    if ps.free_pending(m) {
        report.lap("merge.free", &mut clock);
    }
    report
}

/// `ids` (in increasing order) ordered by `(prio(f), f)`: a counting sort on the priority,
/// which keeps the order of equal priorities.
fn by_priority(ids: &[FuncId], prio: impl Fn(FuncId) -> u8) -> Vec<FuncId> {
    debug_assert!(ids.windows(2).all(|p| p[0] < p[1]));
    let mut start = [0u32; 257];
    for &f in ids {
        start[prio(f) as usize + 1] += 1;
    }
    for k in 1..start.len() {
        start[k] += start[k - 1];
    }
    let mut out = vec![FuncId::from_u32(0); ids.len()];
    for &f in ids {
        let at = &mut start[prio(f) as usize];
        out[*at as usize] = f;
        *at += 1;
    }
    out
}

/// `merge_functions_with` for a batch of one function `g` in a module with frozen functions
/// or kept incremental (a lazy JIT's step): no other open function can share its shape, so
/// there is no class to refine and no FnTree; what is left is the walk and the lookup of the
/// frozen functions (`merge_into_frozen` for a batch of one: callees open in the module are
/// not final, so they give no fingerprint). Same merges, same counters (the walk's round and
/// the refinement's empty one); phase times: the walk and the frozen lookup only.
fn merge_one(m: &mut Module, ps: &mut PassState, g: FuncId, s: &mut MergeScratch) -> MergeReport {
    let mut report = MergeReport::default();
    let mut clock = Instant::now();
    let f = &m.functions[g];
    s.walk.tokens.clear();
    s.walk.callees.clear();
    s.walk.taken.clear();
    function_hashes(f, &mut s.hash, &mut s.walk);
    // Symbols taken by globals are taken too (as the full walk records them).
    for gv in f.globals.values() {
        if let GlobalData::Symbol { sym, .. } = gv {
            s.walk.taken.push(*sym);
        }
    }
    let (linkage, significant) = (f.linkage, f.address_significant);
    let known = ps.edit(g) == Edit::None;
    report.rounds += 2;
    report.lap("merge.walk", &mut clock);
    if priority(f, ps.is_frozen(g)) == PRIO_FROZEN {
        return report;
    }
    let (base, end) = (ps.first_open, m.functions.len() as u32);
    let resolve = |sym: Symbol| -> Option<Symbol> {
        let sym = m.resolve_alias(sym);
        let Some(d) = m.defined(sym) else {
            return Some(sym);
        };
        if (base..end).contains(&d.as_u32()) && d != g {
            return None; // an open function: not final yet
        }
        m.symbol_of(d)
    };
    let found = find_frozen(
        m,
        ps,
        g,
        known.then(|| (&s.walk.tokens[..], s.walk.callees.iter().map(|&(c, _)| c))),
        resolve,
        (&mut s.hash, &mut WalkOut::default(), &mut s.fp),
    );
    match found.and_then(|f| Some((f, m.symbol_of(g)?, m.symbol_of(f)?))) {
        Some((f, gs, fs)) => {
            let significant = significant || s.walk.taken.contains(&gs);
            merge_two(m, ps, g, linkage, (fs, gs), significant, &mut report);
            report.pairs.push((g, f));
            report.into_frozen += 1;
        }
        None if found.is_none() && known && ps.incremental => {
            // Unchanged: freezing it later reuses this walk.
            let callees = s.walk.callees.iter().map(|&(c, _)| c);
            ps.frozen.remember(g, &s.walk.tokens, callees);
        }
        None => {}
    }
    report.lap("merge.frozen", &mut clock);
    report
}

/// The frozen function that `g` equals, by fingerprint: made from `g`'s walk (its tokens and
/// callees) when the body is still as walked, else from a new walk (in the buffers given).
/// `None` when a callee is not final yet (`resolve` says `None`) or no frozen function
/// equals it.
fn find_frozen(
    m: &Module,
    ps: &PassState,
    g: FuncId,
    walked: Option<(&[u32], impl Iterator<Item = Symbol>)>,
    resolve: impl FnMut(Symbol) -> Option<Symbol>,
    (scratch, walk, fp): (&mut HashScratch, &mut WalkOut, &mut Vec<u32>),
) -> Option<FuncId> {
    let ok = match walked {
        Some((tokens, callees)) => fingerprint_of(m, g, tokens, callees, resolve, fp),
        None => fingerprint(m, g, scratch, walk, resolve, fp),
    };
    if ok {
        ps.frozen.find(fp)
    } else {
        None
    }
}

/// Merge each open survivor that equals a frozen function into it. Survivors are visited
/// callees first, so a caller sees its callees' merges (a new `reverse<T>` calling a new
/// `swap<T>` finds the frozen `reverse<U>` once `swap<T>` has merged into `swap<U>`).
fn merge_into_frozen(
    m: &mut Module,
    ps: &mut PassState,
    w: &super::walk::Walked,
    ids: &[FuncId],
    sym_of: &ScopeMap<Option<Symbol>>,
    merged_into: &mut ScopeMap<Option<FuncId>>,
    report: &mut MergeReport,
) {
    // Callees first: a post-order over the calls between open functions.
    let mut order: Vec<FuncId> = Vec::with_capacity(ids.len());
    let mut state: ScopeMap<u8> = ScopeMap::new(w.weak.base(), m.functions.len(), 0);
    let mut stack: Vec<(FuncId, usize)> = Vec::new();
    for &root in ids {
        if state[root] != 0 {
            continue;
        }
        state[root] = 1;
        stack.push((root, 0));
        while let Some(&mut (f, ref mut k)) = stack.last_mut() {
            let targets = w.targets_of(f);
            if let Some(&t) = targets.get(*k) {
                *k += 1;
                if let Callee::Func(c) = t {
                    if state[c] == 0 {
                        state[c] = 1;
                        stack.push((c, 0));
                    }
                }
            } else {
                state[f] = 2;
                order.push(f);
                stack.pop();
            }
        }
    }
    let mut scratch = HashScratch::default();
    let mut walk = WalkOut::default();
    let mut fp = Vec::new();
    for g in order {
        if m.removed[g] || merged_into[g].is_some() || w.prio[g] == PRIO_FROZEN {
            continue;
        }
        // A callee resolves to its final survivor; the fingerprint exists only when every
        // callee is final (frozen, outside, or `g` itself).
        let resolve = |s: Symbol| -> Option<Symbol> {
            let s = m.resolve_alias(s);
            let Some(mut d) = m.defined(s) else {
                return Some(s);
            };
            while let Some(Some(h)) = merged_into.get(d) {
                d = *h;
            }
            if merged_into.contains(d) && d != g {
                return None; // an open function: not final yet
            }
            m.symbol_of(d)
        };
        let known = ps.edit(g) == Edit::None;
        let found = find_frozen(
            m,
            ps,
            g,
            known.then(|| (w.tokens_of(g), w.callee_symbols(g))),
            resolve,
            (&mut scratch, &mut walk, &mut fp),
        );
        let Some(f) = found else {
            if known && ps.incremental {
                // Unchanged: freezing it later reuses this walk.
                ps.frozen.remember(g, w.tokens_of(g), w.callee_symbols(g));
            }
            continue;
        };
        let (Some(gs), Some(fs)) = (sym_of[g], m.symbol_of(f)) else {
            continue;
        };
        let significant = w.significant[g] || w.taken.contains(&gs);
        merge_two(m, ps, g, w.linkage[g], (fs, gs), significant, report);
        merged_into[g] = Some(f);
        report.pairs.push((g, f));
        report.into_frozen += 1;
    }
}

/// Fold G into F: G is deleted (replaced), becomes an alias, or becomes a thunk. Direct calls
/// are redirected by the caller of this function.
pub(super) fn merge_two(
    m: &mut Module,
    ps: &mut PassState,
    g: FuncId,
    linkage: Linkage,
    (fs, gs): (Symbol, Symbol),
    significant: bool,
    report: &mut MergeReport,
) {
    let preemptible = linkage == Linkage::Preemptible;
    let kind = if significant || preemptible {
        MergeKind::Thunked
    } else if linkage == Linkage::Local {
        MergeKind::Replaced
    } else {
        MergeKind::Aliased
    };
    match kind {
        MergeKind::Replaced | MergeKind::Aliased => {
            ps.remove_function(m, g);
            m.symbols[gs].def = None.into();
            m.aliases.insert(gs, fs);
            if kind == MergeKind::Aliased {
                report.aliased += 1;
            } else {
                report.replaced += 1;
            }
        }
        MergeKind::Thunked => {
            make_thunk(m, ps, g, fs);
            report.thunked += 1;
        }
        MergeKind::Folded => unreachable!("exact merging never folds"),
    }
    report.merged += 1;
    if !preemptible {
        ps.move_external_calls(gs, fs);
    }
    ps.merges.push(MergeRecord {
        merged: gs,
        survivor: fs,
        kind,
        by: MergedBy::Exact,
        callers_redirected: !preemptible,
    });
}

/// Replace G's body with a call to `target`: a tail call where the calling convention is
/// `tail` and the target allows tail calls (`PassState::allow_tail_calls`), else call and return.
pub(super) fn make_thunk(m: &mut Module, ps: &mut PassState, g: FuncId, target: Symbol) {
    let sig = m.functions[g].sig.clone();
    make_thunk_with(m, ps, g, (target, sig), 0, true, |_, _, _| {});
}

/// `make_thunk` calling `target` with signature `call_sig`: G's arguments, then the
/// `n_extra` operands `extra` sets up in the thunk's block (one instruction each) and appends
/// to the call's operands. Returns G's old body, without its name and signature (the thunk
/// took them), for a caller that wants to keep it; unless `keep_old`, the thunk is built in
/// the old body's tables (cleared), which the old body returned no longer has.
pub(super) fn make_thunk_with(
    m: &mut Module,
    ps: &mut PassState,
    g: FuncId,
    (target, call_sig): (Symbol, Signature),
    n_extra: usize,
    keep_old: bool,
    extra: impl FnOnce(&mut Function, Block, &mut Vec<Operand>),
) -> Function {
    let tail_calls = ps.allow_tail_calls;
    ps.record_edit(g, Edit::Modified);
    let old = &mut m.functions[g];
    let cc = old.sig.call_conv;
    let sig = core::mem::replace(&mut old.sig, Signature::new(cc));
    let mut t = Function::new(core::mem::take(&mut old.name), sig, old.linkage);
    if !keep_old {
        // The old body's allocations serve the thunk: none to free, none to make.
        t.regs = core::mem::take(&mut old.regs);
        t.regs.clear();
        t.insts = core::mem::take(&mut old.insts);
        t.insts.clear();
        t.blocks = core::mem::take(&mut old.blocks);
        t.blocks.clear();
        t.layout = core::mem::take(&mut old.layout);
        t.layout.clear();
        t.operand_pool = core::mem::take(&mut old.operand_pool);
        t.operand_pool.clear();
        t.result_pool = core::mem::take(&mut old.result_pool);
        t.result_pool.clear();
    }
    t.address_significant = old.address_significant;
    t.stack_limit = None;
    // Every table sized once: the copies of the arguments, the extra operands, the call (and
    // the return).
    let (np, nr) = (t.sig.params.len(), t.sig.returns.len());
    let tail = t.sig.call_conv == CallConv::Tail && tail_calls;
    let (nrets, ninsts) = if tail {
        (0, np + n_extra + 1)
    } else {
        (nr, np + n_extra + 2)
    };
    t.regs.reserve_exact(np + n_extra + nrets);
    t.insts.reserve_exact(ninsts);
    t.operand_pool.reserve_exact(2 * (np + n_extra) + 1 + nrets);
    if nrets != 1 {
        t.result_pool.reserve_exact(nrets);
    }
    let sig = t.sigs.push(call_sig);
    let b = t.new_block();
    t.reserve_block(b, ninsts);
    let mut ops = Vec::with_capacity(1 + np + n_extra);
    ops.push(Operand::Sym(target, 0));
    for k in 0..np {
        let ty = t.sig.params[k].ty;
        let r = t.new_reg(ty);
        let i = t.make_inst(Opcode::Copy, ty, &[r], &[Operand::Arg(k as u32)]);
        t.append_inst(b, i);
        ops.push(Operand::Reg(r));
    }
    extra(&mut t, b, &mut ops);
    if tail {
        let i = t.make_inst(Opcode::TailCall, Type::VOID, &[], &ops);
        t.insts[i].aux = sig.as_u32();
        t.append_inst(b, i);
    } else {
        let mut rets: SmallVec<[Reg; 4]> = SmallVec::new();
        for k in 0..nr {
            let ty = t.sig.returns[k].ty;
            rets.push(t.new_reg(ty));
        }
        let i = t.make_inst(Opcode::Call, Type::VOID, &rets, &ops);
        t.insts[i].aux = sig.as_u32();
        t.append_inst(b, i);
        let rv: SmallVec<[Operand; 4]> = rets.into_iter().map(Operand::Reg).collect();
        let i = t.make_inst(Opcode::Ret, Type::VOID, &[], &rv);
        t.append_inst(b, i);
    }
    if !keep_old {
        // Give back what the old body's two largest tables had beyond the thunk's needs (a
        // shrink in place: no copy), for the allocations of the edits that follow; with
        // `free_removed`, every table's.
        if ps.free_removed {
            t.shrink_to_fit();
        } else {
            t.insts.shrink_to_fit();
            t.operand_pool.shrink_to_fit();
        }
    }
    core::mem::replace(&mut m.functions[g], t)
}

/// Give code back to a function merged away (aliased, replaced or folded: it has no code)
/// whose address is taken after the merge, by a later batch of an incremental module: it
/// becomes a thunk calling its survivor (for a fold, the shared body with the member's extra
/// arguments), so the address exists and is the function's own. Calls keep going to the
/// survivor (the alias and the call rewrite stay). Returns false, changing nothing, for a
/// function that was not merged away.
pub fn thunk_for_address(m: &mut Module, ps: &mut PassState, g: FuncId) -> bool {
    if !m.removed[g] {
        return false;
    }
    let Some(gs) = m.symbol_of(g) else {
        return false;
    };
    // The function's calls go to: through aliases (an exact merge), then through a fold.
    let to = m.resolve_alias(gs);
    if let Some(rw) = ps.call_rewrite(to).cloned() {
        let n_extra = rw.extras.len();
        make_thunk_with(
            m,
            ps,
            g,
            (rw.shared, rw.sig),
            n_extra,
            false,
            |t, b, ops| {
                for e in &rw.extras {
                    let (r, i) = match e {
                        ExtraArg::Const(ty, c) => {
                            let r = t.new_reg(*ty);
                            (r, t.make_inst(Opcode::Copy, *ty, &[r], &[*c]))
                        }
                        ExtraArg::FuncAddr(s, sig) => {
                            let r = t.new_reg(Type::I64);
                            let sr = t.sigs.push(sig.clone());
                            let i = t.make_inst(
                                Opcode::FuncAddr,
                                Type::I64,
                                &[r],
                                &[Operand::Sym(*s, 0)],
                            );
                            t.insts[i].aux = sr.as_u32();
                            (r, i)
                        }
                    };
                    let n = t.block_insts(b).len();
                    t.insert_inst(b, n, i);
                    ops.push(Operand::Reg(r));
                }
            },
        );
    } else {
        if to == gs {
            return false;
        }
        make_thunk(m, ps, g, to);
    }
    m.removed[g] = false;
    m.symbols[gs].def = Some(g).into();
    true
}

/// Give every function merged into an equal one (an alias or a replaced local) a body again: a
/// thunk that calls its survivor. For output that must stay a whole module, such as
/// `mergelift opt --emit clif`, where every input function must still be there and callable by
/// name. Returns the functions made thunks. Functions folded by `merge-similar` are not
/// touched: they are local and nothing calls them by name.
pub fn thunk_merged(m: &mut Module, ps: &mut PassState) -> Vec<FuncId> {
    let mut done = Vec::new();
    // A merged function's slot stays (with its name) when it is removed.
    let removed: HashMap<crate::lir::Name, FuncId> = m
        .functions
        .iter()
        .filter(|(g, _)| m.removed[*g])
        .map(|(g, f)| (f.name.clone(), g))
        .collect();
    for k in 0..ps.merges.len() {
        let r = ps.merges[k];
        if !matches!(r.kind, MergeKind::Aliased | MergeKind::Replaced) {
            continue;
        }
        let Some(&g) = removed.get(&m.symbols[r.merged].name) else {
            continue;
        };
        let target = m.resolve_alias(r.survivor);
        m.aliases.remove(&r.merged);
        m.removed[g] = false;
        m.symbols[r.merged].def = Some(g).into();
        make_thunk(m, ps, g, target);
        done.push(g);
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counting sort orders as a sort by (priority, id) does, on ids with gaps.
    #[test]
    fn by_priority_is_a_sort_by_priority_then_id() {
        let ids: Vec<FuncId> = (0..500u32)
            .filter(|k| k % 3 != 1)
            .map(FuncId::from_u32)
            .collect();
        let prio = |f: FuncId| ((f.as_u32() * 7919) % 5) as u8;
        let mut want = ids.clone();
        want.sort_by_key(|&f| (prio(f), f));
        assert_eq!(by_priority(&ids, prio), want);
        assert!(by_priority(&[], prio).is_empty());
    }
}
