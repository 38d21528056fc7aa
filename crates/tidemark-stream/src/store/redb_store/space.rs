//! How much of a store's file is in use, and giving the rest back (compaction).

use redb::CompactionError;

use super::{contained, err, Db, RedbStore, StoreError};

/// The free space, in eighths of the pages in use, past which [`RedbStore::compact_if_loose`]
/// compacts the file.
const LOOSE_EIGHTHS: u64 = 1;

/// How much of a store's file its pages in use take, bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    /// The file's length.
    pub file: u64,
    /// The pages in use (rows, their index, redb's own), at the page size.
    pub in_use: u64,
}

impl RedbStore {
    /// How much of the file its pages in use take. `None` for a store opened to read.
    pub fn space(&self) -> Result<Option<Space>, StoreError> {
        let Db::Writer { db, .. } = &self.db else {
            return Ok(None);
        };
        let in_use = contained("measuring it", || {
            let tx = db.begin_write().map_err(err("begin a write"))?;
            let stats = tx.stats().map_err(err("measure"))?;
            // Nothing was written: the transaction ends without a commit.
            tx.abort().map_err(err("end a measurement"))?;
            Ok(stats.allocated_pages() * stats.page_size() as u64)
        })?;
        let file = self.file_len()?;
        Ok(Some(Space { file, in_use }))
    }

    /// Gives the file's free space back to the file system when it is at least
    /// [`LOOSE_EIGHTHS`] eighths of the pages in use: a run writes its buckets in one
    /// transaction per checkpoint, and the pages it freed meanwhile stay in the file (the
    /// fan-out demo's store: 71.3 MB, 51.9 MB compacted, in 63 ms). Only a store a run opened,
    /// and only once the file has grown by an eighth since (measuring reads every page, so a
    /// large store that barely grew is left alone). Returns whether it compacted. A
    /// compaction refused (a reader holding a transaction) leaves the file valid, only
    /// larger; a failure of the file is an error, the rows unchanged (each step of it is a
    /// commit).
    pub fn compact_if_loose(&mut self) -> Result<bool, StoreError> {
        let Some(opened) = self.opened_len else {
            return Ok(false);
        };
        let now = self.file_len()?;
        if now.saturating_sub(opened) * 8 < opened * LOOSE_EIGHTHS {
            return Ok(false);
        }
        if let Db::Writer { db, .. } = &self.db {
            // The pages the last commits freed are counted in use until later commits hand
            // them back to the allocator: two empty commits settle them.
            contained("settling it", || {
                for _ in 0..2 {
                    let tx = db.begin_write().map_err(err("begin a write"))?;
                    tx.commit().map_err(err("commit"))?;
                }
                Ok(())
            })?;
        }
        let Some(space) = self.space()? else {
            return Ok(false);
        };
        if space.file.saturating_sub(space.in_use) * 8 < space.in_use * LOOSE_EIGHTHS {
            return Ok(false);
        }
        let Db::Writer { db, .. } = &mut self.db else {
            return Ok(false);
        };
        contained("compacting it", || match db.compact() {
            Ok(_) => Ok(true),
            // Someone reads (or holds a savepoint): another run's end will do it.
            Err(
                CompactionError::TransactionInProgress
                | CompactionError::PersistentSavepointExists
                | CompactionError::EphemeralSavepointExists,
            ) => Ok(false),
            Err(e) => Err(err("compact")(e)),
        })
    }

    fn file_len(&self) -> Result<u64, StoreError> {
        let meta = std::fs::metadata(&self.path).map_err(|e| StoreError::Backend {
            op: "measure the file",
            source: redb::Error::Io(e),
        })?;
        Ok(meta.len())
    }
}
