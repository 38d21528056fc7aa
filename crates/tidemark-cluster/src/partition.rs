//! One partition's part of the state: a [`Store`] whose rows live under one hash tag, whose
//! commit is one fenced script on that tag's slot.
//!
//! A transaction reads through to the server and keeps its own writes in an overlay (Redis
//! cannot read inside `MULTI`, and a commit reads what it wrote: digests, rollups), so a read
//! sees the server's rows with the transaction's writes over them. The commit sends the
//! overlay in one `EVAL`, which first checks the fence (see the crate's doc). A transaction
//! that fails before its commit leaves the server untouched: its overlay is dropped.
//!
//! Reads outside a transaction (the engine's read-back view) read the server as it is now,
//! not as of the last commit: they are the same while this writer is the part's only one,
//! which the fence makes it, and the pipeline writes its checkpoints from the thread that
//! reads (a run with a committer thread keeps a view only while nothing else writes).

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use tidemark_stream::store::{row_key, split_row_key, ReadTxn, Store, StoreError, Txn, Visit};

use crate::server::{retryable, Server, Waits};

/// Rows asked of the server at once in a range read.
const CHUNK: usize = 512;

/// The longest part name accepted, bytes.
const MAX_PART: usize = 200;

/// The set of every part's name.
pub(crate) const PARTS: &str = "tm:parts";

/// Applies a commit if the fence is the writer's: `KEYS` fence, rows, idx, meta; `ARGV` epoch,
/// seq, then the numbers of puts, deletions and metadata values, then their items.
const COMMIT: &str = r#"
local f = redis.call('HMGET', KEYS[1], 'epoch', 'seq')
if not f[1] then
  -- No claim at all: the server lost the part (a failover to a replica it never reached).
  return redis.error_reply('TMBEHIND 0')
end
if f[1] ~= ARGV[1] then
  return redis.error_reply('TMFENCED the part was claimed again (epoch ' .. tostring(f[1]) .. ')')
end
if (f[2] or '0') ~= ARGV[2] then
  return redis.error_reply('TMBEHIND ' .. tostring(f[2] or '0'))
end
local i = 6
for _ = 1, tonumber(ARGV[3]) do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  redis.call('ZADD', KEYS[3], 0, ARGV[i])
  i = i + 2
end
for _ = 1, tonumber(ARGV[4]) do
  redis.call('HDEL', KEYS[2], ARGV[i])
  redis.call('ZREM', KEYS[3], ARGV[i])
  i = i + 1
end
for _ = 1, tonumber(ARGV[5]) do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  i = i + 2
end
return redis.call('HINCRBY', KEYS[1], 'seq', 1)
"#;

/// Claims a part: its epoch rises by one; returns the new epoch and the commits landed.
const CLAIM: &str = r#"
local e = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
local s = redis.call('HGET', KEYS[1], 'seq')
return {e, tonumber(s or '0')}
"#;

/// The Redis keys of one part.
#[derive(Clone)]
struct Keys {
    /// `<server> part <name>`, for messages.
    label: String,
    fence: String,
    rows: String,
    idx: String,
    meta: String,
}

impl Keys {
    fn of(server: &Server, part: &str) -> Keys {
        let tag = format!("{{tm:{part}}}");
        Keys {
            label: format!("{} part {part}", server.name()),
            fence: format!("{tag}:fence"),
            rows: format!("{tag}:rows"),
            idx: format!("{tag}:idx"),
            meta: format!("{tag}:meta"),
        }
    }
}

/// Checks a part's name: what a topic and partition make (`flows:3`), within a hash tag.
fn check_part(part: &str) -> Result<(), StoreError> {
    let ok = !part.is_empty()
        && part.len() <= MAX_PART
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
    if ok {
        return Ok(());
    }
    Err(StoreError::PartName {
        name: part.chars().take(60).collect(),
        expected: "1 to 200 of A-Z a-z 0-9 . _ : -",
    })
}

/// The writer's claim on a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Claim {
    epoch: u64,
    /// Commits landed, as this writer last saw.
    seq: u64,
}

/// One partition's state on a Redis server or cluster. [`PartitionStore::claim`] makes the
/// part's writer (fencing out the one before); [`PartitionStore::reader`] one that only reads.
pub struct PartitionStore {
    server: Server,
    keys: Keys,
    claim: Option<Claim>,
}

impl PartitionStore {
    /// Claims part `part` on `server` for writing: a writer that claimed it before can no
    /// longer commit. The part's state is read lazily, as the pipeline asks for it.
    pub fn claim(server: &Server, part: &str) -> Result<PartitionStore, StoreError> {
        check_part(part)?;
        let keys = Keys::of(server, part);
        let (epoch, seq): (u64, u64) = server.call("claim the part", |c| {
            redis::cmd("EVAL")
                .arg(CLAIM)
                .arg(1)
                .arg(&keys.fence)
                .query(c)
        })?;
        server.call("list the part", |c| {
            redis::cmd("SADD").arg(PARTS).arg(part).query::<i64>(c)
        })?;
        Ok(PartitionStore {
            server: server.clone(),
            keys,
            claim: Some(Claim { epoch, seq }),
        })
    }

    /// Part `part` on `server`, to read only.
    pub fn reader(server: &Server, part: &str) -> Result<PartitionStore, StoreError> {
        check_part(part)?;
        Ok(PartitionStore {
            server: server.clone(),
            keys: Keys::of(server, part),
            claim: None,
        })
    }

    /// The commits this writer has seen land on the part (with those before its claim).
    pub fn commits(&self) -> Option<u64> {
        self.claim.map(|c| c.seq)
    }

    /// This part, its calls retried for up to `patience` (see [`Server`]).
    pub fn with_patience(mut self, patience: std::time::Duration) -> PartitionStore {
        self.server = self.server.clone().with_patience(patience);
        self
    }

    /// Sends a transaction's writes in one script, tried again while the server cannot be
    /// reached (for its patience); before each new try the fence says whether the last one
    /// landed after all, so that a commit lands once.
    fn commit(&mut self, rows: &Rows<'_>) -> Result<(), StoreError> {
        let Some(claim) = self.claim else {
            return Err(StoreError::Contract {
                what: "a write to a part opened to read",
            });
        };
        let script = commit_script(&self.keys, claim, rows);
        let mut waits = Waits::new(self.server.patience());
        loop {
            let e = match self.server.try_call(|c| script.query::<u64>(c)) {
                Ok(seq) => {
                    self.claim = Some(Claim { seq, ..claim });
                    return Ok(());
                }
                Err(e) => e,
            };
            match e.code() {
                Some("TMFENCED") => {
                    return Err(StoreError::Fenced {
                        store: self.keys.label.clone(),
                        what: e.detail().unwrap_or("fenced").to_string(),
                    })
                }
                Some("TMBEHIND") => {
                    return Err(StoreError::Behind {
                        store: self.keys.label.clone(),
                        holds: e.detail().and_then(|d| d.trim().parse().ok()).unwrap_or(0),
                        saw: claim.seq,
                    })
                }
                _ => {}
            }
            if !(retryable(&e) && waits.wait(self.server.name(), "commit a checkpoint", &e)) {
                return Err(self.server.error("commit a checkpoint", e));
            }
            let (epoch, seq) = self.fence()?;
            if epoch == Some(claim.epoch) && seq == claim.seq + 1 {
                self.claim = Some(Claim { seq, ..claim });
                return Ok(());
            }
        }
    }

    /// The part's fence: its epoch (if claimed) and commits.
    fn fence(&self) -> Result<(Option<u64>, u64), StoreError> {
        let (epoch, seq): (Option<u64>, Option<u64>) = self.server.call("read the fence", |c| {
            redis::cmd("HMGET")
                .arg(&self.keys.fence)
                .arg("epoch")
                .arg("seq")
                .query(c)
        })?;
        Ok((epoch, seq.unwrap_or(0)))
    }
}

fn commit_script(keys: &Keys, claim: Claim, rows: &Rows<'_>) -> redis::Cmd {
    let puts: Vec<(&Vec<u8>, &Vec<u8>)> = rows
        .rows
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
        .collect();
    let dels: Vec<&Vec<u8>> = rows
        .rows
        .iter()
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| k)
        .collect();
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(COMMIT)
        .arg(4)
        .arg(&keys.fence)
        .arg(&keys.rows)
        .arg(&keys.idx)
        .arg(&keys.meta)
        .arg(claim.epoch)
        .arg(claim.seq)
        .arg(puts.len())
        .arg(dels.len())
        .arg(rows.meta.len());
    for (k, v) in puts {
        cmd.arg(&k[..]).arg(&v[..]);
    }
    for k in dels {
        cmd.arg(&k[..]);
    }
    for (k, v) in &rows.meta {
        cmd.arg(k).arg(&v[..]);
    }
    cmd
}

impl Store for PartitionStore {
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn ReadTxn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        f(&Rows::new(&self.server, &self.keys))
    }

    fn view(&self) -> Result<Box<dyn ReadTxn>, StoreError> {
        Ok(Box::new(OwnedRows {
            server: self.server.clone(),
            keys: self.keys.clone(),
        }))
    }

    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        if self.claim.is_none() {
            return Err(StoreError::Contract {
                what: "a write to a part opened to read",
            });
        }
        let server = self.server.clone();
        let keys = self.keys.clone();
        let mut t = Rows::new(&server, &keys);
        f(&mut t)?;
        self.commit(&t)
    }
}

/// Receives a row (its key and value); returns whether to go on.
type RowVisit<'a> = dyn FnMut(&[u8], &[u8]) -> Result<bool, StoreError> + 'a;

/// A transaction's rows: the server's, with its own writes over them (`None`: deleted).
struct Rows<'s> {
    server: &'s Server,
    keys: &'s Keys,
    rows: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    meta: BTreeMap<String, Vec<u8>>,
    /// The server's values of rows fetched ahead ([`Txn::prefetch`]), by row key.
    fetched: HashMap<Vec<u8>, Option<Vec<u8>>>,
}

/// A read view that owns its handles (the engine keeps one between checkpoints).
struct OwnedRows {
    server: Server,
    keys: Keys,
}

impl<'s> Rows<'s> {
    /// No writes yet: the server's rows.
    fn new(server: &'s Server, keys: &'s Keys) -> Rows<'s> {
        Rows {
            server,
            keys,
            rows: BTreeMap::new(),
            meta: BTreeMap::new(),
            fetched: HashMap::new(),
        }
    }

    /// A reply of `got` values to a read of `asked` rows.
    fn miscounted(&self, got: usize, asked: usize) -> StoreError {
        StoreError::Remote {
            store: self.keys.label.clone(),
            op: "read rows",
            source: format!("{got} values for {asked} rows asked").into(),
        }
    }

    fn hget(&self, hash: &str, field: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.server.call("read a row", |c| {
            redis::cmd("HGET").arg(hash).arg(field).query(c)
        })
    }

    /// The rows with keys in `[lo, hi)`, in key order, the overlay's over the server's, up to
    /// `limit`; `f` returns whether to go on. Returns how many were visited.
    fn range(
        &self,
        lo: Vec<u8>,
        hi: Option<Vec<u8>>,
        limit: usize,
        f: &mut RowVisit<'_>,
    ) -> Result<usize, StoreError> {
        let upper = hi
            .as_ref()
            .map_or(Bound::Unbounded, |h| Bound::Excluded(h.clone()));
        let mut overlay = self
            .rows
            .range((Bound::Included(lo.clone()), upper))
            .peekable();
        let mut visited = 0usize;
        let mut from = lo;
        let mut emit = |k: &[u8], v: &[u8], visited: &mut usize| -> Result<bool, StoreError> {
            *visited += 1;
            Ok(f(k, v)? && *visited < limit)
        };
        'chunks: loop {
            let members = self.members(&from, hi.as_deref())?;
            let values: Vec<Option<Vec<u8>>> = if members.is_empty() {
                Vec::new()
            } else {
                self.server.call("read rows", |c| {
                    redis::cmd("HMGET")
                        .arg(&self.keys.rows)
                        .arg(&members)
                        .query(c)
                })?
            };
            if values.len() != members.len() {
                return Err(self.miscounted(values.len(), members.len()));
            }
            for (m, v) in members.iter().zip(values) {
                while let Some((k, ov)) = overlay.next_if(|(k, _)| k.as_slice() < m.as_slice()) {
                    if let Some(ov) = ov {
                        if !emit(k, ov, &mut visited)? {
                            return Ok(visited);
                        }
                    }
                }
                let mine = overlay.next_if(|(k, _)| k.as_slice() == m.as_slice());
                let value = match mine {
                    Some((_, None)) => continue,
                    Some((_, Some(ov))) => ov.clone(),
                    None => v.ok_or_else(|| StoreError::Damaged {
                        what: format!(
                            "{}: a row is indexed but not stored (key {:x?})",
                            self.keys.label,
                            &m[..m.len().min(48)]
                        ),
                    })?,
                };
                if !emit(m, &value, &mut visited)? {
                    return Ok(visited);
                }
            }
            if members.len() < CHUNK {
                break 'chunks;
            }
            // The next chunk starts just after the last row read.
            from = members
                .last()
                .map(|m| [&m[..], &[0]].concat())
                .unwrap_or_default();
        }
        for (k, ov) in overlay {
            if let Some(ov) = ov {
                if !emit(k, ov, &mut visited)? {
                    break;
                }
            }
        }
        Ok(visited)
    }

    /// Up to [`CHUNK`] row keys of the server in `[from, hi)`.
    fn members(&self, from: &[u8], hi: Option<&[u8]>) -> Result<Vec<Vec<u8>>, StoreError> {
        let min = [&b"["[..], from].concat();
        let max = hi.map_or_else(|| b"+".to_vec(), |h| [&b"("[..], h].concat());
        self.server.call("read the index", |c| {
            redis::cmd("ZRANGEBYLEX")
                .arg(&self.keys.idx)
                .arg(&min)
                .arg(&max)
                .arg("LIMIT")
                .arg(0)
                .arg(CHUNK)
                .query(c)
        })
    }

    /// The row keys of `table` with `from ≤ start < to`: `[lo, hi)`.
    fn bounds(table: &str, from: u64, to: u64) -> Result<(Vec<u8>, Option<Vec<u8>>), StoreError> {
        Ok((row_key(table, from, &[])?, Some(row_key(table, to, &[])?)))
    }
}

/// The smallest byte string above every string that starts with `prefix` (`None`: none is).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xFF {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

impl ReadTxn for Rows<'_> {
    fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(v) = self.meta.get(name) {
            return Ok(Some(v.clone()));
        }
        self.hget(&self.keys.meta, name.as_bytes())
    }

    fn get(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let k = row_key(table, start, key)?;
        match self.rows.get(&k).or_else(|| self.fetched.get(&k)) {
            Some(v) => Ok(v.clone()),
            None => self.hget(&self.keys.rows, &k),
        }
    }

    fn scan(&self, table: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        if from >= to {
            return Ok(());
        }
        let (lo, hi) = Rows::bounds(table, from, to)?;
        self.range(lo, hi, usize::MAX, &mut |k, v| {
            let (start, key) = split_row_key(table, k)?;
            f(key, start, v);
            Ok(true)
        })?;
        Ok(())
    }

    fn page(
        &self,
        table: &str,
        start: u64,
        after: Option<&[u8]>,
        limit: usize,
        f: &mut Visit<'_>,
    ) -> Result<usize, StoreError> {
        if limit == 0 {
            return Ok(0);
        }
        let first = row_key(table, start, &[])?;
        let lo = match after {
            // Just after `after`'s row: its key with a zero byte appended.
            Some(a) => [row_key(table, start, a)?, vec![0]].concat(),
            None => first.clone(),
        };
        self.range(lo, prefix_end(&first), limit, &mut |k, v| {
            let (s, key) = split_row_key(table, k)?;
            f(key, s, v);
            Ok(true)
        })
    }

    fn next_start(&self, table: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError> {
        if from >= to {
            return Ok(None);
        }
        let (lo, hi) = Rows::bounds(table, from, to)?;
        let mut found = None;
        self.range(lo, hi, 1, &mut |k, _| {
            found = Some(split_row_key(table, k)?.0);
            Ok(false)
        })?;
        Ok(found)
    }
}

impl Txn for Rows<'_> {
    fn put(
        &mut self,
        table: &str,
        start: u64,
        key: &[u8],
        bytes: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let old = self.get(table, start, key)?;
        self.rows
            .insert(row_key(table, start, key)?, Some(bytes.to_vec()));
        Ok(old)
    }

    fn remove(
        &mut self,
        table: &str,
        start: u64,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let old = self.get(table, start, key)?;
        if old.is_some() {
            self.rows.insert(row_key(table, start, key)?, None);
        }
        Ok(old)
    }

    fn remove_before(&mut self, table: &str, before: u64) -> Result<(), StoreError> {
        if before == 0 {
            return Ok(());
        }
        let (lo, hi) = Rows::bounds(table, 0, before)?;
        let mut gone = Vec::new();
        self.range(lo, hi, usize::MAX, &mut |k, _| {
            gone.push(k.to_vec());
            Ok(true)
        })?;
        for k in gone {
            self.rows.insert(k, None);
        }
        Ok(())
    }

    fn set_meta(&mut self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.meta.insert(name.to_string(), bytes.to_vec());
        Ok(())
    }

    fn prefetch(&mut self, rows: &[(&str, u64, &[u8])]) -> Result<(), StoreError> {
        let mut wanted = Vec::new();
        for &(table, start, key) in rows {
            let k = row_key(table, start, key)?;
            if !self.rows.contains_key(&k) && !self.fetched.contains_key(&k) {
                wanted.push(k);
            }
        }
        for chunk in wanted.chunks(CHUNK) {
            let values: Vec<Option<Vec<u8>>> = self.server.call("read rows", |c| {
                redis::cmd("HMGET").arg(&self.keys.rows).arg(chunk).query(c)
            })?;
            if values.len() != chunk.len() {
                return Err(self.miscounted(values.len(), chunk.len()));
            }
            self.fetched.extend(chunk.iter().cloned().zip(values));
        }
        Ok(())
    }
}

impl ReadTxn for OwnedRows {
    fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.rows().meta(name)
    }

    fn get(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.rows().get(table, start, key)
    }

    fn scan(&self, table: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        self.rows().scan(table, from, to, f)
    }

    fn page(
        &self,
        table: &str,
        start: u64,
        after: Option<&[u8]>,
        limit: usize,
        f: &mut Visit<'_>,
    ) -> Result<usize, StoreError> {
        self.rows().page(table, start, after, limit, f)
    }

    fn next_start(&self, table: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError> {
        self.rows().next_start(table, from, to)
    }
}

impl OwnedRows {
    fn rows(&self) -> Rows<'_> {
        Rows::new(&self.server, &self.keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_above_every_string_it_starts() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(&[1, 0xFF, 0xFF]), Some(vec![2]));
        assert_eq!(prefix_end(&[0xFF]), None);
        let p = row_key("m", 7, &[]).unwrap();
        let end = prefix_end(&p).unwrap();
        assert!(row_key("m", 7, &[0xFF; 40]).unwrap() < end);
        assert!(row_key("m", 8, &[]).unwrap() >= end);
    }

    #[test]
    fn a_part_name_fits_a_hash_tag() {
        assert!(check_part("flows:3").is_ok());
        for bad in ["", "a}b", "a{b", "a b", &"x".repeat(201)] {
            assert!(check_part(bad).is_err(), "{bad:?}");
        }
    }
}
