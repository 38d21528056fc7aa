//! The four value types a key can hold, their limits, their bytes and their memory.
//!
//! | type       | structure                                                     | `TM.DUMP` bytes            |
//! |------------|---------------------------------------------------------------|----------------------------|
//! | `count`    | exponential histogram over the last `WINDOW` ms               | core envelope, family 1    |
//! | `distinct` | ring of bucket HyperLogLogs, or the sliding HyperLogLog       | core envelope, family 17/18|
//! | `freq`     | ring of per-bucket item counts (Count-Min + named heavy items)| module bundle, kind 1      |
//! | `filter`   | quotient filter (in place or stacked), optionally generations | core envelope 48/49, or module bundle kind 2 (EXPIRE) |
//!
//! A value that is one core structure dumps as exactly the envelope the CLI's `--save` writes,
//! so its bytes move between the module, the CLI and the store. The two composite values (a
//! ring of item counts, generations of filters) have no core family; they dump as a *module
//! bundle* whose every part is a core envelope:
//!
//! ```text
//! offset  size  field
//! 0       4     magic "TMRB"
//! 4       1     bundle version (1)
//! 5       1     kind: 1 frequency ring, 2 expiring filter
//! 6       …     kind parameters (below)
//! …       4     parts, u32
//!   per part: index u64 (bucket or generation number), length u64, a core envelope
//! …       8     checksum: xxh3-64 of every preceding byte
//! kind 1 parameters: bucket ms u64, buckets u32, newest bucket u64 (u64::MAX: none),
//!                    epsilon f64, delta f64, phi f64
//! kind 2 parameters: expire ms u64, capacity u64, fpr f64, reserve u8, stacked u8,
//!                    newest generation u64 (u64::MAX: none)
//! ```
//!
//! Every number a user gives that sizes an allocation is bounded here ([`Limits`]), and the
//! same bounds are checked again on every decoded value, so neither `TM.*.CREATE` nor
//! `TM.LOAD`/`RESTORE` can make the server allocate without a bound it would refuse.

use std::collections::VecDeque;

use tidemark::cardinality::{RingWindow, SlidingHll, MAX_RETENTION};
use tidemark::codec::{self, Family, Reader, Writer};
use tidemark::frequency::ItemCounts;
use tidemark::hash::ItemHasher;
use tidemark::membership::{QuotientFilter, StackedFilter};
use tidemark::window::{ExpHistogram, Span};
use tidemark::{DecodeError, Estimate};

/// Upper bounds on what one key may be asked to allocate.
pub struct Limits;

impl Limits {
    /// The longest window, ms (about 8,900 years): times and windows stay far from `u64`'s
    /// edge, so no sum of a time and a window overflows.
    pub const MAX_WINDOW_MS: u64 = 1 << 48;
    /// The largest time accepted, ms since the epoch.
    pub const MAX_TIME_MS: u64 = 1 << 52;
    /// Buckets in a distinct ring (WINDOW / BUCKET).
    pub const MAX_RING_BUCKETS: u64 = 65_536;
    /// Buckets in a frequency ring (WINDOW / BUCKET).
    pub const MAX_FREQ_BUCKETS: u64 = 4_096;
    /// Bytes a key may reach at full size (all buckets dense), as computed at creation.
    pub const MAX_KEY_BYTES: u64 = 1 << 30;
    /// Bytes of one filter's table at creation.
    pub const MAX_FILTER_BYTES: u64 = 512 << 20;
    /// The largest `n` of one `TM.COUNT.ADD`.
    pub const MAX_COUNT_ADD: u64 = 1 << 40;
    /// The largest total a counter's window may hold.
    pub const MAX_COUNT_TOTAL: u64 = 1 << 62;
    /// The largest count of one item in one `TM.FREQ.ADD`.
    pub const MAX_FREQ_ADD: u64 = 1 << 40;
    /// Filter generations kept by an expiring filter: an item lives between EXPIRE and
    /// EXPIRE·(1 + 1/(GENERATIONS − 1)) ms.
    pub const GENERATIONS: u64 = 5;
}

/// A value held by a key.
#[derive(Clone, Debug)]
pub enum Value {
    /// `TM.COUNT.*`.
    Count(Counter),
    /// `TM.DISTINCT.*`.
    Distinct(Distinct),
    /// `TM.FREQ.*`.
    Freq(Freq),
    /// `TM.FILTER.*`.
    Filter(Filter),
}

impl Value {
    /// The type's name, as `TM.INFO` and `WRONGTYPE` errors say it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Count(_) => "count",
            Value::Distinct(_) => "distinct",
            Value::Freq(_) => "freq",
            Value::Filter(_) => "filter",
        }
    }

    /// Bytes held, for `MEMORY USAGE` and `TM.INFO`.
    pub fn bytes(&self) -> usize {
        core::mem::size_of::<Value>()
            + match self {
                Value::Count(c) => c.bytes(),
                Value::Distinct(Distinct::Ring(r)) => r.bytes(),
                Value::Distinct(Distinct::Sliding(s)) => s.stats().bytes,
                Value::Freq(f) => f.bytes(),
                Value::Filter(f) => f.bytes(),
            }
    }

    /// The bytes `TM.DUMP` returns, RDB stores and `TM.LOAD` reads.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Value::Count(c) => c.hist.to_bytes(),
            Value::Distinct(Distinct::Ring(r)) => r.to_bytes(),
            Value::Distinct(Distinct::Sliding(s)) => s.to_bytes(),
            Value::Freq(f) => f.to_bytes(),
            Value::Filter(f) => f.to_bytes(),
        }
    }

    /// Reads what [`Value::to_bytes`] wrote (or a CLI `--save` file of a family a key can
    /// hold), checking every bound a `CREATE` would.
    pub fn from_bytes(bytes: &[u8]) -> Result<Value, LoadError> {
        let v = Value::decode(bytes)?;
        // Every time a command handles stays at most 2^52 ms, so no sum of a time and a
        // window can overflow; a value claiming a later one is refused.
        if v.latest().is_some_and(|t| t > Limits::MAX_TIME_MS) {
            return Err(LoadError::Limit("a latest time beyond 2^52 ms"));
        }
        if let Value::Count(c) = &v {
            if c.hist.now() > Limits::MAX_TIME_MS {
                return Err(LoadError::Limit("a latest time beyond 2^52 ms"));
            }
        }
        Ok(v)
    }

    fn decode(bytes: &[u8]) -> Result<Value, LoadError> {
        if bytes.starts_with(BUNDLE_MAGIC) {
            return decode_bundle(bytes);
        }
        let family = codec::peek_family(bytes).map_err(LoadError::Decode)?;
        match family {
            Family::ExpHistogram => {
                let hist = ExpHistogram::from_bytes(bytes).map_err(LoadError::Decode)?;
                match hist.span() {
                    Span::Ticks(w) if w <= Limits::MAX_WINDOW_MS => {
                        Ok(Value::Count(Counter { hist }))
                    }
                    Span::Ticks(_) => Err(LoadError::Limit("window longer than 2^48 ms")),
                    Span::Arrivals(_) => Err(LoadError::Unsupported(
                        "an arrivals-window histogram (a key counts milliseconds)",
                    )),
                }
            }
            Family::RingWindow => {
                // The ring's slot table is allocated from its parameters: check them first.
                let env = codec::decode(bytes).map_err(LoadError::Decode)?;
                let mut params = env.params();
                let p = params.u8("precision").map_err(LoadError::Decode)?;
                params.u64("bucket width").map_err(LoadError::Decode)?;
                let n = params.u32("buckets").map_err(LoadError::Decode)?;
                check_ring(n as u64, p)?;
                let r = RingWindow::from_bytes(bytes).map_err(LoadError::Decode)?;
                check_ring(r.buckets(), r.precision())?;
                if r.width()
                    .checked_mul(r.buckets())
                    .is_none_or(|w| w > Limits::MAX_WINDOW_MS)
                {
                    return Err(LoadError::Limit("window longer than 2^48 ms"));
                }
                Ok(Value::Distinct(Distinct::Ring(r)))
            }
            Family::SlidingHll => Ok(Value::Distinct(Distinct::Sliding(
                SlidingHll::from_bytes(bytes).map_err(LoadError::Decode)?,
            ))),
            Family::QuotientFilter => {
                let f = QuotientFilter::from_bytes(bytes).map_err(LoadError::Decode)?;
                Ok(Value::Filter(Filter::single(FilterCore::Quotient(f))))
            }
            Family::StackedFilter => {
                let f = StackedFilter::from_bytes(bytes).map_err(LoadError::Decode)?;
                Ok(Value::Filter(Filter::single(FilterCore::Stacked(f))))
            }
            other => Err(LoadError::Family(other)),
        }
    }

    /// The latest time the value has seen, when it keeps one.
    pub fn latest(&self) -> Option<u64> {
        match self {
            Value::Count(c) => c.latest(),
            Value::Distinct(Distinct::Ring(r)) => {
                r.newest_bucket().map(|b| b.saturating_mul(r.width()))
            }
            Value::Distinct(Distinct::Sliding(s)) => s.newest(),
            Value::Freq(f) => f.newest.map(|b| b.saturating_mul(f.bucket_ms)),
            Value::Filter(f) => f.newest_gen.map(|g| g.saturating_mul(f.gen_ms())),
        }
    }
}

/// Bytes that `TM.LOAD` or `RESTORE` refuse.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum LoadError {
    /// The envelope or bundle is malformed.
    Decode(DecodeError),
    /// A valid summary of a family no key type holds.
    Family(Family),
    /// A valid summary in a shape keys do not take.
    Unsupported(&'static str),
    /// A valid summary beyond a bound a `CREATE` would refuse.
    Limit(&'static str),
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LoadError::Decode(e) => write!(f, "{e}"),
            LoadError::Family(fam) => write!(f, "a {fam} is not a value a TM key holds"),
            LoadError::Unsupported(what) => write!(f, "{what} is not a value a TM key holds"),
            LoadError::Limit(what) => write!(f, "refused: {what}"),
        }
    }
}

fn check_ring(buckets: u64, p: u8) -> Result<(), LoadError> {
    if buckets > Limits::MAX_RING_BUCKETS {
        return Err(LoadError::Limit("more than 65,536 ring buckets"));
    }
    if buckets.saturating_mul(1u64.checked_shl(p as u32).unwrap_or(u64::MAX))
        > Limits::MAX_KEY_BYTES
    {
        return Err(LoadError::Limit("ring buckets × 2^precision above 1 GiB"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// count

/// A sliding-window counter: an exponential histogram over the last `window` ms.
#[derive(Clone, Debug)]
pub struct Counter {
    /// The histogram (a ticks span, one tick a millisecond).
    pub hist: ExpHistogram,
}

impl Counter {
    /// The window, ms.
    pub fn window(&self) -> u64 {
        self.hist.span().length()
    }

    /// Bytes held: the histogram and its heap (one ring buffer of k + 2 timestamps per bucket
    /// size it has used, 4 bytes a timestamp for windows of at most 2^32 ms).
    pub fn bytes(&self) -> usize {
        core::mem::size_of::<ExpHistogram>() + self.hist.heap_bytes()
    }

    /// The latest time seen, if any event (or advance) came.
    pub fn latest(&self) -> Option<u64> {
        (self.hist.stats().buckets > 0 || self.hist.now() > 0).then(|| self.hist.now())
    }

    /// The window's estimate ending at `at` (≥ the latest time).
    pub fn estimate_at(&self, at: u64) -> Estimate {
        if at <= self.hist.now() {
            return self.hist.estimate();
        }
        let mut h = self.hist.clone();
        // `at` is at or after the clock: advancing cannot fail on a ticks window.
        match h.advance_to(at) {
            Ok(()) => h.estimate(),
            Err(_) => self.hist.estimate(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// distinct

/// A windowed distinct count.
#[derive(Clone, Debug)]
pub enum Distinct {
    /// A ring of bucket HyperLogLogs: windows are whole buckets.
    Ring(RingWindow),
    /// The sliding HyperLogLog: any window up to the retention, to the millisecond.
    Sliding(SlidingHll),
}

impl Distinct {
    /// The longest window, ms.
    pub fn window(&self) -> u64 {
        match self {
            Distinct::Ring(r) => r.width() * r.buckets(),
            Distinct::Sliding(s) => s.retention(),
        }
    }

    /// The precision.
    pub fn precision(&self) -> u8 {
        match self {
            Distinct::Ring(r) => r.precision(),
            Distinct::Sliding(s) => s.precision(),
        }
    }

    /// The hash.
    pub fn hasher(&self) -> ItemHasher {
        match self {
            Distinct::Ring(r) => r.hasher(),
            Distinct::Sliding(s) => s.hasher(),
        }
    }

    /// The longest sliding retention, ms.
    pub const MAX_SLIDING_MS: u64 = MAX_RETENTION;
}

// ---------------------------------------------------------------------------------------------
// freq

/// A ring of per-bucket item counts: Count-Min with the heavy items named.
#[derive(Clone, Debug)]
pub struct Freq {
    /// ε of each bucket's sketch.
    pub epsilon: f64,
    /// δ of each bucket's sketch.
    pub delta: f64,
    /// The heavy-hitter fraction φ.
    pub phi: f64,
    /// Bucket width, ms.
    pub bucket_ms: u64,
    /// `slots[b % n]` holds bucket `b` while it is among the newest `n`.
    pub slots: Vec<Option<(u64, ItemCounts)>>,
    /// The newest bucket seen.
    pub newest: Option<u64>,
    /// The buckets' bytes (their [`ItemCounts::bytes`]), kept as events come: the key's
    /// bound is checked per `TM.FREQ.ADD`, as its items' names make it grow.
    held: u64,
}

/// Why an event did not go into a ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooOld {
    /// The oldest time still accepted, ms.
    pub oldest: u64,
}

impl Freq {
    /// An empty ring (parameters checked by the caller with [`Freq::check`]).
    pub fn new(epsilon: f64, delta: f64, phi: f64, bucket_ms: u64, buckets: u64) -> Freq {
        Freq {
            epsilon,
            delta,
            phi,
            bucket_ms,
            slots: vec![None; buckets as usize],
            newest: None,
            held: 0,
        }
    }

    /// Counts the buckets' bytes again (after the slots were filled from a payload).
    pub fn recount(&mut self) {
        self.held = self
            .slots
            .iter()
            .flatten()
            .map(|(_, c)| c.bytes() as u64)
            .sum();
    }

    /// The most these items can add to the key at one time: each a new name in its bucket
    /// (32 bytes beside it), and the bucket's exact table promoted to its sketch (w·d 8-byte
    /// counters, w·d = 8 × the exact limit).
    pub fn growth(&self, items: &[(&[u8], u64)]) -> u64 {
        let exact_limit = ItemCounts::new(self.epsilon, self.delta, self.phi)
            .map_or(0, |c| c.exact_limit() as u64);
        let names: u64 = items
            .iter()
            .map(|(i, _)| 32 + i.len().min(tidemark::frequency::MAX_ITEM_LEN) as u64)
            .sum();
        names + 64 * exact_limit
    }

    /// The buckets' bytes.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Checks a shape: the sketch parameters, the bucket count and the bytes at full size.
    /// Returns the full-size bytes.
    pub fn check(epsilon: f64, delta: f64, phi: f64, buckets: u64) -> Result<u64, String> {
        let probe = ItemCounts::new(epsilon, delta, phi).map_err(|e| e.to_string())?;
        if buckets > Limits::MAX_FREQ_BUCKETS {
            return Err(format!(
                "WINDOW/BUCKET must be at most {}, got {buckets}",
                Limits::MAX_FREQ_BUCKETS
            ));
        }
        // The exact table promotes at w·d/8 items, to a w·d table of 8-byte counters.
        let per_bucket = (probe.exact_limit() as u64).saturating_mul(64) + 1024;
        let full = per_bucket.saturating_mul(buckets);
        if full > Limits::MAX_KEY_BYTES {
            return Err(format!(
                "the ring would need up to {full} bytes at full size, above the {} byte limit",
                Limits::MAX_KEY_BYTES
            ));
        }
        Ok(full)
    }

    /// Buckets in the ring.
    pub fn buckets(&self) -> u64 {
        self.slots.len() as u64
    }

    /// The window, ms.
    pub fn window(&self) -> u64 {
        self.bucket_ms * self.buckets()
    }

    /// Adds `count` of `item` at `time`, to its own bucket if the ring still holds it.
    pub fn add(&mut self, time: u64, item: &[u8], count: u64) -> Result<(), TooOld> {
        let bucket = time / self.bucket_ms;
        let n = self.buckets();
        if let Some(newest) = self.newest {
            if bucket + n <= newest {
                return Err(TooOld {
                    oldest: (newest + 1 - n).saturating_mul(self.bucket_ms),
                });
            }
        }
        let slot = &mut self.slots[(bucket % n) as usize];
        if slot.as_ref().is_none_or(|(b, _)| *b != bucket) {
            let fresh = ItemCounts::new(self.epsilon, self.delta, self.phi);
            // The parameters were checked when the key was created or decoded.
            let Ok(fresh) = fresh else { return Ok(()) };
            if let Some((_, old)) = slot.replace((bucket, fresh)) {
                self.held = self.held.saturating_sub(old.bytes() as u64);
            }
        }
        if let Some((_, counts)) = slot {
            let item = &item[..item.len().min(tidemark::frequency::MAX_ITEM_LEN)];
            let before = counts.bytes() as u64;
            counts.insert_hashed(ItemHasher::default().hash(item), item, count);
            self.held = (self.held + counts.bytes() as u64).saturating_sub(before);
        }
        if self.newest.is_none_or(|nb| bucket > nb) {
            self.newest = Some(bucket);
        }
        Ok(())
    }

    /// The merged counts of the `window_buckets` newest buckets.
    pub fn window_counts(&self, window_buckets: u64) -> ItemCounts {
        let mut out: Option<ItemCounts> = None;
        if let Some(newest) = self.newest {
            let n = self.buckets();
            for b in (newest + 1).saturating_sub(window_buckets)..=newest {
                if let Some((sb, c)) = &self.slots[(b % n) as usize] {
                    if *sb == b {
                        match &mut out {
                            None => out = Some(c.clone()),
                            // Buckets of one key share ε, δ and φ: the merge cannot refuse.
                            Some(acc) => {
                                let _ = acc.merge(c);
                            }
                        }
                    }
                }
            }
        }
        match out {
            Some(c) => c,
            None => ItemCounts::new(self.epsilon, self.delta, self.phi)
                .unwrap_or_else(|_| unreachable!("parameters checked at creation and decode")),
        }
    }

    fn bytes(&self) -> usize {
        core::mem::size_of::<Freq>()
            + self.slots.len() * core::mem::size_of::<Option<(u64, ItemCounts)>>()
            + self.held as usize
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u64(self.bucket_ms)
            .u32(self.slots.len() as u32)
            .u64(self.newest.unwrap_or(u64::MAX))
            .f64(self.epsilon)
            .f64(self.delta)
            .f64(self.phi);
        let parts: Vec<(u64, Vec<u8>)> = self
            .slots
            .iter()
            .flatten()
            .map(|(b, c)| (*b, c.to_bytes()))
            .collect();
        encode_bundle(KIND_FREQ, w.bytes(), &parts)
    }
}

// ---------------------------------------------------------------------------------------------
// filter

/// One filter: in place or stacked.
#[derive(Clone, Debug)]
pub enum FilterCore {
    /// A quotient filter growing in place.
    Quotient(QuotientFilter),
    /// A stack of quotient filters.
    Stacked(StackedFilter),
}

impl FilterCore {
    /// Whether `item` may be present.
    pub fn contains(&self, item: &[u8]) -> bool {
        match self {
            FilterCore::Quotient(f) => f.contains(item),
            FilterCore::Stacked(f) => f.contains(item),
        }
    }

    /// Inserts `item`; `false` when an in-place filter is exhausted.
    pub fn insert(&mut self, item: &[u8]) -> bool {
        match self {
            FilterCore::Quotient(f) => f.insert(item).is_ok(),
            FilterCore::Stacked(f) => {
                f.insert(item);
                true
            }
        }
    }

    /// Removes one copy of `item`'s fingerprint.
    pub fn remove(&mut self, item: &[u8]) -> bool {
        match self {
            FilterCore::Quotient(f) => f.remove(item),
            FilterCore::Stacked(f) => f.remove(item),
        }
    }

    /// Items held.
    pub fn items(&self) -> u64 {
        match self {
            FilterCore::Quotient(f) => f.len(),
            FilterCore::Stacked(f) => f.len(),
        }
    }

    /// The expected false-positive rate now.
    pub fn fpr(&self) -> f64 {
        match self {
            FilterCore::Quotient(f) => f.fpr(),
            FilterCore::Stacked(f) => f.fpr(),
        }
    }

    /// Bytes of the tables.
    pub fn bytes(&self) -> usize {
        let bits = match self {
            FilterCore::Quotient(f) => f.bits(),
            FilterCore::Stacked(f) => f.bits(),
        };
        (bits / 8) as usize + 64
    }

    fn to_bytes(&self) -> Vec<u8> {
        match self {
            FilterCore::Quotient(f) => f.to_bytes(),
            FilterCore::Stacked(f) => f.to_bytes(),
        }
    }
}

/// How a filter is built.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterSpec {
    /// The forecast of keys.
    pub capacity: u64,
    /// The false-positive rate at the forecast.
    pub fpr: f64,
    /// Extra fingerprint bits of an in-place filter.
    pub reserve: u32,
    /// A stack instead of one filter growing in place.
    pub stacked: bool,
}

impl FilterSpec {
    /// The bytes the first table takes, checked against the limit; builds nothing.
    pub fn check(&self) -> Result<u64, String> {
        if self.capacity == 0 || self.capacity > 1 << 38 {
            return Err(format!(
                "CAPACITY must be in 1..=2^38, got {}",
                self.capacity
            ));
        }
        if !(self.fpr > 0.0 && self.fpr < 1.0) {
            return Err(format!("FPR must be in (0, 1), got {}", self.fpr));
        }
        // q = ⌈log2(4n/3)⌉ slots bits, p = ⌈log2(n/ε)⌉ + reserve fingerprint bits.
        let mut q = 0u32;
        while (3u128 << q) < self.capacity as u128 * 4 {
            q += 1;
        }
        let p =
            ((self.capacity as f64) / self.fpr).log2().ceil().max(0.0) as u64 + self.reserve as u64;
        let slot_bits = p.saturating_sub(q as u64) + 3;
        let bytes = (1u64 << q).saturating_mul(slot_bits) / 8;
        if bytes > Limits::MAX_FILTER_BYTES {
            return Err(format!(
                "the filter's table would need {bytes} bytes, above the {} byte limit",
                Limits::MAX_FILTER_BYTES
            ));
        }
        Ok(bytes)
    }

    /// Builds one filter.
    pub fn build(&self) -> Result<FilterCore, String> {
        self.check()?;
        if self.stacked {
            StackedFilter::new(self.capacity, self.fpr)
                .map(FilterCore::Stacked)
                .map_err(|e| e.to_string())
        } else {
            QuotientFilter::with_reserve(self.capacity, self.fpr, self.reserve)
                .map(FilterCore::Quotient)
                .map_err(|e| e.to_string())
        }
    }
}

/// A filter, or generations of filters by time when it forgets.
#[derive(Clone, Debug)]
pub struct Filter {
    /// How each generation is built.
    pub spec: FilterSpec,
    /// `Some(ms)`: items older than `ms` are forgotten.
    pub expire_ms: Option<u64>,
    /// `(generation, filter)`, oldest first; one generation numbered 0 when nothing expires.
    pub gens: VecDeque<(u64, FilterCore)>,
    /// The newest generation written (expiring filters).
    pub newest_gen: Option<u64>,
}

impl Filter {
    fn single(core: FilterCore) -> Filter {
        let spec = match &core {
            FilterCore::Quotient(f) => FilterSpec {
                capacity: f.max_keys().max(1),
                fpr: f.fpr(),
                reserve: f.reserve(),
                stacked: false,
            },
            FilterCore::Stacked(f) => FilterSpec {
                capacity: f.capacity(),
                fpr: f.target_fpr(),
                reserve: 0,
                stacked: true,
            },
        };
        Filter {
            spec,
            expire_ms: None,
            gens: VecDeque::from([(0, core)]),
            newest_gen: None,
        }
    }

    /// A fresh filter (spec already checked).
    pub fn new(spec: FilterSpec, expire_ms: Option<u64>) -> Result<Filter, String> {
        let gens = match expire_ms {
            None => VecDeque::from([(0, spec.build()?)]),
            Some(_) => VecDeque::new(),
        };
        Ok(Filter {
            spec,
            expire_ms,
            gens,
            newest_gen: None,
        })
    }

    /// The generation length, ms: ⌈EXPIRE / (G − 1)⌉ (1 when nothing expires).
    pub fn gen_ms(&self) -> u64 {
        self.expire_ms
            .map_or(1, |e| e.div_ceil(Limits::GENERATIONS - 1).max(1))
    }

    /// Whether generation `g` is still live when the clock reads `now`.
    fn live(&self, g: u64, now: u64) -> bool {
        match self.expire_ms {
            None => true,
            Some(_) => g.saturating_add(Limits::GENERATIONS - 1) >= now / self.gen_ms(),
        }
    }

    /// The generations a query at `now` consults.
    pub fn live_gens(&self, now: u64) -> impl Iterator<Item = &FilterCore> {
        self.gens
            .iter()
            .filter(move |(g, _)| self.live(*g, now))
            .map(|(_, f)| f)
    }

    /// The filter an insert at `now` goes to, creating its generation and dropping dead
    /// ones. `None` only if building a generation fails (the spec was checked, so never).
    pub fn target(&mut self, now: u64) -> Option<&mut FilterCore> {
        if self.expire_ms.is_none() {
            return self.gens.front_mut().map(|(_, f)| f);
        }
        // A late event goes to the newest generation: it lives a little longer, never less.
        let g = (now / self.gen_ms()).max(self.newest_gen.unwrap_or(0));
        while self
            .gens
            .front()
            .is_some_and(|(old, _)| !self.live(*old, g.saturating_mul(self.gen_ms())))
        {
            self.gens.pop_front();
        }
        if self.gens.back().is_none_or(|(b, _)| *b != g) {
            let f = self.spec.build().ok()?;
            self.gens.push_back((g, f));
        }
        self.newest_gen = Some(g);
        self.gens.back_mut().map(|(_, f)| f)
    }

    fn bytes(&self) -> usize {
        core::mem::size_of::<Filter>() + self.gens.iter().map(|(_, f)| f.bytes()).sum::<usize>()
    }

    fn to_bytes(&self) -> Vec<u8> {
        match self.expire_ms {
            None => match self.gens.front() {
                Some((_, f)) => f.to_bytes(),
                None => unreachable!("a filter that never expires keeps its one generation"),
            },
            Some(expire) => {
                let mut w = Writer::new();
                w.u64(expire)
                    .u64(self.spec.capacity)
                    .f64(self.spec.fpr)
                    .u8(self.spec.reserve as u8)
                    .u8(self.spec.stacked as u8)
                    .u64(self.newest_gen.unwrap_or(u64::MAX));
                let parts: Vec<(u64, Vec<u8>)> =
                    self.gens.iter().map(|(g, f)| (*g, f.to_bytes())).collect();
                encode_bundle(KIND_FILTER, w.bytes(), &parts)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the bundle

const BUNDLE_MAGIC: &[u8; 4] = b"TMRB";
const BUNDLE_VERSION: u8 = 1;
const KIND_FREQ: u8 = 1;
const KIND_FILTER: u8 = 2;

fn encode_bundle(kind: u8, params: &[u8], parts: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.raw(BUNDLE_MAGIC).u8(BUNDLE_VERSION).u8(kind).raw(params);
    w.u32(parts.len() as u32);
    for (index, bytes) in parts {
        w.u64(*index).u64(bytes.len() as u64).raw(bytes);
    }
    let sum = codec::checksum_of(w.bytes());
    w.u64(sum);
    w.into_bytes()
}

fn invalid(r: &Reader<'_>, field: &'static str, expected: &'static str, got: u64) -> LoadError {
    LoadError::Decode(DecodeError::Invalid {
        field,
        offset: r.offset(),
        expected,
        got,
    })
}

fn decode_bundle(bytes: &[u8]) -> Result<Value, LoadError> {
    let d = LoadError::Decode;
    if bytes.len() < 4 + 2 + 8 {
        return Err(d(DecodeError::Truncated {
            field: "bundle header",
            offset: 0,
            needed: 14,
            available: bytes.len(),
        }));
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let mut sr = Reader::at(sum, body.len());
    let stored = sr.u64("checksum").map_err(d)?;
    let computed = codec::checksum_of(body);
    if stored != computed {
        return Err(d(DecodeError::ChecksumMismatch { stored, computed }));
    }
    let mut r = Reader::new(body);
    r.bytes(4, "magic").map_err(d)?;
    let version = r.u8("bundle version").map_err(d)?;
    if version != BUNDLE_VERSION {
        return Err(d(DecodeError::UnsupportedVersion {
            got: version,
            newest: BUNDLE_VERSION,
        }));
    }
    let kind = r.u8("bundle kind").map_err(d)?;
    match kind {
        KIND_FREQ => {
            let bucket_ms = r.u64("bucket ms").map_err(d)?;
            let n = r.u32("buckets").map_err(d)? as u64;
            let newest = r.u64("newest bucket").map_err(d)?;
            let epsilon = r.f64("epsilon").map_err(d)?;
            let delta = r.f64("delta").map_err(d)?;
            let phi = r.f64("phi").map_err(d)?;
            if bucket_ms == 0 || n == 0 || bucket_ms.saturating_mul(n) > Limits::MAX_WINDOW_MS {
                return Err(invalid(&r, "buckets", "a window of 1..=2^48 ms", n));
            }
            Freq::check(epsilon, delta, phi, n).map_err(|_| {
                LoadError::Limit("frequency parameters a TM.FREQ.CREATE would refuse")
            })?;
            let mut f = Freq::new(epsilon, delta, phi, bucket_ms, n);
            f.newest = (newest != u64::MAX).then_some(newest);
            let parts = r.u32("parts").map_err(d)? as u64;
            if parts > n {
                return Err(invalid(&r, "parts", "at most one per bucket", parts));
            }
            for _ in 0..parts {
                let b = r.u64("bucket").map_err(d)?;
                let len = r.u64("part length").map_err(d)?;
                let part = r.bytes(len, "part").map_err(d)?;
                let counts = ItemCounts::from_bytes(part).map_err(d)?;
                let same =
                    counts.epsilon() == epsilon && counts.delta() == delta && counts.phi() == phi;
                if !same {
                    return Err(invalid(&r, "part", "a bucket of the ring's ε, δ and φ", b));
                }
                let newest = f
                    .newest
                    .ok_or_else(|| invalid(&r, "bucket", "none without a newest bucket", b))?;
                // A slot older than the ring reaches is one no newer bucket has reused yet:
                // the ring holds (and writes) it after a quiet spell.
                if b > newest {
                    return Err(invalid(&r, "bucket", "no newer than the newest", b));
                }
                let slot = &mut f.slots[(b % n) as usize];
                if slot.is_some() {
                    return Err(invalid(&r, "bucket", "one part per bucket", b));
                }
                *slot = Some((b, counts));
            }
            r.finish().map_err(d)?;
            f.recount();
            Ok(Value::Freq(f))
        }
        KIND_FILTER => {
            let expire = r.u64("expire ms").map_err(d)?;
            let capacity = r.u64("capacity").map_err(d)?;
            let fpr = r.f64("fpr").map_err(d)?;
            let reserve = r.u8("reserve").map_err(d)? as u32;
            let stacked = r.bool("stacked").map_err(d)?;
            let newest = r.u64("newest generation").map_err(d)?;
            if expire == 0 || expire > Limits::MAX_WINDOW_MS {
                return Err(invalid(&r, "expire ms", "in 1..=2^48", expire));
            }
            let spec = FilterSpec {
                capacity,
                fpr,
                reserve,
                stacked,
            };
            spec.check().map_err(|_| {
                LoadError::Limit("filter parameters a TM.FILTER.CREATE would refuse")
            })?;
            let mut f = Filter::new(spec, Some(expire)).map_err(|_| {
                LoadError::Limit("filter parameters a TM.FILTER.CREATE would refuse")
            })?;
            f.newest_gen = (newest != u64::MAX).then_some(newest);
            let parts = r.u32("parts").map_err(d)? as u64;
            if parts > Limits::GENERATIONS {
                return Err(invalid(&r, "parts", "at most 5 generations", parts));
            }
            for _ in 0..parts {
                let g = r.u64("generation").map_err(d)?;
                let len = r.u64("part length").map_err(d)?;
                let part = r.bytes(len, "part").map_err(d)?;
                let core = if stacked {
                    FilterCore::Stacked(StackedFilter::from_bytes(part).map_err(d)?)
                } else {
                    FilterCore::Quotient(QuotientFilter::from_bytes(part).map_err(d)?)
                };
                let newest = f
                    .newest_gen
                    .ok_or_else(|| invalid(&r, "generation", "none without a newest", g))?;
                let ordered = f.gens.back().is_none_or(|(prev, _)| *prev < g);
                if g > newest || !ordered {
                    return Err(invalid(
                        &r,
                        "generation",
                        "increasing, at most the newest",
                        g,
                    ));
                }
                f.gens.push_back((g, core));
            }
            r.finish().map_err(d)?;
            Ok(Value::Filter(f))
        }
        other => Err(invalid(
            &r,
            "bundle kind",
            "1 (frequency) or 2 (filter)",
            other as u64,
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Redis HYLL strings

/// Packs 16,384 registers (p = 14, each at most 51, from MurmurHash64A with Redis's seed) as
/// a dense Redis `HYLL` string: `"HYLL"`, encoding 0, three zero bytes, the cached
/// cardinality marked invalid (bit 7 of byte 15), then register `i` in bits `6i..6i+6`
/// counted from the least significant bit of the first register byte. PFCOUNT recomputes
/// and caches the count on first use; PFMERGE and PFADD take the value as Redis's own.
///
/// `None` for a register count other than 16,384 or a register above 51.
pub fn redis_dense(registers: &[u8]) -> Option<Vec<u8>> {
    if registers.len() != tidemark::cardinality::REDIS_REGISTERS
        || registers.iter().any(|&r| r > 51)
    {
        return None;
    }
    let mut out = Vec::with_capacity(tidemark::cardinality::REDIS_DENSE_LEN);
    out.extend_from_slice(b"HYLL");
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x80]);
    let start = out.len();
    out.resize(tidemark::cardinality::REDIS_DENSE_LEN, 0);
    for (i, &r) in registers.iter().enumerate() {
        let bit = 6 * i;
        let (byte, shift) = (start + bit / 8, bit % 8);
        let v = (r as u16) << shift;
        out[byte] |= v as u8;
        if shift > 2 {
            out[byte + 1] |= (v >> 8) as u8;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frequency ring's bytes kept per event equal its buckets' bytes counted, as buckets
    /// fill (names of many lengths, promotion), are reused by newer ones, and come back from
    /// their bytes.
    #[test]
    fn a_frequency_ring_keeps_its_bytes_as_buckets_come_and_go() {
        let mut f = Freq::new(0.05, 0.1, 0.1, 10, 8);
        for i in 0..3_000u64 {
            // A hundred events a bucket (its table promotes), thirty buckets over eight slots.
            let time = i / 100 * 10;
            let item = vec![b'a' + (i % 26) as u8; (i % 300) as usize];
            f.add(time, &item, 1 + i % 3).unwrap();
            if i % 97 == 0 {
                let held = f.held();
                f.recount();
                assert_eq!(held, f.held(), "event {i}");
            }
        }
        let held = f.held();
        let Ok(Value::Freq(back)) = Value::from_bytes(&Value::Freq(f).to_bytes()) else {
            panic!("a frequency ring reads its own bytes back")
        };
        assert_eq!(back.held(), held);
        assert!(held > 0);
    }
}
