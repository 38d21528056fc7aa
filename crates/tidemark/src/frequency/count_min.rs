//! [`CountMin`]: point queries, merge, subtract and inner products.

use super::table::RowFamily;
use super::table::{Table, MAX_COUNTERS, MAX_DEPTH, MAX_WIDTH};
use super::{FrequencyError, Model};
use crate::error::{MergeError, ParamError};
use crate::estimate::{Estimate, Method};
use crate::hash::{ItemHasher, PairwiseHash};

/// The stream number of a plain Count-Min sketch's row hashes (dyadic layers use `1 + l`).
pub(crate) const PLAIN_STREAM: u64 = 0;

/// A Count-Min sketch: `d` rows of `w` signed 64-bit counters over a stream of `(item, count)`
/// updates, in the model chosen at construction. See the [module docs](super) for the theory.
///
/// ```
/// use tidemark::frequency::{CountMin, Model};
///
/// let mut cm = CountMin::new(0.01, 0.01, Model::CashRegister).unwrap();
/// assert_eq!((cm.width(), cm.depth()), (272, 5));
/// cm.update(b"GET /", 40).unwrap();
/// cm.update(b"POST /login", 2).unwrap();
/// let e = cm.point(b"GET /");
/// assert!(e.low <= 40.0 && 40.0 <= e.high); // high never under-counts
/// assert!(cm.update(b"GET /", -1).is_err()); // a cash register only grows
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountMin {
    pub(crate) hasher: ItemHasher,
    pub(crate) model: Model,
    pub(crate) conservative: bool,
    pub(crate) table: Table,
    /// Σ c over all updates (= ‖a‖₁ when the stream is non-negative).
    pub(crate) total: i64,
    /// Σ |c| over all updates: bounds every counter and, in the general turnstile, ‖a‖₁.
    pub(crate) mass: u64,
}

/// `w = ⌈e/ε⌉` and `d = ⌈ln(1/δ)⌉` for ε and δ in (0, 1), checked against the table limits.
pub(crate) fn dimensions(epsilon: f64, delta: f64) -> Result<(usize, usize), ParamError> {
    if !(epsilon > 0.0 && epsilon < 1.0) {
        return Err(ParamError::new("epsilon", "in (0, 1)", epsilon));
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(ParamError::new("delta", "in (0, 1)", delta));
    }
    let w = (core::f64::consts::E / epsilon).ceil();
    let d = (1.0 / delta).ln().ceil().max(1.0);
    if w > MAX_WIDTH as f64 {
        return Err(ParamError::new(
            "epsilon",
            "at least e/2^26 (w = ⌈e/ε⌉ at most 2^26)",
            epsilon,
        ));
    }
    if d > MAX_DEPTH as f64 {
        return Err(ParamError::new(
            "delta",
            "at least e^−64 (d = ⌈ln 1/δ⌉ at most 64)",
            delta,
        ));
    }
    Ok((w as usize, d as usize))
}

/// Checks explicit dimensions.
pub(crate) fn check_dimensions(width: usize, depth: usize) -> Result<(), ParamError> {
    if !(1..=MAX_WIDTH).contains(&width) {
        return Err(ParamError::new("width", "in 1..=2^26", width));
    }
    if !(1..=MAX_DEPTH).contains(&depth) {
        return Err(ParamError::new("depth", "in 1..=64", depth));
    }
    if width * depth > MAX_COUNTERS {
        return Err(ParamError::new(
            "width",
            "width × depth at most 2^27 counters",
            width * depth,
        ));
    }
    Ok(())
}

/// The ε a width guarantees: `e` times the row functions' collision probability
/// `⌈2^32/w⌉/2^32` (exactly `e/w` for a power-of-two `w`, at most `(e/w)(1 + w/2^32)` else;
/// see [`PairwiseHash`]).
pub(crate) fn epsilon_of(width: usize) -> f64 {
    let per_column = (1u64 << 32).div_ceil(width as u64);
    core::f64::consts::E * per_column as f64 / (1u64 << 32) as f64
}

/// The δ a depth guarantees, `e^−d` (at most the δ asked for).
pub(crate) fn delta_of(depth: usize) -> f64 {
    (-(depth as f64)).exp()
}

/// Adds `|c|` to a mass, refusing to pass `i64::MAX` (so no counter can overflow).
pub(crate) fn add_mass(mass: u64, c: i64) -> Result<u64, FrequencyError> {
    match mass.checked_add(c.unsigned_abs()) {
        Some(m) if m <= i64::MAX as u64 => Ok(m),
        _ => Err(FrequencyError::Overflow { mass, count: c }),
    }
}

/// The mass after another sketch's stream (of `other_mass`, total `other_total`) is added to
/// or subtracted from one of `mass`: the masses add either way, and the sum may not pass
/// `i64::MAX` (the error names the other sketch's total as the count).
pub(crate) fn combined_mass(
    mass: u64,
    other_mass: u64,
    other_total: i64,
) -> Result<u64, FrequencyError> {
    mass.checked_add(other_mass)
        .filter(|&m| m <= i64::MAX as u64)
        .ok_or(FrequencyError::Overflow {
            mass,
            count: other_total,
        })
}

impl CountMin {
    /// The most rows a sketch may have.
    pub const MAX_DEPTH: usize = MAX_DEPTH;
    /// The most columns a sketch may have.
    pub const MAX_WIDTH: usize = MAX_WIDTH;
    /// The most counters a sketch may have (1 GiB of `i64`).
    pub const MAX_COUNTERS: usize = MAX_COUNTERS;

    /// A sketch whose point queries are within `ε‖a‖₁` with probability `1 − δ`:
    /// `w = ⌈e/ε⌉`, `d = ⌈ln(1/δ)⌉`, hashed with the default [`ItemHasher`].
    pub fn new(epsilon: f64, delta: f64, model: Model) -> Result<CountMin, ParamError> {
        let (w, d) = dimensions(epsilon, delta)?;
        CountMin::with_dimensions(w, d, model)
    }

    /// A sketch of `width` columns and `depth` rows; its bounds use `ε ≈ e/w` (see
    /// [`CountMin::epsilon`]) and `δ = e^−d`.
    pub fn with_dimensions(
        width: usize,
        depth: usize,
        model: Model,
    ) -> Result<CountMin, ParamError> {
        CountMin::with_rows(width, depth, model, RowFamily::MultiplyShift)
    }

    /// A sketch of `width × depth` whose rows are of `family` (the pairwise family for
    /// summaries whose stored sketches used it).
    pub(crate) fn with_rows(
        width: usize,
        depth: usize,
        model: Model,
        family: RowFamily,
    ) -> Result<CountMin, ParamError> {
        check_dimensions(width, depth)?;
        let hasher = ItemHasher::default();
        Ok(CountMin {
            hasher,
            model,
            conservative: false,
            table: Table::new(
                width,
                PairwiseHash::rows(hasher.seed(), PLAIN_STREAM, depth),
                family,
            ),
            total: 0,
            mass: 0,
        })
    }

    /// The same (empty) sketch hashing items with `hasher`; its row functions derive from the
    /// hasher's seed. Sketches of different hashers refuse to merge.
    pub fn with_hasher(self, hasher: ItemHasher) -> CountMin {
        let rows = PairwiseHash::rows(hasher.seed(), PLAIN_STREAM, self.depth());
        self.blank(hasher, rows)
    }

    /// An empty sketch that merges into this one: the same shape, hasher, model, update rule
    /// and row functions.
    pub fn emptied(&self) -> CountMin {
        self.blank(self.hasher, self.table.rows.clone())
    }

    /// An empty sketch of this one's shape, model, update rule and row family, hashing with
    /// `hasher` through `rows`.
    fn blank(&self, hasher: ItemHasher, rows: Vec<PairwiseHash>) -> CountMin {
        CountMin {
            hasher,
            model: self.model,
            conservative: self.conservative,
            table: Table::new(self.width(), rows, self.table.family),
            total: 0,
            mass: 0,
        }
    }

    /// How an item's hash picks its column in each row. Sketches built by this version use
    /// [`RowFamily::MultiplyShift`]; those read from earlier encodings keep
    /// [`RowFamily::Pairwise`]. The two do not merge.
    pub fn row_family(&self) -> RowFamily {
        self.table.family
    }

    /// The same (empty) sketch with conservative update, for the cash-register model only.
    ///
    /// Conservative update (Estan and Varghese 2002) is *not* in Cormode and Muthukrishnan's
    /// paper: an update of `c` raises each of the item's counters only to `min + c`. Every
    /// counter still covers each item hashed to it, so the estimate never under-counts, and it
    /// never exceeds the plain sketch's, so the paper's bound still holds; it is often much
    /// tighter on skewed streams. It needs positive updates, and it gives up [`subtract`]
    /// and [`inner_product`] (a counter no longer holds the sum of its items).
    ///
    /// [`subtract`]: CountMin::subtract
    /// [`inner_product`]: CountMin::inner_product
    pub fn conservative(self) -> Result<CountMin, FrequencyError> {
        if self.model != Model::CashRegister {
            return Err(FrequencyError::Unsupported {
                operation: "conservative update",
                reason: "it needs the cash-register model (positive updates only)",
            });
        }
        let mut cm = self.emptied();
        cm.conservative = true;
        Ok(cm)
    }

    /// Columns `w`.
    pub fn width(&self) -> usize {
        self.table.width
    }

    /// Rows `d`.
    pub fn depth(&self) -> usize {
        self.table.depth()
    }

    /// The update model.
    pub fn model(&self) -> Model {
        self.model
    }

    /// The item hasher.
    pub fn hasher(&self) -> ItemHasher {
        self.hasher
    }

    /// Whether updates are conservative.
    pub fn is_conservative(&self) -> bool {
        self.conservative
    }

    /// The ε the width guarantees: `e·⌈2^32/w⌉/2^32`, i.e. `e/w` for a power-of-two `w` and
    /// within a factor `1 + w/2^32` of it otherwise (the row functions' collision probability
    /// times `e`).
    pub fn epsilon(&self) -> f64 {
        epsilon_of(self.width())
    }

    /// The δ the depth guarantees: `e^−d`.
    pub fn delta(&self) -> f64 {
        delta_of(self.depth())
    }

    /// The sum of all counts, `Σ a_i`.
    pub fn total(&self) -> i64 {
        self.total
    }

    /// The `‖a‖₁` the bounds use: the total for non-negative models (exact), the sum of the
    /// updates' absolute values for the general turnstile (an upper bound on `‖a‖₁`).
    pub fn l1(&self) -> f64 {
        match self.model {
            Model::GeneralTurnstile => self.mass as f64,
            _ => self.total as f64,
        }
    }

    /// The row functions (for inspection and encoding).
    pub fn row_hashes(&self) -> &[PairwiseHash] {
        &self.table.rows
    }

    /// The counters, row-major.
    pub fn counters(&self) -> &[i64] {
        &self.table.counters
    }

    /// Adds `count` to `item`'s frequency.
    #[inline]
    pub fn update(&mut self, item: &[u8], count: i64) -> Result<(), FrequencyError> {
        self.update_hash(self.hasher.hash(item), count)
    }

    /// Adds `count` to the frequency of the item whose hash is `h` (`hasher().hash(item)`).
    ///
    /// Errors, leaving the sketch unchanged: a negative count in the cash-register model; in
    /// the non-negative turnstile, a negative count that would take a counter below zero
    /// (the stream broke its promise); a mass past `2^63 − 1`.
    #[inline]
    pub fn update_hash(&mut self, h: u64, count: i64) -> Result<(), FrequencyError> {
        // The common case first: a positive count that keeps the mass within bounds.
        if count > 0 {
            // mass ≤ 2^63 − 1 and count < 2^63: the sum cannot wrap a u64.
            let mass = self.mass + count as u64;
            if mass <= i64::MAX as u64 {
                if self.conservative {
                    self.table.add_conservative(h, count);
                } else {
                    self.table.add(h, count);
                }
                self.mass = mass;
                self.total += count;
                return Ok(());
            }
        }
        self.update_hash_checked(h, count)
    }

    /// Every case, with every check.
    #[cold]
    fn update_hash_checked(&mut self, h: u64, count: i64) -> Result<(), FrequencyError> {
        let mass = add_mass(self.mass, count)?;
        if count < 0 {
            match self.model {
                Model::CashRegister => return Err(FrequencyError::NegativeUpdate { count }),
                Model::NonNegativeTurnstile => {
                    let floor = self.table.min(h);
                    if floor < count.unsigned_abs() as i64 {
                        return Err(FrequencyError::BelowZero {
                            counter: floor,
                            count,
                        });
                    }
                }
                Model::GeneralTurnstile => {}
            }
        }
        if self.conservative {
            if count > 0 {
                self.table.add_conservative(h, count);
            }
        } else {
            self.table.add(h, count);
        }
        self.mass = mass;
        self.total += count;
        Ok(())
    }

    /// The point query for `item`: see [`CountMin::point_hash`].
    #[inline]
    pub fn point(&self, item: &[u8]) -> Estimate {
        self.point_hash(self.hasher.hash(item))
    }

    /// The point query for the item whose hash is `h`.
    ///
    /// Non-negative models (Theorem 1): the minimum over the rows, which never under-counts;
    /// `[max(0, value − ε‖a‖₁), value]` holds the truth with probability `1 − δ` (and its upper
    /// end always). General turnstile (Theorem 2): the median over the rows;
    /// `value ± 3ε‖a‖₁` with probability `1 − δ^(1/4)`.
    #[inline]
    pub fn point_hash(&self, h: u64) -> Estimate {
        let eps = self.epsilon();
        match self.model {
            Model::GeneralTurnstile => {
                let v = self.table.median(h);
                let r = 3.0 * eps * self.l1();
                Estimate::probabilistic(
                    v,
                    v - r,
                    v + r,
                    1.0 - self.delta().powf(0.25),
                    Method::CountMinMedian,
                )
            }
            _ => {
                let v = self.table.min(h) as f64;
                let low = (v - eps * self.l1()).max(0.0).min(v);
                Estimate::probabilistic(v, low, v, 1.0 - self.delta(), Method::CountMinMin)
            }
        }
    }

    /// Why `other` cannot be combined with `self`, if it cannot.
    fn compatible(&self, other: &CountMin) -> Result<(), FrequencyError> {
        MergeError::check(
            self.hasher,
            other.hasher,
            &[
                ("width", self.width() as u64, other.width() as u64),
                ("depth", self.depth() as u64, other.depth() as u64),
                ("model", self.model as u64, other.model as u64),
                (
                    "conservative update",
                    self.conservative as u64,
                    other.conservative as u64,
                ),
            ],
        )?;
        self.same_rows(other)
    }

    /// Why `other`'s row functions are not this sketch's, if they are not: another family
    /// (named, as sketches saved before the multiply-shift rows are refused by it), or other
    /// functions of it.
    fn same_rows(&self, other: &CountMin) -> Result<(), FrequencyError> {
        if self.table.family != other.table.family {
            return Err(MergeError::Incompatible {
                field: "row-hash family (2: pairwise, sketches written before 2026-12-01; 3: \
                        multiply-shift)",
                ours: self.table.family.id() as u64,
                theirs: other.table.family.id() as u64,
            }
            .into());
        }
        if self.table.rows != other.table.rows {
            return Err(MergeError::Incompatible {
                field: "row hashes",
                ours: 0,
                theirs: 1,
            }
            .into());
        }
        Ok(())
    }

    /// Adds `other`'s stream to this one: counters add, as the sketch is linear. Both must
    /// have the same hasher, width, depth, model and update rule.
    pub fn merge(&mut self, other: &CountMin) -> Result<(), FrequencyError> {
        self.compatible(other)?;
        let mass = combined_mass(self.mass, other.mass, other.total)?;
        for (a, b) in self.table.counters.iter_mut().zip(&other.table.counters) {
            *a += b;
        }
        self.total += other.total;
        self.mass = mass;
        Ok(())
    }

    /// Removes `other`'s stream from this one: counters subtract. This is how a window is the
    /// total minus its expired buckets. In the non-negative models `other` must be a part of
    /// this stream: a counter that would go below zero is an error (and nothing changes).
    /// Not available with conservative update.
    pub fn subtract(&mut self, other: &CountMin) -> Result<(), FrequencyError> {
        self.compatible(other)?;
        if self.conservative {
            return Err(FrequencyError::Unsupported {
                operation: "subtract",
                reason: "conservative counters do not hold the sum of their items",
            });
        }
        let mass = combined_mass(self.mass, other.mass, other.total)?;
        if self.model != Model::GeneralTurnstile {
            let below = self
                .table
                .counters
                .iter()
                .zip(&other.table.counters)
                .find(|(a, b)| a < b);
            if let Some((&a, &b)) = below {
                return Err(FrequencyError::BelowZero {
                    counter: a,
                    count: -b,
                });
            }
        }
        for (a, b) in self.table.counters.iter_mut().zip(&other.table.counters) {
            *a -= b;
        }
        self.total -= other.total;
        self.mass = mass;
        Ok(())
    }

    /// The inner product `Σ a_i·b_i` of two non-negative streams sketched with the same
    /// functions — the size of the join of two relations on the item (Theorem 3): the minimum
    /// over rows of the row-wise dot products. It never under-counts, and
    /// `[max(0, value − ε‖a‖₁‖b‖₁), value]` holds the truth with probability `1 − δ`.
    pub fn inner_product(&self, other: &CountMin) -> Result<Estimate, FrequencyError> {
        MergeError::check(
            self.hasher,
            other.hasher,
            &[("width", self.width() as u64, other.width() as u64)],
        )?;
        self.same_rows(other)?;
        if self.model == Model::GeneralTurnstile || other.model == Model::GeneralTurnstile {
            return Err(FrequencyError::Unsupported {
                operation: "inner product",
                reason: "Theorem 3 needs non-negative streams",
            });
        }
        if self.conservative || other.conservative {
            return Err(FrequencyError::Unsupported {
                operation: "inner product",
                reason: "conservative counters do not hold the sum of their items",
            });
        }
        let v = self.table.inner_product(&other.table) as f64;
        let low = (v - self.epsilon() * self.l1() * other.l1())
            .max(0.0)
            .min(v);
        Ok(Estimate::probabilistic(
            v,
            low,
            v,
            1.0 - self.delta(),
            Method::CountMinInnerProduct,
        ))
    }
}
