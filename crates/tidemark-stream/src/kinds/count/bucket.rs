//! A count metric's bucket: the exact number of events of one key in one bucket, stored as
//! its count alone, or as a one-block [`BlockCounter`] envelope (a block of exactly the
//! bucket's width, so its answer is exact). Merging adds.

use tidemark::window::{BlockCounter, Window};
use tidemark::{DecodeError, Estimate, MergeError};

use crate::kinds::BucketSummary;
use crate::stored::{self, MAX_BUCKET_COUNT};

/// The exact number of events of one key in one bucket `[start, start + width)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CountBucket {
    start: u64,
    width: u64,
    count: u64,
}

impl CountBucket {
    /// An empty bucket. `start` is a multiple of `width`.
    pub(crate) fn new(start: u64, width: u64) -> CountBucket {
        debug_assert!(width > 0 && start % width == 0);
        CountBucket {
            start,
            width,
            count: 0,
        }
    }

    /// A bucket holding `count` events (at most [`MAX_BUCKET_COUNT`], as a stored count is
    /// checked to be).
    pub(crate) fn holding(start: u64, width: u64, count: u64) -> CountBucket {
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

    /// Counts add (the bytes still claim this bucket; see [`CountBucket::add_count`]).
    fn absorb(&mut self, other: &Self) -> Result<(), MergeError> {
        self.add_count(other.count);
        Ok(())
    }

    /// A count at rest is the count alone ([`crate::stored::count`]).
    fn to_stored(&self) -> Vec<u8> {
        stored::count(self.count)
    }

    fn heap_bytes(&self) -> usize {
        0
    }

    /// Exact counts bound themselves.
    fn upper(&self) -> f64 {
        self.count as f64
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
        let mut b = BlockCounter::with_block(Window::Ticks(self.width), self.width).expect(
            "a bucket's width is its metric's (Config::from_toml refuses a zero or oversized \
                 bucket) or a decoded counter's own: a valid window and its one block",
        );
        if self.count > 0 {
            b.record_value(self.start, self.count).expect(
                "a counter that has seen no tick yet takes any tick: nothing to be older than",
            );
        }
        b.to_bytes()
    }

    fn estimate(&self) -> Estimate {
        Estimate::exact(self.count as f64)
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
}
