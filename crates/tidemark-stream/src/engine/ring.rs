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
//! - **Merged blocks** (distinct metrics). A key past the shortcut needs its window merged.
//!   Its buckets are grouped into aligned blocks of `b ≈ √n` buckets' span, and each block
//!   keeps the merge of its buckets, extended as buckets arrive. A window then merges about
//!   `n / b` blocks plus the buckets of at most two partial blocks (the oldest, partly
//!   expired, and none other: a block is kept only while none of its buckets has left):
//!   `O(√n)` merges instead of `n`, for `O(√n)` more sketches held. A HyperLogLog or
//!   ExaLogLog window is the register-wise maximum of its buckets, whatever the grouping, so
//!   the answer is the same. A frequency window is merged bucket by bucket as before: its
//!   heavy candidates are pruned against the running total at each merge, so grouping could
//!   change them. Blocks are built on a key's first merge and never stored (a key read back
//!   builds them again).
//!
//! (Per key with a window: 12 bytes for the sum, 8 for the blocks' pointer.)

use std::collections::VecDeque;

use super::shape::MetricShape;
use super::Summary;

/// Windows of fewer buckets are merged bucket by bucket: blocks would save little.
const BLOCKS_FROM: usize = 16;

/// Bytes of one `(start, summary)` entry, before the summary's heap.
pub(super) const ENTRY_BYTES: usize = std::mem::size_of::<(u64, Summary)>();

/// Closed buckets of one key, by increasing start, with their bounds' sum.
#[derive(Clone, Debug, Default)]
pub(super) struct Ring {
    buckets: VecDeque<(u64, Summary)>,
    /// The sum of the finite bounds: each is below 2^32 and a ring holds fewer than 2^32
    /// buckets (each takes memory), so the sum is exact in 64 bits.
    bounded: u64,
    /// Buckets whose bound is infinite (a distinct bucket past its exact range).
    unbounded: u32,
    /// Merged blocks, once the key's window has been merged (distinct metrics).
    blocks: Option<Box<Blocks>>,
}

/// The merges of aligned runs of the ring's buckets.
#[derive(Clone, Debug)]
struct Blocks {
    /// A block's span, ms: a whole number of buckets.
    span: u64,
    /// By increasing block start `a` (a multiple of `span`): the merge of the ring's buckets
    /// in `[a, a + span)`. Only blocks none of whose buckets has left the ring are here.
    merged: VecDeque<(u64, Summary)>,
}

impl Blocks {
    fn block_of(&self, start: u64) -> u64 {
        start - start % self.span
    }

    /// Takes in a bucket newer than every bucket held; `previous` is the start of the ring's
    /// newest bucket before it. A block is begun only at its first bucket, so that a merge
    /// held is always its block's whole. `false` if a merge failed (it cannot: a metric's
    /// summaries all have its shape), and the blocks are to be dropped.
    fn push(&mut self, previous: Option<u64>, start: u64, s: &Summary) -> bool {
        let a = self.block_of(start);
        match self.merged.back_mut() {
            Some((b, m)) if *b == a => m.merge(s).is_ok(),
            _ => {
                if previous.is_none_or(|p| self.block_of(p) < a) {
                    self.merged.push_back((a, s.clone()));
                }
                true
            }
        }
    }

    /// Blocks of about √n buckets' span (n / b blocks, at most b buckets of a partial one)
    /// over `buckets`, oldest first, all starting at `from` or later; only blocks wholly at
    /// `from` or later get a merge (all their buckets are here). `None` if a merge failed.
    fn build<'a>(
        shape: &MetricShape,
        n: usize,
        buckets: impl Iterator<Item = &'a (u64, Summary)>,
        from: u64,
    ) -> Option<Box<Blocks>> {
        let b = (n as f64).sqrt().ceil().max(1.0) as u64;
        let mut blocks = Box::new(Blocks {
            span: b.saturating_mul(shape.width().max(1)),
            merged: VecDeque::new(),
        });
        let mut previous = None;
        for (s, x) in buckets {
            if blocks.block_of(*s) >= from && !blocks.push(previous, *s, x) {
                return None;
            }
            previous = Some(*s);
        }
        Some(blocks)
    }

    fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Blocks>()
            + self
                .merged
                .iter()
                .map(|(_, s)| ENTRY_BYTES + s.heap_bytes())
                .sum::<usize>()
    }
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
        if let Some(blocks) = &mut self.blocks {
            let previous = self.buckets.back().map(|(p, _)| *p);
            if !blocks.push(previous, start, &s) {
                self.blocks = None;
            }
        }
        self.buckets.push_back((start, s));
    }

    /// Drops the buckets starting before `first_kept`, and the blocks that held one.
    pub(super) fn drop_before(&mut self, first_kept: u64) {
        while let Some((s, _)) = self.buckets.front() {
            if *s >= first_kept {
                break;
            }
            if let Some((_, b)) = self.buckets.pop_front() {
                self.leave(&b);
            }
        }
        if let Some(blocks) = &mut self.blocks {
            while blocks.merged.front().is_some_and(|(a, _)| *a < first_kept) {
                blocks.merged.pop_front();
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
        // A block's merge is its buckets' union: the event joins it as it joins the bucket.
        if let Some(blocks) = &mut self.blocks {
            let a = blocks.block_of(start);
            let i = blocks.merged.partition_point(|(b, _)| *b < a);
            if let Some((b, m)) = blocks.merged.get_mut(i) {
                if *b == a {
                    m.add(item, bytes);
                }
            }
        }
    }

    /// The sum of the buckets' bounds ([`Summary::upper`]): ∞ if one has none.
    pub(super) fn upper(&self) -> f64 {
        self.upper_from(0)
    }

    /// The sum of the bounds of the buckets starting at `from` or later: the kept sum less
    /// the few oldest buckets before `from`.
    pub(super) fn upper_from(&self, from: u64) -> f64 {
        let (mut bounded, mut unbounded) = (self.bounded, self.unbounded);
        for (_, b) in self.buckets.iter().take_while(|(s, _)| *s < from) {
            match bound_of(b) {
                Some(x) => bounded -= x,
                None => unbounded -= 1,
            }
        }
        if unbounded > 0 {
            f64::INFINITY
        } else {
            bounded as f64
        }
    }

    /// The buckets starting at `from` or later, merged into an empty summary starting at
    /// `start` — through the merged blocks where the shape allows it, building them first.
    pub(super) fn merged(&mut self, shape: &MetricShape, start: u64, from: u64) -> Summary {
        let first = self.buckets.partition_point(|(s, _)| *s < from);
        let n = self.buckets.len() - first;
        if !shape.merges_by_union() || n < BLOCKS_FROM {
            return shape.merged(start, self.buckets.range(first..).map(|(_, s)| s));
        }
        if self.blocks.is_none() {
            self.blocks = Blocks::build(shape, n, self.buckets.range(first..), from);
        }
        let Some(blocks) = &self.blocks else {
            return shape.merged(start, self.buckets.range(first..).map(|(_, s)| s));
        };
        let mut parts = Vec::new();
        let mut merged = blocks.merged.iter().peekable();
        let mut i = first;
        while let Some((s, x)) = self.buckets.get(i) {
            let a = blocks.block_of(*s);
            while merged.next_if(|(b, _)| *b < a).is_some() {}
            match merged.next_if(|(b, _)| *b == a && a >= from) {
                Some((_, m)) => {
                    parts.push(m);
                    // Past the block's buckets, by search: a walk would read every bucket.
                    let end = a.saturating_add(blocks.span);
                    i = self.buckets.partition_point(|(s, _)| *s < end);
                }
                None => {
                    parts.push(x);
                    i += 1;
                }
            }
        }
        shape.merged(start, parts)
    }

    /// Heap bytes held: the entries, their summaries and the blocks.
    pub(super) fn heap_bytes(&self) -> usize {
        self.buckets
            .iter()
            .map(|(_, s)| ENTRY_BYTES + s.heap_bytes())
            .sum::<usize>()
            + self.blocks.as_ref().map_or(0, |b| b.heap_bytes())
    }

    /// Oldest first.
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
        /// equal to it, and its buckets in order; a window merged through the blocks is the
        /// buckets merged one by one.
        #[test]
        fn the_kept_sum_is_the_sum_over_buckets(
            frequency in any::<bool>(),
            ops in proptest::collection::vec((0u8..4, 0u64..40, 1u64..60), 0..300),
        ) {
            let shape = shape(if frequency { "frequency" } else { "distinct" });
            let mut ring = Ring::default();
            // Events a bucket holds, by start: a frequency bucket's bound is its events.
            let mut events: std::collections::BTreeMap<u64, u64> = Default::default();
            let w = shape.width();
            let mut next = 0u64;
            let mut kept = 0u64;
            let mut item = 0u64;
            for (op, at, n) in ops {
                match op {
                    0 => {
                        let mut s = shape.empty(next * w);
                        for _ in 0..n {
                            item += 1;
                            s.add(item.wrapping_mul(0x9e37_79b9_7f4a_7c15), b"x");
                        }
                        ring.push_back(next * w, s);
                        events.insert(next * w, n);
                        next += 1;
                    }
                    1 => {
                        kept = kept.max(at.min(next) * w);
                        ring.drop_before(kept);
                        events.retain(|s, _| *s >= kept);
                    }
                    // A window from `kept` or later, through the blocks, against the buckets
                    // merged one by one: the same summary, byte for byte.
                    3 => {
                        // (Not always a bucket's start: any time is a window's start.)
                        let from = kept + (at % 4) * w + at % 2;
                        let by_bucket = shape.merged(
                            from,
                            ring.iter().filter(|(s, _)| *s >= from).map(|(_, x)| x),
                        );
                        let merged = ring.merged(&shape, from, from);
                        prop_assert_eq!(merged.to_stored(), by_bucket.to_stored());
                        prop_assert_eq!(merged.estimate(), by_bucket.estimate());
                    }
                    // A late event is for a bucket already closed (the engine's rule).
                    _ if next > 0 => {
                        let start = (at % next) * w;
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
                prop_assert_eq!(ring.iter().len(), starts.len());
            }
        }
    }
}
