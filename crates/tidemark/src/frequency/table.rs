//! The raw engine: a `d × w` matrix of signed counters and its `d` row hashes.
//!
//! Everything above it (models, bounds, items, layers) lives in [`super::CountMin`] and
//! [`super::DyadicCountMin`]; the table only adds, reads and combines counters by key.

use crate::hash::PairwiseHash;

/// The most rows a table may have.
pub const MAX_DEPTH: usize = 64;
/// The most columns a table may have.
pub const MAX_WIDTH: usize = 1 << 26;
/// The most counters a table may have (1 GiB of `i64`).
pub const MAX_COUNTERS: usize = 1 << 27;

/// `d` rows of `w` signed counters, row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Table {
    pub(crate) width: usize,
    pub(crate) rows: Vec<PairwiseHash>,
    pub(crate) counters: Vec<i64>,
    /// `32 − log2 w` when `w ≥ 2` is a power of two, else 0: then `⌊h·w/2^32⌋ = h >> shift`,
    /// the same column for one multiplication less per row.
    shift: u32,
}

impl Table {
    /// A zeroed table; the caller has validated `width` and `rows.len()`.
    pub(crate) fn new(width: usize, rows: Vec<PairwiseHash>) -> Table {
        let counters = vec![0; width * rows.len()];
        Table::from_parts(width, rows, counters)
    }

    /// A table over given counters (`width × rows.len()` of them, validated by the caller).
    pub(crate) fn from_parts(width: usize, rows: Vec<PairwiseHash>, counters: Vec<i64>) -> Table {
        debug_assert_eq!(counters.len(), width * rows.len());
        let shift = if width >= 2 && width.is_power_of_two() {
            32 - width.trailing_zeros()
        } else {
            0
        };
        Table {
            width,
            rows,
            counters,
            shift,
        }
    }

    /// The column of `key` in the row of `h`.
    #[inline(always)]
    fn column(&self, h: &PairwiseHash, key: u64) -> usize {
        if self.shift != 0 {
            (h.value(key) >> self.shift) as usize
        } else {
            h.column(key, self.width)
        }
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
        let w = self.width;
        if self.shift != 0 {
            let shift = self.shift;
            for (row, h) in self.counters.chunks_exact_mut(w).zip(&self.rows) {
                let cell = &mut row[(h.value(key) >> shift) as usize];
                *cell = cell.wrapping_add(c);
            }
        } else {
            for (row, h) in self.counters.chunks_exact_mut(w).zip(&self.rows) {
                let cell = &mut row[h.column(key, w)];
                *cell = cell.wrapping_add(c);
            }
        }
    }

    /// The smallest of `key`'s counters.
    #[inline]
    pub(crate) fn min(&self, key: u64) -> i64 {
        let (w, x) = (self.width, key);
        self.counters
            .chunks_exact(w)
            .zip(&self.rows)
            .map(|(row, h)| row[self.column(h, x)])
            .min()
            .unwrap_or(0)
    }

    /// The median of `key`'s counters (for even `d`, the mean of the two middle ones).
    pub(crate) fn median(&self, key: u64) -> f64 {
        let d = self.depth();
        let (w, x) = (self.width, key);
        let mut vals = [0i64; MAX_DEPTH];
        for ((row, h), v) in self.counters.chunks_exact(w).zip(&self.rows).zip(&mut vals) {
            *v = row[self.column(h, x)];
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

    /// Same shape and the same functions.
    pub(crate) fn same_shape(&self, other: &Table) -> bool {
        self.width == other.width && self.rows == other.rows
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_of_two_shift_picks_the_multiply_shift_column() {
        for w in [1usize, 2, 3, 1024, 2048, 2719, 1 << 26] {
            let t = Table::new(w, PairwiseHash::rows(3, 0, 4));
            for x in [0u64, 1, 99, u64::MAX, 0x0123_4567_89ab_cdef] {
                for h in &t.rows {
                    let col = t.column(h, x);
                    assert_eq!(col, h.column(x, w), "w = {w}, x = {x}");
                    assert!(col < w);
                }
            }
        }
    }
}
