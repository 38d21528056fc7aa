//! [`DdSketch`]: the relative-error quantile sketch, its answers, merge and subtraction.

use super::mapping::{Mapping, MIN_INDEXABLE};
use super::store::{Store, Uncontained};
use super::{Part, QuantileError};
use crate::{Estimate, ItemHasher, MergeError, Method, ParamError};

const SIGN: u64 = 1 << 63;
const MIN_BITS: u64 = MIN_INDEXABLE.to_bits();
const INFINITY_BITS: u64 = f64::INFINITY.to_bits();

/// The relative accuracy of [`DdSketch::default`]: 1%.
pub const DEFAULT_ALPHA: f64 = 0.01;
/// Bins a store may hold unless told otherwise: at α = 1% a store spans values from `x` to
/// about `10^35·x` before its lowest bins collapse (4,096 bins of `ln γ ≈ 0.02`). At 32 bits
/// a count, 16 KiB a store at most.
pub const DEFAULT_BIN_LIMIT: u64 = 4_096;
/// The largest bin limit: 2^24 bins a store (64 MiB of 32-bit counts at most).
pub const MAX_BIN_LIMIT: u64 = 1 << 24;
/// The most values a sketch counts, `2^63 − 1`: past it inserts and merges are refused, so no
/// count can wrap.
pub const MAX_COUNT: u64 = u64::MAX >> 1;

/// A bin limit checked to lie in `1..=`[`MAX_BIN_LIMIT`]: a sketch built with one
/// ([`DdSketch::with_limit`]) cannot fail, so a caller that validated its limit once (a
/// pipeline's config) builds its sketches without an error path.
///
/// ```
/// use tidemark::quantile::{BinLimit, DdSketch, Mapping};
///
/// let limit = BinLimit::new(512).unwrap();
/// let s = DdSketch::with_limit(Mapping::cubic(0.01).unwrap(), limit);
/// assert_eq!(s.bin_limit(), 512);
/// assert!(BinLimit::new(0).is_err() && BinLimit::new(1 << 25).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinLimit(u32);

impl BinLimit {
    /// `bins`, if it is in `1..=2^24`.
    pub fn new(bins: u64) -> Result<BinLimit, ParamError> {
        if !(1..=MAX_BIN_LIMIT).contains(&bins) {
            return Err(ParamError::new("bin limit", "in 1..=16777216 (2^24)", bins));
        }
        Ok(BinLimit(bins as u32))
    }

    /// The limit.
    pub fn get(self) -> u64 {
        self.0 as u64
    }
}

/// A quantile answer: the [`Estimate`] of the value of nearest rank, and that rank.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantileEstimate {
    /// The value: a bin's representative (within α of the true value of that rank), and its
    /// bracket: the bin's bounds, clamped to the minimum and maximum. Guaranteed.
    pub estimate: Estimate,
    /// The nearest rank `⌈q·n⌉` (at least 1) whose value this is, 1-based.
    pub rank: u64,
    /// The count `n` it is a rank among.
    pub count: u64,
}

/// The nearest rank of quantile `q` among `n` values: `⌈q·n⌉` (the product in `f64`),
/// at least 1 and at most `n`. The exact `q`-quantile is the value of this rank in sorted
/// order.
///
/// ```
/// use tidemark::quantile::nearest_rank;
///
/// assert_eq!(nearest_rank(0.5, 10), 5);
/// assert_eq!(nearest_rank(0.99, 1_000), 990);
/// assert_eq!(nearest_rank(0.0, 7), 1);
/// assert_eq!(nearest_rank(1.0, 7), 7);
/// ```
pub fn nearest_rank(q: f64, n: u64) -> u64 {
    ((q * n as f64).ceil() as u64).clamp(1, n.max(1))
}

/// A bin in value order: negative store keys (negated keys of `|x|`), the zero bin, positive
/// keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Region {
    Negative(i64),
    Zero,
    Positive(i64),
}

/// A relative-error quantile sketch (DDSketch): see the [module documentation](super).
#[derive(Clone, Debug)]
pub struct DdSketch {
    mapping: Mapping,
    /// Values below `−2^−1022`, keyed by the negated key of `|x|`.
    negative: Store,
    positive: Store,
    zero: u64,
    count: u64,
    sum: f64,
    /// `+∞` and `−∞` while empty.
    min: f64,
    max: f64,
    /// Whether `min` (`max`) is the exact extreme, or (after a subtraction) a bound on it.
    min_exact: bool,
    max_exact: bool,
}

impl Default for DdSketch {
    /// α = 1%, the cubic mapping, 4,096 bins a store.
    fn default() -> Self {
        DdSketch::new(DEFAULT_ALPHA).expect("the default parameters are valid")
    }
}

impl DdSketch {
    /// A sketch of relative accuracy `alpha` (in `[1e-9, 1)`) by the cubic mapping, with
    /// [`DEFAULT_BIN_LIMIT`] bins a store.
    pub fn new(alpha: f64) -> Result<DdSketch, ParamError> {
        DdSketch::with_mapping(Mapping::cubic(alpha)?, DEFAULT_BIN_LIMIT)
    }

    /// A sketch whose bins are Prometheus native-histogram schema `schema`'s (`−4..=8`),
    /// with [`DEFAULT_BIN_LIMIT`] bins a store.
    pub fn schema(schema: i8) -> Result<DdSketch, ParamError> {
        DdSketch::with_mapping(Mapping::schema(schema)?, DEFAULT_BIN_LIMIT)
    }

    /// A sketch of `mapping` with at most `bin_limit` bins a store (`1..=2^24`).
    pub fn with_mapping(mapping: Mapping, bin_limit: u64) -> Result<DdSketch, ParamError> {
        Ok(DdSketch::with_limit(mapping, BinLimit::new(bin_limit)?))
    }

    /// An empty sketch of `mapping` with at most `limit` bins a store: infallible, the limit
    /// being checked already.
    pub fn with_limit(mapping: Mapping, limit: BinLimit) -> DdSketch {
        let limit = limit.0;
        DdSketch {
            mapping,
            negative: Store::new(limit),
            positive: Store::new(limit),
            zero: 0,
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            min_exact: true,
            max_exact: true,
        }
    }

    /// The same sketch, emptied, with at most `bin_limit` bins a store (`1..=2^24`).
    pub fn with_bin_limit(self, bin_limit: u64) -> Result<DdSketch, ParamError> {
        DdSketch::with_mapping(self.mapping, bin_limit)
    }

    /// The mapping of values to bins.
    pub fn mapping(&self) -> Mapping {
        self.mapping
    }

    /// The relative accuracy every quantile of an uncollapsed sketch is within.
    pub fn alpha(&self) -> f64 {
        self.mapping.alpha()
    }

    /// Bins a store may hold.
    pub fn bin_limit(&self) -> u64 {
        self.positive.limit() as u64
    }

    /// The number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether the sketch holds no value.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether a store has collapsed its lowest bins under the bin limit: answers that fall
    /// in the collapsed bin say so ([`Method::QuantileCollapsed`]) and have a wider bracket.
    pub fn is_collapsed(&self) -> bool {
        self.negative.collapsed().is_some() || self.positive.collapsed().is_some()
    }

    /// Non-empty bins (the zero bin included).
    pub fn bins(&self) -> usize {
        self.negative.nonzero().count() + self.positive.nonzero().count() + (self.zero > 0) as usize
    }

    /// Bytes held: the struct and its stores' arrays.
    pub fn bytes(&self) -> usize {
        core::mem::size_of::<DdSketch>() + self.negative.heap_bytes() + self.positive.heap_bytes()
    }

    /// Empties the sketch, keeping its mapping and bin limit.
    pub fn clear(&mut self) {
        *self = DdSketch::with_limit(self.mapping, BinLimit(self.positive.limit()));
    }

    /// Adds a value. NaN and ±∞ are refused ([`QuantileError::NotFinite`]), as is a value past
    /// [`MAX_COUNT`] values; `|value| < 2^−1022` (zero and the subnormals) counts in the zero
    /// bin.
    #[inline(always)]
    pub fn insert(&mut self, value: f64) -> Result<(), QuantileError> {
        let magnitude = value.to_bits() & !SIGN;
        // One comparison for "normal and finite": zero, the subnormals and the refusals take
        // the slow path.
        if magnitude.wrapping_sub(MIN_BITS) >= INFINITY_BITS - MIN_BITS || self.count >= MAX_COUNT {
            return self.insert_slow(value);
        }
        self.count += 1;
        self.sum += value;
        // Comparisons, not `f64::min`: a new extreme is rare, so these branches predict
        // well and the running extremes form no dependency chain from insert to insert.
        if value < self.min {
            self.min = value;
        }
        if value > self.max {
            self.max = value;
        }
        let key = self.mapping.index_bits(magnitude);
        if (value.to_bits() as i64) >= 0 {
            self.positive.add_one(key);
        } else {
            self.negative.add_one(-key);
        }
        Ok(())
    }

    /// Zero, subnormals and refusals: out of line.
    #[cold]
    #[inline(never)]
    fn insert_slow(&mut self, value: f64) -> Result<(), QuantileError> {
        self.insert_n(value, 1)
    }

    /// Adds `n` copies of a value (see [`DdSketch::insert`]).
    pub fn insert_n(&mut self, value: f64, n: u64) -> Result<(), QuantileError> {
        if !value.is_finite() {
            return Err(QuantileError::NotFinite { value });
        }
        if n == 0 {
            return Ok(());
        }
        if n > MAX_COUNT - self.count {
            return Err(QuantileError::Overflow {
                count: self.count,
                adding: n,
            });
        }
        self.count += n;
        self.sum += value * n as f64;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        let magnitude = value.abs();
        if magnitude >= MIN_INDEXABLE {
            let key = self.mapping.index(magnitude);
            if value > 0.0 {
                self.positive.add(key, n);
            } else {
                self.negative.add(-key, n);
            }
        } else {
            self.zero += n;
        }
        Ok(())
    }

    /// The value of nearest rank `⌈q·n⌉` ([`nearest_rank`]) for `q` in `[0, 1]`: a bin's
    /// representative, within α of the true value unless the sketch collapsed and the rank
    /// fell in the collapsed bin, with the bin's bounds (clamped to the minimum and maximum) as
    /// a guaranteed bracket. Ranks 1 and `n` are the exact minimum and maximum while those are
    /// known exactly.
    pub fn quantile(&self, q: f64) -> Result<QuantileEstimate, QuantileError> {
        if !(0.0..=1.0).contains(&q) {
            return Err(QuantileError::Quantile { q });
        }
        if self.count == 0 {
            return Err(QuantileError::Empty);
        }
        let rank = nearest_rank(q, self.count);
        let estimate = if rank == 1 && self.min_exact {
            Estimate::exact(self.min)
        } else if rank == self.count && self.max_exact {
            Estimate::exact(self.max)
        } else {
            let mut seen = 0u64;
            let region = self
                .regions()
                .find(|&(_, c)| {
                    seen += c;
                    seen >= rank
                })
                .map(|(r, _)| r)
                .expect("the bins sum to the count");
            self.answer(region)
        };
        Ok(QuantileEstimate {
            estimate,
            rank,
            count: self.count,
        })
    }

    /// How many values are at most `value` (±∞ allowed, NaN refused): exact below the
    /// minimum and from the maximum up; otherwise the values in lower bins plus half of those
    /// in `value`'s bin, bracketed by the counts below and including that bin. Guaranteed.
    pub fn rank(&self, value: f64) -> Result<Estimate, QuantileError> {
        if value.is_nan() {
            return Err(QuantileError::NotFinite { value });
        }
        if self.count == 0 || value < self.min {
            return Ok(Estimate::exact(0.0));
        }
        if value >= self.max {
            return Ok(Estimate::exact(self.count as f64));
        }
        let region = self.region_of(value);
        let below: u64 = self
            .regions()
            .take_while(|&(r, _)| r < region)
            .map(|(_, c)| c)
            .sum();
        let within = self.count_in(region);
        let low = below as f64;
        let high = (below + within) as f64;
        let method = if self.collapsed_region(region) {
            Method::QuantileCollapsed
        } else {
            Method::QuantileRank
        };
        Ok(Estimate::guaranteed(
            low + within as f64 / 2.0,
            low,
            high,
            method,
        ))
    }

    /// The fraction of values at most `value`: [`DdSketch::rank`] over the count.
    pub fn cdf(&self, value: f64) -> Result<Estimate, QuantileError> {
        let r = self.rank(value)?;
        if self.count == 0 {
            return Err(QuantileError::Empty);
        }
        let n = self.count as f64;
        Ok(Estimate {
            value: r.value / n,
            low: r.low / n,
            high: r.high / n,
            ..r
        })
    }

    /// The smallest value: exact, or after a subtraction bracketed by the bound kept and the
    /// lowest bin's upper bound. [`QuantileError::Empty`] when there is none.
    pub fn min(&self) -> Result<Estimate, QuantileError> {
        if self.count == 0 {
            return Err(QuantileError::Empty);
        }
        if self.min_exact {
            return Ok(Estimate::exact(self.min));
        }
        let lowest = self.regions().next().expect("a non-empty sketch").0;
        Ok(self.answer(lowest))
    }

    /// The largest value (see [`DdSketch::min`]).
    pub fn max(&self) -> Result<Estimate, QuantileError> {
        if self.count == 0 {
            return Err(QuantileError::Empty);
        }
        if self.max_exact {
            return Ok(Estimate::exact(self.max));
        }
        let highest = self.regions().last().expect("a non-empty sketch").0;
        Ok(self.answer(highest))
    }

    /// The sum of the values: the running `f64` sum, bracketed by each bin's bounds times its
    /// count (guaranteed, widened for the rounding of that sum). 0, exactly, when empty.
    pub fn sum(&self) -> Estimate {
        if self.count == 0 {
            return Estimate::exact(0.0);
        }
        let (mut low, mut high, mut terms) = (0.0f64, 0.0f64, 0u32);
        let (mut neg_low, mut neg_high) = (0.0f64, 0.0f64);
        for (region, c) in self.regions() {
            let (lo, hi) = self.clamped_bounds(region);
            let c = c as f64;
            // Negative and positive terms apart, so that −∞ + ∞ cannot arise.
            if hi <= 0.0 {
                neg_low += lo * c;
                neg_high += hi * c;
            } else if lo >= 0.0 {
                low += lo * c;
                high += hi * c;
            } else {
                neg_low += lo * c;
                high += hi * c;
            }
            terms += 1;
        }
        let widen = (terms as f64 + 2.0) * f64::EPSILON;
        let low = (neg_low + low) - (neg_low.abs() + low.abs()) * widen;
        let high = (neg_high + high) + (neg_high.abs() + high.abs()) * widen;
        let low = if low.is_nan() { f64::NEG_INFINITY } else { low };
        let high = if high.is_nan() { f64::INFINITY } else { high };
        let value = if self.sum.is_nan() {
            [low, high, 0.0]
                .into_iter()
                .find(|v| v.is_finite())
                .unwrap_or(0.0)
                .clamp(low, high)
        } else {
            self.sum.clamp(low, high)
        };
        Estimate::guaranteed(value, low, high, Method::QuantileSum)
    }

    /// Adds `other`'s values: bin counts add, exactly. The mappings must be equal (else
    /// [`QuantileError::Incompatible`] naming the parameter); the bin limits may differ (this
    /// sketch's is kept, and its stores collapse if the union needs more bins).
    pub fn merge(&mut self, other: &DdSketch) -> Result<(), QuantileError> {
        self.compatible(other)?;
        if other.count == 0 {
            return Ok(());
        }
        // The union's extreme is exact when the side holding it is: a bound on the other
        // side's extreme, at or beyond it, cannot hide a value past it.
        if other.count > MAX_COUNT - self.count {
            return Err(QuantileError::Overflow {
                count: self.count,
                adding: other.count,
            });
        }
        self.min_exact = match self.min.partial_cmp(&other.min) {
            Some(core::cmp::Ordering::Less) => self.min_exact,
            Some(core::cmp::Ordering::Greater) => other.min_exact,
            _ => self.min_exact || other.min_exact,
        };
        self.max_exact = match self.max.partial_cmp(&other.max) {
            Some(core::cmp::Ordering::Greater) => self.max_exact,
            Some(core::cmp::Ordering::Less) => other.max_exact,
            _ => self.max_exact || other.max_exact,
        };
        self.negative.merge(&other.negative);
        self.positive.merge(&other.positive);
        self.zero += other.zero;
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        Ok(())
    }

    /// Removes `other`'s values, which must be a part of this sketch's stream (a window minus
    /// its expired bucket): every bin of `other` must hold at most ours (a store that collapsed
    /// counts `other`'s lower keys in its collapsed bin), else [`QuantileError::NotContained`]
    /// or [`QuantileError::Collapsed`], and nothing changes.
    ///
    /// The minimum and maximum stay exact where `other` cannot have held them (its minimum
    /// above ours, its maximum below ours); otherwise they become bounds: the old extreme,
    /// narrowed to the remaining bins' bounds. [`DdSketch::min`] and [`DdSketch::max`] then
    /// answer with a bracket, and the quantiles' brackets are clamped to those bounds.
    pub fn subtract(&mut self, other: &DdSketch) -> Result<(), QuantileError> {
        self.compatible(other)?;
        if other.count == 0 {
            return Ok(());
        }
        let uncontained = |part: Part, key: i64, ours: u64, theirs: u64| {
            Err(QuantileError::NotContained {
                part,
                key,
                ours,
                theirs,
            })
        };
        if other.count > self.count {
            return uncontained(Part::Count, 0, self.count, other.count);
        }
        if other.zero > self.zero {
            return uncontained(Part::Zero, 0, self.zero, other.zero);
        }
        let stores = [
            (Part::Negative, &self.negative, &other.negative),
            (Part::Positive, &self.positive, &other.positive),
        ];
        for (part, ours, theirs) in stores {
            match ours.check_contains(theirs) {
                Ok(()) => {}
                Err(Uncontained::Bin { key, ours, theirs }) => {
                    return uncontained(part, key, ours, theirs)
                }
                Err(Uncontained::Collapsed { ours, theirs }) => {
                    return Err(QuantileError::Collapsed { part, ours, theirs })
                }
            }
        }
        self.negative.subtract(&other.negative);
        self.positive.subtract(&other.positive);
        self.zero -= other.zero;
        self.count -= other.count;
        if self.count == 0 {
            self.clear();
            return Ok(());
        }
        self.sum -= other.sum;
        self.min_exact &= other.min > self.min;
        self.max_exact &= other.max < self.max;
        if !self.min_exact {
            let lowest = self.regions().next().expect("a non-empty sketch").0;
            self.min = self.min.max(self.region_bounds(lowest).0).min(self.max);
        }
        if !self.max_exact {
            let highest = self.regions().last().expect("a non-empty sketch").0;
            self.max = self.max.min(self.region_bounds(highest).1).max(self.min);
        }
        Ok(())
    }

    fn compatible(&self, other: &DdSketch) -> Result<(), MergeError> {
        let ours = self.mapping.shape();
        let theirs = other.mapping.shape();
        let fields: Vec<_> = ours
            .iter()
            .zip(&theirs)
            .map(|(&(name, a), &(_, b))| (name, a, b))
            .collect();
        MergeError::check(ItemHasher::default(), ItemHasher::default(), &fields)
    }

    // --- bins in value order ---

    /// Every non-empty bin with its count, lowest values first.
    fn regions(&self) -> impl Iterator<Item = (Region, u64)> + '_ {
        self.negative
            .nonzero()
            .map(|(k, c)| (Region::Negative(k), c))
            .chain((self.zero > 0).then_some((Region::Zero, self.zero)))
            .chain(
                self.positive
                    .nonzero()
                    .map(|(k, c)| (Region::Positive(k), c)),
            )
    }

    /// The bin `value` (finite, or ±∞) falls in, a collapsed store's lower keys in its
    /// collapsed bin.
    fn region_of(&self, value: f64) -> Region {
        let magnitude = value.abs().min(f64::MAX);
        if magnitude < MIN_INDEXABLE {
            return Region::Zero;
        }
        let key = self.mapping.index(magnitude);
        if value > 0.0 {
            Region::Positive(self.positive.collapsed().map_or(key, |c| key.max(c)))
        } else {
            Region::Negative(self.negative.collapsed().map_or(-key, |c| (-key).max(c)))
        }
    }

    fn count_in(&self, region: Region) -> u64 {
        match region {
            Region::Negative(k) => self.negative.count_at(k),
            Region::Zero => self.zero,
            Region::Positive(k) => self.positive.count_at(k),
        }
    }

    fn collapsed_region(&self, region: Region) -> bool {
        match region {
            Region::Negative(k) => self.negative.collapsed() == Some(k),
            Region::Zero => false,
            Region::Positive(k) => self.positive.collapsed() == Some(k),
        }
    }

    /// The closed bounds of every value a bin may hold: a collapsed bin reaches down to the
    /// lowest value of its sign.
    fn region_bounds(&self, region: Region) -> (f64, f64) {
        let collapsed = self.collapsed_region(region);
        match region {
            Region::Negative(k) => {
                let (lo, hi) = self.mapping.bounds(-k);
                (if collapsed { -f64::MAX } else { -hi }, -lo)
            }
            Region::Zero => (-MIN_INDEXABLE, MIN_INDEXABLE),
            Region::Positive(k) => {
                let (lo, hi) = self.mapping.bounds(k);
                (if collapsed { MIN_INDEXABLE } else { lo }, hi)
            }
        }
    }

    /// A bin's bounds clamped to `[min, max]` (left as they are if that would empty them,
    /// which a consistent sketch never does).
    fn clamped_bounds(&self, region: Region) -> (f64, f64) {
        let (lo, hi) = self.region_bounds(region);
        let (clo, chi) = (lo.max(self.min), hi.min(self.max));
        if clo <= chi {
            (clo, chi)
        } else {
            (lo, hi)
        }
    }

    /// The answer for a value in `region`: its representative and clamped bounds.
    fn answer(&self, region: Region) -> Estimate {
        let (low, high) = self.clamped_bounds(region);
        let value = match region {
            Region::Negative(k) => -self.mapping.representative(-k),
            Region::Zero => 0.0,
            Region::Positive(k) => self.mapping.representative(k),
        };
        let method = if self.collapsed_region(region) {
            Method::QuantileCollapsed
        } else {
            Method::QuantileBin
        };
        Estimate::guaranteed(value.clamp(low, high), low, high, method)
    }

    // --- for the encoding ---

    pub(crate) fn stores(&self) -> (&Store, &Store) {
        (&self.negative, &self.positive)
    }

    pub(crate) fn zero_count(&self) -> u64 {
        self.zero
    }

    /// `(min, max, sum, min exact, max exact)`.
    pub(crate) fn scalars(&self) -> (f64, f64, f64, bool, bool) {
        (self.min, self.max, self.sum, self.min_exact, self.max_exact)
    }

    /// The bounds of the lowest and the highest non-empty bins (for the decoder's checks).
    pub(crate) fn extreme_bounds(&self) -> Option<((f64, f64), (f64, f64))> {
        let lowest = self.regions().next()?.0;
        let highest = self.regions().last()?.0;
        Some((self.region_bounds(lowest), self.region_bounds(highest)))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn from_parts(
        mapping: Mapping,
        negative: Store,
        positive: Store,
        zero: u64,
        count: u64,
        (min, max, sum): (f64, f64, f64),
        min_exact: bool,
        max_exact: bool,
    ) -> DdSketch {
        DdSketch {
            mapping,
            negative,
            positive,
            zero,
            count,
            sum,
            min,
            max,
            min_exact,
            max_exact,
        }
    }

    /// Replaces the sum, minimum and maximum (a ring's window recomputes them from its
    /// buckets).
    pub(crate) fn set_scalars(&mut self, sum: f64, min: f64, max: f64) {
        self.sum = sum;
        self.min = min;
        self.max = max;
        self.min_exact = true;
        self.max_exact = true;
    }

    /// Internal invariants, for tests and fuzzing.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn check_invariants(&self) {
        self.negative.check_invariants();
        self.positive.check_invariants();
        let total = self.negative.total() + self.zero + self.positive.total();
        assert_eq!(total, self.count);
        if self.count > 0 {
            assert!(self.min <= self.max);
        }
    }
}

impl PartialEq for DdSketch {
    /// The same mapping, bin limit, bins, count, and the same bits of sum, minimum and
    /// maximum (and whether those are exact): equal sketches encode to equal bytes.
    fn eq(&self, other: &DdSketch) -> bool {
        self.mapping == other.mapping
            && self.bin_limit() == other.bin_limit()
            && self.count == other.count
            && self.zero == other.zero
            && self.sum.to_bits() == other.sum.to_bits()
            && self.min.to_bits() == other.min.to_bits()
            && self.max.to_bits() == other.max.to_bits()
            && self.min_exact == other.min_exact
            && self.max_exact == other.max_exact
            && self.negative.same(&other.negative)
            && self.positive.same(&other.positive)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sketch(limit: u64, values: &[f64]) -> DdSketch {
        let mut s = DdSketch::with_mapping(Mapping::cubic(0.05).unwrap(), limit).unwrap();
        for &v in values {
            let _ = s.insert(v);
        }
        s
    }

    proptest! {
        /// Inserts, merges and subtractions keep the stores' invariants and the count; a
        /// merge followed by the subtraction of the same part gives back the bins.
        #[test]
        fn operations_keep_the_invariants(
            a in proptest::collection::vec(prop_oneof![-1e9f64..1e9, -2.0f64..2.0, Just(0.0)], 0..200),
            b in proptest::collection::vec(prop_oneof![-1e9f64..1e9, 1e-300f64..1e-290], 0..200),
            limit in 1u64..64,
        ) {
            let x = sketch(limit, &a);
            let y = sketch(limit, &b);
            x.check_invariants();
            y.check_invariants();
            let mut m = x.clone();
            m.merge(&y).unwrap();
            m.check_invariants();
            prop_assert_eq!(m.count(), x.count() + y.count());
            if m.subtract(&y).is_ok() {
                m.check_invariants();
                prop_assert_eq!(m.count(), x.count());
                if !m.is_collapsed() {
                    prop_assert!(m.negative.same(&x.negative) && m.positive.same(&x.positive));
                }
            } else {
                // Only a merge that collapsed further than `y` can refuse it.
                prop_assert!(m.is_collapsed());
            }
        }
    }

    #[test]
    fn the_zero_bin_and_the_extremes_of_one_value() {
        let s = sketch(10, &[0.0]);
        s.check_invariants();
        assert_eq!(s.quantile(0.5).unwrap().estimate, Estimate::exact(0.0));
        assert_eq!(s.bins(), 1);
        let e = sketch(10, &[-0.0, 5e-324]).quantile(0.5).unwrap().estimate;
        assert_eq!(e.value, 0.0);
    }
}
