//! [`QuantileRing`]: quantiles over the last `W` buckets of time (the type's documentation
//! carries the design).

use super::sketch::{DdSketch, QuantileEstimate};
use super::QuantileError;
use crate::ParamError;

/// The most buckets a ring holds.
pub const MAX_RING_BUCKETS: u32 = 1_000_000;

/// One slot: its bucket and that bucket's sketch.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Slot {
    pub(crate) bucket: u64,
    pub(crate) sketch: DdSketch,
}

/// The merge of the closed buckets `[now − window + 1, now − 1]`.
#[derive(Clone, Debug)]
struct Aggregate {
    now: u64,
    window: u64,
    closed: DdSketch,
    /// A late event changed the sum, minimum or maximum: recompute them from the buckets.
    dirty: bool,
}

/// Quantiles over the last `W` buckets of time, from a ring of per-bucket sketches and a
/// window aggregate that slides by one merge and one subtraction.
///
/// Time is cut into buckets of `width` ticks; each bucket gets its own [`DdSketch`], kept in
/// a ring of `n` slots indexed by bucket mod `n`, so a slot is recycled when a bucket `n`
/// newer reuses it. An event for a bucket still in the ring goes to its own bucket, late or
/// not; one older than the ring is refused ([`QuantileError::TooOld`]) — never added to the
/// current bucket, which would move it into the wrong windows.
///
/// A window of the last `W ≤ n` buckets ending at the bucket of `now` is the merge of their
/// sketches: bin counts add, so it is exactly the sketch of the window's values, with the same
/// α guarantee. Merging `W` sketches per query is what the ring avoids: it keeps the merge of
/// the window's *closed* buckets (all but the newest) and, when a bucket closes, merges it in
/// and subtracts the bucket that left the window — DDSketch's counts subtract exactly
/// ([`DdSketch::subtract`]). A late event for a closed bucket of the window goes into the
/// aggregate too. A query then costs one copy of the aggregate and one merge of the open
/// bucket, whatever `W` is. The aggregate's sum, minimum and maximum are recomputed from the
/// buckets' (a subtraction leaves only bounds on them), so a window answers exactly as the
/// merge of its buckets in order would. An aggregate that collapsed under the bin limit is
/// rebuilt from its buckets when it slides, so it collapses only as far as that merge does.
///
/// One aggregate is kept, for the window length last asked for; a query for another length
/// rebuilds it (`W` merges), and one for a bucket older than the newest is merged afresh.
///
/// ```
/// use tidemark::quantile::QuantileRing;
///
/// // Minute buckets of second ticks, a day of them, α = 1%.
/// let mut ring = QuantileRing::new(0.01, 60, 1_440).unwrap();
/// for second in 0..7_200u64 {
///     ring.insert((second % 600) as f64 + 1.0, second).unwrap();
/// }
/// // The last hour: 1..=600 six times each; the median (rank 1,800) is 300, within 1%.
/// let p50 = ring.quantile(7_199, 60, 0.5).unwrap().estimate;
/// assert!((p50.value - 300.0).abs() <= 0.01 * 300.0, "{p50}");
/// assert!(p50.contains(300.0));
/// // An event older than the ring is refused, not miscounted.
/// let mut small = QuantileRing::new(0.01, 60, 10).unwrap();
/// small.insert(1.0, 6_000).unwrap();
/// assert!(small.insert(1.0, 0).is_err());
/// ```
#[derive(Clone, Debug)]
pub struct QuantileRing {
    /// An empty sketch of the buckets' mapping and bin limit.
    empty: DdSketch,
    width: u64,
    slots: Vec<Option<Box<Slot>>>,
    newest: Option<u64>,
    aggregate: Option<Aggregate>,
}

impl QuantileRing {
    /// A ring of `buckets` buckets of `width` ticks, each a sketch of relative accuracy
    /// `alpha` (cubic mapping, default bin limit).
    pub fn new(alpha: f64, width: u64, buckets: u32) -> Result<QuantileRing, ParamError> {
        QuantileRing::of(DdSketch::new(alpha)?, width, buckets)
    }

    /// A ring of `buckets` buckets (`1..=10^6`) of `width` ticks (at least 1), each bucket
    /// starting as `sketch` emptied (its mapping and bin limit).
    pub fn of(sketch: DdSketch, width: u64, buckets: u32) -> Result<QuantileRing, ParamError> {
        if width == 0 {
            return Err(ParamError::new("bucket width", "at least 1 tick", 0));
        }
        if !(1..=MAX_RING_BUCKETS).contains(&buckets) {
            return Err(ParamError::new("buckets", "in 1..=1000000", buckets));
        }
        let mut empty = sketch;
        empty.clear();
        Ok(QuantileRing {
            empty,
            width,
            slots: vec![None; buckets as usize],
            newest: None,
            aggregate: None,
        })
    }

    /// An empty sketch of the buckets' mapping and bin limit.
    pub fn empty_sketch(&self) -> &DdSketch {
        &self.empty
    }

    /// Ticks per bucket.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// Buckets in the ring.
    pub fn buckets(&self) -> u64 {
        self.slots.len() as u64
    }

    /// The newest bucket seen.
    pub fn newest_bucket(&self) -> Option<u64> {
        self.newest
    }

    /// The sketch of bucket `bucket`, if the ring holds it.
    pub fn bucket(&self, bucket: u64) -> Option<&DdSketch> {
        self.slot(bucket).map(|s| &s.sketch)
    }

    /// Bytes held: the ring, its buckets' sketches and the aggregate.
    pub fn bytes(&self) -> usize {
        core::mem::size_of::<QuantileRing>()
            + self.slots.len() * core::mem::size_of::<Option<Box<Slot>>>()
            + self
                .slots
                .iter()
                .flatten()
                .map(|s| core::mem::size_of::<u64>() + s.sketch.bytes()) // bucket, sketch
                .sum::<usize>()
            + self.aggregate.as_ref().map_or(0, |a| a.closed.bytes())
    }

    /// Adds `value` at `tick`, to its own bucket if the ring still holds it. NaN and ±∞ are
    /// refused, and so is an event older than the ring ([`QuantileError::TooOld`]).
    pub fn insert(&mut self, value: f64, tick: u64) -> Result<(), QuantileError> {
        if !value.is_finite() {
            return Err(QuantileError::NotFinite { value });
        }
        let bucket = tick / self.width;
        let n = self.buckets();
        if let Some(newest) = self.newest {
            if too_old(bucket, newest, n) {
                return Err(QuantileError::TooOld {
                    bucket,
                    oldest: newest - (n - 1),
                });
            }
        }
        if self.newest.is_none_or(|nb| bucket > nb) {
            // The aggregate moves first, while the buckets leaving it are still held.
            self.slide_to(bucket);
            self.newest = Some(bucket);
        }
        let i = (bucket % n) as usize;
        let slot = &mut self.slots[i];
        if slot.as_ref().is_none_or(|s| s.bucket != bucket) {
            *slot = Some(Box::new(Slot {
                bucket,
                sketch: self.empty.clone(),
            }));
        }
        slot.as_mut().expect("just filled").sketch.insert(value)?;
        if let Some(a) = &mut self.aggregate {
            if bucket < a.now && a.now - bucket < a.window {
                if a.closed.insert(value).is_err() {
                    self.aggregate = None; // past the count limit: rebuilt (and refused) on query
                } else {
                    a.dirty = true;
                }
            }
        }
        Ok(())
    }

    /// The merged sketch of the `window` buckets ending with the one holding `now`.
    pub fn window(&mut self, now: u64, window: u64) -> Result<DdSketch, QuantileError> {
        let n = self.buckets();
        if window == 0 || window > n {
            return Err(QuantileError::Window { window, buckets: n });
        }
        let now_bucket = now / self.width;
        if self.newest.is_some_and(|nb| now_bucket < nb) {
            // A window in the past: merged afresh, the aggregate left for the present.
            let mut out = self.merged(now_bucket.saturating_sub(window - 1), now_bucket)?;
            if let Some(s) = self.slot(now_bucket) {
                out.merge(&s.sketch)?;
            }
            return Ok(out);
        }
        let current = self
            .aggregate
            .as_ref()
            .is_some_and(|a| a.window == window && a.now <= now_bucket);
        if current {
            self.slide_to(now_bucket);
        }
        if self.aggregate.is_none() || !current {
            self.aggregate = None;
            let closed = self.merged(now_bucket.saturating_sub(window - 1), now_bucket)?;
            self.aggregate = Some(Aggregate {
                now: now_bucket,
                window,
                closed,
                dirty: false,
            });
        }
        if self.aggregate.as_ref().is_some_and(|a| a.dirty) {
            self.refresh_scalars();
        }
        let mut out = self
            .aggregate
            .as_ref()
            .expect("built just above")
            .closed
            .clone();
        if let Some(s) = self.slot(now_bucket) {
            out.merge(&s.sketch)?;
        }
        Ok(out)
    }

    /// The `q`-quantile of the `window` buckets ending with the one holding `now`.
    pub fn quantile(
        &mut self,
        now: u64,
        window: u64,
        q: f64,
    ) -> Result<QuantileEstimate, QuantileError> {
        if !(0.0..=1.0).contains(&q) {
            return Err(QuantileError::Quantile { q });
        }
        self.window(now, window)?.quantile(q)
    }

    fn slot(&self, bucket: u64) -> Option<&Slot> {
        match &self.slots[(bucket % self.buckets()) as usize] {
            Some(s) if s.bucket == bucket => Some(s),
            _ => None,
        }
    }

    /// The buckets `from..to` merged in order, from an empty sketch.
    fn merged(&self, from: u64, to: u64) -> Result<DdSketch, QuantileError> {
        let mut out = self.empty.clone();
        for b in from..to {
            if let Some(s) = self.slot(b) {
                out.merge(&s.sketch)?;
            }
        }
        Ok(out)
    }

    /// Moves the aggregate to end at `now_bucket`: the buckets that closed merge in, those
    /// that left subtract out. Too far a move, a collapse or a count past the limit drops it
    /// (to be rebuilt by the next query).
    fn slide_to(&mut self, now_bucket: u64) {
        let Some(mut a) = self.aggregate.take() else {
            return;
        };
        if now_bucket <= a.now {
            self.aggregate = Some(a);
            return;
        }
        if now_bucket - a.now >= a.window {
            return;
        }
        for b in a.now..now_bucket {
            if let Some(s) = self.slot(b) {
                if a.closed.merge(&s.sketch).is_err() {
                    return;
                }
            }
            // The bucket leaving: b − window + 1, if there is one.
            if let Some(gone) = (b + 1).checked_sub(a.window) {
                if let Some(s) = self.slot(gone) {
                    if a.closed.subtract(&s.sketch).is_err() {
                        return;
                    }
                }
            }
        }
        if a.closed.is_collapsed() {
            return;
        }
        a.now = now_bucket;
        a.dirty = true;
        self.aggregate = Some(a);
        self.refresh_scalars();
    }

    /// Recomputes the aggregate's sum, minimum and maximum from its buckets, in bucket order
    /// (as a fresh merge adds them).
    fn refresh_scalars(&mut self) {
        let Some(a) = &self.aggregate else {
            return;
        };
        let (mut sum, mut min, mut max) = (0.0f64, f64::INFINITY, f64::NEG_INFINITY);
        let mut any = false;
        for b in a.now.saturating_sub(a.window - 1)..a.now {
            if let Some(s) = self.slot(b) {
                let (lo, hi, s_sum, _, _) = s.sketch.scalars();
                if s.sketch.count() > 0 {
                    sum += s_sum;
                    min = min.min(lo);
                    max = max.max(hi);
                    any = true;
                }
            }
        }
        let a = self.aggregate.as_mut().expect("checked above");
        if any {
            a.closed.set_scalars(sum, min, max);
        }
        a.dirty = false;
    }

    // --- for the encoding ---

    pub(crate) fn slots(&self) -> &[Option<Box<Slot>>] {
        &self.slots
    }

    pub(crate) fn restore(&mut self, newest: Option<u64>, slots: Vec<Option<Box<Slot>>>) {
        self.newest = newest;
        self.slots = slots;
        self.aggregate = None;
    }
}

impl PartialEq for QuantileRing {
    /// The same buckets' mapping, width, slots and newest bucket (the aggregate is derived).
    fn eq(&self, other: &QuantileRing) -> bool {
        self.empty == other.empty
            && self.width == other.width
            && self.newest == other.newest
            && self.slots == other.slots
    }
}

/// Whether `bucket` has left a ring of `n` buckets whose newest is `newest`.
fn too_old(bucket: u64, newest: u64, n: u64) -> bool {
    newest.checked_sub(bucket).is_some_and(|age| age >= n)
}
