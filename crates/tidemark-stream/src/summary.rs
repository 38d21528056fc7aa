//! Per-bucket summaries behind one small trait, and the per-key window state built from them.
//!
//! A metric keeps, per key and per bucket of event time, a [`BucketSummary`]: something
//! items are added to, that merges with another of its kind, that encodes into the
//! [`tidemark::codec`] envelope and that answers with an [`Estimate`]. The store keeps the
//! bytes, never the numbers, so any window is answered later by merging buckets.
//!
//! - `count`: [`CountBucket`], the exact number of events in the bucket, stored as a one-block
//!   [`BlockCounter`] (a block of exactly the bucket's width, so its answer is exact). Merging
//!   adds. Per key, the live window is an [`ExpHistogram`] over the window's ticks, fed one
//!   bucket at a time: `O(k log N)` state per key instead of one counter per bucket in the
//!   window, a guaranteed bracket, and [`ExpHistogram::upper_bound`] as the one-sided answer
//!   for limits.
//! - `distinct`: a HyperLogLog (or ExaLogLog, `sketch = "exaloglog"`) per bucket; merging is
//!   the register-wise union; the live
//!   window is a ring of the key's last `window / bucket` closed bucket sketches, merged at
//!   each close.
//! - `frequency`: [`FrequencyBucket`], the key's item counts — exact while few, then a
//!   Count-Min sketch with the items reaching φ of the key's events kept by name
//!   ([`ItemCounts`]). Merging adds counters and unites the named items, so the window (the
//!   same ring as `distinct`) still names every item reaching φ of it. Its single answer,
//!   for alerts and top keys, is the count of the key's most frequent item.

use tidemark::cardinality::{DistinctSketch, ExaLogLog, Hll, Representation};
use tidemark::frequency::ItemCounts;
use tidemark::window::{BlockCounter, ExpHistogram, Window};
use tidemark::{DecodeError, Estimate, MergeError, Method};

use crate::config::SketchKind;

/// What a metric keeps per key and bucket.
pub trait BucketSummary: Clone {
    /// Adds one item: its 64-bit hash and its bytes (a count ignores both, a distinct
    /// summary the bytes; a frequency summary keeps the bytes of its heavy items).
    fn add(&mut self, item: u64, bytes: &[u8]);
    /// Merges another summary of the same bucket and shape into this one.
    fn merge(&mut self, other: &Self) -> Result<(), MergeError>;
    /// Encodes into the envelope.
    fn to_bytes(&self) -> Vec<u8>;
    /// The summary's answer for its own bucket.
    fn estimate(&self) -> Estimate;
}

/// The most events a stored count bucket may claim (2^48).
pub const MAX_BUCKET_COUNT: u64 = 1 << 48;

/// The exact number of events of one key in one bucket `[start, start + width)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountBucket {
    start: u64,
    width: u64,
    count: u64,
}

impl CountBucket {
    /// An empty bucket. `start` is a multiple of `width`.
    pub fn new(start: u64, width: u64) -> CountBucket {
        debug_assert!(width > 0 && start % width == 0);
        CountBucket {
            start,
            width,
            count: 0,
        }
    }

    /// A bucket holding `count` events (at most [`MAX_BUCKET_COUNT`], as a stored count is
    /// checked to be).
    pub fn holding(start: u64, width: u64, count: u64) -> CountBucket {
        debug_assert!(count <= MAX_BUCKET_COUNT);
        CountBucket {
            count,
            ..CountBucket::new(start, width)
        }
    }

    /// The number of events.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Adds `n` events (a window's sum across buckets, for answers only: the bytes of a
    /// summary that absorbed other buckets' counts still claim this bucket).
    pub fn add_count(&mut self, n: u64) {
        self.count = self.count.saturating_add(n);
    }

    /// The bucket's start.
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Decodes a bucket written by [`BucketSummary::to_bytes`], checking that it is a
    /// one-block counter of the expected width and start.
    pub fn from_bytes(bytes: &[u8], start: u64, width: u64) -> Result<CountBucket, DecodeError> {
        let b = BlockCounter::from_bytes(bytes)?;
        let invalid = |field, expected, got| DecodeError::Invalid {
            field,
            offset: 0,
            expected,
            got,
        };
        if b.window() != Window::Ticks(width) || b.block() != width {
            return Err(invalid(
                "count bucket width",
                "a block counter whose block and window are the bucket width",
                b.block(),
            ));
        }
        let mut count = 0u64;
        for (i, (index, c)) in b.blocks().enumerate() {
            if i > 0 {
                return Err(invalid("count bucket blocks", "at most one block", 2));
            }
            if index.checked_mul(width) != Some(start) {
                return Err(invalid(
                    "count bucket start",
                    "the block of the bucket's start",
                    index,
                ));
            }
            // Far above any real bucket, far below where window sums could overflow.
            if c > MAX_BUCKET_COUNT {
                return Err(invalid("count bucket count", "at most 2^48 events", c));
            }
            count = c;
        }
        Ok(CountBucket {
            start,
            width,
            count,
        })
    }
}

impl BucketSummary for CountBucket {
    #[inline]
    fn add(&mut self, _item: u64, _bytes: &[u8]) {
        self.count += 1;
    }

    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        if other.width != self.width || other.start != self.start {
            return Err(MergeError::Incompatible {
                field: if other.width != self.width {
                    "bucket width"
                } else {
                    "bucket start"
                },
                ours: if other.width != self.width {
                    self.width
                } else {
                    self.start
                },
                theirs: if other.width != self.width {
                    other.width
                } else {
                    other.start
                },
            });
        }
        self.count = self.count.saturating_add(other.count);
        Ok(())
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut b = BlockCounter::with_block(Window::Ticks(self.width), self.width)
            .expect("a positive width is a valid block");
        if self.count > 0 {
            b.record_value(self.start, self.count)
                .expect("a fresh ticks counter takes any tick");
        }
        b.to_bytes()
    }

    fn estimate(&self) -> Estimate {
        Estimate::exact(self.count as f64)
    }
}

/// The distinct items of one key in one bucket: a HyperLogLog (exact while small, sparse,
/// then dense) or an ExaLogLog (exact, then dense) of the metric's precision; most keys stay
/// small.
#[derive(Clone, Debug)]
pub struct DistinctBucket {
    sketch: DistinctSketch,
}

impl DistinctBucket {
    /// An empty bucket of the metric's sketch and precision.
    ///
    /// # Panics
    /// If `p` is outside 4..=18: the pipeline passes a `Kind::Distinct` precision, which
    /// `Config::from_toml` accepts only in 4..=18 (as the count and frequency buckets trust
    /// their ε, δ and φ).
    pub(crate) fn of(kind: SketchKind, p: u8) -> DistinctBucket {
        const VALIDATED: &str = "a distinct metric's precision comes from Config::from_toml, \
                                 which refuses any outside 4..=18";
        let sketch = match kind {
            SketchKind::HyperLogLog => DistinctSketch::Hll(Hll::new(p).expect(VALIDATED)),
            SketchKind::ExaLogLog => DistinctSketch::ExaLogLog(ExaLogLog::new(p).expect(VALIDATED)),
        };
        DistinctBucket { sketch }
    }

    /// Decodes a stored bucket, refusing one of another sketch, precision or hash (a merge
    /// would silently fold it to the smaller precision).
    pub fn from_bytes(
        bytes: &[u8],
        kind: SketchKind,
        p: u8,
    ) -> Result<DistinctBucket, DecodeError> {
        let sketch = match kind {
            SketchKind::HyperLogLog => DistinctSketch::Hll(Hll::from_bytes(bytes)?),
            SketchKind::ExaLogLog => {
                let e = ExaLogLog::from_bytes(bytes)?;
                // The envelope's parameters start with t, then d.
                let wrong = if e.t() != ExaLogLog::DEFAULT_T {
                    Some(("t", 0, e.t()))
                } else if e.d() != ExaLogLog::DEFAULT_D {
                    Some(("d", 1, e.d()))
                } else {
                    None
                };
                if let Some((field, at, got)) = wrong {
                    return Err(DecodeError::Invalid {
                        field,
                        offset: tidemark::codec::HEADER_LEN + at,
                        expected: "the pipeline's ExaLogLog (t, d) = (2, 20)",
                        got: got as u64,
                    });
                }
                DistinctSketch::ExaLogLog(e)
            }
        };
        if sketch.precision() != p {
            return Err(DecodeError::Invalid {
                field: "precision",
                offset: 0,
                expected: "the metric's precision",
                got: sketch.precision() as u64,
            });
        }
        if sketch.hasher() != tidemark::ItemHasher::default() {
            return Err(DecodeError::Invalid {
                field: "hash",
                offset: 7,
                expected: "tidemark's native hash (xxh3, default seed)",
                got: sketch.hasher().seed(),
            });
        }
        Ok(DistinctBucket { sketch })
    }

    /// The sketch.
    pub fn sketch(&self) -> &DistinctSketch {
        &self.sketch
    }

    /// Whether the sketch still counts exactly.
    pub fn is_exact(&self) -> bool {
        self.sketch.representation() == Representation::Exact
    }

    /// Whether adding the item of hash `item` would change the bucket (read-only).
    #[inline]
    pub(crate) fn would_change(&self, item: u64) -> bool {
        self.sketch.would_change(item)
    }

    /// Heap bytes the sketch holds.
    pub fn heap_bytes(&self) -> usize {
        self.sketch.bytes()
            - match self.sketch {
                DistinctSketch::Hll(_) => std::mem::size_of::<Hll>(),
                DistinctSketch::ExaLogLog(_) => std::mem::size_of::<ExaLogLog>(),
            }
    }
}

impl BucketSummary for DistinctBucket {
    #[inline]
    fn add(&mut self, item: u64, _bytes: &[u8]) {
        self.sketch.insert_hash(item);
    }

    /// Merges a bucket of the same sketch and precision (a merge across precisions would fold
    /// silently; decoding already refuses another ExaLogLog `t` or `d`).
    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        let (ours, theirs) = (self.sketch.precision(), other.sketch.precision());
        if ours != theirs {
            return Err(MergeError::Incompatible {
                field: "precision",
                ours: ours as u64,
                theirs: theirs as u64,
            });
        }
        self.sketch.merge(&other.sketch)
    }

    fn to_bytes(&self) -> Vec<u8> {
        self.sketch.to_bytes()
    }

    fn estimate(&self) -> Estimate {
        self.sketch.estimate()
    }
}

/// The item counts of one key in one bucket (see [`ItemCounts`]).
#[derive(Clone, Debug)]
pub struct FrequencyBucket {
    counts: ItemCounts,
}

impl FrequencyBucket {
    /// An empty bucket of the metric's ε, δ and φ (validated by the config).
    pub fn new(epsilon: f64, delta: f64, phi: f64) -> FrequencyBucket {
        FrequencyBucket {
            counts: ItemCounts::new(epsilon, delta, phi).expect("the config validated ε, δ, φ"),
        }
    }

    /// Decodes a stored bucket, refusing one of other parameters (it would not merge).
    pub fn from_bytes(
        bytes: &[u8],
        epsilon: f64,
        delta: f64,
        phi: f64,
    ) -> Result<FrequencyBucket, DecodeError> {
        let counts = ItemCounts::from_bytes(bytes)?;
        if (counts.epsilon(), counts.delta(), counts.phi()) != (epsilon, delta, phi) {
            return Err(DecodeError::Invalid {
                field: "item counts parameters",
                offset: tidemark::codec::HEADER_LEN,
                expected: "the metric's epsilon, delta and phi",
                got: counts.epsilon().to_bits(),
            });
        }
        Ok(FrequencyBucket { counts })
    }

    /// The counts.
    pub fn counts(&self) -> &ItemCounts {
        &self.counts
    }
}

impl BucketSummary for FrequencyBucket {
    #[inline]
    fn add(&mut self, item: u64, bytes: &[u8]) {
        self.counts.insert_hashed(item, bytes, 1);
    }

    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        self.counts.merge(&other.counts)
    }

    fn to_bytes(&self) -> Vec<u8> {
        self.counts.to_bytes()
    }

    /// The count of the key's most frequent item.
    fn estimate(&self) -> Estimate {
        self.counts.heaviest_count()
    }
}

/// A count metric's live window for one key: an exponential histogram over the window,
/// fed with each closed bucket's count stamped at the bucket's last tick.
#[derive(Clone, Debug)]
pub struct CountWindow {
    hist: ExpHistogram,
}

impl CountWindow {
    /// A window of `window` ms within relative error ε/2.
    pub fn new(window: u64, epsilon: f64) -> CountWindow {
        CountWindow {
            hist: ExpHistogram::ticks(window, epsilon).expect("validated by the config"),
        }
    }

    /// Restores a window from its histogram bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<CountWindow, DecodeError> {
        Ok(CountWindow {
            hist: ExpHistogram::from_bytes(bytes)?,
        })
    }

    /// Whether this window is over `window` ms with the `k` that ε gives.
    pub fn matches(&self, window: u64, epsilon: f64) -> bool {
        self.hist.window() == Window::Ticks(window)
            && ExpHistogram::ticks(window, epsilon).is_ok_and(|h| h.k() == self.hist.k())
    }

    /// The histogram's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.hist.to_bytes()
    }

    /// Adds a closed bucket `[start, end)` holding `count` events. Buckets come in order.
    pub fn add_bucket(&mut self, end: u64, count: u64) {
        // Buckets close in increasing order, so the stamp never goes backwards.
        let _ = self.hist.record_value(end - 1, count);
    }

    /// Moves the window's edge to the end of the bucket just closed.
    pub fn advance(&mut self, end: u64) {
        let _ = self.hist.advance_to(end - 1);
    }

    /// The window's count: guaranteed bracket, `high` never below the truth.
    pub fn estimate(&self) -> Estimate {
        self.hist.estimate()
    }

    /// The count of the closed buckets ending after `from`: what the window starting at `from`
    /// (a later edge than the last close's) holds of them, for an early alert between closes.
    /// The bracket is [`CountWindow::estimate`]'s: the oldest histogram bucket counted may
    /// straddle the edge, and holds at least its newest arrival inside.
    pub fn estimate_from(&self, from: u64) -> Estimate {
        // Buckets are stamped at their last tick (`end − 1`), so one ending after `from` is
        // stamped at or after it.
        let mut total = 0u64;
        let mut oldest = None;
        for b in self.hist.buckets().filter(|b| b.timestamp >= from) {
            oldest.get_or_insert(b.size);
            total += b.size;
        }
        let total_f = total as f64;
        match oldest {
            Some(size) if size > 1 => Estimate::guaranteed(
                total_f - (size - 1) as f64 / 2.0,
                total_f - size as f64 + 1.0,
                total_f,
                Method::ExpHistogram,
            ),
            _ => Estimate::exact(total_f),
        }
    }

    /// Whether nothing is left in the window.
    pub fn is_empty(&self) -> bool {
        self.hist.upper_bound() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_bucket_round_trips_and_merges_by_adding() {
        let mut a = CountBucket::new(120_000, 60_000);
        for i in 0..37 {
            a.add(i, b"");
        }
        let bytes = a.to_bytes();
        let back = CountBucket::from_bytes(&bytes, 120_000, 60_000).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.estimate(), Estimate::exact(37.0));
        let mut b = CountBucket::new(120_000, 60_000);
        b.add(0, b"");
        a.merge(&b).unwrap();
        assert_eq!(a.count(), 38);
        // Another bucket, or another width, does not merge.
        assert!(a.merge(&CountBucket::new(180_000, 60_000)).is_err());
        assert!(a.merge(&CountBucket::new(120_000, 30_000)).is_err());
        // Bytes of another bucket are refused.
        assert!(CountBucket::from_bytes(&bytes, 180_000, 60_000).is_err());
        assert!(CountBucket::from_bytes(&bytes, 120_000, 30_000).is_err());
        let empty = CountBucket::new(0, 1000);
        assert_eq!(
            CountBucket::from_bytes(&empty.to_bytes(), 0, 1000).unwrap(),
            empty
        );
    }

    #[test]
    fn count_window_holds_the_truth_of_the_last_buckets() {
        // 3-bucket window of 10 ms buckets; counts 1..=20: the last three at each step.
        let mut w = CountWindow::new(30, 0.1);
        let counts: Vec<u64> = (1..=20).collect();
        for (i, &c) in counts.iter().enumerate() {
            let end = (i as u64 + 1) * 10;
            w.add_bucket(end, c);
            let truth: u64 = counts[i.saturating_sub(2)..=i].iter().sum();
            let e = w.estimate();
            assert!(e.contains(truth as f64), "{e} misses {truth} at {i}");
            assert!(e.high >= truth as f64);
        }
        w.advance(1_000);
        assert!(w.is_empty());
    }
}
