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
//! A source of several ordered streams read interleaved (a topic's partitions) bounds the time
//! that closes buckets from outside ([`Engine::bound_time`]): buckets close as if the largest
//! time seen were at most that bound (the minimum over the streams of their latest time, as
//! Flink's watermark), so one stream read ahead of another makes the other's events neither
//! late nor dropped. Without a bound (files, standard input) the largest time seen alone rules.
//!
//! # Windows and alerts
//!
//! When a bucket closes, every key that has something in its metric's window is evaluated:
//! a distinct or frequency metric merges the key's last `window / width` closed bucket sketches; a count
//! metric reads its exponential histogram. An alert rule fires when the chosen end of the
//! estimate exceeds `above + margin·σ` (σ the standard error at the threshold) at
//! `consecutive` successive closes; it fires once per episode, and again only after the key
//! dropped below and crossed again.

use std::collections::{BTreeMap, BTreeSet};

use tidemark::Estimate;

use crate::config::{Config, MetricConfig};
use crate::kinds::{CountWindow, WindowModel};
use crate::EngineError;

mod alert;
mod batch;
mod close;
mod key;
mod key_row;
mod late;
mod open;
mod outputs;
mod parts;
mod ring;
mod running;
mod shape;
mod snapshot;
pub mod spill;
mod table;

pub use alert::AlertPhase;
use alert::{early_due, step_early};
pub(crate) use alert::{step_window, Window};
pub(crate) use key::{FastMap, Key};
use open::OpenBuckets;
pub(crate) use outputs::Ahead;
pub use outputs::{Alert, ClosedBucket, Counters, Outputs, Rollup};
use ring::ClosedBuckets;
use running::Running;
pub use shape::{MetricShape, Summary};
pub use spill::{NoRows, StateRow, StateSource, StateTable};
use table::KeyTable;

enum WindowState {
    /// Closed bucket summaries in the window, oldest first.
    Buckets(ClosedBuckets),
    /// A count metric's histogram (boxed: most keys of other kinds hold a ring).
    Hist(Box<CountWindow>),
}

/// Everything the engine holds for one key of one metric: its open buckets, its live window
/// and its alert streaks, found with one probe per event. (`repr(C)`: what an event touches —
/// the flags, then the newest open bucket — comes first, in the fewest cache lines.)
#[repr(C)]
struct KeyState {
    /// Its open buckets changed since their rows were last written.
    dirty: bool,
    /// Its key row (open starts, streaks, histogram) changed since last written.
    row_dirty: bool,
    /// Its state rows are in the store (written at a checkpoint).
    stored: bool,
    /// A key row of it is in the store.
    has_row: bool,
    /// It was read back from the store after a spill, and has been busy at every spill since
    /// (see [`Engine::spill`]).
    reloaded: bool,
    /// The engine's event clock at the key's first event since its rows were last written:
    /// the least recently active keys spill first.
    touched: u64,
    /// Early alerts: the end of the window the metric's next close evaluates, as this key's
    /// running bound was last built for (0: none), and that bound — the buckets' exact
    /// counts summed, plus one per event since (no event adds more than one item or count).
    /// Past the smallest early limit, [`KeyState::running`] estimates it.
    early_end: u64,
    early_bound: f64,
    /// Open buckets, by increasing start (usually one).
    open: OpenBuckets,
    /// The live window: `None` until one of the key's buckets closed.
    window: Option<WindowState>,
    /// Per rule: successive closes above the limit.
    streak: Box<[u32]>,
    /// A frequency metric's streaks, per heavy item (alerts are per key and item); only items
    /// with a streak running are held.
    items: BTreeMap<Box<[u8]>, Vec<u32>>,
    /// Bytes this key is accounted for in [`MetricState::mem`].
    mem: usize,
    /// The start of the newest bucket the key had an event in: its state leaves every
    /// window a bucket and a window after it.
    last_start: u64,
    /// The expiry last written to the index (0: none).
    exp_written: u64,
    /// The window the next close will evaluate, while an early alert could fire (boxed: most
    /// keys never have one).
    running: Option<Box<Running>>,
}

/// An empty live window over `window` ms for a metric of `shape`: an exponential histogram
/// of its buckets' counts, or a ring of its closed buckets, as its kind keeps it.
fn new_window(shape: &MetricShape, window: u64) -> WindowState {
    match shape.kind().window_model() {
        WindowModel::Histogram { epsilon } => {
            WindowState::Hist(Box::new(CountWindow::new(window, epsilon)))
        }
        WindowModel::Ring => WindowState::Buckets(ClosedBuckets::default()),
    }
}

/// The events of a bucket of a kind whose window is a histogram: its exact answer.
fn bucket_count(s: &Summary) -> u64 {
    s.estimate().value as u64
}

impl KeyState {
    /// A key with nothing yet, for a metric of `rules` alert rules.
    fn new(rules: usize) -> KeyState {
        KeyState {
            open: OpenBuckets::default(),
            window: None,
            streak: vec![0; rules].into_boxed_slice(),
            items: BTreeMap::new(),
            touched: 0,
            early_end: 0,
            early_bound: 0.0,
            mem: spill::KEY_BYTES,
            dirty: true,
            row_dirty: true,
            last_start: 0,
            exp_written: 0,
            stored: false,
            has_row: false,
            reloaded: false,
            running: None,
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
    /// Starts of the buckets some key (in memory or spilled) has open, increasing.
    open_starts: BTreeSet<u64>,
    /// The keys in memory.
    keys: KeyTable,
    counters: Counters,
    /// The rollup's shape, if the metric rolls up.
    rollup_shape: Option<MetricShape>,
    /// Too-late events under `merge` since the outputs were last taken, gathered per
    /// `(rollup?, bucket start, key)`.
    late: FastMap<(bool, u64, Key), Summary>,
    /// The smallest limit of the metric's rules (infinite without rules).
    min_limit: f64,
    /// Spill bookkeeping: what of this metric is in the store rather than in memory.
    spill: spill::Spilled,
    /// Bytes held by the keys in memory: recounted at each checkpoint, grown by each new key
    /// and bucket in between (a bucket growing as items arrive, or a window sliding, is
    /// counted at the next checkpoint).
    mem: usize,
    /// Whether a rule may alert early (keeps a running window per key near a limit).
    early: bool,
    /// The smallest limit of the early rules (infinite without them).
    early_limit: f64,
}

/// A close, as its alert lines name it (the engine's, and the merged alerts').
pub(crate) struct Close {
    pub(crate) metric: usize,
    /// The bucket closing, and the window it ends: `[window_start, end)`.
    pub(crate) start: u64,
    pub(crate) window_start: u64,
    pub(crate) end: u64,
    /// The event time of the record whose time closed it.
    pub(crate) at: u64,
}

impl Close {
    /// An alert line of this close: a key's rule `(index, rule, limit)` with its estimate.
    pub(crate) fn line(
        &self,
        key: &[u8],
        (rule, r, limit): (usize, &crate::rule::AlertRule, f64),
        estimate: Estimate,
        item: Option<&[u8]>,
        phase: AlertPhase,
    ) -> Alert {
        Alert {
            metric: self.metric,
            rule,
            key: key.into(),
            bucket: self.start,
            window_start: self.window_start,
            window_end: self.end,
            estimate,
            item: item.map(Into::into),
            quantile: r.quantile,
            threshold: r.above,
            limit,
            phase,
            at: self.at,
        }
    }
}

/// One event as an early alert reads it.
struct Event<'a> {
    metric: usize,
    key: &'a [u8],
    /// Its time and its bucket's start, ms.
    time: u64,
    start: u64,
    /// Its item's hash, and bytes (frequency metrics only).
    item: u64,
    bytes: &'a [u8],
}

/// The keyed event-time engine for a config's metrics.
pub struct Engine {
    metrics: Vec<MetricState>,
    max_time: Option<u64>,
    /// Events added: the clock of least-recent activity.
    clock: u64,
    /// The clock at the last spill.
    spilled_at: u64,
    out: Outputs,
    /// Events deferred ([`Engine::defer`]), not added yet.
    batch: batch::Batch,
    /// An outside bound on the time that closes buckets ([`Engine::bound_time`]).
    bound: Option<u64>,
    /// Threads a close may split its keys over ([`Engine::set_threads`]).
    close_threads: usize,
}

impl MetricState {
    /// The start before which every bucket is closed once event time reaches `time`: its
    /// watermark (`time` less the allowed lateness), down to a bucket start.
    #[inline]
    fn closes_until(&self, time: u64) -> u64 {
        let wm = time.saturating_sub(self.cfg.allowed_lateness);
        wm - wm % self.cfg.bucket
    }

    fn new(m: &MetricConfig) -> MetricState {
        let shape = MetricShape::of(m);
        let min_limit = shape.min_limit(&m.alerts);
        let early_limit = shape.min_limit(m.alerts.iter().filter(|a| a.early));
        MetricState {
            cfg: m.clone(),
            shape,
            closed_until: None,
            rolled_until: None,
            open_starts: BTreeSet::new(),
            keys: KeyTable::default(),
            rollup_shape: MetricShape::rollup_of(m),
            late: FastMap::default(),
            counters: Counters::default(),
            min_limit,
            spill: spill::Spilled::default(),
            mem: 0,
            early: m.alerts.iter().any(|a| a.early),
            early_limit,
        }
    }
}

impl Engine {
    /// An engine for the config's metrics.
    pub fn new(config: &Config) -> Result<Engine, EngineError> {
        let metrics: Vec<MetricState> = config.metrics.iter().map(MetricState::new).collect();
        let n = metrics.len();
        Ok(Engine {
            metrics,
            max_time: None,
            clock: 0,
            spilled_at: 0,
            out: Outputs::empty(n),
            batch: batch::Batch::default(),
            bound: None,
            close_threads: 1,
        })
    }

    /// Lets a close split its keys over up to `threads` threads (default one) when a metric
    /// holds many (see `KEYS_PER_THREAD` in the close): each key's close touches that key
    /// alone, and the outputs are put back in the keys' order, the same as one thread's.
    pub fn set_threads(&mut self, threads: usize) {
        self.close_threads = threads.max(1);
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

    /// Keys of a metric held in memory (with open buckets or a live window).
    pub fn live_keys(&self, metric: usize) -> usize {
        self.metrics[metric].keys.len()
    }

    /// A metric's watermark: buckets starting before it are closed.
    pub fn closed_until(&self, metric: usize) -> Option<u64> {
        self.metrics[metric].closed_until
    }

    /// The start of a metric's newest open bucket (of any key), if one is open.
    pub fn newest_open(&self, metric: usize) -> Option<u64> {
        self.metrics[metric].open_starts.last().copied()
    }

    /// Whether outputs are waiting to be committed.
    pub fn needs_commit(&self) -> bool {
        self.out.needs_commit() || self.metrics.iter().any(|m| !m.late.is_empty())
    }

    /// Whether the engine may read the store: some key's state is there rather than in
    /// memory (spilled, or not read back since a restore), and is read back at its next
    /// event (through the [`StateSource`] given then).
    pub fn reads_store(&self) -> bool {
        self.metrics.iter().any(|m| m.spill.any())
    }

    /// Whether alerts are waiting to be taken.
    #[inline]
    pub fn has_alerts(&self) -> bool {
        !self.out.alerts.is_empty()
    }

    /// Takes the alerts raised so far (the rest of the outputs stay for the next commit).
    pub fn take_alerts(&mut self) -> Vec<Alert> {
        std::mem::take(&mut self.out.alerts)
    }

    /// Closed buckets and promotions waiting to be committed.
    #[inline]
    pub(crate) fn ahead_count(&self) -> usize {
        self.out.closed.len() + self.out.promote.len()
    }

    /// Takes the closed buckets so far, and the promotions of the starts they closed, ahead
    /// of the rest of the outputs: a closed bucket is final (a late event for it is a merge,
    /// taken with the outputs), so it may be written before the checkpoint it belongs to, in
    /// that checkpoint's transaction.
    /// (The engine still counts the buckets taken in [`Engine::memory`] until the next
    /// [`Engine::take_outputs`], as if it held them: its spills come when one thread's do.)
    pub(crate) fn take_ahead(&mut self) -> Ahead {
        Ahead {
            promote: std::mem::take(&mut self.out.promote),
            closed: std::mem::take(&mut self.out.closed),
        }
    }

    /// Takes the outputs produced so far, with the state rows of every key changed since the
    /// last call: what a checkpoint commits.
    pub fn take_outputs(&mut self) -> Outputs {
        debug_assert!(
            self.batch.is_empty(),
            "outputs taken with events deferred: drain first"
        );
        let n = self.metrics.len();
        for (metric, m) in self.metrics.iter_mut().enumerate() {
            let mut late: Vec<_> = m.late.drain().collect();
            // Deterministic order: the store does not depend on hashing.
            late.sort_unstable_by(|a, b| {
                (a.0 .0, a.0 .1, a.0 .2.as_bytes()).cmp(&(b.0 .0, b.0 .1, b.0 .2.as_bytes()))
            });
            self.out
                .late_merges
                .extend(
                    late.into_iter()
                        .map(|((rollup, start, key), s)| ClosedBucket {
                            metric,
                            key: key.as_bytes().into(),
                            start,
                            bytes: s.to_stored(),
                            rollup,
                        }),
                );
            spill::export(m, metric, &mut self.out, self.close_threads);
        }
        std::mem::replace(&mut self.out, Outputs::empty(n))
    }

    /// Advances event time to `time` (the record's time), closing the buckets the new
    /// watermark passes. Call once per record, before its [`Engine::add`]s.
    #[inline]
    pub fn observe(&mut self, time: u64) {
        debug_assert!(
            self.batch.is_empty() || !self.closes_at(time),
            "a close with events deferred: observe_from drains first"
        );
        if self.max_time.is_some_and(|m| m >= time) {
            return;
        }
        self.max_time = Some(time);
        self.close_to(self.closing_time(time), time);
    }

    /// The time that closes buckets once event time reaches `time`: `time`, or the outside
    /// bound when lower.
    #[inline]
    fn closing_time(&self, time: u64) -> u64 {
        self.bound.map_or(time, |b| b.min(time))
    }

    /// Closes every metric's buckets that `closing` (the time that closes buckets) passes;
    /// `time` is the latest event time (when the closes happen).
    #[inline]
    fn close_to(&mut self, closing: u64, time: u64) {
        for i in 0..self.metrics.len() {
            let m = &self.metrics[i];
            let until = m.closes_until(closing);
            match m.closed_until {
                None => {
                    let m = &mut self.metrics[i];
                    m.closed_until = Some(until);
                    m.rolled_until = m.cfg.rollup.map(|r| until - until % r);
                }
                Some(c) if until > c => self.close_until(i, until, time),
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
    /// metrics, to name heavy items). [`Engine::observe`] must have seen `time` first. For an
    /// engine that has spilled (see [`Engine::spill`]), use [`Engine::add_item_from`].
    #[inline]
    pub fn add_item(&mut self, metric: usize, time: u64, key: &[u8], item: u64, bytes: &[u8]) {
        self.add_resident(metric, time, key, item, bytes, None);
    }

    /// [`Engine::add_item`] for an engine whose keys may be spilled to the store: a key not in
    /// memory is read back from `source` first.
    #[inline]
    pub fn add_item_from(
        &mut self,
        metric: usize,
        time: u64,
        key: &[u8],
        item: u64,
        bytes: &[u8],
        source: &mut dyn StateSource,
    ) -> Result<(), EngineError> {
        self.read_back(metric, key, source)?;
        self.add_resident(metric, time, key, item, bytes, None);
        Ok(())
    }

    /// Reads `key` back from `source` if it was spilled.
    #[inline]
    fn read_back(
        &mut self,
        metric: usize,
        key: &[u8],
        source: &mut dyn StateSource,
    ) -> Result<(), EngineError> {
        let m = &self.metrics[metric];
        if m.spill.any() && !m.keys.contains_key(key) {
            // Read back after a spill: marked (a resume's restore loads its keys unmarked).
            spill::load(&mut self.metrics[metric], metric, key, source, true)?;
        }
        Ok(())
    }

    /// Adds an event of a key in memory; `at` is the position of its state, if known.
    #[inline]
    fn add_resident(
        &mut self,
        metric: usize,
        time: u64,
        key: &[u8],
        item: u64,
        bytes: &[u8],
        at: Option<usize>,
    ) {
        self.clock += 1;
        let clock = self.clock;
        let m = &mut self.metrics[metric];
        let width = m.cfg.bucket;
        let start = time - time % width;
        let closed_until = m.closed_until.unwrap_or(0);
        if start < closed_until {
            Self::add_too_late(m, start, key, item, bytes);
            return;
        }
        m.counters.events += 1;
        if m.open_starts.last().is_some_and(|&s| s > start) {
            m.counters.late += 1;
        }
        // One probe per event: the key's state holds its open buckets.
        let rules = m.cfg.alerts.len();
        let (ks, made) = m.keys.get_or_insert_at(key, at, || KeyState::new(rules));
        let grew = Self::add_to_key(ks, &m.shape, clock, start, item, bytes);
        // A new key's bytes include its first bucket's.
        let added = if made { Some(ks.mem) } else { grew };
        if m.early {
            // The metric's next close: its oldest open bucket's (this event's may be new).
            let next = m.open_starts.first().map_or(start, |&s| s.min(start));
            let event = Event {
                metric,
                key,
                time,
                start,
                item,
                bytes,
            };
            let raised = Self::raise_early(
                &m.cfg,
                &m.shape,
                m.early_limit,
                ks,
                next,
                &event,
                &mut self.out.alerts,
            );
            m.counters.alerts += raised;
        }
        m.mem += added.unwrap_or(0);
        if grew.is_some() {
            m.open_starts.insert(start);
        }
    }

    /// Feeds the key's running window — what the metric's next close (of the bucket at `next`)
    /// will evaluate — with the event just added (building it first if a close dropped it),
    /// and raises the early alerts it is past the limit of; returns how many. An event of a
    /// newer bucket is not in that window: it counts toward a close after.
    ///
    /// Most events end at the bound: the key's buckets in the window cannot pass the smallest
    /// early limit, which costs an addition on the key's state, nothing read elsewhere.
    fn raise_early(
        cfg: &MetricConfig,
        shape: &MetricShape,
        early_limit: f64,
        ks: &mut KeyState,
        next: u64,
        ev: &Event<'_>,
        alerts: &mut Vec<Alert>,
    ) -> u64 {
        let end = next + cfg.bucket;
        if ks.early_end != end {
            // A new window: its bound from the buckets (which hold the event already).
            ks.early_end = end;
            ks.running = None;
            ks.early_bound = running::bound(
                ks.window.as_mut(),
                &ks.open,
                end.saturating_sub(cfg.window),
                end,
            );
        } else if ev.start < end {
            ks.early_bound += 1.0;
        }
        if ks.early_bound <= early_limit || !early_due(&cfg.alerts, &ks.streak) {
            return 0;
        }
        let running: &Running = match &mut ks.running {
            Some(r) if r.end() == end => {
                if ev.start < end {
                    r.add(ev.item, ev.bytes);
                }
                r
            }
            r => {
                // One per event over-counts repeated items: the exact bound before a sketch.
                let from = end.saturating_sub(cfg.window);
                ks.early_bound = running::bound(ks.window.as_mut(), &ks.open, from, end);
                if ks.early_bound <= early_limit {
                    return 0;
                }
                // Built from the buckets, which hold the event already.
                let built = Running::build(shape, ks.window.as_mut(), &ks.open, end, cfg.window);
                r.insert(Box::new(built))
            }
        };
        let est = running.estimate(&ks.open, cfg.window);
        let mut raised = 0;
        // Raised now, for the close to come: the line names that close's bucket and window.
        let close = Close {
            metric: ev.metric,
            start: next,
            window_start: end.saturating_sub(cfg.window),
            end,
            at: ev.time,
        };
        step_early(&cfg.alerts, shape, &mut ks.streak, &est, |rule, limit| {
            raised += 1;
            let rule = (rule, &cfg.alerts[rule], limit);
            alerts.push(close.line(ev.key, rule, est, None, AlertPhase::Early));
        });
        if raised > 0 {
            ks.row_dirty = true;
        }
        raised
    }

    /// Adds an item to a key's bucket at `start`, opening it if need be: returns the bytes a
    /// new bucket added (a bucket's growth as items arrive is counted at the next
    /// checkpoint, not per event).
    #[inline]
    fn add_to_key(
        ks: &mut KeyState,
        shape: &MetricShape,
        clock: u64,
        start: u64,
        item: u64,
        bytes: &[u8],
    ) -> Option<usize> {
        if !ks.dirty {
            ks.touched = clock;
            ks.dirty = true;
        }
        if let Some(s) = ks.open.get_mut(start) {
            s.add(item, bytes);
            return None;
        }
        let mut s = shape.empty(start);
        s.add(item, bytes);
        let added = spill::ENTRY_BYTES + s.heap_bytes();
        ks.mem += added;
        ks.open.insert(start, s);
        ks.row_dirty = true;
        ks.last_start = ks.last_start.max(start);
        Some(added)
    }
}
