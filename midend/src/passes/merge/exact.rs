//! Exact merging: FnTree and Deferred (LLVM's MergeFunctions), the lookup of frozen functions, and
//! folding each merged function into its survivor.

#[cfg(debug_assertions)]
use super::comparator::validate_merge;
use super::comparator::{ComparatorState, FunctionComparator};
use super::index::{fingerprint, fingerprint_of};
use super::refine::refine_classes;
use super::scope::{ScopeMap, SymIndex, SymTable};
use super::walk::{
    function_hashes, priority, walk_module, Callee, HashScratch, WalkOut, Walked, PRIO_FROZEN,
    PRIO_PREEMPTIBLE,
};
use super::{MergeOptions, MergeReport};
use crate::hash::HashMap;
use crate::lir::*;
use crate::passes::fold::make_thunk_with;
use crate::state::*;
use core::cmp::Ordering;
use cranelift_entity::packed_option::PackedOption;
use smallvec::SmallVec;
use std::time::Instant;

/// Buffers of the pass kept from one run to the next: a lazy JIT runs it once per function,
/// and a batch of one function needs nothing else (see `merge_one`).
#[derive(Default)]
pub(crate) struct MergeScratch {
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

/// `merge_functions_with`, with buffers kept across runs in `scratch`. Its phases, each timed
/// in the report: the walk (hashes and shapes), refinement, FnTree and Deferred, the lookup
/// of frozen functions, redirecting calls.
pub(crate) fn merge_functions_reusing(
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

    let calls = CallIndex::new(m, &w, base, &ids, &candidates);
    let mut merged_into: ScopeMap<Option<FuncId>> = ScopeMap::new(base, m.functions.len(), None);
    if !candidates.is_empty() {
        let classes = (&class, &strong);
        deferred(
            m,
            ps,
            &w,
            classes,
            &candidates,
            &calls,
            &mut merged_into,
            &mut report,
        );
    }
    report.lap("merge.fn_tree", &mut clock);

    // Functions compiled by earlier batches: a survivor equal to one merges into it (and in an
    // incremental module every survivor's walk is kept for freezing it).
    if !ps.frozen.is_empty() || ps.incremental {
        merge_into_frozen(
            m,
            ps,
            &w,
            &ids,
            &calls.sym_of,
            &mut merged_into,
            &mut report,
        );
        report.lap("merge.frozen", &mut clock);
    }

    redirect_calls(m, &w, &ids, &calls, &merged_into, &report.pairs);
    report.lap("merge.redirect", &mut clock);
    if ps.free_pending(m) {
        report.lap("merge.free", &mut clock);
    }
    report
}

/// The symbol of each function of a run, and the candidates calling each symbol (to re-queue
/// them when it merges).
struct CallIndex {
    sym_of: ScopeMap<Option<Symbol>>,
    /// The callers of each symbol (looked up once per merge), by `SymIndex`'s rule.
    callers: SymIndex<FuncId>,
    /// The symbols this run touches (its functions' and their callees'), and the module's:
    /// what sizes the run's `SymTable`s.
    touched: usize,
    symbols: usize,
}

impl CallIndex {
    fn new(m: &Module, w: &Walked, base: u32, ids: &[FuncId], candidates: &[FuncId]) -> Self {
        let mut sym_of: ScopeMap<Option<Symbol>> = ScopeMap::new(base, m.functions.len(), None);
        for &f in ids {
            sym_of[f] = m.symbol_of(f);
        }
        // Each (callee, caller) pair once: a caller's callees are deduplicated among
        // themselves (a short list); candidates come in id order, so `SymIndex`'s grouping,
        // which keeps order, lists each symbol's callers in id order with no sort of the
        // whole list.
        let mut callers: Vec<(Symbol, FuncId)> = Vec::new();
        let mut callees: SmallVec<[Symbol; 16]> = SmallVec::new();
        for &c in candidates {
            let (a, b) = w.calls[c];
            callees.clear();
            callees.extend(w.sites[a as usize..b as usize].iter().map(|&(s, _)| s));
            callees.sort_unstable();
            callees.dedup();
            callers.extend(callees.iter().map(|&s| (s, c)));
        }
        let touched = ids.len() + callers.len();
        let symbols = m.symbols.len();
        CallIndex {
            sym_of,
            callers: SymIndex::new(&callers, touched, symbols),
            touched,
            symbols,
        }
    }

    fn callers_of(&self, s: Symbol) -> impl Iterator<Item = FuncId> + '_ {
        self.callers.get(s).iter().copied()
    }
}

/// Deferred over the candidates: strong functions first, then preemptible ones; each is looked
/// up in FnTree and merges into the equal function it finds; when G merges into F, G's
/// callers now call F (unless G is preemptible): they leave FnTree and return to Deferred.
#[allow(clippy::too_many_arguments)]
fn deferred(
    m: &mut Module,
    ps: &mut PassState,
    w: &Walked,
    (class, strong): (&ScopeMap<u32>, &ScopeMap<u64>),
    candidates: &[FuncId],
    calls: &CallIndex,
    merged_into: &mut ScopeMap<Option<FuncId>>,
    report: &mut MergeReport,
) {
    let mut deferred = by_priority(candidates, |f| w.prio[f]);
    deferred.reverse(); // pop from the end
    let mut state = Some(FunctionComparator::new(m, class).into_state());
    let mut tree = FnTree::new(calls.sym_of.base(), m.functions.len(), candidates.len());
    let mut absorbed = Absorbed::new(calls.touched, calls.symbols);
    let mut requeue: Vec<FuncId> = Vec::new();
    while let Some(g) = deferred.pop() {
        if m.removed[g] || merged_into[g].is_some() {
            continue;
        }
        let found = tree.insert_or_find(m, (class, strong), &w.prio, &mut state, g, report);
        let Some((f, g)) = found else { continue };
        if w.prio[f] == PRIO_PREEMPTIBLE {
            continue; // no safe survivor (see the module comment)
        }
        if w.prio[g] == PRIO_FROZEN {
            continue; // both compiled already: neither may change
        }
        // The merge validator re-checks every pair in debug builds (and in tests).
        #[cfg(debug_assertions)]
        if let Err(e) = validate_merge(m, class, f, g) {
            panic!("merge validator: {e}");
        }
        let (fs, gs) = (
            calls.sym_of[f].expect("symbol"),
            calls.sym_of[g].expect("symbol"),
        );
        let significant = w.significant[g] || w.taken.contains(&gs);
        merge_two(m, ps, g, w.linkage[g], (fs, gs), significant, report);
        merged_into[g] = Some(f);
        report.pairs.push((g, f));
        if w.prio[g] != PRIO_PREEMPTIBLE {
            requeue.clear();
            requeue.extend(calls.callers_of(gs));
            absorbed.move_into(gs, fs, |x| requeue.extend(calls.callers_of(x)));
            for &c in &requeue {
                if c != f {
                    tree.take_back(c, strong, &mut deferred);
                }
            }
        }
    }
}

/// FnTree: ordered by (strong hash, FunctionComparator); each entry is the short list of
/// unique functions sharing a strong hash, kept in comparator order. Refinement proved
/// members of one class equal under the comparator, so a lookup meeting its own class needs
/// no body walk; any other meeting is compared in full. Nothing walks the tree in order, so
/// its first level, the strong hash, is a hash map: one probe per lookup instead of a descent
/// through a B-tree, a cache miss per level.
struct FnTree {
    buckets: HashMap<u64, SmallVec<[FuncId; 1]>>,
    in_tree: ScopeMap<bool>,
}

impl FnTree {
    fn new(base: u32, end: usize, candidates: usize) -> Self {
        let mut buckets: HashMap<u64, SmallVec<[FuncId; 1]>> = HashMap::default();
        buckets.reserve(candidates / 2);
        FnTree {
            buckets,
            in_tree: ScopeMap::new(base, end, false),
        }
    }

    /// Insert G, or find the function equal to it: then `(survivor, merged)`, and the better
    /// survivor (by priority) is the one that stays in the tree.
    fn insert_or_find(
        &mut self,
        m: &Module,
        (class, strong): (&ScopeMap<u32>, &ScopeMap<u64>),
        prio: &ScopeMap<u8>,
        state: &mut Option<ComparatorState>,
        g: FuncId,
        report: &mut MergeReport,
    ) -> Option<(FuncId, FuncId)> {
        // The comparator is made only when a lookup meets another class (a bucket holding its
        // own class alone, the common case, needs none).
        let mut cmpr: Option<FunctionComparator> = None;
        let bucket = self.buckets.entry(strong[g]).or_default();
        let pos = bucket.binary_search_by(|&x| {
            if class[x] == class[g] {
                return Ordering::Equal;
            }
            report.comparisons += 1;
            cmpr.get_or_insert_with(|| {
                FunctionComparator::from_state(m, class, state.take().unwrap())
            })
            .compare(&m.functions[x], &m.functions[g])
        });
        if let Some(c) = cmpr {
            *state = Some(c.into_state());
        }
        match pos {
            Err(p) => {
                bucket.insert(p, g);
                self.in_tree[g] = true;
                None
            }
            Ok(p) => {
                let f = bucket[p];
                if prio[g] < prio[f] {
                    bucket[p] = g;
                    self.in_tree[g] = true;
                    self.in_tree[f] = false;
                    Some((g, f))
                } else {
                    Some((f, g))
                }
            }
        }
    }

    /// Take `c` out of the tree, if it is there, and return it to Deferred.
    fn take_back(&mut self, c: FuncId, strong: &ScopeMap<u64>, deferred: &mut Vec<FuncId>) {
        if self.in_tree[c] {
            if let Some(bucket) = self.buckets.get_mut(&strong[c]) {
                bucket.retain(|x| *x != c);
            }
            self.in_tree[c] = false;
            deferred.push(c);
        }
    }
}

/// Symbols folded into each survivor symbol (their callers now call the survivor), as a list
/// per survivor: first and last member, and each member's successor. Indexed by symbol when
/// the run touches enough symbols (no hashing, no regrowth as merges fill them), else hash
/// maps.
struct Absorbed {
    ends: SymTable<(PackedOption<Symbol>, PackedOption<Symbol>)>,
    next: SymTable<PackedOption<Symbol>>,
}

impl Absorbed {
    fn new(touched: usize, symbols: usize) -> Self {
        let none: PackedOption<Symbol> = None.into();
        Absorbed {
            ends: SymTable::new((none, none), touched, symbols),
            next: SymTable::new(none, touched, symbols),
        }
    }

    /// G (symbol `gs`) merged into F (`fs`): G and what G absorbed move to F's list. `each`
    /// sees every symbol G had absorbed.
    fn move_into(&mut self, gs: Symbol, fs: Symbol, mut each: impl FnMut(Symbol)) {
        let mut moved = (gs, gs);
        let (first, last) = self.ends.take(gs);
        if let (Some(first), Some(last)) = (first.expand(), last.expand()) {
            let mut s = Some(first);
            while let Some(x) = s {
                each(x);
                s = self.next.get(x).expand();
            }
            self.next.set(gs, first.into());
            moved.1 = last;
        }
        let entry = self.ends.get_mut(fs);
        match (entry.0.expand(), entry.1.expand()) {
            (Some(first), Some(last)) => {
                *entry = (first.into(), moved.1.into());
                self.next.set(last, moved.0.into());
            }
            _ => *entry = (moved.0.into(), moved.1.into()),
        }
    }
}

/// Direct calls to a merged function (of `pairs`) call its final survivor (a preemptible G
/// may be replaced at link time: calls to it stay).
fn redirect_calls(
    m: &mut Module,
    w: &Walked,
    ids: &[FuncId],
    calls: &CallIndex,
    merged_into: &ScopeMap<Option<FuncId>>,
    pairs: &[(FuncId, FuncId)],
) {
    let final_of = |mut f: FuncId| {
        while let Some(Some(h)) = merged_into.get(f) {
            f = *h;
        }
        f
    };
    // The survivor's symbol for each merged symbol (a `SymTable`, made once anything
    // merged).
    let (touched, symbols) = if pairs.is_empty() {
        (0, 0)
    } else {
        (calls.touched, calls.symbols)
    };
    let mut redirect: SymTable<PackedOption<Symbol>> = SymTable::new(None.into(), touched, symbols);
    let mut redirected = false;
    for &(g, _) in pairs {
        if w.prio[g] == PRIO_PREEMPTIBLE {
            continue;
        }
        let f = final_of(g);
        if let (Some(gs), Some(fs)) = (calls.sym_of[g], m.symbol_of(f)) {
            redirect.set(gs, fs.into());
            redirected = true;
        }
    }
    if !redirected {
        return;
    }
    // The call sites to rewrite, found from the walk's tables alone; then each rewrite, with
    // the instruction data of the next functions on its way into the cache.
    let mut edits: Vec<(FuncId, Inst, Symbol, Symbol)> = Vec::new();
    for &c in ids {
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
