//! Every part of a run's state, read as one store by queries.
//!
//! A query needs three things of a store: its metadata (the config, and the watermarks that
//! set a window's default end), one key's buckets, and every key's buckets in key order. Over
//! parts, each is the union of the parts': a key's buckets are its buckets in every part
//! (two parts holding a bucket of one key and start are two summaries of it, which the query
//! merges as it merges any summaries — exactly, for counts and sketches alike), checked
//! against each part's own digests; and the metadata is the part whose watermarks stand
//! earliest, so that a window ending by default ends where every part has closed its
//! buckets.
//!
//! A part's read is several calls to the server, and its worker may commit between two of
//! them: a digest read before a commit and rows read after it disagree (damage that is not),
//! or an answer mixes two commits. Each part's read is therefore taken between two readings of
//! its commit count, and read again (up to [`READ_TRIES`] times) when the count moved.
//!
//! Memory: a scan over every key holds the window's buckets of every key at once (the parts
//! are read one after another and merged by key), where one store's scan holds a page per
//! bucket start.

use std::collections::BTreeMap;

use tidemark_stream::query;
use tidemark_stream::store::{KeyVisit, Meta, ReadTxn, Store, StoreError, Txn};

use crate::partition::{PartitionStore, PARTS};
use crate::server::Server;

/// The longest list of parts read (a topic's partitions).
const MAX_PARTS: usize = 100_000;

/// A key and its buckets `(start, bytes)`.
type KeyParts = (Vec<u8>, Vec<(u64, Vec<u8>)>);

/// Reads of a part tried while its worker commits between their calls.
const READ_TRIES: usize = 8;

/// `read` of part `p`, read again while a commit lands during it (see the module doc).
fn consistent<T>(
    p: &PartitionStore,
    mut read: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut tries = 1;
    loop {
        let before = p.commits_now()?;
        let result = read();
        if tries >= READ_TRIES || p.commits_now()? == before {
            return result;
        }
        tries += 1;
    }
}

/// Every part on a server or cluster, read merged (see the module doc). Read only.
pub struct MergedStore {
    parts: Vec<PartitionStore>,
    name: String,
}

impl MergedStore {
    /// The parts listed on `server` now.
    pub fn open(server: &Server) -> Result<MergedStore, StoreError> {
        let mut names: Vec<String> = server.call("list the parts", |c| {
            redis::cmd("SRANDMEMBER")
                .arg(PARTS)
                .arg(MAX_PARTS + 1)
                .query(c)
        })?;
        if names.len() > MAX_PARTS {
            return Err(StoreError::Remote {
                store: server.name().to_string(),
                op: "list the parts",
                source: format!("more than {MAX_PARTS} parts").into(),
            });
        }
        names.sort();
        let parts = names
            .iter()
            .map(|n| PartitionStore::reader(server, n))
            .collect::<Result<_, _>>()?;
        Ok(MergedStore {
            parts,
            name: server.name().to_string(),
        })
    }

    /// How many parts it reads.
    pub fn parts(&self) -> usize {
        self.parts.len()
    }

    /// Where every part has closed each metric (in the config's order): per metric, the
    /// earliest of the parts' points before which buckets are closed. A part that has closed
    /// nothing of a metric yet (no event of it, or none committed) holds it at 0: its
    /// partition may still bring buckets of any time. `None` while a listed part has no
    /// commit yet, or no part is listed.
    pub fn closed_until(&self) -> Result<Option<Vec<u64>>, StoreError> {
        let mut out: Option<Vec<u64>> = None;
        for p in &self.parts {
            let Some(meta) = consistent(p, || p.meta())? else {
                return Ok(None);
            };
            let closed = query::closed_until(&meta).map_err(|e| StoreError::Damaged {
                what: format!("{}: {e}", self.name),
            })?;
            out = Some(match out {
                None => closed,
                Some(o) if o.len() == closed.len() => {
                    o.into_iter().zip(closed).map(|(a, b)| a.min(b)).collect()
                }
                Some(_) => {
                    return Err(StoreError::Damaged {
                        what: format!(
                            "{}: the store's parts were written under different configs",
                            self.name
                        ),
                    })
                }
            });
        }
        Ok(out)
    }

    /// The earliest bucket start any part holds of `metric`.
    pub fn first_start(&self, metric: &str) -> Result<Option<u64>, StoreError> {
        let mut first: Option<u64> = None;
        for p in &self.parts {
            if let Some(s) = p.first_start(metric)? {
                first = Some(first.map_or(s, |f| f.min(s)));
            }
        }
        Ok(first)
    }

    fn refused<T>() -> Result<T, StoreError> {
        Err(StoreError::Contract {
            what: "a store read merged from parts answers queries only",
        })
    }
}

impl Store for MergedStore {
    fn read(
        &self,
        _: &mut dyn FnMut(&dyn ReadTxn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        Self::refused()
    }

    fn view(&self) -> Result<Box<dyn ReadTxn>, StoreError> {
        Self::refused()
    }

    fn write(
        &mut self,
        _: &mut dyn FnMut(&mut dyn Txn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        Self::refused()
    }

    fn meta(&self) -> Result<Option<Meta>, StoreError> {
        let mut metas = Vec::with_capacity(self.parts.len());
        for p in &self.parts {
            metas.extend(consistent(p, || p.meta())?);
        }
        query::earliest(metas).map_err(|e| StoreError::Damaged {
            what: format!("{}: {e}", self.name),
        })
    }

    fn key_buckets(
        &self,
        metric: &str,
        open: Option<&str>,
        from: u64,
        to: u64,
        key: &[u8],
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let mut all = Vec::new();
        for p in &self.parts {
            all.extend(consistent(p, || {
                p.key_buckets(metric, open, from, to, key)
            })?);
        }
        // By start, as one store gives them (a stable sort keeps each part's order).
        all.sort_by_key(|(start, _)| *start);
        Ok(all)
    }

    fn scan_by_key(
        &self,
        metric: &str,
        open: Option<&str>,
        from: u64,
        to: u64,
        width: u64,
        f: &mut KeyVisit<'_>,
    ) -> Result<(), StoreError> {
        let mut keys: BTreeMap<Vec<u8>, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
        for p in &self.parts {
            let part = consistent(p, || {
                let mut part: Vec<KeyParts> = Vec::new();
                p.scan_by_key(metric, open, from, to, width, &mut |k, parts| {
                    part.push((k.to_vec(), parts.to_vec()));
                })?;
                Ok(part)
            })?;
            for (k, parts) in part {
                keys.entry(k).or_default().extend(parts);
            }
        }
        for (k, mut parts) in keys {
            parts.sort_by_key(|(start, _)| *start);
            f(&k, &parts);
        }
        Ok(())
    }

    fn generation(&self) -> Result<Option<u64>, StoreError> {
        let mut out: Option<u64> = None;
        for p in &self.parts {
            if let Some(g) = consistent(p, || p.generation())? {
                let mixed = out.unwrap_or(0).rotate_left(17) ^ g;
                out = Some(mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            }
        }
        Ok(out)
    }

    fn verify(&self, metric: &str) -> Result<u64, StoreError> {
        let mut n = 0;
        for p in &self.parts {
            n += consistent(p, || p.verify(metric))?;
        }
        Ok(n)
    }
}
