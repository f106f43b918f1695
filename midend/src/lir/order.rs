//! Lists of entities that are usually the identity, `[e0, e1, .., e(n-1)]`, stored only
//! once they are not.
//!
//! A lift creates a function's blocks in layout order and fills them with consecutive
//! instructions, one block after another: its layout and its array of block lists are both
//! the identity. Storing them would cost each function two allocations and four bytes per
//! block and per instruction, for lists that say nothing. An [`EntityOrder`] holds only the
//! length while it is the identity and reads as a slice of a static table; the first change
//! that breaks the identity (any write through `DerefMut`, or an appended entity out of
//! order) stores it, so every edit sees an ordinary array.

use super::entities::{Block, Inst};
use cranelift_entity::EntityRef;

/// How many entities the static identity tables hold: longer identities are stored.
pub(crate) const IDENTITY_LEN: usize = 1 << 12;

/// An entity with a static table of its first `IDENTITY_LEN` values, in order.
pub trait Ordered: EntityRef + 'static {
    /// `[e0, e1, ..]`, `IDENTITY_LEN` long.
    fn identity() -> &'static [Self];
}

macro_rules! identity_table {
    ($name:ident, $ty:ty) => {
        static $name: [$ty; IDENTITY_LEN] = {
            let mut a = [<$ty>::from_index_const(0); IDENTITY_LEN];
            let mut k = 0;
            while k < IDENTITY_LEN {
                a[k] = <$ty>::from_index_const(k as u32);
                k += 1;
            }
            a
        };
        impl Ordered for $ty {
            #[inline(always)]
            fn identity() -> &'static [Self] {
                &$name
            }
        }
    };
}

identity_table!(INSTS, Inst);
identity_table!(BLOCKS, Block);

/// A list of entities, not stored while it is the identity (see the module's comment). It
/// reads as a slice (`Deref`); writing through `DerefMut` stores it first.
#[derive(Clone)]
pub struct EntityOrder<E: Ordered>(Repr<E>);

#[derive(Clone)]
enum Repr<E> {
    /// `[e0, .., e(n-1)]`, with `n <= IDENTITY_LEN`: stored nowhere.
    Identity(u32),
    Stored(Vec<E>),
}

impl<E: Ordered> EntityOrder<E> {
    /// An empty list.
    pub const fn new() -> Self {
        EntityOrder(Repr::Identity(0))
    }

    /// The stored array, made from the identity first if need be.
    #[inline]
    pub fn stored_mut(&mut self) -> &mut Vec<E> {
        if let Repr::Identity(n) = self.0 {
            self.0 = Repr::Stored(E::identity()[..n as usize].to_vec());
        }
        match &mut self.0 {
            Repr::Stored(v) => v,
            Repr::Identity(_) => unreachable!(),
        }
    }

    /// The stored array, if the list is stored (it is not while it is the identity).
    #[inline]
    pub fn stored(&self) -> Option<&Vec<E>> {
        match &self.0 {
            Repr::Stored(v) => Some(v),
            Repr::Identity(_) => None,
        }
    }

    /// Is it held as the identity, without storage?
    #[inline]
    pub fn is_unstored_identity(&self) -> bool {
        matches!(self.0, Repr::Identity(_))
    }

    /// Heap room, in entities (none while the identity is not stored).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.stored().map_or(0, |v| v.capacity())
    }

    /// Append `e`.
    #[inline]
    pub fn push(&mut self, e: E) {
        if let Repr::Identity(n) = &mut self.0 {
            if e.index() == *n as usize && e.index() < IDENTITY_LEN {
                *n += 1;
                return;
            }
        }
        self.stored_mut().push(e);
    }

    /// Append the `n` entities from `first` on, in order.
    #[inline]
    pub fn extend_range(&mut self, first: E, n: usize) {
        let first = first.index();
        if let Repr::Identity(len) = &mut self.0 {
            if first == *len as usize && first + n <= IDENTITY_LEN {
                *len += n as u32;
                return;
            }
        }
        self.stored_mut().extend((first..first + n).map(E::new));
    }

    /// Empty the list (a stored one keeps its memory).
    pub fn clear(&mut self) {
        match &mut self.0 {
            Repr::Identity(n) => *n = 0,
            Repr::Stored(v) => v.clear(),
        }
    }

    /// Keep the first `n` entities.
    pub fn truncate(&mut self, n: usize) {
        match &mut self.0 {
            Repr::Identity(len) => *len = (*len).min(n as u32),
            Repr::Stored(v) => v.truncate(n),
        }
    }

    /// Make room for `n` more entities, if the list is stored (appending in order to the
    /// identity needs none).
    pub fn reserve(&mut self, n: usize) {
        if let Repr::Stored(v) = &mut self.0 {
            v.reserve(n);
        }
    }

    /// Give back the room a stored list has to spare.
    pub fn shrink_to_fit(&mut self) {
        if let Repr::Stored(v) = &mut self.0 {
            v.shrink_to_fit();
        }
    }
}

impl<E: Ordered> Default for EntityOrder<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Ordered> core::ops::Deref for EntityOrder<E> {
    type Target = [E];
    #[inline]
    fn deref(&self) -> &[E] {
        match &self.0 {
            Repr::Identity(n) => &E::identity()[..*n as usize],
            Repr::Stored(v) => v,
        }
    }
}

impl<E: Ordered> core::ops::DerefMut for EntityOrder<E> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [E] {
        self.stored_mut()
    }
}

impl<E: Ordered> From<Vec<E>> for EntityOrder<E> {
    fn from(v: Vec<E>) -> Self {
        EntityOrder(Repr::Stored(v))
    }
}

impl<E: Ordered> FromIterator<E> for EntityOrder<E> {
    fn from_iter<I: IntoIterator<Item = E>>(iter: I) -> Self {
        let mut o = Self::new();
        for e in iter {
            o.push(e);
        }
        o
    }
}

impl<E: Ordered> Extend<E> for EntityOrder<E> {
    fn extend<I: IntoIterator<Item = E>>(&mut self, iter: I) {
        for e in iter {
            self.push(e);
        }
    }
}

impl<'a, E: Ordered> IntoIterator for &'a EntityOrder<E> {
    type Item = &'a E;
    type IntoIter = core::slice::Iter<'a, E>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<E: Ordered> PartialEq for EntityOrder<E> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<E: Ordered> Eq for EntityOrder<E> {}

impl<E: Ordered + core::fmt::Debug> core::fmt::Debug for EntityOrder<E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(k: u32) -> Block {
        Block::from_u32(k)
    }

    #[test]
    fn identity_until_an_entity_comes_out_of_order() {
        let mut o = EntityOrder::<Block>::new();
        for k in 0..5 {
            o.push(b(k));
        }
        assert!(o.is_unstored_identity());
        assert_eq!(o.capacity(), 0);
        assert_eq!(&o[..], &[b(0), b(1), b(2), b(3), b(4)]);
        o.push(b(9));
        assert!(!o.is_unstored_identity());
        assert_eq!(&o[..], &[b(0), b(1), b(2), b(3), b(4), b(9)]);
    }

    #[test]
    fn a_write_stores_the_list_first() {
        let mut o: EntityOrder<Inst> = (0..4).map(Inst::from_u32).collect();
        assert!(o.is_unstored_identity());
        o.swap(0, 3);
        assert!(!o.is_unstored_identity());
        let got: Vec<u32> = o.iter().map(|i| i.as_u32()).collect();
        assert_eq!(got, [3, 1, 2, 0]);
    }

    #[test]
    fn ranges_in_order_stay_the_identity_up_to_the_table() {
        let mut o = EntityOrder::<Inst>::new();
        o.extend_range(Inst::from_u32(0), 10);
        o.extend_range(Inst::from_u32(10), IDENTITY_LEN - 10);
        assert!(o.is_unstored_identity());
        assert_eq!(o.len(), IDENTITY_LEN);
        // Past the table's end the list is stored, and reads the same.
        o.extend_range(Inst::from_u32(IDENTITY_LEN as u32), 3);
        assert!(!o.is_unstored_identity());
        assert!(o.iter().enumerate().all(|(k, i)| i.as_u32() == k as u32));
        assert_eq!(o.len(), IDENTITY_LEN + 3);
    }

    #[test]
    fn a_range_that_skips_is_stored() {
        let mut o = EntityOrder::<Inst>::new();
        o.extend_range(Inst::from_u32(0), 2);
        o.extend_range(Inst::from_u32(5), 2);
        let got: Vec<u32> = o.iter().map(|i| i.as_u32()).collect();
        assert_eq!(got, [0, 1, 5, 6]);
        o.clear();
        assert!(o.is_empty());
    }
}
