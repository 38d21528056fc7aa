//! One key's buckets in a window, read by key instead of by scanning every key, with the
//! digests still checked.
//!
//! A window's answer for one key needs only that key's entry at each bucket start, which the
//! row layout finds with one lookup per start (`(table, start, key)`). The digest of a start
//! covers all its entries, though, and can only be checked by reading them all. So each start
//! the read touches is verified whole once — every entry hashed and compared with the
//! start's digest, exactly as a scan does — and, when the store handle keeps a
//! [`VerifiedStarts`] memo (a server does), what was verified is remembered: the start's
//! digest and, for each of its entries, a hash of its key and of the whole entry. A later read
//! of the same start, while its digest is unchanged, checks its one lookup against that
//! record instead of reading the start again: the entry found must be the very entry verified
//! (same key, start and bytes), and a key the start held must still be found. A start whose
//! digest changed (a late merge, a rollup) is verified whole again.
//!
//! So a keyed answer is damage-checked as a scan's is: an entry of the key lost, moved to
//! another key or start, or altered, a start's digest or entries lost, turns into
//! [`StoreError::Damaged`] rather than a smaller answer. Without a memo (a `tidemark query`
//! process) each start of the window is read whole once per query, hashing but not decoding
//! the other keys' entries.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use xxhash_rust::xxh3::xxh3_64;

use super::apply::{check_starts_digested, digested, digests_in, entry_hash, read_seal, starts_in};
use super::{ReadTxn, StoreError};

/// What a store handle's keyed reads have verified of each bucket start: see the [module
/// docs](self). Bounded: past its capacity (entries remembered, 16 bytes each) the starts
/// used longest ago are forgotten, and verified again when read.
#[derive(Debug, Default)]
pub struct VerifiedStarts {
    capacity: usize,
    inner: Mutex<Memo>,
    /// Held while a start is verified: readers that find the same start unverified at once
    /// (the first reads after a checkpoint) wait for one verification instead of each
    /// reading the start whole.
    verifying: Mutex<()>,
}

#[derive(Debug, Default)]
struct Memo {
    starts: HashMap<(String, u64), Arc<Start>>,
    entries: usize,
    clock: u64,
}

/// `(hash of the key, hash of the entry)` of each entry of a start.
type Record = Vec<(u64, u64)>;

/// One verified start.
#[derive(Debug)]
struct Start {
    /// Its digest when verified.
    digest: (u64, u64),
    /// `(hash of the key, hash of the entry)` of every entry, sorted.
    entries: Vec<(u64, u64)>,
    /// When it was last used (the memo's clock).
    used: AtomicU64,
}

impl VerifiedStarts {
    /// A memo remembering at most `entries` entries (0: none, each read verifies its starts
    /// whole).
    pub fn with_capacity(entries: usize) -> VerifiedStarts {
        VerifiedStarts {
            capacity: entries,
            inner: Mutex::default(),
            verifying: Mutex::default(),
        }
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        // A panic while the lock was held leaves at worst a start missing or kept: both are
        // sound (a start missing is verified again).
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, table: &str, start: u64, digest: (u64, u64)) -> Option<Arc<Start>> {
        if self.capacity == 0 {
            return None;
        }
        let mut m = self.memo();
        m.clock += 1;
        let now = m.clock;
        let s = m.starts.get(&(table.to_string(), start))?;
        if s.digest != digest {
            return None;
        }
        s.used.store(now, Ordering::Relaxed);
        Some(Arc::clone(s))
    }

    fn put(&self, table: &str, start: u64, digest: (u64, u64), mut entries: Vec<(u64, u64)>) {
        if entries.len() > self.capacity {
            return;
        }
        entries.sort_unstable();
        let mut m = self.memo();
        m.clock += 1;
        let now = m.clock;
        if let Some(old) = m.starts.remove(&(table.to_string(), start)) {
            m.entries -= old.entries.len();
        }
        while m.entries + entries.len() > self.capacity {
            let Some(oldest) = m
                .starts
                .iter()
                .min_by_key(|(_, s)| s.used.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(s) = m.starts.remove(&oldest) {
                m.entries -= s.entries.len();
            }
        }
        m.entries += entries.len();
        m.starts.insert(
            (table.to_string(), start),
            Arc::new(Start {
                digest,
                entries,
                used: AtomicU64::new(now),
            }),
        );
    }

    /// Starts remembered (for tests).
    pub fn starts(&self) -> usize {
        self.memo().starts.len()
    }
}

/// Reads every entry of `table` at `start`, checks them against `digest`, and returns `key`'s
/// value and, with `keep`, the record a [`VerifiedStarts`] keeps.
fn verify_start(
    r: &(impl ReadTxn + ?Sized),
    table: &str,
    start: u64,
    digest: (u64, u64),
    key: &[u8],
    keep: bool,
) -> Result<(Option<Vec<u8>>, Record), StoreError> {
    let mut seen = (0u64, 0u64);
    let mut mine = None;
    let mut kept = Vec::new();
    let mut elsewhere = false;
    r.scan(table, start, start.saturating_add(1), &mut |k, s, v| {
        if s != start {
            elsewhere = true;
            return;
        }
        let h = entry_hash(start, k, v);
        seen.0 += 1;
        seen.1 ^= h;
        if keep {
            kept.push((xxh3_64(k), h));
        }
        if k == key {
            mine = Some(v.to_vec());
        }
    })?;
    if elsewhere || seen != digest {
        return Err(StoreError::damaged(format!(
            "{table} bucket {start}: its entries do not match their digest (an entry was lost, \
             moved or altered)"
        )));
    }
    Ok((mine, kept))
}

/// Checks `key`'s value at `start` (`None`: no entry) against the start's verified record.
fn matches_record(v: &Start, start: u64, key: &[u8], value: Option<&[u8]>) -> bool {
    let kh = xxh3_64(key);
    let from = v.entries.partition_point(|e| e.0 < kh);
    let mut same_key = v.entries[from..].iter().take_while(|e| e.0 == kh);
    match value {
        Some(value) => {
            let h = entry_hash(start, key, value);
            same_key.any(|e| e.1 == h)
        }
        // A key the start held, now not found (a hash shared by two keys also lands here:
        // at 2⁻⁶⁴ a pair, it is taken as damage rather than answered from).
        None => same_key.next().is_none(),
    }
}

/// `key`'s buckets of `table` in `[from, to)` (`(start, bytes)`, by start), then its rows in
/// the open-bucket table `open` in the same range (state rows: no digests, each checks itself
/// when decoded) — the parts [`super::Store::scan_by_key`] hands over for the key, in the same
/// order — with each start's digest checked as the [module docs](self) say.
pub(super) fn key_buckets_verified(
    r: &(impl ReadTxn + ?Sized),
    table: &str,
    open: Option<&str>,
    from: u64,
    to: u64,
    key: &[u8],
    memo: &VerifiedStarts,
) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
    let mut parts = Vec::new();
    if from >= to {
        return Ok(parts);
    }
    let starts = starts_in(r, table, from, to)?;
    if digested(r)? {
        let expected = digests_in(r, table, from, to)?;
        check_starts_digested(table, &expected, &starts, from)?;
        let recorded = |record: &Start, start: u64| -> Result<Option<Vec<u8>>, StoreError> {
            let value = r.get(table, start, key)?;
            if !matches_record(record, start, key, value.as_deref()) {
                return Err(StoreError::damaged(format!(
                    "{table} bucket {start}: the entry of key {:?} is not the one verified \
                     against the digest (lost, moved or altered since)",
                    String::from_utf8_lossy(key)
                )));
            }
            Ok(value)
        };
        for (start, digest) in expected.into_iter().filter(|(_, d)| d.0 > 0) {
            let value = match memo.get(table, start, digest) {
                Some(record) => recorded(&record, start)?,
                None if memo.capacity == 0 => verify_start(r, table, start, digest, key, false)?.0,
                None => {
                    let _one = memo.verifying.lock().unwrap_or_else(|p| p.into_inner());
                    // Another reader may have verified it while this one waited.
                    match memo.get(table, start, digest) {
                        Some(record) => recorded(&record, start)?,
                        None => {
                            let (value, kept) = verify_start(r, table, start, digest, key, true)?;
                            memo.put(table, start, digest, kept);
                            value
                        }
                    }
                }
            };
            if let Some(v) = value {
                parts.push((start, v));
            }
        }
    } else {
        // A store written before digests: nothing to check but each value's own checksum.
        for start in starts {
            if let Some(v) = r.get(table, start, key)? {
                parts.push((start, v));
            }
        }
    }
    if let Some(open) = open {
        for start in starts_in(r, open, from, to)? {
            if let Some(v) = r.get(open, start, key)? {
                parts.push((start, v));
            }
        }
    }
    Ok(parts)
}

/// A number that changes with every commit: the metadata's seal (a hash of the run state,
/// which every checkpoint changes), or for a store written before seals a hash of the state.
/// `None` for an empty store.
pub(super) fn generation(r: &(impl ReadTxn + ?Sized)) -> Result<Option<u64>, StoreError> {
    match read_seal(r)? {
        Some(seal) => Ok(Some(seal)),
        None => Ok(r.meta("state")?.map(|s| xxh3_64(&s))),
    }
}
