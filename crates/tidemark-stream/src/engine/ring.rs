//! A key's closed buckets inside its window (distinct and frequency metrics), oldest first,
//! with the sum of their bounds kept as buckets come and go.
//!
//! At every close, every key with a window is evaluated against its alert rules. Most keys
//! are small: a window whose buckets' bounds ([`Summary::upper`]) sum to at most the smallest
//! limit cannot fire, and is passed over without merging its sketches. Summing the bounds at
//! each close cost O(window / bucket) per key per close — with 1-minute buckets in a 1-day
//! window, 1,440 buckets read a close, on scattered heap pages. The ring keeps the sum
//! instead: an exact integer total of the finite bounds (counts of events or of exact
//! distinct items) and the number of buckets without one, updated when a bucket enters,
//! leaves or takes a late event. Integer arithmetic keeps the sum exact however long the
//! run; it is the same number the sum over the buckets gives. (12 bytes more a key with a
//! window.)

use std::collections::VecDeque;

use super::Summary;

/// Closed buckets of one key, by increasing start, with their bounds' sum.
#[derive(Clone, Debug, Default)]
pub(super) struct Ring {
    buckets: VecDeque<(u64, Summary)>,
    /// The sum of the finite bounds: each is below 2^32 and a ring holds fewer than 2^32
    /// buckets (each takes memory), so the sum is exact in 64 bits.
    bounded: u64,
    /// Buckets whose bound is infinite (a distinct bucket past its exact range).
    unbounded: u32,
}

/// A bucket's bound as an integer, or `None` if it has no finite one. Bounds are counts, so
/// integers; one of 2^32 or more counts as none (no shortcut for such a key, which only costs
/// it a merge), which keeps the sum in 64 bits and the key's state small.
fn bound_of(s: &Summary) -> Option<u64> {
    let u = s.upper();
    (u < 4_294_967_296.0).then_some(u as u64)
}

impl Ring {
    fn enter(&mut self, s: &Summary) {
        match bound_of(s) {
            Some(b) => self.bounded += b,
            None => self.unbounded += 1,
        }
    }

    fn leave(&mut self, s: &Summary) {
        match bound_of(s) {
            Some(b) => self.bounded -= b,
            None => self.unbounded -= 1,
        }
    }

    /// Appends a bucket newer than every bucket held.
    pub(super) fn push_back(&mut self, start: u64, s: Summary) {
        self.enter(&s);
        self.buckets.push_back((start, s));
    }

    /// Drops the buckets starting before `first_kept`.
    pub(super) fn drop_before(&mut self, first_kept: u64) {
        while let Some((s, _)) = self.buckets.front() {
            if *s >= first_kept {
                break;
            }
            if let Some((_, b)) = self.buckets.pop_front() {
                self.leave(&b);
            }
        }
    }

    /// Adds a late event to the bucket at `start`, made with `empty` if the key had none.
    pub(super) fn add_late(
        &mut self,
        start: u64,
        item: u64,
        bytes: &[u8],
        empty: impl FnOnce() -> Summary,
    ) {
        let at = self.buckets.partition_point(|(s0, _)| *s0 < start);
        let bound = match self.buckets.get(at) {
            Some((s0, b)) if *s0 == start => Some(bound_of(b)),
            _ => None,
        };
        match bound {
            Some(old) => {
                match old {
                    Some(b) => self.bounded -= b,
                    None => self.unbounded -= 1,
                }
                if let Some((_, b)) = self.buckets.get_mut(at) {
                    b.add(item, bytes);
                    match bound_of(b) {
                        Some(n) => self.bounded += n,
                        None => self.unbounded += 1,
                    }
                }
            }
            None => {
                let mut b = empty();
                b.add(item, bytes);
                self.enter(&b);
                self.buckets.insert(at, (start, b));
            }
        }
    }

    /// The sum of the buckets' bounds ([`Summary::upper`]): ∞ if one has none.
    pub(super) fn upper(&self) -> f64 {
        if self.unbounded > 0 {
            f64::INFINITY
        } else {
            self.bounded as f64
        }
    }

    /// Oldest first.
    pub(super) fn iter(&self) -> impl ExactSizeIterator<Item = &(u64, Summary)> {
        self.buckets.iter()
    }

    /// The oldest bucket's start.
    pub(super) fn first_start(&self) -> Option<u64> {
        self.buckets.front().map(|(s, _)| *s)
    }

    pub(super) fn len(&self) -> usize {
        self.buckets.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

impl FromIterator<(u64, Summary)> for Ring {
    /// A ring of buckets given oldest first.
    fn from_iter<I: IntoIterator<Item = (u64, Summary)>>(buckets: I) -> Ring {
        let mut ring = Ring::default();
        for (start, s) in buckets {
            ring.push_back(start, s);
        }
        ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::engine::shape::MetricShape;
    use proptest::prelude::*;

    fn shape(kind: &str) -> MetricShape {
        let extra = match kind {
            "distinct" => "precision = 4",
            _ => "epsilon = 0.1\ndelta = 0.1\nphi = 0.5",
        };
        let text = format!(
            "[input]\nformat = \"csv\"\ntime_field = \"t\"\n\n[[metric]]\nname = \"m\"\n\
             kind = \"{kind}\"\nkey = [\"k\"]\nitem = [\"i\"]\nbucket = \"1m\"\n\
             window = \"1h\"\n{extra}\n"
        );
        let config = Config::from_toml(&text).expect("a valid config");
        MetricShape::of(&config.metrics[0])
    }

    /// The bound summed over the buckets, as the close summed it before the ring kept it.
    fn summed(ring: &Ring) -> f64 {
        ring.iter().map(|(_, s)| s.upper()).sum()
    }

    proptest! {
        /// Against the sum over the buckets: pushes, drops and late events — enough items for
        /// a distinct bucket to leave its exact range (an infinite bound) — keep the ring's sum
        /// equal to it, and its buckets in order.
        #[test]
        fn the_kept_sum_is_the_sum_over_buckets(
            frequency in any::<bool>(),
            ops in proptest::collection::vec((0u8..3, 0u64..40, 1u64..60), 0..200),
        ) {
            let shape = shape(if frequency { "frequency" } else { "distinct" });
            let mut ring = Ring::default();
            // Events a bucket holds, by start: a frequency bucket's bound is its events.
            let mut events: std::collections::BTreeMap<u64, u64> = Default::default();
            let mut next = 0u64;
            let mut item = 0u64;
            for (op, at, n) in ops {
                match op {
                    0 => {
                        let mut s = shape.empty(next);
                        for _ in 0..n {
                            item += 1;
                            s.add(item.wrapping_mul(0x9e37_79b9_7f4a_7c15), b"x");
                        }
                        ring.push_back(next, s);
                        events.insert(next, n);
                        next += 1;
                    }
                    1 => {
                        ring.drop_before(at.min(next));
                        events.retain(|s, _| *s >= at.min(next));
                    }
                    // A late event is for a bucket already closed (the engine's rule).
                    _ if next > 0 => {
                        let start = at % next;
                        for _ in 0..n {
                            item += 1;
                            let h = item.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                            ring.add_late(start, h, b"x", || shape.empty(start));
                        }
                        *events.entry(start).or_default() += n;
                    }
                    _ => {}
                }
                prop_assert_eq!(ring.upper(), summed(&ring));
                if frequency {
                    prop_assert_eq!(ring.upper(), events.values().sum::<u64>() as f64);
                }
                let starts: Vec<u64> = ring.iter().map(|(s, _)| *s).collect();
                prop_assert!(starts.windows(2).all(|w| w[0] < w[1]), "{:?}", starts);
                prop_assert_eq!(ring.first_start(), starts.first().copied());
                prop_assert_eq!(ring.len(), starts.len());
            }
        }
    }
}
