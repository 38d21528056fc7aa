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
//! - **Merged blocks in two stacks** (distinct metrics). A key past the shortcut needs its
//!   window merged. Its buckets are grouped into aligned blocks of `b ≈ √n` buckets' span,
//!   kept as the two stacks of a sliding-window aggregation (a queue as two stacks): the
//!   older blocks each hold the merge of themselves and every older block after them (a
//!   suffix), the newer blocks each hold their own merge, and their merge of all is kept as
//!   buckets arrive. A window is then the buckets of its partial oldest block one by one,
//!   one suffix and the newer blocks' merge: at most `b + 2` merges, nearly all of single
//!   buckets, instead of `n`. When the older stack is spent (once per `n` closes), the newer
//!   blocks but the newest become the older stack, a merge each. A HyperLogLog or ExaLogLog
//!   window is the register-wise maximum of its buckets however they are grouped, so the
//!   answer is the same byte for byte (a property test holds it). A frequency window is
//!   merged bucket by bucket as before: its heavy candidates are pruned against the running
//!   total at each merge, so grouping could change them. Blocks are built at a key's first
//!   merge and never stored (a key read back builds them again); they hold about `2√n`
//!   sketches more, each up to a dense sketch's size, and count toward the memory budget.
//!
//! (Per key with a window, blocks or not: 12 bytes for the sum, 8 for the blocks' pointer.)

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

/// The merges of aligned runs of the ring's buckets ("blocks"), kept as two stacks (the
/// sliding-window aggregation of a queue by two stacks): the older blocks each with the merge
/// of itself and every older-listed block after it up to the newer ones (a suffix), the newer
/// blocks each with its own merge and, once asked, the merge of them all. A window is then the
/// buckets of a partial oldest block one by one, one suffix, and the newer blocks' merge:
/// a handful of merges. When the older stack empties, the newer blocks but the newest become
/// the older stack (a merge each, once per pass of the window).
#[derive(Clone, Debug)]
struct Blocks {
    /// A block's span, ms: a whole number of buckets.
    span: u64,
    /// Older blocks by increasing start `a` (a multiple of `span`), each with the merge of
    /// the ring's buckets from `a` up to the first newer block.
    older: VecDeque<(u64, Summary)>,
    /// Newer blocks by increasing start, each with the merge of its buckets. The newest one
    /// takes each bucket pushed.
    newer: VecDeque<(u64, Summary)>,
    /// The merge of all of `newer`, when asked for and still valid.
    newer_all: Option<Summary>,
}

// Every block listed is whole: none of its buckets has left the ring, and every one of its
// buckets in the ring is in its merge. A block holding a ring bucket is listed unless it is
// older than every listed block (a partial block at the window's start).

impl Blocks {
    fn block_of(&self, start: u64) -> u64 {
        start - start % self.span
    }

    /// Takes in a bucket newer than every bucket held; `previous` is the start of the ring's
    /// newest bucket before it. `false` if the blocks can no longer hold their rule (a block
    /// begun before the blocks knew it, or a merge failed, which it cannot: a metric's
    /// summaries all have its shape): they are to be dropped.
    fn push(&mut self, previous: Option<u64>, start: u64, s: &Summary) -> bool {
        let a = self.block_of(start);
        if let Some((b, m)) = self.newer.back_mut() {
            if *b == a {
                if let Some(all) = &mut self.newer_all {
                    if all.merge(s).is_err() {
                        return false;
                    }
                }
                return m.merge(s).is_ok();
            }
        }
        if previous.is_some_and(|p| self.block_of(p) >= a) {
            return false;
        }
        if let Some(all) = &mut self.newer_all {
            if all.merge(s).is_err() {
                return false;
            }
        }
        self.newer.push_back((a, s.clone()));
        true
    }

    /// Forgets the blocks starting before `first_kept` (one of their buckets left).
    fn drop_before(&mut self, first_kept: u64) {
        while self.older.front().is_some_and(|(a, _)| *a < first_kept) {
            self.older.pop_front();
        }
        while self.newer.front().is_some_and(|(a, _)| *a < first_kept) {
            self.newer.pop_front();
            self.newer_all = None;
        }
    }

    /// Adds a late event of the bucket at `start` to the merges that hold that bucket.
    /// `false` if its block is not listed though newer blocks are (a block born late): the
    /// blocks are to be dropped.
    fn add_late(&mut self, start: u64, item: u64, bytes: &[u8]) -> bool {
        let a = self.block_of(start);
        let listed = |q: &VecDeque<(u64, Summary)>| {
            let i = q.partition_point(|(b, _)| *b < a);
            (i, q.get(i).is_some_and(|(b, _)| *b == a))
        };
        if self.newer.front().is_some_and(|(b, _)| *b <= a) {
            let (i, found) = listed(&self.newer);
            if !found {
                return false;
            }
            if let Some((_, m)) = self.newer.get_mut(i) {
                m.add(item, bytes);
            }
            if let Some(all) = &mut self.newer_all {
                all.add(item, bytes);
            }
            return true;
        }
        if self.older.front().is_some_and(|(b, _)| *b <= a) {
            let (i, found) = listed(&self.older);
            if !found {
                return false;
            }
            // Every suffix from the oldest to this block's holds the bucket.
            for (_, m) in self.older.range_mut(..=i) {
                m.add(item, bytes);
            }
            return true;
        }
        // Older than every listed block: a partial block, merged bucket by bucket.
        true
    }

    /// Moves every newer block but the newest to the older stack, as suffix merges.
    fn flip(&mut self) -> bool {
        let Some(newest) = self.newer.pop_back() else {
            return true;
        };
        // Called once no older block is wanted: they are all before the window asked for.
        self.older.clear();
        while let Some((a, mut m)) = self.newer.pop_back() {
            if let Some((_, after)) = self.older.front() {
                if m.merge(after).is_err() {
                    return false;
                }
            }
            self.older.push_front((a, m));
        }
        self.newer_all = Some(newest.1.clone());
        self.newer.push_back(newest);
        true
    }

    /// The merges covering the ring's buckets from the first listed block starting at `from`
    /// or later, and that block's start (`None`: no listed block there). Flips first if the
    /// older stack is spent. `None` overall if a merge failed.
    fn parts(&mut self, from: u64) -> Option<(Option<u64>, Vec<&Summary>)> {
        let spent = self.older.back().is_none_or(|(a, _)| *a < from);
        if spent && self.newer.len() > 1 && !self.flip() {
            return None;
        }
        if self.newer_all.is_none() && !self.newer.is_empty() {
            let mut all = self.newer.front()?.1.clone();
            for (_, m) in self.newer.iter().skip(1) {
                all.merge(m).ok()?;
            }
            self.newer_all = Some(all);
        }
        let mut parts = Vec::new();
        let i = self.older.partition_point(|(a, _)| *a < from);
        if let Some((a, suffix)) = self.older.get(i) {
            parts.push(suffix);
            parts.extend(self.newer_all.as_ref());
            return Some((Some(*a), parts));
        }
        let k = self.newer.partition_point(|(a, _)| *a < from);
        let first = self.newer.get(k).map(|(a, _)| *a);
        if k == 0 {
            parts.extend(self.newer_all.as_ref());
        } else {
            parts.extend(self.newer.range(k..).map(|(_, m)| m));
        }
        Some((first, parts))
    }

    /// Blocks of about √n buckets' span (n / b blocks, at most b buckets of a partial one)
    /// over `buckets`, oldest first, all starting at `from` or later; only blocks wholly at
    /// `from` or later are listed (all their buckets are here). `None` if a merge failed.
    fn build<'a>(
        shape: &MetricShape,
        n: usize,
        buckets: impl Iterator<Item = &'a (u64, Summary)>,
        from: u64,
    ) -> Option<Box<Blocks>> {
        let b = (n as f64).sqrt().ceil().max(1.0) as u64;
        let mut blocks = Box::new(Blocks {
            span: b.saturating_mul(shape.width().max(1)),
            older: VecDeque::new(),
            newer: VecDeque::new(),
            newer_all: None,
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
                .older
                .iter()
                .chain(&self.newer)
                .map(|(_, s)| ENTRY_BYTES + s.heap_bytes())
                .sum::<usize>()
            + self.newer_all.as_ref().map_or(0, |s| s.heap_bytes())
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
            blocks.drop_before(first_kept);
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
            if !blocks.add_late(start, item, bytes) {
                self.blocks = None;
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
        let listed = match &mut self.blocks {
            Some(blocks) => blocks.parts(from),
            None => None,
        };
        let Some((first_listed, block_parts)) = listed else {
            self.blocks = None;
            return shape.merged(start, self.buckets.range(first..).map(|(_, s)| s));
        };
        // The buckets before the first listed block one by one (a partial block), then the
        // blocks' merges, which hold every bucket from there on.
        let end = first_listed.unwrap_or(u64::MAX);
        let until = self.buckets.partition_point(|(s, _)| *s < end).max(first);
        let singles = self.buckets.range(first..until).map(|(_, s)| s);
        shape.merged(start, singles.chain(block_parts))
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
