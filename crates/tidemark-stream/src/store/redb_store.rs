//! The embedded store: one redb file.
//!
//! Opened in redb's single-writer mode: one `tidemark run` writes, and any number of readers
//! (`tidemark query`, other processes) open the same file read-only and see its commits as they
//! land — also on a read-only file system or a read-only copy. A writer's open verifies the
//! checksum of every page (redb's integrity check), so a file damaged on disk is refused
//! before anything is trusted; readers rely on the envelope checksums and digests (see the
//! [module docs](super)). redb can panic on some damaged files rather than return an error:
//! every call into it is contained here and reported as [`StoreError::Damaged`].
//!
//! Every row — buckets, digests, the keys' state rows — lives in one table, `rows`, keyed by
//! the bytes of [`super::row_key`]. Stores written before kept them in `buckets`, keyed by a
//! tuple: such a file is read as it is ([`Rows`]), and converted by a run's open (or, opened
//! otherwise, by its first write).

use std::ops::Bound;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use redb::{
    Builder, ConcurrencyMode, Database, DatabaseError, ReadOnlyDatabase, ReadableDatabase,
    ReadableTable, StorageError, TableDefinition, TableError, TableHandle,
};

use super::row_key::{row_key, split_row_key};

mod space;
use super::{ReadTxn, Store, StoreError, Txn, VerifiedStarts, Visit};
pub use space::Space;

/// Every row — buckets, digests, state rows — keyed by [`row_key`].
const ROWS: TableDefinition<&[u8], &[u8]> = TableDefinition::new("rows");
/// The rows as stores written before 2026-12-02's byte keys keep them, keyed by the tuple
/// `(table, start, key)`: a run's open (or a first write) converts them into [`ROWS`] (see
/// [`convert_tuple_rows`]).
const TUPLE_ROWS: TableDefinition<(&str, u64, &[u8]), &[u8]> = TableDefinition::new("buckets");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

enum Db {
    Writer {
        db: Database,
        /// Whether the file's rows are known to be in [`ROWS`]: a store of the old layout is
        /// converted by a run's open ([`RedbStore::open`]), or else by its first write;
        /// never by the opens of `check` and `query`, which only read.
        converted: bool,
    },
    Reader(ReadOnlyDatabase),
}

/// The embedded store: one redb file.
pub struct RedbStore {
    db: Db,
    path: PathBuf,
    /// What keyed reads remember of the starts they verified (nothing unless asked).
    verified: VerifiedStarts,
    /// The file's length when a run opened it: [`RedbStore::compact_if_loose`] looks for
    /// free pages only once the file has grown past it by an eighth.
    opened_len: Option<u64>,
}

fn backend(op: &'static str) -> impl Fn(redb::Error) -> StoreError {
    move |e| match e {
        redb::Error::Corrupted(what) => StoreError::damaged(what),
        redb::Error::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            StoreError::damaged(format!("the file ends early, truncated ({op}: {io})"))
        }
        // A table whose stored types are not the ones tidemark writes: its definition is
        // damaged (no tidemark writes other types under these names).
        e @ (redb::Error::TableTypeMismatch { .. }
        | redb::Error::TableIsMultimap(_)
        | redb::Error::TableIsNotMultimap(_)
        | redb::Error::TypeDefinitionChanged { .. }) => StoreError::damaged(format!("{op}: {e}")),
        source => StoreError::Backend { op, source },
    }
}

fn err<E: Into<redb::Error>>(op: &'static str) -> impl Fn(E) -> StoreError {
    let f = backend(op);
    move |e| f(e.into())
}

thread_local! {
    /// Whether this thread is inside [`contained`]: its panics are answered as damage, so the
    /// panic hook says nothing of them.
    static CONTAINING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs, once, a panic hook that is silent for panics [`contained`] turns into errors
/// and hands every other panic to the hook that was there before.
fn quiet_contained_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CONTAINING.with(|c| c.get()) {
                before(info);
            }
        }));
    });
}

/// Runs a call into redb, turning a panic inside it into [`StoreError::Damaged`] (a damaged
/// file can trip redb's own assertions), without the panic's message on standard error.
fn contained<T>(what: &str, f: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
    quiet_contained_panics();
    let outer = CONTAINING.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    CONTAINING.with(|c| c.set(outer));
    match result {
        Ok(r) => r,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            Err(StoreError::damaged(format!(
                "the database failed while {what} ({msg})"
            )))
        }
    }
}

/// How long a writer's open waits for a lock another process holds.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// redb's page cache, bytes, at most. Its default (1 GiB) is memory a run holds on top of its
/// open state; writes are sequential and reads are scans, which a small cache serves as well.
const CACHE_BYTES: usize = 64 << 20;

/// The page cache of a run whose state may hold `max_memory` bytes: a quarter of that, from
/// 4 MiB to [`CACHE_BYTES`], so that a small budget bounds the whole process, not the state
/// alone.
pub fn cache_for(max_memory: u64) -> usize {
    (max_memory / 4).clamp(4 << 20, CACHE_BYTES as u64) as usize
}

fn builder() -> Builder {
    builder_with(CACHE_BYTES)
}

fn builder_with(cache: usize) -> Builder {
    let mut b = Builder::new();
    b.set_concurrency_mode(ConcurrencyMode::SingleWriter);
    b.set_cache_size(cache);
    b
}

fn open_error(path: &Path, e: DatabaseError) -> StoreError {
    match e {
        DatabaseError::DatabaseAlreadyOpen => StoreError::Locked {
            path: path.to_path_buf(),
        },
        DatabaseError::Storage(StorageError::Corrupted(what)) => StoreError::damaged(what),
        DatabaseError::Storage(StorageError::Io(io))
            if io.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            StoreError::damaged(format!("the file ends early, truncated ({io})"))
        }
        e => StoreError::Open {
            path: path.to_path_buf(),
            source: Box::new(e),
        },
    }
}

/// Refuses a path that is not there, or is no regular file.
fn existing_regular(path: &Path) -> Result<(), StoreError> {
    if !path.exists() {
        return Err(StoreError::Open {
            path: path.to_path_buf(),
            source: "no such file".into(),
        });
    }
    regular_or_absent(path)
}

/// Refuses a path that is there but is no regular file (a directory, a FIFO, a device).
fn regular_or_absent(path: &Path) -> Result<(), StoreError> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(StoreError::Open {
            path: path.to_path_buf(),
            source: "not a regular file".into(),
        }),
        _ => Ok(()),
    }
}

impl RedbStore {
    /// Opens the file for writing, creating it if absent; an existing file's pages are all
    /// verified first.
    ///
    /// A lock still held is waited for, up to [`LOCK_WAIT`]: a process killed a moment ago can
    /// hold the file's locks until the kernel has finished closing its files, and a run
    /// restarted right after a kill would otherwise be refused.
    pub fn open(path: &Path) -> Result<RedbStore, StoreError> {
        RedbStore::open_for_run(path, u64::MAX)
    }

    /// [`RedbStore::open`] for a run whose state budget is `max_memory`: its page cache is
    /// [`cache_for`] the budget.
    pub fn open_for_run(path: &Path, max_memory: u64) -> Result<RedbStore, StoreError> {
        regular_or_absent(path)?;
        let started = std::time::Instant::now();
        loop {
            let opened = contained("opening it", || {
                let mut b = builder_with(cache_for(max_memory));
                b.set_check_integrity_on_open(true);
                let mut db = b.create(path).map_err(|e| open_error(path, e))?;
                // Before any read is open, so that the compaction can run.
                convert_tuple_rows(&mut db)?;
                Ok(db)
            });
            match opened {
                Err(StoreError::Locked { .. }) if started.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                opened => {
                    return Ok(RedbStore {
                        db: Db::Writer {
                            db: opened?,
                            converted: true,
                        },
                        path: path.to_path_buf(),
                        verified: VerifiedStarts::default(),
                        opened_len: std::fs::metadata(path).ok().map(|m| m.len()),
                    })
                }
            }
        }
    }

    /// Opens an existing file for reading (queries): an absent file is an error, not a new
    /// store. Works while a writer has the file open, and on a read-only file.
    pub fn open_existing(path: &Path) -> Result<RedbStore, StoreError> {
        existing_regular(path)?;
        let db = contained("opening it", || match builder().open_read_only(path) {
            Err(DatabaseError::RepairAborted) => Ok(None),
            r => r.map(Some).map_err(|e| open_error(path, e)),
        })?;
        match db {
            Some(db) => Ok(RedbStore {
                db: Db::Reader(db),
                path: path.to_path_buf(),
                verified: VerifiedStarts::default(),
                opened_len: None,
            }),
            // A run was interrupted and no writer holds the file: a reader cannot repair
            // it, a writer's open does (verifying every page as it goes).
            None => RedbStore::open_existing_writable(path).map_err(|e| match e {
                StoreError::Open { path, source } => StoreError::Open {
                    path,
                    source: format!(
                        "it needs the repair redb makes after an interrupted run, which \
                         needs write access ({source}): run `tidemark check` on it once \
                         where it is writable"
                    )
                    .into(),
                },
                e => e,
            }),
        }
    }

    /// Opens an existing file to read it, verifying every page first when no other process
    /// writes it (a writer's open); while a run writes it, or on a read-only file, it is opened
    /// read-only, its pages unverified (the digests and checksums still are). Returns whether
    /// the pages were verified.
    pub fn open_to_read(path: &Path) -> Result<(RedbStore, bool), StoreError> {
        match RedbStore::open_existing_writable(path) {
            Ok(s) => Ok((s, true)),
            Err(StoreError::Locked { .. }) | Err(StoreError::Open { .. }) => {
                RedbStore::open_existing(path).map(|s| (s, false))
            }
            Err(e) => Err(e),
        }
    }

    /// Opens an existing file for writing (never creating one), verifying every page.
    pub fn open_existing_writable(path: &Path) -> Result<RedbStore, StoreError> {
        existing_regular(path)?;
        let db = contained("opening it", || {
            let mut b = builder();
            b.set_check_integrity_on_open(true);
            b.open(path).map_err(|e| open_error(path, e))
        })?;
        Ok(RedbStore {
            db: Db::Writer {
                db,
                converted: false,
            },
            path: path.to_path_buf(),
            verified: VerifiedStarts::default(),
            opened_len: None,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file is open read-only (beside any writer), rather than as its writer.
    pub fn is_read_only(&self) -> bool {
        matches!(self.db, Db::Reader(_))
    }

    /// Makes keyed reads ([`Store::key_buckets`]) remember what they verified of each bucket
    /// start, up to `entries` entries (16 bytes each), so that a handle kept for many reads
    /// (a server's) reads each start whole once rather than at every read.
    pub fn remember_verified(mut self, entries: usize) -> RedbStore {
        self.verified = VerifiedStarts::with_capacity(entries);
        self
    }
}

struct RedbRead {
    rows: Option<Rows>,
    meta: Option<redb::ReadOnlyTable<&'static str, &'static [u8]>>,
}

/// The rows a reader sees, in the layout the file keeps them in.
enum Rows {
    Bytes(redb::ReadOnlyTable<&'static [u8], &'static [u8]>),
    /// A store written before byte keys, read where it is not converted (a reader's open
    /// cannot write).
    Tuples(redb::ReadOnlyTable<TupleKey, &'static [u8]>),
}

/// [`TUPLE_ROWS`]' key.
type TupleKey = (&'static str, u64, &'static [u8]);

/// A walk's visitor: a row's start, key and value; `false` ends the walk.
type Walk<'f> = dyn FnMut(u64, &[u8], &[u8]) -> bool + 'f;

/// Where a walk over one table begins: at a start's first row, or after a row.
#[derive(Clone, Copy)]
enum Begin<'k> {
    At(u64),
    After(u64, &'k [u8]),
}

impl Begin<'_> {
    fn start(self) -> u64 {
        match self {
            Begin::At(s) | Begin::After(s, _) => s,
        }
    }
}

/// Walks `table`'s rows of a byte-keyed table from `begin` to the start `end` (excluded).
fn walk_bytes<T>(
    t: &T,
    table: &str,
    begin: Begin<'_>,
    end: u64,
    f: &mut Walk<'_>,
) -> Result<(), StoreError>
where
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    if begin.start() >= end {
        return Ok(());
    }
    let (lo, after) = match begin {
        Begin::At(s) => (row_key(table, s, &[])?, false),
        Begin::After(s, k) => (row_key(table, s, k)?, true),
    };
    let hi = row_key(table, end, &[])?;
    let lo = match after {
        true => Bound::Excluded(lo.as_slice()),
        false => Bound::Included(lo.as_slice()),
    };
    for entry in t
        .range::<&[u8]>((lo, Bound::Excluded(hi.as_slice())))
        .map_err(err("scan"))?
    {
        let (k, v) = entry.map_err(err("scan"))?;
        let (start, key) = split_row_key(table, k.value())?;
        if !f(start, key, v.value()) {
            break;
        }
    }
    Ok(())
}

/// [`walk_bytes`] over [`TUPLE_ROWS`].
fn walk_tuples<T>(
    t: &T,
    table: &str,
    begin: Begin<'_>,
    end: u64,
    f: &mut Walk<'_>,
) -> Result<(), StoreError>
where
    T: ReadableTable<TupleKey, &'static [u8]>,
{
    if begin.start() >= end {
        return Ok(());
    }
    let lo = match begin {
        Begin::At(s) => Bound::Included((table, s, &[][..])),
        Begin::After(s, k) => Bound::Excluded((table, s, k)),
    };
    let hi = Bound::Excluded((table, end, &[][..]));
    for entry in t
        .range::<(&str, u64, &[u8])>((lo, hi))
        .map_err(err("scan"))?
    {
        let (k, v) = entry.map_err(err("scan"))?;
        let (_, start, key) = k.value();
        if !f(start, key, v.value()) {
            break;
        }
    }
    Ok(())
}

/// A source of rows and metadata, either layout: every [`ReadTxn`] read is written once
/// over it, below.
trait RowSource {
    /// Visits `table`'s rows from `begin` to the start `end` (excluded), in order.
    fn walk(
        &self,
        table: &str,
        begin: Begin<'_>,
        end: u64,
        f: &mut Walk<'_>,
    ) -> Result<(), StoreError>;

    fn row(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;

    fn meta_row(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;
}

// Every call is contained: a view kept across calls (see [`Store::view`]) has no
// surrounding `read` to catch a panic inside redb (inside a write, containing twice is
// harmless).
impl<S: RowSource> ReadTxn for S {
    fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        contained("reading it", || self.meta_row(name))
    }

    fn get(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        contained("reading it", || self.row(table, start, key))
    }

    fn scan(&self, table: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        contained("reading it", || {
            self.walk(table, Begin::At(from), to, &mut |s, k, v| {
                f(k, s, v);
                true
            })
        })
    }

    fn page(
        &self,
        table: &str,
        start: u64,
        after: Option<&[u8]>,
        limit: usize,
        f: &mut Visit<'_>,
    ) -> Result<usize, StoreError> {
        let (Some(end), true) = (start.checked_add(1), limit > 0) else {
            return Ok(0);
        };
        let begin = match after {
            Some(k) => Begin::After(start, k),
            None => Begin::At(start),
        };
        let mut n = 0;
        contained("reading it", || {
            self.walk(table, begin, end, &mut |s, k, v| {
                f(k, s, v);
                n += 1;
                n < limit
            })
        })?;
        Ok(n)
    }

    fn next_start(&self, table: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError> {
        let mut first = None;
        contained("reading it", || {
            self.walk(table, Begin::At(from), to, &mut |s, _, _| {
                first = Some(s);
                false
            })
        })?;
        Ok(first)
    }
}

impl RowSource for RedbRead {
    fn walk(
        &self,
        table: &str,
        begin: Begin<'_>,
        end: u64,
        f: &mut Walk<'_>,
    ) -> Result<(), StoreError> {
        match &self.rows {
            Some(Rows::Bytes(t)) => walk_bytes(t, table, begin, end, f),
            Some(Rows::Tuples(t)) => walk_tuples(t, table, begin, end, f),
            None => Ok(()),
        }
    }

    fn row(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        match &self.rows {
            Some(Rows::Bytes(t)) => byte_row(t, table, start, key),
            Some(Rows::Tuples(t)) => Ok(t
                .get((table, start, key))
                .map_err(err("get"))?
                .map(|v| v.value().to_vec())),
            None => Ok(None),
        }
    }

    fn meta_row(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match &self.meta {
            Some(t) => meta_value(t, name),
            None => Ok(None),
        }
    }
}

/// A row of a byte-keyed table, for the reader and the writer alike.
fn byte_row<T>(t: &T, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>
where
    T: ReadableTable<&'static [u8], &'static [u8]>,
{
    Ok(t.get(row_key(table, start, key)?.as_slice())
        .map_err(err("get"))?
        .map(|v| v.value().to_vec()))
}

/// A metadata value, for the reader and the writer alike.
fn meta_value<T>(t: &T, name: &str) -> Result<Option<Vec<u8>>, StoreError>
where
    T: ReadableTable<&'static str, &'static [u8]>,
{
    Ok(t.get(name)
        .map_err(err("read metadata"))?
        .map(|v| v.value().to_vec()))
}

struct RedbWrite<'a> {
    rows: redb::Table<'a, &'static [u8], &'static [u8]>,
    meta: redb::Table<'a, &'static str, &'static [u8]>,
}

impl RowSource for RedbWrite<'_> {
    fn walk(
        &self,
        table: &str,
        begin: Begin<'_>,
        end: u64,
        f: &mut Walk<'_>,
    ) -> Result<(), StoreError> {
        walk_bytes(&self.rows, table, begin, end, f)
    }

    fn row(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        byte_row(&self.rows, table, start, key)
    }

    fn meta_row(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        meta_value(&self.meta, name)
    }
}

impl Txn for RedbWrite<'_> {
    fn put(
        &mut self,
        table: &str,
        start: u64,
        key: &[u8],
        bytes: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .rows
            .insert(row_key(table, start, key)?.as_slice(), bytes)
            .map_err(err("put"))?
            .map(|v| v.value().to_vec()))
    }

    fn remove(
        &mut self,
        table: &str,
        start: u64,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .rows
            .remove(row_key(table, start, key)?.as_slice())
            .map_err(err("delete"))?
            .map(|v| v.value().to_vec()))
    }

    fn remove_before(&mut self, table: &str, before: u64) -> Result<(), StoreError> {
        let lo = row_key(table, 0, &[])?;
        let hi = row_key(table, before, &[])?;
        self.rows
            .retain_in(lo.as_slice()..hi.as_slice(), |_, _| false)
            .map_err(err("delete"))
    }

    fn rows_after(&self, table: &str, start: u64, key: &[u8]) -> Result<bool, StoreError> {
        let k = row_key(table, start, key)?;
        let mut after = self
            .rows
            .range::<&[u8]>((Bound::Excluded(k.as_slice()), Bound::Unbounded))
            .map_err(err("read"))?;
        Ok(after.next().transpose().map_err(err("read"))?.is_some())
    }

    fn set_meta(&mut self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.meta
            .insert(name, bytes)
            .map_err(err("write metadata"))?;
        Ok(())
    }
}

/// Converts a store written before byte keys ([`TUPLE_ROWS`]) into [`ROWS`] (a no-op for any
/// other store), in one transaction: a crash leaves the old store or the new, never a mixture.
/// Each row keeps its value; only its key is written anew. A store holding both tables is
/// damaged. Then the file is compacted: the old table's pages, freed, would otherwise stay in
/// it (the fan-out demo's 80 MB store was 321 MB converted, 97 MB compacted: rows inserted in
/// key order leave half-full leaves, until retention replaces them; a fresh store of the same
/// rows is 74 MB).
fn convert_tuple_rows(db: &mut Database) -> Result<(), StoreError> {
    let tx = db.begin_write().map_err(err("begin a write"))?;
    let names: Vec<String> = tx
        .list_tables()
        .map_err(err("list tables"))?
        .map(|t| t.name().to_string())
        .collect();
    let has = |d: &str| names.iter().any(|n| n == d);
    if !has(TUPLE_ROWS.name()) {
        return Ok(()); // dropping `tx` aborts it: nothing written
    }
    if has(ROWS.name()) {
        return Err(both_layouts());
    }
    {
        let old = tx.open_table(TUPLE_ROWS).map_err(err("open buckets"))?;
        let mut new = tx.open_table(ROWS).map_err(err("open rows"))?;
        for entry in old.iter().map_err(err("convert"))? {
            let (k, v) = entry.map_err(err("convert"))?;
            let (table, start, key) = k.value();
            new.insert(row_key(table, start, key)?.as_slice(), v.value())
                .map_err(err("convert"))?;
        }
    }
    tx.delete_table(TUPLE_ROWS).map_err(err("convert"))?;
    tx.commit().map_err(err("commit"))?;
    // Only space is at stake: a compaction refused (a reader in another process holds an
    // old page) leaves a valid, larger file, and the run goes on.
    let _reclaimed = db.compact().is_ok();
    Ok(())
}

/// A file holding both [`ROWS`] and [`TUPLE_ROWS`]: no conversion leaves one (it is one
/// transaction), so only damage does.
fn both_layouts() -> StoreError {
    StoreError::damaged("it holds rows keyed both the old way and the new")
}

fn open_read<T: ReadableDatabase>(db: &T) -> Result<RedbRead, StoreError> {
    let tx = db.begin_read().map_err(err("begin a read"))?;
    let bytes = match tx.open_table(ROWS) {
        Ok(t) => Some(Rows::Bytes(t)),
        Err(TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(err("open rows")(e)),
    };
    // The old layout is read as it is until a write converts it.
    let tuples = match tx.open_table(TUPLE_ROWS) {
        Ok(t) => Some(Rows::Tuples(t)),
        Err(TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(err("open buckets")(e)),
    };
    let meta = match tx.open_table(META) {
        Ok(t) => Some(t),
        Err(TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(err("open metadata")(e)),
    };
    let rows = match (bytes, tuples) {
        (Some(_), Some(_)) => return Err(both_layouts()),
        (bytes, tuples) => bytes.or(tuples),
    };
    // Both tables are created by the first commit: one without the other is a damaged
    // table directory, never an empty store.
    if rows.is_some() != meta.is_some() {
        return Err(StoreError::damaged(format!(
            "the {} table is missing",
            if rows.is_none() { "rows" } else { "metadata" }
        )));
    }
    Ok(RedbRead { rows, meta })
}

impl Store for RedbStore {
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn ReadTxn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        contained("reading it", || {
            let r = match &self.db {
                Db::Writer { db, .. } => open_read(db)?,
                Db::Reader(db) => open_read(db)?,
            };
            f(&r)
        })
    }

    fn verified_starts(&self) -> Option<&VerifiedStarts> {
        Some(&self.verified)
    }

    fn view(&self) -> Result<Box<dyn ReadTxn>, StoreError> {
        contained("reading it", || {
            let r = match &self.db {
                Db::Writer { db, .. } => open_read(db)?,
                Db::Reader(db) => open_read(db)?,
            };
            Ok(Box::new(r) as Box<dyn ReadTxn>)
        })
    }

    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let Db::Writer { db, converted } = &mut self.db else {
            return Err(StoreError::Open {
                path: self.path.clone(),
                source: "opened for reading only".into(),
            });
        };
        if !*converted {
            contained("converting it", || convert_tuple_rows(db))?;
            *converted = true;
        }
        contained("writing it", || {
            let tx = db.begin_write().map_err(err("begin a write"))?;
            {
                let mut w = RedbWrite {
                    rows: tx.open_table(ROWS).map_err(err("open rows"))?,
                    meta: tx.open_table(META).map_err(err("open metadata"))?,
                };
                f(&mut w)?;
            }
            tx.commit().map_err(err("commit"))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    type Model = BTreeMap<(String, u64, Vec<u8>), Vec<u8>>;

    /// Every read a reader makes, against the model: whole scans, pages after each row,
    /// first starts in ranges.
    fn reads_match(s: &RedbStore, model: &Model) -> Result<(), StoreError> {
        s.read(&mut |r| {
            for table in ["a", "~open/a", "b"] {
                let want: Vec<(u64, Vec<u8>, Vec<u8>)> = model
                    .iter()
                    .filter(|((t, _, _), _)| t == table)
                    .map(|((_, s, k), v)| (*s, k.clone(), v.clone()))
                    .collect();
                let mut got = Vec::new();
                r.scan(table, 0, u64::MAX, &mut |k, s, v| {
                    got.push((s, k.to_vec(), v.to_vec()))
                })?;
                assert_eq!(got, want, "{table}");
                // A page from a start's first row, and pages of no rows.
                for start in [0u64, 60_000, 1 << 40, u64::MAX - 1, 5] {
                    let mut page = Vec::new();
                    let n = r.page(table, start, None, 3, &mut |k, s, _| {
                        page.push((s, k.to_vec()))
                    })?;
                    let first: Vec<(u64, Vec<u8>)> = want
                        .iter()
                        .filter(|w| w.0 == start)
                        .take(3)
                        .map(|w| (w.0, w.1.clone()))
                        .collect();
                    assert_eq!((n, page), (first.len(), first), "{table} from {start}");
                    assert_eq!(r.page(table, start, None, 0, &mut |_, _, _| ())?, 0);
                }
                for (s, k, v) in &want {
                    assert_eq!(r.get(table, *s, k)?.as_ref(), Some(v));
                    let mut next = Vec::new();
                    let n = r.page(table, *s, Some(k), 1, &mut |k, s, _| {
                        next.push((s, k.to_vec()))
                    })?;
                    let after: Vec<(u64, Vec<u8>)> = want
                        .iter()
                        .filter(|(t, j, _)| t == s && j > k)
                        .take(1)
                        .map(|(t, j, _)| (*t, j.clone()))
                        .collect();
                    assert_eq!((n, next), (after.len(), after), "{table} after {s} {k:?}");
                    let first = want.iter().map(|w| w.0).find(|&t| t > *s);
                    assert_eq!(r.next_start(table, *s + 1, u64::MAX)?, first);
                }
            }
            Ok(())
        })
    }

    type TestResult<T> = Result<T, Box<dyn std::error::Error>>;

    /// A store file of the old layout at `path`, and the model of its rows.
    fn old_store(path: &Path) -> TestResult<Model> {
        let _ = std::fs::remove_file(path);
        let mut model = Model::new();
        let db = Database::create(path)?;
        let tx = db.begin_write()?;
        {
            let mut t = tx.open_table(TUPLE_ROWS)?;
            // Neighbouring names ("a" and "~open/a"), keys that are prefixes of others, the
            // empty key, starts far apart.
            for (i, table) in ["a", "~open/a", "b"].into_iter().enumerate() {
                for start in [0u64, 60_000, 1 << 40, u64::MAX - 1] {
                    for key in [&b""[..], b"k", b"k\0", b"ka", b"\xff"] {
                        let v = format!("{table}{start}{key:?}{i}").into_bytes();
                        t.insert((table, start, key), v.as_slice())?;
                        model.insert((table.to_string(), start, key.to_vec()), v);
                    }
                }
            }
            let mut m = tx.open_table(META)?;
            m.insert("x", b"y".as_slice())?;
        }
        tx.commit()?;
        Ok(model)
    }

    /// The file's tables, read beside any writer (as `query` reads).
    fn tables(p: &Path) -> TestResult<Vec<String>> {
        let db = builder().open_read_only(p)?;
        let tx = db.begin_read()?;
        let names = tx.list_tables()?.map(|t| t.name().to_string()).collect();
        Ok(names)
    }

    #[test]
    fn a_store_of_tuple_rows_is_read_as_it_is_and_converted_by_a_run_or_a_write() -> TestResult<()>
    {
        let dir = std::env::temp_dir().join(format!("tidemark-tuples-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("old.db");
        let mut model = old_store(&path)?;
        // A reader reads the old layout as it is, and leaves it so; so does a writable open
        // (`check` opens so, and never writes).
        reads_match(&RedbStore::open_existing(&path)?, &model)?;
        let mut s = RedbStore::open_existing_writable(&path)?;
        reads_match(&s, &model)?;
        assert_eq!(tables(&path)?, ["buckets", "meta"]);
        // Its first write converts it, then writes: here, deletes a table's first starts.
        s.write(&mut |t| t.remove_before("a", 1 << 40))?;
        model.retain(|(t, start, _), _| !(t == "a" && *start < 1 << 40));
        drop(s);
        assert_eq!(tables(&path)?, ["meta", "rows"]);
        reads_match(&RedbStore::open_existing(&path)?, &model)?;
        // A run's open converts it at once, before anything is read or written.
        let model = old_store(&path)?;
        let s = RedbStore::open(&path)?;
        assert_eq!(tables(&path)?, ["meta", "rows"]);
        reads_match(&s, &model)?;
        drop(s);
        reads_match(&RedbStore::open_existing(&path)?, &model)?;
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
