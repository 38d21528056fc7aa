//! A store: the counts of one sign's bins, dense from its lowest to its highest key, with its
//! lowest bins collapsed into one when the span would pass the bin limit.
//!
//! Counts are `u32` until one would pass `2^32 − 1`, then the whole store widens to `u64`:
//! half the bytes of 64-bit counters for every store that has seen fewer than four billion
//! values in a bin. The array grows in steps of 64 bins toward the side a new key falls on,
//! never past the limit.
//!
//! **Collapsing** (Masson, Rim, Lee 2019, §2.2): when a key would make the span from the
//! lowest to the highest key exceed the limit, every bin at or below `highest − limit + 1`
//! is folded into that key's bin, which from then on also receives every lower key. The
//! collapsed key depends only on the highest key ever held (and on any collapsed key merged
//! in), not on the order of inserts and merges: `max(highest − limit + 1, merged collapsed
//! keys)`. The negative store's keys are negated (lower keys are lower values), so in both
//! stores the values lost to collapsing are the lowest ones.

/// Keys are added in blocks of this many bins.
const CHUNK: i64 = 64;

/// The counts: 32-bit while every count fits, then all 64-bit. One of the two is empty.
/// Two fields rather than an enum: the insert path tries the narrow array first and needs
/// no discriminant.
#[derive(Clone, Debug, Default)]
struct Bins {
    narrow: Vec<u32>,
    wide: Vec<u64>,
}

impl Bins {
    fn is_wide(&self) -> bool {
        !self.wide.is_empty()
    }

    fn len(&self) -> usize {
        self.narrow.len() + self.wide.len()
    }

    fn capacity_bytes(&self) -> usize {
        self.narrow.capacity() * 4 + self.wide.capacity() * 8
    }

    fn get(&self, i: usize) -> u64 {
        if self.is_wide() {
            self.wide[i]
        } else {
            self.narrow[i] as u64
        }
    }

    /// Adds `n` to bin `i`, widening every count to `u64` if the bin would pass `2^32 − 1`.
    /// The caller keeps the total within `u64`.
    fn add(&mut self, i: usize, n: u64) {
        if self.is_wide() {
            self.wide[i] += n;
            return;
        }
        match u32::try_from(self.narrow[i] as u64 + n) {
            Ok(c) => self.narrow[i] = c,
            Err(_) => {
                self.widen();
                self.wide[i] += n;
            }
        }
    }

    fn sub(&mut self, i: usize, n: u64) {
        if self.is_wide() {
            self.wide[i] -= n;
        } else {
            self.narrow[i] -= n as u32;
        }
    }

    fn widen(&mut self) {
        if !self.is_wide() && !self.narrow.is_empty() {
            self.wide = self.narrow.iter().map(|&c| c as u64).collect();
            self.narrow = Vec::new();
        }
    }

    /// Zeroed bins of the same width.
    fn zeroed(&self, len: usize) -> Bins {
        if self.is_wide() {
            Bins {
                narrow: Vec::new(),
                wide: vec![0; len],
            }
        } else {
            Bins {
                narrow: vec![0; len],
                wide: Vec::new(),
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.narrow
            .iter()
            .map(|&c| c as u64)
            .chain(self.wide.iter().copied())
    }
}

/// A run of a store's counts, in the width the store holds them.
pub(crate) enum Counts<'a> {
    Narrow(&'a [u32]),
    Wide(&'a [u64]),
}

/// The bins of one sign. See the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct Store {
    bins: Bins,
    /// The key of `bins[0]`.
    offset: i64,
    /// Once collapsed, the key whose bin also holds every lower key; then `offset` equals it,
    /// so lower keys miss the array and take the slow path to it.
    collapsed: Option<i64>,
    limit: u32,
}

/// Why a subtraction cannot proceed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Uncontained {
    /// The other store holds more in bin `key` than this one.
    Bin { key: i64, ours: u64, theirs: u64 },
    /// The other store collapsed at a higher key than this one: its collapsed bin holds
    /// values this store keeps in bins of their own.
    Collapsed { ours: Option<i64>, theirs: i64 },
}

impl Store {
    pub(crate) fn new(limit: u32) -> Store {
        Store {
            bins: Bins::default(),
            offset: 0,
            collapsed: None,
            limit,
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit
    }

    /// Counts one value of key `key`.
    #[inline(always)]
    pub(crate) fn add_one(&mut self, key: i64) {
        let i = key.wrapping_sub(self.offset) as u64 as usize;
        match self.bins.narrow.get_mut(i) {
            Some(c) if *c != u32::MAX => {
                *c += 1;
                return;
            }
            Some(_) => {}
            None => {
                if let Some(c) = self.bins.wide.get_mut(i) {
                    *c += 1;
                    return;
                }
            }
        }
        self.add_one_slow(key);
    }

    /// A key outside the array, or a count at `2^32 − 1`: out of line, so that the fast path
    /// inlines into the caller's loop.
    #[cold]
    #[inline(never)]
    fn add_one_slow(&mut self, key: i64) {
        self.add(key, 1);
    }

    /// Counts `n` values of key `key` (into the collapsed bin if the key is below it),
    /// growing or collapsing the array as needed.
    pub(crate) fn add(&mut self, key: i64, n: u64) {
        if n == 0 {
            return;
        }
        let key = self.collapsed.map_or(key, |c| key.max(c));
        if !self.covers(key) {
            self.cover(key, key, None);
        }
        let key = self.collapsed.map_or(key, |c| key.max(c));
        let i = (key - self.offset) as usize;
        self.bins.add(i, n);
    }

    fn covers(&self, key: i64) -> bool {
        key.checked_sub(self.offset)
            .is_some_and(|i| i >= 0 && i < self.bins.len() as i64)
    }

    /// The lowest and highest keys of non-empty bins.
    pub(crate) fn occupied(&self) -> Option<(i64, i64)> {
        let (first, last) = if self.bins.is_wide() {
            let v = &self.bins.wide;
            (
                v.iter().position(|&c| c != 0)?,
                v.iter().rposition(|&c| c != 0)?,
            )
        } else {
            let v = &self.bins.narrow;
            (
                v.iter().position(|&c| c != 0)?,
                v.iter().rposition(|&c| c != 0)?,
            )
        };
        Some((self.offset + first as i64, self.offset + last as i64))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.occupied().is_none()
    }

    /// The collapsed key, if the store has collapsed.
    pub(crate) fn collapsed(&self) -> Option<i64> {
        self.collapsed
    }

    /// The count of key `key`'s bin.
    pub(crate) fn count_at(&self, key: i64) -> u64 {
        if self.covers(key) {
            self.bins.get((key - self.offset) as usize)
        } else {
            0
        }
    }

    /// The counts of keys `lo..=hi`, which the array covers (the occupied keys do), as the
    /// slice they are: an encoder's loop over it has no bounds or width test a bin.
    pub(crate) fn counts(&self, lo: i64, hi: i64) -> Counts<'_> {
        let range = (lo - self.offset) as usize..(hi - self.offset) as usize + 1;
        if self.bins.is_wide() {
            Counts::Wide(&self.bins.wide[range])
        } else {
            Counts::Narrow(&self.bins.narrow[range])
        }
    }

    /// The sum of every bin.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn total(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// `(key, count)` of every non-empty bin, lowest key first.
    pub(crate) fn nonzero(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        let offset = self.offset;
        self.bins
            .iter()
            .enumerate()
            .filter(|&(_, c)| c != 0)
            .map(move |(i, c)| (offset + i as i64, c))
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.bins.capacity_bytes()
    }

    /// Makes the array cover `[lo, hi]` and every non-empty bin, collapsing at `fold` (or
    /// higher, if the span still passes the limit) first.
    fn cover(&mut self, lo: i64, hi: i64, fold: Option<i64>) {
        let (mut lo, mut hi) = match self.occupied() {
            Some((a, b)) => (a.min(lo), b.max(hi)),
            None => (lo, hi),
        };
        let mut collapse = match (self.collapsed, fold) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let Some(c) = collapse {
            lo = c;
            hi = hi.max(c);
        }
        let limit = self.limit as i64;
        if hi - lo + 1 > limit {
            let c = hi - limit + 1;
            collapse = Some(collapse.map_or(c, |old| old.max(c)));
            lo = c;
        }
        let span = hi - lo + 1;
        let len = (span + CHUNK - 1) / CHUNK * CHUNK;
        let len = len.min(limit).max(span);
        // The slack goes where the store grew: below when a lower key came (unless the
        // bottom is pinned by a collapse), above otherwise.
        let downward = collapse.is_none() && self.bins.len() > 0 && lo < self.offset;
        let offset = if downward { hi - len + 1 } else { lo };
        let mut bins = self.bins.zeroed(len as usize);
        match self.occupied() {
            // No new fold: the non-empty bins move as one block.
            Some((a, b)) if collapse == self.collapsed => {
                let from = (a - self.offset) as usize..(b - self.offset) as usize + 1;
                let to = (a - offset) as usize;
                let n = from.len();
                if self.bins.is_wide() {
                    bins.wide[to..to + n].copy_from_slice(&self.bins.wide[from]);
                } else {
                    bins.narrow[to..to + n].copy_from_slice(&self.bins.narrow[from]);
                }
            }
            _ => {
                for (k, n) in self.nonzero() {
                    let k = collapse.map_or(k, |c| k.max(c));
                    bins.add((k - offset) as usize, n);
                }
            }
        }
        self.bins = bins;
        self.offset = offset;
        self.collapsed = collapse;
    }

    /// Adds every bin of `other` (same mapping) to this store. The caller keeps the total
    /// within `u64`.
    pub(crate) fn merge(&mut self, other: &Store) {
        let Some((lo, hi)) = other.occupied() else {
            return;
        };
        let fold = other
            .collapsed
            .filter(|&oc| self.collapsed.is_none_or(|c| c < oc));
        if fold.is_some()
            || !self.covers(lo.max(self.collapsed.unwrap_or(i64::MIN)))
            || !self.covers(hi)
        {
            self.cover(lo, hi, fold);
        }
        let c = self.collapsed.unwrap_or(i64::MIN);
        if !self.bins.is_wide() && !other.bins.is_wide() {
            let (a, b) = (&mut self.bins.narrow, &other.bins.narrow);
            if lo >= c {
                // The common case: every key lands in its own bin, 32-bit counts.
                let start = (lo - self.offset) as usize;
                let from = (lo - other.offset) as usize;
                let n = (hi - lo + 1) as usize;
                let mut overflow = false;
                for (x, &y) in a[start..start + n].iter_mut().zip(&b[from..from + n]) {
                    let (s, o) = x.overflowing_add(y);
                    *x = s;
                    overflow |= o;
                }
                if !overflow {
                    return;
                }
                // Undo, widen, and add again below.
                for (x, &y) in a[start..start + n].iter_mut().zip(&b[from..from + n]) {
                    *x = x.wrapping_sub(y);
                }
                self.bins.widen();
            }
        }
        for (k, n) in other.nonzero() {
            let k = k.max(c);
            self.bins.add((k - self.offset) as usize, n);
        }
    }

    /// Checks that `other` (same mapping) is contained in this store: every bin of it, its
    /// keys below our collapsed key counted in our collapsed bin, at most ours.
    pub(crate) fn check_contains(&self, other: &Store) -> Result<(), Uncontained> {
        if other.is_empty() {
            return Ok(());
        }
        if let Some(oc) = other.collapsed {
            if self.collapsed.is_none_or(|c| c < oc) {
                return Err(Uncontained::Collapsed {
                    ours: self.collapsed,
                    theirs: oc,
                });
            }
        }
        let c = self.collapsed.unwrap_or(i64::MIN);
        let mut folded = 0u64;
        for (k, n) in other.nonzero() {
            if k <= c {
                folded += n;
                continue;
            }
            let ours = self.count_at(k);
            if ours < n {
                return Err(Uncontained::Bin {
                    key: k,
                    ours,
                    theirs: n,
                });
            }
        }
        if folded > 0 {
            let ours = self.count_at(c);
            if ours < folded {
                return Err(Uncontained::Bin {
                    key: c,
                    ours,
                    theirs: folded,
                });
            }
        }
        Ok(())
    }

    /// Subtracts `other`, which [`Store::check_contains`] accepted. A store left empty forgets
    /// its collapse.
    pub(crate) fn subtract(&mut self, other: &Store) {
        let c = self.collapsed.unwrap_or(i64::MIN);
        for (k, n) in other.nonzero() {
            let k = k.max(c);
            self.bins.sub((k - self.offset) as usize, n);
        }
        if self.is_empty() {
            self.collapsed = None;
        }
    }

    /// A store of `counts` for the keys from `lowest` up, collapsed at `collapsed`: for the
    /// decoder, which checked that the span fits the limit, the collapsed key is at most
    /// `lowest` and the ends are non-empty.
    pub(crate) fn from_parts(
        limit: u32,
        lowest: i64,
        counts: Vec<u64>,
        collapsed: Option<i64>,
    ) -> Store {
        let offset = collapsed.unwrap_or(lowest);
        let gap = (lowest - offset) as usize;
        let bins = if counts.iter().all(|&c| c <= u32::MAX as u64) {
            let mut narrow = vec![0u32; gap + counts.len()];
            for (x, c) in narrow[gap..].iter_mut().zip(&counts) {
                *x = *c as u32;
            }
            Bins {
                narrow,
                wide: Vec::new(),
            }
        } else {
            let mut wide = vec![0u64; gap];
            wide.extend_from_slice(&counts);
            Bins {
                narrow: Vec::new(),
                wide,
            }
        };
        Store {
            bins,
            offset,
            collapsed,
            limit,
        }
    }

    /// Whether two stores hold the same bins and collapse (their arrays may differ).
    pub(crate) fn same(&self, other: &Store) -> bool {
        self.collapsed == other.collapsed && self.nonzero().eq(other.nonzero())
    }

    /// Internal invariants, for tests and fuzzing.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn check_invariants(&self) {
        assert!(self.bins.len() <= self.limit as usize);
        if let Some(c) = self.collapsed {
            assert_eq!(self.offset, c);
            assert!(!self.is_empty(), "an empty store is never collapsed");
        }
        if let Some((lo, hi)) = self.occupied() {
            let bottom = self.collapsed.unwrap_or(lo);
            assert!(hi - bottom < self.limit as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins(s: &Store) -> Vec<(i64, u64)> {
        s.nonzero().collect()
    }

    #[test]
    fn grows_both_ways_without_collapsing_within_the_limit() {
        let mut s = Store::new(100);
        for k in [50, 10, 80, -19, 10] {
            s.add_one(k);
            s.check_invariants();
        }
        assert_eq!(bins(&s), [(-19, 1), (10, 2), (50, 1), (80, 1)]);
        assert_eq!(s.collapsed(), None);
        assert_eq!(s.total(), 5);
    }

    #[test]
    fn collapses_the_lowest_keys_into_highest_minus_limit_plus_one() {
        let mut s = Store::new(10);
        for k in 0..10 {
            s.add_one(k);
        }
        assert_eq!(s.collapsed(), None);
        s.add_one(12); // span 13 > 10: keys ≤ 3 fold into 3
        s.check_invariants();
        assert_eq!(s.collapsed(), Some(3));
        assert_eq!(s.count_at(3), 4);
        s.add_one(-100); // below the collapsed key: into it
        assert_eq!(s.count_at(3), 5);
        assert_eq!(s.total(), 12);
        // Far above: everything folds into the new collapsed key.
        s.add_one(1_000);
        s.check_invariants();
        assert_eq!(s.collapsed(), Some(991));
        assert_eq!(bins(&s), [(991, 12), (1_000, 1)]);
    }

    #[test]
    fn collapse_is_independent_of_order() {
        let keys: Vec<i64> = (0..200).map(|i| (i * 7919) % 157 - 40).collect();
        let mut a = Store::new(64);
        for &k in &keys {
            a.add_one(k);
        }
        let mut b = Store::new(64);
        for &k in keys.iter().rev() {
            b.add_one(k);
        }
        let mut c = Store::new(64);
        let mut d = Store::new(64);
        for (i, &k) in keys.iter().enumerate() {
            if i % 3 == 0 {
                c.add_one(k)
            } else {
                d.add_one(k)
            }
        }
        c.merge(&d);
        for s in [&a, &b, &c] {
            s.check_invariants();
        }
        assert!(
            a.same(&b) && a.same(&c),
            "{:?} {:?} {:?}",
            bins(&a),
            bins(&b),
            bins(&c)
        );
        assert_eq!(a.collapsed(), Some(116 - 64 + 1));
    }

    #[test]
    fn counts_widen_past_32_bits() {
        let mut s = Store::new(8);
        s.add(3, u32::MAX as u64);
        s.add_one(3);
        assert_eq!(s.count_at(3), 1 << 32);
        let mut t = Store::new(8);
        t.add(3, u32::MAX as u64);
        let mut u = Store::new(8);
        u.add(3, 2);
        t.merge(&u);
        assert_eq!(t.count_at(3), u32::MAX as u64 + 2);
    }

    #[test]
    fn subtraction_needs_containment() {
        let mut a = Store::new(100);
        let mut b = Store::new(100);
        for k in 0..20 {
            a.add(k, 3);
            b.add(k, 2);
        }
        a.check_contains(&b).unwrap();
        a.subtract(&b);
        assert_eq!(a.total(), 20);
        let mut d = Store::new(100);
        d.add(4, 1);
        d.add(5, 3);
        assert_eq!(
            a.check_contains(&d),
            Err(Uncontained::Bin {
                key: 5,
                ours: 1,
                theirs: 3
            })
        );
        let mut c = Store::new(4);
        c.add_one(0);
        c.add_one(10);
        assert_eq!(
            a.check_contains(&c),
            Err(Uncontained::Collapsed {
                ours: None,
                theirs: 7
            })
        );
    }
}
