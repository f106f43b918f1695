//! `ThinMap`: the entity map of a function's side tables (call signatures, memory flags, stack
//! objects, alias regions, global values, opaque records, exception tables). It keeps `PrimaryMap`'s interface but is
//! one pointer wide and allocates nothing while empty (its length and capacity live in the
//! heap block, as with `thin_vec::ThinVec`): most functions have none of these tables, and a
//! module of 300k small functions would otherwise pay 16 bytes per table per function for
//! the empty headers.

use core::marker::PhantomData;
use core::ops::{Index, IndexMut};
use cranelift_entity::EntityRef;
use thin_vec::ThinVec;

/// A dense map from entity `K` to `V`, one pointer wide (see the module comment).
pub struct ThinMap<K: EntityRef, V> {
    elems: ThinVec<V>,
    unused: PhantomData<K>,
}

impl<K: EntityRef, V> ThinMap<K, V> {
    pub(crate) fn new() -> Self {
        ThinMap {
            elems: ThinVec::new(),
            unused: PhantomData,
        }
    }

    /// The number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.elems.len()
    }

    /// No entries?
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }

    /// Add `v`; its key is the map's length before.
    #[inline]
    pub fn push(&mut self, v: V) -> K {
        let k = K::new(self.elems.len());
        self.elems.push(v);
        k
    }

    /// The entry of `k`, if it exists.
    #[inline]
    pub fn get(&self, k: K) -> Option<&V> {
        self.elems.get(k.index())
    }

    /// The entry of `k`, mutably, if it exists.
    #[inline]
    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        self.elems.get_mut(k.index())
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl ExactSizeIterator<Item = K> + DoubleEndedIterator + use<K, V> {
        (0..self.elems.len()).map(K::new)
    }

    /// The entries, in key order.
    #[inline]
    pub fn values(&self) -> core::slice::Iter<'_, V> {
        self.elems.iter()
    }

    /// The entries, mutably, in key order.
    #[inline]
    pub fn values_mut(&mut self) -> core::slice::IterMut<'_, V> {
        self.elems.iter_mut()
    }

    #[inline]
    pub(crate) fn as_values_slice(&self) -> &[V] {
        &self.elems
    }

    /// The keys and entries, in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (K, &V)> + DoubleEndedIterator {
        self.elems.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }

    /// Remove every entry.
    pub fn clear(&mut self) {
        self.elems.clear();
    }

    /// Make room for at least `additional` more entries.
    pub fn reserve(&mut self, additional: usize) {
        self.elems.reserve(additional);
    }

    /// Make room for exactly `additional` more entries.
    pub fn reserve_exact(&mut self, additional: usize) {
        self.elems.reserve_exact(additional);
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        self.elems.shrink_to_fit();
    }

    /// The bytes of the heap block (0 without one): the header and the elements' room.
    pub fn heap_bytes(&self) -> usize {
        thin_vec_heap_bytes(&self.elems)
    }
}

/// The size of a `ThinVec`'s header (length and capacity), at the start of its heap block.
const THIN_HEADER: usize = 2 * size_of::<usize>();

/// The bytes of a `ThinVec`'s heap block (0 while empty): its header and its elements' room.
pub(crate) fn thin_vec_heap_bytes<T>(v: &ThinVec<T>) -> usize {
    if v.capacity() == 0 {
        0
    } else {
        THIN_HEADER + v.capacity() * size_of::<T>()
    }
}

impl<K: EntityRef, V> Default for ThinMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EntityRef, V: Clone> Clone for ThinMap<K, V> {
    fn clone(&self) -> Self {
        ThinMap {
            elems: self.elems.clone(),
            unused: PhantomData,
        }
    }
}

impl<K: EntityRef, V: PartialEq> PartialEq for ThinMap<K, V> {
    fn eq(&self, other: &Self) -> bool {
        self.as_values_slice() == other.as_values_slice()
    }
}

impl<K: EntityRef, V: Eq> Eq for ThinMap<K, V> {}

impl<K: EntityRef + core::fmt::Debug, V: core::fmt::Debug> core::fmt::Debug for ThinMap<K, V> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: EntityRef, V> Index<K> for ThinMap<K, V> {
    type Output = V;
    #[inline]
    fn index(&self, k: K) -> &V {
        &self.elems[k.index()]
    }
}

impl<K: EntityRef, V> IndexMut<K> for ThinMap<K, V> {
    #[inline]
    fn index_mut(&mut self, k: K) -> &mut V {
        &mut self.elems[k.index()]
    }
}

impl<'a, K: EntityRef, V> IntoIterator for &'a ThinMap<K, V> {
    type Item = (K, &'a V);
    type IntoIter = core::iter::Map<
        core::iter::Enumerate<core::slice::Iter<'a, V>>,
        fn((usize, &'a V)) -> (K, &'a V),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.elems.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lir::GlobalRef;

    #[test]
    fn empty_map_is_one_pointer_and_allocates_nothing() {
        assert_eq!(
            core::mem::size_of::<ThinMap<GlobalRef, u64>>(),
            core::mem::size_of::<usize>()
        );
        let m: ThinMap<GlobalRef, u64> = ThinMap::new();
        assert_eq!(m.heap_bytes(), 0);
        assert!(m.is_empty());
    }

    #[test]
    fn keys_index_and_iterate_in_order() {
        let mut m: ThinMap<GlobalRef, &str> = ThinMap::new();
        let a = m.push("a");
        let b = m.push("b");
        assert_eq!((a.index(), b.index()), (0, 1));
        m[b] = "c";
        assert_eq!(m.get(a), Some(&"a"));
        assert_eq!(m.get(GlobalRef::new(2)), None);
        let pairs: Vec<_> = (&m).into_iter().map(|(k, v)| (k.index(), *v)).collect();
        assert_eq!(pairs, [(0, "a"), (1, "c")]);
        assert_eq!(m.keys().map(|k| k.index()).collect::<Vec<_>>(), [0, 1]);
        assert!(m.heap_bytes() >= 2 * core::mem::size_of::<&str>());
        let c = m.clone();
        assert_eq!(c, m);
        m.clear();
        assert!(m.is_empty() && c.len() == 2);
    }
}
