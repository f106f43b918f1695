//! `ThinMap`: an entity map for a function's rarely used tables (stack objects, alias regions,
//! global values, opaque records, exception tables). It keeps `PrimaryMap`'s interface but is
//! one pointer wide and allocates nothing while empty (its length and capacity live in the
//! heap block, as with `thin_vec::ThinVec`): most functions have none of these tables, and a
//! module of 300k small functions would otherwise pay 16 bytes per table per function for
//! the empty headers.
//!
//! `InlineMap`: the same interface for the tables most functions have a few entries in (the
//! signatures of their callees, their memory flags), kept in the function up to a fixed
//! count. A heap block for one or two entries cost a lift an allocation per function (about
//! 3% of a warm lift of gen 10k's small functions) and its block header in memory.

use core::marker::PhantomData;
use core::ops::{DerefMut, Index, IndexMut};
use cranelift_entity::EntityRef;
use smallvec::{Array, SmallVec};
use thin_vec::ThinVec;

/// A dense map from entity `K` to `V`, one pointer wide (see the module comment).
pub type ThinMap<K, V> = EntityList<K, ThinVec<V>>;

/// A dense map from entity `K` to `A::Item`, holding `A`'s length of entries in place (see the
/// module comment).
pub type InlineMap<K, A> = EntityList<K, SmallVec<A>>;

/// The storage of an `EntityList`: a growable list that reads as a slice.
pub trait ListStore: Default + DerefMut<Target = [<Self as ListStore>::Item]> {
    type Item;
    fn push(&mut self, v: Self::Item);
    fn clear(&mut self);
    fn reserve(&mut self, additional: usize);
    fn reserve_exact(&mut self, additional: usize);
    fn shrink_to_fit(&mut self);
    /// The start of the heap block, if the list holds one.
    fn heap_start(&self) -> Option<*const u8>;
    /// The bytes of the heap block (0 without one).
    fn heap_bytes(&self) -> usize;
}

impl<V> ListStore for ThinVec<V> {
    type Item = V;
    #[inline]
    fn push(&mut self, v: V) {
        ThinVec::push(self, v)
    }
    fn clear(&mut self) {
        ThinVec::clear(self)
    }
    fn reserve(&mut self, additional: usize) {
        ThinVec::reserve(self, additional)
    }
    fn reserve_exact(&mut self, additional: usize) {
        ThinVec::reserve_exact(self, additional)
    }
    fn shrink_to_fit(&mut self) {
        ThinVec::shrink_to_fit(self)
    }
    #[inline]
    fn heap_start(&self) -> Option<*const u8> {
        thin_vec_heap_start(self)
    }
    fn heap_bytes(&self) -> usize {
        thin_vec_heap_bytes(self)
    }
}

impl<A: Array> ListStore for SmallVec<A> {
    type Item = A::Item;
    #[inline]
    fn push(&mut self, v: A::Item) {
        SmallVec::push(self, v)
    }
    fn clear(&mut self) {
        SmallVec::clear(self)
    }
    fn reserve(&mut self, additional: usize) {
        SmallVec::reserve(self, additional)
    }
    fn reserve_exact(&mut self, additional: usize) {
        SmallVec::reserve_exact(self, additional)
    }
    fn shrink_to_fit(&mut self) {
        SmallVec::shrink_to_fit(self)
    }
    /// (the entries themselves, once they have spilled out of place)
    #[inline]
    fn heap_start(&self) -> Option<*const u8> {
        self.spilled().then(|| self.as_ptr() as *const u8)
    }
    fn heap_bytes(&self) -> usize {
        if self.spilled() {
            self.capacity() * size_of::<A::Item>()
        } else {
            0
        }
    }
}

/// A dense map from entity `K` to the items of list `S`, with `PrimaryMap`'s interface:
/// `ThinMap` and `InlineMap` (see the module comment).
pub struct EntityList<K: EntityRef, S: ListStore> {
    elems: S,
    unused: PhantomData<K>,
}

impl<K: EntityRef, S: ListStore> EntityList<K, S> {
    pub fn new() -> Self {
        EntityList {
            elems: S::default(),
            unused: PhantomData,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.elems.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }

    /// Add `v`; its key is the map's length before.
    #[inline]
    pub fn push(&mut self, v: S::Item) -> K {
        let k = K::new(self.elems.len());
        self.elems.push(v);
        k
    }

    #[inline]
    pub fn get(&self, k: K) -> Option<&S::Item> {
        self.elems.get(k.index())
    }

    #[inline]
    pub fn get_mut(&mut self, k: K) -> Option<&mut S::Item> {
        self.elems.get_mut(k.index())
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = K> + DoubleEndedIterator + use<K, S> {
        (0..self.elems.len()).map(K::new)
    }

    #[inline]
    pub fn values(&self) -> core::slice::Iter<'_, S::Item> {
        self.elems.iter()
    }

    #[inline]
    pub fn values_mut(&mut self) -> core::slice::IterMut<'_, S::Item> {
        self.elems.iter_mut()
    }

    #[inline]
    pub fn as_values_slice(&self) -> &[S::Item] {
        &self.elems
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (K, &S::Item)> + DoubleEndedIterator {
        self.elems.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }

    pub fn clear(&mut self) {
        self.elems.clear();
    }

    pub fn reserve(&mut self, additional: usize) {
        self.elems.reserve(additional);
    }

    pub fn reserve_exact(&mut self, additional: usize) {
        self.elems.reserve_exact(additional);
    }

    pub fn shrink_to_fit(&mut self) {
        self.elems.shrink_to_fit();
    }

    /// The start of the heap block (a `ThinMap`'s header, before the elements; an
    /// `InlineMap`'s spilled entries), if it has one.
    #[inline]
    pub fn heap_start(&self) -> Option<*const u8> {
        self.elems.heap_start()
    }

    /// The bytes of the heap block (0 without one): a `ThinMap`'s header and its elements'
    /// room; an `InlineMap`'s spilled room.
    pub fn heap_bytes(&self) -> usize {
        self.elems.heap_bytes()
    }
}

/// The size of a `ThinVec`'s header (length and capacity), at the start of its heap block.
const THIN_HEADER: usize = 2 * size_of::<usize>();

/// The start of a `ThinVec`'s heap block (its header), if it has one.
#[inline]
pub(crate) fn thin_vec_heap_start<T>(v: &ThinVec<T>) -> Option<*const u8> {
    (v.capacity() > 0).then(|| (v.as_ptr() as *const u8).wrapping_sub(THIN_HEADER))
}

/// The bytes of a `ThinVec`'s heap block (0 while empty): its header and its elements' room.
pub(crate) fn thin_vec_heap_bytes<T>(v: &ThinVec<T>) -> usize {
    if v.capacity() == 0 {
        0
    } else {
        THIN_HEADER + v.capacity() * size_of::<T>()
    }
}

impl<K: EntityRef, S: ListStore> Default for EntityList<K, S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EntityRef, S: ListStore + Clone> Clone for EntityList<K, S> {
    fn clone(&self) -> Self {
        EntityList {
            elems: self.elems.clone(),
            unused: PhantomData,
        }
    }
}

impl<K: EntityRef, S: ListStore> PartialEq for EntityList<K, S>
where
    S::Item: PartialEq,
{
    fn eq(&self, other: &Self) -> bool {
        self.as_values_slice() == other.as_values_slice()
    }
}

impl<K: EntityRef, S: ListStore> Eq for EntityList<K, S> where S::Item: Eq {}

impl<K: EntityRef + core::fmt::Debug, S: ListStore> core::fmt::Debug for EntityList<K, S>
where
    S::Item: core::fmt::Debug,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: EntityRef, S: ListStore> Index<K> for EntityList<K, S> {
    type Output = S::Item;
    #[inline]
    fn index(&self, k: K) -> &S::Item {
        &self.elems[k.index()]
    }
}

impl<K: EntityRef, S: ListStore> IndexMut<K> for EntityList<K, S> {
    #[inline]
    fn index_mut(&mut self, k: K) -> &mut S::Item {
        &mut self.elems[k.index()]
    }
}

impl<'a, K: EntityRef, S: ListStore> IntoIterator for &'a EntityList<K, S> {
    type Item = (K, &'a S::Item);
    type IntoIter = core::iter::Map<
        core::iter::Enumerate<core::slice::Iter<'a, S::Item>>,
        fn((usize, &'a S::Item)) -> (K, &'a S::Item),
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

    #[test]
    fn an_inline_map_allocates_only_past_its_room() {
        let mut m: InlineMap<GlobalRef, [u64; 2]> = InlineMap::new();
        let a = m.push(1);
        let b = m.push(2);
        assert_eq!((a.index(), b.index(), m.heap_bytes()), (0, 1, 0));
        assert!(m.heap_start().is_none());
        m[b] = 5;
        assert_eq!(m.values().copied().collect::<Vec<_>>(), [1, 5]);
        let c = m.push(3);
        assert_eq!(m.get(c), Some(&3));
        assert!(m.heap_bytes() >= 3 * 8 && m.heap_start().is_some());
        let pairs: Vec<_> = (&m).into_iter().map(|(k, v)| (k.index(), *v)).collect();
        assert_eq!(pairs, [(0, 1), (1, 5), (2, 3)]);
        let d = m.clone();
        assert_eq!(d, m);
        m.clear();
        assert!(m.is_empty() && d.len() == 3);
    }
}
