//! A part's rows in Redis, and a transaction over them.
//!
//! # Layout
//!
//! A row is `(table, start, key) → value`. The rows of one table and start (a metric's
//! buckets of one minute, say) are one hash, `{tm:P}:s:<n>:<table>:<start>` (`n` the table
//! name's length, so that no name can pass for another), its fields the keys; each table
//! keeps a sorted set of its starts, `{tm:P}:t:<n>:<table>` (score and member the start),
//! and the part a set of its tables, `{tm:P}:tables`. A bucket costs a hash field (its key
//! and value, and the field's own bytes), about 2.5 times less than a row of its own with an
//! index entry: a key's hour of minute buckets takes about what the module's windowed value of
//! the same hour does (docs/scale-out.md). What a store reads maps onto it: one row is a
//! field (`HGET`); a start's rows, by key, are its hash read whole and sorted (`HGETALL`,
//! kept for the transaction's life); a range of starts comes from the table's set
//! (`ZRANGEBYSCORE`); dropping the starts before a time deletes their hashes.
//!
//! # Transactions
//!
//! A transaction reads through to the server and keeps its own writes in an overlay (Redis
//! cannot read inside `MULTI`, and a commit reads what it wrote: digests, rollups); starts it
//! cleared (`remove_before`) read as empty, but for what it wrote since. Its commit is one
//! script (see [`commit_script`]). Reads outside a transaction (the engine's read-back
//! view) read the server as it is now: the same as the last commit while this writer is the
//! part's only one, which the fence makes it.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use tidemark_stream::store::{ReadTxn, StoreError, Txn, Visit};

use crate::server::Server;

/// Values asked of the server at once.
const CHUNK: usize = 512;

/// Starts at and above this are not exact as sorted-set scores (doubles): ranges over them
/// are read whole and filtered.
const EXACT_SCORES: u64 = 1 << 53;

/// Applies a commit if the fence is the writer's. `KEYS`: fence, meta, tables, then the
/// cleared starts' (index, hash) pairs and the written starts' (index, hash) pairs; `ARGV`:
/// epoch, seq, then per cleared start its member, then per written start its member, its
/// number of puts and their fields and values, its number of deletions and their fields;
/// then the tables written, then the metadata.
const COMMIT: &str = r#"
local f = redis.call('HMGET', KEYS[1], 'epoch', 'seq')
if not f[1] then
  -- No claim at all: the server lost the part (a failover to a replica it never reached).
  return redis.error_reply('TMBEHIND 0')
end
if tonumber(f[1]) > tonumber(ARGV[1]) then
  return redis.error_reply('TMFENCED the part was claimed again (epoch ' .. f[1] .. ')')
end
if tonumber(f[1]) < tonumber(ARGV[1]) then
  -- This writer's claim is gone: a failover to a replica it had not reached.
  return redis.error_reply('TMBEHIND ' .. tostring(f[2] or '0'))
end
if (f[2] or '0') ~= ARGV[2] then
  return redis.error_reply('TMBEHIND ' .. tostring(f[2] or '0'))
end
local k, a = 4, 3
for _ = 1, tonumber(ARGV[a]) do
  a = a + 1
  redis.call('DEL', KEYS[k + 1])
  redis.call('ZREM', KEYS[k], ARGV[a])
  k = k + 2
end
a = a + 1
for _ = 1, tonumber(ARGV[a]) do
  local idx, h, member = KEYS[k], KEYS[k + 1], ARGV[a + 1]
  k = k + 2
  a = a + 2
  local n = tonumber(ARGV[a])
  local i = 0
  while i < n do
    -- 500 fields a call: Lua's stack bounds an unpacked call.
    local call = {'HSET', h}
    local last = math.min(n, i + 500)
    for j = i, last - 1 do
      call[#call + 1] = ARGV[a + 1 + 2 * j]
      call[#call + 1] = ARGV[a + 2 + 2 * j]
    end
    redis.call(unpack(call))
    i = last
  end
  a = a + 2 * n + 1
  local d = tonumber(ARGV[a])
  for j = 1, d do
    redis.call('HDEL', h, ARGV[a + j])
  end
  a = a + d
  if redis.call('EXISTS', h) == 1 then
    redis.call('ZADD', idx, member, member)
  else
    redis.call('ZREM', idx, member)
  end
end
a = a + 1
for _ = 1, tonumber(ARGV[a]) do
  a = a + 1
  redis.call('SADD', KEYS[3], ARGV[a])
end
a = a + 1
local m = tonumber(ARGV[a])
for j = 1, m do
  redis.call('HSET', KEYS[2], ARGV[a + 2 * j - 1], ARGV[a + 2 * j])
end
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
-- Which claim landed the last commit: a retry of a commit whose reply was lost asks.
redis.call('HSET', KEYS[1], 'last', ARGV[1] .. ':' .. seq)
return seq
"#;

/// The Redis keys of one part.
#[derive(Clone)]
pub(crate) struct Keys {
    /// `<server> part <name>`, for messages.
    pub label: String,
    tag: String,
    pub fence: String,
    meta: String,
    tables: String,
}

impl Keys {
    pub fn of(server: &Server, part: &str) -> Keys {
        let tag = format!("{{tm:{part}}}");
        Keys {
            label: format!("{} part {part}", server.name()),
            fence: format!("{tag}:fence"),
            meta: format!("{tag}:meta"),
            tables: format!("{tag}:tables"),
            tag,
        }
    }

    /// The hash of `table`'s rows at `start`.
    fn start(&self, table: &str, start: u64) -> String {
        format!("{}:s:{}:{table}:{start}", self.tag, table.len())
    }

    /// The sorted set of `table`'s starts.
    pub(crate) fn starts(&self, table: &str) -> String {
        format!("{}:t:{}:{table}", self.tag, table.len())
    }

    /// A member of `table`'s sorted set of starts, read as the start it names.
    pub(crate) fn start_named(&self, table: &str, member: &str) -> Result<u64, StoreError> {
        member.parse().map_err(|_| StoreError::Damaged {
            what: format!(
                "{}: table {table:?} lists a start {:?} that is not one",
                self.label,
                member.chars().take(40).collect::<String>()
            ),
        })
    }
}

/// A row's place: table, start, key.
pub type At = (String, u64, Vec<u8>);

/// A start's writes: its puts (key, value) and deletions (key).
type StartWrites<'a> = (Vec<(&'a [u8], &'a [u8])>, Vec<&'a [u8]>);

/// One start's rows on the server, by key.
type StartRows = Arc<Vec<(Vec<u8>, Vec<u8>)>>;

/// A transaction's rows: the server's, with its own writes over them (`None`: deleted). Also
/// the engine's read-back view, which writes nothing and keeps no start it read (the server's
/// rows change under a view kept between checkpoints).
pub(crate) struct Rows {
    server: Server,
    keys: Keys,
    rows: BTreeMap<At, Option<Vec<u8>>>,
    /// Per table, the start below which the server's rows were removed in this transaction.
    cleared: BTreeMap<String, u64>,
    meta: BTreeMap<String, Vec<u8>>,
    /// The server's values of rows fetched ahead ([`Txn::prefetch`]).
    fetched: HashMap<At, Option<Vec<u8>>>,
    /// The server's starts read whole, kept for the transaction's later reads (`None`: a view,
    /// which keeps none).
    read: Option<RefCell<HashMap<(String, u64), StartRows>>>,
}

impl Rows {
    /// No writes yet: the server's rows.
    pub fn new(server: &Server, keys: &Keys) -> Rows {
        Rows {
            server: server.clone(),
            keys: keys.clone(),
            rows: BTreeMap::new(),
            cleared: BTreeMap::new(),
            meta: BTreeMap::new(),
            fetched: HashMap::new(),
            read: Some(RefCell::new(HashMap::new())),
        }
    }

    /// A read view of the server as it is at each read.
    pub fn view(server: &Server, keys: &Keys) -> Rows {
        Rows {
            read: None,
            ..Rows::new(server, keys)
        }
    }

    /// The rows this transaction put (not those it deleted): table, start, key, value.
    pub fn puts(&self) -> impl Iterator<Item = crate::publish::Put<'_>> {
        self.rows.iter().filter_map(|((t, s, k), v)| {
            v.as_ref()
                .map(|v| (t.as_str(), *s, k.as_slice(), v.as_slice()))
        })
    }

    /// The value a write at `at` replaces, a value fetched ahead for it taken (the write's
    /// own value answers later reads).
    fn replaced(&mut self, at: &At) -> Result<Option<Vec<u8>>, StoreError> {
        if self.rows.contains_key(at) || self.is_cleared(&at.0, at.1) {
            return self.get(&at.0, at.1, &at.2);
        }
        match self.fetched.remove(at) {
            Some(v) => Ok(v),
            None => self.get(&at.0, at.1, &at.2),
        }
    }

    fn is_cleared(&self, table: &str, start: u64) -> bool {
        self.cleared.get(table).is_some_and(|&b| start < b)
    }

    /// A reply of `got` values to a read of `asked` rows.
    fn miscounted(&self, got: usize, asked: usize) -> StoreError {
        StoreError::Remote {
            store: self.keys.label.clone(),
            op: "read rows",
            source: format!("{got} values for {asked} rows asked").into(),
        }
    }

    /// The server's starts of `table` in `[from, to)`, ascending (cleared ones left out).
    fn server_starts(&self, table: &str, from: u64, to: u64) -> Result<Vec<u64>, StoreError> {
        let lo = from.min(EXACT_SCORES).to_string();
        let hi = if to <= EXACT_SCORES {
            format!("({to}")
        } else {
            "+inf".to_string()
        };
        let members: Vec<String> = self.server.call("read a table's starts", |c| {
            redis::cmd("ZRANGEBYSCORE")
                .arg(self.keys.starts(table))
                .arg(&lo)
                .arg(&hi)
                .query(c)
        })?;
        let mut starts = Vec::with_capacity(members.len());
        for m in members {
            let s = self.keys.start_named(table, &m)?;
            if (from..to).contains(&s) && !self.is_cleared(table, s) {
                starts.push(s);
            }
        }
        starts.sort_unstable();
        Ok(starts)
    }

    /// The server's rows of `table` at `start`, by key (none if cleared); with `keep`, kept
    /// for the transaction's later reads (a start read a page at a time).
    fn server_rows(&self, table: &str, start: u64, keep: bool) -> Result<StartRows, StoreError> {
        if self.is_cleared(table, start) {
            return Ok(Arc::new(Vec::new()));
        }
        let at = (table.to_string(), start);
        if let Some(rows) = self
            .read
            .as_ref()
            .and_then(|r| r.borrow().get(&at).cloned())
        {
            return Ok(rows);
        }
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = self.server.call("read a start's rows", |c| {
            redis::cmd("HGETALL")
                .arg(self.keys.start(table, start))
                .query(c)
        })?;
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let rows = Arc::new(rows);
        if let (true, Some(read)) = (keep, &self.read) {
            read.borrow_mut().insert(at, Arc::clone(&rows));
        }
        Ok(rows)
    }

    /// The transaction's writes at `(table, start)`, by key.
    fn written<'a>(
        &'a self,
        table: &'a str,
        start: u64,
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)> + 'a {
        self.rows
            .range((table.to_string(), start, Vec::new())..)
            .take_while(move |((t, s, _), _)| t == table && *s == start)
            .map(|((_, _, k), v)| (k, v))
    }

    /// The rows of `(table, start)` as the transaction sees them, by key, after `after`, up
    /// to `limit`; `f` takes each.
    fn visit_start(
        &self,
        table: &str,
        start: u64,
        after: Option<&[u8]>,
        limit: usize,
        f: &mut dyn FnMut(&[u8], &[u8]),
    ) -> Result<usize, StoreError> {
        // Read a page at a time, a start is kept; read whole, it is not (a scan holds one
        // start at a time).
        let server = self.server_rows(table, start, limit != usize::MAX)?;
        let from = match after {
            Some(a) => server.partition_point(|(k, _)| k.as_slice() <= a),
            None => 0,
        };
        let mut theirs = server[from..].iter().peekable();
        let mut mine = self
            .written(table, start)
            .filter(|(k, _)| after.is_none_or(|a| k.as_slice() > a))
            .peekable();
        let mut n = 0;
        while n < limit {
            let take_mine = match (theirs.peek(), mine.peek()) {
                (None, None) => break,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((tk, _)), Some((mk, _))) => mk.as_slice() <= tk.as_slice(),
            };
            if take_mine {
                let Some((k, v)) = mine.next() else { break };
                // The overlay's row replaces the server's of the same key.
                if theirs.peek().is_some_and(|(tk, _)| tk == k) {
                    theirs.next();
                }
                if let Some(v) = v {
                    f(k, v);
                    n += 1;
                }
            } else if let Some((k, v)) = theirs.next() {
                f(k, v);
                n += 1;
            }
        }
        Ok(n)
    }

    /// The starts of `table` in `[from, to)` the transaction may see rows at, ascending.
    fn starts(&self, table: &str, from: u64, to: u64) -> Result<Vec<u64>, StoreError> {
        let mut all: BTreeSet<u64> = self.server_starts(table, from, to)?.into_iter().collect();
        for ((t, s, _), v) in self.rows.range((table.to_string(), from, Vec::new())..) {
            if t != table || *s >= to {
                break;
            }
            if v.is_some() {
                all.insert(*s);
            }
        }
        Ok(all.into_iter().collect())
    }
}

impl ReadTxn for Rows {
    fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(v) = self.meta.get(name) {
            return Ok(Some(v.clone()));
        }
        self.server.call("read the run's metadata", |c| {
            redis::cmd("HGET").arg(&self.keys.meta).arg(name).query(c)
        })
    }

    fn get(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let at = (table.to_string(), start, key.to_vec());
        if let Some(v) = self.rows.get(&at) {
            return Ok(v.clone());
        }
        if self.is_cleared(table, start) {
            return Ok(None);
        }
        if let Some(v) = self.fetched.get(&at) {
            return Ok(v.clone());
        }
        self.server.call("read a row", |c| {
            redis::cmd("HGET")
                .arg(self.keys.start(table, start))
                .arg(key)
                .query(c)
        })
    }

    fn scan(&self, table: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        if from >= to {
            return Ok(());
        }
        for start in self.starts(table, from, to)? {
            self.visit_start(table, start, None, usize::MAX, &mut |k, v| f(k, start, v))?;
        }
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
        self.visit_start(table, start, after, limit, &mut |k, v| f(k, start, v))
    }

    fn next_start(&self, table: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError> {
        if from >= to {
            return Ok(None);
        }
        for start in self.starts(table, from, to)? {
            let written = self.written(table, start).next().is_some();
            let found = if written || self.is_cleared(table, start) {
                self.visit_start(table, start, None, 1, &mut |_, _| {})? > 0
            } else {
                // Nothing of the transaction's own there: the server's hash exists or not.
                self.server.call("read a table's starts", |c| {
                    redis::cmd("EXISTS")
                        .arg(self.keys.start(table, start))
                        .query::<bool>(c)
                })?
            };
            if found {
                return Ok(Some(start));
            }
        }
        Ok(None)
    }
}

impl Txn for Rows {
    fn put(
        &mut self,
        table: &str,
        start: u64,
        key: &[u8],
        bytes: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let at = (table.to_string(), start, key.to_vec());
        let old = self.replaced(&at)?;
        self.rows.insert(at, Some(bytes.to_vec()));
        Ok(old)
    }

    fn remove(
        &mut self,
        table: &str,
        start: u64,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let at = (table.to_string(), start, key.to_vec());
        let old = self.replaced(&at)?;
        if old.is_some() {
            self.rows.insert(at, None);
        }
        Ok(old)
    }

    fn remove_before(&mut self, table: &str, before: u64) -> Result<(), StoreError> {
        self.rows
            .retain(|(t, s, _), _| !(t == table && *s < before));
        let b = self.cleared.entry(table.to_string()).or_insert(0);
        *b = (*b).max(before);
        Ok(())
    }

    fn set_meta(&mut self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.meta.insert(name.to_string(), bytes.to_vec());
        Ok(())
    }

    fn prefetch(
        &mut self,
        rows: &mut dyn Iterator<Item = (&str, u64, &[u8])>,
    ) -> Result<(), StoreError> {
        let mut wanted: BTreeMap<(String, u64), Vec<Vec<u8>>> = BTreeMap::new();
        for (table, start, key) in rows {
            let at = (table.to_string(), start, key.to_vec());
            if !self.rows.contains_key(&at)
                && !self.fetched.contains_key(&at)
                && !self.is_cleared(table, start)
            {
                wanted.entry((at.0, start)).or_default().push(at.2);
            }
        }
        for ((table, start), keys) in wanted {
            let hash = self.keys.start(&table, start);
            for chunk in keys.chunks(CHUNK) {
                let values: Vec<Option<Vec<u8>>> = self.server.call("read rows", |c| {
                    redis::cmd("HMGET").arg(&hash).arg(chunk).query(c)
                })?;
                if values.len() != chunk.len() {
                    return Err(self.miscounted(values.len(), chunk.len()));
                }
                for (k, v) in chunk.iter().zip(values) {
                    self.fetched.insert((table.clone(), start, k.clone()), v);
                }
            }
        }
        Ok(())
    }
}

/// The script that lands a transaction's writes, if the fence is `(epoch, seq)`: the starts it
/// cleared (read from the server now: the fence makes this writer the only one) deleted, then
/// its rows written start by start, then its metadata.
pub(crate) fn commit_script(
    keys: &Keys,
    epoch: u64,
    seq: u64,
    rows: &Rows,
) -> Result<redis::Cmd, StoreError> {
    // The transaction's own reads leave cleared starts out: a fresh view lists them.
    let fresh = Rows::view(&rows.server, keys);
    let mut gone = Vec::new();
    for (table, &before) in &rows.cleared {
        for start in fresh.server_starts(table, 0, before)? {
            gone.push((table.as_str(), start));
        }
    }
    let mut groups: BTreeMap<(&str, u64), StartWrites<'_>> = BTreeMap::new();
    for ((table, start, key), v) in &rows.rows {
        let g = groups.entry((table.as_str(), *start)).or_default();
        match v {
            Some(v) => g.0.push((key, v)),
            None => g.1.push(key),
        }
    }
    let tables: BTreeSet<&str> = groups
        .iter()
        .filter(|(_, (puts, _))| !puts.is_empty())
        .map(|((t, _), _)| *t)
        .collect();
    // Keys first (each start's index and hash), then the arguments, written into the
    // command once (a checkpoint's rows are its bulk).
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(COMMIT)
        .arg(3 + 2 * (gone.len() + groups.len()))
        .arg(&keys.fence)
        .arg(&keys.meta)
        .arg(&keys.tables);
    for &(table, start) in gone.iter().chain(groups.keys()) {
        cmd.arg(keys.starts(table)).arg(keys.start(table, start));
    }
    cmd.arg(epoch).arg(seq).arg(gone.len());
    for (_, start) in &gone {
        cmd.arg(start);
    }
    cmd.arg(groups.len());
    for ((_, start), (puts, dels)) in &groups {
        cmd.arg(start).arg(puts.len());
        for (k, v) in puts {
            cmd.arg(k).arg(v);
        }
        cmd.arg(dels.len());
        for k in dels {
            cmd.arg(k);
        }
    }
    cmd.arg(tables.len());
    for t in &tables {
        cmd.arg(t);
    }
    cmd.arg(rows.meta.len());
    for (name, v) in &rows.meta {
        cmd.arg(name).arg(&v[..]);
    }
    Ok(cmd)
}

/// Every row of a part: `(table, start, key) → value`.
pub(crate) fn all_rows(server: &Server, keys: &Keys) -> Result<BTreeMap<At, Vec<u8>>, StoreError> {
    let tables: Vec<String> = server.call("list the part's tables", |c| {
        redis::cmd("SMEMBERS").arg(&keys.tables).query(c)
    })?;
    let rows = Rows::view(server, keys);
    let mut out = BTreeMap::new();
    for table in tables {
        rows.scan(&table, 0, u64::MAX, &mut |k, start, v| {
            out.insert((table.clone(), start, k.to_vec()), v.to_vec());
        })?;
    }
    Ok(out)
}
