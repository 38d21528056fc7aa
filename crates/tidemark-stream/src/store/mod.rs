//! Where closed buckets live: the [`Store`] trait, the embedded [`RedbStore`] (one file, ACID,
//! crash-safe, readable by other processes while a run writes it) and an in-memory
//! [`MemStore`] for tests.
//!
//! A store holds bucket sketches keyed by `(metric, bucket start, key)` — start before key, so
//! a window is one range scan — and the pipeline's metadata: the config text and fingerprint,
//! and the run state (input positions, counters, the engine's open buckets).
//!
//! # Layers
//!
//! A backend offers only primitive operations inside a transaction ([`ReadTxn`], [`Txn`]):
//! get, put, range scan, delete before a start, metadata. Everything with meaning — applying a
//! [`Batch`] (closed buckets, late read-merge-writes, rollups, retention deletes and the new
//! state, atomically), and verifying what is read — is written once, in [`apply`], above any
//! backend.
//!
//! # Damage is found, never answered from
//!
//! Each stored value is a checksummed envelope, checked when decoded. And for every
//! `(metric, start)` the store keeps a *digest* — the number of entries and the XOR of a
//! 64-bit hash of each `(start, key, value)` — updated in the same transaction as the entries.
//! A scan recomputes the digest of every start it reads and compares: an entry lost, moved to
//! another key or start, or altered on disk turns into [`StoreError::Damaged`] instead of a
//! silently smaller answer. A read of one key's buckets ([`Store::key_buckets`]) reads one
//! entry per start instead, and still verifies each start it reads whole, once per store
//! handle while the start's digest is unchanged (see [`VerifiedStarts`]). On top of that, the
//! redb file's own page checksums are verified whenever a writer opens it, and by
//! `tidemark check`.

use core::fmt;
use std::path::PathBuf;

use tidemark::{DecodeError, MergeError};

mod apply;
mod keyed;
mod mem;
mod redb_store;
mod row_key;

pub(crate) use apply::{scan_verified, OpenCommit};
pub use keyed::VerifiedStarts;
pub use mem::MemStore;
pub use redb_store::{cache_for, RedbStore, Space};
pub use row_key::{row_key, split_row_key};

/// A store that failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// The file cannot be opened as a store.
    Open {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Another process holds the store for writing (or, for a store written before version 3
    /// of the run state, holds it at all).
    Locked {
        /// The file.
        path: PathBuf,
    },
    /// The store's contents are damaged: what was found.
    Damaged {
        /// What is wrong, and where.
        what: String,
    },
    /// The database failed (I/O, a full disk).
    Backend {
        /// The operation.
        op: &'static str,
        /// redb's error.
        source: redb::Error,
    },
    /// A table name too long for a row's key (see `row_key`): longer than 255 bytes.
    TableName {
        /// The name's first 40 characters.
        name: String,
        /// Its length, bytes.
        len: usize,
    },
    /// A late merge or a rollup could not combine stored buckets.
    Merge {
        /// The metric.
        metric: String,
        /// The bucket start, ms.
        start: u64,
        /// Why.
        source: CombineError,
    },
    /// A write transaction was left before its commit (the run that fed it stopped): it
    /// rolled back, with everything written in it.
    Abandoned,
    /// A caller broke the store's contract (a bug, not the file): what it did.
    Contract {
        /// What was asked of the store.
        what: &'static str,
    },
    /// A part of a store kept in parts (one per partition, on a server) cannot have this
    /// name.
    PartName {
        /// The name's first 60 characters.
        name: String,
        /// What a name must be.
        expected: &'static str,
    },
    /// A store on a server (Redis) failed or could not be reached.
    Remote {
        /// The store: its server and part.
        store: String,
        /// The operation.
        op: &'static str,
        /// The client's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Another writer claimed the store's part since this one did: nothing was written, and
    /// this writer must stop (the part is the other's now).
    Fenced {
        /// The store: its server and part.
        store: String,
        /// The claim the server holds.
        what: String,
    },
    /// The server holds fewer of the part's commits than this writer saw land: it lost the
    /// last ones (a failover to a replica they had not reached). Nothing was written; the
    /// writer reads the part again from what the server holds and goes on from there.
    Behind {
        /// The store: its server and part.
        store: String,
        /// The commits the server holds.
        holds: u64,
        /// The commits this writer saw land.
        saw: u64,
    },
}

impl StoreError {
    /// Whether the store's contents are damaged (as opposed to busy or failing).
    pub fn is_damaged(&self) -> bool {
        matches!(self, StoreError::Damaged { .. })
    }

    pub(crate) fn damaged(what: impl Into<String>) -> StoreError {
        StoreError::Damaged { what: what.into() }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Open { path, source } => {
                write!(f, "cannot open store {}: {source}", path.display())
            }
            StoreError::Locked { path } => write!(
                f,
                "store {} is open for writing in another process (a `tidemark run` still \
                 running or still exiting, or a `check` verifying it): wait for it to end; \
                 `query` reads a store while a run writes it",
                path.display()
            ),
            StoreError::Damaged { what } => write!(f, "the store is damaged: {what}"),
            StoreError::Backend { op, source } => write!(f, "store: {op}: {source}"),
            StoreError::TableName { name, len } => write!(
                f,
                "store: a table name of {len} bytes ({name:?}…), longer than a row's key \
                 holds (255)"
            ),
            StoreError::Merge {
                metric,
                start,
                source,
            } => write!(
                f,
                "store: cannot merge into {metric} bucket {start}: {source}"
            ),
            StoreError::Abandoned => write!(
                f,
                "store: a checkpoint's transaction was left before its commit and rolled back"
            ),
            StoreError::Contract { what } => write!(
                f,
                "store: {what} (a bug in tidemark, not in the file: please report it)"
            ),
            StoreError::PartName { name, expected } => {
                write!(f, "a part named {name:?}: expected {expected}")
            }
            StoreError::Remote { store, op, source } => {
                write!(f, "store {store}: cannot {op}: {source}")
            }
            StoreError::Fenced { store, what } => write!(
                f,
                "store {store}: not written, another writer claimed the part ({what})"
            ),
            StoreError::Behind { store, holds, saw } => write!(
                f,
                "store {store}: not written, the server holds {holds} of the part's commits, \
                 not the {saw} this writer saw land (a failover lost the last): the part is \
                 read again from what the server holds"
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Open { source, .. } => Some(source.as_ref()),
            StoreError::Backend { source, .. } => Some(source),
            StoreError::Merge { source, .. } => Some(source),
            StoreError::Remote { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// Why a late merge or a rollup could not combine a metric's buckets (what a [`MergeFn`] or
/// [`RollFn`] returns).
#[derive(Debug)]
pub enum CombineError {
    /// The batch names a metric the config does not have, or one without a rollup.
    NoMetric {
        /// The name in the batch.
        metric: String,
    },
    /// A bucket's bytes do not decode as the metric's.
    Decode(DecodeError),
    /// Two buckets of the metric do not merge.
    Merge(MergeError),
}

impl fmt::Display for CombineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CombineError::NoMetric { metric } => {
                write!(
                    f,
                    "no metric {metric:?} (or it has no rollup) in the config"
                )
            }
            CombineError::Decode(e) => write!(f, "a bucket does not decode: {e}"),
            CombineError::Merge(e) => write!(f, "buckets do not merge: {e}"),
        }
    }
}

impl std::error::Error for CombineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CombineError::NoMetric { .. } => None,
            CombineError::Decode(e) => Some(e),
            CombineError::Merge(e) => Some(e),
        }
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

/// Receives one key and all its buckets `(start, bytes)` in a range.
pub type KeyVisit<'a> = dyn FnMut(&[u8], &[(u64, Vec<u8>)]) + 'a;

/// Combines a stored bucket's bytes (`None`: nothing stored) with a late event's:
/// `(metric, start, stored, late)`.
pub type MergeFn<'a> = &'a dyn Fn(&str, u64, Option<&[u8]>, &[u8]) -> Result<Vec<u8>, CombineError>;

/// Combines a period's buckets `(start, bytes)` into its rollup bucket:
/// `(metric, period start, parts)`.
pub type RollFn<'a> = &'a dyn Fn(&str, u64, &[(u64, Vec<u8>)]) -> Result<Vec<u8>, CombineError>;

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

/// Open rows of keys spilled when their bucket closed: every row of `from` at `start` moves
/// to the metric `into` (before the batch's closed buckets, which overwrite them).
#[derive(Clone, Copy, Debug)]
pub struct PromoteRef<'a> {
    /// The open rows' table.
    pub from: &'a str,
    /// The metric's stored name.
    pub into: &'a str,
    /// The bucket start.
    pub start: u64,
}

/// A state row to write (`Some`) or delete (`None`); state tables carry no digests (each
/// row is checksummed itself).
#[derive(Clone, Copy, Debug)]
pub struct StateRef<'a> {
    /// The state table.
    pub table: &'a str,
    /// The row's start.
    pub start: u64,
    /// The key.
    pub key: &'a [u8],
    /// The value, or a deletion.
    pub bytes: Option<&'a [u8]>,
}

/// Key rows to sweep: every `(expiry, key)` of `index` with `expiry < before` deletes `key`'s
/// row in `rows` if that row still carries this expiry in its first 8 bytes.
#[derive(Clone, Copy, Debug)]
pub struct SweepRef<'a> {
    /// The expiry index.
    pub index: &'a str,
    /// The key rows.
    pub rows: &'a str,
    /// Sweep expiries before this.
    pub before: u64,
}

/// Everything one commit writes, atomically.
pub struct Batch<'a> {
    /// Open rows promoted into closed buckets, first.
    pub promote: Vec<PromoteRef<'a>>,
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
    /// Key rows to sweep, after the expiry.
    pub sweep: Vec<SweepRef<'a>>,
    /// Open-row tables and the start before which their rows are stale, deleted after the
    /// promotions.
    pub open_before: Vec<(&'a str, u64)>,
    /// State rows, last; rows of one key are written in this order (rows of different keys
    /// in the order that packs the store best).
    pub state: Vec<StateRef<'a>>,
    /// The new metadata.
    pub meta: &'a Meta,
}

/// Reads inside one transaction (one consistent view of the store). `table` is a metric's
/// stored name, or a name the store keeps for itself (starting with `#`, which no metric name
/// can).
pub trait ReadTxn {
    /// A metadata value.
    fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// One value.
    fn get(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;
    /// Every value of `table` with `from ≤ start < to`, by start then key.
    fn scan(&self, table: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError>;
    /// Up to `limit` values of `table` at exactly `start` whose key comes after `after` (all
    /// keys for `None`), by key; returns how many it visited.
    fn page(
        &self,
        table: &str,
        start: u64,
        after: Option<&[u8]>,
        limit: usize,
        f: &mut Visit<'_>,
    ) -> Result<usize, StoreError>;
    /// The smallest start `s` with `from ≤ s < to` that holds a value of `table`.
    fn next_start(&self, table: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError>;
}

/// Writes inside one transaction: all land or none.
pub trait Txn: ReadTxn {
    /// Writes a value, returning the one it replaced.
    fn put(
        &mut self,
        table: &str,
        start: u64,
        key: &[u8],
        bytes: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError>;
    /// Deletes one value, returning it.
    fn remove(
        &mut self,
        table: &str,
        start: u64,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError>;
    /// Deletes every value of `table` with `start < before`.
    fn remove_before(&mut self, table: &str, before: u64) -> Result<(), StoreError>;
    /// Writes a metadata value.
    fn set_meta(&mut self, name: &str, bytes: &[u8]) -> Result<(), StoreError>;
    /// Says which rows the transaction is about to read and replace (each `(table, start,
    /// key)`), so that a backend across a network fetches their values in a few round trips
    /// rather than one each. Nothing by default (the rows are not even walked).
    fn prefetch(
        &mut self,
        rows: &mut dyn Iterator<Item = (&str, u64, &[u8])>,
    ) -> Result<(), StoreError> {
        let _ = rows;
        Ok(())
    }
    /// Whether any row (of any table) sorts after this one's key: rows written past the last
    /// are appended, and a backend may lay them out differently (see `apply`'s
    /// `write_order`). `true` unless a backend knows better.
    fn rows_after(&self, _table: &str, _start: u64, _key: &[u8]) -> Result<bool, StoreError> {
        Ok(true)
    }
}

/// A bucket store: a backend's primitive transactions, and the pipeline's operations built on
/// them once for every backend.
pub trait Store {
    /// Runs `f` in one read transaction.
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn ReadTxn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// A read view of the last commit that the caller keeps (one transaction for many reads:
    /// the engine reads spilled keys back through it between two checkpoints). Later commits
    /// do not change it; take a new one after each.
    fn view(&self) -> Result<Box<dyn ReadTxn>, StoreError>;

    /// Runs `f` in one write transaction, committed if `f` succeeds, rolled back otherwise.
    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;

    /// The committed metadata, if anything was ever committed.
    fn meta(&self) -> Result<Option<Meta>, StoreError> {
        let mut out = None;
        self.read(&mut |r| {
            out = apply::read_meta(r)?;
            Ok(())
        })?;
        Ok(out)
    }

    /// Applies a batch atomically.
    fn commit(&mut self, batch: &Batch<'_>) -> Result<(), StoreError> {
        self.write(&mut |t| apply::commit(t, batch))
    }

    /// One stored bucket (its envelope is checked when decoded; its digest is not).
    fn get(&self, metric: &str, key: &[u8], start: u64) -> Result<Option<Vec<u8>>, StoreError> {
        let mut out = None;
        self.read(&mut |r| {
            out = r.get(metric, start, key)?;
            Ok(())
        })?;
        Ok(out)
    }

    /// Every stored bucket of `metric` with `from ≤ start < to`, by start then key, each
    /// start's entries checked against its digest: a mismatch is [`StoreError::Damaged`]
    /// (after `f` has seen the entries, so a caller discards what it gathered).
    fn scan(&self, metric: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        self.read(&mut |r| apply::scan_verified(r, metric, from, to, f))
    }

    /// Every key with stored buckets of `metric` in `[from, to)` (starts a multiple of
    /// `width`), in key order, once, with all its buckets `(start, bytes)`: the buckets of
    /// each start are read in pages side by side and merged by key, so memory holds a page per
    /// start, never every key. Each start's entries are checked against its digest as they
    /// pass; a mismatch is [`StoreError::Damaged`] (after `f` has seen entries). With `open`
    /// (the metric's open-bucket table), the open buckets in the range are merged in too
    /// (they have no digests: each row's summary checks itself when decoded).
    fn scan_by_key(
        &self,
        metric: &str,
        open: Option<&str>,
        from: u64,
        to: u64,
        width: u64,
        f: &mut KeyVisit<'_>,
    ) -> Result<(), StoreError> {
        self.read(&mut |r| apply::scan_by_key_verified(r, metric, open, from, to, width, f))
    }

    /// `key`'s buckets of `metric` in `[from, to)` (`(start, bytes)`, by start), then its rows
    /// of the open-bucket table `open` in the range: what [`Store::scan_by_key`] hands over for
    /// this key, read with one lookup per start. Each start read is checked against its digest
    /// as a scan checks it: read whole the first time, and after that against what
    /// [`Store::verified_starts`] remembers of it while its digest is unchanged (see
    /// [`VerifiedStarts`]). A mismatch is [`StoreError::Damaged`].
    fn key_buckets(
        &self,
        metric: &str,
        open: Option<&str>,
        from: u64,
        to: u64,
        key: &[u8],
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let none = VerifiedStarts::default();
        let memo = self.verified_starts().unwrap_or(&none);
        let mut out = Vec::new();
        self.read(&mut |r| {
            out = keyed::key_buckets_verified(r, metric, open, from, to, key, memo)?;
            Ok(())
        })?;
        Ok(out)
    }

    /// What this handle's keyed reads remember of the starts they verified (`None`: nothing,
    /// each read verifies its starts whole).
    fn verified_starts(&self) -> Option<&VerifiedStarts> {
        None
    }

    /// A number that changes with every commit (the metadata's seal, a hash of the run state
    /// each checkpoint rewrites): answers computed at one generation hold until it changes.
    /// `None` while nothing is committed.
    fn generation(&self) -> Result<Option<u64>, StoreError> {
        let mut out = None;
        self.read(&mut |r| {
            out = keyed::generation(r)?;
            Ok(())
        })?;
        Ok(out)
    }

    /// Checks every stored entry of `metric` against its digests, returning the number of
    /// entries (for `tidemark check`).
    fn verify(&self, metric: &str) -> Result<u64, StoreError> {
        let mut n = 0;
        self.read(&mut |r| apply::scan_verified(r, metric, 0, u64::MAX, &mut |_, _, _| n += 1))?;
        Ok(n)
    }
}
