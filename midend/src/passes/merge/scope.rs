//! Per-function tables for the functions one run of the pass looks at.
//!
//! A run looks at the *open* functions of a module: those from `Module::first_open` on (the
//! functions added since the last freeze, and any a pass made). Their ids are one contiguous
//! range, so a table over them is a vector from that base: a run costs in proportion to the
//! functions it looks at, not to the module (an incremental module of 100k frozen functions
//! merging a batch of one pays for one).

use crate::lir::FuncId;
use cranelift_entity::SecondaryMap;

/// Data for each function with an id from `base` on.
#[derive(Clone, Debug)]
pub struct ScopeMap<T> {
    base: u32,
    data: Vec<T>,
}

impl<T: Clone> ScopeMap<T> {
    /// A table for the functions `base..end`, each starting as `init`.
    pub fn new(base: u32, end: usize, init: T) -> Self {
        ScopeMap {
            base,
            data: vec![init; end.saturating_sub(base as usize)],
        }
    }
}

impl<T> ScopeMap<T> {
    /// The first id in scope.
    pub fn base(&self) -> u32 {
        self.base
    }
    /// Is `f` in scope?
    #[inline]
    pub fn contains(&self, f: FuncId) -> bool {
        f.as_u32() >= self.base && ((f.as_u32() - self.base) as usize) < self.data.len()
    }
    /// The entry of `f`, if it is in scope.
    #[inline]
    pub fn get(&self, f: FuncId) -> Option<&T> {
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
