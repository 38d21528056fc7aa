//! A ring of per-bucket sketches: distinct counts over the last `W` buckets.
//!
//! Time is cut into buckets of `width` ticks; each bucket gets its own sketch — an [`Hll`]
//! by default, or an [`ExaLogLog`] ([`RingWindow::exaloglog`]), either starting exact and
//! promoting as it grows — kept in a ring of `n` slots indexed by bucket mod `n`, so
//! expiry is free: a slot is reset when a newer bucket reuses it. A window of the last `W ≤ n`
//! buckets is the register-wise maximum of their sketches, which has the same error as one
//! sketch fed the union (Flajolet et al. 2007). The merge of the window's *closed* buckets is
//! cached until a bucket closes (or a late event lands in one of them), so a query costs one
//! merge of the cache with the open bucket rather than `W` merges.
//!
//! An event for a bucket still in the ring goes to its own bucket, late or not. One older than
//! the ring is refused ([`RingError::TooOld`]) — never added to the current bucket, which
//! would silently move it into the wrong window.
//!
//! References: P. Flajolet, É. Fusy, O. Gandouet, F. Meunier, *HyperLogLog: the analysis of a
//! near-optimal cardinality estimation algorithm*, AofA 2007.
//!
//! ```
//! use tidemark::cardinality::RingWindow;
//!
//! // Minute buckets (60 ticks of a second), an hour of them, p = 12.
//! let mut ring = RingWindow::new(12, 60, 60).unwrap();
//! for second in 0..7_200u64 {
//!     ring.insert_u64(second % 1_000, second).unwrap();
//! }
//! // The last 5 minutes (300 seconds) saw 300 distinct items.
//! let e = ring.count(7_199, 5).unwrap();
//! assert!(e.contains(300.0) || (e.value - 300.0).abs() < 15.0);
//! // An event from two hours ago is older than the ring: refused, not miscounted.
//! assert!(ring.insert_u64(1, 0).is_err());
//! ```

use core::fmt;

use super::{ExaLogLog, Hll};
use crate::codec::{Reader, Writer};
use crate::estimate::Estimate;
use crate::family::Family;
use crate::hash::ItemHasher;
use crate::{DecodeError, MergeError, ParamError};

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::Hll {}
    impl Sealed for super::ExaLogLog {}
}

/// A sketch a [`RingWindow`] can keep per bucket: [`Hll`] or [`ExaLogLog`]. Sealed: the
/// ring's encoding names each kind by its own envelope family.
pub trait BucketSketch: Clone + fmt::Debug + PartialEq + sealed::Sealed {
    /// The envelope family of a ring of these.
    const RING_FAMILY: Family;
    /// An empty sketch of the same shape and hash.
    fn emptied(&self) -> Self;
    /// The hash.
    fn hasher(&self) -> ItemHasher;
    /// The precision `p`.
    fn precision(&self) -> u8;
    /// Inserts an item by its hash.
    fn insert_hash(&mut self, hash: u64);
    /// Merges another of the same shape in.
    fn merge(&mut self, other: &Self) -> Result<(), MergeError>;
    /// The distinct count.
    fn estimate(&self) -> Estimate;
    /// Bytes held.
    fn bytes(&self) -> usize;
    /// The sketch's own envelope.
    fn to_bytes(&self) -> Vec<u8>;
    /// Decodes the sketch's own envelope.
    fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError>;
    /// The shape parameters a merge must agree on, `(name, value)`.
    fn shape(&self) -> Vec<(&'static str, u64)>;
    /// Writes the shape parameters (the ring's first parameters).
    fn write_shape(&self, w: &mut Writer);
    /// Reads the shape parameters and builds an empty sketch of them and `hasher`.
    fn read_shape(r: &mut Reader<'_>, hasher: ItemHasher) -> Result<Self, DecodeError>;
    /// The sketch at rest: compact bytes a closed bucket is kept as.
    fn freeze(&self) -> Box<[u8]>;
    /// The sketch [`BucketSketch::freeze`] made `bytes` of, `empty` one of the same shape.
    fn thaw(empty: &Self, bytes: &[u8]) -> Self;
}

impl BucketSketch for Hll {
    const RING_FAMILY: Family = Family::RingWindow;
    fn emptied(&self) -> Self {
        Hll::with_hasher(self.precision(), self.hasher())
            .and_then(|s| s.with_confidence(self.confidence()))
            .expect("the sketch's own precision and confidence")
    }
    fn hasher(&self) -> ItemHasher {
        Hll::hasher(self)
    }
    fn precision(&self) -> u8 {
        Hll::precision(self)
    }
    fn insert_hash(&mut self, hash: u64) {
        Hll::insert_hash(self, hash)
    }
    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        Hll::merge(self, other)
    }
    fn estimate(&self) -> Estimate {
        Hll::estimate(self)
    }
    fn bytes(&self) -> usize {
        Hll::bytes(self)
    }
    fn to_bytes(&self) -> Vec<u8> {
        Hll::to_bytes(self)
    }
    fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        Hll::from_bytes(bytes)
    }
    fn shape(&self) -> Vec<(&'static str, u64)> {
        vec![("precision", Hll::precision(self) as u64)]
    }
    fn write_shape(&self, w: &mut Writer) {
        w.u8(Hll::precision(self));
    }
    fn read_shape(r: &mut Reader<'_>, hasher: ItemHasher) -> Result<Self, DecodeError> {
        let off = r.offset();
        let p = r.u8("precision")?;
        Hll::with_hasher(p, hasher)
            .map_err(|e| Reader::invalid("precision", off, e.expected, p as u64))
    }
    fn freeze(&self) -> Box<[u8]> {
        super::frozen::freeze(self)
    }
    fn thaw(empty: &Self, bytes: &[u8]) -> Self {
        super::frozen::thaw(empty, bytes)
    }
}

impl BucketSketch for ExaLogLog {
    const RING_FAMILY: Family = Family::ExaLogLogRing;
    fn emptied(&self) -> Self {
        ExaLogLog::with_hasher(self.t(), self.d(), self.precision(), self.hasher())
            .and_then(|s| s.with_confidence(self.confidence()))
            .expect("the sketch's own parameters and confidence")
    }
    fn hasher(&self) -> ItemHasher {
        ExaLogLog::hasher(self)
    }
    fn precision(&self) -> u8 {
        ExaLogLog::precision(self)
    }
    fn insert_hash(&mut self, hash: u64) {
        ExaLogLog::insert_hash(self, hash)
    }
    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        ExaLogLog::merge(self, other)
    }
    fn estimate(&self) -> Estimate {
        ExaLogLog::estimate(self)
    }
    fn bytes(&self) -> usize {
        ExaLogLog::bytes(self)
    }
    fn to_bytes(&self) -> Vec<u8> {
        ExaLogLog::to_bytes(self)
    }
    fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        ExaLogLog::from_bytes(bytes)
    }
    fn shape(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("t", self.t() as u64),
            ("d", self.d() as u64),
            ("precision", ExaLogLog::precision(self) as u64),
        ]
    }
    fn write_shape(&self, w: &mut Writer) {
        w.u8(self.t()).u8(self.d()).u8(ExaLogLog::precision(self));
    }
    fn read_shape(r: &mut Reader<'_>, hasher: ItemHasher) -> Result<Self, DecodeError> {
        let s = super::exaloglog::read_shape(r)?;
        Ok(ExaLogLog::with_hasher(s.t, s.d, s.p, hasher).expect("a shape read_shape checked"))
    }
    /// Its envelope: its registers are already packed (and range-coded at rest).
    fn freeze(&self) -> Box<[u8]> {
        ExaLogLog::to_bytes(self).into_boxed_slice()
    }
    fn thaw(_empty: &Self, bytes: &[u8]) -> Self {
        ExaLogLog::from_bytes(bytes).expect("bytes this process froze decode")
    }
}

/// Why a ring refused an event or a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RingError {
    /// The event's bucket has already left the ring.
    TooOld {
        /// The event's bucket (tick / width).
        bucket: u64,
        /// The oldest bucket the ring still holds.
        oldest: u64,
    },
    /// The window is empty or longer than the ring.
    Window {
        /// Buckets asked for.
        window: u64,
        /// Buckets in the ring.
        buckets: u64,
    },
}

impl fmt::Display for RingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingError::TooOld { bucket, oldest } => write!(
                f,
                "bucket {bucket} has left the ring (oldest held: {oldest}); refused rather than \
                 added to the current bucket"
            ),
            RingError::Window { window, buckets } => {
                write!(f, "window of {window} buckets: must be 1..={buckets}")
            }
        }
    }
}

impl std::error::Error for RingError {}

/// One slot: which bucket it holds, and its sketch, live (the newest bucket, and one a late
/// event reached since the last bucket opened) or at rest.
#[derive(Clone, Debug)]
pub(crate) struct Slot<S> {
    pub(crate) bucket: u64,
    pub(crate) sketch: Held<S>,
}

/// A bucket's sketch, as inserts want it or as little as it needs. Both boxed, so that a
/// slot is a few words whatever the sketch's size (most slots are at rest).
#[derive(Clone, Debug)]
pub(crate) enum Held<S> {
    Live(Box<S>),
    Frozen(Box<[u8]>),
}

impl<S: BucketSketch> Slot<S> {
    /// The sketch, thawed if at rest.
    pub(crate) fn sketch(&self, empty: &S) -> std::borrow::Cow<'_, S> {
        match &self.sketch {
            Held::Live(s) => std::borrow::Cow::Borrowed(s),
            Held::Frozen(b) => std::borrow::Cow::Owned(S::thaw(empty, b)),
        }
    }

    /// The sketch, live, to change.
    fn live(&mut self, empty: &S) -> &mut S {
        if let Held::Frozen(b) = &self.sketch {
            self.sketch = Held::Live(Box::new(S::thaw(empty, b)));
        }
        match &mut self.sketch {
            Held::Live(s) => s,
            Held::Frozen(_) => unreachable!("thawed just above"),
        }
    }

    /// Puts a live sketch at rest.
    fn freeze(&mut self) {
        if let Held::Live(s) = &self.sketch {
            self.sketch = Held::Frozen(s.freeze());
        }
    }

    fn bytes(&self) -> usize {
        match &self.sketch {
            Held::Live(s) => core::mem::size_of::<S>() + s.bytes(),
            Held::Frozen(b) => b.len(),
        }
    }
}

/// Bytes of closed buckets at rest below which a window is merged afresh at each query
/// rather than cached: thawing and merging that much costs microseconds, while a cache holds
/// a whole sketch of the window (a dense one at large windows).
const CACHE_FROM_BYTES: usize = 16 << 10;

/// The merged closed buckets of one window, valid until a bucket closes or changes.
#[derive(Clone, Debug)]
struct Cache<S> {
    now_bucket: u64,
    window: u64,
    merged: S,
}

/// Per-bucket sketches in a ring ([`Hll`] unless named); windows are merges of the last
/// buckets.
#[derive(Clone, Debug)]
pub struct RingWindow<S: BucketSketch = Hll> {
    /// An empty sketch of the buckets' shape and hash: every new bucket is a copy (boxed: a
    /// ring is often one value among small ones, as in the Redis module's).
    empty: Box<S>,
    width: u64,
    slots: Vec<Option<Slot<S>>>,
    newest: Option<u64>,
    cache: Option<Cache<S>>,
    /// The slots holding a live sketch other than the newest bucket's: put at rest when the
    /// next bucket opens.
    live: Vec<usize>,
}

impl RingWindow<Hll> {
    /// A ring of `buckets` buckets of `width` ticks, each a precision-`p` sketch.
    pub fn new(p: u8, width: u64, buckets: u32) -> Result<Self, ParamError> {
        Self::with_hasher(p, width, buckets, ItemHasher::default())
    }

    /// The same, hashing with `hasher`.
    pub fn with_hasher(
        p: u8,
        width: u64,
        buckets: u32,
        hasher: ItemHasher,
    ) -> Result<Self, ParamError> {
        RingWindow::of(Hll::with_hasher(p, hasher)?, width, buckets)
    }
}

impl RingWindow<ExaLogLog> {
    /// A ring of `buckets` buckets of `width` ticks, each an ExaLogLog of `(t, d, p)`
    /// hashing with `hasher`.
    pub fn exaloglog(
        t: u8,
        d: u8,
        p: u8,
        width: u64,
        buckets: u32,
        hasher: ItemHasher,
    ) -> Result<Self, ParamError> {
        RingWindow::of(ExaLogLog::with_hasher(t, d, p, hasher)?, width, buckets)
    }
}

impl<S: BucketSketch> RingWindow<S> {
    /// A ring of `buckets` buckets of `width` ticks, each bucket starting as a copy of
    /// `sketch` emptied.
    pub fn of(sketch: S, width: u64, buckets: u32) -> Result<Self, ParamError> {
        if width == 0 {
            return Err(ParamError::new("bucket width", "at least 1 tick", 0));
        }
        if !(1..=1_000_000).contains(&buckets) {
            return Err(ParamError::new("buckets", "in 1..=1000000", buckets));
        }
        Ok(RingWindow {
            empty: Box::new(sketch.emptied()),
            width,
            slots: vec![None; buckets as usize],
            newest: None,
            cache: None,
            live: Vec::new(),
        })
    }

    /// The precision of every bucket's sketch.
    pub fn precision(&self) -> u8 {
        self.empty.precision()
    }

    /// The hash.
    pub fn hasher(&self) -> ItemHasher {
        self.empty.hasher()
    }

    /// An empty sketch of the buckets' shape.
    pub fn empty_sketch(&self) -> &S {
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

    /// Adds an item's bytes at `tick`.
    pub fn insert(&mut self, item: &[u8], tick: u64) -> Result<(), RingError> {
        self.insert_hash(self.hasher().hash(item), tick)
    }

    /// Adds a `u64` item at `tick`.
    pub fn insert_u64(&mut self, item: u64, tick: u64) -> Result<(), RingError> {
        self.insert_hash(self.hasher().hash_u64(item), tick)
    }

    /// Adds an item by its hash at `tick`: to its own bucket if the ring still holds it.
    pub fn insert_hash(&mut self, hash: u64, tick: u64) -> Result<(), RingError> {
        let bucket = tick / self.width;
        let n = self.buckets();
        if let Some(newest) = self.newest {
            if too_old(bucket, newest, n) {
                return Err(RingError::TooOld {
                    bucket,
                    oldest: newest - (n - 1),
                });
            }
        }
        let i = (bucket % n) as usize;
        let opens = self.newest.is_none_or(|nb| bucket > nb);
        if opens {
            // A newer bucket opens: every other live sketch goes to rest (the one closing, and
            // any a late event thawed).
            if let Some(nb) = self.newest {
                let prev = (nb % n) as usize;
                if prev != i {
                    self.live.push(prev);
                }
            }
            for j in std::mem::take(&mut self.live) {
                if j != i {
                    if let Some(s) = &mut self.slots[j] {
                        s.freeze();
                    }
                }
            }
        }
        let slot = &mut self.slots[i];
        let fresh = match slot {
            Some(s) => s.bucket != bucket,
            None => true,
        };
        if fresh {
            // The slot holds an older bucket (or none): recycle it.
            *slot = Some(Slot {
                bucket,
                sketch: Held::Live(self.empty.clone()),
            });
        }
        let slot = slot.as_mut().expect("just filled");
        if !opens && matches!(slot.sketch, Held::Frozen(_)) {
            // A late event for a bucket at rest: live until the next bucket opens.
            self.live.push(i);
        }
        slot.live(&self.empty).insert_hash(hash);
        if opens {
            self.newest = Some(bucket);
        }
        if self.cache.as_ref().is_some_and(|c| bucket < c.now_bucket) {
            self.cache = None; // a late event changed a closed bucket the cache merged
        }
        Ok(())
    }

    /// The sketch of bucket `bucket`, if the ring holds it (thawed if at rest).
    pub fn bucket(&self, bucket: u64) -> Option<S> {
        self.slot(bucket)
            .map(|s| s.sketch(&self.empty).into_owned())
    }

    fn slot(&self, bucket: u64) -> Option<&Slot<S>> {
        match &self.slots[(bucket % self.buckets()) as usize] {
            Some(s) if s.bucket == bucket => Some(s),
            _ => None,
        }
    }

    /// The merged sketch of the `window` buckets ending with the one holding `now`.
    pub fn window_sketch(&mut self, now: u64, window: u64) -> Result<S, RingError> {
        let n = self.buckets();
        if window == 0 || window > n {
            return Err(RingError::Window { window, buckets: n });
        }
        let now_bucket = now / self.width;
        let valid = self
            .cache
            .as_ref()
            .is_some_and(|c| c.now_bucket == now_bucket && c.window == window);
        let mut out = match &self.cache {
            Some(c) if valid => c.merged.clone(),
            _ => {
                let mut merged = (*self.empty).clone();
                let mut at_rest = 0;
                for b in now_bucket.saturating_sub(window - 1)..now_bucket {
                    if let Some(s) = self.slot(b) {
                        at_rest += s.bytes();
                        merged
                            .merge(&s.sketch(&self.empty))
                            .expect("one ring, one hash and precision");
                    }
                }
                // Small windows are merged afresh each time; large ones cached.
                self.cache = (at_rest >= CACHE_FROM_BYTES).then(|| Cache {
                    now_bucket,
                    window,
                    merged: merged.clone(),
                });
                merged
            }
        };
        if let Some(s) = self.slot(now_bucket) {
            out.merge(&s.sketch(&self.empty))
                .expect("one ring, one hash and precision");
        }
        Ok(out)
    }

    /// Distinct items in the `window` buckets ending with the one holding `now`.
    pub fn count(&mut self, now: u64, window: u64) -> Result<Estimate, RingError> {
        Ok(self.window_sketch(now, window)?.estimate())
    }

    /// Bytes held by the bucket sketches (live or at rest) and the cache.
    pub fn bytes(&self) -> usize {
        let slots: usize = self.slots.iter().flatten().map(Slot::bytes).sum();
        core::mem::size_of::<Self>()
            + self.slots.len() * core::mem::size_of::<Option<Slot<S>>>()
            + slots
            + self.cache.as_ref().map_or(0, |c| c.merged.bytes())
    }

    /// Merges another ring of the same shape and hash, bucket by bucket: the union of two
    /// streams. A bucket only one side still holds is kept; one older than the merged ring
    /// can hold is dropped.
    pub fn merge(&mut self, other: &RingWindow<S>) -> Result<(), MergeError> {
        let mut fields: Vec<(&'static str, u64, u64)> = self
            .empty
            .shape()
            .into_iter()
            .zip(other.empty.shape())
            .map(|((name, ours), (_, theirs))| (name, ours, theirs))
            .collect();
        fields.push(("bucket width", self.width, other.width));
        fields.push(("buckets", self.buckets(), other.buckets()));
        MergeError::check(self.hasher(), other.hasher(), &fields)?;
        let newest = self.newest.max(other.newest);
        let n = self.buckets();
        for slot in other.slots.iter().flatten() {
            if newest.is_some_and(|nb| too_old(slot.bucket, nb, n)) {
                continue; // older than the merged ring reaches
            }
            let i = (slot.bucket % n) as usize;
            match &mut self.slots[i] {
                Some(mine) if mine.bucket == slot.bucket => {
                    mine.live(&self.empty).merge(&slot.sketch(&other.empty))?
                }
                Some(mine) if mine.bucket > slot.bucket => {}
                place => *place = Some(slot.clone()),
            }
        }
        self.newest = newest;
        self.cache = None;
        self.rest();
        Ok(())
    }

    /// Puts every bucket but the newest at rest.
    fn rest(&mut self) {
        let n = self.buckets();
        let newest = self.newest.map(|b| (b % n) as usize);
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if Some(i) != newest {
                if let Some(s) = slot {
                    s.freeze();
                }
            }
        }
        self.live.clear();
    }

    // --- for the encoding ---

    pub(crate) fn slots(&self) -> &[Option<Slot<S>>] {
        &self.slots
    }

    pub(crate) fn restore(&mut self, newest: Option<u64>, slots: Vec<Option<Slot<S>>>) {
        self.newest = newest;
        self.slots = slots;
        self.cache = None;
        self.rest();
    }
}

/// Whether `bucket` has left a ring of `n` buckets whose newest is `newest` (`bucket + n ≤
/// newest`, written so that no sum passes 2^64 − 1); a bucket newer than `newest` has not.
pub(crate) fn too_old(bucket: u64, newest: u64, n: u64) -> bool {
    newest.checked_sub(bucket).is_some_and(|age| age >= n)
}
