//! The store's meaning, written once above every backend: applying a [`Batch`], keeping each
//! `(metric, start)`'s digest in step with its entries, and checking digests on the way out.

use std::collections::{BTreeMap, BTreeSet};

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use super::{
    Batch, BucketRef, KeyVisit, Meta, PromoteRef, ReadTxn, StoreError, SweepRef, Txn, Visit,
};

/// Metadata names.
const CONFIG: &str = "config";
const FINGERPRINT: &str = "fingerprint";
const STATE: &str = "state";
/// The store layout: absent in stores written before digests (read, never verified), 2 since.
const FORMAT: &str = "format";
/// A hash of the config, fingerprint and state together: damage to the metadata is found.
const SEAL: &str = "seal";
/// Format 2: the store keeps digests and a seal.
const DIGESTED: u64 = 2;
/// Format 3: as 2, and bucket values may be in their stored form ([`crate::stored`]); a
/// build that reads only format 2 refuses the store by this number rather than misreading a
/// value.
const STORED_FORMS: u64 = 3;
/// Format 4: a store written before digests (none, and no seal) whose newer values are in
/// their stored form: builds that read format 2 or older digested stores refuse it by this
/// number. (Builds from before digests read no format key at all: they meet the new values
/// as undecodable bytes, an error naming the value.)
const UNDIGESTED_STORED_FORMS: u64 = 4;

/// The digests' table for a metric's stored name.
pub(super) fn digest_table(table: &str) -> String {
    format!("#{table}")
}

/// One entry's contribution to its start's digest.
#[inline]
pub(super) fn entry_hash(start: u64, key: &[u8], bytes: &[u8]) -> u64 {
    xxh3_64_with_seed(bytes, xxh3_64_with_seed(key, start))
}

fn seal(config: &[u8], fingerprint: &[u8], state: &[u8]) -> u64 {
    xxh3_64_with_seed(state, xxh3_64_with_seed(fingerprint, xxh3_64(config)))
}

fn u64_of(bytes: &[u8], what: &str) -> Result<u64, StoreError> {
    let b: [u8; 8] = bytes.try_into().map_err(|_| {
        StoreError::damaged(format!("metadata {what:?} is {} bytes, not 8", bytes.len()))
    })?;
    Ok(u64::from_le_bytes(b))
}

/// Whether the store keeps digests.
pub(super) fn digested(r: &(impl ReadTxn + ?Sized)) -> Result<bool, StoreError> {
    match r.meta(FORMAT)? {
        // A seal without the format key that goes with it: the key was lost.
        None if r.meta(SEAL)?.is_some() => Err(StoreError::damaged(
            "the metadata has a seal but no format key",
        )),
        None => Ok(false),
        Some(v) => match u64_of(&v, FORMAT)? {
            DIGESTED | STORED_FORMS => Ok(true),
            UNDIGESTED_STORED_FORMS => Ok(false),
            other => Err(StoreError::damaged(format!(
                "unknown store format {other} (this tidemark writes {STORED_FORMS}): a newer \
                 tidemark wrote it, or the metadata is damaged"
            ))),
        },
    }
}

/// The metadata's seal (a store written before digests has none).
pub(super) fn read_seal(r: &(impl ReadTxn + ?Sized)) -> Result<Option<u64>, StoreError> {
    r.meta(SEAL)?.map(|v| u64_of(&v, SEAL)).transpose()
}

/// The committed metadata, its seal checked.
pub(super) fn read_meta(r: &(impl ReadTxn + ?Sized)) -> Result<Option<Meta>, StoreError> {
    let (Some(config), Some(fp), Some(state)) =
        (r.meta(CONFIG)?, r.meta(FINGERPRINT)?, r.meta(STATE)?)
    else {
        return Ok(None);
    };
    if digested(r)? {
        let stored = r
            .meta(SEAL)?
            .ok_or_else(|| StoreError::damaged("the metadata's seal is missing"))?;
        if u64_of(&stored, SEAL)? != seal(&config, &fp, &state) {
            return Err(StoreError::damaged(
                "the metadata (config, fingerprint or run state) does not match its seal",
            ));
        }
    }
    Ok(Some(Meta {
        config: String::from_utf8(config)
            .map_err(|_| StoreError::damaged("the stored config is not UTF-8"))?,
        fingerprint: u64_of(&fp, FINGERPRINT)?,
        state,
    }))
}

/// Pending digests of one transaction: table → start → `(entries, XOR of their hashes)`.
/// By table first, so a put finds its table by `&str` (a `(String, u64)` key would allocate a
/// string at every put to look it up).
struct Digests {
    on: bool,
    pending: BTreeMap<String, BTreeMap<u64, (u64, u64)>>,
}

impl Digests {
    fn load(
        &mut self,
        t: &dyn Txn,
        table: &str,
        start: u64,
    ) -> Result<&mut (u64, u64), StoreError> {
        if !self.pending.contains_key(table) {
            self.pending.insert(table.to_string(), BTreeMap::new());
        }
        let starts = self.pending.get_mut(table).expect(
            "the table's map is inserted just above when absent, and nothing removes one \
             before the flush that consumes them all",
        );
        Ok(match starts.entry(start) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(match t.get(&digest_table(table), start, &[])? {
                    None => (0, 0),
                    Some(bytes) => parse_digest(table, start, &bytes)?,
                })
            }
        })
    }

    /// Accounts for `key`'s value at `start` changing from `old` to `new`.
    fn replace(
        &mut self,
        t: &dyn Txn,
        table: &str,
        start: u64,
        key: &[u8],
        old: Option<&[u8]>,
        new: &[u8],
    ) -> Result<(), StoreError> {
        if !self.on {
            return Ok(());
        }
        let d = self.load(t, table, start)?;
        if let Some(old) = old {
            d.0 = d.0.checked_sub(1).ok_or_else(|| {
                StoreError::damaged(format!(
                    "{table} bucket {start}: an entry its digest does not count"
                ))
            })?;
            d.1 ^= entry_hash(start, key, old);
        }
        d.0 += 1;
        d.1 ^= entry_hash(start, key, new);
        Ok(())
    }

    fn flush(&mut self, t: &mut dyn Txn) -> Result<(), StoreError> {
        for (table, starts) in std::mem::take(&mut self.pending) {
            let digests = digest_table(&table);
            for (start, (n, x)) in starts {
                let mut v = [0u8; 16];
                v[..8].copy_from_slice(&n.to_le_bytes());
                v[8..].copy_from_slice(&x.to_le_bytes());
                t.put(&digests, start, &[], &v)?;
            }
        }
        Ok(())
    }
}

pub(super) fn parse_digest(table: &str, start: u64, v: &[u8]) -> Result<(u64, u64), StoreError> {
    if v.len() != 16 {
        return Err(StoreError::damaged(format!(
            "{table} bucket {start}: its digest is {} bytes, not 16",
            v.len()
        )));
    }
    let n = u64::from_le_bytes(v[..8].try_into().expect("8 of 16 bytes"));
    let x = u64::from_le_bytes(v[8..].try_into().expect("8 of 16 bytes"));
    Ok((n, x))
}

/// Applies a batch inside one write transaction.
pub(super) fn commit(t: &mut dyn Txn, b: &Batch<'_>) -> Result<(), StoreError> {
    OpenCommit::begin(&*t)?.finish(t, b)
}

/// A commit whose closed buckets may come in parts before the rest of its batch, all in one
/// write transaction: a run's committer writes the buckets as they close, and the batch with
/// the position that accounts for them at the checkpoint. Nothing is visible before
/// [`OpenCommit::finish`]'s transaction commits; a transaction abandoned before it rolls back
/// with every part.
pub(crate) struct OpenCommit {
    digests: Digests,
    /// The (metric, start) pairs whose buckets were written before the batch
    /// ([`OpenCommit::put`]): a promotion of one of them would overwrite its buckets with
    /// the stale open rows it moves.
    ahead: BTreeSet<(String, u64)>,
}

impl OpenCommit {
    /// A commit in the transaction `t`.
    pub(crate) fn begin(t: &dyn Txn) -> Result<OpenCommit, StoreError> {
        let on = match t.meta(FORMAT)? {
            Some(_) => digested(t)?,
            // A new store keeps digests from its first commit; one written before them never
            // gets partial ones.
            None => t.meta(STATE)?.is_none(),
        };
        Ok(OpenCommit {
            digests: Digests {
                on,
                pending: BTreeMap::new(),
            },
            ahead: BTreeSet::new(),
        })
    }

    /// Promotes starts' open rows into buckets: a part of the batch's `promote`, ahead of it
    /// and of the closed buckets of those starts (see [`OpenCommit::finish`]). A start whose
    /// buckets were written already is refused: its open rows, stale, would overwrite them.
    pub(crate) fn promote(
        &mut self,
        t: &mut dyn Txn,
        starts: &[PromoteRef<'_>],
    ) -> Result<(), StoreError> {
        for p in starts {
            if self.ahead.contains(&(p.into.to_string(), p.start)) {
                return Err(StoreError::Contract {
                    what: "a promotion after closed buckets of its start were written",
                });
            }
            promote(t, &mut self.digests, p)?;
        }
        Ok(())
    }

    /// Writes closed buckets (overwriting): a part of the batch's `puts`, ahead of it, after
    /// the promotions of their starts. A batch with promotions cannot follow (see
    /// [`OpenCommit::finish`]).
    pub(crate) fn put(
        &mut self,
        t: &mut dyn Txn,
        puts: &[BucketRef<'_>],
    ) -> Result<(), StoreError> {
        // A close's buckets share a few starts: a pair is looked up once a run of them.
        let mut last: Option<(&str, u64)> = None;
        for p in puts {
            if last != Some((p.metric, p.start)) {
                last = Some((p.metric, p.start));
                self.ahead.insert((p.metric.to_string(), p.start));
            }
        }
        self.write(t, puts)
    }

    fn write(&mut self, t: &mut dyn Txn, puts: &[BucketRef<'_>]) -> Result<(), StoreError> {
        let d = &mut self.digests;
        let order = write_order(&*t, puts, |p| (p.metric, p.start, p.key))?;
        t.prefetch(&mut order.iter().map(|p| (p.metric, p.start, p.key)))?;
        for p in order {
            let old = t.put(p.metric, p.start, p.key, p.bytes)?;
            d.replace(&*t, p.metric, p.start, p.key, old.as_deref(), p.bytes)?;
        }
        Ok(())
    }

    /// Applies the batch: the rest of the commit.
    pub(crate) fn finish(mut self, t: &mut dyn Txn, b: &Batch<'_>) -> Result<(), StoreError> {
        // A promotion moves every open row of its start, a key read back since it spilled
        // included (its row stale), and the closed buckets then overwrite them: buckets
        // written before the promotions could be overwritten by those stale rows. Written
        // ahead, promotions go with the buckets of their starts, before them.
        if !self.ahead.is_empty() && !b.promote.is_empty() {
            return Err(StoreError::Contract {
                what: "promotions after closed buckets written ahead of them",
            });
        }
        for p in &b.promote {
            promote(t, &mut self.digests, p)?;
        }
        self.write(t, &b.puts)?;
        let mut d = self.digests;
        t.prefetch(&mut b.merges.iter().map(|m| (m.metric, m.start, m.key)))?;
        for m in &b.merges {
            let old = t.get(m.metric, m.start, m.key)?;
            // Into nothing stored, the merge still runs (into an empty bucket): a bucket's bytes
            // do not depend on how late events were grouped between checkpoints.
            let bytes =
                (b.merge)(m.metric, m.start, old.as_deref(), m.bytes).map_err(|source| {
                    StoreError::Merge {
                        metric: m.metric.to_string(),
                        start: m.start,
                        source,
                    }
                })?;
            t.put(m.metric, m.start, m.key, &bytes)?;
            d.replace(&*t, m.metric, m.start, m.key, old.as_deref(), &bytes)?;
        }
        // Rollups read what the puts wrote, verified: the digests go first.
        d.flush(t)?;
        for r in &b.rollups {
            type Periods = BTreeMap<(u64, Vec<u8>), Vec<(u64, Vec<u8>)>>;
            let mut groups: Periods = BTreeMap::new();
            scan_verified(&*t, r.metric, r.from, r.to, &mut |key, start, v| {
                groups
                    .entry((start - start % r.width, key.to_vec()))
                    .or_default()
                    .push((start, v.to_vec()));
            })?;
            for ((period, key), parts) in groups {
                let bytes =
                    (b.roll)(r.metric, period, &parts).map_err(|source| StoreError::Merge {
                        metric: r.into.to_string(),
                        start: period,
                        source,
                    })?;
                let old = t.put(r.into, period, &key, &bytes)?;
                d.replace(&*t, r.into, period, &key, old.as_deref(), &bytes)?;
            }
        }
        d.flush(t)?;
        for &(metric, before) in &b.expire {
            t.remove_before(metric, before)?;
            t.remove_before(&digest_table(metric), before)?;
        }
        for s in &b.sweep {
            sweep(t, s)?;
        }
        for &(table, before) in &b.open_before {
            t.remove_before(table, before)?;
        }
        let order = write_order(&*t, &b.state, |r| (r.table, r.start, r.key))?;
        t.prefetch(&mut order.iter().map(|r| (r.table, r.start, r.key)))?;
        for r in order {
            match r.bytes {
                Some(v) => {
                    t.put(r.table, r.start, r.key, v)?;
                }
                None => {
                    t.remove(r.table, r.start, r.key)?;
                }
            }
        }
        let m = b.meta;
        let fp = m.fingerprint.to_le_bytes();
        t.set_meta(CONFIG, m.config.as_bytes())?;
        t.set_meta(FINGERPRINT, &fp)?;
        t.set_meta(STATE, &m.state)?;
        if d.on {
            t.set_meta(FORMAT, &STORED_FORMS.to_le_bytes())?;
            t.set_meta(
                SEAL,
                &seal(m.config.as_bytes(), &fp, &m.state).to_le_bytes(),
            )?;
        } else {
            t.set_meta(FORMAT, &UNDIGESTED_STORED_FORMS.to_le_bytes())?;
        }
        Ok(())
    }
}

/// Where a row goes: its table, start and key.
type RowAt<'r> = (&'r str, u64, &'r [u8]);

/// Of a batch's rows written into the middle of the store, the share (in twentieths)
/// [`write_order`] writes in its first pass.
const FIRST_PASS_TWENTIETHS: usize = 12;

/// The order in which a batch's closed buckets (or its state rows) are written, so that the
/// store's leaves come out nearly full (its rows are the same in any order: rows of one key
/// keep their order).
///
/// redb splits a full leaf into two halves by bytes, except at the very end of its key space,
/// where it starts a new leaf. Closed buckets have newer starts than any stored, so they come
/// after the metric's other buckets, but before the tables that sort after it (its digests,
/// open and state rows): from a store's second commit on they land in the middle. Written in
/// key order there, each split leaves a half-full leaf behind that nothing later fills (the
/// fan-out demo with a checkpoint every 100,000 records: 96 MB); in the engine's hash order,
/// about two thirds full (73 MB). So in the middle they go in two passes of key order: first
/// 12 rows of every 20, which leaves leaves half full, then the other 8, each between
/// neighbours of the first pass, in a leaf with room for it — about 0.5 / 0.6 = 83% full,
/// with room to spare for rows of uneven length (60 MB; 11 of 20 aims at 91% and overflows
/// into splits: 70 MB). Appended past the last row (a new store's first commit), key order
/// fills every leaf (52 MB for a run in one checkpoint, 62 MB in two passes).
fn write_order<'b, T>(
    t: &dyn Txn,
    rows: &'b [T],
    at: impl for<'r> Fn(&'r T) -> RowAt<'r>,
) -> Result<Vec<&'b T>, StoreError> {
    // The row key's order: the table name's length, the name, the start, the key.
    fn in_order<'r>((table, start, key): RowAt<'r>) -> (usize, &'r str, u64, &'r [u8]) {
        (table.len(), table, start, key)
    }
    let row = |p: &'b T| in_order(at(p));
    let mut sorted: Vec<&T> = rows.iter().collect();
    sorted.sort_by(|x, y| row(x).cmp(&row(y)));
    let Some(&first) = sorted.first() else {
        return Ok(sorted);
    };
    let (table, start, key) = at(first);
    if !t.rows_after(table, start, key)? {
        return Ok(sorted);
    }
    let mut passes = (Vec::with_capacity(sorted.len()), Vec::new());
    let mut rank = 0;
    let mut previous: Option<&T> = None;
    for p in sorted {
        if previous.is_some_and(|q| row(q) != row(p)) {
            rank += 1;
        }
        previous = Some(p);
        if rank % 20 < FIRST_PASS_TWENTIETHS {
            passes.0.push(p);
        } else {
            passes.1.push(p);
        }
    }
    passes.0.extend(passes.1);
    Ok(passes.0)
}

/// Moves every open row of a start into the metric's buckets, a page at a time.
fn promote(t: &mut dyn Txn, d: &mut Digests, p: &PromoteRef<'_>) -> Result<(), StoreError> {
    loop {
        let mut rows: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        t.page(p.from, p.start, None, PAGE, &mut |k, _, v| {
            rows.push((k.to_vec(), v.to_vec()))
        })?;
        if rows.is_empty() {
            return Ok(());
        }
        for (k, v) in rows {
            t.remove(p.from, p.start, &k)?;
            let old = t.put(p.into, p.start, &k, &v)?;
            d.replace(&*t, p.into, p.start, &k, old.as_deref(), &v)?;
        }
    }
}

/// Deletes the key rows whose expiry passed (a row rewritten since carries a later expiry
/// and stays), and the index entries before `before`.
fn sweep(t: &mut dyn Txn, s: &SweepRef<'_>) -> Result<(), StoreError> {
    let mut from = 0;
    while let Some(start) = t.next_start(s.index, from, s.before)? {
        let mut after: Option<Vec<u8>> = None;
        loop {
            let mut keys: Vec<Vec<u8>> = Vec::new();
            t.page(s.index, start, after.as_deref(), PAGE, &mut |k, _, _| {
                keys.push(k.to_vec())
            })?;
            let Some(last) = keys.last().cloned() else {
                break;
            };
            for k in keys {
                let row = t.get(s.rows, 0, &k)?;
                if row.is_some_and(|r| r.get(..8) == Some(&start.to_le_bytes()[..])) {
                    t.remove(s.rows, 0, &k)?;
                }
            }
            after = Some(last);
        }
        from = start + 1;
    }
    t.remove_before(s.index, s.before)
}

/// Scans `table`'s entries in `[from, to)`, checking each start's entries against its digest.
pub(crate) fn scan_verified(
    r: &(impl ReadTxn + ?Sized),
    table: &str,
    from: u64,
    to: u64,
    f: &mut Visit<'_>,
) -> Result<(), StoreError> {
    if from >= to {
        return Ok(());
    }
    if !digested(r)? {
        return r.scan(table, from, to, f);
    }
    let mut expected = BTreeMap::new();
    let mut bad = None;
    r.scan(
        &digest_table(table),
        from,
        to,
        &mut |key, start, v| match parse_digest(table, start, v) {
            Ok(d) if key.is_empty() => {
                expected.insert(start, d);
            }
            Ok(_) => bad = Some(StoreError::damaged(format!("{table}: a digest with a key"))),
            Err(e) => bad = Some(e),
        },
    )?;
    if let Some(e) = bad {
        return Err(e);
    }
    let mut cur: Option<(u64, u64, u64)> = None;
    let mut mismatch: Option<u64> = None;
    let mut finish = |c: (u64, u64, u64), expected: &mut BTreeMap<u64, (u64, u64)>| {
        let (start, n, x) = c;
        if expected.remove(&start).unwrap_or((0, 0)) != (n, x) {
            mismatch.get_or_insert(start);
        }
    };
    r.scan(table, from, to, &mut |key, start, v| {
        match &mut cur {
            Some(c) if c.0 == start => {
                c.1 += 1;
                c.2 ^= entry_hash(start, key, v);
            }
            _ => {
                if let Some(c) = cur.take() {
                    finish(c, &mut expected);
                }
                cur = Some((start, 1, entry_hash(start, key, v)));
            }
        }
        f(key, start, v)
    })?;
    if let Some(c) = cur {
        finish(c, &mut expected);
    }
    if let Some((&start, _)) = expected.iter().find(|(_, d)| d.0 > 0) {
        mismatch = Some(mismatch.map_or(start, |m| m.min(start)));
    }
    match mismatch {
        None => Ok(()),
        Some(start) => Err(StoreError::damaged(format!(
            "{table} bucket {start}: its entries do not match their digest (an entry was lost, \
             moved or altered)"
        ))),
    }
}

/// How many entries of one start a [`scan_by_key_verified`] cursor holds at a time.
const PAGE: usize = 256;

/// One start's entries, read a page at a time, hashed as they pass.
struct Cursor {
    start: u64,
    /// A cursor of the open table (state rows: no digests; each row checks itself).
    open: bool,
    page: std::collections::VecDeque<(Vec<u8>, Vec<u8>)>,
    after: Option<Vec<u8>>,
    done: bool,
    seen: (u64, u64),
}

impl Cursor {
    fn fill(&mut self, r: &(impl ReadTxn + ?Sized), table: &str) -> Result<(), StoreError> {
        if !self.page.is_empty() || self.done {
            return Ok(());
        }
        let start = self.start;
        let page = &mut self.page;
        let seen = &mut self.seen;
        let mut last: Option<Vec<u8>> = self.after.clone();
        let mut disorder = false;
        let n = r.page(table, start, self.after.as_deref(), PAGE, &mut |k, s, v| {
            // A backend reading a damaged tree may hand back keys out of place: each must be
            // of this start and after the last, or the paging would never end.
            if s != start || last.as_deref().is_some_and(|l| k <= l) {
                disorder = true;
                return;
            }
            last = Some(k.to_vec());
            seen.0 += 1;
            seen.1 ^= entry_hash(start, k, v);
            page.push_back((k.to_vec(), v.to_vec()));
        })?;
        if disorder {
            return Err(StoreError::damaged(format!(
                "{table} bucket {start}: its entries are out of order"
            )));
        }
        self.done = n < PAGE;
        self.after = self.page.back().map(|(k, _)| k.clone());
        Ok(())
    }
}

/// The digests of `table`'s starts in `[from, to)`: `start → (entries, hash)`.
pub(super) fn digests_in(
    r: &(impl ReadTxn + ?Sized),
    table: &str,
    from: u64,
    to: u64,
) -> Result<BTreeMap<u64, (u64, u64)>, StoreError> {
    let mut expected = BTreeMap::new();
    let mut bad = None;
    r.scan(
        &digest_table(table),
        from,
        to,
        &mut |_, start, v| match parse_digest(table, start, v) {
            Ok(d) => {
                expected.insert(start, d);
            }
            Err(e) => bad = Some(e),
        },
    )?;
    match bad {
        Some(e) => Err(e),
        None => Ok(expected),
    }
}

/// The starts of `table` holding entries in `[from, to)`, in order, found by seeking from
/// start to start.
pub(super) fn starts_in(
    r: &(impl ReadTxn + ?Sized),
    table: &str,
    from: u64,
    to: u64,
) -> Result<Vec<u64>, StoreError> {
    let mut starts = Vec::new();
    let mut at = from;
    while let Some(s) = r.next_start(table, at, to)? {
        if s < at || s >= to {
            return Err(StoreError::damaged(format!(
                "{table}: bucket starts out of order ({s} after {at})"
            )));
        }
        starts.push(s);
        match s.checked_add(1) {
            Some(next) => at = next,
            None => break,
        }
    }
    Ok(starts)
}

/// Every start with entries has its digest, and every digest counting entries has its start:
/// one lost alone would hide a start from a read.
pub(super) fn check_starts_digested(
    table: &str,
    expected: &BTreeMap<u64, (u64, u64)>,
    starts: &[u64],
    from: u64,
) -> Result<(), StoreError> {
    let counted: Vec<u64> = expected
        .iter()
        .filter(|(_, d)| d.0 > 0)
        .map(|(&s, _)| s)
        .collect();
    if counted == starts {
        return Ok(());
    }
    let odd = starts
        .iter()
        .chain(&counted)
        .find(|s| starts.contains(s) != counted.contains(s))
        .copied()
        .unwrap_or(from);
    Err(StoreError::damaged(format!(
        "{table} bucket {odd}: its entries and its digest do not match (a digest or its \
         entries were lost)"
    )))
}

/// [`super::Store::scan_by_key`] inside one read transaction.
pub(super) fn scan_by_key_verified(
    r: &(impl ReadTxn + ?Sized),
    table: &str,
    open: Option<&str>,
    from: u64,
    to: u64,
    width: u64,
    f: &mut KeyVisit<'_>,
) -> Result<(), StoreError> {
    if from >= to || width == 0 {
        return Ok(());
    }
    let digested = digested(r)?;
    let mut expected = if digested {
        digests_in(r, table, from, to)?
    } else {
        BTreeMap::new()
    };
    // One cursor per start that holds entries, found by seeking from start to start: memory
    // and time grow with the starts stored, never with the window's length.
    let starts = starts_in(r, table, from, to)?;
    if digested {
        check_starts_digested(table, &expected, &starts, from)?;
    }
    let cursor = |start, open| Cursor {
        start,
        open,
        page: Default::default(),
        after: None,
        done: false,
        seen: (0, 0),
    };
    let mut cursors: Vec<Cursor> = starts.into_iter().map(|s| cursor(s, false)).collect();
    // The open buckets' rows, merged in by key like the closed ones.
    if let Some(open) = open {
        let mut at = from;
        while let Some(s) = r.next_start(open, at, to)? {
            if s < at || s >= to {
                return Err(StoreError::damaged(format!(
                    "{open}: bucket starts out of order ({s} after {at})"
                )));
            }
            cursors.push(cursor(s, true));
            match s.checked_add(1) {
                Some(next) => at = next,
                None => break,
            }
        }
    }
    let mut parts: Vec<(u64, Vec<u8>)> = Vec::new();
    loop {
        for c in cursors.iter_mut() {
            c.fill(r, if c.open { open.unwrap_or(table) } else { table })?;
        }
        let Some(key) = cursors
            .iter()
            .filter_map(|c| c.page.front().map(|(k, _)| k))
            .min()
            .cloned()
        else {
            break;
        };
        parts.clear();
        for c in cursors.iter_mut() {
            if c.page.front().is_some_and(|(k, _)| *k == key) {
                let (_, v) = c.page.pop_front().expect("checked non-empty");
                parts.push((c.start, v));
            }
        }
        f(&key, &parts);
    }
    if digested {
        for c in cursors.iter().filter(|c| !c.open) {
            if expected.remove(&c.start).unwrap_or((0, 0)) != c.seen {
                return Err(StoreError::damaged(format!(
                    "{table} bucket {}: its entries do not match their digest (an entry was \
                     lost, moved or altered)",
                    c.start
                )));
            }
        }
        if let Some((start, _)) = expected.iter().find(|(_, d)| d.0 > 0) {
            return Err(StoreError::damaged(format!(
                "{table} bucket {start}: its digest counts entries at a start no bucket of \
                 the metric can have"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::row_key::row_key;

    /// A backend that only says whether rows sort after a key: `appending` when none do.
    struct Tail {
        appending: bool,
    }

    impl ReadTxn for Tail {
        fn meta(&self, _: &str) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(None)
        }
        fn get(&self, _: &str, _: u64, _: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(None)
        }
        fn scan(&self, _: &str, _: u64, _: u64, _: &mut Visit<'_>) -> Result<(), StoreError> {
            Ok(())
        }
        fn next_start(&self, _: &str, _: u64, _: u64) -> Result<Option<u64>, StoreError> {
            Ok(None)
        }
        fn page(
            &self,
            _: &str,
            _: u64,
            _: Option<&[u8]>,
            _: usize,
            _: &mut Visit<'_>,
        ) -> Result<usize, StoreError> {
            Ok(0)
        }
    }

    impl Txn for Tail {
        fn put(&mut self, _: &str, _: u64, _: &[u8], _: &[u8]) -> StoreResult {
            Ok(None)
        }
        fn remove(&mut self, _: &str, _: u64, _: &[u8]) -> StoreResult {
            Ok(None)
        }
        fn remove_before(&mut self, _: &str, _: u64) -> Result<(), StoreError> {
            Ok(())
        }
        fn set_meta(&mut self, _: &str, _: &[u8]) -> Result<(), StoreError> {
            Ok(())
        }
        fn rows_after(&self, _: &str, _: u64, _: &[u8]) -> Result<bool, StoreError> {
            Ok(!self.appending)
        }
    }

    type StoreResult = Result<Option<Vec<u8>>, StoreError>;

    /// Rows of two tables (names of different lengths, so that the row key's length prefix
    /// orders them), starts and keys in a scrambled order, one key written twice.
    fn scrambled() -> Vec<(String, u64, Vec<u8>, u32)> {
        let mut rows = Vec::new();
        let mut x = 0x9e37_79b9u32;
        for i in 0..97u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let table = if x % 3 == 0 { "zz" } else { "aaa" };
            rows.push((
                table.to_string(),
                u64::from(x % 4) * 60_000,
                format!("k{}", x % 50).into_bytes(),
                i,
            ));
        }
        let again = rows[10].clone();
        rows.push((again.0, again.1, again.2, 1000));
        rows
    }

    fn order(appending: bool, rows: &[(String, u64, Vec<u8>, u32)]) -> Vec<u32> {
        let t = Tail { appending };
        write_order(&t, rows, |r| (r.0.as_str(), r.1, r.2.as_slice()))
            .unwrap()
            .into_iter()
            .map(|r| r.3)
            .collect()
    }

    #[test]
    fn appended_rows_go_in_the_byte_order_of_their_row_keys() {
        let rows = scrambled();
        let mut by_bytes: Vec<&(String, u64, Vec<u8>, u32)> = rows.iter().collect();
        // A stable sort by the stored key: rows of one key keep the batch's order.
        by_bytes.sort_by_key(|r| row_key(&r.0, r.1, &r.2).unwrap());
        let want: Vec<u32> = by_bytes.iter().map(|r| r.3).collect();
        assert_eq!(order(true, &rows), want);
        // The key written twice: the batch's later row is written later.
        let first = want.iter().position(|&i| i == rows[10].3).unwrap();
        let second = want.iter().position(|&i| i == 1000).unwrap();
        assert!(first < second);
    }

    #[test]
    fn rows_in_the_middle_go_in_two_passes_of_key_order_each_key_in_one() {
        let rows = scrambled();
        let appended = order(true, &rows);
        let middle = order(false, &rows);
        // The same rows.
        let (mut a, mut m) = (appended.clone(), middle.clone());
        a.sort_unstable();
        m.sort_unstable();
        assert_eq!(a, m);
        // Rank each row by its key's place among the distinct keys in key order: the first
        // pass is 12 of every 20 ranks, the second the rest, each in key order.
        let key = |i: u32| {
            let r = rows.iter().find(|r| r.3 == i).unwrap();
            row_key(&r.0, r.1, &r.2).unwrap()
        };
        let mut ranks = Vec::new();
        for (n, &i) in appended.iter().enumerate() {
            let same = n > 0 && key(appended[n - 1]) == key(i);
            let rank = ranks
                .last()
                .map_or(0, |&(_, r)| if same { r } else { r + 1 });
            ranks.push((i, rank));
        }
        let rank_of = |i: u32| ranks.iter().find(|r| r.0 == i).unwrap().1;
        let want: Vec<u32> = ranks
            .iter()
            .filter(|r| r.1 % 20 < 12)
            .chain(ranks.iter().filter(|r| r.1 % 20 >= 12))
            .map(|r| r.0)
            .collect();
        assert_eq!(middle, want);
        // The key written twice keeps its rows together, in the batch's order.
        let first = middle.iter().position(|&i| i == rows[10].3).unwrap();
        assert_eq!(middle[first + 1], 1000);
        assert_eq!(rank_of(rows[10].3), rank_of(1000));
    }

    /// A backend reading a damaged tree: every page of a start is the same two entries,
    /// whatever key the page should start after.
    struct Stuck;

    impl ReadTxn for Stuck {
        fn meta(&self, _: &str) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(None)
        }
        fn get(&self, _: &str, _: u64, _: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(None)
        }
        fn scan(&self, _: &str, _: u64, _: u64, _: &mut Visit<'_>) -> Result<(), StoreError> {
            Ok(())
        }
        fn next_start(&self, _: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError> {
            Ok((from < to).then_some(from))
        }
        fn page(
            &self,
            _: &str,
            start: u64,
            _: Option<&[u8]>,
            limit: usize,
            f: &mut Visit<'_>,
        ) -> Result<usize, StoreError> {
            for i in 0..limit {
                f(&[(i % 2) as u8], start, b"v");
            }
            Ok(limit)
        }
    }

    /// A digested store whose start 60,000 lost its digest row (entries at 0 and 60,000,
    /// a digest for 0 only).
    struct LostDigest;

    impl ReadTxn for LostDigest {
        fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
            Ok((name == FORMAT).then(|| DIGESTED.to_le_bytes().to_vec()))
        }
        fn get(&self, _: &str, _: u64, _: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(None)
        }
        fn scan(
            &self,
            table: &str,
            from: u64,
            to: u64,
            f: &mut Visit<'_>,
        ) -> Result<(), StoreError> {
            if table == "#m" && from == 0 && to > 0 {
                let mut v = 1u64.to_le_bytes().to_vec();
                v.extend(entry_hash(0, b"k", b"v").to_le_bytes());
                f(&[], 0, &v);
            }
            Ok(())
        }
        fn page(
            &self,
            _: &str,
            start: u64,
            after: Option<&[u8]>,
            _: usize,
            f: &mut Visit<'_>,
        ) -> Result<usize, StoreError> {
            if after.is_some() {
                return Ok(0);
            }
            f(b"k", start, b"v");
            Ok(1)
        }
        fn next_start(&self, _: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError> {
            Ok([0u64, 60_000].into_iter().find(|&s| s >= from && s < to))
        }
    }

    #[test]
    fn a_start_whose_digest_was_lost_is_damage_not_a_smaller_answer() {
        let r = scan_by_key_verified(&LostDigest, "m", None, 0, 120_000, 60_000, &mut |_, _| {});
        assert!(matches!(r, Err(StoreError::Damaged { .. })), "{r:?}");
        // The start with its digest alone reads clean.
        let r = scan_by_key_verified(&LostDigest, "m", None, 0, 60_000, 60_000, &mut |_, _| {});
        assert!(r.is_ok(), "{r:?}");
    }

    #[test]
    fn a_page_out_of_order_is_damage_not_an_endless_loop() {
        let mut seen = 0;
        let r = scan_by_key_verified(&Stuck, "m", None, 0, 120_000, 60_000, &mut |_, _| seen += 1);
        assert!(matches!(r, Err(StoreError::Damaged { .. })), "{r:?}");
        assert!(seen < 10);
    }

    #[test]
    fn formats_2_and_3_keep_digests_4_does_not_and_an_unknown_format_is_refused() {
        use crate::store::{MemStore, Store};
        for (format, expected) in [
            (2u64, Some(true)),
            (3, Some(true)),
            (4, Some(false)),
            (5, None),
            (1, None),
        ] {
            let mut store = MemStore::default();
            store
                .write(&mut |t| t.set_meta(FORMAT, &format.to_le_bytes()))
                .expect("an in-memory store takes any metadata");
            let view = store.view().expect("an in-memory store always has a view");
            let got = digested(&*view);
            assert_eq!(
                got.as_ref().ok().copied(),
                expected,
                "format {format}: {got:?}"
            );
            if expected.is_none() {
                assert!(got
                    .unwrap_err()
                    .to_string()
                    .contains(&format!("format {format}")));
            }
        }
    }
}
