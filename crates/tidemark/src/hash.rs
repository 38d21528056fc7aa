//! The item hash: one 64-bit hash everywhere, recorded in every serialized summary.
//!
//! Sketches built with different hashes (or the same hash under different seeds) look alike
//! and merge without complaint into garbage: the merged distinct count of two services that
//! hash the same users differently roughly doubles. So every summary carries an
//! [`ItemHasher`], its hash id and seed are written into the envelope ([`crate::codec`]), and
//! every merge compares them first.
//!
//! Two hashes exist:
//!
//! - [`HashId::Xxh3`]: xxh3-64 with [`DEFAULT_SEED`]. Fast on short keys and well mixed in
//!   every bit, which HyperLogLog (rank from the high bits, index from the low ones) and
//!   Count-Min (several rows from one hash) both rely on.
//! - [`HashId::Murmur64A`]: Austin Appleby's MurmurHash64A, the hash Redis feeds its
//!   HyperLogLogs with (seed [`REDIS_SEED`]); used only for summaries built in Redis mode.
//!
//! ```
//! use tidemark::hash::{HashId, ItemHasher};
//!
//! let h = ItemHasher::default();
//! assert_eq!(h.id(), HashId::Xxh3);
//! assert_eq!(h.hash(b"alice"), h.hash(b"alice"));
//! assert_ne!(h.hash(b"alice"), h.hash(b"bob"));
//! // Another seed is another hash: summaries built with it must not merge with ours.
//! assert_ne!(ItemHasher::xxh3(1).hash(b"alice"), h.hash(b"alice"));
//! ```

use core::fmt;

/// The fixed seed of tidemark's native hash: the bytes of "tidemark", little-endian.
pub const DEFAULT_SEED: u64 = u64::from_le_bytes(*b"tidemark");

/// The seed Redis passes to MurmurHash64A for its HyperLogLogs.
pub const REDIS_SEED: u64 = 0xadc8_3b19;

/// Which hash function a summary was built with. The discriminant is the byte stored in
/// the envelope; never renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HashId {
    /// xxh3-64 (the native hash).
    Xxh3 = 1,
    /// MurmurHash64A (Redis mode).
    Murmur64A = 2,
}

impl HashId {
    /// The byte stored in the envelope.
    pub fn to_byte(self) -> u8 {
        self as u8
    }

    /// The hash id of a stored byte, or `None` for a byte no version ever wrote.
    pub fn from_byte(b: u8) -> Option<HashId> {
        match b {
            1 => Some(HashId::Xxh3),
            2 => Some(HashId::Murmur64A),
            _ => None,
        }
    }
}

impl fmt::Display for HashId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HashId::Xxh3 => "xxh3-64",
            HashId::Murmur64A => "murmur64a",
        })
    }
}

/// A hash function and its seed: what a summary hashes its items with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ItemHasher {
    id: HashId,
    seed: u64,
}

impl Default for ItemHasher {
    /// xxh3-64 with [`DEFAULT_SEED`].
    fn default() -> Self {
        ItemHasher::xxh3(DEFAULT_SEED)
    }
}

impl ItemHasher {
    /// xxh3-64 with the given seed.
    pub fn xxh3(seed: u64) -> Self {
        ItemHasher {
            id: HashId::Xxh3,
            seed,
        }
    }

    /// MurmurHash64A with Redis's seed, as Redis hashes PFADD's elements.
    pub fn redis() -> Self {
        ItemHasher {
            id: HashId::Murmur64A,
            seed: REDIS_SEED,
        }
    }

    /// Any hash id and seed, as read back from an envelope.
    pub fn new(id: HashId, seed: u64) -> Self {
        ItemHasher { id, seed }
    }

    /// The hash function.
    pub fn id(&self) -> HashId {
        self.id
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The 64-bit hash of an item's bytes.
    #[inline]
    pub fn hash(&self, item: &[u8]) -> u64 {
        match self.id {
            HashId::Xxh3 => xxhash_rust::xxh3::xxh3_64_with_seed(item, self.seed),
            HashId::Murmur64A => murmur64a(item, self.seed),
        }
    }

    /// The hash of a `u64` item, hashed as its 8 little-endian bytes (so `hash_u64(x)` equals
    /// `hash(&x.to_le_bytes())`, whichever way the item reached us).
    #[inline]
    pub fn hash_u64(&self, item: u64) -> u64 {
        self.hash(&item.to_le_bytes())
    }
}

/// MurmurHash64A (Austin Appleby, public domain), written from its published description:
/// 8-byte little-endian blocks multiplied into the state, the 1..7 tail bytes folded in, and
/// a final avalanche.
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().expect("chunks_exact gives 8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_ids_round_trip_through_their_byte() {
        for id in [HashId::Xxh3, HashId::Murmur64A] {
            assert_eq!(HashId::from_byte(id.to_byte()), Some(id));
        }
        assert_eq!(HashId::from_byte(0), None);
        assert_eq!(HashId::from_byte(3), None);
    }

    #[test]
    fn u64_items_hash_as_their_little_endian_bytes() {
        let h = ItemHasher::default();
        for x in [0u64, 1, 0xdead_beef, u64::MAX] {
            assert_eq!(h.hash_u64(x), h.hash(&x.to_le_bytes()));
        }
    }

    #[test]
    fn murmur64a_tail_lengths_all_differ() {
        // Each tail length takes a different path; a slip in the tail (a wrong shift) would
        // make prefixes collide.
        let data = b"abcdefghijklmnop";
        let hashes: Vec<u64> = (0..=16)
            .map(|n| murmur64a(&data[..n], REDIS_SEED))
            .collect();
        for i in 0..hashes.len() {
            for j in 0..i {
                assert_ne!(hashes[i], hashes[j], "lengths {i} and {j} collide");
            }
        }
    }

    #[test]
    fn murmur64a_empty_input_is_the_avalanched_seed() {
        // With no data, h = seed ^ 0 and only the final avalanche runs: compute it by hand.
        const M: u64 = 0xc6a4_a793_5bd1_e995;
        let mut h = REDIS_SEED;
        h ^= h >> 47;
        h = h.wrapping_mul(M);
        h ^= h >> 47;
        assert_eq!(murmur64a(b"", REDIS_SEED), h);
    }
}
