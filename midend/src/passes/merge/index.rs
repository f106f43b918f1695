//! The fingerprints of frozen functions, for incremental merging.
//!
//! A module that is compiled batch by batch freezes what each batch compiled (`freeze`).
//! Frozen functions never change and never merge away, so their equivalence is final: each is
//! kept as a *fingerprint*, its token stream (what the comparator compares, up to callees)
//! followed by its callees resolved to final symbols, a call to itself written as `SELF`. A
//! function of a later batch whose fingerprint is equal is equal to the frozen function under
//! the comparator, with callees compared by identity; one hash lookup finds it, and the exact
//! words confirm it (equal hashes are never taken for equal functions).

use super::walk::{function_hashes, hash_words, priority, HashScratch, WalkOut, PRIO_PREEMPTIBLE};
use crate::hash::finish;
use crate::lir::*;
use crate::state::{FrozenIndex, PassState, Range};

/// The word that stands for a call of a function to itself.
const SELF: u32 = u32::MAX;
/// The word before a resolved callee symbol.
const CALLEE: u32 = u32::MAX - 1;

impl FrozenIndex {
    /// A frozen function whose fingerprint is `fp`, if any.
    pub(super) fn find(&self, fp: &[u32]) -> Option<FuncId> {
        let h = finish(hash_words(fp));
        self.table
            .get(&h)?
            .iter()
            .find_map(|&(f, a, n)| (self.words[a as usize..(a + n) as usize] == *fp).then_some(f))
    }

    /// Keep `f`'s token stream and callees from the merge walk for `freeze` (a later call for
    /// the same function wins).
    pub(super) fn remember(
        &mut self,
        f: FuncId,
        tokens: &[u32],
        callees: impl Iterator<Item = Symbol>,
    ) {
        let w = self.pending_words.len() as u32;
        self.pending_words.extend_from_slice(tokens);
        let c = self.pending_callees.len() as u32;
        self.pending_callees.extend(callees);
        self.pending.push((
            f,
            (w, self.pending_words.len() as u32),
            (c, self.pending_callees.len() as u32),
        ));
    }

    /// What `remember` kept of `f` (the last call's), once `pending` is sorted stably by
    /// function.
    fn remembered(&self, f: FuncId) -> Option<(Range, Range)> {
        let k = self.pending.partition_point(|p| p.0 <= f).checked_sub(1)?;
        let (g, words, callees) = self.pending[k];
        (g == f).then_some((words, callees))
    }

    /// Index `f` by its fingerprint `fp`, whose first `ntokens` words are its token stream;
    /// `settled` says whether a callee symbol is final (defined by a frozen function, or
    /// outside the module: never merged later).
    fn insert(
        &mut self,
        f: FuncId,
        fp: &[u32],
        ntokens: usize,
        mut settled: impl FnMut(Symbol) -> bool,
    ) {
        let h = finish(hash_words(fp));
        let start = self.words.len() as u32;
        self.words.extend_from_slice(fp);
        let entry = (f, start, fp.len() as u32);
        self.table.entry(h).or_default().push(entry);
        for s in callees_of(&fp[ntokens..]) {
            if !settled(s) {
                let list = self.unsettled.entry(s).or_default();
                if list.last().map(|e| e.0 .1) != Some(start) {
                    list.push((entry, ntokens as u32));
                }
            }
        }
    }

    /// Callees of frozen fingerprints that merged since the last call: each fingerprint that
    /// names one is written again with the survivor, so a later function that calls the
    /// survivor finds it (the frozen code calls the merged name, which is the survivor's
    /// code). Only merges that made an alias count, as fingerprints resolve callees
    /// through aliases. Returns the number of fingerprints written again.
    fn rekey(&mut self, m: &Module, merges: &[crate::state::MergeRecord]) -> usize {
        let new = &merges[self.merges_seen.min(merges.len())..];
        self.merges_seen = merges.len();
        if self.unsettled.is_empty() {
            return 0;
        }
        let mut rekeyed = 0;
        for r in new {
            let Some(entries) = self.unsettled.remove(&r.merged) else {
                continue;
            };
            let to = m.resolve_alias(r.merged);
            if to == r.merged {
                continue; // no alias: calls of the name still call it
            }
            for ((f, start, len), ntokens) in entries {
                let (a, b) = (start as usize, (start + len) as usize);
                // (Calling itself through the merged name: a `SELF` word would be shorter.)
                if m.symbol_of(f) == Some(to) {
                    continue;
                }
                let old = finish(hash_words(&self.words[a..b]));
                let Some(list) = self.table.get_mut(&old) else {
                    continue;
                };
                list.retain(|e| e.1 != start);
                if list.is_empty() {
                    self.table.remove(&old);
                }
                let callees = &mut self.words[a + ntokens as usize..b];
                let mut k = 0;
                while k < callees.len() {
                    if callees[k] == CALLEE {
                        if callees[k + 1] == r.merged.as_u32() {
                            callees[k + 1] = to.as_u32();
                        }
                        k += 2;
                    } else {
                        k += 1;
                    }
                }
                let h = finish(hash_words(&self.words[a..b]));
                self.table.entry(h).or_default().push((f, start, len));
                if m.defined(to).is_none() {
                    self.unsettled
                        .entry(to)
                        .or_default()
                        .push(((f, start, len), ntokens));
                }
                rekeyed += 1;
            }
        }
        rekeyed
    }
}

/// The callee symbols named in the callee part of a fingerprint.
fn callees_of(words: &[u32]) -> impl Iterator<Item = Symbol> + '_ {
    let mut k = 0;
    core::iter::from_fn(move || {
        while k < words.len() {
            if words[k] == CALLEE {
                k += 2;
                return Some(Symbol::from_u32(words[k - 1]));
            }
            k += 1;
        }
        None
    })
}

/// The fingerprint of `f` into `out`: its token stream, then for each direct call (in the
/// comparator's order) its callee resolved by `resolve` (`None`: the callee is not final, so
/// `f` has no fingerprint yet). Returns false when `f` has none.
pub(super) fn fingerprint(
    m: &Module,
    f: FuncId,
    scratch: &mut HashScratch,
    walk: &mut WalkOut,
    resolve: impl FnMut(Symbol) -> Option<Symbol>,
    out: &mut Vec<u32>,
) -> bool {
    let func = &m.functions[f];
    if func.entry().is_none() {
        return false;
    }
    walk.tokens.clear();
    walk.callees.clear();
    function_hashes(func, scratch, walk);
    let callees: Vec<Symbol> = walk.callees.iter().map(|&(s, _)| s).collect();
    fingerprint_of(m, f, &walk.tokens, callees.into_iter(), resolve, out)
}

/// `fingerprint` from a token stream and callee symbols already known (the merge walk's).
pub(super) fn fingerprint_of(
    m: &Module,
    f: FuncId,
    tokens: &[u32],
    callees: impl Iterator<Item = Symbol>,
    mut resolve: impl FnMut(Symbol) -> Option<Symbol>,
    out: &mut Vec<u32>,
) -> bool {
    out.clear();
    out.extend_from_slice(tokens);
    let me = m.symbol_of(f);
    for s in callees {
        match resolve(s) {
            Some(t) if Some(t) == me => out.push(SELF),
            Some(t) => out.extend_from_slice(&[CALLEE, t.as_u32()]),
            None => return false,
        }
    }
    true
}

/// Freeze `ids`: they were compiled, so passes will never change them again and merging keeps
/// them as survivors. With `index`, each live one is indexed by its fingerprint (callees
/// resolved through merge aliases), for later batches to merge into. Every function from
/// `PassState::first_open` on must be among `ids` or removed: afterwards no function is open.
pub fn freeze(m: &mut Module, ps: &mut PassState, ids: &[FuncId], index_them: bool) -> usize {
    let mut scratch = HashScratch::default();
    let mut walk = WalkOut::default();
    let first_open = ps.first_open;
    let index = &mut ps.frozen;
    let rekeyed = index.rekey(m, &ps.merges);
    let mut fp = core::mem::take(&mut index.fp);
    // Stable: of two records of one function, the later stays last.
    index.pending.sort_by_key(|p| p.0);
    for &f in ids {
        if m.removed[f] {
            continue;
        }
        // The stream the merge walk remembered is the function as defined. Passes after
        // `merge` (lvn, gvn, merge-similar's rewrites) keep its behaviour, so it stands for
        // the compiled code as well as a walk of the final body does. It is also what a later
        // batch's function is looked up by (`merge` runs before the passes that change
        // bodies), so a function those passes changed still matches an equal one defined
        // later.
        let known = index.remembered(f);
        let resolve = |s| Some(m.resolve_alias(s));
        let mut ntokens = 0;
        let indexable = index_them
            && priority(&m.functions[f], f.as_u32() < first_open) < PRIO_PREEMPTIBLE
            && match known {
                Some(((wa, wb), (ca, cb))) => {
                    let tokens = &index.pending_words[wa as usize..wb as usize];
                    ntokens = tokens.len();
                    let callees = index.pending_callees[ca as usize..cb as usize].iter();
                    fingerprint_of(m, f, tokens, callees.copied(), resolve, &mut fp)
                }
                None => {
                    let ok = fingerprint(m, f, &mut scratch, &mut walk, resolve, &mut fp);
                    ntokens = walk.tokens.len();
                    ok
                }
            };
        if indexable {
            // (A callee is final once defined: by a function of this batch, frozen now, or
            // of an earlier one.)
            index.insert(f, &fp, ntokens, |s| m.defined(s).is_some());
        }
    }
    index.pending.clear();
    index.pending_words.clear();
    index.pending_callees.clear();
    index.fp = fp;
    ps.first_open = m.functions.len() as u32;
    ps.clear_edits();
    rekeyed
}
