//! The two small representations: an exact set of item hashes and a sparse map of
//! (register index, rank) at the sparse precision. Both are open-addressing tables with
//! linear probing, so an insert is one or two cache lines whatever the size.

use crate::codec::{Reader, Writer};
use crate::DecodeError;

/// The precision of the sparse representation: 2^25 registers, so that a sparse sketch's
/// estimate (standard error 1.04/√2^25 ≈ 0.018%) is near-exact, as in HLL++.
pub const SPARSE_PRECISION: u8 = 25;

/// The smallest table.
const MIN_CAPACITY: usize = 4;

/// Whether a table of `len` entries at `capacity` must grow before another insert: the load
/// stays at most 1/2. Linear probing inserts a new key in about (1 + 1/(1 − α)²)/2 probes:
/// 2.5 at α = 1/2 but 8.5 at 3/4, and the exact form inserts mostly new keys.
#[inline]
fn must_grow(len: usize, capacity: usize) -> bool {
    2 * (len + 1) > capacity
}

/// The capacity (a power of two, at least [`MIN_CAPACITY`]) a table of `len` entries needs.
pub(crate) fn capacity_for(len: usize) -> usize {
    let mut cap = MIN_CAPACITY;
    while 2 * len > cap {
        cap *= 2;
    }
    cap
}

/// A set of 64-bit item hashes. Hash 0 is kept in a flag, so a zero slot means empty.
#[derive(Clone, Debug)]
pub(crate) struct ExactSet {
    slots: Vec<u64>,
    has_zero: bool,
    len: usize,
}

impl ExactSet {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        debug_assert!(capacity.is_power_of_two() && capacity >= MIN_CAPACITY);
        ExactSet {
            slots: vec![0; capacity],
            has_zero: false,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.len() * 8
    }

    /// Whether the next insert of a new hash would need a larger table.
    pub(crate) fn full(&self) -> bool {
        must_grow(self.len, self.slots.len())
    }

    /// The table of `factor` (a power of two) times the capacity.
    pub(crate) fn grown(&self, factor: usize) -> ExactSet {
        self.resized(self.slots.len() * factor)
    }

    /// The same hashes in a table of `capacity` slots (a power of two, at least
    /// [`capacity_for`] the length).
    pub(crate) fn resized(&self, capacity: usize) -> ExactSet {
        debug_assert!(capacity >= capacity_for(self.len));
        let mut t = ExactSet::with_capacity(capacity);
        for h in self.iter() {
            t.insert(h);
        }
        t
    }

    #[inline]
    fn home(&self, h: u64) -> usize {
        // The top bits: the low bits are the register index, which may be shared by many
        // hashes of a folded sketch; the top bits are uniform either way.
        (h >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    /// Inserts a hash; true if it was new. The caller grows the table first when
    /// [`ExactSet::full`].
    #[inline]
    pub(crate) fn insert(&mut self, h: u64) -> bool {
        if h == 0 {
            let new = !self.has_zero;
            self.has_zero = true;
            self.len += new as usize;
            return new;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        loop {
            let s = self.slots[i];
            if s == h {
                return false;
            }
            if s == 0 {
                self.slots[i] = h;
                self.len += 1;
                return true;
            }
            i = (i + 1) & mask;
        }
    }

    /// Whether the set holds `h`.
    #[inline]
    pub(crate) fn contains(&self, h: u64) -> bool {
        if h == 0 {
            return self.has_zero;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        loop {
            let s = self.slots[i];
            if s == h {
                return true;
            }
            if s == 0 {
                return false;
            }
            i = (i + 1) & mask;
        }
    }

    /// The hashes, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.has_zero
            .then_some(0)
            .into_iter()
            .chain(self.slots.iter().copied().filter(|&s| s != 0))
    }
}

/// Writes an exact set as the envelopes keep it: its count (u64), then its hashes (u64) in
/// increasing order, so that equal sets encode to equal bytes.
pub(crate) fn write_hashes(w: &mut Writer, set: &ExactSet) {
    // Sized up front: a filtered iterator over the table's slots gives no length, and a
    // pipeline writes one of these at every bucket's close.
    let mut hs = Vec::with_capacity(set.len());
    hs.extend(set.iter());
    hs.sort_unstable();
    w.u64(hs.len() as u64);
    for h in hs {
        w.u64(h);
    }
}

/// Reads what [`write_hashes`] wrote, refusing a count whose table (load ≤ 1/2, 8 bytes a
/// slot) would take more than `max_table_bytes` before allocating it, and hashes out of order.
pub(crate) fn read_hashes(
    r: &mut Reader<'_>,
    max_table_bytes: usize,
) -> Result<ExactSet, DecodeError> {
    let off = r.offset();
    let n = r.count("hashes", 8, u64::MAX)?;
    let cap = capacity_for(n);
    if 8 * cap > max_table_bytes {
        return Err(Reader::invalid(
            "hashes",
            off,
            "no more than the exact form holds at this precision",
            n as u64,
        ));
    }
    let mut set = ExactSet::with_capacity(cap);
    let mut prev: Option<u64> = None;
    for _ in 0..n {
        let off = r.offset();
        let h = r.u64("hash")?;
        if prev.is_some_and(|q| h <= q) {
            return Err(Reader::invalid("hash", off, "strictly increasing", h));
        }
        prev = Some(h);
        set.insert(h);
    }
    Ok(set)
}

/// A map from sparse register index (`SPARSE_PRECISION` bits) to rank, stored one `u32` per
/// entry as `index << 6 | rank` (rank ≥ 1, so a zero slot means empty).
#[derive(Clone, Debug)]
pub(crate) struct SparseMap {
    slots: Vec<u32>,
    len: usize,
}

impl SparseMap {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        debug_assert!(capacity.is_power_of_two() && capacity >= MIN_CAPACITY);
        SparseMap {
            slots: vec![0; capacity],
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.len() * 4
    }

    pub(crate) fn full(&self) -> bool {
        must_grow(self.len, self.slots.len())
    }

    pub(crate) fn grown(&self) -> SparseMap {
        let mut t = SparseMap::with_capacity(self.slots.len() * 2);
        for (i, r) in self.iter() {
            t.update(i, r);
        }
        t
    }

    #[inline]
    fn home(&self, index: u32) -> usize {
        // Fibonacci hashing spreads the 25-bit index over the table.
        (index.wrapping_mul(0x9e37_79b9) >> (32 - self.slots.len().trailing_zeros())) as usize
    }

    /// Raises the rank of `index` to at least `rank`. Returns the previous rank (0 when the
    /// index was absent) if the map changed, `None` if it did not. The caller grows the table
    /// first when [`SparseMap::full`].
    #[inline]
    pub(crate) fn update(&mut self, index: u32, rank: u8) -> Option<u8> {
        debug_assert!(index < 1 << SPARSE_PRECISION && (1..64).contains(&rank));
        let mask = self.slots.len() - 1;
        let mut i = self.home(index);
        loop {
            let s = self.slots[i];
            if s == 0 {
                self.slots[i] = index << 6 | rank as u32;
                self.len += 1;
                return Some(0);
            }
            if s >> 6 == index {
                let old = (s & 63) as u8;
                if rank > old {
                    self.slots[i] = index << 6 | rank as u32;
                    return Some(old);
                }
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    /// The rank of `index`, 0 when absent.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> u8 {
        let mask = self.slots.len() - 1;
        let mut i = self.home(index);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return 0;
            }
            if s >> 6 == index {
                return (s & 63) as u8;
            }
            i = (i + 1) & mask;
        }
    }

    /// The (index, rank) entries, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u8)> + '_ {
        self.slots
            .iter()
            .filter(|&&s| s != 0)
            .map(|&s| (s >> 6, (s & 63) as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    #[test]
    fn exact_set_matches_a_hash_set() {
        let mut set = ExactSet::with_capacity(4);
        let mut model = HashSet::new();
        let mut x = 1u64;
        for step in 0..5_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Repeats, zero, and hashes differing only in low bits.
            let h = match step % 5 {
                0 => 0,
                1 => x >> 50,
                _ => x,
            };
            if set.full() {
                set = set.grown(if step % 2 == 0 { 2 } else { 4 });
            }
            assert_eq!(set.insert(h), model.insert(h));
            assert_eq!(set.len(), model.len());
        }
        for &h in &model {
            assert!(set.contains(h));
        }
        let got: HashSet<u64> = set.iter().collect();
        assert_eq!(got, model);
        assert!(2 * set.len() <= set.capacity());
        assert!(set.capacity() <= 8 * capacity_for(set.len()));
    }

    #[test]
    fn sparse_map_keeps_the_maximum_rank_per_index() {
        let mut map = SparseMap::with_capacity(4);
        let mut model: HashMap<u32, u8> = HashMap::new();
        let mut x = 3u64;
        for _ in 0..5_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let index = ((x >> 20) % 3_000) as u32 * 9_973 % (1 << SPARSE_PRECISION);
            let rank = (x % 40) as u8 + 1;
            if map.full() {
                map = map.grown();
            }
            let old = model.get(&index).copied().unwrap_or(0);
            let changed = map.update(index, rank);
            if rank > old {
                assert_eq!(changed, Some(old));
                model.insert(index, rank);
            } else {
                assert_eq!(changed, None);
            }
        }
        let got: HashMap<u32, u8> = map.iter().collect();
        assert_eq!(got, model);
        assert_eq!(map.len(), model.len());
    }

    #[test]
    fn capacity_for_keeps_the_load_at_most_three_quarters() {
        for len in 0..1000 {
            let c = capacity_for(len);
            assert!(c.is_power_of_two() && 2 * len <= c);
            assert!(c == MIN_CAPACITY || 2 * len > c / 2);
        }
    }
}
