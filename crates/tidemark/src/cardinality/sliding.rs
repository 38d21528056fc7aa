//! The sliding HyperLogLog (Chabchoub and Hebrail): distinct counts over any window up to a
//! retention, from one structure.
//!
//! References: Y. Chabchoub, G. Hébrail, *Sliding HyperLogLog: Estimating Cardinality in a
//! Data Stream over a Sliding Window*, IEEE ICDM Workshops 2010.
//!
//! A register's maximum cannot forget, but the *list of pairs that could still be a window's
//! maximum* can. Each register keeps `(tick, rank)` pairs, oldest first, with ticks strictly
//! increasing and ranks strictly decreasing: a pair is kept only while no newer-or-equal pair
//! has a rank at least as high, because any window holding the older pair also holds the
//! newer one. A window `(now − w, now]` then reads, per register, the rank of its oldest pair
//! inside the window — the highest rank inside — and the registers go to the plain estimator
//! ([`super::registers::estimate_registers`]).
//!
//! Adding `(t, r)` when `t` is the newest tick drops trailing pairs of rank ≤ `r` and appends.
//! An out-of-order pair (older than the newest) is placed correctly: it is dropped if a newer
//! (or same-tick) pair of rank at least `r` exists, and otherwise removes the older pairs of
//! rank ≤ `r` before it and is inserted in tick order. So the lists equal, at every moment,
//! those of the same events sorted by tick — and at a bucket boundary the registers for a
//! window equal the register-wise maximum of per-bucket sketches over it (identical at every
//! check of the reference run in ACCURACY.md; a property test asserts it against
//! [`super::RingWindow`]).
//!
//! Windows end at the newest tick seen (`now ≥ newest`): a newer pair may have displaced an
//! older one a window ending in the past would have needed. `expire(oldest)` drops pairs no
//! query can reach; the retention (the longest window) is the only sizing decision, and a
//! list holds at most `65 − p` pairs (ranks strictly decrease), about `ln` of the distinct
//! items per register in practice.
//!
//! # Memory
//!
//! A pair is packed in a `u32`: the rank in 6 bits and the tick, as an offset from a moving
//! base, in 26. Retention is therefore limited to `2^26 − 1` ticks (777 days of seconds); when
//! a tick passes the base's range, pairs older than the retention are expired and the base
//! moves. Each register's newest pair (its *head*) sits in one array, with the rank of the
//! next older pair beside it in another; the older pairs go in blocks of 16 registers, a
//! block's lists one after another in one vector, in register order, beside one length byte a
//! register. So the sketch holds 4 bytes a pair, 2 more a register and 24 a block (plus a
//! vector's spare capacity, cut to a sixteenth and four pairs at each expiry), where fixed slots would hold
//! room for pairs most registers never have (the previous layout, 16-byte slots of three
//! pairs and a pool, held 1.7 times as much at the reference scenario).
//!
//! An insert that replaces the head — a new pair of at least the head's rank that no older
//! pair's rank stops short of — touches only the two arrays (about half of the inserts at the
//! reference scenario). Otherwise it finds the register's older pairs in its block (summing the
//! 16 length bytes before it as two words) and, when their number changes, moves the rest of
//! the block (about 20 pairs).
//!
//! ```
//! use tidemark::cardinality::SlidingHll;
//!
//! // Distinct items in any window of up to 60 ticks (minutes, say), p = 12.
//! let mut s = SlidingHll::new(12, 60).unwrap();
//! for minute in 0..120u64 {
//!     for user in 0..100u64 {
//!         s.insert_u64(minute * 1_000 + user % (10 + minute), minute).unwrap();
//!     }
//! }
//! let last_hour = s.count(119, 60).unwrap();
//! let exact: std::collections::HashSet<u64> = (60..120u64)
//!     .flat_map(|m| (0..100u64).map(move |u| m * 1_000 + u % (10 + m)))
//!     .collect();
//! assert!((last_hour.value - exact.len() as f64).abs() < 0.1 * exact.len() as f64);
//! assert!(s.count(119, 61).is_err()); // longer than the retention
//! ```

use super::registers::{estimate_registers, index_and_rank, max_rank, z_score, DEFAULT_CONFIDENCE};
use super::registers::{MAX_PRECISION, MIN_PRECISION};
use crate::estimate::Estimate;
use crate::hash::ItemHasher;
use crate::ParamError;

/// Registers a block holds: `2^BLOCK_BITS`.
const BLOCK_BITS: u8 = 4;
/// `2^BLOCK_BITS`.
const BLOCK: usize = 1 << BLOCK_BITS;
// Every sketch has whole blocks: the smallest precision has one.
const _: () = assert!(BLOCK_BITS <= MIN_PRECISION);
const TICK_BITS: u32 = 26;
const RANK_BITS: u32 = 6;
const RANK_MASK: u32 = (1 << RANK_BITS) - 1;
/// A list holds at most 61 pairs (ranks 61 down to 1 at p = 4).
const MAX_LIST: usize = 64;

/// Why a sliding HyperLogLog refused an event or a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlidingError {
    /// The event is older than any window can reach (or than the last `expire`).
    TooOld {
        /// The event's tick.
        tick: u64,
        /// The oldest tick still accepted.
        oldest: u64,
    },
    /// Windows end at the newest tick seen or later.
    QueryBeforeNewest {
        /// The query's `now`.
        now: u64,
        /// The newest tick seen.
        newest: u64,
    },
    /// The window is empty or longer than the retention.
    Window {
        /// The window asked for.
        window: u64,
        /// The retention.
        retention: u64,
    },
    /// The window reaches back past pairs already expired.
    Expired {
        /// The window's oldest tick.
        from: u64,
        /// The oldest tick kept.
        horizon: u64,
    },
}

impl core::fmt::Display for SlidingError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SlidingError::TooOld { tick, oldest } => write!(
                f,
                "tick {tick} is older than any window can reach (oldest accepted: {oldest})"
            ),
            SlidingError::QueryBeforeNewest { now, newest } => write!(
                f,
                "a window must end at or after the newest tick seen ({newest}), not at {now}"
            ),
            SlidingError::Window { window, retention } => write!(
                f,
                "window {window} must be between 1 and the retention, {retention}"
            ),
            SlidingError::Expired { from, horizon } => write!(
                f,
                "the window starts at tick {from}, before the oldest tick kept ({horizon})"
            ),
        }
    }
}

impl std::error::Error for SlidingError {}

/// Pair counts and memory of a [`SlidingHll`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlidingStats {
    /// Pairs held in all.
    pub pairs: usize,
    /// Pairs per register, on average.
    pub pairs_per_register: f64,
    /// The longest list.
    pub longest: usize,
    /// Bytes held: the struct, the length bytes, the blocks' vectors and their capacity.
    pub bytes: usize,
}

/// A HyperLogLog answering distinct counts over any window up to a retention.
#[derive(Clone, Debug)]
pub struct SlidingHll {
    p: u8,
    hasher: ItemHasher,
    confidence: f64,
    retention: u64,
    /// Ticks are stored as offsets from `base`.
    base: u64,
    /// The newest tick seen, if any.
    newest: Option<u64>,
    /// Pairs older than this were expired.
    horizon: u64,
    /// Each register's newest pair, 0 when its list is empty (a pair's rank is at least 1).
    /// Most inserts replace only this word, which stays in the first-level cache.
    heads: Vec<u32>,
    /// The rank of each register's newest older pair, 0 when it has none: an insert that
    /// replaces the head reads it instead of the block.
    tails: Vec<u8>,
    /// Each register's number of older pairs (all but the head).
    lens: Vec<u8>,
    /// Per block of registers, their older pairs one after another, in register order.
    blocks: Vec<Vec<u32>>,
}

/// Two sketches are equal when they answer alike: same shape, hash, clock and lists (however
/// their ticks happen to be stored).
impl PartialEq for SlidingHll {
    fn eq(&self, other: &Self) -> bool {
        self.p == other.p
            && self.hasher == other.hasher
            && self.confidence == other.confidence
            && self.retention == other.retention
            && self.newest == other.newest
            && self.horizon == other.horizon
            && self.pairs().eq(other.pairs())
    }
}

#[inline]
fn pack(offset: u64, rank: u8) -> u32 {
    ((offset as u32) << RANK_BITS) | rank as u32
}

#[inline]
fn rank_of(pair: u32) -> u8 {
    (pair & RANK_MASK) as u8
}

#[inline]
fn offset_of(pair: u32) -> u64 {
    (pair >> RANK_BITS) as u64
}

impl SlidingHll {
    /// The longest retention, in ticks: tick offsets take 26 bits (777 days of seconds).
    pub const MAX_RETENTION: u64 = (1 << TICK_BITS) - 1;

    /// A sliding sketch of precision `p` answering windows of up to `retention` ticks.
    pub fn new(p: u8, retention: u64) -> Result<Self, ParamError> {
        Self::with_hasher(p, retention, ItemHasher::default())
    }

    /// The same, hashing with `hasher`.
    pub fn with_hasher(p: u8, retention: u64, hasher: ItemHasher) -> Result<Self, ParamError> {
        if !(MIN_PRECISION..=MAX_PRECISION).contains(&p) {
            return Err(ParamError::new("precision", "in 4..=18", p));
        }
        if !(1..=Self::MAX_RETENTION).contains(&retention) {
            return Err(ParamError::new(
                "retention",
                "in 1..=67108863 ticks (use coarser ticks for longer retentions)",
                retention,
            ));
        }
        Ok(SlidingHll {
            p,
            hasher,
            confidence: DEFAULT_CONFIDENCE,
            retention,
            base: 0,
            newest: None,
            horizon: 0,
            heads: vec![0; 1 << p],
            tails: vec![0; 1 << p],
            lens: vec![0; 1 << p],
            blocks: vec![Vec::new(); 1 << (p - BLOCK_BITS)],
        })
    }

    /// Brackets at `confidence` instead of 95%.
    pub fn with_confidence(mut self, confidence: f64) -> Result<Self, ParamError> {
        z_score(confidence)?;
        self.confidence = confidence;
        Ok(self)
    }

    /// The precision.
    pub fn precision(&self) -> u8 {
        self.p
    }

    /// The hash items are hashed with.
    pub fn hasher(&self) -> ItemHasher {
        self.hasher
    }

    /// The longest window a query may ask for.
    pub fn retention(&self) -> u64 {
        self.retention
    }

    /// The confidence of the brackets.
    pub fn confidence(&self) -> f64 {
        self.confidence
    }

    /// The newest tick seen.
    pub fn newest(&self) -> Option<u64> {
        self.newest
    }

    /// The oldest tick still accepted: past both the retention and the last `expire`.
    pub fn oldest_accepted(&self) -> u64 {
        let by_retention = self
            .newest
            .map_or(0, |n| n.saturating_sub(self.retention - 1));
        by_retention.max(self.horizon)
    }

    /// Adds an item's bytes at `tick`.
    #[inline]
    pub fn insert(&mut self, item: &[u8], tick: u64) -> Result<(), SlidingError> {
        self.insert_hash(self.hasher.hash(item), tick)
    }

    /// Adds a `u64` item at `tick`.
    #[inline]
    pub fn insert_u64(&mut self, item: u64, tick: u64) -> Result<(), SlidingError> {
        self.insert_hash(self.hasher.hash_u64(item), tick)
    }

    /// Adds an item by its hash (computed with [`Self::hasher`]) at `tick`. Events may arrive
    /// out of order; one older than [`Self::oldest_accepted`] is refused.
    pub fn insert_hash(&mut self, hash: u64, tick: u64) -> Result<(), SlidingError> {
        let oldest = self.oldest_accepted();
        if tick < oldest {
            return Err(SlidingError::TooOld { tick, oldest });
        }
        if tick - self.base > Self::MAX_RETENTION {
            self.rebase(tick);
        }
        if self.newest.is_none_or(|n| tick > n) {
            self.newest = Some(tick);
        }
        let (index, rank) = index_and_rank(hash, self.p);
        self.add_pair(index, tick - self.base, rank);
        Ok(())
    }

    /// Moves the base so that `tick` fits, expiring what the retention no longer reaches.
    fn rebase(&mut self, tick: u64) {
        let keep_from = tick.saturating_sub(self.retention - 1).max(self.horizon);
        self.expire(keep_from);
        let shift = keep_from - self.base;
        let heads = self.heads.iter_mut().filter(|h| **h != 0);
        for pair in self.blocks.iter_mut().flatten().chain(heads) {
            *pair = pack(offset_of(*pair) - shift, rank_of(*pair));
        }
        self.base = keep_from;
    }

    /// Register `i`'s block, the offset of its older pairs in the block, and their number.
    #[inline(always)]
    fn locate(&self, i: usize) -> (usize, usize, usize) {
        let (b, j) = (i / BLOCK, i % BLOCK);
        let block = &self.lens[b * BLOCK..(b + 1) * BLOCK];
        (b, sum_before(block, j), self.lens[i] as usize)
    }

    /// Register `i`'s older pairs (all but the head).
    #[inline]
    fn older(&self, i: usize) -> &[u32] {
        let (b, start, n) = self.locate(i);
        &self.blocks[b][start..start + n]
    }

    /// Edits register `i`'s whole list through a stack copy, then stores it back.
    fn edit(&mut self, i: usize, f: impl FnOnce(&mut ListBuf)) {
        let mut buf = ListBuf::default();
        buf.extend_from_slice(self.older(i));
        if self.heads[i] != 0 {
            buf.extend_from_slice(&[self.heads[i]]);
        }
        f(&mut buf);
        self.store(i, &buf);
    }

    /// Stores `list` as register `i`'s pairs: its last as the head, the rest in the block.
    fn store(&mut self, i: usize, list: &[u32]) {
        debug_assert!(list.len() <= max_rank(self.p) as usize);
        let (head, older) = match list.split_last() {
            Some((&head, older)) => (head, older),
            None => (0, list),
        };
        let (b, start, n) = self.locate(i);
        let block = &mut self.blocks[b];
        if older.len() > n {
            reserve(block, older.len() - n);
        }
        block.splice(start..start + n, older.iter().copied());
        self.lens[i] = older.len() as u8;
        self.tails[i] = older.last().map_or(0, |&p| rank_of(p));
        self.heads[i] = head;
    }

    /// Adds the pair (offset, rank) to register `i`, keeping ticks strictly increasing and
    /// ranks strictly decreasing.
    #[inline]
    fn add_pair(&mut self, i: usize, offset: u64, rank: u8) {
        let head = self.heads[i];
        let pair = pack(offset, rank);
        if head == 0 {
            self.heads[i] = pair; // an empty list
            return;
        }
        if offset_of(head) > offset {
            // Out of order: rare, through a copy.
            self.edit(i, |list| insert_pair(list, offset, rank));
            return;
        }
        if rank < rank_of(head) {
            if offset_of(head) == offset {
                return; // a same-tick pair of higher rank dominates the new one
            }
            // The head becomes the newest older pair; the new pair is the head.
            let (b, start, n) = self.locate(i);
            let block = &mut self.blocks[b];
            reserve(block, 1);
            block.insert(start + n, head);
            self.lens[i] += 1;
            self.tails[i] = rank_of(head);
            self.heads[i] = pair;
            return;
        }
        // The new pair dominates the head, and the older pairs while their rank is at most
        // `rank` (older pairs are older than the head, so none shares the new tick).
        self.heads[i] = pair;
        let tail = self.tails[i];
        if tail != 0 && tail <= rank {
            // Some older pairs fall too: the newest ones, in place.
            let (b, start, n) = self.locate(i);
            let block = &mut self.blocks[b];
            let older = &block[start..start + n];
            let keep = older
                .iter()
                .rposition(|&p| rank_of(p) > rank)
                .map_or(0, |k| k + 1);
            self.tails[i] = if keep > 0 {
                rank_of(older[keep - 1])
            } else {
                0
            };
            block.drain(start + keep..start + n);
            self.lens[i] = keep as u8;
        }
    }

    /// Drops pairs older than `oldest`: no window can reach them any more. Later events
    /// older than `oldest` are refused.
    pub fn expire(&mut self, oldest: u64) {
        if oldest <= self.horizon {
            return;
        }
        self.horizon = oldest;
        if oldest <= self.base {
            return;
        }
        let cut = oldest - self.base;
        for head in &mut self.heads {
            // A head past the cut has every older pair past it too (they are older).
            if *head != 0 && offset_of(*head) < cut {
                *head = 0;
            }
        }
        let per_block = self
            .lens
            .chunks_mut(BLOCK)
            .zip(self.tails.chunks_mut(BLOCK));
        for (block, (lens, tails)) in self.blocks.iter_mut().zip(per_block) {
            // One pass over the block, moving what each list keeps down to its new place.
            let (mut read, mut write) = (0, 0);
            for (len, tail) in lens.iter_mut().zip(tails) {
                let n = *len as usize;
                let list = &block[read..read + n];
                let dropped = list.iter().take_while(|&&p| offset_of(p) < cut).count();
                block.copy_within(read + dropped..read + n, write);
                write += n - dropped;
                read += n;
                *len = (n - dropped) as u8;
                if *len == 0 {
                    *tail = 0;
                }
            }
            block.truncate(write);
            if block.capacity() > spare_limit(block.len()) {
                block.shrink_to(block.len());
            }
        }
    }

    /// The plain registers of the window `(now − window, now]`.
    pub fn registers(&self, now: u64, window: u64) -> Result<Vec<u8>, SlidingError> {
        if window == 0 || window > self.retention {
            return Err(SlidingError::Window {
                window,
                retention: self.retention,
            });
        }
        if let Some(newest) = self.newest {
            if now < newest {
                return Err(SlidingError::QueryBeforeNewest { now, newest });
            }
        }
        // The window's first tick, `now − window + 1`, without passing 2^64 − 1 on the way.
        let from = now.saturating_sub(window - 1);
        if from < self.horizon {
            return Err(SlidingError::Expired {
                from,
                horizon: self.horizon,
            });
        }
        let mut regs = vec![0u8; self.lens.len()];
        // `from ≥ horizon ≥ base` (checked above; rebasing keeps the base at most the horizon).
        if from - self.base > Self::MAX_RETENTION {
            return Ok(regs); // the whole window is newer than anything held
        }
        let cut = from.saturating_sub(self.base);
        // The walk of `lists()`, written out: through that iterator a count took twice as long.
        let per_register = regs.chunks_mut(BLOCK).zip(self.lens.chunks(BLOCK));
        for (((regs, lens), heads), block) in
            per_register.zip(self.heads.chunks(BLOCK)).zip(&self.blocks)
        {
            let mut start = 0;
            for ((reg, &n), &head) in regs.iter_mut().zip(lens).zip(heads) {
                let older = &block[start..start + n as usize];
                start += n as usize;
                // The oldest pair inside the window has the highest rank inside it; the head
                // is the newest pair, so it is inside whenever anything is.
                if head == 0 || offset_of(head) < cut {
                    continue;
                }
                let p = older
                    .iter()
                    .find(|&&p| offset_of(p) >= cut)
                    .unwrap_or(&head);
                *reg = rank_of(*p);
            }
        }
        Ok(regs)
    }

    /// Distinct items in the window `(now − window, now]`, Ertl's estimator with its bracket.
    pub fn count(&self, now: u64, window: u64) -> Result<Estimate, SlidingError> {
        let regs = self.registers(now, window)?;
        Ok(estimate_registers(&regs, self.confidence)
            .expect("registers of a valid precision and ranks, and a validated confidence"))
    }

    /// Pairs held and bytes.
    pub fn stats(&self) -> SlidingStats {
        let lengths = self
            .lens
            .iter()
            .zip(&self.heads)
            .map(|(&n, &h)| n as usize + usize::from(h != 0));
        let pairs: usize = lengths.clone().sum();
        let longest = lengths.max().unwrap_or(0);
        let block_bytes: usize = self
            .blocks
            .iter()
            .map(|b| b.capacity() * 4 + core::mem::size_of::<Vec<u32>>())
            .sum();
        SlidingStats {
            pairs,
            pairs_per_register: pairs as f64 / self.lens.len() as f64,
            longest,
            bytes: core::mem::size_of::<Self>() + self.lens.len() * 6 + block_bytes,
        }
    }

    /// Every register's older pairs and head (if any), in register order: one pass over the
    /// blocks.
    fn lists(&self) -> impl Iterator<Item = (usize, &[u32], Option<&u32>)> + '_ {
        self.blocks
            .iter()
            .zip(self.lens.chunks(BLOCK))
            .enumerate()
            .flat_map(move |(b, (block, lens))| {
                let mut start = 0;
                lens.iter().enumerate().map(move |(j, &n)| {
                    let i = b * BLOCK + j;
                    let older = &block[start..start + n as usize];
                    start += n as usize;
                    (i, older, Some(&self.heads[i]).filter(|&&h| h != 0))
                })
            })
    }

    // --- for the encoding ---

    pub(crate) fn pairs(&self) -> impl Iterator<Item = (usize, Vec<(u64, u8)>)> + '_ {
        self.lists().map(move |(i, older, head)| {
            let list = older
                .iter()
                .chain(head)
                .map(|&p| (self.base + offset_of(p), rank_of(p)))
                .collect();
            (i, list)
        })
    }

    pub(crate) fn horizon(&self) -> u64 {
        self.horizon
    }

    pub(crate) fn base(&self) -> u64 {
        self.base
    }

    /// Rebuilds from validated parts: lists in tick order with ranks strictly decreasing,
    /// ticks within `[base, base + SlidingHll::MAX_RETENTION]`.
    pub(crate) fn from_parts(
        mut sketch: SlidingHll,
        base: u64,
        newest: Option<u64>,
        horizon: u64,
        lists: Vec<Vec<(u64, u8)>>,
    ) -> SlidingHll {
        sketch.base = base;
        sketch.newest = newest;
        sketch.horizon = horizon;
        for (i, list) in lists.into_iter().enumerate() {
            let Some((&(t, r), older)) = list.split_last() else {
                continue;
            };
            sketch.heads[i] = pack(t - base, r);
            let block = &mut sketch.blocks[i / BLOCK];
            reserve(block, older.len());
            block.extend(older.iter().map(|&(t, r)| pack(t - base, r)));
            sketch.lens[i] = older.len() as u8;
            sketch.tails[i] = older.last().map_or(0, |&(_, r)| r);
        }
        sketch
    }
}

/// A list being edited, on the stack: at most [`MAX_LIST`] pairs.
struct ListBuf {
    len: usize,
    pairs: [u32; MAX_LIST],
}

impl Default for ListBuf {
    fn default() -> Self {
        ListBuf {
            len: 0,
            pairs: [0; MAX_LIST],
        }
    }
}

impl core::ops::Deref for ListBuf {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.pairs[..self.len]
    }
}

impl core::ops::DerefMut for ListBuf {
    fn deref_mut(&mut self) -> &mut [u32] {
        &mut self.pairs[..self.len]
    }
}

impl ListBuf {
    fn extend_from_slice(&mut self, items: &[u32]) {
        self.pairs[self.len..self.len + items.len()].copy_from_slice(items);
        self.len += items.len();
    }

    /// Removes `[from, to)` and puts `pair` in its place.
    fn replace(&mut self, from: usize, to: usize, pair: u32) {
        let tail = self.len - to;
        self.pairs.copy_within(to..self.len, from + 1);
        self.pairs[from] = pair;
        self.len = from + 1 + tail;
    }
}

/// The sum of a block's first `j` list lengths (each at most 61), without a loop over them:
/// each 8-byte word, masked to the lengths before `j`, is added in 16-bit lanes (none
/// passes 4 · 2 · 61), then the lanes by one multiplication.
#[inline]
fn sum_before(lens: &[u8], j: usize) -> usize {
    const LOW_BYTES: u64 = 0x00ff_00ff_00ff_00ff;
    const LANES: u64 = 0x0001_0001_0001_0001;
    let mut lanes = 0u64;
    for (k, word) in lens.chunks_exact(8).enumerate() {
        let w = u64::from_le_bytes(word.try_into().expect("chunks of eight"));
        let bytes = j.saturating_sub(8 * k).min(8);
        let mask = if bytes == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * bytes)) - 1
        };
        let w = w & mask;
        lanes += (w & LOW_BYTES) + ((w >> 8) & LOW_BYTES);
    }
    (lanes.wrapping_mul(LANES) >> 48) as usize
}

/// The most capacity a block of `len` pairs keeps: a sixteenth spare, and a few pairs.
fn spare_limit(len: usize) -> usize {
    len + len / 16 + 4
}

/// Room for `more` pairs in `block`, growing it by a sixteenth at a time rather than doubling
/// (the spare capacity is memory the sketch holds).
fn reserve(block: &mut Vec<u32>, more: usize) {
    if block.capacity() - block.len() < more {
        let len = block.len();
        block.reserve_exact(spare_limit(len + more) - len);
    }
}

/// Places (offset, rank) into a list ordered by offset, ranks strictly decreasing.
fn insert_pair(list: &mut ListBuf, offset: u64, rank: u8) {
    // First pair strictly newer than the new one.
    let pos = list
        .iter()
        .rposition(|&p| offset_of(p) <= offset)
        .map_or(0, |i| i + 1);
    if list.get(pos).is_some_and(|&p| rank_of(p) >= rank) {
        return; // a newer pair at least as high: the new one is never a maximum
    }
    if pos > 0 {
        let prev = list[pos - 1];
        if offset_of(prev) == offset && rank_of(prev) >= rank {
            return; // same tick, at least as high
        }
    }
    let mut start = pos;
    while start > 0 && rank_of(list[start - 1]) <= rank {
        start -= 1;
    }
    list.replace(start, pos, pack(offset, rank));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks and ranks of register `i`.
    fn pairs_of(s: &SlidingHll, i: usize) -> Vec<(u64, u8)> {
        s.pairs().nth(i).unwrap().1
    }

    #[test]
    fn block_prefixes_sum_as_one_by_one() {
        let mut state = 1u64;
        for _ in 0..200 {
            let mut lens = [0u8; BLOCK];
            for l in &mut lens {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                *l = ((state >> 33) % 62) as u8;
            }
            for j in 0..BLOCK {
                let one_by_one: usize = lens[..j].iter().map(|&l| l as usize).sum();
                assert_eq!(sum_before(&lens, j), one_by_one, "{lens:?} before {j}");
            }
        }
        for j in 0..BLOCK {
            assert_eq!(sum_before(&[61; BLOCK], j), 61 * j);
        }
    }

    #[test]
    fn dominated_pairs_are_dropped_in_and_out_of_order() {
        let mut s = SlidingHll::new(4, 1_000).unwrap();
        // Register 0 (hash low bits 0000); rank = 1 + trailing zeros of hash >> 4.
        let h = |rank: u8| (1u64 << (4 + rank - 1)) & !0xF;
        s.insert_hash(h(3), 10).unwrap();
        s.insert_hash(h(2), 20).unwrap();
        s.insert_hash(h(1), 30).unwrap();
        assert_eq!(pairs_of(&s, 0), [(10, 3), (20, 2), (30, 1)]);
        // In order, rank 2 at 40 removes (20, 2) and (30, 1).
        s.insert_hash(h(2), 40).unwrap();
        assert_eq!(pairs_of(&s, 0), [(10, 3), (40, 2)]);
        // Out of order: rank 1 at 25 is dominated by (40, 2).
        s.insert_hash(h(1), 25).unwrap();
        assert_eq!(pairs_of(&s, 0), [(10, 3), (40, 2)]);
        // Out of order: rank 5 at 15 removes (10, 3) and sits before (40, 2).
        s.insert_hash(h(5), 15).unwrap();
        assert_eq!(pairs_of(&s, 0), [(15, 5), (40, 2)]);
        // Same tick, lower rank: dropped; same tick, higher: replaces.
        s.insert_hash(h(1), 40).unwrap();
        assert_eq!(pairs_of(&s, 0), [(15, 5), (40, 2)]);
        s.insert_hash(h(4), 40).unwrap();
        assert_eq!(pairs_of(&s, 0), [(15, 5), (40, 4)]);
        // Lists grow and shrink inside their block.
        for (k, t) in (50..56).enumerate() {
            s.insert_hash(h(3 - (k as u8 % 3)), t).unwrap();
        }
        let l = pairs_of(&s, 0);
        assert!(
            l.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 > w[1].1),
            "{l:?}"
        );
    }

    #[test]
    fn refusals_name_the_limits() {
        let mut s = SlidingHll::new(8, 100).unwrap();
        s.insert_u64(1, 500).unwrap();
        assert_eq!(
            s.insert_u64(2, 400),
            Err(SlidingError::TooOld {
                tick: 400,
                oldest: 401
            })
        );
        assert!(matches!(
            s.count(499, 10),
            Err(SlidingError::QueryBeforeNewest { .. })
        ));
        assert!(matches!(
            s.count(500, 101),
            Err(SlidingError::Window { .. })
        ));
        assert!(matches!(s.count(500, 0), Err(SlidingError::Window { .. })));
        s.expire(450);
        assert!(matches!(
            s.count(500, 100),
            Err(SlidingError::Expired { .. })
        ));
        assert!(s.count(500, 51).is_ok());
        assert!(SlidingHll::new(3, 10).is_err());
        assert!(SlidingHll::new(12, 0).is_err());
        assert!(SlidingHll::new(12, SlidingHll::MAX_RETENTION + 1).is_err());
    }

    #[test]
    fn windows_at_the_end_of_time_do_not_overflow() {
        let mut s = SlidingHll::new(4, 10).unwrap();
        assert_eq!(s.count(u64::MAX, 1).unwrap().value, 0.0);
        s.insert_u64(1, u64::MAX - 1).unwrap();
        assert_eq!(s.count(u64::MAX - 1, 1).unwrap().value.round(), 1.0);
        assert_eq!(s.count(u64::MAX, 10).unwrap().value.round(), 1.0);
        assert_eq!(s.count(u64::MAX, 1).unwrap().value, 0.0);
    }

    #[test]
    fn rebasing_keeps_every_reachable_pair() {
        let mut s = SlidingHll::new(6, 1_000).unwrap();
        let mut t = 0u64;
        for i in 0..5_000u64 {
            t += 40_000; // crosses the 2^26 offset range many times
            s.insert_u64(i, t).unwrap();
        }
        // The last 1,000 ticks hold exactly one event.
        let e = s.count(t, 1_000).unwrap();
        assert_eq!(e.value.round(), 1.0);
        // A window of 1,000 ticks after a long idle gap sees nothing.
        let e = s.count(t + 50_000_000_000, 1_000).unwrap();
        assert_eq!(e.value, 0.0);
    }
}
