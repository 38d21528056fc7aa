//! Events added in batches, so that their cache misses overlap.
//!
//! An event's work starts with three reads that depend on one another: the key's index
//! entry, then the key's state (its bytes, compared, and its open bucket), then the slot of
//! the bucket's sketch its item falls in. With tens of thousands of keys, none of the three
//! is in cache when the key's next event comes, and one event at a time the processor waits
//! for each in turn: on the demo's flow log (20,000 keys), the three stalls took about a
//! third of the pipeline's time (`perf annotate`).
//!
//! A batch of events is looked up first, in three passes, each a short loop whose reads do
//! not depend on one another: the processor has many misses in flight at once. Pass one
//! reads each event's index entry; pass two compares the key at that position; pass three
//! asks the bucket's summary whether the item would change it
//! ([`super::Summary::would_change`], which reads the slot an add would). Then the events
//! are added, in the order they came, from cache, each with the position pass two
//! confirmed. Measured on the demo's flow log (the benchmark diary,
//! docs/history/benchmarks-2026-12-04.md, "Batched adds"): 0.82 of the
//! CPU of adding each event at once, for 7% more instructions; a fourth of what is left is
//! still these misses, and batches of 64 did no better than 32.
//!
//! Deferring an event changes nothing it sees. Events are added in order; the key table
//! only grows while a batch is added (a key read back, or new, goes at the end), so a
//! position found stays the key's; and a batch is added before any bucket closes: the caller
//! adds it before a time that closes one ([`Engine::observe_from`]), before it takes the
//! engine's outputs, and before the end (debug builds check each).
//!
//! What a batch holds is bounded: [`BATCH_EVENTS`] events (and the other metrics' events of
//! the last record), their keys and item bytes (each within the input's limits) copied back
//! to back; [`Engine::memory`] counts the buffer.
//!
//! A caller that defers must drain before it takes outputs, snapshots, spills or flushes,
//! and observe through [`Engine::observe_from`]: outputs taken with events deferred would
//! not hold them. Debug builds check each of these; a caller that never defers (adding
//! with [`Engine::add_item_from`]) has nothing to do.
//!
//! The runner adds a batch when it is full, before a record whose time closes a bucket,
//! before the budget's memory count, before a commit, and before a read that may wait for
//! input (a pipe, standard input, a followed file at its end), so that an early alert
//! waits for no input that has not come.

use std::ops::Range;

use super::{Engine, StateSource};
use crate::EngineError;

/// The events a batch holds before it is added: enough for the lookups of one to overlap
/// (a few dozen misses in flight), few enough that what they bring stays in cache.
pub(crate) const BATCH_EVENTS: usize = 32;

/// One deferred event; its key and item bytes are ranges of [`Batch::bytes`].
struct Deferred {
    metric: usize,
    time: u64,
    item: u64,
    key: Range<usize>,
    item_bytes: Range<usize>,
}

/// Events deferred, in the order they came.
#[derive(Default)]
pub(super) struct Batch {
    events: Vec<Deferred>,
    bytes: Vec<u8>,
    /// Per event, the position of its key's state, once looked up.
    found: Vec<Option<usize>>,
}

impl Batch {
    pub(super) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Heap bytes held.
    pub(super) fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
            + self.events.capacity() * std::mem::size_of::<Deferred>()
            + self.found.capacity() * std::mem::size_of::<Option<usize>>()
    }

    fn clear(&mut self) {
        self.events.clear();
        self.bytes.clear();
        self.found.clear();
    }
}

impl Engine {
    /// [`Engine::observe`] for an engine with deferred events: they are added first (from
    /// `source`, as [`Engine::drain`] does) if `time` closes a bucket.
    #[inline]
    pub fn observe_from(
        &mut self,
        time: u64,
        source: &mut dyn StateSource,
    ) -> Result<(), EngineError> {
        if !self.batch.is_empty() && self.closes_at(time) {
            self.drain(source)?;
        }
        self.observe(time);
        Ok(())
    }

    /// [`Engine::add_item_from`], deferred: the event joins a batch that is added when it is
    /// full (returns true: call [`Engine::drain`]) or drained. Call
    /// [`Engine::observe_from`] with the event's time first, and [`Engine::drain`] before
    /// taking outputs, spilling, snapshotting or flushing.
    #[inline]
    pub fn defer(&mut self, metric: usize, time: u64, key: &[u8], item: u64, bytes: &[u8]) -> bool {
        let b = &mut self.batch;
        let at = b.bytes.len();
        b.bytes.extend_from_slice(key);
        b.bytes.extend_from_slice(bytes);
        let key_end = at + key.len();
        b.events.push(Deferred {
            metric,
            time,
            item,
            key: at..key_end,
            item_bytes: key_end..b.bytes.len(),
        });
        b.events.len() >= BATCH_EVENTS
    }

    /// Adds the deferred events, in order; keys spilled are read back from `source`. A
    /// failure (a key that could not be read back) leaves the events after it unadded: the
    /// run stops on it without committing.
    pub fn drain(&mut self, source: &mut dyn StateSource) -> Result<(), EngineError> {
        if self.batch.is_empty() {
            return Ok(());
        }
        let mut b = std::mem::take(&mut self.batch);
        // Pass one: index entries.
        for ev in &b.events {
            let keys = &self.metrics[ev.metric].keys;
            b.found.push(keys.candidate(&b.bytes[ev.key.clone()]));
        }
        // Pass two: the keys at those positions.
        for (ev, found) in b.events.iter().zip(b.found.iter_mut()) {
            let Some(i) = *found else { continue };
            let keys = &self.metrics[ev.metric].keys;
            if keys.state_at(i, &b.bytes[ev.key.clone()]).is_none() {
                *found = None;
            }
        }
        // Pass three: the slots of their buckets' sketches that the items fall in.
        let mut changes = 0usize;
        for (ev, found) in b.events.iter().zip(&b.found) {
            let Some(i) = *found else { continue };
            let m = &self.metrics[ev.metric];
            let start = ev.time - ev.time % m.cfg.bucket;
            let open = &m.keys.state(i).open;
            changes += open.get(start).is_some_and(|s| s.would_change(ev.item)) as usize;
        }
        // The answers are not needed, only the reads: kept, so that they are made.
        std::hint::black_box(changes);
        let mut result = Ok(());
        for (ev, &found) in b.events.iter().zip(&b.found) {
            let key = &b.bytes[ev.key.clone()];
            let bytes = &b.bytes[ev.item_bytes.clone()];
            if found.is_none() {
                if let Err(e) = self.read_back(ev.metric, key, source) {
                    result = Err(e);
                    break;
                }
            }
            self.add_resident(ev.metric, ev.time, key, ev.item, bytes, found);
        }
        b.clear();
        self.batch = b;
        result
    }

    /// Whether observing `time` would close a bucket of some metric.
    pub(super) fn closes_at(&self, time: u64) -> bool {
        if self.max_time.is_some_and(|m| m >= time) {
            return false;
        }
        let closing = self.closing_time(time);
        self.metrics
            .iter()
            .any(|m| m.closed_until.is_none_or(|c| m.closes_until(closing) > c))
    }

    /// Bounds the time that closes buckets by `bound` from now on (a source's watermark over
    /// streams read interleaved; see the module doc), and closes the buckets a higher bound
    /// passes now, the deferred events added first (spilled keys read back from `source`).
    /// The bound only rises: a lower one is ignored.
    pub fn bound_time(
        &mut self,
        bound: u64,
        source: &mut dyn StateSource,
    ) -> Result<(), EngineError> {
        let bound = self.bound.map_or(bound, |b| b.max(bound));
        self.bound = Some(bound);
        let Some(time) = self.max_time else {
            return Ok(());
        };
        let closing = bound.min(time);
        let closes = self
            .metrics
            .iter()
            .any(|m| m.closed_until.is_none_or(|c| m.closes_until(closing) > c));
        if closes {
            self.drain(source)?;
            self.close_to(closing, time);
        }
        Ok(())
    }
}
