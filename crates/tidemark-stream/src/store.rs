//! Where closed buckets live: a [`Store`] trait, the embedded [`RedbStore`] (one file,
//! ACID, crash-safe) and an in-memory [`MemStore`] for tests.
//!
//! A store holds bucket sketches keyed by `(metric, bucket start, key)` — start before key, so
//! a window is one range scan — and the pipeline's metadata: the config text and fingerprint,
//! and an opaque state blob (input position, counters, the engine's open buckets). Every
//! [`Batch`] is applied in one transaction: the buckets a batch of closes produced, the late
//! merges, the retention deletes and the new state land together or not at all, so a crash
//! leaves the store at the previous batch and the input position that goes with it.

use core::fmt;
use std::collections::BTreeMap;
use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

const BUCKETS: TableDefinition<(&str, u64, &[u8]), &[u8]> = TableDefinition::new("buckets");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

/// A store that failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The database failed (I/O, corruption, a lock held by another process).
    Backend {
        /// What it said.
        message: String,
    },
    /// A late merge could not combine the stored bucket with the new one.
    Merge {
        /// The metric.
        metric: String,
        /// The bucket start, ms.
        start: u64,
        /// Why.
        message: String,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Backend { message } => write!(f, "store: {message}"),
            StoreError::Merge {
                metric,
                start,
                message,
            } => write!(
                f,
                "store: cannot merge a late event into {metric} bucket {start}: {message}"
            ),
        }
    }
}

impl std::error::Error for StoreError {}

fn backend(e: impl fmt::Display) -> StoreError {
    StoreError::Backend {
        message: e.to_string(),
    }
}

/// The pipeline's metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The config's TOML text (queries read metric shapes from it).
    pub config: String,
    /// The config's fingerprint.
    pub fingerprint: u64,
    /// The pipeline's state: position, counters, engine snapshot.
    pub state: Vec<u8>,
}

/// One bucket written or merged.
#[derive(Clone, Copy, Debug)]
pub struct BucketRef<'a> {
    /// Metric name.
    pub metric: &'a str,
    /// Key bytes.
    pub key: &'a [u8],
    /// Bucket start, ms.
    pub start: u64,
    /// Summary bytes.
    pub bytes: &'a [u8],
}

/// Receives stored buckets: `(key, bucket start, bytes)`.
pub type Visit<'a> = dyn FnMut(&[u8], u64, &[u8]) + 'a;

/// Combines a stored bucket's bytes with a late event's: `(metric, start, stored, late)`.
pub type MergeFn<'a> = &'a dyn Fn(&str, u64, &[u8], &[u8]) -> Result<Vec<u8>, String>;

/// Combines a period's buckets `(start, bytes)` into its rollup bucket:
/// `(metric, period start, parts)`.
pub type RollFn<'a> = &'a dyn Fn(&str, u64, &[(u64, Vec<u8>)]) -> Result<Vec<u8>, String>;

/// A rollup's buckets grouped by `(period start, key)`: `(start, bytes)` of each.
type Periods = BTreeMap<(u64, Vec<u8>), Vec<(u64, Vec<u8>)>>;

/// Periods of a metric to roll up: every stored bucket of `metric` in `[from, to)` is grouped
/// by `(period, key)` (`period = start − start % width`) and written as one bucket of `into`.
#[derive(Clone, Copy, Debug)]
pub struct RollupRef<'a> {
    /// The metric rolled up.
    pub metric: &'a str,
    /// The rollup's stored name.
    pub into: &'a str,
    /// First period start, ms.
    pub from: u64,
    /// Last period end, ms.
    pub to: u64,
    /// Rollup width, ms.
    pub width: u64,
}

/// Everything one commit writes, atomically.
pub struct Batch<'a> {
    /// Closed buckets (overwrite).
    pub puts: Vec<BucketRef<'a>>,
    /// Late events to read-merge-write into their stored bucket.
    pub merges: Vec<BucketRef<'a>>,
    /// How to merge them.
    pub merge: MergeFn<'a>,
    /// Rollups, applied after the puts and merges.
    pub rollups: Vec<RollupRef<'a>>,
    /// How to build a rollup bucket.
    pub roll: RollFn<'a>,
    /// Per metric: delete buckets starting before this.
    pub expire: Vec<(&'a str, u64)>,
    /// The new metadata.
    pub meta: &'a Meta,
}

/// A bucket store.
pub trait Store {
    /// The committed metadata, if anything was ever committed.
    fn meta(&self) -> Result<Option<Meta>, StoreError>;
    /// Applies a batch atomically.
    fn commit(&mut self, batch: &Batch<'_>) -> Result<(), StoreError>;
    /// One stored bucket.
    fn get(&self, metric: &str, key: &[u8], start: u64) -> Result<Option<Vec<u8>>, StoreError>;
    /// Every stored bucket of `metric` with `from ≤ start < to`, by start then key.
    fn scan(&self, metric: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError>;
}

/// The embedded store: one redb file.
pub struct RedbStore {
    db: Database,
}

impl RedbStore {
    /// Opens the file, creating it if absent.
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        let db = Database::create(path).map_err(backend)?;
        Ok(RedbStore { db })
    }

    /// Opens an existing file (for queries): an absent file is an error, not a new store.
    pub fn open_existing(path: &Path) -> Result<RedbStore, StoreError> {
        let db = Database::open(path).map_err(backend)?;
        Ok(RedbStore { db })
    }
}

impl Store for RedbStore {
    fn meta(&self) -> Result<Option<Meta>, StoreError> {
        let tx = self.db.begin_read().map_err(backend)?;
        let t = match tx.open_table(META) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(backend(e)),
        };
        let get = |k: &str| -> Result<Option<Vec<u8>>, StoreError> {
            Ok(t.get(k).map_err(backend)?.map(|v| v.value().to_vec()))
        };
        let (Some(config), Some(fp), Some(state)) =
            (get("config")?, get("fingerprint")?, get("state")?)
        else {
            return Ok(None);
        };
        let fp: [u8; 8] = fp
            .try_into()
            .map_err(|_| backend("meta: the fingerprint is not 8 bytes"))?;
        Ok(Some(Meta {
            config: String::from_utf8(config).map_err(|_| backend("meta: config is not UTF-8"))?,
            fingerprint: u64::from_le_bytes(fp),
            state,
        }))
    }

    fn commit(&mut self, batch: &Batch<'_>) -> Result<(), StoreError> {
        let tx = self.db.begin_write().map_err(backend)?;
        {
            let mut t = tx.open_table(BUCKETS).map_err(backend)?;
            for b in &batch.puts {
                t.insert((b.metric, b.start, b.key), b.bytes)
                    .map_err(backend)?;
            }
            for b in &batch.merges {
                let stored = t
                    .get((b.metric, b.start, b.key))
                    .map_err(backend)?
                    .map(|v| v.value().to_vec());
                let bytes = match stored {
                    Some(old) => {
                        (batch.merge)(b.metric, b.start, &old, b.bytes).map_err(|message| {
                            StoreError::Merge {
                                metric: b.metric.to_string(),
                                start: b.start,
                                message,
                            }
                        })?
                    }
                    None => b.bytes.to_vec(),
                };
                t.insert((b.metric, b.start, b.key), bytes.as_slice())
                    .map_err(backend)?;
            }
            for r in &batch.rollups {
                let mut groups: Periods = BTreeMap::new();
                let lo: (&str, u64, &[u8]) = (r.metric, r.from, &[]);
                let hi: (&str, u64, &[u8]) = (r.metric, r.to, &[]);
                for entry in t.range(lo..hi).map_err(backend)? {
                    let (k, v) = entry.map_err(backend)?;
                    let (_, start, key) = k.value();
                    groups
                        .entry((start - start % r.width, key.to_vec()))
                        .or_default()
                        .push((start, v.value().to_vec()));
                }
                for ((period, key), parts) in groups {
                    let bytes = (batch.roll)(r.metric, period, &parts).map_err(|message| {
                        StoreError::Merge {
                            metric: r.into.to_string(),
                            start: period,
                            message,
                        }
                    })?;
                    t.insert((r.into, period, key.as_slice()), bytes.as_slice())
                        .map_err(backend)?;
                }
            }
            for &(metric, before) in &batch.expire {
                let lo: (&str, u64, &[u8]) = (metric, 0, &[]);
                let hi: (&str, u64, &[u8]) = (metric, before, &[]);
                t.retain_in(lo..hi, |_, _| false).map_err(backend)?;
            }
            let mut m = tx.open_table(META).map_err(backend)?;
            m.insert("config", batch.meta.config.as_bytes())
                .map_err(backend)?;
            m.insert("fingerprint", &batch.meta.fingerprint.to_le_bytes()[..])
                .map_err(backend)?;
            m.insert("state", batch.meta.state.as_slice())
                .map_err(backend)?;
        }
        tx.commit().map_err(backend)
    }

    fn get(&self, metric: &str, key: &[u8], start: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let tx = self.db.begin_read().map_err(backend)?;
        let t = match tx.open_table(BUCKETS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(backend(e)),
        };
        let v = t.get((metric, start, key)).map_err(backend)?;
        Ok(v.map(|v| v.value().to_vec()))
    }

    fn scan(&self, metric: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        if from >= to {
            return Ok(());
        }
        let tx = self.db.begin_read().map_err(backend)?;
        let t = match tx.open_table(BUCKETS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(backend(e)),
        };
        let lo: (&str, u64, &[u8]) = (metric, from, &[]);
        let hi: (&str, u64, &[u8]) = (metric, to, &[]);
        for entry in t.range(lo..hi).map_err(backend)? {
            let (k, v) = entry.map_err(backend)?;
            let (_, start, key) = k.value();
            f(key, start, v.value());
        }
        Ok(())
    }
}

/// An in-memory store with the same semantics, for tests and the engine's users who bring
/// their own persistence.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemStore {
    /// `(metric, start, key)` → bytes.
    pub buckets: BTreeMap<(String, u64, Vec<u8>), Vec<u8>>,
    /// The metadata.
    pub meta: Option<Meta>,
}

impl Store for MemStore {
    fn meta(&self) -> Result<Option<Meta>, StoreError> {
        Ok(self.meta.clone())
    }

    fn commit(&mut self, batch: &Batch<'_>) -> Result<(), StoreError> {
        // Stage into a copy so a failing merge leaves the store untouched, like a transaction.
        let mut next = self.buckets.clone();
        for b in &batch.puts {
            next.insert(
                (b.metric.to_string(), b.start, b.key.to_vec()),
                b.bytes.to_vec(),
            );
        }
        for b in &batch.merges {
            let k = (b.metric.to_string(), b.start, b.key.to_vec());
            let bytes = match next.get(&k) {
                Some(old) => (batch.merge)(b.metric, b.start, old, b.bytes).map_err(|message| {
                    StoreError::Merge {
                        metric: b.metric.to_string(),
                        start: b.start,
                        message,
                    }
                })?,
                None => b.bytes.to_vec(),
            };
            next.insert(k, bytes);
        }
        for r in &batch.rollups {
            let mut groups: Periods = BTreeMap::new();
            let lo = (r.metric.to_string(), r.from, Vec::new());
            let hi = (r.metric.to_string(), r.to, Vec::new());
            for ((_, start, key), v) in next.range(lo..hi) {
                groups
                    .entry((start - start % r.width, key.clone()))
                    .or_default()
                    .push((*start, v.clone()));
            }
            for ((period, key), parts) in groups {
                let bytes = (batch.roll)(r.metric, period, &parts).map_err(|message| {
                    StoreError::Merge {
                        metric: r.into.to_string(),
                        start: period,
                        message,
                    }
                })?;
                next.insert((r.into.to_string(), period, key), bytes);
            }
        }
        for &(metric, before) in &batch.expire {
            next.retain(|(m, s, _), _| !(m == metric && *s < before));
        }
        self.buckets = next;
        self.meta = Some(batch.meta.clone());
        Ok(())
    }

    fn get(&self, metric: &str, key: &[u8], start: u64) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .buckets
            .get(&(metric.to_string(), start, key.to_vec()))
            .cloned())
    }

    fn scan(&self, metric: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        if from >= to {
            return Ok(());
        }
        let lo = (metric.to_string(), from, Vec::new());
        let hi = (metric.to_string(), to, Vec::new());
        for ((_, s, k), v) in self.buckets.range(lo..hi) {
            f(k, *s, v);
        }
        Ok(())
    }
}
