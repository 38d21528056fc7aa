//! [`DyadicCountMin`]: range sums, quantiles and turnstile heavy hitters over `[0, 2^b)`.

use std::collections::BinaryHeap;

use super::count_min::{
    add_mass, check_dimensions, combined_mass, delta_of, dimensions, epsilon_of,
};
use super::table::RowFamily;
use super::table::{Table, MAX_COUNTERS};
use super::{FrequencyError, Model};
use crate::error::{MergeError, ParamError};
use crate::estimate::{Estimate, Method};
use crate::hash::{ItemHasher, PairwiseHash};

/// The widest universe ([`DyadicCountMin::MAX_BITS`]).
pub(crate) const MAX_BITS: u32 = 60;

/// One dyadic layer: the counts of the prefixes `x >> l`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Layer {
    /// A universe of at most `w·d` prefixes is counted exactly, in no more memory than a
    /// sketch would take.
    Exact(Vec<i64>),
    /// A Count-Min table keyed by the prefix itself.
    Sketch(Table),
}

/// A node's value and whether it came from a sketch (and so carries error).
#[derive(Clone, Copy, Debug)]
struct Node {
    value: i64,
    sketched: bool,
}

/// Count-Min sketches of the dyadic layers of an integer universe `[0, 2^b)` (the paper's
/// Section 4.2): layer `l` counts the prefixes `x >> l`, i.e. the dyadic intervals of length
/// `2^l`. Every update enters every layer. A range `[lo, hi]` is the disjoint union of at most
/// `2b` dyadic intervals, each one point query; quantiles and heavy hitters descend the layers.
///
/// Layers whose universe `2^(b−l)` has at most `w·d` prefixes are kept as exact counters
/// (the same memory or less than a sketch), so only the lower layers carry error.
///
/// Only the non-negative models are accepted: Theorems 4 and 5 and the heavy-hitter descent
/// rely on counters that never under-count.
///
/// ```
/// use tidemark::frequency::{DyadicCountMin, Model};
///
/// let mut s = DyadicCountMin::new(0.001, 0.01, 16, Model::CashRegister).unwrap();
/// for x in 0..1_000u64 {
///     s.update(x, 1).unwrap();
/// }
/// let r = s.range(100, 199).unwrap();
/// assert!(r.low <= 100.0 && 100.0 <= r.high);
/// let (median, _) = s.quantile(0.5).unwrap();
/// assert!((450..=550).contains(&median));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DyadicCountMin {
    pub(crate) hasher: ItemHasher,
    pub(crate) model: Model,
    pub(crate) bits: u32,
    pub(crate) width: usize,
    pub(crate) depth: usize,
    /// Layers `0..b`; layer `b` (the whole universe) is `total`.
    pub(crate) layers: Vec<Layer>,
    pub(crate) total: i64,
    pub(crate) mass: u64,
}

/// Whether layer `l` of a `bits`-bit universe is exact for a `w × d` table.
pub(crate) fn layer_is_exact(bits: u32, l: u32, width: usize, depth: usize) -> bool {
    (bits - l) < 63 && (1u64 << (bits - l)) <= (width * depth) as u64
}

/// The row functions of layer `l`.
pub(crate) fn layer_rows(seed: u64, l: u32, depth: usize) -> Vec<PairwiseHash> {
    PairwiseHash::rows(seed, 1 + l as u64, depth)
}

impl DyadicCountMin {
    /// The widest universe: items below `2^60` (ample for integer items, and far from the
    /// shifts' and sums' 64-bit limits).
    pub const MAX_BITS: u32 = MAX_BITS;

    /// Layers with `w = ⌈e/ε⌉`, `d = ⌈ln 1/δ⌉` over `[0, 2^bits)`. A range then errs by at
    /// most `k·ε‖a‖₁` with `k ≤ 2·bits` sketched intervals: for a range error `ε′‖a‖₁`, pass
    /// `ε = ε′/(2·bits)`, as the paper does.
    pub fn new(
        epsilon: f64,
        delta: f64,
        bits: u32,
        model: Model,
    ) -> Result<DyadicCountMin, ParamError> {
        let (w, d) = dimensions(epsilon, delta)?;
        DyadicCountMin::with_dimensions(w, d, bits, model)
    }

    /// Layers of `width × depth` over `[0, 2^bits)`, `bits` in `1..=60`, with at most `2^27`
    /// counters in all (1 GiB).
    pub fn with_dimensions(
        width: usize,
        depth: usize,
        bits: u32,
        model: Model,
    ) -> Result<DyadicCountMin, ParamError> {
        check_dimensions(width, depth)?;
        if !(1..=MAX_BITS).contains(&bits) {
            return Err(ParamError::new("bits", "in 1..=60", bits));
        }
        if model == Model::GeneralTurnstile {
            return Err(ParamError::new(
                "model",
                "cash register or non-negative turnstile (ranges need counters that never under-count)",
                model,
            ));
        }
        let counters: usize = (0..bits)
            .map(|l| {
                if layer_is_exact(bits, l, width, depth) {
                    1usize << (bits - l)
                } else {
                    width * depth
                }
            })
            .sum();
        if counters > MAX_COUNTERS {
            return Err(ParamError::new(
                "width",
                "width × depth × sketched layers at most 2^27 counters in all",
                counters,
            ));
        }
        let hasher = ItemHasher::default();
        let layers = (0..bits)
            .map(|l| {
                if layer_is_exact(bits, l, width, depth) {
                    Layer::Exact(vec![0; 1 << (bits - l)])
                } else {
                    Layer::Sketch(Table::new(
                        width,
                        layer_rows(hasher.seed(), l, depth),
                        RowFamily::Pairwise,
                    ))
                }
            })
            .collect();
        Ok(DyadicCountMin {
            hasher,
            model,
            bits,
            width,
            depth,
            layers,
            total: 0,
            mass: 0,
        })
    }

    /// The universe's bits `b`: items are in `[0, 2^b)`.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Columns per sketched layer.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows per sketched layer.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The update model.
    pub fn model(&self) -> Model {
        self.model
    }

    /// The hasher whose seed the row functions derive from.
    pub fn hasher(&self) -> ItemHasher {
        self.hasher
    }

    /// The per-interval ε, `e·⌈2^32/w⌉/2^32` (`e/w` for a power-of-two `w`).
    pub fn epsilon(&self) -> f64 {
        epsilon_of(self.width)
    }

    /// The δ, `e^−d`.
    pub fn delta(&self) -> f64 {
        delta_of(self.depth)
    }

    /// `Σ a_i = ‖a‖₁`.
    pub fn total(&self) -> i64 {
        self.total
    }

    /// How many of the `b` layers are exact counters.
    pub fn exact_layers(&self) -> usize {
        self.layers
            .iter()
            .filter(|l| matches!(l, Layer::Exact(_)))
            .count()
    }

    fn check_item(&self, x: u64) -> Result<(), FrequencyError> {
        if x >> self.bits != 0 {
            return Err(FrequencyError::OutsideUniverse {
                item: x,
                bits: self.bits,
            });
        }
        Ok(())
    }

    /// Adds `count` to item `x`'s frequency, in every layer. The errors are
    /// [`super::CountMin::update_hash`]'s, plus an item outside `[0, 2^b)`; on error nothing
    /// changes.
    pub fn update(&mut self, x: u64, count: i64) -> Result<(), FrequencyError> {
        self.check_item(x)?;
        let mass = add_mass(self.mass, count)?;
        if count < 0 {
            if self.model == Model::CashRegister {
                return Err(FrequencyError::NegativeUpdate { count });
            }
            for l in 0..self.bits {
                let floor = self.node(l, x >> l).value;
                if floor < -count {
                    return Err(FrequencyError::BelowZero {
                        counter: floor,
                        count,
                    });
                }
            }
        }
        for (l, layer) in self.layers.iter_mut().enumerate() {
            let key = x >> l;
            match layer {
                Layer::Exact(c) => c[key as usize] += count,
                Layer::Sketch(t) => t.add(key, count),
            }
        }
        self.total += count;
        self.mass = mass;
        Ok(())
    }

    /// The count of the dyadic interval `[key·2^l, (key+1)·2^l)`; `l ≤ b`.
    fn node(&self, l: u32, key: u64) -> Node {
        if l == self.bits {
            return Node {
                value: self.total,
                sketched: false,
            };
        }
        match &self.layers[l as usize] {
            Layer::Exact(c) => Node {
                value: c[key as usize],
                sketched: false,
            },
            Layer::Sketch(t) => Node {
                value: t.min(key),
                sketched: true,
            },
        }
    }

    /// The estimate of a sum of nodes, `k` of them sketched (Theorem 4's argument: in each
    /// row, the summed excess of the `k` intervals has expectation at most `k‖a‖₁/w`, so it
    /// passes `k·ε‖a‖₁` with probability below `1/e`; all `d` rows must fail).
    fn bracket(&self, value: i64, k: u32) -> Estimate {
        let v = value as f64;
        if k == 0 {
            return Estimate::exact(v);
        }
        let low = (v - k as f64 * self.epsilon() * self.total as f64)
            .max(0.0)
            .min(v);
        Estimate::probabilistic(v, low, v, 1.0 - self.delta(), Method::CountMinDyadic)
    }

    /// The point query for item `x` (layer 0), with Theorem 1's bracket (or exact).
    pub fn point(&self, x: u64) -> Result<Estimate, FrequencyError> {
        self.check_item(x)?;
        let n = self.node(0, x);
        Ok(self.bracket(n.value, n.sketched as u32))
    }

    /// The dyadic intervals `(l, key)` whose disjoint union is `[lo, hi]`, largest first
    /// from the left: at most `2b`.
    pub fn cover(&self, lo: u64, hi: u64) -> Result<Vec<(u32, u64)>, FrequencyError> {
        self.check_item(lo)?;
        self.check_item(hi)?;
        if lo > hi {
            return Err(FrequencyError::EmptyRange { low: lo, high: hi });
        }
        let mut out = Vec::new();
        let mut x = lo;
        loop {
            // The largest aligned interval starting at x that stays within hi.
            let mut l = if x == 0 {
                self.bits
            } else {
                x.trailing_zeros().min(self.bits)
            };
            while l > 0 && x + ((1u64 << l) - 1) > hi {
                l -= 1;
            }
            out.push((l, x >> l));
            let end = x + ((1u64 << l) - 1);
            if end >= hi {
                return Ok(out);
            }
            x = end + 1;
        }
    }

    /// The sum of the frequencies of items in `[lo, hi]` (inclusive), as the sum of the point
    /// queries of its dyadic cover. Never under-counts; with `k ≤ 2b` sketched intervals in
    /// the cover, `[value − k·ε‖a‖₁, value]` holds the truth with probability `1 − δ`
    /// (Theorem 4, whose `2ε·log n` is the worst case `k = 2 log n`).
    pub fn range(&self, lo: u64, hi: u64) -> Result<Estimate, FrequencyError> {
        let mut value = 0i64;
        let mut k = 0u32;
        for (l, key) in self.cover(lo, hi)? {
            let n = self.node(l, key);
            value += n.value;
            k += n.sketched as u32;
        }
        Ok(self.bracket(value, k))
    }

    /// The φ-quantile (Theorem 5): the smallest item `x` whose estimated prefix sum
    /// `Σ_{i ≤ x} a_i` reaches `φ‖a‖₁`, found by binary search on prefix sums — one descent
    /// of the layers, choosing the left half when its count still reaches the target. Returns
    /// `x` and the estimate of its prefix sum (the rank of `x`).
    ///
    /// Because sketched counts never under-count, the true rank of `x` is at most its
    /// estimated rank, and is at least `φ‖a‖₁` minus the cover's error with probability
    /// `1 − δ`.
    pub fn quantile(&self, phi: f64) -> Result<(u64, Estimate), FrequencyError> {
        if !(phi > 0.0 && phi <= 1.0) {
            return Err(ParamError::new("phi", "in (0, 1]", phi).into());
        }
        if self.total == 0 {
            return Err(FrequencyError::EmptyStream);
        }
        let target = phi * self.total as f64;
        let mut acc = 0i64;
        let mut key = 0u64;
        for l in (0..self.bits).rev() {
            let left = key << 1;
            let n = self.node(l, left);
            if (acc + n.value) as f64 >= target {
                key = left;
            } else {
                acc += n.value;
                key = left + 1;
            }
        }
        Ok((key, self.range(0, key)?))
    }

    /// The items whose frequency reaches `φ‖a‖₁`, by descending the layers from the top and
    /// splitting only the intervals whose count reaches the threshold (the paper's turnstile
    /// heavy hitters). As counts never under-count, every item with `a_i ≥ φ‖a‖₁` is
    /// reported, always; an item below `(φ − ε)‖a‖₁` is reported with probability at most δ.
    /// Sorted by estimate, largest first.
    pub fn heavy_hitters(&self, phi: f64) -> Result<Vec<(u64, Estimate)>, FrequencyError> {
        if !(phi > 0.0 && phi <= 1.0) {
            return Err(ParamError::new("phi", "in (0, 1]", phi).into());
        }
        let threshold = phi * self.total as f64;
        let mut out = Vec::new();
        if self.total <= 0 {
            return Ok(out);
        }
        let mut stack = vec![(self.bits, 0u64)];
        while let Some((l, key)) = stack.pop() {
            let n = self.node(l, key);
            if (n.value as f64) < threshold {
                continue;
            }
            if l == 0 {
                out.push((key, self.bracket(n.value, n.sketched as u32)));
            } else {
                stack.push((l - 1, key << 1));
                stack.push((l - 1, (key << 1) | 1));
            }
        }
        sort_by_estimate(&mut out);
        Ok(out)
    }

    /// The `k` items of largest estimated frequency, by a best-first descent of the layers
    /// (the interval of largest count is split first). A convenience: exact when every layer
    /// is exact, and otherwise subject to the same one-sided errors as the point queries. It
    /// visits every interval whose count exceeds the `k`-th item's, so a flat stream over a
    /// wide universe makes it walk most of the tree.
    pub fn top_k(&self, k: usize) -> Vec<(u64, Estimate)> {
        // `k` is a caller's number: the vector grows with what is found, not with it.
        let mut out = Vec::with_capacity(k.min(1024));
        if k == 0 || self.total <= 0 {
            return out;
        }
        let mut heap = BinaryHeap::new();
        heap.push((self.total, self.bits, 0u64));
        while let Some((v, l, key)) = heap.pop() {
            if v <= 0 {
                break;
            }
            if l == 0 {
                let n = self.node(0, key);
                out.push((key, self.bracket(n.value, n.sketched as u32)));
                if out.len() == k {
                    break;
                }
            } else {
                for child in [key << 1, (key << 1) | 1] {
                    heap.push((self.node(l - 1, child).value, l - 1, child));
                }
            }
        }
        sort_by_estimate(&mut out);
        out
    }

    fn compatible(&self, other: &DyadicCountMin) -> Result<(), FrequencyError> {
        MergeError::check(
            self.hasher,
            other.hasher,
            &[
                ("bits", self.bits as u64, other.bits as u64),
                ("width", self.width as u64, other.width as u64),
                ("depth", self.depth as u64, other.depth as u64),
                ("model", self.model as u64, other.model as u64),
            ],
        )?;
        Ok(())
    }

    /// Adds (`sign = 1`) or subtracts (`sign = −1`) `other`'s counters.
    fn combine(&mut self, other: &DyadicCountMin, sign: i64) -> Result<(), FrequencyError> {
        self.compatible(other)?;
        let mass = combined_mass(self.mass, other.mass, other.total)?;
        let pairs = || {
            self.layers.iter().zip(&other.layers).flat_map(|(a, b)| {
                let (a, b) = match (a, b) {
                    (Layer::Exact(a), Layer::Exact(b)) => (&a[..], &b[..]),
                    (Layer::Sketch(a), Layer::Sketch(b)) => (&a.counters[..], &b.counters[..]),
                    _ => (&[][..], &[][..]),
                };
                a.iter().zip(b)
            })
        };
        if sign < 0 {
            if let Some((&a, &b)) = pairs().find(|(a, b)| a < b) {
                return Err(FrequencyError::BelowZero {
                    counter: a,
                    count: -b,
                });
            }
        }
        for (a, b) in self.layers.iter_mut().zip(&other.layers) {
            let (a, b) = match (a, b) {
                (Layer::Exact(a), Layer::Exact(b)) => (&mut a[..], &b[..]),
                (Layer::Sketch(a), Layer::Sketch(b)) => (&mut a.counters[..], &b.counters[..]),
                _ => unreachable!("equal bits, width and depth give equal layer kinds"),
            };
            for (x, y) in a.iter_mut().zip(b) {
                *x += sign * y;
            }
        }
        self.total += sign * other.total;
        self.mass = mass;
        Ok(())
    }

    /// Adds `other`'s stream (same hasher, bits, width, depth and model).
    pub fn merge(&mut self, other: &DyadicCountMin) -> Result<(), FrequencyError> {
        self.combine(other, 1)
    }

    /// Removes `other`'s stream, which must be a part of this one (no counter may go below
    /// zero; on error nothing changes).
    pub fn subtract(&mut self, other: &DyadicCountMin) -> Result<(), FrequencyError> {
        self.combine(other, -1)
    }
}

/// Largest estimate first, ties by item.
pub(crate) fn sort_by_estimate<T: Ord>(v: &mut [(T, Estimate)]) {
    v.sort_by(|a, b| b.1.value.total_cmp(&a.1.value).then_with(|| a.0.cmp(&b.0)));
}
