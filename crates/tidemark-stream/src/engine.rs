//! The engine: a pure operator. Events in; closed buckets, late merges, expiries and alerts
//! out. No threads, no clock, no I/O: the caller (the [`crate::pipeline`] runner, a test, a
//! future server) feeds it and moves its outputs to a store.
//!
//! # Time
//!
//! Each metric cuts event time into buckets `[s, s + width)`. The watermark is the largest
//! event time seen minus the metric's allowed lateness; a bucket closes when the watermark
//! reaches its end. Several buckets can be open at once (those within the lateness); an event
//! for an open bucket lands in that bucket, however late it arrived. An event for a closed
//! bucket is *too late*: it is dropped and counted (`drop`), or handed out as a late merge
//! for the caller to read-merge-write into the stored bucket (`merge`). It never goes into
//! the current bucket: that would move it into the wrong window.
//!
//! # Windows and alerts
//!
//! When a bucket closes, every key that has something in its metric's window is evaluated:
//! a distinct or frequency metric merges the key's last `window / width` closed bucket sketches; a count
//! metric reads its exponential histogram. An alert rule fires when the chosen end of the
//! estimate exceeds `above + margin·σ` (σ the standard error at the threshold) at
//! `consecutive` successive closes; it fires once per episode, and again only after the key
//! dropped below and crossed again.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use tidemark::codec::{Reader, Writer};
use tidemark::{DecodeError, Estimate};

use crate::config::{AlertOn, AlertRule, Config, Kind, LatePolicy, MetricConfig};
use crate::summary::{BucketSummary, CountBucket, CountWindow, DistinctBucket, FrequencyBucket};
use crate::EngineError;

/// A fast hasher for byte-string keys: xxh3 over each write.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

const INLINE_KEY: usize = 22;

/// A key's bytes, held inline when short (an IP address, a user id) so that finding a key in
/// a bucket's table does not chase a pointer per event. Hashes, compares and orders exactly as
/// its bytes do, so tables are looked up by `&[u8]`.
#[derive(Clone)]
pub(crate) enum Key {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl Key {
    #[inline]
    fn new(b: &[u8]) -> Key {
        if b.len() <= INLINE_KEY {
            let mut bytes = [0u8; INLINE_KEY];
            bytes[..b.len()].copy_from_slice(b);
            Key::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            Key::Heap(b.into())
        }
    }

    #[inline]
    fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..*len as usize],
            Key::Heap(b) => b,
        }
    }
}

impl std::borrow::Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}

/// One key's summary of one bucket, of whichever kind its metric is.
#[derive(Clone, Debug)]
pub enum Summary {
    /// A count metric's bucket.
    Count(CountBucket),
    /// A distinct metric's bucket.
    Distinct(DistinctBucket),
    /// A frequency metric's bucket.
    Frequency(FrequencyBucket),
}

impl Summary {
    fn kind_byte(&self) -> u64 {
        match self {
            Summary::Count(_) => 0,
            Summary::Distinct(_) => 1,
            Summary::Frequency(_) => 2,
        }
    }

    #[inline]
    fn add(&mut self, item: u64, bytes: &[u8]) {
        match self {
            Summary::Count(c) => c.add(item, bytes),
            Summary::Distinct(d) => d.add(item, bytes),
            Summary::Frequency(f) => f.add(item, bytes),
        }
    }

    /// The encoded bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            Summary::Count(c) => c.to_bytes(),
            Summary::Distinct(d) => d.to_bytes(),
            Summary::Frequency(f) => f.to_bytes(),
        }
    }

    /// The bucket's own answer.
    pub fn estimate(&self) -> Estimate {
        match self {
            Summary::Count(c) => c.estimate(),
            Summary::Distinct(d) => d.estimate(),
            Summary::Frequency(f) => f.estimate(),
        }
    }

    /// Merges another summary of the same metric and bucket.
    pub fn merge(&mut self, other: &Summary) -> Result<(), tidemark::MergeError> {
        match (self, other) {
            (Summary::Count(a), Summary::Count(b)) => a.merge(b),
            (Summary::Distinct(a), Summary::Distinct(b)) => a.merge(b),
            (Summary::Frequency(a), Summary::Frequency(b)) => a.merge(b),
            (a, b) => Err(tidemark::MergeError::Incompatible {
                field: "metric kind",
                ours: a.kind_byte(),
                theirs: b.kind_byte(),
            }),
        }
    }
}

/// How a metric builds and reads its summaries.
#[derive(Clone, Debug)]
pub struct MetricShape {
    kind: Kind,
    width: u64,
    /// An empty distinct bucket to clone: building a HyperLogLog from scratch costs more
    /// than copying one.
    empty_distinct: Option<DistinctBucket>,
}

/// Summaries with a ring of closed buckets as their live window (merged at each close).
fn rings(kind: Kind) -> bool {
    matches!(kind, Kind::Distinct { .. } | Kind::Frequency { .. })
}

impl MetricShape {
    /// The shape of a configured metric.
    pub fn of(m: &MetricConfig) -> MetricShape {
        MetricShape {
            kind: m.kind,
            width: m.bucket,
            empty_distinct: match m.kind {
                Kind::Distinct { precision } => Some(DistinctBucket::new(precision)),
                _ => None,
            },
        }
    }

    /// The shape of a metric's rollup buckets (the rollup width), if it has rollups.
    pub fn rollup_of(m: &MetricConfig) -> Option<MetricShape> {
        let w = m.rollup?;
        let mut s = MetricShape::of(m);
        s.width = w;
        Some(s)
    }

    /// The metric and shape a stored name denotes: a metric's name, or its rollup name
    /// (`fanout@1h`).
    pub fn for_name(config: &Config, name: &str) -> Option<(usize, MetricShape)> {
        config.metrics.iter().enumerate().find_map(|(i, m)| {
            if m.name == name {
                Some((i, MetricShape::of(m)))
            } else if m.rollup_name().as_deref() == Some(name) {
                MetricShape::rollup_of(m).map(|s| (i, s))
            } else {
                None
            }
        })
    }

    /// The bucket width, ms.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// Merges `parts` — `(start, bytes)` of buckets of this shape — into one bucket of the
    /// `into` shape starting at `start` (a rollup): counts add, sketches merge.
    pub fn roll(
        &self,
        into: &MetricShape,
        start: u64,
        parts: &[(u64, Vec<u8>)],
    ) -> Result<Summary, String> {
        let mut acc = into.empty(start);
        for (s0, bytes) in parts {
            let s = self.decode(bytes, *s0).map_err(|e| e.to_string())?;
            match (&mut acc, &s) {
                (Summary::Count(a), Summary::Count(b)) => a.add_count(b.count()),
                (a, b) => a.merge(b).map_err(|e| e.to_string())?,
            }
        }
        Ok(acc)
    }

    /// An empty summary for the bucket starting at `start`.
    pub fn empty(&self, start: u64) -> Summary {
        match self.kind {
            Kind::Count { .. } => Summary::Count(CountBucket::new(start, self.width)),
            Kind::Distinct { .. } => Summary::Distinct(
                self.empty_distinct
                    .clone()
                    .expect("a distinct shape holds its empty bucket"),
            ),
            Kind::Frequency {
                epsilon,
                delta,
                phi,
            } => Summary::Frequency(FrequencyBucket::new(epsilon, delta, phi)),
        }
    }

    /// Decodes a stored summary of the bucket starting at `start`.
    pub fn decode(&self, bytes: &[u8], start: u64) -> Result<Summary, DecodeError> {
        match self.kind {
            Kind::Count { .. } => Ok(Summary::Count(CountBucket::from_bytes(
                bytes, start, self.width,
            )?)),
            Kind::Distinct { precision } => Ok(Summary::Distinct(DistinctBucket::from_bytes(
                bytes, precision,
            )?)),
            Kind::Frequency {
                epsilon,
                delta,
                phi,
            } => Ok(Summary::Frequency(FrequencyBucket::from_bytes(
                bytes, epsilon, delta, phi,
            )?)),
        }
    }

    /// What a rule compares its chosen end of the estimate with: the threshold plus the
    /// margin in standard errors at the threshold.
    pub fn limit(&self, rule: &AlertRule) -> f64 {
        rule.above + rule.margin * self.sigma_at(rule.above)
    }

    /// The standard error of an estimate near `x` (0 for exact and guaranteed answers, and for
    /// Count-Min, whose error is one-sided and bounded, not normal: alert on `low` or `high`).
    pub fn sigma_at(&self, x: f64) -> f64 {
        match self.kind {
            Kind::Distinct { precision } => x.abs() * 1.04 / ((1u64 << precision) as f64).sqrt(),
            _ => 0.0,
        }
    }
}

/// A bucket whose watermark has passed: its bytes go to the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClosedBucket {
    /// Index of the metric in the config.
    pub metric: usize,
    /// The key's bytes.
    pub key: Box<[u8]>,
    /// The bucket's start, ms.
    pub start: u64,
    /// The summary's bytes.
    pub bytes: Vec<u8>,
    /// Whether this is a bucket of the metric's rollup (a late merge into a period already
    /// rolled up), stored under the rollup name.
    pub rollup: bool,
}

/// A period whose buckets are all closed: merge them into rollup buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rollup {
    /// Index of the metric.
    pub metric: usize,
    /// Start of the first period to roll up, ms.
    pub from: u64,
    /// End of the last one, ms (a multiple of the rollup width).
    pub to: u64,
}

/// An alert: a key's window estimate crossed a rule's limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    /// Index of the metric.
    pub metric: usize,
    /// Index of the rule within the metric.
    pub rule: usize,
    /// The key's bytes.
    pub key: Box<[u8]>,
    /// Start of the bucket whose close raised it, ms.
    pub bucket: u64,
    /// The window's end (the bucket's end), ms.
    pub window_end: u64,
    /// The window estimate.
    pub estimate: Estimate,
    /// For a frequency metric, the item whose window count crossed (`None`: the bound of the
    /// items its sketch does not name crossed, or another kind of metric).
    pub item: Option<Box<[u8]>>,
    /// The rule's threshold.
    pub threshold: f64,
    /// The threshold plus the margin: what the estimate was compared with.
    pub limit: f64,
}

/// What the engine has produced since the caller last took its outputs.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    /// Closed buckets, to write.
    pub closed: Vec<ClosedBucket>,
    /// Too-late events under the `merge` policy: the summary of the event alone, to merge into
    /// the stored bucket (read-merge-write).
    pub late_merges: Vec<ClosedBucket>,
    /// Per metric, buckets starting before this are past retention and may be deleted.
    pub expire_before: Vec<Option<u64>>,
    /// Periods to roll up (after this batch's buckets are written).
    pub rollups: Vec<Rollup>,
    /// Per metric, rollup buckets starting before this may be deleted.
    pub expire_rollups_before: Vec<Option<u64>>,
    /// Alerts raised.
    pub alerts: Vec<Alert>,
}

impl Outputs {
    /// Whether there is anything the store must commit.
    pub fn needs_commit(&self) -> bool {
        !self.closed.is_empty() || !self.late_merges.is_empty() || !self.rollups.is_empty()
    }
}

/// Counters the engine keeps per metric (persisted with its state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Events added.
    pub events: u64,
    /// Events that arrived after a newer bucket had opened but within the lateness: landed
    /// in their own (older, still open) bucket.
    pub late: u64,
    /// Too-late events dropped (`drop`).
    pub dropped: u64,
    /// Too-late events merged into their stored bucket (`merge`).
    pub merged: u64,
    /// Buckets closed.
    pub buckets: u64,
    /// Alerts raised.
    pub alerts: u64,
}

struct OpenBucket {
    start: u64,
    /// Key → index into `summaries`: small table entries, summaries packed in one vector
    /// (one allocation per bucket instead of one per key).
    keys: FastMap<Key, u32>,
    summaries: Vec<Summary>,
}

enum WindowState {
    /// Closed bucket summaries in the window, oldest first.
    Ring(VecDeque<(u64, Summary)>),
    /// A count metric's histogram.
    Hist(CountWindow),
}

struct KeyWindow {
    state: WindowState,
    /// Per rule: successive closes above the limit.
    streak: Vec<u32>,
    /// A frequency metric's streaks, per heavy item (alerts are per key and item); only items
    /// with a streak running are held.
    items: BTreeMap<Box<[u8]>, Vec<u32>>,
}

/// Advances one subject's streaks (one per rule) with its window estimate, calling `fire`
/// with the rule and its limit when a streak reaches the rule's `consecutive`.
fn step(
    rules: &[AlertRule],
    shape: &MetricShape,
    streak: &mut [u32],
    est: &Estimate,
    mut fire: impl FnMut(usize, f64),
) {
    for (ri, rule) in rules.iter().enumerate() {
        let limit = shape.limit(rule);
        let x = match rule.on {
            AlertOn::Value => est.value,
            AlertOn::High => est.high,
            AlertOn::Low => est.low,
        };
        if x > limit {
            streak[ri] = streak[ri].saturating_add(1);
            if streak[ri] == rule.consecutive {
                fire(ri, limit);
            }
        } else {
            streak[ri] = 0;
        }
    }
}

struct MetricState {
    cfg: MetricConfig,
    shape: MetricShape,
    /// Buckets with start < closed_until are closed; `None` before the first event.
    closed_until: Option<u64>,
    /// Rollup periods ending at or before this are rolled up.
    rolled_until: Option<u64>,
    open: VecDeque<OpenBucket>,
    windows: FastMap<Key, KeyWindow>,
    counters: Counters,
}

/// The keyed event-time engine for a config's metrics.
pub struct Engine {
    metrics: Vec<MetricState>,
    max_time: Option<u64>,
    out: Outputs,
}

/// Supplies stored buckets of metric `m` with `from ≤ start < to` to a visitor:
/// `(m, from, to, visit)`.
pub type ScanFn<'a> = dyn FnMut(usize, u64, u64, &mut crate::store::Visit<'_>) + 'a;

/// 3 adds the per-item alert streaks of frequency metrics; 2 (without them, written before
/// frequency metrics ran) is still read.
const SNAPSHOT_VERSION: u8 = 3;

impl Engine {
    /// An engine for the config's metrics.
    pub fn new(config: &Config) -> Result<Engine, EngineError> {
        let mut metrics = Vec::new();
        for m in &config.metrics {
            metrics.push(MetricState {
                cfg: m.clone(),
                shape: MetricShape::of(m),
                closed_until: None,
                rolled_until: None,
                open: VecDeque::new(),
                windows: FastMap::default(),
                counters: Counters::default(),
            });
        }
        let n = metrics.len();
        Ok(Engine {
            metrics,
            max_time: None,
            out: Outputs {
                expire_before: vec![None; n],
                expire_rollups_before: vec![None; n],
                ..Outputs::default()
            },
        })
    }

    /// The largest event time seen, ms.
    pub fn max_time(&self) -> Option<u64> {
        self.max_time
    }

    /// A metric's counters.
    pub fn counters(&self, metric: usize) -> Counters {
        self.metrics[metric].counters
    }

    /// A metric's config.
    pub fn metric(&self, metric: usize) -> &MetricConfig {
        &self.metrics[metric].cfg
    }

    /// A metric's shape (to decode its stored buckets).
    pub fn shape(&self, metric: usize) -> &MetricShape {
        &self.metrics[metric].shape
    }

    /// Number of metrics.
    pub fn metric_count(&self) -> usize {
        self.metrics.len()
    }

    /// Keys with a live window in a metric.
    pub fn live_keys(&self, metric: usize) -> usize {
        self.metrics[metric].windows.len()
    }

    /// A metric's watermark: buckets starting before it are closed.
    pub fn closed_until(&self, metric: usize) -> Option<u64> {
        self.metrics[metric].closed_until
    }

    /// Whether outputs are waiting to be committed.
    pub fn needs_commit(&self) -> bool {
        self.out.needs_commit()
    }

    /// Takes the outputs produced so far.
    pub fn take_outputs(&mut self) -> Outputs {
        let n = self.metrics.len();
        std::mem::replace(
            &mut self.out,
            Outputs {
                expire_before: vec![None; n],
                expire_rollups_before: vec![None; n],
                ..Outputs::default()
            },
        )
    }

    /// Advances event time to `time` (the record's time), closing the buckets the new
    /// watermark passes. Call once per record, before its [`Engine::add`]s.
    #[inline]
    pub fn observe(&mut self, time: u64) {
        if self.max_time.is_some_and(|m| m >= time) {
            return;
        }
        self.max_time = Some(time);
        for i in 0..self.metrics.len() {
            let m = &self.metrics[i];
            let wm = time.saturating_sub(m.cfg.allowed_lateness);
            let until = wm - wm % m.cfg.bucket;
            match m.closed_until {
                None => {
                    let m = &mut self.metrics[i];
                    m.closed_until = Some(until);
                    m.rolled_until = m.cfg.rollup.map(|r| until - until % r);
                }
                Some(c) if until > c => self.close_until(i, until),
                _ => {}
            }
        }
    }

    /// Adds one item of `key` at event `time` to metric `metric`, by its hash only: for count
    /// and distinct metrics (a frequency metric would keep its heavy items nameless; use
    /// [`Engine::add_item`]). [`Engine::observe`] must have seen `time` (or a later time) first.
    #[inline]
    pub fn add(&mut self, metric: usize, time: u64, key: &[u8], item: u64) {
        self.add_item(metric, time, key, item, &[]);
    }

    /// Adds one item of `key` at event `time` to metric `metric`: `item` is the hash of
    /// `bytes` by the default [`tidemark::ItemHasher`] (the bytes are kept only by frequency
    /// metrics, to name heavy items). [`Engine::observe`] must have seen `time` first.
    #[inline]
    pub fn add_item(&mut self, metric: usize, time: u64, key: &[u8], item: u64, bytes: &[u8]) {
        let m = &mut self.metrics[metric];
        let width = m.cfg.bucket;
        let start = time - time % width;
        let closed_until = m.closed_until.unwrap_or(0);
        if start < closed_until {
            match m.cfg.late {
                LatePolicy::Drop => m.counters.dropped += 1,
                LatePolicy::Merge => {
                    m.counters.merged += 1;
                    let mut s = m.shape.empty(start);
                    s.add(item, bytes);
                    // A bucket still in the key's live ring gets the item too, so later
                    // windows see it; the store gets it by read-merge-write.
                    if let Some(KeyWindow {
                        state: WindowState::Ring(ring),
                        ..
                    }) = m.windows.get_mut(key)
                    {
                        if let Some((_, b)) = ring.iter_mut().find(|(s0, _)| *s0 == start) {
                            let _ = b.merge(&s);
                        }
                    }
                    self.out.late_merges.push(ClosedBucket {
                        metric,
                        key: key.into(),
                        start,
                        bytes: s.to_bytes(),
                        rollup: false,
                    });
                    // A period already rolled up gets the event too.
                    if let (Some(r), Some(rolled)) = (m.cfg.rollup, m.rolled_until) {
                        let period = start - start % r;
                        if period < rolled {
                            let shape = MetricShape::rollup_of(&m.cfg).expect("a rollup");
                            let mut p = shape.empty(period);
                            p.add(item, bytes);
                            self.out.late_merges.push(ClosedBucket {
                                metric,
                                key: key.into(),
                                start: period,
                                bytes: p.to_bytes(),
                                rollup: true,
                            });
                        }
                    }
                }
            }
            return;
        }
        m.counters.events += 1;
        // Most events belong to the newest bucket: search from the back.
        let mut idx = m.open.len();
        while idx > 0 && m.open[idx - 1].start > start {
            idx -= 1;
        }
        if idx < m.open.len() {
            m.counters.late += 1;
        }
        if idx == 0 || m.open[idx - 1].start != start {
            m.open.insert(
                idx,
                OpenBucket {
                    start,
                    keys: FastMap::default(),
                    summaries: Vec::new(),
                },
            );
            idx += 1;
        }
        let bucket = &mut m.open[idx - 1];
        match bucket.keys.get(key) {
            Some(&i) => bucket.summaries[i as usize].add(item, bytes),
            None => {
                let mut s = m.shape.empty(start);
                s.add(item, bytes);
                let i =
                    u32::try_from(bucket.summaries.len()).expect("fewer than 2^32 keys a bucket");
                bucket.summaries.push(s);
                bucket.keys.insert(Key::new(key), i);
            }
        }
    }

    /// Closes every open bucket of every metric: the input has ended for good.
    pub fn flush(&mut self) {
        for i in 0..self.metrics.len() {
            if let Some(last) = self.metrics[i].open.back() {
                let until = last.start + self.metrics[i].cfg.bucket;
                self.close_until(i, until);
            }
        }
    }

    fn close_until(&mut self, i: usize, until: u64) {
        let m = &mut self.metrics[i];
        m.closed_until = Some(until.max(m.closed_until.unwrap_or(0)));
        while m.open.front().is_some_and(|b| b.start < until) {
            let b = m.open.pop_front().expect("checked non-empty");
            Self::close_bucket(m, i, b, &mut self.out);
        }
        if let (Some(r), Some(rolled), Some(closed)) =
            (m.cfg.rollup, m.rolled_until, m.closed_until)
        {
            let to = closed - closed % r;
            if to > rolled {
                self.out.rollups.push(Rollup {
                    metric: i,
                    from: rolled,
                    to,
                });
                m.rolled_until = Some(to);
                self.out.expire_rollups_before[i] = Some(to.saturating_sub(m.cfg.rollup_retention));
            }
        }
    }

    fn close_bucket(m: &mut MetricState, i: usize, b: OpenBucket, out: &mut Outputs) {
        let width = m.cfg.bucket;
        let end = b.start + width;
        m.counters.buckets += b.keys.len() as u64;
        // Deterministic order: the store and the alert stream do not depend on hashing.
        let mut keys: Vec<(Key, u32)> = b.keys.into_iter().collect();
        keys.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut summaries: Vec<Option<Summary>> = b.summaries.into_iter().map(Some).collect();
        for (key, si) in keys {
            let s = summaries[si as usize]
                .take()
                .expect("each summary belongs to one key");
            out.closed.push(ClosedBucket {
                metric: i,
                key: key.as_bytes().into(),
                start: b.start,
                bytes: s.to_bytes(),
                rollup: false,
            });
            let rules = m.cfg.alerts.len();
            let w = m.windows.entry(key).or_insert_with(|| KeyWindow {
                state: match m.cfg.kind {
                    Kind::Count { epsilon } => {
                        WindowState::Hist(CountWindow::new(m.cfg.window, epsilon))
                    }
                    _ => WindowState::Ring(VecDeque::new()),
                },
                streak: vec![0; rules],
                items: BTreeMap::new(),
            });
            match (&mut w.state, s) {
                (WindowState::Hist(h), Summary::Count(c)) => h.add_bucket(end, c.count()),
                (WindowState::Ring(r), s) => r.push_back((b.start, s)),
                _ => unreachable!("a metric's summaries all have its kind"),
            }
        }
        // Slide every live window to this bucket's end, evaluate, and forget empty ones.
        let window = m.cfg.window;
        let first_kept = end.saturating_sub(window);
        let mut evaluated: Vec<(&Key, &mut KeyWindow)> = m.windows.iter_mut().collect();
        evaluated.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let mut empty = Vec::new();
        let min_limit = m
            .cfg
            .alerts
            .iter()
            .map(|a| m.shape.limit(a))
            .fold(f64::INFINITY, f64::min);
        for (key, w) in evaluated {
            let (est, window) = match &mut w.state {
                WindowState::Hist(h) => {
                    h.advance(end);
                    if h.is_empty() {
                        empty.push(key.clone());
                        continue;
                    }
                    (h.estimate(), None)
                }
                WindowState::Ring(r) => {
                    while r.front().is_some_and(|(s, _)| *s < first_kept) {
                        r.pop_front();
                    }
                    if r.is_empty() {
                        empty.push(key.clone());
                        continue;
                    }
                    if m.cfg.alerts.is_empty() {
                        continue;
                    }
                    // A window of exact buckets whose counts sum to no more than every
                    // rule's limit cannot fire (the union is exact and at most the sum):
                    // reset the streaks without merging. Most keys are small.
                    let mut sum = 0.0;
                    let mut all_exact = true;
                    for (_, s) in r.iter() {
                        let e = s.estimate();
                        all_exact &= e.low == e.high;
                        sum += e.high;
                    }
                    if all_exact && sum <= min_limit {
                        w.streak.iter_mut().for_each(|s| *s = 0);
                        w.items.clear();
                        continue;
                    }
                    let mut acc = r[0].1.clone();
                    for (_, s) in r.iter().skip(1) {
                        acc.merge(s).expect("one metric's buckets share a shape");
                    }
                    (acc.estimate(), Some(acc))
                }
            };
            let rules = &m.cfg.alerts;
            let counters = &mut m.counters;
            let mut alert = |rule: usize, limit: f64, estimate: Estimate, item: Option<&[u8]>| {
                counters.alerts += 1;
                out.alerts.push(Alert {
                    metric: i,
                    rule,
                    key: key.as_bytes().into(),
                    bucket: b.start,
                    window_end: end,
                    estimate,
                    item: item.map(Into::into),
                    threshold: rules[rule].above,
                    limit,
                });
            };
            match &window {
                // Each item the window names is its own subject: a second source hammering a
                // host while the first still is raises its own alert.
                Some(Summary::Frequency(f)) => {
                    let counts = f.counts();
                    let mut running = BTreeMap::new();
                    for (item, e) in counts.named() {
                        // Below every limit: its streaks are reset by leaving it out.
                        if e.high <= min_limit {
                            continue;
                        }
                        let mut streak = w
                            .items
                            .remove(item.as_slice())
                            .unwrap_or_else(|| vec![0; rules.len()]);
                        step(rules, &m.shape, &mut streak, &e, |ri, limit| {
                            alert(ri, limit, e, Some(&item))
                        });
                        if streak.iter().any(|&s| s > 0) {
                            running.insert(item.into_boxed_slice(), streak);
                        }
                    }
                    w.items = running;
                    // Items a sketch does not name each count below φN: one more subject,
                    // the key's unnamed items, `[0, φN]`. Only a rule on `high` can fire on
                    // it (no item named): raise φ·N above the threshold, or lower φ.
                    let unnamed = counts.unnamed_bound().map_or(Estimate::exact(0.0), |b| {
                        Estimate::guaranteed(0.0, 0.0, b, tidemark::Method::CountMinMin)
                    });
                    step(rules, &m.shape, &mut w.streak, &unnamed, |ri, limit| {
                        alert(ri, limit, unnamed, None)
                    });
                }
                _ => step(rules, &m.shape, &mut w.streak, &est, |ri, limit| {
                    alert(ri, limit, est, None)
                }),
            }
        }
        for k in empty {
            m.windows.remove(&k);
        }
        out.expire_before[i] = Some(end.saturating_sub(m.cfg.retention));
    }

    /// The engine's state that is not in the store: event time, counters, open buckets,
    /// count histograms and alert streaks. With the store's closed buckets (for the rings of
    /// distinct and frequency metrics, see [`Engine::restore`]) it resumes exactly where it stopped.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(SNAPSHOT_VERSION);
        match self.max_time {
            Some(t) => w.u8(1).u64(t),
            None => w.u8(0).u64(0),
        };
        w.u64(self.metrics.len() as u64);
        for m in &self.metrics {
            let c = &m.counters;
            for v in [c.events, c.late, c.dropped, c.merged, c.buckets, c.alerts] {
                w.u64(v);
            }
            for t in [m.closed_until, m.rolled_until] {
                match t {
                    Some(t) => w.u8(1).u64(t),
                    None => w.u8(0).u64(0),
                };
            }
            w.u64(m.open.len() as u64);
            for b in &m.open {
                w.u64(b.start).u64(b.keys.len() as u64);
                let mut keys: Vec<_> = b.keys.iter().collect();
                keys.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                for (k, &i) in keys {
                    let bytes = b.summaries[i as usize].to_bytes();
                    let k = k.as_bytes();
                    w.u64(k.len() as u64).raw(k);
                    w.u64(bytes.len() as u64).raw(&bytes);
                }
            }
            let mut keys: Vec<_> = m.windows.iter().collect();
            keys.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            w.u64(keys.len() as u64);
            for (k, kw) in keys {
                let k = k.as_bytes();
                w.u64(k.len() as u64).raw(k);
                for &s in &kw.streak {
                    w.u32(s);
                }
                match &kw.state {
                    WindowState::Hist(h) => {
                        let bytes = h.to_bytes();
                        w.u64(bytes.len() as u64).raw(&bytes);
                    }
                    WindowState::Ring(_) => {
                        w.u64(0);
                    }
                }
                w.u64(kw.items.len() as u64);
                for (item, streak) in &kw.items {
                    w.u64(item.len() as u64).raw(item);
                    for &s in streak {
                        w.u32(s);
                    }
                }
            }
        }
        w.bytes().to_vec()
    }

    /// An engine resumed from [`Engine::snapshot`] bytes; `closed` supplies the stored
    /// buckets of each distinct or frequency metric from `closed_until − window` on, to rebuild the
    /// rings.
    pub fn restore(
        config: &Config,
        snapshot: &[u8],
        closed: &mut ScanFn<'_>,
    ) -> Result<Engine, EngineError> {
        let mut e = Engine::new(config)?;
        let mut r = Reader::new(snapshot);
        let bad = EngineError::Snapshot;
        let off = r.offset();
        let v = r.u8("snapshot version").map_err(bad)?;
        if !(2..=SNAPSHOT_VERSION).contains(&v) {
            return Err(bad(Reader::invalid(
                "snapshot version",
                off,
                "2 or 3",
                v as u64,
            )));
        }
        let opt = |r: &mut Reader<'_>| -> Result<Option<u64>, DecodeError> {
            let off = r.offset();
            let flag = r.u8("flag")?;
            let t = r.u64("time")?;
            match flag {
                0 => Ok(None),
                1 => Ok(Some(t)),
                f => Err(Reader::invalid("flag", off, "0 or 1", f as u64)),
            }
        };
        let bytes_field = |r: &mut Reader<'_>, f: &'static str| -> Result<Vec<u8>, DecodeError> {
            let n = r.count(f, 1, u64::MAX)?;
            Ok(r.bytes(n as u64, f)?.to_vec())
        };
        e.max_time = opt(&mut r).map_err(bad)?;
        let off = r.offset();
        let n = r.u64("metrics").map_err(bad)?;
        if n != e.metrics.len() as u64 {
            return Err(bad(Reader::invalid(
                "metrics",
                off,
                "the config's number of metrics",
                n,
            )));
        }
        for (i, m) in e.metrics.iter_mut().enumerate() {
            let c = &mut m.counters;
            for v in [
                &mut c.events,
                &mut c.late,
                &mut c.dropped,
                &mut c.merged,
                &mut c.buckets,
                &mut c.alerts,
            ] {
                *v = r.u64("counter").map_err(bad)?;
            }
            let off = r.offset();
            m.closed_until = opt(&mut r).map_err(bad)?;
            let roff = r.offset();
            m.rolled_until = opt(&mut r).map_err(bad)?;
            if m.rolled_until.is_some() != (m.cfg.rollup.is_some() && m.closed_until.is_some())
                || m.rolled_until
                    .zip(m.cfg.rollup)
                    .is_some_and(|(t, w)| t % w != 0 || Some(t) > m.closed_until)
            {
                return Err(bad(Reader::invalid(
                    "rolled until",
                    roff,
                    "a rollup boundary not after closed-until, present iff the metric rolls up",
                    m.rolled_until.unwrap_or(0),
                )));
            }
            let width = m.cfg.bucket;
            // Every time the engine adds to must stay far from u64::MAX: ends are start + width.
            let aligned = |t: u64| t % width == 0 && t <= u64::MAX / 2;
            if m.closed_until.is_some_and(|c| !aligned(c)) {
                return Err(bad(Reader::invalid(
                    "closed until",
                    off,
                    "a multiple of the bucket width",
                    m.closed_until.unwrap_or(0),
                )));
            }
            let buckets = r.count("open buckets", 16, u64::MAX).map_err(bad)?;
            let mut previous: Option<u64> = None;
            for _ in 0..buckets {
                let off = r.offset();
                let start = r.u64("bucket start").map_err(bad)?;
                if !aligned(start)
                    || previous.is_some_and(|p| start <= p)
                    || m.closed_until.is_none_or(|c| start < c)
                {
                    return Err(bad(Reader::invalid(
                        "bucket start",
                        off,
                        "aligned, increasing, and not before closed-until",
                        start,
                    )));
                }
                previous = Some(start);
                let keys = r.count("bucket keys", 16, u64::MAX).map_err(bad)?;
                let mut map = FastMap::default();
                let mut summaries = Vec::new();
                for _ in 0..keys {
                    let k = bytes_field(&mut r, "key").map_err(bad)?;
                    let s = bytes_field(&mut r, "summary").map_err(bad)?;
                    let s = m.shape.decode(&s, start).map_err(bad)?;
                    let i = summaries.len() as u32;
                    if map.insert(Key::new(&k), i).is_some() {
                        return Err(bad(DecodeError::Invalid {
                            field: "bucket keys",
                            offset: r.offset(),
                            expected: "each key once a bucket",
                            got: k.len() as u64,
                        }));
                    }
                    summaries.push(s);
                }
                m.open.push_back(OpenBucket {
                    start,
                    keys: map,
                    summaries,
                });
            }
            let keys = r.count("windows", 8, u64::MAX).map_err(bad)?;
            let rules = m.cfg.alerts.len();
            for _ in 0..keys {
                let k = bytes_field(&mut r, "key").map_err(bad)?;
                let mut streak = Vec::with_capacity(rules);
                for _ in 0..rules {
                    streak.push(r.u32("streak").map_err(bad)?);
                }
                let h = bytes_field(&mut r, "histogram").map_err(bad)?;
                let state = match m.cfg.kind {
                    Kind::Count { epsilon } => {
                        let w = CountWindow::from_bytes(&h).map_err(bad)?;
                        if !w.matches(m.cfg.window, epsilon) {
                            return Err(bad(Reader::invalid(
                                "histogram",
                                r.offset(),
                                "the metric's window and ε",
                                m.cfg.window,
                            )));
                        }
                        WindowState::Hist(w)
                    }
                    _ => WindowState::Ring(VecDeque::new()),
                };
                let mut items = BTreeMap::new();
                if v >= 3 {
                    let elem = 8 + 4 * rules as u64;
                    let n = r.count("item streaks", elem, u64::MAX).map_err(bad)?;
                    for _ in 0..n {
                        let off = r.offset();
                        let item = bytes_field(&mut r, "item").map_err(bad)?;
                        let mut streak = Vec::with_capacity(rules);
                        for _ in 0..rules {
                            streak.push(r.u32("item streak").map_err(bad)?);
                        }
                        let item = item.into_boxed_slice();
                        if items
                            .last_key_value()
                            .is_some_and(|(last, _)| *last >= item)
                        {
                            return Err(bad(Reader::invalid(
                                "item streaks",
                                off,
                                "items in increasing byte order, each once",
                                item.len() as u64,
                            )));
                        }
                        items.insert(item, streak);
                    }
                    if n > 0 && !matches!(m.cfg.kind, Kind::Frequency { .. }) {
                        return Err(bad(Reader::invalid(
                            "item streaks",
                            r.offset(),
                            "none for a metric that is not a frequency metric",
                            n as u64,
                        )));
                    }
                }
                m.windows.insert(
                    Key::new(&k),
                    KeyWindow {
                        state,
                        streak,
                        items,
                    },
                );
            }
            if let (true, Some(until)) = (rings(m.cfg.kind), m.closed_until) {
                let from = until.saturating_sub(m.cfg.window);
                let shape = m.shape.clone();
                let rules = m.cfg.alerts.len();
                let mut err = None;
                let windows = &mut m.windows;
                closed(
                    i,
                    from,
                    until,
                    &mut |key, start, bytes| match shape.decode(bytes, start) {
                        Ok(s) => {
                            let w = windows.entry(Key::new(key)).or_insert_with(|| KeyWindow {
                                state: WindowState::Ring(VecDeque::new()),
                                streak: vec![0; rules],
                                items: BTreeMap::new(),
                            });
                            if let WindowState::Ring(r) = &mut w.state {
                                r.push_back((start, s));
                            }
                        }
                        Err(e) => err = Some(e),
                    },
                );
                if let Some(e) = err {
                    return Err(bad(e));
                }
                for w in m.windows.values_mut() {
                    if let WindowState::Ring(r) = &mut w.state {
                        r.make_contiguous().sort_by_key(|(s, _)| *s);
                    }
                }
            }
        }
        r.finish().map_err(bad)?;
        Ok(e)
    }
}
