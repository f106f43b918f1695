//! Hashing in one place: the hash maps of the mid-end and the finishing step of every hash the
//! passes compute themselves (merge's function hashes, LVN's key hash).
//!
//! A hash is only ever a filter: every table keyed by a hash confirms equality on the real key
//! (token streams, key words, the comparator). The `degenerate-hash` feature, for tests only,
//! proves it: it maps every hash to one of four values, so any place that took equal hashes for
//! equal keys merges or numbers wrongly, and the test suite and the fuzzer see it.

use core::hash::{BuildHasher, Hasher};

/// Whether this build maps every hash to a handful of values (the `degenerate-hash` feature).
pub const DEGENERATE: bool = cfg!(feature = "degenerate-hash");

/// The last step of every hash a pass computes: the identity, or under `degenerate-hash` one
/// of four values (spread over the high and low bits, so open-addressing tables still index).
#[inline(always)]
pub fn finish(h: u64) -> u64 {
    if DEGENERATE {
        (h & 3).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    } else {
        h
    }
}

/// The hasher of the mid-end's hash maps: FxHash, finished by [`finish`].
#[derive(Clone, Default)]
pub struct MidHasher(rustc_hash::FxHasher);

impl Hasher for MidHasher {
    #[inline]
    fn finish(&self) -> u64 {
        finish(self.0.finish())
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes)
    }
    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.0.write_u8(x)
    }
    #[inline]
    fn write_u16(&mut self, x: u16) {
        self.0.write_u16(x)
    }
    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.0.write_u32(x)
    }
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0.write_u64(x)
    }
    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.0.write_usize(x)
    }
}

/// Builds [`MidHasher`]s.
#[derive(Clone, Copy, Default)]
pub struct MidBuildHasher;

impl BuildHasher for MidBuildHasher {
    type Hasher = MidHasher;
    #[inline]
    fn build_hasher(&self) -> MidHasher {
        MidHasher::default()
    }
}

/// A hash map of the mid-end (FxHash; degenerate under the `degenerate-hash` feature).
pub type HashMap<K, V> = std::collections::HashMap<K, V, MidBuildHasher>;
/// A hash set of the mid-end.
pub type HashSet<K> = std::collections::HashSet<K, MidBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    /// Normal builds finish a hash as it is; `degenerate-hash` builds squeeze every hash into
    /// four values (so the suite run with the feature really meets collisions).
    #[test]
    fn finish_is_identity_or_four_values() {
        let outs: HashSet<u64> = (0..1000u64)
            .map(|x| finish(x.wrapping_mul(0x2545_f491_4f6c_dd1d)))
            .collect();
        if DEGENERATE {
            assert!(outs.len() <= 4, "{} distinct values", outs.len());
        } else {
            assert_eq!(outs.len(), 1000);
        }
    }
}
