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

/// Where a table's slots start probing: the one thing that differs between the two tables.
trait Layout {
    /// A slot's contents; zero means empty.
    type Slot: Copy + Eq + Default;
    /// The slot a key's probe starts at, in a table of `2^bits` slots. Keys are compared
    /// with [`Table::find`]'s `matches`; `home` must agree for slots that match.
    fn home(slot: Self::Slot, bits: u32) -> usize;
}

/// An open-addressing table with linear probing and load at most 1/2 ([`must_grow`]): the
/// storage and probing the exact set and the sparse map share.
#[derive(Clone, Debug)]
struct Table<L: Layout> {
    slots: Vec<L::Slot>,
    len: usize,
}

impl<L: Layout> Table<L> {
    fn with_capacity(capacity: usize) -> Self {
        debug_assert!(capacity.is_power_of_two() && capacity >= MIN_CAPACITY);
        Table {
            slots: vec![L::Slot::default(); capacity],
            len: 0,
        }
    }

    /// Whether the next new key would need a larger table.
    #[inline]
    fn full(&self) -> bool {
        must_grow(self.len, self.slots.len())
    }

    fn heap_bytes(&self) -> usize {
        self.slots.len() * core::mem::size_of::<L::Slot>()
    }

    /// Probes from `key`'s home: `Ok` with the first slot `matches` accepts, or `Err` with
    /// the empty slot that ends the probe (where the key goes). Empty slots never match.
    #[inline]
    fn find(&self, key: L::Slot, matches: impl Fn(L::Slot) -> bool) -> Result<usize, usize> {
        let mask = self.slots.len() - 1;
        let mut i = L::home(key, self.slots.len().trailing_zeros());
        loop {
            let s = self.slots[i];
            if s == L::Slot::default() {
                return Err(i);
            }
            if matches(s) {
                return Ok(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Fills the empty slot `i` (as [`Table::find`] returned it).
    #[inline]
    fn fill(&mut self, i: usize, slot: L::Slot) {
        self.slots[i] = slot;
        self.len += 1;
    }

    /// The same slots in a table of `capacity` (a power of two, at least [`capacity_for`] the
    /// length), inserted in slot order.
    fn resized(&self, capacity: usize) -> Self {
        debug_assert!(capacity >= capacity_for(self.len));
        let mut t = Table::with_capacity(capacity);
        for s in self.occupied() {
            // Keys are distinct: each goes to the first empty slot of its probe.
            let Err(i) = t.find(s, |_| false) else {
                unreachable!("nothing matches")
            };
            t.fill(i, s);
        }
        t
    }

    /// The occupied slots, in slot order.
    fn occupied(&self) -> impl Iterator<Item = L::Slot> + '_ {
        self.slots
            .iter()
            .copied()
            .filter(|&s| s != L::Slot::default())
    }
}

/// The exact set's slots: hashes, probed from their top bits.
#[derive(Clone, Debug)]
struct Hashes;

impl Layout for Hashes {
    type Slot = u64;
    #[inline]
    fn home(h: u64, bits: u32) -> usize {
        // The top bits: the low bits are the register index, which may be shared by many
        // hashes of a folded sketch; the top bits are uniform either way.
        (h >> (64 - bits)) as usize
    }
}

/// The sparse map's slots: `index << 6 | rank`, probed from the index.
#[derive(Clone, Debug)]
struct Entries;

impl Layout for Entries {
    type Slot = u32;
    #[inline]
    fn home(entry: u32, bits: u32) -> usize {
        // Fibonacci hashing spreads the 25-bit index over the table.
        ((entry >> 6).wrapping_mul(0x9e37_79b9) >> (32 - bits)) as usize
    }
}

/// A set of 64-bit item hashes. Hash 0 is kept in a flag, so a zero slot means empty.
#[derive(Clone, Debug)]
pub(crate) struct ExactSet {
    table: Table<Hashes>,
    has_zero: bool,
}

impl ExactSet {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        ExactSet {
            table: Table::with_capacity(capacity),
            has_zero: false,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len + self.has_zero as usize
    }

    pub(crate) fn capacity(&self) -> usize {
        self.table.slots.len()
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.table.heap_bytes()
    }

    /// Whether the next insert of a new hash would need a larger table.
    pub(crate) fn full(&self) -> bool {
        must_grow(self.len(), self.capacity())
    }

    /// The table of `factor` (a power of two) times the capacity.
    pub(crate) fn grown(&self, factor: usize) -> ExactSet {
        self.resized(self.capacity() * factor)
    }

    /// The same hashes in a table of `capacity` slots (a power of two, at least
    /// [`capacity_for`] the length).
    pub(crate) fn resized(&self, capacity: usize) -> ExactSet {
        debug_assert!(capacity >= capacity_for(self.len()));
        ExactSet {
            table: self.table.resized(capacity),
            has_zero: self.has_zero,
        }
    }

    /// Inserts a hash; true if it was new. The caller grows the table first when
    /// [`ExactSet::full`].
    #[inline]
    pub(crate) fn insert(&mut self, h: u64) -> bool {
        if h == 0 {
            let new = !self.has_zero;
            self.has_zero = true;
            return new;
        }
        match self.table.find(h, |s| s == h) {
            Ok(_) => false,
            Err(i) => {
                self.table.fill(i, h);
                true
            }
        }
    }

    /// Whether the set holds `h`.
    #[inline]
    pub(crate) fn contains(&self, h: u64) -> bool {
        if h == 0 {
            return self.has_zero;
        }
        self.table.find(h, |s| s == h).is_ok()
    }

    /// The hashes, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.has_zero
            .then_some(0)
            .into_iter()
            .chain(self.table.occupied())
    }
}

impl PartialEq for ExactSet {
    /// The same hashes, whatever the tables' capacities and slot order.
    fn eq(&self, other: &ExactSet) -> bool {
        self.len() == other.len() && sorted(self.iter()) == sorted(other.iter())
    }
}

/// The items of a table, sorted: tables holding the same items in other slots compare equal.
fn sorted<T: Ord>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut v: Vec<T> = items.collect();
    v.sort_unstable();
    v
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
    Reader::ensure(
        8 * cap <= max_table_bytes,
        "hashes",
        off,
        "no more than the exact form holds at this precision",
        n as u64,
    )?;
    let mut set = ExactSet::with_capacity(cap);
    let mut prev: Option<u64> = None;
    for _ in 0..n {
        let h = r.u64_if("hash", "strictly increasing", |h| {
            prev.is_none_or(|q| h > q)
        })?;
        prev = Some(h);
        set.insert(h);
    }
    Ok(set)
}

/// A map from sparse register index (`SPARSE_PRECISION` bits) to rank, stored one `u32` per
/// entry as `index << 6 | rank` (rank ≥ 1, so a zero slot means empty).
#[derive(Clone, Debug)]
pub(crate) struct SparseMap {
    table: Table<Entries>,
}

impl SparseMap {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        SparseMap {
            table: Table::with_capacity(capacity),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.table.len
    }

    pub(crate) fn capacity(&self) -> usize {
        self.table.slots.len()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.table.heap_bytes()
    }

    pub(crate) fn full(&self) -> bool {
        self.table.full()
    }

    pub(crate) fn grown(&self) -> SparseMap {
        SparseMap {
            table: self.table.resized(self.capacity() * 2),
        }
    }

    /// Raises the rank of `index` to at least `rank`. Returns the previous rank (0 when the
    /// index was absent) if the map changed, `None` if it did not. The caller grows the table
    /// first when [`SparseMap::full`].
    #[inline]
    pub(crate) fn update(&mut self, index: u32, rank: u8) -> Option<u8> {
        debug_assert!(index < 1 << SPARSE_PRECISION && (1..64).contains(&rank));
        let entry = index << 6 | rank as u32;
        match self.table.find(entry, |s| s >> 6 == index) {
            Err(i) => {
                self.table.fill(i, entry);
                Some(0)
            }
            Ok(i) => {
                let old = (self.table.slots[i] & 63) as u8;
                if rank > old {
                    self.table.slots[i] = entry;
                    return Some(old);
                }
                None
            }
        }
    }

    /// The rank of `index`, 0 when absent.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> u8 {
        match self.table.find(index << 6, |s| s >> 6 == index) {
            Ok(i) => (self.table.slots[i] & 63) as u8,
            Err(_) => 0,
        }
    }

    /// The (index, rank) entries, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, u8)> + '_ {
        self.table.occupied().map(|s| (s >> 6, (s & 63) as u8))
    }
}

impl PartialEq for SparseMap {
    /// The same entries, whatever the tables' capacities and slot order.
    fn eq(&self, other: &SparseMap) -> bool {
        self.len() == other.len() && sorted(self.iter()) == sorted(other.iter())
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
