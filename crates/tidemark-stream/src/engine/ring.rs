//! A key's closed buckets inside its window (distinct and frequency metrics), oldest first,
//! with what a close needs of them kept as buckets come and go.
//!
//! At every close, every key with a window is evaluated against its alert rules, which
//! would read all `n = window / bucket` buckets of each key at each close: with 1-minute
//! buckets in a 1-day window, 1,440 buckets a key and a close. Two things keep that off:
//!
//! - **The bounds' sum.** Most keys are small: a window whose buckets' bounds
//!   ([`Summary::upper`]) sum to at most the smallest limit cannot fire, and is passed over
//!   without merging. The ring keeps the sum (an exact integer total of the finite bounds —
//!   counts of events or of exact distinct items — and the number of buckets without one),
//!   updated when a bucket enters, leaves or takes a late event: O(1) a close.
//! - **A sliding-window aggregation** (distinct metrics): the "two stacks" of a queue, by
//!   time. A key past the shortcut needs its window merged. Its window is cut at boundaries
//!   `⌈√t⌉` bucket widths apart (`t` the widths its buckets span); the newer part, from the
//!   newest bucket's boundary on, is one merge that takes each bucket pushed, and the older
//!   part is a suffix merge at each boundary (the union of the buckets from there up to the
//!   newer part). A window is then the few buckets before its first boundary one by one,
//!   that boundary's suffix and the newer merge: at most about `√t + 2` merges, nearly all of
//!   single buckets, instead of `n`. Once the window has slid past the last boundary (once
//!   per about `t` closes) the aggregation is built again, a merge per bucket. A HyperLogLog
//!   or ExaLogLog window is the register-wise maximum of its buckets however they are
//!   grouped (the sketches' forms follow their entries alone), so the answer is the same
//!   byte for byte (a property test holds it). A frequency window is merged bucket by bucket
//!   as before: its heavy candidates are pruned against the running total at each merge, so
//!   grouping could change them. The aggregation is built at a key's first merge and never
//!   stored (a key read back builds it again); it holds about `√t + 1` sketches, each at
//!   most a dense sketch, counted toward the memory budget.
//!
//! (Per key with a window, aggregated or not: 16 bytes for the sum, 8 for the heap's count,
//! 8 for the pointer, 24 for the last sum asked from a start.)

use std::collections::VecDeque;

use super::shape::MetricShape;
use super::Summary;

/// Windows of fewer buckets are merged bucket by bucket: an aggregation would save little.
const BLOCKS_FROM: usize = 16;

/// Bytes of one `(start, summary)` entry, before the summary's heap.
pub(super) const ENTRY_BYTES: usize = std::mem::size_of::<(u64, Summary)>();

/// Closed buckets of one key, by increasing start, with their bounds' sum: a queue that
/// takes buckets as they close and drops them as they leave the window (not a ring of
/// slots, as the core's `RingWindow` is).
#[derive(Clone, Debug, Default)]
pub(super) struct ClosedBuckets {
    buckets: VecDeque<(u64, Summary)>,
    /// The bounds' sum, kept from the first time it is asked for (a close of a metric with
    /// alert rules, a checkpoint, an early alert); a metric without rules never pays for it.
    bounds: Option<Bounds>,
    /// The entries' bytes and their summaries' heaps, kept as they change: a checkpoint
    /// counts every key's memory, and summing a long ring there read every bucket.
    heap: usize,
    /// The window's aggregation, once the key's window has been merged (distinct metrics).
    aggregation: Option<Box<Aggregation>>,
    /// The last [`ClosedBuckets::upper_from`] asked, `(from, sum)`, until a bucket enters,
    /// leaves or changes: a close asks it for the next window's early alerts while the
    /// buckets are in the cache (`KeyClose::close_key`, in the close), and the key's
    /// first event after it then reads the key's state alone.
    upper_memo: Option<(u64, f64)>,
}

/// A sliding-window aggregation of the ring's buckets (the "two stacks" of a queue): the
/// newer part of the window as one running merge, the older part as suffix merges at
/// boundaries. A window from `from` is then the few buckets before the first boundary at
/// `from` or later, that boundary's suffix, and the newer merge.
#[derive(Clone, Debug)]
struct Aggregation {
    /// By increasing boundary `a` (a multiple of `span`): the merge of the ring's buckets
    /// starting in `[a, newer_from)`.
    older: VecDeque<(u64, Summary)>,
    /// Where the newer part begins (a boundary).
    newer_from: u64,
    /// The merge of the ring's buckets starting at `newer_from` or later.
    newer: Summary,
}

impl Aggregation {
    /// Aggregation over `buckets` (oldest first) for windows from `from`. The buckets from
    /// `from` on span `t` bucket widths, from the first to the newest; boundaries are
    /// `⌈√t⌉` widths apart. The newer part begins at the newest bucket's boundary; the older
    /// part has a suffix at each boundary from the one holding the first bucket (or `from`,
    /// if later) up to it: about √t suffixes, however few buckets a sparse key has. A merge
    /// each bucket, a copy each boundary. `None` if a merge failed (it cannot: a metric's
    /// summaries all have its shape) or no bucket starts at `from` or later.
    fn build(
        shape: &MetricShape,
        buckets: &VecDeque<(u64, Summary)>,
        from: u64,
    ) -> Option<Box<Aggregation>> {
        let width = shape.width().max(1);
        let first = buckets.get(buckets.partition_point(|(s, _)| *s < from))?.0;
        let newest = buckets.back()?.0;
        let t = (newest - first) / width + 1;
        let span = ((t as f64).sqrt().ceil().max(1.0) as u64).saturating_mul(width);
        let newer_from = newest - newest % span;
        let mid = buckets.partition_point(|(s, _)| *s < newer_from);
        let newer = shape.merged(newer_from, buckets.range(mid..).map(|(_, s)| s));
        let mut older = VecDeque::new();
        let mut acc = shape.empty(newer_from);
        let mut i = mid;
        let mut a = newer_from;
        // Down to the boundary of the block holding the first bucket: one lower would hold
        // the same suffix again.
        while a >= from.saturating_add(span) && a > first {
            a -= span;
            while let Some((s, x)) = i.checked_sub(1).and_then(|j| buckets.get(j)) {
                if *s < a {
                    break;
                }
                acc.merge(x).ok()?;
                i -= 1;
            }
            older.push_front((a, acc.clone()));
        }
        Some(Box::new(Aggregation {
            older,
            newer_from,
            newer,
        }))
    }

    fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Aggregation>()
            + self.newer.heap_bytes()
            + self
                .older
                .iter()
                .map(|(_, s)| ENTRY_BYTES + s.heap_bytes())
                .sum::<usize>()
    }
}

/// The sum of a ring's bounds: of the finite ones, each below 2^32 (a ring holds fewer than
/// 2^32 buckets, each taking memory, so the sum is exact in 64 bits), and how many are
/// infinite (a distinct bucket past its exact range).
#[derive(Clone, Copy, Debug, Default)]
struct Bounds {
    bounded: u64,
    unbounded: u32,
}

impl Bounds {
    fn add(&mut self, s: &Summary) {
        match bound_of(s) {
            Some(b) => self.bounded += b,
            None => self.unbounded += 1,
        }
    }

    fn remove(&mut self, s: &Summary) {
        match bound_of(s) {
            Some(b) => self.bounded -= b,
            None => self.unbounded -= 1,
        }
    }

    fn value(self) -> f64 {
        if self.unbounded > 0 {
            f64::INFINITY
        } else {
            self.bounded as f64
        }
    }
}

/// A bucket's bound as an integer, or `None` if it has no finite one. Bounds are counts, so
/// integers; one of 2^32 or more counts as none (no shortcut for such a key, which only costs
/// it a merge), which keeps the sum in 64 bits and the key's state small.
fn bound_of(s: &Summary) -> Option<u64> {
    let u = s.upper();
    (u < 4_294_967_296.0).then_some(u as u64)
}

impl ClosedBuckets {
    fn enter(&mut self, s: &Summary) {
        self.upper_memo = None;
        self.heap += ENTRY_BYTES + s.heap_bytes();
        if let Some(b) = &mut self.bounds {
            b.add(s);
        }
    }

    fn leave(&mut self, s: &Summary) {
        self.upper_memo = None;
        self.heap -= ENTRY_BYTES + s.heap_bytes();
        if let Some(b) = &mut self.bounds {
            b.remove(s);
        }
    }

    /// Appends a bucket newer than every bucket held.
    pub(super) fn push_back(&mut self, start: u64, s: Summary) {
        self.enter(&s);
        // Newer than every bucket, so in the newer part.
        if let Some(agg) = &mut self.aggregation {
            if agg.newer.merge(&s).is_err() {
                self.aggregation = None;
            }
        }
        self.buckets.push_back((start, s));
    }

    /// Drops the buckets starting before `first_kept`, and the suffixes that held one.
    pub(super) fn drop_before(&mut self, first_kept: u64) {
        while let Some((s, _)) = self.buckets.front() {
            if *s >= first_kept {
                break;
            }
            if let Some((_, b)) = self.buckets.pop_front() {
                self.leave(&b);
            }
        }
        if let Some(agg) = &mut self.aggregation {
            while agg.older.front().is_some_and(|(a, _)| *a < first_kept) {
                agg.older.pop_front();
            }
            // The newer merge holds a bucket that left: built again when next asked for.
            if agg.newer_from < first_kept {
                self.aggregation = None;
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
        match self.buckets.get_mut(at) {
            Some((s0, b)) if *s0 == start => {
                // As the bucket leaving and coming back.
                self.upper_memo = None;
                self.heap -= b.heap_bytes();
                if let Some(bounds) = &mut self.bounds {
                    bounds.remove(b);
                }
                b.add(item, bytes);
                self.heap += b.heap_bytes();
                if let Some(bounds) = &mut self.bounds {
                    bounds.add(b);
                }
            }
            _ => {
                let mut b = empty();
                b.add(item, bytes);
                self.enter(&b);
                self.buckets.insert(at, (start, b));
            }
        }
        // The merges holding the bucket's start take the event as the bucket does.
        if let Some(agg) = &mut self.aggregation {
            if start >= agg.newer_from {
                agg.newer.add(item, bytes);
            } else {
                for (_, m) in agg.older.iter_mut().take_while(|(a, _)| *a <= start) {
                    m.add(item, bytes);
                }
            }
        }
    }

    /// The sum of the buckets' bounds ([`Summary::upper`]): ∞ if one has none.
    pub(super) fn upper(&mut self) -> f64 {
        self.upper_from(0)
    }

    /// The sum of the bounds of the buckets starting at `from` or later: the kept sum (summed
    /// once, the first time it is asked for, and kept from then on) less the few oldest
    /// buckets before `from`.
    pub(super) fn upper_from(&mut self, from: u64) -> f64 {
        if let Some((f, sum)) = self.upper_memo {
            if f == from {
                return sum;
            }
        }
        let sum = self.upper_from_buckets(from);
        self.upper_memo = Some((from, sum));
        sum
    }

    fn upper_from_buckets(&mut self, from: u64) -> f64 {
        let mut bounds = *self.bounds.get_or_insert_with(|| {
            let mut b = Bounds::default();
            self.buckets.iter().for_each(|(_, s)| b.add(s));
            b
        });
        for (_, s) in self.buckets.iter().take_while(|(s, _)| *s < from) {
            bounds.remove(s);
        }
        bounds.value()
    }

    /// The buckets starting at `from` or later, merged into an empty summary starting at
    /// `start` — through the aggregation where the shape allows it, building it first.
    pub(super) fn merged(&mut self, shape: &MetricShape, start: u64, from: u64) -> Summary {
        self.merged_as(shape, start, from, true)
    }

    /// [`ClosedBuckets::merged`], through an aggregation only if the key already has one: for a
    /// merge that is not a close's (a checkpoint's), which should not make a key hold one.
    pub(super) fn merged_if_aggregated(
        &mut self,
        shape: &MetricShape,
        start: u64,
        from: u64,
    ) -> Summary {
        self.merged_as(shape, start, from, false)
    }

    fn merged_as(&mut self, shape: &MetricShape, start: u64, from: u64, build: bool) -> Summary {
        let first = self.buckets.partition_point(|(s, _)| *s < from);
        let n = self.buckets.len() - first;
        let aggregated = build || self.aggregation.is_some();
        if !shape.regroups() || n < BLOCKS_FROM || !aggregated {
            return shape.merged(start, self.buckets.range(first..).map(|(_, s)| s));
        }
        // Built again once no suffix starts in the window (once per pass of the window).
        if self
            .aggregation
            .as_ref()
            .is_none_or(|b| b.older.back().is_none_or(|(a, _)| *a < from))
        {
            self.aggregation = Aggregation::build(shape, &self.buckets, from);
        }
        let all = self.buckets.range(first..).map(|(_, s)| s);
        let Some(agg) = &self.aggregation else {
            return shape.merged(start, all);
        };
        let i = agg.older.partition_point(|(a, _)| *a < from);
        let (boundary, suffix) = match agg.older.get(i) {
            Some((a, suffix)) => (*a, Some(suffix)),
            None if agg.newer_from >= from => (agg.newer_from, None),
            None => return shape.merged(start, all),
        };
        let until = self.buckets.partition_point(|(s, _)| *s < boundary);
        let singles = self.buckets.range(first..until.max(first)).map(|(_, s)| s);
        shape.merged(
            start,
            singles.chain(suffix).chain(std::iter::once(&agg.newer)),
        )
    }

    /// Heap bytes held: the entries, their summaries and the aggregation.
    pub(super) fn heap_bytes(&self) -> usize {
        self.heap + self.aggregation.as_ref().map_or(0, |b| b.heap_bytes())
    }

    /// Oldest first.
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl ExactSizeIterator<Item = &(u64, Summary)> {
        self.buckets.iter()
    }

    /// The oldest bucket's start.
    pub(super) fn first_start(&self) -> Option<u64> {
        self.buckets.front().map(|(s, _)| *s)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}

impl FromIterator<(u64, Summary)> for ClosedBuckets {
    /// A ring of buckets given oldest first.
    fn from_iter<I: IntoIterator<Item = (u64, Summary)>>(buckets: I) -> ClosedBuckets {
        let mut ring = ClosedBuckets::default();
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

    /// A metric's shape: distinct at p = 4 (sparse at once) or p = 10 (exact first), an
    /// ExaLogLog, frequency, or quantile (with a bin limit that collapses).
    fn shape(kind: u8) -> MetricShape {
        let (kind, extra) = match kind {
            0 => ("distinct", "item = [\"i\"]\nprecision = 4"),
            1 => ("distinct", "item = [\"i\"]\nprecision = 10"),
            2 => ("distinct", "item = [\"i\"]\nsketch = \"exaloglog\""),
            3 => (
                "frequency",
                "item = [\"i\"]\nepsilon = 0.1\ndelta = 0.1\nphi = 0.5",
            ),
            _ => ("quantile", "value = \"v\"\nalpha = 0.05\nbin_limit = 64"),
        };
        let text = format!(
            "[input]\nformat = \"csv\"\ntime_field = \"t\"\n\n[[metric]]\nname = \"m\"\n\
             kind = \"{kind}\"\nkey = [\"k\"]\nbucket = \"1m\"\n\
             window = \"1h\"\n{extra}\n"
        );
        let config = Config::from_toml(&text).expect("the test's own config is valid");
        MetricShape::of(&config.metrics[0])
    }

    /// The bounds summed over the buckets from `from`, as a close summed them before.
    fn summed(ring: &ClosedBuckets, from: u64) -> f64 {
        ring.iter()
            .filter(|(s, _)| *s >= from)
            .map(|(_, s)| s.upper())
            .sum()
    }

    /// The sum asked last is kept until the ring changes: whatever enters, leaves or takes a
    /// late event, the next answer is the buckets' own sum again.
    #[test]
    fn a_kept_upper_sum_follows_every_change_of_the_ring() {
        let shape = shape(1);
        let w = shape.width();
        let bucket = |start: u64, items: u64| {
            let mut s = shape.empty(start);
            (0..items).for_each(|i| s.add(i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ start, b"x"));
            s
        };
        let mut ring = ClosedBuckets::default();
        for k in 0..4u64 {
            ring.push_back(k * w, bucket(k * w, k + 1));
        }
        let check = |ring: &mut ClosedBuckets, from: u64| {
            let want = summed(ring, from);
            assert_eq!(ring.upper_from(from), want, "from {from}");
            // Asked again, kept: the same.
            assert_eq!(ring.upper_from(from), want, "from {from}, kept");
        };
        check(&mut ring, w);
        ring.upper_from(2 * w);
        ring.push_back(4 * w, bucket(4 * w, 7));
        check(&mut ring, 2 * w);
        ring.add_late(3 * w, 12_345, b"late", || shape.empty(3 * w));
        check(&mut ring, 2 * w);
        ring.add_late(9 * w / 2, 54_321, b"late", || shape.empty(9 * w / 2));
        check(&mut ring, 2 * w);
        ring.drop_before(2 * w);
        check(&mut ring, 2 * w);
        check(&mut ring, 3 * w);
    }

    /// A sparse key (a bucket every third width) in a long window: the suffixes follow the
    /// time its buckets span, not the window's, and not the count of its buckets alone.
    #[test]
    fn a_sparse_key_holds_about_root_t_suffixes() {
        let shape = shape(1);
        let w = shape.width();
        let mut ring = ClosedBuckets::default();
        for k in 0..40u64 {
            let mut s = shape.empty((2 + 3 * k) * w);
            s.add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15), b"x");
            ring.push_back((2 + 3 * k) * w, s);
        }
        let kept = 30 * w;
        ring.drop_before(kept);
        let by_bucket = shape.merged(kept, ring.iter().map(|(_, x)| x));
        let merged = ring.merged(&shape, kept, kept);
        assert_eq!(merged.to_stored(), by_bucket.to_stored());
        // 30 buckets over t = 88 widths: boundaries 10 widths apart, at most 9 suffixes.
        let held = ring.aggregation.as_ref().map(|a| a.older.len());
        assert!(held.is_some_and(|h| (1..=9).contains(&h)), "{held:?}");
    }

    proptest! {
        /// As the engine drives a key's ring — buckets pushed at closes (some buckets of the
        /// key empty), the window slid at each close, late events into buckets of the window
        /// (also ones the key had none in), windows merged from the window's start or a
        /// little after — the kept bound sum equals the sum over the buckets, and a window
        /// merged through the aggregation is the buckets merged one by one, byte for byte.
        #[test]
        fn the_ring_answers_as_its_buckets_do(
            kind in 0u8..5,
            window in 16u64..90,
            ops in proptest::collection::vec((0u8..4, 0u64..100, 1u64..40), 0..400),
        ) {
            let shape = shape(kind);
            let w = shape.width();
            let mut ring = ClosedBuckets::default();
            // Events a bucket holds, by start: a frequency bucket's bound is its events.
            let mut events: std::collections::BTreeMap<u64, u64> = Default::default();
            let (mut next, mut kept, mut item) = (0u64, 0u64, 0u64);
            let mut asked = false;
            // An item's hash, or for a quantile metric a value's bits: an integer below
            // 10^5 (so that the sums the sketches keep are exact however they are grouped).
            let mut hash = || {
                item += 1;
                let h = item.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                if kind == 4 {
                    (((h >> 11) % 100_000) as f64).to_bits()
                } else {
                    h
                }
            };
            for (op, at, n) in ops {
                match op {
                    // A close: the key's bucket (after `at % 3` empty ones), then the slide.
                    0 => {
                        next += at % 3;
                        let mut s = shape.empty(next * w);
                        for _ in 0..n {
                            s.add(hash(), b"x");
                        }
                        ring.push_back(next * w, s);
                        events.insert(next * w, n);
                        next += 1;
                        kept = kept.max(next.saturating_sub(window) * w);
                        ring.drop_before(kept);
                        events.retain(|s, _| *s >= kept);
                    }
                    // Late events for a closed bucket inside the window.
                    1 if next * w > kept => {
                        let start = kept + (at * w) % (next * w - kept) / w * w;
                        for _ in 0..n {
                            ring.add_late(start, hash(), b"x", || shape.empty(start));
                        }
                        *events.entry(start).or_default() += n;
                    }
                    // A window from its start or a little after (not always a bucket's);
                    // the sum asked for (and kept from then on) at some point, as a metric
                    // with rules asks for it.
                    2 | 3 => {
                        if at % 5 == 0 {
                            asked = true;
                        }
                        let from = kept + (at % 3) * w + (at % 2) * (w / 2);
                        let by_bucket = shape.merged(
                            kept,
                            ring.iter().filter(|(s, _)| *s >= from).map(|(_, x)| x),
                        );
                        // A checkpoint's merge uses an aggregation but makes none.
                        let had = ring.aggregation.is_some();
                        let checkpoint = ring.merged_if_aggregated(&shape, kept, from);
                        prop_assert_eq!(ring.aggregation.is_some(), had);
                        prop_assert_eq!(checkpoint.to_stored(), by_bucket.to_stored());
                        let merged = ring.merged(&shape, kept, from);
                        prop_assert_eq!(merged.to_stored(), by_bucket.to_stored());
                        prop_assert_eq!(merged.estimate(), by_bucket.estimate());
                        if asked {
                            prop_assert_eq!(ring.upper_from(from), summed(&ring, from));
                        }
                        let n = ring.iter().filter(|(s, _)| *s >= from).count();
                        if kind != 3 && n >= BLOCKS_FROM {
                            let agg = ring.aggregation.as_ref();
                            prop_assert!(agg.is_some(), "a window of {} buckets", n);
                            // About √n suffixes (the window's n when built, at most `window`).
                            let most = (window as f64).sqrt().ceil() as usize + 2;
                            let held = agg.map_or(0, |b| b.older.len());
                            prop_assert!(held <= most, "{} suffixes", held);
                        }
                    }
                    _ => {}
                }
                if asked {
                    prop_assert_eq!(ring.upper(), summed(&ring, 0));
                }
                let heap: usize = ring.iter().map(|(_, s)| ENTRY_BYTES + s.heap_bytes()).sum();
                let agg = ring.aggregation.as_ref().map_or(0, |a| a.heap_bytes());
                prop_assert_eq!(ring.heap_bytes(), heap + agg);
                if kind == 3 && asked {
                    prop_assert_eq!(ring.upper(), events.values().sum::<u64>() as f64);
                }
                let starts: Vec<u64> = ring.iter().map(|(s, _)| *s).collect();
                prop_assert!(starts.windows(2).all(|w| w[0] < w[1]), "{:?}", starts);
                prop_assert_eq!(ring.first_start(), starts.first().copied());
            }
        }
    }
}
