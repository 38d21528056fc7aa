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
}

impl Table {
    /// A zeroed table; the caller has validated `width` and `rows.len()`.
    pub(crate) fn new(width: usize, rows: Vec<PairwiseHash>) -> Table {
        let counters = vec![0; width * rows.len()];
        Table {
            width,
            rows,
            counters,
        }
    }

    pub(crate) fn depth(&self) -> usize {
        self.rows.len()
    }

    /// The flat index of `key`'s counter in each row, into `out[..d]`.
    #[inline]
    pub(crate) fn cells(&self, key: u64, out: &mut [usize; MAX_DEPTH]) {
        let w = self.width;
        for (j, (h, slot)) in self.rows.iter().zip(out.iter_mut()).enumerate() {
            *slot = j * w + h.column(key, w);
        }
    }

    /// Adds `c` to `key`'s counter in every row (wrapping: callers bound the mass first).
    #[inline]
    pub(crate) fn add(&mut self, key: u64, c: i64) {
        let w = self.width;
        for (j, h) in self.rows.iter().enumerate() {
            let i = j * w + h.column(key, w);
            self.counters[i] = self.counters[i].wrapping_add(c);
        }
    }

    /// The smallest of `key`'s counters.
    #[inline]
    pub(crate) fn min(&self, key: u64) -> i64 {
        let w = self.width;
        let mut m = i64::MAX;
        for (j, h) in self.rows.iter().enumerate() {
            m = m.min(self.counters[j * w + h.column(key, w)]);
        }
        m
    }

    /// The median of `key`'s counters (for even `d`, the mean of the two middle ones).
    pub(crate) fn median(&self, key: u64) -> f64 {
        let d = self.depth();
        let mut vals = [0i64; MAX_DEPTH];
        let w = self.width;
        for (j, h) in self.rows.iter().enumerate() {
            vals[j] = self.counters[j * w + h.column(key, w)];
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
        let d = self.depth();
        let mut m = i64::MAX;
        for &i in &cells[..d] {
            m = m.min(self.counters[i]);
        }
        let target = m.wrapping_add(c);
        for &i in &cells[..d] {
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
