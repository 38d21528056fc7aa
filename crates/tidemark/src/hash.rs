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

/// The Mersenne prime `p = 2^61 − 1`, the modulus of Count-Min's row hashes.
pub const MERSENNE_61: u64 = (1 << 61) - 1;

/// The identifier of the row-hash family below, recorded in Count-Min encodings so that a
/// future family can never be mistaken for this one.
pub const PAIRWISE_FAMILY_ID: u8 = 1;

/// One function of the Carter–Wegman family `h(x) = ((a·x + b) mod p)` with `p = 2^61 − 1`,
/// `a ∈ [1, p)` and `b ∈ [0, p)`, mapped onto `w` columns by `⌊h·w / 2^61⌋`.
///
/// # Pairwise independence
///
/// For two distinct keys `x ≠ y` of `[0, p)`, the map `(a, b) ↦ (a·x + b, a·y + b) mod p` is a
/// bijection from `[1, p) × [0, p)` onto the pairs of *distinct* residues (the system
/// `a·(x − y) = u − v` has exactly one solution `a` when `u ≠ v`, since `p` is prime). So with
/// `(a, b)` uniform, `(h(x), h(y))` is uniform over distinct pairs — the family is pairwise
/// independent in Carter and Wegman's sense — and two keys share a column with probability at
/// most `⌈2^61/w⌉ / (p − 1) ≈ 1/w` (each column receives at most `⌈2^61/w⌉` residues). That
/// collision probability is the only property Count-Min's analysis uses (Cormode and
/// Muthukrishnan need `Pr[h(x) = h(y)] ≤ 1/w`; with `w = ⌈e/ε⌉` that is `ε/e`).
///
/// Keys are `u64`. A key of `[0, p)` is used as is (the dyadic layers of
/// [`crate::frequency::DyadicCountMin`] feed integer prefixes below `2^60` directly); a larger
/// key — a 64-bit item hash — is first folded into `[0, p)`, so two item hashes that agree
/// modulo `p` (probability about `2^−61`) collide in every row.
///
/// The columns come from a multiply-shift (`⌊h·w/2^61⌋`) rather than `h mod w`: it costs a
/// multiplication instead of a division and keeps each column's share of residues within one
/// of `2^61/w`, which is what the bound above needs.
///
/// # Deriving `a` and `b`
///
/// A sketch stores only its hasher's seed: the `d` pairs are drawn from SplitMix64 seeded with
/// the seed mixed with a stream number (0 for a plain Count-Min sketch, `1 + layer` for a
/// dyadic layer) — see [`PairwiseHash::rows`]. The draws reduce 64-bit outputs modulo `p − 1`
/// and `p`, which skews any value's probability by at most `2^−61` relative: negligible. Two sketches with the same seed, stream and depth have the same functions;
/// merging compares the coefficients themselves.
///
/// ```
/// use tidemark::hash::{PairwiseHash, MERSENNE_61};
///
/// let rows = PairwiseHash::rows(7, 0, 3);
/// assert_eq!(rows.len(), 3);
/// for h in &rows {
///     assert!(h.column(12345, 100) < 100);
///     assert!(h.value(12345) < MERSENNE_61);
/// }
/// assert_eq!(rows, PairwiseHash::rows(7, 0, 3));
/// assert_ne!(rows, PairwiseHash::rows(8, 0, 3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PairwiseHash {
    a: u64,
    b: u64,
}

impl PairwiseHash {
    /// The function with coefficients `a` (in `[1, p)`) and `b` (in `[0, p)`), or `None`
    /// outside those ranges.
    pub fn new(a: u64, b: u64) -> Option<PairwiseHash> {
        ((1..MERSENNE_61).contains(&a) && b < MERSENNE_61).then_some(PairwiseHash { a, b })
    }

    /// The `d` row functions for `seed` and `stream`, drawn deterministically.
    pub fn rows(seed: u64, stream: u64, d: usize) -> Vec<PairwiseHash> {
        let mut state = seed ^ stream.wrapping_add(1).wrapping_mul(0xd1b5_4a32_d192_ed03);
        (0..d)
            .map(|_| {
                let a = 1 + splitmix64(&mut state) % (MERSENNE_61 - 1);
                let b = splitmix64(&mut state) % MERSENNE_61;
                PairwiseHash { a, b }
            })
            .collect()
    }

    /// The multiplier `a`.
    pub fn a(&self) -> u64 {
        self.a
    }

    /// The offset `b`.
    pub fn b(&self) -> u64 {
        self.b
    }

    /// `(a·x + b) mod p`, after folding `x` into `[0, p)`.
    #[inline]
    pub fn value(&self, x: u64) -> u64 {
        let x = fold61(x);
        let v = (self.a as u128) * (x as u128) + self.b as u128;
        // v < 2^122: fold the high bits down twice (2^61 ≡ 1 mod p), then one subtraction.
        let r = (v as u64 & MERSENNE_61) as u128 + (v >> 61);
        let r = (r as u64 & MERSENNE_61) + (r >> 61) as u64;
        if r >= MERSENNE_61 {
            r - MERSENNE_61
        } else {
            r
        }
    }

    /// The column of `x` among `w`: `⌊value(x)·w / 2^61⌋`, in `[0, w)`.
    #[inline]
    pub fn column(&self, x: u64, w: usize) -> usize {
        ((self.value(x) as u128 * w as u128) >> 61) as usize
    }
}

/// `x mod (2^61 − 1)`.
#[inline]
fn fold61(x: u64) -> u64 {
    let r = (x & MERSENNE_61) + (x >> 61);
    if r >= MERSENNE_61 {
        r - MERSENNE_61
    } else {
        r
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): the generator that derives row coefficients.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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

    #[test]
    fn pairwise_value_matches_exact_modular_arithmetic() {
        let h = PairwiseHash::new(MERSENNE_61 - 2, MERSENNE_61 - 1).unwrap();
        for x in [
            0u64,
            1,
            2,
            MERSENNE_61 - 1,
            MERSENNE_61,
            u64::MAX,
            0x1234_5678_9abc,
        ] {
            let xr = x as u128 % MERSENNE_61 as u128;
            let want = (h.a() as u128 * xr + h.b() as u128) % MERSENNE_61 as u128;
            assert_eq!(h.value(x) as u128, want, "x = {x}");
        }
        assert!(PairwiseHash::new(0, 1).is_none());
        assert!(PairwiseHash::new(1, MERSENNE_61).is_none());
    }

    #[test]
    fn pairwise_columns_collide_about_one_in_w() {
        // Over 2,000 random functions, keys 1 and 2 share one of w = 50 columns with
        // probability ≈ 1/50: expected 40 collisions, σ ≈ 6.3; accept within 5σ.
        let mut collisions = 0;
        for f in PairwiseHash::rows(99, 0, 2_000) {
            if f.column(1, 50) == f.column(2, 50) {
                collisions += 1;
            }
        }
        assert!((8..=72).contains(&collisions), "{collisions}");
    }
}
