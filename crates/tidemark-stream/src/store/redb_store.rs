//! The embedded store: one redb file.
//!
//! Opened in redb's single-writer mode: one `tidemark run` writes, and any number of readers
//! (`tidemark query`, other processes) open the same file read-only and see its commits as they
//! land — also on a read-only file system or a read-only copy. A writer's open verifies the
//! checksum of every page (redb's integrity check), so a file damaged on disk is refused
//! before anything is trusted; readers rely on the envelope checksums and digests (see the
//! [module docs](super)). redb can panic on some damaged files rather than return an error:
//! every call into it is contained here and reported as [`StoreError::Damaged`].

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use redb::{
    Builder, ConcurrencyMode, Database, DatabaseError, ReadOnlyDatabase, ReadableDatabase,
    ReadableTable, StorageError, TableDefinition, TableError,
};

use super::{ReadTxn, Store, StoreError, Txn, Visit};

/// A bucket's stored key: `(metric, start, key)`.
type BucketKey = (&'static str, u64, &'static [u8]);
const BUCKETS: TableDefinition<(&str, u64, &[u8]), &[u8]> = TableDefinition::new("buckets");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

enum Db {
    Writer(Database),
    Reader(ReadOnlyDatabase),
}

/// The embedded store: one redb file.
pub struct RedbStore {
    db: Db,
    path: PathBuf,
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

/// redb's page cache, bytes. Its default (1 GiB) is memory a run holds on top of its open
/// state; writes are sequential and reads are scans, which a small cache serves as well.
const CACHE_BYTES: usize = 64 << 20;

fn builder() -> Builder {
    let mut b = Builder::new();
    b.set_concurrency_mode(ConcurrencyMode::SingleWriter);
    b.set_cache_size(CACHE_BYTES);
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
        regular_or_absent(path)?;
        let started = std::time::Instant::now();
        loop {
            let opened = contained("opening it", || {
                let mut b = builder();
                b.set_check_integrity_on_open(true);
                b.create(path).map_err(|e| open_error(path, e))
            });
            match opened {
                Err(StoreError::Locked { .. }) if started.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                opened => {
                    return Ok(RedbStore {
                        db: Db::Writer(opened?),
                        path: path.to_path_buf(),
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
            db: Db::Writer(db),
            path: path.to_path_buf(),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

struct RedbRead {
    buckets: Option<redb::ReadOnlyTable<BucketKey, &'static [u8]>>,
    meta: Option<redb::ReadOnlyTable<&'static str, &'static [u8]>>,
}

fn scan_table<T>(
    t: &T,
    table: &str,
    from: u64,
    to: u64,
    f: &mut Visit<'_>,
) -> Result<(), StoreError>
where
    T: ReadableTable<BucketKey, &'static [u8]>,
{
    if from >= to {
        return Ok(());
    }
    let lo: (&str, u64, &[u8]) = (table, from, &[]);
    let hi: (&str, u64, &[u8]) = (table, to, &[]);
    for entry in t.range(lo..hi).map_err(err("scan"))? {
        let (k, v) = entry.map_err(err("scan"))?;
        let (_, start, key) = k.value();
        f(key, start, v.value());
    }
    Ok(())
}

fn page_table<T>(
    t: &T,
    table: &str,
    start: u64,
    after: Option<&[u8]>,
    limit: usize,
    f: &mut Visit<'_>,
) -> Result<usize, StoreError>
where
    T: ReadableTable<BucketKey, &'static [u8]>,
{
    use std::ops::Bound;
    let lo: Bound<(&str, u64, &[u8])> = match after {
        Some(k) => Bound::Excluded((table, start, k)),
        None => Bound::Included((table, start, &[])),
    };
    let Some(next) = start.checked_add(1) else {
        return Ok(0);
    };
    let hi: Bound<(&str, u64, &[u8])> = Bound::Excluded((table, next, &[]));
    let mut n = 0;
    for entry in t
        .range::<(&str, u64, &[u8])>((lo, hi))
        .map_err(err("scan"))?
    {
        if n == limit {
            break;
        }
        let (k, v) = entry.map_err(err("scan"))?;
        let (_, s, key) = k.value();
        f(key, s, v.value());
        n += 1;
    }
    Ok(n)
}

fn next_start_in<T>(t: &T, table: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError>
where
    T: ReadableTable<BucketKey, &'static [u8]>,
{
    if from >= to {
        return Ok(None);
    }
    let lo: (&str, u64, &[u8]) = (table, from, &[]);
    let hi: (&str, u64, &[u8]) = (table, to, &[]);
    match t.range(lo..hi).map_err(err("scan"))?.next() {
        None => Ok(None),
        Some(entry) => {
            let (k, _) = entry.map_err(err("scan"))?;
            Ok(Some(k.value().1))
        }
    }
}

// Every call is contained: a view kept across calls (see [`Store::view`]) has no
// surrounding `read` to catch a panic inside redb.
impl ReadTxn for RedbRead {
    fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(t) = &self.meta else { return Ok(None) };
        contained("reading it", || {
            Ok(t.get(name)
                .map_err(err("read metadata"))?
                .map(|v| v.value().to_vec()))
        })
    }

    fn get(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(t) = &self.buckets else {
            return Ok(None);
        };
        contained("reading it", || {
            Ok(t.get((table, start, key))
                .map_err(err("get"))?
                .map(|v| v.value().to_vec()))
        })
    }

    fn scan(&self, table: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        match &self.buckets {
            Some(t) => contained("reading it", || scan_table(t, table, from, to, f)),
            None => Ok(()),
        }
    }

    fn page(
        &self,
        table: &str,
        start: u64,
        after: Option<&[u8]>,
        limit: usize,
        f: &mut Visit<'_>,
    ) -> Result<usize, StoreError> {
        match &self.buckets {
            Some(t) => contained("reading it", || {
                page_table(t, table, start, after, limit, f)
            }),
            None => Ok(0),
        }
    }

    fn next_start(&self, table: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError> {
        match &self.buckets {
            Some(t) => contained("reading it", || next_start_in(t, table, from, to)),
            None => Ok(None),
        }
    }
}

struct RedbWrite<'a> {
    buckets: redb::Table<'a, BucketKey, &'static [u8]>,
    meta: redb::Table<'a, &'static str, &'static [u8]>,
}

impl ReadTxn for RedbWrite<'_> {
    fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .meta
            .get(name)
            .map_err(err("read metadata"))?
            .map(|v| v.value().to_vec()))
    }

    fn get(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .buckets
            .get((table, start, key))
            .map_err(err("get"))?
            .map(|v| v.value().to_vec()))
    }

    fn scan(&self, table: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        scan_table(&self.buckets, table, from, to, f)
    }

    fn page(
        &self,
        table: &str,
        start: u64,
        after: Option<&[u8]>,
        limit: usize,
        f: &mut Visit<'_>,
    ) -> Result<usize, StoreError> {
        page_table(&self.buckets, table, start, after, limit, f)
    }

    fn next_start(&self, table: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError> {
        next_start_in(&self.buckets, table, from, to)
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
            .buckets
            .insert((table, start, key), bytes)
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
            .buckets
            .remove((table, start, key))
            .map_err(err("delete"))?
            .map(|v| v.value().to_vec()))
    }

    fn remove_before(&mut self, table: &str, before: u64) -> Result<(), StoreError> {
        let lo: (&str, u64, &[u8]) = (table, 0, &[]);
        let hi: (&str, u64, &[u8]) = (table, before, &[]);
        self.buckets
            .retain_in(lo..hi, |_, _| false)
            .map_err(err("delete"))
    }

    fn set_meta(&mut self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.meta
            .insert(name, bytes)
            .map_err(err("write metadata"))?;
        Ok(())
    }
}

fn open_read<T: ReadableDatabase>(db: &T) -> Result<RedbRead, StoreError> {
    let tx = db.begin_read().map_err(err("begin a read"))?;
    let buckets = match tx.open_table(BUCKETS) {
        Ok(t) => Some(t),
        Err(TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(err("open buckets")(e)),
    };
    let meta = match tx.open_table(META) {
        Ok(t) => Some(t),
        Err(TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(err("open metadata")(e)),
    };
    // Both tables are created by the first commit: one without the other is a damaged
    // table directory, never an empty store.
    if buckets.is_some() != meta.is_some() {
        return Err(StoreError::damaged(format!(
            "the {} table is missing",
            if buckets.is_none() {
                "buckets"
            } else {
                "metadata"
            }
        )));
    }
    Ok(RedbRead { buckets, meta })
}

impl Store for RedbStore {
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn ReadTxn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        contained("reading it", || {
            let r = match &self.db {
                Db::Writer(db) => open_read(db)?,
                Db::Reader(db) => open_read(db)?,
            };
            f(&r)
        })
    }

    fn view(&self) -> Result<Box<dyn ReadTxn>, StoreError> {
        contained("reading it", || {
            let r = match &self.db {
                Db::Writer(db) => open_read(db)?,
                Db::Reader(db) => open_read(db)?,
            };
            Ok(Box::new(r) as Box<dyn ReadTxn>)
        })
    }

    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let Db::Writer(db) = &self.db else {
            return Err(StoreError::Open {
                path: self.path.clone(),
                source: "opened for reading only".into(),
            });
        };
        contained("writing it", || {
            let tx = db.begin_write().map_err(err("begin a write"))?;
            {
                let mut w = RedbWrite {
                    buckets: tx.open_table(BUCKETS).map_err(err("open buckets"))?,
                    meta: tx.open_table(META).map_err(err("open metadata"))?,
                };
                f(&mut w)?;
            }
            tx.commit().map_err(err("commit"))
        })
    }
}
