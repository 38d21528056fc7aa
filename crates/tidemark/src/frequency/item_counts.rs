//! [`ItemCounts`]: how often each item occurs in one stream, exact while few items are seen,
//! then a Count-Min sketch with its heavy-hitter candidates.
//!
//! # Why two representations
//!
//! A keyed pipeline keeps one of these per key and per bucket of time, and most keys see a
//! handful of items. A `d × w` sketch (10.9 KB at ε = δ = 0.01) per key would be mostly empty
//! counters, so the summary starts as an exact table of `(item, count)` and promotes to the
//! sketch when it holds more than `w·d/8` distinct items (at ~64 bytes an entry, the point
//! where the table would outgrow the sketch). Exact answers are exact; sketch answers carry
//! Count-Min's bracket.
//!
//! # Heavy hitters and why the candidates survive merging
//!
//! In sketch mode the summary keeps, with the item bytes, every item whose estimate reached
//! `φ·N` (`N` the total count) when it was last updated, and drops candidates that fall below
//! it when the set doubles (as [`super::HeavyHitters`] does). Since Count-Min never
//! under-counts, an item with `a_i ≥ φN` at the end had estimate `≥ a_i ≥ φN(t)` at its last
//! update `t` and at every later sweep: it is always a candidate (recall 1, deterministic).
//! At promotion, the exact table hands over the items with `a_i ≥ φN` the same way.
//!
//! A window is a merge of bucket summaries: counters add, candidate sets unite. An item with
//! `a_i ≥ φ·ΣN_b` over the window has `a_{i,b} ≥ φ·N_b` in at least one bucket `b` (else
//! summing `a_{i,b} < φN_b` gives `a_i < φΣN_b`), so it is a candidate of that bucket and of
//! the union: recall 1 holds for any window. Items reported below `(φ − ε)N` need their
//! estimate to err by more than `εN`: probability at most δ each.
//!
//! # The heaviest item
//!
//! [`ItemCounts::heaviest`] answers "how often did this stream's most frequent item occur":
//! the largest candidate estimate `v` with bracket `[max(0, v − εN), max(v, φN)]`. The upper
//! end always holds: a candidate's truth is at most its estimate, and a non-candidate's is
//! below `φN`. The lower end holds with probability `1 − δ`. Exact mode answers exactly.
//!
//! ```
//! use tidemark::frequency::ItemCounts;
//!
//! let mut a = ItemCounts::new(0.01, 0.01, 0.05).unwrap();
//! for i in 0..5_000u32 {
//!     let port = if i % 5 == 0 { "22".to_string() } else { format!("{}", 1024 + i) };
//!     a.insert(port.as_bytes());
//! }
//! assert!(!a.is_exact()); // 4,000 distinct ports: promoted to the sketch
//! let heavy = a.heavy_hitters();
//! assert_eq!(heavy[0].0, b"22");
//! assert!(heavy[0].1.low <= 1_000.0 && 1_000.0 <= heavy[0].1.high);
//!
//! // Another bucket of the same shape merges into a window.
//! let mut b = ItemCounts::new(0.01, 0.01, 0.05).unwrap();
//! for _ in 0..10 {
//!     b.insert(b"22");
//! }
//! a.merge(&b).unwrap();
//! assert_eq!(a.total(), 5_010);
//! assert!(a.point(b"22").contains(1_010.0));
//! ```

use std::collections::HashMap;

use super::count_min::{check_dimensions, delta_of, dimensions, epsilon_of};
use super::{CountMin, Model, RowFamily};
use crate::codec::{self, Family, Reader, Writer};
use crate::error::{DecodeError, MergeError, ParamError};
use crate::estimate::{Estimate, Method};
use crate::hash::ItemHasher;

/// Flags bit 0: the summary is a sketch (else the exact table).
const FLAG_SKETCH: u8 = 1;

/// Bytes a slot of the exact table and of the candidates' table take: the hash, the item's
/// pointer and length (and the count), and the table's control byte.
const EXACT_SLOT: usize = 8 + 16 + 8 + 1;
const CANDIDATE_SLOT: usize = 8 + 16 + 1;

/// The slots a hash table of this capacity holds: a power of two of which the capacity is
/// 7/8 (or one less, below eight), as Rust's `HashMap` allocates them.
fn table_slots(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        c if c < 8 => (c + 1).next_power_of_two(),
        c => (c.saturating_mul(8) / 7).next_power_of_two(),
    }
}

/// The longest item kept, bytes ([`ItemCounts::MAX_ITEM_LEN`]).
const MAX_ITEM_LEN: usize = 1 << 16;

/// Exact item counts promoted to a Count-Min sketch with heavy-hitter candidates. See the
/// [module docs](self).
#[derive(Clone, Debug)]
pub struct ItemCounts {
    epsilon: f64,
    delta: f64,
    phi: f64,
    width: usize,
    depth: usize,
    total: u64,
    repr: Repr,
    /// The bytes of the items' names, kept as items come and go, so that
    /// [`ItemCounts::bytes`] is O(1) (a key's bound is checked per event).
    held: usize,
}

#[derive(Clone, Debug)]
enum Repr {
    /// Item hash → (item, count).
    Exact(HashMap<u64, (Box<[u8]>, u64)>),
    Sketch {
        cm: CountMin,
        /// Item hash → item.
        candidates: HashMap<u64, Box<[u8]>>,
        /// Sweep when the candidates reach this many.
        sweep_at: usize,
    },
}

fn sweep_floor(phi: f64) -> usize {
    (4.0 / phi).ceil().min(1e6) as usize
}

/// The most the total may reach: far beyond any real stream, and twice it still fits the
/// sketch's signed counters.
const MAX_TOTAL: u64 = 1 << 62;

/// An item as the summary knows it: its first [`ItemCounts::MAX_ITEM_LEN`] bytes, and their
/// hash. Items that agree on those bytes are one item, so what is stored can be hashed again
/// on decode.
#[inline]
fn identify(h: u64, item: &[u8]) -> (u64, &[u8]) {
    if item.len() <= MAX_ITEM_LEN {
        (h, item)
    } else {
        let clipped = &item[..MAX_ITEM_LEN];
        (ItemHasher::default().hash(clipped), clipped)
    }
}

impl ItemCounts {
    /// The longest item kept, bytes: longer items are counted as, and named by, their first
    /// `MAX_ITEM_LEN` bytes.
    pub const MAX_ITEM_LEN: usize = MAX_ITEM_LEN;

    /// An empty summary: exact until it holds more than `w·d/8` items, then a cash-register
    /// Count-Min of `(ε, δ)` (`w = ⌈e/ε⌉`, `d = ⌈ln 1/δ⌉`) keeping the items that reach `φ`
    /// of the total. `φ` must exceed ε (below it, the reported items are noise).
    pub fn new(epsilon: f64, delta: f64, phi: f64) -> Result<ItemCounts, ParamError> {
        let (width, depth) = dimensions(epsilon, delta)?;
        check_dimensions(width, depth)?;
        if !(phi > epsilon && phi <= 1.0) {
            return Err(ParamError::new("phi", "in (ε, 1]", phi));
        }
        Ok(ItemCounts {
            epsilon,
            delta,
            phi,
            width,
            depth,
            total: 0,
            repr: Repr::Exact(HashMap::new()),
            held: 0,
        })
    }

    /// The most distinct items held exactly.
    pub fn exact_limit(&self) -> usize {
        (self.width * self.depth / 8).max(8)
    }

    /// The ε asked for.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The δ asked for.
    pub fn delta(&self) -> f64 {
        self.delta
    }

    /// The heavy-hitter fraction φ.
    pub fn phi(&self) -> f64 {
        self.phi
    }

    /// The total count `N` (exact in both representations).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Whether the counts are still exact.
    pub fn is_exact(&self) -> bool {
        matches!(self.repr, Repr::Exact(_))
    }

    /// Adds one occurrence of `item`.
    pub fn insert(&mut self, item: &[u8]) {
        self.insert_hashed(ItemHasher::default().hash(item), item, 1);
    }

    /// Adds `count` occurrences of `item`, whose hash `h` is `ItemHasher::default().hash(item)`
    /// (callers that already hashed it save the second hash). An item longer than
    /// [`Self::MAX_ITEM_LEN`] bytes counts as its first [`Self::MAX_ITEM_LEN`]. Counts saturate
    /// at 2^62 in total, far beyond any real stream.
    #[inline]
    pub fn insert_hashed(&mut self, h: u64, item: &[u8], count: u64) {
        let (h, item) = identify(h, item);
        let count = count.min(MAX_TOTAL - self.total);
        if count == 0 {
            return;
        }
        self.total += count;
        match &mut self.repr {
            Repr::Exact(items) => {
                if let Some((_, c)) = items.get_mut(&h) {
                    *c += count;
                    return;
                }
                items.insert(h, (item.into(), count));
                self.held += item.len();
                if items.len() > self.exact_limit() {
                    self.promote();
                }
            }
            Repr::Sketch {
                cm,
                candidates,
                sweep_at,
            } => {
                cm.update_hash(h, count as i64)
                    .expect("a cash-register update below 2^62 in total");
                let threshold = self.phi * self.total as f64;
                if !candidates.contains_key(&h) && cm.point_hash(h).value >= threshold {
                    candidates.insert(h, item.into());
                    self.held += item.len();
                    if candidates.len() >= *sweep_at {
                        candidates.retain(|&h, _| cm.point_hash(h).value >= threshold);
                        *sweep_at = (2 * candidates.len()).max(sweep_floor(self.phi));
                        self.held = self.count_bytes();
                    }
                }
            }
        }
    }

    fn empty_sketch(&self) -> CountMin {
        // Pairwise rows: stored summaries of earlier versions used them, and a window merges
        // those with new ones.
        CountMin::with_rows(
            self.width,
            self.depth,
            Model::CashRegister,
            RowFamily::Pairwise,
        )
        .expect("dimensions checked at construction")
    }

    /// Moves the exact table into a sketch; the items reaching `φN` become the candidates.
    fn promote(&mut self) {
        let Repr::Exact(items) = &mut self.repr else {
            return;
        };
        let items = std::mem::take(items);
        let mut cm = self.empty_sketch();
        let threshold = self.phi * self.total as f64;
        let mut candidates = HashMap::new();
        for (h, (item, c)) in items {
            cm.update_hash(h, c as i64)
                .expect("a cash-register update below 2^62 in total");
            if c as f64 >= threshold {
                candidates.insert(h, item);
            }
        }
        self.repr = Repr::Sketch {
            cm,
            candidates,
            sweep_at: sweep_floor(self.phi),
        };
        self.held = self.count_bytes();
    }

    /// The count of `item` (of its first [`Self::MAX_ITEM_LEN`] bytes).
    pub fn point(&self, item: &[u8]) -> Estimate {
        let item = &item[..item.len().min(MAX_ITEM_LEN)];
        self.point_hashed(ItemHasher::default().hash(item))
    }

    /// The count of the item whose hash is `h`: exact, or Count-Min's
    /// `[max(0, v − εN), v]` with confidence `1 − δ`.
    pub fn point_hashed(&self, h: u64) -> Estimate {
        match &self.repr {
            Repr::Exact(items) => Estimate::exact(items.get(&h).map_or(0, |(_, c)| *c) as f64),
            Repr::Sketch { cm, .. } => cm.point_hash(h),
        }
    }

    /// The items whose count reaches `φN`, largest first (ties by item), with their counts.
    /// Every item with `a_i ≥ φN` is here; in sketch mode an item below `(φ − ε)N` is here
    /// with probability at most δ.
    pub fn heavy_hitters(&self) -> Vec<(Vec<u8>, Estimate)> {
        let threshold = self.phi * self.total as f64;
        let mut out: Vec<(Vec<u8>, Estimate)> = match &self.repr {
            Repr::Exact(items) => items
                .values()
                .filter(|(_, c)| *c > 0 && *c as f64 >= threshold)
                .map(|(i, c)| (i.to_vec(), Estimate::exact(*c as f64)))
                .collect(),
            Repr::Sketch { cm, candidates, .. } => candidates
                .iter()
                .map(|(&h, i)| (i.to_vec(), cm.point_hash(h)))
                .filter(|(_, e)| e.value >= threshold && e.value > 0.0)
                .collect(),
        };
        out.sort_by(|a, b| b.1.value.total_cmp(&a.1.value).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// Every item the summary can name, largest first (ties by item), with its count: every
    /// item of the exact table, or every candidate of the sketch (including those now below
    /// `φN`). An item not named has a count below [`ItemCounts::unnamed_bound`].
    pub fn named(&self) -> Vec<(Vec<u8>, Estimate)> {
        let mut out: Vec<(Vec<u8>, Estimate)> = match &self.repr {
            Repr::Exact(items) => items
                .values()
                .map(|(i, c)| (i.to_vec(), Estimate::exact(*c as f64)))
                .collect(),
            Repr::Sketch { cm, candidates, .. } => candidates
                .iter()
                .map(|(&h, i)| (i.to_vec(), cm.point_hash(h)))
                .collect(),
        };
        out.sort_by(|a, b| b.1.value.total_cmp(&a.1.value).then_with(|| a.0.cmp(&b.0)));
        out
    }

    /// A bound every item that [`ItemCounts::named`] does not list stays below: `φN` for a
    /// sketch (such an item's estimate, never below its count, was under `φN` when last
    /// checked), `None` for the exact table (it names every item).
    pub fn unnamed_bound(&self) -> Option<f64> {
        match self.repr {
            Repr::Exact(_) => None,
            Repr::Sketch { .. } => Some(self.phi * self.total as f64),
        }
    }

    /// The most frequent item and its count (see the [module docs](self) for the bracket):
    /// exact while the counts are; `None` for an empty stream or, in sketch mode, when no
    /// item reaches `φN` (then [`ItemCounts::heaviest_count`] still bounds the count).
    pub fn heaviest(&self) -> Option<(Vec<u8>, Estimate)> {
        if let Repr::Exact(items) = &self.repr {
            return items
                .values()
                .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
                .map(|(i, c)| (i.to_vec(), Estimate::exact(*c as f64)));
        }
        let (item, e) = self.heavy_hitters().into_iter().next()?;
        Some((item, self.widen_to_unseen(e)))
    }

    /// The count of the most frequent item, whichever it is: exact, or
    /// `[max(1, v − εN), max(v, φN)]` around `max(1, v)`, with `v` the largest candidate
    /// estimate (0 if none; candidates below `φN` count too). A stream of `N ≥ 1` events has
    /// an item seen at least once, so a sketch never answers 0 for it.
    pub fn heaviest_count(&self) -> Estimate {
        if let Some((_, e)) = self.heaviest() {
            return e;
        }
        if self.is_exact() {
            return Estimate::exact(0.0);
        }
        let v = self.named().first().map_or(0.0, |(_, e)| e.value);
        let mut e = self.widen_to_unseen(Estimate::exact(v));
        let floor = if self.total > 0 { 1.0 } else { 0.0 };
        e.value = e.value.max(floor);
        e.low = e.low.max(floor);
        e.high = e.high.max(floor);
        e
    }

    /// A candidate's estimate as an answer for the heaviest item: its upper end covers the
    /// items that are not candidates (each below `φN`).
    fn widen_to_unseen(&self, e: Estimate) -> Estimate {
        if self.is_exact() {
            return e;
        }
        let n = self.total as f64;
        let v = e.value;
        Estimate::probabilistic(
            v,
            (v - self.effective_epsilon() * n).max(0.0).min(v),
            v.max(self.phi * n),
            1.0 - delta_of(self.depth),
            Method::CountMinMin,
        )
    }

    /// The ε the sketch's width guarantees.
    pub fn effective_epsilon(&self) -> f64 {
        epsilon_of(self.width)
    }

    /// Adds `other`'s stream: exact tables add (promoting past the limit), sketches add their
    /// counters, candidate sets unite. Both must have the same ε, δ and φ, and the totals
    /// must stay within 2^62 (else an error, and nothing changes). The result depends only
    /// on the two summaries, not on any iteration order: candidates are chosen against the
    /// merged total once every count is in.
    pub fn merge(&mut self, other: &ItemCounts) -> Result<(), MergeError> {
        MergeError::check(
            ItemHasher::default(),
            ItemHasher::default(),
            &[
                ("width", self.width as u64, other.width as u64),
                ("depth", self.depth as u64, other.depth as u64),
                ("phi", self.phi.to_bits(), other.phi.to_bits()),
            ],
        )?;
        let total = self.total + other.total;
        if total > MAX_TOTAL {
            return Err(MergeError::Incompatible {
                field: "total (the sum may be at most 2^62)",
                ours: self.total,
                theirs: other.total,
            });
        }
        if let (Repr::Exact(ours), Repr::Exact(theirs)) = (&mut self.repr, &other.repr) {
            for (&h, (item, c)) in theirs {
                ours.entry(h).or_insert_with(|| (item.clone(), 0)).1 += c;
            }
            self.total = total;
            if ours.len() > self.exact_limit() {
                self.promote();
            }
            self.held = self.count_bytes();
            return Ok(());
        }
        self.promote();
        let phi = self.phi;
        let Repr::Sketch {
            cm,
            candidates,
            sweep_at,
        } = &mut self.repr
        else {
            unreachable!("promoted above");
        };
        // Items that may be heavy now: ours, theirs (their candidates, or every item of their
        // exact table), checked against the merged total below.
        match &other.repr {
            Repr::Exact(items) => {
                for (&h, (item, c)) in items {
                    cm.update_hash(h, *c as i64)
                        .expect("a cash-register update within 2^62 in total");
                    candidates.entry(h).or_insert_with(|| item.clone());
                }
            }
            Repr::Sketch {
                cm: theirs,
                candidates: their_candidates,
                ..
            } => {
                cm.merge(theirs)
                    .expect("same shape, and the total stays within 2^62");
                for (&h, item) in their_candidates {
                    candidates.entry(h).or_insert_with(|| item.clone());
                }
            }
        }
        self.total = total;
        let threshold = phi * total as f64;
        candidates.retain(|&h, _| cm.point_hash(h).value >= threshold);
        *sweep_at = (2 * candidates.len()).max(sweep_floor(phi));
        self.held = self.count_bytes();
        Ok(())
    }

    /// Bytes held on the heap: the items' names, and the exact table's slots (33 bytes each,
    /// as many as its capacity takes) or the sketch's counters and the candidates' slots (25
    /// bytes each). O(1): the names' bytes are kept as items come and go.
    pub fn bytes(&self) -> usize {
        self.held
            + match &self.repr {
                Repr::Exact(items) => table_slots(items.capacity()) * EXACT_SLOT,
                Repr::Sketch { candidates, .. } => {
                    self.width * self.depth * 8
                        + table_slots(candidates.capacity()) * CANDIDATE_SLOT
                }
            }
    }

    /// The bytes of the items' names, counted.
    fn count_bytes(&self) -> usize {
        match &self.repr {
            Repr::Exact(items) => items.values().map(|(i, _)| i.len()).sum(),
            Repr::Sketch { candidates, .. } => candidates.values().map(|i| i.len()).sum(),
        }
    }

    /// Encodes into the envelope (family 33): the whole state, items sorted, so equal states
    /// have equal bytes and a decoded summary behaves exactly as the encoded one.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut params = Writer::new();
        params.f64(self.epsilon).f64(self.delta).f64(self.phi);
        let mut p = Writer::new();
        p.u64(self.total);
        let flags = match &self.repr {
            Repr::Exact(items) => {
                let mut v: Vec<&(Box<[u8]>, u64)> = items.values().collect();
                v.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                p.u64(v.len() as u64);
                for (item, c) in v {
                    p.u64(*c).u32(item.len() as u32).raw(item);
                }
                0
            }
            Repr::Sketch {
                cm,
                candidates,
                sweep_at,
            } => {
                let sketch = cm.to_bytes();
                p.u64(sketch.len() as u64).raw(&sketch);
                // The whole live state, candidates below φN included: a bucket decoded from
                // a snapshot must go on exactly as the live one would.
                p.u64(*sweep_at as u64);
                let mut v: Vec<&Box<[u8]>> = candidates.values().collect();
                v.sort_unstable();
                p.u64(v.len() as u64);
                for item in v {
                    p.u32(item.len() as u32).raw(item);
                }
                FLAG_SKETCH
            }
        };
        codec::encode(
            Family::ItemCounts,
            flags,
            ItemHasher::default(),
            params.bytes(),
            p.bytes(),
        )
    }

    /// Decodes a summary, checking every field before trusting it: parameters, the hash
    /// (tidemark's native hash only), each count positive and the counts summing to the total,
    /// items distinct and at most [`Self::MAX_ITEM_LEN`] bytes, the table within its limit; in
    /// sketch mode the nested sketch's shape, model, total and mass, the sweep point, the
    /// candidates distinct.
    pub fn from_bytes(bytes: &[u8]) -> Result<ItemCounts, DecodeError> {
        let env = codec::decode_family(bytes, Family::ItemCounts)?;
        Reader::ensure(
            env.hasher == ItemHasher::default(),
            "hash",
            7,
            "tidemark's native hash (xxh3, default seed)",
            env.hasher.seed(),
        )?;
        env.flags_within(FLAG_SKETCH, "0 or 1")?;
        let mut r = env.params();
        let off = r.offset();
        let (epsilon, delta, phi) = (r.f64("epsilon")?, r.f64("delta")?, r.f64("phi")?);
        r.finish()?;
        let mut s = ItemCounts::new(epsilon, delta, phi).map_err(|_| {
            Reader::invalid(
                "parameters",
                off,
                "ε and δ in (0, 1) within the table limits, φ in (ε, 1]",
                epsilon.to_bits(),
            )
        })?;
        let hasher = ItemHasher::default();
        let mut r = env.payload();
        let off = r.offset();
        let total = r.u64_in("total", ..=MAX_TOTAL, "at most 2^62")?;
        let item = |r: &mut Reader<'_>| -> Result<Box<[u8]>, DecodeError> {
            let len = r.u32_in(
                "item length",
                ..=MAX_ITEM_LEN as u32,
                "at most 65,536 bytes",
            )?;
            Ok(r.bytes(len as u64, "item")?.into())
        };
        if env.flags & FLAG_SKETCH == 0 {
            let n = r.count("items", 12, s.exact_limit() as u64)?;
            let mut items = HashMap::with_capacity(n);
            let mut sum = 0u64;
            let mut previous: Option<Box<[u8]>> = None;
            for _ in 0..n {
                let c = r.u64_in("count", 1..=MAX_TOTAL, "in 1..=2^62")?;
                sum = sum.saturating_add(c);
                let off = r.offset();
                let i = item(&mut r)?;
                Reader::ensure(
                    previous.as_ref().is_none_or(|p| *p < i),
                    "item",
                    off,
                    "items in increasing byte order, each once",
                    i.len() as u64,
                )?;
                previous = Some(i.clone());
                items.insert(hasher.hash(&i), (i, c));
            }
            Reader::ensure(
                items.len() == n,
                "items",
                off,
                "items of distinct hashes",
                n as u64,
            )?;
            Reader::ensure(
                sum == total,
                "total",
                off,
                "the sum of the items' counts",
                total,
            )?;
            s.repr = Repr::Exact(items);
        } else {
            let len_off = r.offset();
            let n = r.count("sketch length", 1, u64::MAX)?;
            let nested = r.bytes(n as u64, "sketch")?;
            let cm = CountMin::from_bytes(nested).map_err(|e| e.nested_at(len_off + 8))?;
            Reader::ensure(
                cm.width() == s.width
                    && cm.depth() == s.depth
                    && cm.model() == Model::CashRegister
                    && !cm.is_conservative()
                    && cm.hasher() == hasher
                    && cm.row_family() == RowFamily::Pairwise,
                "sketch",
                len_off,
                "a plain cash-register Count-Min of the summary's ε and δ, native hash, \
                 pairwise rows",
                cm.width() as u64,
            )?;
            // A cash register's mass is its total: a larger one would overflow later updates.
            Reader::ensure(
                cm.total() as u64 == total && cm.mass == total,
                "total",
                off,
                "the nested sketch's total and mass",
                total,
            )?;
            let sweep_at = r.u64_in(
                "sweep at",
                sweep_floor(phi) as u64..=1 << 21,
                "at least ⌈4/φ⌉ and at most 2^21",
            )?;
            let cand_off = r.offset();
            let n = r.count("candidates", 4, 1 << 20)?;
            let mut candidates = HashMap::with_capacity(n);
            let mut previous: Option<Box<[u8]>> = None;
            for _ in 0..n {
                let off = r.offset();
                let i = item(&mut r)?;
                let h = hasher.hash(&i);
                Reader::ensure(
                    previous.as_ref().is_none_or(|p| *p < i),
                    "candidate",
                    off,
                    "candidates in increasing byte order, each once",
                    i.len() as u64,
                )?;
                previous = Some(i.clone());
                candidates.insert(h, i);
            }
            Reader::ensure(
                candidates.len() == n,
                "candidates",
                cand_off,
                "candidates of distinct hashes",
                n as u64,
            )?;
            s.repr = Repr::Sketch {
                cm,
                candidates,
                sweep_at: sweep_at as usize,
            };
        }
        r.finish()?;
        s.total = total;
        s.held = s.count_bytes();
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    /// The names' bytes kept as items come and go equal the bytes counted, through inserts of
    /// names of every length, promotion, sweeps, merges of both forms and decoding.
    #[test]
    fn bytes_kept_equal_bytes_counted() {
        let mut rng = Pcg64::seed_from_u64(17);
        for round in 0..40 {
            let mut a = ItemCounts::new(0.05, 0.1, 0.1).unwrap();
            let mut b = ItemCounts::new(0.05, 0.1, 0.1).unwrap();
            let n = rng.random_range(0..400);
            for _ in 0..n {
                let len = rng.random_range(0..200);
                let item = vec![b'a' + rng.random_range(0..20u8); len];
                let side = if rng.random_bool(0.7) { &mut a } else { &mut b };
                side.insert_hashed(
                    ItemHasher::default().hash(&item),
                    &item,
                    rng.random_range(1..5),
                );
                assert_eq!(side.held, side.count_bytes(), "round {round}");
            }
            a.merge(&b).unwrap();
            assert_eq!(a.held, a.count_bytes(), "round {round}: merged");
            let back = ItemCounts::from_bytes(&a.to_bytes()).unwrap();
            assert_eq!(back.held, a.held, "round {round}: decoded");
            // The tables' slots are counted too: never less than a slot an item.
            let slots = match &a.repr {
                Repr::Exact(items) => items.len() * EXACT_SLOT,
                Repr::Sketch { candidates, .. } => {
                    a.width * a.depth * 8 + candidates.len() * CANDIDATE_SLOT
                }
            };
            assert!(a.bytes() >= a.held + slots, "round {round}");
        }
    }

    /// A skewed stream: item `i` with probability ∝ 1/(i+1), over `universe` items.
    fn zipf_stream(seed: u64, n: usize, universe: u64) -> Vec<u64> {
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut cumulative = Vec::with_capacity(universe as usize);
        let mut sum = 0.0;
        for i in 0..universe {
            sum += 1.0 / (i + 1) as f64;
            cumulative.push(sum);
        }
        (0..n)
            .map(|_| {
                let x = rng.random::<f64>() * sum;
                (cumulative.partition_point(|&c| c < x) as u64).min(universe - 1)
            })
            .collect()
    }

    fn truth(items: &[u64]) -> BTreeMap<u64, u64> {
        let mut t = BTreeMap::new();
        for &i in items {
            *t.entry(i).or_insert(0) += 1;
        }
        t
    }

    fn name(i: u64) -> Vec<u8> {
        format!("item-{i}").into_bytes()
    }

    #[test]
    fn small_streams_stay_exact_and_answer_exactly() {
        let mut s = ItemCounts::new(0.01, 0.01, 0.1).unwrap();
        assert_eq!(s.exact_limit(), 170);
        let stream: Vec<u64> = (0..1_000).map(|i| i % 170).collect();
        for &i in &stream {
            s.insert(&name(i));
        }
        assert!(s.is_exact());
        for (i, c) in truth(&stream) {
            assert_eq!(s.point(&name(i)), Estimate::exact(c as f64));
        }
        assert_eq!(s.point(b"absent"), Estimate::exact(0.0));
        // No item reaches 10% of 1,000 (each has 5 or 6): none heavy, the heaviest count is
        // still exact.
        assert!(s.heavy_hitters().is_empty());
        assert_eq!(s.heaviest_count(), Estimate::exact(6.0));
        s.insert(&name(999));
        assert!(!s.is_exact(), "171 distinct items pass the limit of 170");
        assert_eq!(s.total(), 1_001);
    }

    /// A sketch with no item reaching `φN` still bounds its heaviest count from both sides:
    /// at least one event (it saw some), at most `φN`, around no less than 1 — a key of
    /// many events is not ranked below one of three as though it had none.
    #[test]
    fn a_sketch_without_heavy_items_answers_its_heaviest_count_from_one() {
        let mut s = ItemCounts::new(0.01, 0.01, 0.1).unwrap();
        // 400 items five times each: past the exact limit, none near 10% of 2,000.
        for _ in 0..5 {
            for i in 0..400 {
                s.insert(&name(i));
            }
        }
        assert!(!s.is_exact());
        assert!(s.heaviest().is_none());
        let e = s.heaviest_count();
        assert!(e.value >= 1.0 && e.low >= 1.0, "{e:?}");
        assert!(e.contains(5.0) && e.high >= 0.1 * 2_000.0, "{e:?}");
        let empty = ItemCounts::new(0.01, 0.01, 0.1).unwrap();
        assert_eq!(empty.heaviest_count(), Estimate::exact(0.0));
    }

    #[test]
    fn heavy_hitters_have_recall_one_and_brackets_hold() {
        // 40 seeds; each checks every item's bracket. At δ = e^−5 a bracket misses with
        // probability at most 0.7%: allow the expected misses plus three standard deviations.
        let mut checks = 0usize;
        let mut misses = 0usize;
        for seed in 0..40 {
            let stream = zipf_stream(seed, 20_000, 2_000);
            let t = truth(&stream);
            let mut s = ItemCounts::new(0.01, 0.01, 0.02).unwrap();
            for &i in &stream {
                s.insert(&name(i));
            }
            assert!(!s.is_exact());
            let n = stream.len() as f64;
            let heavy: BTreeMap<Vec<u8>, Estimate> = s.heavy_hitters().into_iter().collect();
            for (&i, &c) in &t {
                let e = s.point(&name(i));
                assert!(e.high >= c as f64, "Count-Min never under-counts");
                checks += 1;
                misses += usize::from(!e.contains(c as f64));
                if c as f64 >= 0.02 * n {
                    assert!(
                        heavy.contains_key(&name(i)),
                        "seed {seed}: heavy {i} missed"
                    );
                }
            }
            let (_, top) = s.heaviest().unwrap();
            let max = *t.values().max().unwrap() as f64;
            assert!(top.high >= max);
        }
        let delta = (-5.0f64).exp();
        let allowed = (checks as f64 * delta + 3.0 * (checks as f64 * delta).sqrt()).ceil();
        assert!(
            (misses as f64) <= allowed,
            "{misses} of {checks} brackets missed (allowed {allowed})"
        );
    }

    #[test]
    fn windows_of_merged_buckets_keep_every_heavy_item() {
        // Each bucket is mostly noise; item 7 is heavy only over the window (≥ 5%), never
        // above 5% in most buckets but far above in one — the averaging argument in the docs.
        let mut rng = Pcg64::seed_from_u64(9);
        let mut window = ItemCounts::new(0.005, 0.01, 0.05).unwrap();
        let mut all = Vec::new();
        for b in 0..6u64 {
            let mut bucket = ItemCounts::new(0.005, 0.01, 0.05).unwrap();
            for _ in 0..3_000 {
                let i = rng.random_range(100..5_000u64);
                bucket.insert(&name(i));
                all.push(i);
            }
            let hot = if b == 3 { 1_200 } else { 20 };
            for _ in 0..hot {
                bucket.insert(&name(7));
            }
            all.extend(std::iter::repeat_n(7, hot));
            // Through the bytes, as the store does.
            let bucket = ItemCounts::from_bytes(&bucket.to_bytes()).unwrap();
            window.merge(&bucket).unwrap();
        }
        let t = truth(&all);
        assert_eq!(window.total(), all.len() as u64);
        let heavy = window.heavy_hitters();
        assert_eq!(heavy[0].0, name(7));
        assert!(heavy[0].1.contains(t[&7] as f64));
    }

    #[test]
    fn exact_buckets_merge_into_exact_windows_and_promote_past_the_limit() {
        let mut a = ItemCounts::new(0.1, 0.1, 0.2).unwrap();
        let limit = a.exact_limit() as u64;
        for i in 0..limit {
            a.insert(&name(i));
        }
        let mut b = ItemCounts::new(0.1, 0.1, 0.2).unwrap();
        for _ in 0..3 {
            b.insert(&name(0));
        }
        let mut w = a.clone();
        w.merge(&b).unwrap();
        assert!(w.is_exact());
        assert_eq!(w.point(&name(0)), Estimate::exact(4.0));
        let mut c = ItemCounts::new(0.1, 0.1, 0.2).unwrap();
        c.insert(b"new");
        w.merge(&c).unwrap();
        assert!(!w.is_exact());
        assert!(w.point(&name(0)).high >= 4.0);
        assert_eq!(w.total(), limit + 4);
        // Another shape refuses, naming the field.
        let other = ItemCounts::new(0.1, 0.1, 0.3).unwrap();
        assert!(matches!(
            w.merge(&other),
            Err(MergeError::Incompatible { field: "phi", .. })
        ));
    }

    #[test]
    fn encodings_round_trip_and_refuse_what_they_cannot_be() {
        let mut s = ItemCounts::new(0.05, 0.05, 0.1).unwrap();
        let exact = s.to_bytes();
        assert!(ItemCounts::from_bytes(&exact).unwrap().is_exact());
        for i in 0..2_000u64 {
            s.insert(&name(i % 300));
            s.insert(b"hot");
        }
        let bytes = s.to_bytes();
        let back = ItemCounts::from_bytes(&bytes).unwrap();
        assert_eq!(back.to_bytes(), bytes);
        assert_eq!(back.heavy_hitters(), s.heavy_hitters());
        // Every truncation fails with an error, never a panic.
        for cut in 0..bytes.len() {
            assert!(ItemCounts::from_bytes(&bytes[..cut]).is_err());
        }
        // A count that breaks the sum is named.
        let mut t = ItemCounts::new(0.05, 0.05, 0.1).unwrap();
        t.insert(b"x");
        let mut b = t.to_bytes();
        let body = b.len() - codec::CHECKSUM_LEN;
        // Payload: total u64, n u64, count u64 …: bump the count.
        let count_at = codec::HEADER_LEN + 24 + 16;
        b[count_at] = 2;
        let sum = codec::checksum_of(&b[..body]);
        b[body..].copy_from_slice(&sum.to_le_bytes());
        let e = ItemCounts::from_bytes(&b).unwrap_err();
        assert!(e.to_string().contains("total"), "{e}");
    }

    #[test]
    fn a_decoded_summary_goes_on_exactly_as_the_live_one() {
        // Encode and decode at many points of a stream (as a snapshot and resume does): the
        // state, hence every later answer and byte, must not change.
        let mut rng = Pcg64::seed_from_u64(3);
        let mut live = ItemCounts::new(0.05, 0.05, 0.1).unwrap();
        let mut resumed = live.clone();
        for step in 0..20_000u32 {
            let i = if rng.random_bool(0.3) {
                rng.random_range(0..5u64)
            } else {
                rng.random_range(0..3_000u64)
            };
            live.insert(&name(i));
            resumed.insert(&name(i));
            if step % 97 == 0 {
                resumed = ItemCounts::from_bytes(&resumed.to_bytes()).unwrap();
            }
        }
        assert!(!live.is_exact());
        assert_eq!(resumed.to_bytes(), live.to_bytes());
        assert_eq!(resumed.heavy_hitters(), live.heavy_hitters());
    }

    #[test]
    fn merges_do_not_depend_on_iteration_order() {
        // Hash maps iterate in a different order in each instance: the merged bytes must not.
        let build = |seed: u64, n: u64| {
            let mut s = ItemCounts::new(0.05, 0.05, 0.1).unwrap();
            let mut rng = Pcg64::seed_from_u64(seed);
            for _ in 0..n {
                s.insert(&name(rng.random_range(0..40u64)));
            }
            s
        };
        let mut first = None;
        for _ in 0..30 {
            let mut a = build(1, 2_000); // a sketch
            a.merge(&build(2, 30)).unwrap(); // an exact table into it
            let mut b = build(3, 12); // exact, promoted by the merge
            b.merge(&build(4, 25)).unwrap();
            a.merge(&b).unwrap();
            let bytes = a.to_bytes();
            assert_eq!(bytes, *first.get_or_insert_with(|| bytes.clone()));
        }
    }

    #[test]
    fn long_items_count_as_their_first_bytes_and_survive_encoding() {
        let long = vec![b'x'; MAX_ITEM_LEN + 10];
        let mut s = ItemCounts::new(0.1, 0.1, 0.2).unwrap();
        for _ in 0..5 {
            s.insert(&long);
        }
        let back = ItemCounts::from_bytes(&s.to_bytes()).unwrap();
        assert_eq!(back.point(&long), Estimate::exact(5.0));
        assert_eq!(back.point(&long[..MAX_ITEM_LEN]), Estimate::exact(5.0));
        let mut m = back.clone();
        m.merge(&s).unwrap();
        assert_eq!(m.point(&long), Estimate::exact(10.0));
        assert!(ItemCounts::from_bytes(&m.to_bytes()).is_ok());
        // And as a sketch candidate.
        for i in 0..100u64 {
            m.insert(&name(i));
        }
        for _ in 0..40 {
            m.insert(&long);
        }
        assert!(!m.is_exact());
        let back = ItemCounts::from_bytes(&m.to_bytes()).unwrap();
        assert_eq!(back.heavy_hitters()[0].0, long[..MAX_ITEM_LEN].to_vec());
    }

    #[test]
    fn limits_are_refused_not_reached() {
        // ε = 10^−7 passes the width limit on its own, but not with 28 rows.
        assert!(ItemCounts::new(1e-7, 1e-12, 0.5).is_err());
        let mut a = ItemCounts::new(0.1, 0.1, 0.5).unwrap();
        a.insert_hashed(ItemHasher::default().hash(b"a"), b"a", 1 << 61);
        let mut b = a.clone();
        b.insert(b"b");
        b.insert_hashed(ItemHasher::default().hash(b"b"), b"b", 1 << 61);
        let before = a.to_bytes();
        assert!(matches!(a.merge(&b), Err(MergeError::Incompatible { .. })));
        assert_eq!(a.to_bytes(), before, "a refused merge changes nothing");
    }
}
