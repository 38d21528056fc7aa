//! Events added in batches, so that their cache misses overlap.
//!
//! An event's work starts with three reads that depend on one another: the key's index
//! entry, then the key's state (its bytes, compared, and its open bucket), then the slot of
//! the bucket's sketch its item falls in. With tens of thousands of keys, none of the three
//! is in cache when the key's next event comes, and one event at a time the processor waits
//! for each in turn: on the demo's flow log (20,000 keys), the three stalls took about a
//! third of the pipeline's time (`perf annotate`).
//!
//! A batch of events is looked up first, in two passes, each a short loop whose reads do not
//! depend on the previous event's: the processor has many misses in flight at once. Pass one
//! reads each event's index entry; pass two checks the key at that position and asks the
//! bucket's summary whether the item would change it ([`Summary::would_change`], which reads
//! the slot an add would). Then the events are added, in the order they came, from cache,
//! each with the position pass two found.
//!
//! Deferring an event changes nothing it sees. Events are added in order; the key table
//! only grows while a batch is added (a key read back, or new, goes at the end), so a
//! position found stays the key's; and a batch is added before any bucket closes: the caller
//! adds it before a time that closes one ([`Engine::observe_from`]), before it takes the
//! engine's outputs, and before the end.
//!
//! What a batch holds is bounded: [`BATCH_EVENTS`] events, their keys and item bytes (each
//! within the input's limits) copied back to back.
//!
//! ```
//! use tidemark_stream::config::Config;
//! use tidemark_stream::engine::{Engine, NoRows};
//! let config = Config::from_toml(r#"
//! [input]
//! format = "csv"
//! time_field = "ts"
//! time_format = "epoch_s"
//! [[metric]]
//! name = "fanout"
//! kind = "distinct"
//! key = ["src"]
//! item = ["dst"]
//! bucket = "1m"
//! window = "5m"
//! "#).unwrap();
//! let mut engine = Engine::new(&config).unwrap();
//! for (i, dst) in ["a", "b", "a"].iter().enumerate() {
//!     let t = 1_000 * i as u64;
//!     engine.observe_from(t, &mut NoRows).unwrap();
//!     let item = tidemark::ItemHasher::default().hash(dst.as_bytes());
//!     engine.defer(0, t, b"10.0.0.1", item, &[]);
//! }
//! engine.drain(&mut NoRows).unwrap();
//! engine.flush();
//! let closed = engine.take_outputs().closed;
//! assert_eq!(closed.len(), 1);
//! ```

use std::ops::Range;

use super::{Engine, StateSource};
use crate::EngineError;

/// The events a batch holds before it is added: enough for the lookups of one to overlap
/// (a few dozen misses in flight), few enough that what they bring stays in cache.
pub const BATCH_EVENTS: usize = 32;

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
        self.metrics.iter().any(|m| {
            let wm = time.saturating_sub(m.cfg.allowed_lateness);
            let until = wm - wm % m.cfg.bucket;
            m.closed_until.is_none_or(|c| until > c)
        })
    }
}
