//! State rows: each key's open state in the store, written incrementally, and the memory
//! budget that spills quiet keys to them.
//!
//! # Rows
//!
//! At each checkpoint the engine writes, for every key whose state changed since the last
//! one (and only those), its *key row* and its *open rows*:
//!
//! - `~key/<metric>` at `(0, key)`: the key's expiry (first 8 bytes, little-endian, so the
//!   store can sweep rows without decoding them), the starts of its open buckets, its alert
//!   streaks and, for a count metric, its window's exponential histogram; a checksum last.
//! - `~open/<metric>` at `(start, key)`: one open bucket's summary (a checksummed envelope),
//!   laid out like the metric's own buckets, so that closing a bucket of spilled keys is a
//!   move of one start's rows into the metric (the store's *promotion*).
//! - `~exp/<metric>` at `(expiry, key)`: an index the store sweeps at each checkpoint,
//!   deleting key rows whose state has left every window.
//!
//! A distinct or frequency key's ring of closed buckets is not written: it is the metric's
//! own stored buckets, read back.
//!
//! # Spilling
//!
//! Memory held by the keys in memory is accounted per key ([`key_bytes`]). Right after a
//! checkpoint every key is clean — its rows equal its memory — so dropping it loses nothing.
//! [`Engine::spill`] drops the least recently active *quiet* keys: those whose streaks are
//! all zero and whose window, with their open buckets, is bounded by no more than the
//! smallest rule limit (exact counts add up; see [`Summary::upper`]; a distinct key past its
//! exact range is quiet when its merged buckets estimate under half the limit). Such a key cannot
//! raise an alert or change a streak before its next event, so leaving it out of the closes
//! in between changes nothing; its open buckets close by promotion; on its next event it is
//! read back ([`Engine::add_item_from`]) with its ring rebuilt from the store and its
//! histogram given the buckets that closed meanwhile. Answers equal an unbounded run's.
//!
//! ```
//! use tidemark_stream::config::Config;
//! use tidemark_stream::engine::Engine;
//!
//! let config = Config::from_toml(
//!     "[input]\nformat = \"csv\"\ntime_field = \"t\"\ntime_format = \"epoch_ms\"\n\
//!      [[metric]]\nname = \"n\"\nkind = \"count\"\nkey = [\"k\"]\nbucket = \"1s\"\n\
//!      window = \"1s\"\nretention = \"1h\"\n",
//! )
//! .unwrap();
//! let mut e = Engine::new(&config).unwrap();
//! e.observe(5);
//! e.add(0, 5, b"a", 0);
//! assert!(e.memory() > 0);
//! // Its rows are written at a checkpoint; then it may leave memory.
//! let out = e.take_outputs();
//! assert!(!out.state.is_empty());
//! assert_eq!(e.spill(0).unwrap(), 1);
//! assert_eq!(e.live_keys(0), 0);
//! ```

use std::collections::{BTreeMap, BTreeSet};

use super::key::Key;
use super::key_row::{decode_key_row, key_row};
use super::parts::{self, KEYS_PER_THREAD};
use super::ring::ClosedBuckets;
use super::{Engine, KeyState, KeyTable, MetricState, Outputs, Summary, WindowState};
use crate::kinds::CountWindow;
use crate::kinds::WindowModel;
use crate::store::StoreError;
use crate::EngineError;

/// Bytes a key costs in memory before its summaries: its table entry (key, state, the
/// table's control bytes and spare capacity) and the state's small allocations.
pub(super) const KEY_BYTES: usize = KeyTable::KEY_BYTES + 2 * 16;
/// Bytes an open bucket or ring entry costs before its summary's heap.
pub(super) use super::ring::ENTRY_BYTES;

/// Which of a metric's tables a state row lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateTable {
    /// A key's row: expiry, open starts, streaks, histogram.
    Key,
    /// One open bucket of one key.
    Open,
    /// The expiry index: `(expiry, key)`, empty values.
    Expiry,
    /// The metric's own closed buckets (read only, to rebuild rings).
    Closed,
}

impl StateTable {
    /// The stored table name for metric `name` (`~` starts no metric name).
    pub fn name(self, metric: &str) -> String {
        match self {
            StateTable::Key => format!("~key/{metric}"),
            StateTable::Open => format!("~open/{metric}"),
            StateTable::Expiry => format!("~exp/{metric}"),
            StateTable::Closed => metric.to_string(),
        }
    }
}

/// One state row to write (`Some`) or delete (`None`) at a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateRow {
    /// Index of the metric.
    pub metric: usize,
    /// Its table.
    pub table: StateTable,
    /// The row's start (0 for key rows).
    pub start: u64,
    /// The key's bytes.
    pub key: Box<[u8]>,
    /// The value; `None` deletes the row.
    pub bytes: Option<Vec<u8>>,
}

impl StateRow {
    fn new(
        metric: usize,
        table: StateTable,
        start: u64,
        key: &Key,
        bytes: Option<Vec<u8>>,
    ) -> Self {
        StateRow {
            metric,
            table,
            start,
            key: key.as_bytes().into(),
            bytes,
        }
    }
}

/// Where spilled state is read back from: the store's committed rows.
pub trait StateSource {
    /// One row of metric `metric`'s `table`.
    fn row(
        &mut self,
        table: StateTable,
        metric: usize,
        start: u64,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError>;
    /// Every key with a row of metric `metric`'s `table` at a start in `[from, to)` (once
    /// per row: a key with rows at two starts is visited twice).
    fn keys(
        &mut self,
        table: StateTable,
        metric: usize,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreError>;
    /// Every stored closed bucket of metric `metric` with `from ≤ start < to` (to rebuild
    /// rings from a snapshot written before key rows).
    fn scan(
        &mut self,
        metric: usize,
        from: u64,
        to: u64,
        visit: &mut crate::store::Visit<'_>,
    ) -> Result<(), StoreError>;
}

/// A source with no rows: an engine that never spilled, or a reader that needs only the
/// snapshot's watermarks.
pub struct NoRows;

impl StateSource for NoRows {
    fn row(
        &mut self,
        _: StateTable,
        _: usize,
        _: u64,
        _: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(None)
    }
    fn keys(
        &mut self,
        _: StateTable,
        _: usize,
        _: u64,
        _: u64,
        _: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreError> {
        Ok(())
    }
    fn scan(
        &mut self,
        _: usize,
        _: u64,
        _: u64,
        _: &mut crate::store::Visit<'_>,
    ) -> Result<(), StoreError> {
        Ok(())
    }
}

/// What of a metric is in the store rather than in memory.
#[derive(Clone, Default)]
pub(super) struct Spilled {
    /// Keys not in memory may have state rows (some key was spilled, or the engine was
    /// restored from rows).
    pub(super) maybe: bool,
    /// Per open start: spilled keys with a bucket open there (the store closes them).
    pub(super) open: BTreeMap<u64, u64>,
    /// Key rows to delete at the next checkpoint (keys whose state emptied).
    pub(super) deleted: Vec<Key>,
    /// Keys that must be in memory after a restore (not quiet at the last checkpoint).
    pub(super) hot: Vec<Key>,
    /// Starts closed since the last checkpoint whose open rows the store has yet to promote.
    pub(super) promoting: BTreeSet<u64>,
}

impl Spilled {
    #[inline]
    pub(super) fn any(&self) -> bool {
        self.maybe
    }

    pub(super) fn forget(&mut self, key: Key) {
        self.deleted.push(key);
    }
}

/// Closes start `start` for the spilled keys: returns how many buckets that closes, and asks
/// the store to promote the start's open rows.
pub(super) fn close(sp: &mut Spilled, metric: usize, start: u64, out: &mut Outputs) -> u64 {
    let n = sp.open.remove(&start).unwrap_or(0);
    if n > 0 {
        out.promote.push((metric, start));
        sp.promoting.insert(start);
    }
    n
}

/// Bytes a key holds in memory.
pub(super) fn key_bytes(ks: &KeyState) -> usize {
    let mut n = KEY_BYTES + ks.open.len() * ENTRY_BYTES;
    n += ks
        .open
        .iter()
        .map(|o| o.summary.heap_bytes())
        .sum::<usize>();
    n += ks
        .items
        .iter()
        .map(|(k, v)| 48 + k.len() + 4 * v.len())
        .sum::<usize>();
    match &ks.window {
        None => {}
        Some(WindowState::Buckets(r)) => n += r.heap_bytes(),
        // The histogram's classes: about its encoding's size.
        Some(WindowState::Hist(h)) => n += 64 + h.to_bytes().len(),
    }
    n + ks.running.as_ref().map_or(0, |r| r.heap_bytes())
}

/// Whether a key can raise no alert and change no streak before its next event. (The key is
/// `mut` for its ring's aggregation, which a merge of its window may build or use.)
fn quiet(m: &MetricParts<'_>, ks: &mut KeyState) -> bool {
    if ks.streak.iter().any(|&s| s > 0) || !ks.items.is_empty() {
        return false;
    }
    if m.cfg.alerts.is_empty() {
        return true;
    }
    let mut bound: f64 = ks.open.iter().map(|o| o.summary.upper()).sum();
    match &mut ks.window {
        None => {}
        Some(WindowState::Hist(h)) => bound += h.estimate().high,
        Some(WindowState::Buckets(r)) => bound += r.upper(),
    }
    if bound <= m.min_limit {
        return true;
    }
    // A distinct key past its exact range has no hard bound, but its estimate grows with its
    // registers (a window of fewer buckets has none larger: the kind is monotone): a key whose
    // every bucket, merged, estimates under half the smallest limit at its `high` end stays
    // under the limit — the factor two covers the estimator's bias switching between its
    // ranges.
    if m.shape.kind().monotone() {
        // The closed buckets through the ring's aggregation if the key has one (a handful
        // of merges for a key evaluated at a close; none is made here), then the open ones.
        let mut acc = match &mut ks.window {
            Some(WindowState::Buckets(r)) => r
                .first_start()
                .map(|first| r.merged_if_aggregated(m.shape, first, 0)),
            _ => None,
        };
        for o in ks.open.iter() {
            let a = acc.get_or_insert_with(|| m.shape.empty(o.start));
            if a.merge(&o.summary).is_err() {
                return false;
            }
        }
        return acc.is_some_and(|a| 2.0 * a.estimate().high <= m.min_limit);
    }
    false
}

/// What [`quiet`] reads of a metric, borrowed apart from its keys.
struct MetricParts<'a> {
    cfg: &'a crate::config::MetricConfig,
    shape: &'a super::shape::MetricShape,
    min_limit: f64,
}

impl MetricState {
    /// The metric's keys, mutable, beside what [`quiet`] reads of it.
    fn keys_and_parts(&mut self) -> (&mut KeyTable, MetricParts<'_>) {
        let parts = MetricParts {
            cfg: &self.cfg,
            shape: &self.shape,
            min_limit: self.min_limit,
        };
        (&mut self.keys, parts)
    }
}

/// The time after which a key's state has left every window (its row may be swept): a
/// bucket after the close that empties it.
pub(super) fn expiry(m: &MetricState, ks: &KeyState) -> u64 {
    ks.last_start
        .saturating_add(m.cfg.window)
        .saturating_add(2 * m.cfg.bucket)
}

/// The inverse of [`expiry`]: the newest start of a key row's expiry.
fn last_start(m: &MetricState, expiry: u64) -> u64 {
    expiry.saturating_sub(m.cfg.window + 2 * m.cfg.bucket)
}

/// Writes the rows of every key changed since the last call (and deletes those of keys whose
/// state emptied); recounts memory; notes the keys a restore must read back.
pub(super) fn export(m: &mut MetricState, metric: usize, out: &mut Outputs, threads: usize) {
    for key in m.spill.deleted.drain(..) {
        out.state
            .push(StateRow::new(metric, StateTable::Key, 0, &key, None));
    }
    let mut keys: Vec<(&Key, &KeyState)> = m
        .keys
        .iter()
        .filter(|(_, ks)| ks.dirty || ks.row_dirty)
        .collect();
    keys.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    // Each key's rows are its own to encode: many keys are split between threads, their rows
    // put back in the keys' order.
    let shared: &MetricState = m;
    parts::in_parts(
        &mut keys,
        threads,
        KEYS_PER_THREAD,
        &mut out.state,
        |chunk, rows| {
            for &mut (key, ks) in chunk.iter_mut() {
                key_rows(shared, metric, key, ks, rows);
            }
        },
        |rows, mut more| rows.append(&mut more),
    );
    // One pass reading every key (what a restore must read back at once, and what a key row
    // now carries), one writing.
    let mut hot = Vec::new();
    let mut mem = 0;
    let (keys, parts) = m.keys_and_parts();
    for (key, ks) in keys.iter_mut() {
        if !quiet(&parts, ks) {
            hot.push(key.clone());
        }
    }
    let rows: Vec<(u64, bool)> = m
        .keys
        .iter()
        .map(|(_, ks)| (expiry(m, ks), needs_row(m, ks)))
        .collect();
    for (ks, (exp, row)) in m.keys.values_mut().zip(rows) {
        if ks.dirty || ks.row_dirty {
            ks.has_row = row;
            if row {
                ks.exp_written = exp;
            }
        }
        ks.dirty = false;
        ks.row_dirty = false;
        ks.stored = true;
        ks.mem = key_bytes(ks);
        mem += ks.mem;
    }
    hot.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    m.spill.hot = hot;
    m.mem = mem;
    out.sweep_before[metric] = m.closed_until;
    out.open_before[metric] = m.closed_until;
    m.spill.promoting.clear();
}

/// The state rows of a key changed since its rows were last written: its key row and expiry
/// (or the key row's deletion, when it needs none any more), and its open buckets' rows.
fn key_rows(m: &MetricState, metric: usize, key: &Key, ks: &KeyState, out: &mut Vec<StateRow>) {
    if needs_row(m, ks) {
        let exp = expiry(m, ks);
        if exp != ks.exp_written || !ks.has_row {
            out.push(StateRow::new(
                metric,
                StateTable::Expiry,
                exp,
                key,
                Some(Vec::new()),
            ));
        }
        if ks.row_dirty || !ks.has_row {
            out.push(StateRow::new(
                metric,
                StateTable::Key,
                0,
                key,
                Some(key_row(m, ks)),
            ));
        }
    } else if ks.has_row {
        out.push(StateRow::new(metric, StateTable::Key, 0, key, None));
    }
    if !ks.dirty {
        return;
    }
    for o in ks.open.iter() {
        out.push(StateRow::new(
            metric,
            StateTable::Open,
            o.start,
            key,
            Some(o.summary.to_stored()),
        ));
    }
}

/// Whether a key needs a key row: a count metric's key always (its histogram and the starts
/// of its open buckets); a distinct or frequency key only while a streak runs (its ring is the
/// metric's stored buckets, its open buckets are found by the starts spilled keys hold).
fn needs_row(m: &MetricState, ks: &KeyState) -> bool {
    !m.shape.rings() || ks.streak.iter().any(|&s| s > 0) || !ks.items.is_empty()
}

/// Reads a key back from the store, if it has state there: its key row, its open buckets, its
/// window (the ring from the metric's stored buckets; the histogram given the buckets closed
/// meanwhile) and its streaks. A key with none is new: nothing is inserted. `reloaded` marks it
/// as read back after a spill (see [`Engine::spill`]).
pub(super) fn load(
    m: &mut MetricState,
    metric: usize,
    key: &[u8],
    src: &mut dyn StateSource,
    reloaded: bool,
) -> Result<(), EngineError> {
    let store = |e| EngineError::Store(e);
    let bad = |m: &MetricState, what: String| EngineError::State {
        metric: m.cfg.name.clone(),
        key: String::from_utf8_lossy(key).into_owned(),
        what,
    };
    let row = match src.row(StateTable::Key, metric, 0, key).map_err(store)? {
        Some(b) => Some(decode_key_row(m, &b).map_err(|e| bad(m, format!("key row: {e}")))?),
        None => None,
    };
    let width = m.cfg.bucket;
    let until = m.closed_until.unwrap_or(0);
    let first_kept = until.saturating_sub(m.cfg.window);
    let mut ks = KeyState::new(m.cfg.alerts.len());
    ks.dirty = false;
    ks.row_dirty = false;
    ks.stored = true;
    ks.reloaded = reloaded;
    // The starts where this key may have an open row: those its row lists, or (no row) every
    // start some spilled key holds open, and those closed but not yet promoted.
    let starts: Vec<u64> = match &row {
        Some(r) => r.open.clone(),
        None => m
            .spill
            .open
            .keys()
            .chain(m.spill.promoting.iter())
            .copied()
            .collect(),
    };
    if let Some(r) = &row {
        ks.has_row = true;
        ks.exp_written = r.expiry;
        ks.last_start = last_start(m, r.expiry);
        ks.streak = r.streak.clone().into_boxed_slice();
        ks.items = r.items.clone();
    }
    // Open buckets that closed while the key was out: in the window, they go to it.
    let mut closed: BTreeMap<u64, Summary> = BTreeMap::new();
    for s in starts {
        if s < first_kept || closed.contains_key(&s) || ks.open.contains(s) {
            continue;
        }
        let still_open = s >= until;
        let bytes = match src.row(StateTable::Open, metric, s, key).map_err(store)? {
            Some(b) => Some(b),
            None if !still_open && row.is_some() => {
                src.row(StateTable::Closed, metric, s, key).map_err(store)?
            }
            None => None,
        };
        let Some(bytes) = bytes else {
            if row.is_some() {
                return Err(bad(m, format!("its open bucket {s} has no row")));
            }
            continue;
        };
        let summary = m
            .shape
            .decode(&bytes, s)
            .map_err(|e| bad(m, format!("open bucket {s}: {e}")))?;
        ks.last_start = ks.last_start.max(s);
        if still_open {
            if let Some(n) = m.spill.open.get_mut(&s) {
                *n -= 1;
                if *n == 0 {
                    m.spill.open.remove(&s);
                }
            }
            ks.open.insert(s, summary);
        } else {
            closed.insert(s, summary);
        }
    }
    ks.window = match m.shape.kind().window_model() {
        WindowModel::Histogram { epsilon } => {
            let mut h = row.as_ref().and_then(|r| r.hist.clone());
            for (s, summary) in closed {
                h.get_or_insert_with(|| CountWindow::new(m.cfg.window, epsilon))
                    .add_bucket(s + width, super::bucket_count(&summary));
            }
            h.map(|h| WindowState::Hist(Box::new(h)))
        }
        WindowModel::Ring => {
            let mut ring = ClosedBuckets::default();
            let mut s = first_kept - first_kept % width;
            while s < until {
                let summary = match closed.remove(&s) {
                    Some(x) => Some(x),
                    None => match src.row(StateTable::Closed, metric, s, key).map_err(store)? {
                        Some(b) => Some(
                            m.shape
                                .decode(&b, s)
                                .map_err(|e| bad(m, format!("stored bucket {s}: {e}")))?,
                        ),
                        None => None,
                    },
                };
                if let Some(x) = summary {
                    ks.last_start = ks.last_start.max(s);
                    ring.push_back(s, x);
                }
                s += width;
            }
            (!ring.is_empty()).then_some(WindowState::Buckets(ring))
        }
    };
    if row.is_none() && ks.open.is_empty() && ks.window.is_none() {
        return Ok(());
    }
    ks.mem = key_bytes(&ks);
    m.mem += ks.mem;
    m.keys.insert(Key::new(key), ks);
    Ok(())
}

/// The size past which a key that came back since the last spill is not spilled again
/// ([`Engine::spill`]): a spill every 1,024 records rewrites at most this much a key, about 64
/// bytes a record.
pub const HOT_KEY_BYTES: usize = 64 << 10;

impl Engine {
    /// Bytes the engine holds: its keys' state and the outputs waiting for a checkpoint.
    pub fn memory(&self) -> usize {
        // The key tables' spare slots too: a table keeps its capacity as keys leave.
        self.metrics
            .iter()
            .map(|m| m.mem + m.keys.spare_bytes())
            .sum::<usize>()
            + self.out.bytes
            + self.batch.heap_bytes()
    }

    /// Drops the least recently active quiet keys from memory until [`Engine::memory`] is at
    /// most `target`; returns how many left. Call right after a checkpoint committed
    /// [`Engine::take_outputs`]' state rows (a key changed since then stays), and read keys
    /// back with [`Engine::add_item_from`] from then on.
    ///
    /// A key of more than [`HOT_KEY_BYTES`] read back since the last spill and active since
    /// then stays: it left and came back within one spill, so spilling it again would write
    /// and read its whole state once more at every spill (one key of 100 MB under a budget
    /// of 256 MiB was rewritten every 1,024 records, for ever, at a twentieth of the speed).
    /// If such keys hold the memory, the caller's budget check stops the run with its error
    /// instead. Smaller keys that come back cost little to spill again, and may.
    pub fn spill(&mut self, target: usize) -> Result<usize, EngineError> {
        debug_assert!(
            self.batch.is_empty(),
            "a spill with events deferred: drain first"
        );
        let mut total = self.memory();
        let since = std::mem::replace(&mut self.spilled_at, self.clock);
        if total <= target {
            return Ok(0);
        }
        // The mark stays on the keys that came back and were busy since the last spill; a
        // key idle since is no longer one that came back.
        for m in &mut self.metrics {
            for ks in m.keys.values_mut() {
                ks.reloaded &= ks.touched > since && ks.mem > HOT_KEY_BYTES;
            }
        }
        let mut candidates: Vec<(u64, usize, Key)> = Vec::new();
        for (i, m) in self.metrics.iter_mut().enumerate() {
            let (keys, parts) = m.keys_and_parts();
            for (k, ks) in keys.iter_mut() {
                if !ks.reloaded && !ks.dirty && !ks.row_dirty && ks.stored && quiet(&parts, ks) {
                    candidates.push((ks.touched, i, k.clone()));
                }
            }
        }
        candidates
            .sort_unstable_by(|a, b| (a.0, a.1, a.2.as_bytes()).cmp(&(b.0, b.1, b.2.as_bytes())));
        let mut n = 0;
        for (_, i, k) in candidates {
            if total <= target {
                break;
            }
            let m = &mut self.metrics[i];
            let Some(ks) = m.keys.remove(k.as_bytes()) else {
                continue;
            };
            m.spill.maybe = true;
            for o in ks.open.iter() {
                *m.spill.open.entry(o.start).or_default() += 1;
            }
            m.mem -= ks.mem;
            total -= ks.mem;
            n += 1;
        }
        for m in &mut self.metrics {
            m.keys.compact();
        }
        Ok(n)
    }
}
