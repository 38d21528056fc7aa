//! The raw engine: a `d × w` matrix of signed counters and its `d` row hashes.
//!
//! Everything above it (models, bounds, items, layers) lives in [`super::CountMin`] and
//! [`super::DyadicCountMin`]; the table only adds, reads and combines counters by key.

use crate::hash::{PairwiseHash, MULTIPLY_SHIFT_FAMILY_ID, PAIRWISE_FAMILY_ID};

/// The most rows a table may have.
pub(crate) const MAX_DEPTH: usize = 64;
/// The most columns a table may have.
pub(crate) const MAX_WIDTH: usize = 1 << 26;
/// The most counters a table may have (1 GiB of `i64`).
pub(crate) const MAX_COUNTERS: usize = 1 << 27;

/// How a key picks its column in each row: the row functions' family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowFamily {
    /// [`PairwiseHash::value`]: pairwise independent on any 64-bit key. Dyadic layers key
    /// by integers, and Count-Min sketches written before the multiply-shift rows used it.
    Pairwise,
    /// [`PairwiseHash::multiply_shift`] of the item hash: one multiplication a row.
    MultiplyShift,
}

impl RowFamily {
    /// The family's byte in the Count-Min encoding.
    pub(crate) fn id(self) -> u8 {
        match self {
            RowFamily::Pairwise => PAIRWISE_FAMILY_ID,
            RowFamily::MultiplyShift => MULTIPLY_SHIFT_FAMILY_ID,
        }
    }

    /// The family of an encoding's byte.
    pub(crate) fn from_id(id: u8) -> Option<RowFamily> {
        match id {
            PAIRWISE_FAMILY_ID => Some(RowFamily::Pairwise),
            MULTIPLY_SHIFT_FAMILY_ID => Some(RowFamily::MultiplyShift),
            _ => None,
        }
    }
}

/// `d` rows of `w` signed counters, row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Table {
    pub(crate) width: usize,
    pub(crate) rows: Vec<PairwiseHash>,
    pub(crate) family: RowFamily,
    /// The rows' odd multipliers, `a | 1` (the multiply-shift family's update loop reads them
    /// here rather than from the rows' three coefficients; empty for the pairwise family).
    multipliers: Vec<u64>,
    pub(crate) counters: Vec<i64>,
    /// `32 − log2 w` when `w ≥ 2` is a power of two, else 0: then `⌊h·w/2^32⌋ = h >> shift`,
    /// the same column for one multiplication less per row.
    shift: u32,
}

impl Table {
    /// A zeroed table; the caller has validated `width` and `rows.len()`.
    pub(crate) fn new(width: usize, rows: Vec<PairwiseHash>, family: RowFamily) -> Table {
        let counters = vec![0; width * rows.len()];
        Table::from_parts(width, rows, family, counters)
    }

    /// A table over given counters (`width × rows.len()` of them, validated by the caller).
    pub(crate) fn from_parts(
        width: usize,
        rows: Vec<PairwiseHash>,
        family: RowFamily,
        counters: Vec<i64>,
    ) -> Table {
        debug_assert_eq!(counters.len(), width * rows.len());
        let shift = if width >= 2 && width.is_power_of_two() {
            32 - width.trailing_zeros()
        } else {
            0
        };
        let multipliers = match family {
            RowFamily::MultiplyShift => rows.iter().map(PairwiseHash::odd_multiplier).collect(),
            RowFamily::Pairwise => Vec::new(),
        };
        Table {
            width,
            rows,
            family,
            multipliers,
            counters,
            shift,
        }
    }

    /// The column of `key` in the row of `h`.
    #[inline(always)]
    fn column(&self, h: &PairwiseHash, key: u64) -> usize {
        let v = match self.family {
            RowFamily::Pairwise => h.value(key),
            RowFamily::MultiplyShift => h.multiply_shift(key),
        };
        reduce(v, self.width, self.shift)
    }

    pub(crate) fn depth(&self) -> usize {
        self.rows.len()
    }

    /// The flat index of `key`'s counter in each row, into `out[..d]`.
    #[inline]
    pub(crate) fn cells(&self, key: u64, out: &mut [usize; MAX_DEPTH]) {
        let (w, x) = (self.width, key);
        for (j, (h, slot)) in self.rows.iter().zip(out.iter_mut()).enumerate() {
            *slot = j * w + self.column(h, x);
        }
    }

    /// Adds `c` to `key`'s counter in every row (wrapping: callers bound the mass first).
    #[inline]
    pub(crate) fn add(&mut self, key: u64, c: i64) {
        // One loop per family and width kind, so the row loop carries no branch.
        match (self.family, self.shift != 0) {
            (RowFamily::MultiplyShift, true) => {
                // The column is the product's top log2(w) bits: one shift.
                let (w, s) = (self.width, 32 + self.shift);
                let mut row = 0;
                for &m in &self.multipliers {
                    let cell = &mut self.counters[row + (key.wrapping_mul(m) >> s) as usize];
                    *cell = cell.wrapping_add(c);
                    row += w;
                }
            }
            (RowFamily::MultiplyShift, false) => {
                self.add_with(key, c, |h, k, w, _| reduce(h.multiply_shift(k), w, 0))
            }
            (RowFamily::Pairwise, true) => {
                self.add_with(key, c, |h, k, _, s| (h.value(k) >> s) as usize)
            }
            (RowFamily::Pairwise, false) => self.add_with(key, c, |h, k, w, _| h.column(k, w)),
        }
    }

    #[inline(always)]
    fn add_with(
        &mut self,
        key: u64,
        c: i64,
        col: impl Fn(&PairwiseHash, u64, usize, u32) -> usize,
    ) {
        // A running row offset into the flat counters: `chunks_exact_mut(w)` would divide by
        // the width at every update, a fifth of the update's time.
        let (w, shift) = (self.width, self.shift);
        let mut row = 0;
        for h in &self.rows {
            let cell = &mut self.counters[row + col(h, key, w, shift)];
            *cell = cell.wrapping_add(c);
            row += w;
        }
    }

    /// `key`'s counter in each row, in row order (flat offsets: no division by the width).
    #[inline]
    fn values(&self, key: u64) -> impl Iterator<Item = i64> + '_ {
        self.rows
            .iter()
            .enumerate()
            .map(move |(j, h)| self.counters[j * self.width + self.column(h, key)])
    }

    /// The smallest of `key`'s counters.
    #[inline]
    pub(crate) fn min(&self, key: u64) -> i64 {
        self.values(key).min().unwrap_or(0)
    }

    /// The median of `key`'s counters (for even `d`, the mean of the two middle ones).
    pub(crate) fn median(&self, key: u64) -> f64 {
        let d = self.depth();
        let mut vals = [0i64; MAX_DEPTH];
        for (v, c) in vals.iter_mut().zip(self.values(key)) {
            *v = c;
        }
        let vals = &mut vals[..d];
        vals.sort_unstable();
        if d % 2 == 1 {
            vals[d / 2] as f64
        } else {
            (vals[d / 2 - 1] as f64 + vals[d / 2] as f64) / 2.0
        }
    }

    /// Conservative update (Estan and Varghese): raise each of `key`'s counters to at least
    /// `min + c`, never lowering one. `c > 0`.
    #[inline]
    pub(crate) fn add_conservative(&mut self, key: u64, c: i64) {
        let mut cells = [0usize; MAX_DEPTH];
        self.cells(key, &mut cells);
        let cells = &cells[..self.depth()];
        let m = cells.iter().map(|&i| self.counters[i]).min().unwrap_or(0);
        let target = m.wrapping_add(c);
        for &i in cells {
            if self.counters[i] < target {
                self.counters[i] = target;
            }
        }
    }

    /// The minimum over rows of the row-wise dot products.
    pub(crate) fn inner_product(&self, other: &Table) -> i128 {
        self.counters
            .chunks_exact(self.width)
            .zip(other.counters.chunks_exact(other.width))
            .map(|(a, b)| {
                a.iter()
                    .zip(b)
                    .map(|(&x, &y)| x as i128 * y as i128)
                    .sum::<i128>()
            })
            .min()
            .unwrap_or(0)
    }
}

/// A 32-bit row value's column among `w`: its top bits when `shift` is nonzero (`w` a power
/// of two, `shift = 32 − log2 w`), else `⌊v·w / 2^32⌋`.
#[inline(always)]
fn reduce(v: u32, w: usize, shift: u32) -> usize {
    if shift != 0 {
        (v >> shift) as usize
    } else {
        ((v as u64 * w as u64) >> 32) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_of_two_shift_picks_the_multiply_shift_column() {
        for w in [1usize, 2, 3, 1024, 2048, 2719, 1 << 26] {
            let t = Table::new(w, PairwiseHash::rows(3, 0, 4), RowFamily::Pairwise);
            let m = Table::new(w, PairwiseHash::rows(3, 0, 4), RowFamily::MultiplyShift);
            for x in [0u64, 1, 99, u64::MAX, 0x0123_4567_89ab_cdef] {
                for h in &t.rows {
                    let col = t.column(h, x);
                    assert_eq!(col, h.column(x, w), "w = {w}, x = {x}");
                    assert!(col < w);
                    let col = m.column(h, x);
                    let v = h.multiply_shift(x) as u64;
                    assert_eq!(col as u64, (v * w as u64) >> 32, "w = {w}, x = {x}");
                    assert!(col < w);
                }
            }
        }
    }
}
