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
            HashId::Xxh3 => match <[u8; 8]>::try_from(item) {
                // Eight bytes (a u64, an IPv4 pair, a timestamp) take the inlined path.
                Ok(eight) => xxh3_eight(u64::from_le_bytes(eight), self.seed),
                Err(_) => xxhash_rust::xxh3::xxh3_64_with_seed(item, self.seed),
            },
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

/// XXH3-64 of exactly eight bytes (`x` little-endian) with `seed`, written from the XXH3
/// specification's 4-to-8-byte path so that it inlines where it is used (the library call
/// does not cross the crate boundary, and its length dispatch is most of an 8-byte hash):
/// the seed's low half, byte-swapped, is folded into its high half; the two 4-byte halves
/// of the input, swapped, are XORed with two words of the default secret minus the seed;
/// then the "rrmxmx" finalizer. Equal to `xxh3_64_with_seed(&x.to_le_bytes(), seed)` (a
/// test checks it against the library).
#[inline(always)]
fn xxh3_eight(x: u64, seed: u64) -> u64 {
    // The default secret's words at bytes 8 and 16, XORed.
    const SECRET_8_XOR_16: u64 = 0x1cad_21f7_2c81_017c ^ 0xdb97_9083_e96d_d4de;
    const MX2: u64 = 0x9fb2_1c65_1e98_df25;
    let seed = seed ^ ((seed as u32).swap_bytes() as u64) << 32;
    let bitflip = SECRET_8_XOR_16.wrapping_sub(seed);
    let mut h = x.rotate_left(32) ^ bitflip;
    h ^= h.rotate_left(49) ^ h.rotate_left(24);
    h = h.wrapping_mul(MX2);
    h ^= (h >> 35).wrapping_add(8);
    h = h.wrapping_mul(MX2);
    h ^ (h >> 28)
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

/// The identifier of the row-hash family below, recorded in Count-Min encodings so that a
/// future family can never be mistaken for this one. (1 was Carter–Wegman mod `2^61 − 1`,
/// written by an earlier build of format version 1 and no longer read.)
pub(crate) const PAIRWISE_FAMILY_ID: u8 = 2;

/// The identifier of the multiply-shift rows over an item hash
/// ([`PairwiseHash::multiply_shift`]), recorded in Count-Min encodings like
/// [`PAIRWISE_FAMILY_ID`].
pub(crate) const MULTIPLY_SHIFT_FAMILY_ID: u8 = 3;

/// One function of the multiply-add-shift family on 64-bit keys split into two 32-bit
/// halves, `h(x) = ⌊((a·x_lo + b·x_hi + c) mod 2^64) / 2^32⌋` with `a`, `b`, `c` 64-bit,
/// mapped onto `w` columns by `⌊h·w / 2^32⌋`: the pairwise-independent family of Count-Min's
/// rows.
///
/// # Pairwise independence
///
/// Dietzfelbinger ("Universal hashing and k-wise independent random variables via integer
/// arithmetic without primes", STACS 1996; Thorup, "High speed hashing for integers and
/// strings", 2015, §3.3) shows that for keys that are vectors of `k`-bit characters, `w̄`-bit
/// arithmetic with `w̄ ≥ k + l − 1`, and multipliers and offset uniform in `[0, 2^w̄)`,
/// `x ↦ ((Σ a_i·x_i + c) mod 2^w̄) >> (w̄ − l)` is *strongly universal*: for two distinct keys
/// the pair of `l`-bit outputs is uniform over all `2^2l` pairs. Here the characters are the
/// two 32-bit halves of the key, `k = l = 32` and `w̄ = 64 ≥ 63`. The columns come from a
/// multiply-shift (`⌊h·w/2^32⌋`), which gives each column `⌊2^32/w⌋` or `⌈2^32/w⌉` of the `2^32`
/// outputs, so two distinct keys share a column with probability at most `⌈2^32/w⌉/2^32`
/// (exactly `1/w` for a power-of-two `w`, and within a factor `1 + w/2^32 ≤ 1 + 2^−6` of it
/// for any `w ≤ 2^26`). That collision probability is the only property Count-Min's analysis
/// uses (Cormode and Muthukrishnan need `Pr[h(x) = h(y)] ≤ 1/w`, i.e. `ε/e`); tidemark's
/// sketches report `ε = e·⌈2^32/w⌉/2^32` so that their bounds are exact.
///
/// Carter and Wegman's `((a·x + b) mod (2^61 − 1))` is the textbook alternative; this family
/// needs two plain 64-bit multiplications and no modular reduction, and measured several times
/// faster per row on this machine (`row_hash` in `benches/benches/countmin.rs`), which is most
/// of an update's cost.
///
/// Keys are the item's 64-bit hash for [`crate::frequency::CountMin`], and the integer
/// prefixes themselves for the layers of [`crate::frequency::DyadicCountMin`] (the paper's
/// setting: a pairwise family applied to the integer item).
///
/// # Deriving the coefficients
///
/// A sketch stores only its hasher's seed: the `d` triples are drawn from SplitMix64 seeded
/// with the seed mixed with a stream number (0 for a plain Count-Min sketch, `1 + layer` for a
/// dyadic layer) — see [`PairwiseHash::rows`]. Two sketches with the same seed, stream and
/// depth have the same functions; merging compares the coefficients themselves.
///
/// ```
/// use tidemark::hash::PairwiseHash;
///
/// let rows = PairwiseHash::rows(7, 0, 3);
/// assert_eq!(rows.len(), 3);
/// for h in &rows {
///     assert!(h.column(12345, 100) < 100);
/// }
/// assert_eq!(rows, PairwiseHash::rows(7, 0, 3));
/// assert_ne!(rows, PairwiseHash::rows(8, 0, 3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PairwiseHash {
    a: u64,
    b: u64,
    c: u64,
}

impl PairwiseHash {
    /// The function with multipliers `a` (low half), `b` (high half) and offset `c`.
    pub fn new(a: u64, b: u64, c: u64) -> PairwiseHash {
        PairwiseHash { a, b, c }
    }

    /// The `d` row functions for `seed` and `stream`, drawn deterministically.
    pub fn rows(seed: u64, stream: u64, d: usize) -> Vec<PairwiseHash> {
        let mut state = seed ^ stream.wrapping_add(1).wrapping_mul(0xd1b5_4a32_d192_ed03);
        (0..d)
            .map(|_| PairwiseHash {
                a: splitmix64(&mut state),
                b: splitmix64(&mut state),
                c: splitmix64(&mut state),
            })
            .collect()
    }

    /// The coefficients `(a, b, c)`.
    pub fn coefficients(&self) -> (u64, u64, u64) {
        (self.a, self.b, self.c)
    }

    /// `⌊((a·x_lo + b·x_hi + c) mod 2^64) / 2^32⌋`, a 32-bit value.
    #[inline]
    pub fn value(&self, x: u64) -> u32 {
        let lo = x & 0xffff_ffff;
        let hi = x >> 32;
        (self
            .a
            .wrapping_mul(lo)
            .wrapping_add(self.b.wrapping_mul(hi))
            .wrapping_add(self.c)
            >> 32) as u32
    }

    /// `⌊((a | 1)·x mod 2^64) / 2^32⌋`: Dietzfelbinger's multiply-shift with this function's
    /// multiplier made odd, one multiplication where [`PairwiseHash::value`] takes two.
    ///
    /// Meant for keys that already are uniform 64-bit item hashes: `x ↦ (a | 1)·x mod 2^64`
    /// is a bijection, so the value of a uniform key is uniform, and two items' values are
    /// independent because their hashes are. Rows with different multipliers are then
    /// different views of one hash (their joint behaviour is heuristic, as for any rows
    /// derived from one hash); keys that are not hashes (a dyadic layer's integers) need the
    /// pairwise family.
    #[inline]
    pub fn multiply_shift(&self, x: u64) -> u32 {
        (x.wrapping_mul(self.odd_multiplier()) >> 32) as u32
    }

    /// The odd multiplier of [`PairwiseHash::multiply_shift`], `a | 1`.
    #[inline]
    pub fn odd_multiplier(&self) -> u64 {
        self.a | 1
    }

    /// The column of `x` among `w ≤ 2^32`: `⌊value(x)·w / 2^32⌋`, in `[0, w)`.
    #[inline]
    pub fn column(&self, x: u64, w: usize) -> usize {
        ((self.value(x) as u64 * w as u64) >> 32) as usize
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
    fn the_eight_byte_path_is_the_library_xxh3() {
        let mut state = 7u64;
        let mut values = vec![0u64, 1, u64::MAX, 0x8000_0000_0000_0000, 0xffff_ffff];
        values.extend((0..10_000).map(|_| splitmix64(&mut state)));
        for seeds in values.chunks(2) {
            let (x, seed) = (seeds[0], *seeds.last().unwrap());
            for s in [seed, 0, DEFAULT_SEED] {
                let library = xxhash_rust::xxh3::xxh3_64_with_seed(&x.to_le_bytes(), s);
                assert_eq!(xxh3_eight(x, s), library, "x = {x:#x}, seed = {s:#x}");
                assert_eq!(ItemHasher::new(HashId::Xxh3, s).hash_u64(x), library);
            }
        }
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
    fn pairwise_value_is_the_high_half_of_a_wrapping_affine_map() {
        // Checked against exact 128-bit arithmetic reduced mod 2^64.
        let h = PairwiseHash::new(u64::MAX - 2, 0x8000_0000_0000_0001, u64::MAX);
        for x in [0u64, 1, 2, 0xdead_beef, 0xffff_ffff_0000_0001, u64::MAX] {
            let (lo, hi) = ((x & 0xffff_ffff) as u128, (x >> 32) as u128);
            let exact =
                (u64::MAX - 2) as u128 * lo + 0x8000_0000_0000_0001u128 * hi + u64::MAX as u128;
            let want = ((exact % (1u128 << 64)) >> 32) as u32;
            assert_eq!(h.value(x), want, "x = {x:#x}");
        }
        assert_eq!(PairwiseHash::new(0, 0, 7 << 32).value(123), 7);
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
