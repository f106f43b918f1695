//! Per-function tables for the functions one run of the pass looks at.
//!
//! A run looks at the *open* functions of a module: those from `PassState::first_open` on (the
//! functions added since the last freeze, and any a pass made). Their ids are one contiguous
//! range, so a table over them is a vector from that base: a run costs in proportion to the
//! functions it looks at, not to the module (an incremental module of 100k frozen functions
//! merging a batch of one pays for one).

use crate::lir::{FuncId, Symbol};
use cranelift_entity::{EntityRef, SecondaryMap};

/// Data for each function with an id from `base` on.
#[derive(Clone, Debug)]
pub(crate) struct ScopeMap<T> {
    base: u32,
    data: Vec<T>,
}

impl<T: Clone> ScopeMap<T> {
    /// A table for the functions `base..end`, each starting as `init`.
    pub(crate) fn new(base: u32, end: usize, init: T) -> Self {
        ScopeMap {
            base,
            data: vec![init; end.saturating_sub(base as usize)],
        }
    }
}

impl<T> ScopeMap<T> {
    /// The first id in scope.
    pub(crate) fn base(&self) -> u32 {
        self.base
    }
    /// Is `f` in scope?
    #[inline]
    pub(crate) fn contains(&self, f: FuncId) -> bool {
        f.as_u32() >= self.base && ((f.as_u32() - self.base) as usize) < self.data.len()
    }
    /// The entry of `f`, if it is in scope.
    #[inline]
    pub(crate) fn get(&self, f: FuncId) -> Option<&T> {
        f.as_u32()
            .checked_sub(self.base)
            .and_then(|k| self.data.get(k as usize))
    }
}

impl<T> core::ops::Index<FuncId> for ScopeMap<T> {
    type Output = T;
    #[inline]
    fn index(&self, f: FuncId) -> &T {
        &self.data[(f.as_u32() - self.base) as usize]
    }
}

impl<T> core::ops::IndexMut<FuncId> for ScopeMap<T> {
    #[inline]
    fn index_mut(&mut self, f: FuncId) -> &mut T {
        &mut self.data[(f.as_u32() - self.base) as usize]
    }
}

/// The equivalence class of each function the comparator may meet as a callee: `None` for a
/// function outside the classes (compared by identity).
pub trait Classes {
    /// The class of `f`, or `None` when `f` is outside the classes.
    fn class(&self, f: FuncId) -> Option<u32>;
}

impl Classes for ScopeMap<u32> {
    #[inline]
    fn class(&self, f: FuncId) -> Option<u32> {
        self.get(f).copied()
    }
}

impl Classes for SecondaryMap<FuncId, u32> {
    #[inline]
    fn class(&self, f: FuncId) -> Option<u32> {
        Some(self[f])
    }
}

/// Data for each symbol a run touches, for tables keyed by symbol (symbols are numbered
/// densely over the whole module, frozen functions and imports included).
///
/// A vector indexed by symbol costs the module's every symbol to make, which a run that
/// touches most of them (a module compiled in one batch) repays with one load per look-up.
/// A run that touches few of many (a small batch late in an incremental module's life) would
/// pay the whole module per flush, quadratic over the module's life; it gets a hash map
/// instead. `touched` (an estimate of how many symbols the run touches) picks: a vector when
/// it is at least 1/16 of the symbols. Both behave the same: every symbol starts as
/// `default`, and a symbol made during the run (beyond the vector's end) is looked up as
/// `default` and grows the vector when written. Under the `degenerate-hash` feature (tests
/// only) every table is a hash map, so the test suite runs the sparse form.
pub(crate) struct SymTable<V> {
    default: V,
    repr: SymRepr<V>,
}

/// An empty hash-map table (for a table made before its run knows its size).
impl<V: Copy + Default> Default for SymTable<V> {
    fn default() -> Self {
        SymTable {
            default: V::default(),
            repr: SymRepr::Sparse(Default::default()),
        }
    }
}

enum SymRepr<V> {
    Dense(Vec<V>),
    Sparse(crate::hash::HashMap<Symbol, V>),
}

impl<V: Copy> SymTable<V> {
    /// A table for a run that touches about `touched` of the module's `symbols` symbols.
    pub(crate) fn new(default: V, touched: usize, symbols: usize) -> Self {
        let dense = dense_for(touched, symbols);
        SymTable {
            default,
            repr: if dense {
                SymRepr::Dense(vec![default; symbols])
            } else {
                SymRepr::Sparse(Default::default())
            },
        }
    }

    /// The entry of `s`.
    #[inline]
    pub(crate) fn get(&self, s: Symbol) -> V {
        match &self.repr {
            SymRepr::Dense(v) => v.get(s.index()).copied().unwrap_or(self.default),
            SymRepr::Sparse(m) => m.get(&s).copied().unwrap_or(self.default),
        }
    }

    /// The entry of `s`, to write.
    #[inline]
    pub(crate) fn get_mut(&mut self, s: Symbol) -> &mut V {
        match &mut self.repr {
            SymRepr::Dense(v) => {
                if s.index() >= v.len() {
                    v.resize(s.index() + 1, self.default);
                }
                &mut v[s.index()]
            }
            SymRepr::Sparse(m) => m.entry(s).or_insert(self.default),
        }
    }

    /// Set the entry of `s`.
    #[inline]
    pub(crate) fn set(&mut self, s: Symbol, x: V) {
        *self.get_mut(s) = x;
    }

    /// The entry of `s`, leaving `default` in its place.
    #[inline]
    pub(crate) fn take(&mut self, s: Symbol) -> V {
        match &mut self.repr {
            SymRepr::Dense(v) => match v.get_mut(s.index()) {
                Some(x) => core::mem::replace(x, self.default),
                None => self.default,
            },
            SymRepr::Sparse(m) => m.remove(&s).unwrap_or(self.default),
        }
    }

    /// Every entry back to `default`.
    pub(crate) fn reset(&mut self) {
        match &mut self.repr {
            SymRepr::Dense(v) => v.fill(self.default),
            SymRepr::Sparse(m) => m.clear(),
        }
    }

    /// Is this table a vector indexed by symbol (else a hash map)?
    #[cfg(test)]
    fn is_dense(&self) -> bool {
        matches!(self.repr, SymRepr::Dense(_))
    }
}

/// Items grouped by symbol, those of one symbol in the order given: what `get(s)` returns.
/// Built by a counting sort over every symbol when the run touches enough of them
/// (`dense_for`: then a look-up is two loads), else by sorting the items alone (a look-up is
/// a binary search), so a small batch in a large module pays for its items only.
pub(crate) struct SymIndex<T> {
    /// Dense: the items of `s` are `items[start[s]..start[s + 1]]`. Empty when sparse.
    start: Vec<u32>,
    /// Sparse: the symbol of each item, sorted. Empty when dense.
    keys: Vec<Symbol>,
    items: Vec<T>,
}

impl<T> Default for SymIndex<T> {
    fn default() -> Self {
        SymIndex {
            start: Vec::new(),
            keys: Vec::new(),
            items: Vec::new(),
        }
    }
}

impl<T: Copy> SymIndex<T> {
    /// Group `pairs` by symbol, for a run touching about `touched` of `symbols` symbols.
    pub(crate) fn new(pairs: &[(Symbol, T)], touched: usize, symbols: usize) -> Self {
        let Some(&(_, any)) = pairs.first() else {
            return Self::default();
        };
        if !dense_for(touched, symbols) {
            let mut sorted = pairs.to_vec();
            sorted.sort_by_key(|&(s, _)| s); // stable: a symbol's items keep their order
            return SymIndex {
                start: Vec::new(),
                keys: sorted.iter().map(|&(s, _)| s).collect(),
                items: sorted.iter().map(|&(_, x)| x).collect(),
            };
        }
        let n = symbols.max(pairs.iter().map(|&(s, _)| s.index() + 1).max().unwrap_or(0));
        let mut start = vec![0u32; n + 1];
        for &(s, _) in pairs {
            start[s.index() + 1] += 1;
        }
        for k in 1..start.len() {
            start[k] += start[k - 1];
        }
        let mut at = start.clone();
        let mut items = vec![any; pairs.len()];
        for &(s, x) in pairs {
            let k = &mut at[s.index()];
            items[*k as usize] = x;
            *k += 1;
        }
        SymIndex {
            start,
            keys: Vec::new(),
            items,
        }
    }

    /// The items of `s`.
    pub(crate) fn get(&self, s: Symbol) -> &[T] {
        if self.start.is_empty() {
            let a = self.keys.partition_point(|&x| x < s);
            let b = a + self.keys[a..].partition_point(|&x| x == s);
            return &self.items[a..b];
        }
        match self.start.get(s.index()..s.index() + 2) {
            Some(&[a, b]) => &self.items[a as usize..b as usize],
            _ => &[],
        }
    }
}

/// Whether a run touching about `touched` of `symbols` symbols should index its tables by
/// symbol (`SymTable`'s rule, for tables of another form).
pub(crate) fn dense_for(touched: usize, symbols: usize) -> bool {
    !crate::hash::DEGENERATE && touched.saturating_mul(16) >= symbols
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Both forms of the table agree with a plain map on the same writes and reads, symbols
    /// beyond the module's count (made during a run) included.
    #[test]
    fn sym_table_forms_agree_with_a_map() {
        let symbols = 1000;
        for touched in [symbols, 0] {
            let mut t: SymTable<u32> = SymTable::new(7, touched, symbols);
            assert_eq!(t.is_dense(), touched == symbols && !crate::hash::DEGENERATE);
            let mut model: HashMap<u32, u32> = HashMap::new();
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            for step in 0..20_000u32 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = (x % 1200) as u32; // some beyond `symbols`
                let s = Symbol::from_u32(k);
                match x >> 60 {
                    0..=5 => {
                        t.set(s, step);
                        model.insert(k, step);
                    }
                    6..=8 => {
                        *t.get_mut(s) += 1;
                        *model.entry(k).or_insert(7) += 1;
                    }
                    9..=11 => assert_eq!(t.take(s), model.remove(&k).unwrap_or(7)),
                    12 if step % 1000 == 0 => {
                        t.reset();
                        model.clear();
                    }
                    _ => {}
                }
                assert_eq!(t.get(s), *model.get(&k).unwrap_or(&7));
            }
            for k in 0..1200 {
                assert_eq!(t.get(Symbol::from_u32(k)), *model.get(&k).unwrap_or(&7));
            }
        }
    }

    /// Both forms of the index list each symbol's items as the pairs gave them, in their
    /// order (the merge relies on it: callers in id order), symbols beyond the module's count
    /// and symbols with no items included.
    #[test]
    fn sym_index_forms_keep_each_symbols_items_in_order() {
        let symbols = 1000;
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut pairs: Vec<(Symbol, u32)> = Vec::new();
        for item in 0..5000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Few symbols, many repeats; some beyond `symbols`.
            pairs.push((Symbol::from_u32((x % 1100) as u32 / 7), item));
        }
        for touched in [symbols, 0] {
            let index = SymIndex::new(&pairs, touched, symbols);
            for k in 0..1200u32 {
                let s = Symbol::from_u32(k);
                let want: Vec<u32> = (pairs.iter())
                    .filter(|&&(t, _)| t == s)
                    .map(|&(_, x)| x)
                    .collect();
                assert_eq!(index.get(s), &want[..], "symbol {k}, touched {touched}");
            }
        }
        assert!(SymIndex::<u32>::new(&[], 0, symbols)
            .get(Symbol::from_u32(3))
            .is_empty());
    }

    #[test]
    fn dense_only_when_the_run_touches_a_sixteenth() {
        assert_eq!(dense_for(100, 1600), !crate::hash::DEGENERATE);
        assert!(!dense_for(99, 1600));
        assert!(!dense_for(2, 20_000));
        assert_eq!(dense_for(0, 0), !crate::hash::DEGENERATE);
    }
}
