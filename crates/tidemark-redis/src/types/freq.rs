//! `freq`: a ring of per-bucket item counts, each exact while it holds few items and then a
//! Count-Min sketch (Cormode, Muthukrishnan 2005) that keeps every item reaching φ of the
//! bucket's total by name. `high` never under-counts; `low = high − ε·N` holds with
//! probability 1 − δ.
//!
//! ```text
//! TMFREQ.CREATE key WINDOW ms BUCKET ms [EPSILON e] [DELTA d] [PHI phi]
//! TMFREQ.ADD key time item [count] [item [count] ...]
//! TMFREQ.QUERY key item [item ...] [WINDOW ms]
//! TMFREQ.TOP key k [WINDOW ms]
//! ```
//!
//! Items are at most [`Limits::MAX_FREQ_ITEM`] bytes: a key tells items apart by name while
//! it counts exactly and names its heavy items, so a longer one is refused rather than cut.
//!
//! Bundle kind 1 parameters: bucket ms u64, buckets u32, newest bucket u64 (`u64::MAX`:
//! none), epsilon f64, delta f64, phi f64; one part per bucket held, its index the bucket.

use tidemark::codec::Writer;
use tidemark::frequency::ItemCounts;
use tidemark::hash::ItemHasher;

use super::bundle::{self, invalid};
use super::{Access, Call, Clock, Encoded, Keys, LoadError, Spec, TmType, Value};
use crate::error::CmdError;
use crate::limits::Limits;
use crate::reply::{Replicate, Reply};

/// A ring of per-bucket item counts: Count-Min with the heavy items named.
#[derive(Clone, Debug)]
pub struct Freq {
    /// ε of each bucket's sketch.
    pub epsilon: f64,
    /// δ of each bucket's sketch.
    pub delta: f64,
    /// The heavy-hitter fraction φ.
    pub phi: f64,
    /// Bucket width, ms.
    pub bucket_ms: u64,
    /// `slots[b % n]` holds bucket `b` while it is among the newest `n`.
    pub slots: Vec<Option<(u64, ItemCounts)>>,
    /// The newest bucket seen.
    pub newest: Option<u64>,
    /// The buckets' bytes (their [`ItemCounts::bytes`]), kept as events come: the key's
    /// bound is checked per `TMFREQ.ADD`, as its items' names make it grow.
    held: u64,
}

/// Why an event did not go into a ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooOld {
    /// The oldest time still accepted, ms.
    pub oldest: u64,
}

impl Freq {
    /// An empty ring (parameters checked by the caller: `Freq::check`).
    pub fn new(epsilon: f64, delta: f64, phi: f64, bucket_ms: u64, buckets: u64) -> Freq {
        Freq {
            epsilon,
            delta,
            phi,
            bucket_ms,
            slots: vec![None; buckets as usize],
            newest: None,
            held: 0,
        }
    }

    /// Counts the buckets' bytes again (after the slots were filled from a payload).
    pub fn recount(&mut self) {
        self.held = self
            .slots
            .iter()
            .flatten()
            .map(|(_, c)| c.bytes() as u64)
            .sum();
    }

    /// The most these items can add to the key at one time: each a new name in its bucket
    /// (32 bytes beside it), and the bucket's exact table promoted to its sketch (w·d 8-byte
    /// counters, w·d = 8 × the exact limit).
    pub fn growth(&self, items: &[(&[u8], u64)]) -> u64 {
        let exact_limit = ItemCounts::new(self.epsilon, self.delta, self.phi)
            .map_or(0, |c| c.exact_limit() as u64);
        let names: u64 = items.iter().map(|(i, _)| 32 + i.len() as u64).sum();
        names + 64 * exact_limit
    }

    /// The buckets' bytes.
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Checks a shape: the sketch parameters, the bucket count and the bytes at full size.
    /// Returns the full-size bytes.
    fn check(epsilon: f64, delta: f64, phi: f64, buckets: u64) -> Result<u64, String> {
        let probe = ItemCounts::new(epsilon, delta, phi).map_err(|e| e.to_string())?;
        if buckets > Limits::MAX_FREQ_BUCKETS {
            return Err(format!(
                "WINDOW/BUCKET must be at most {}, got {buckets}",
                Limits::MAX_FREQ_BUCKETS
            ));
        }
        // The exact table promotes at w·d/8 items, to a w·d table of 8-byte counters.
        let per_bucket = (probe.exact_limit() as u64).saturating_mul(64) + 1024;
        let full = per_bucket.saturating_mul(buckets);
        if full > Limits::MAX_KEY_BYTES {
            return Err(format!(
                "the ring would need up to {full} bytes at full size, above the {} byte limit",
                Limits::MAX_KEY_BYTES
            ));
        }
        Ok(full)
    }

    /// Buckets in the ring.
    pub fn buckets(&self) -> u64 {
        self.slots.len() as u64
    }

    /// The window, ms.
    pub fn window(&self) -> u64 {
        self.bucket_ms * self.buckets()
    }

    /// Adds `count` of `item` (at most [`Limits::MAX_FREQ_ITEM`] bytes) at `time`, to its own
    /// bucket if the ring still holds it.
    pub fn add(&mut self, time: u64, item: &[u8], count: u64) -> Result<(), TooOld> {
        let bucket = time / self.bucket_ms;
        let n = self.buckets();
        if let Some(newest) = self.newest {
            if bucket + n <= newest {
                return Err(TooOld {
                    oldest: (newest + 1 - n).saturating_mul(self.bucket_ms),
                });
            }
        }
        let slot = &mut self.slots[(bucket % n) as usize];
        if slot.as_ref().is_none_or(|(b, _)| *b != bucket) {
            let fresh = ItemCounts::new(self.epsilon, self.delta, self.phi);
            // The parameters were checked when the key was created or decoded.
            let Ok(fresh) = fresh else { return Ok(()) };
            if let Some((_, old)) = slot.replace((bucket, fresh)) {
                self.held = self.held.saturating_sub(old.bytes() as u64);
            }
        }
        if let Some((_, counts)) = slot {
            let before = counts.bytes() as u64;
            counts.insert_hashed(ItemHasher::default().hash(item), item, count);
            self.held = (self.held + counts.bytes() as u64).saturating_sub(before);
        }
        if self.newest.is_none_or(|nb| bucket > nb) {
            self.newest = Some(bucket);
        }
        Ok(())
    }

    /// The merged counts of the `window_buckets` newest buckets.
    pub fn window_counts(&self, window_buckets: u64) -> ItemCounts {
        let mut out: Option<ItemCounts> = None;
        if let Some(newest) = self.newest {
            let n = self.buckets();
            for b in (newest + 1).saturating_sub(window_buckets)..=newest {
                if let Some((sb, c)) = &self.slots[(b % n) as usize] {
                    if *sb == b {
                        match &mut out {
                            None => out = Some(c.clone()),
                            // Buckets of one key share ε, δ and φ: the merge cannot refuse.
                            Some(acc) => {
                                let _ = acc.merge(c);
                            }
                        }
                    }
                }
            }
        }
        match out {
            Some(c) => c,
            None => ItemCounts::new(self.epsilon, self.delta, self.phi)
                .unwrap_or_else(|_| unreachable!("parameters checked at creation and decode")),
        }
    }

    /// The window in whole buckets.
    fn window_buckets(&self, cmd: &'static str, window: Option<u64>) -> Result<u64, CmdError> {
        match window {
            None => Ok(self.buckets()),
            Some(w) if w % self.bucket_ms == 0 && w <= self.window() => Ok(w / self.bucket_ms),
            Some(w) => Err(CmdError::Param {
                cmd,
                msg: format!("WINDOW must be a multiple of the bucket ({} ms) up to the key's window ({} ms), got {w}", self.bucket_ms, self.window()),
            }),
        }
    }
}

impl TmType for Freq {
    const NAME: &'static str = "freq";

    fn heap_bytes(&self) -> usize {
        core::mem::size_of::<Freq>()
            + self.slots.len() * core::mem::size_of::<Option<(u64, ItemCounts)>>()
            + self.held as usize
    }

    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u64(self.bucket_ms)
            .u32(self.slots.len() as u32)
            .u64(self.newest.unwrap_or(u64::MAX))
            .f64(self.epsilon)
            .f64(self.delta)
            .f64(self.phi);
        let parts: Vec<(u64, Vec<u8>)> = self
            .slots
            .iter()
            .flatten()
            .map(|(b, c)| (*b, c.to_bytes()))
            .collect();
        bundle::encode(bundle::KIND_FREQ, w.bytes(), &parts)
    }

    fn latest(&self) -> Option<u64> {
        self.newest.map(|b| b.saturating_mul(self.bucket_ms))
    }

    fn info(&self, m: &mut Vec<(&'static str, Reply)>) {
        m.push(("structure", Reply::text("ring of per-bucket item counts: exact, then Count-Min (Cormode, Muthukrishnan 2005) with named heavy items")));
        m.push(("window_ms", Reply::Integer(self.window() as i64)));
        m.push(("bucket_ms", Reply::Integer(self.bucket_ms as i64)));
        m.push(("buckets", Reply::Integer(self.buckets() as i64)));
        m.push(("epsilon", Reply::Double(self.epsilon)));
        m.push(("delta", Reply::Double(self.delta)));
        m.push(("phi", Reply::Double(self.phi)));
        m.push((
            "hash",
            Reply::text(format!("{}", ItemHasher::default().id())),
        ));
        m.push((
            "latest_ms",
            self.latest()
                .map_or(Reply::Null, |t| Reply::Integer(t as i64)),
        ));
        m.push(("bracket", Reply::text("high never under-counts; low = high − ε·N holds with probability 1 − δ (exact while few items)")));
    }

    fn decode(encoded: &mut Encoded<'_>) -> Option<Result<Self, LoadError>> {
        match encoded {
            Encoded::Bundle(bundle::KIND_FREQ, r) => Some(decode_ring(r)),
            _ => None,
        }
    }
}

fn decode_ring(r: &mut tidemark::codec::Reader<'_>) -> Result<Freq, LoadError> {
    let d = LoadError::Decode;
    let bucket_ms = r.u64("bucket ms").map_err(d)?;
    let n = r.u32("buckets").map_err(d)? as u64;
    let newest = r.u64("newest bucket").map_err(d)?;
    let epsilon = r.f64("epsilon").map_err(d)?;
    let delta = r.f64("delta").map_err(d)?;
    let phi = r.f64("phi").map_err(d)?;
    if bucket_ms == 0 || n == 0 || bucket_ms.saturating_mul(n) > Limits::MAX_WINDOW_MS {
        return Err(invalid(r, "buckets", "a window of 1..=2^48 ms", n));
    }
    Freq::check(epsilon, delta, phi, n)
        .map_err(|_| LoadError::Limit("frequency parameters a TMFREQ.CREATE would refuse"))?;
    let mut f = Freq::new(epsilon, delta, phi, bucket_ms, n);
    f.newest = (newest != u64::MAX).then_some(newest);
    bundle::read_parts(r, n, "at most one per bucket", |r, b, part| {
        let counts = ItemCounts::from_bytes(part).map_err(d)?;
        let same = counts.epsilon() == epsilon && counts.delta() == delta && counts.phi() == phi;
        if !same {
            return Err(invalid(r, "part", "a bucket of the ring's ε, δ and φ", b));
        }
        let newest = f
            .newest
            .ok_or_else(|| invalid(r, "bucket", "none without a newest bucket", b))?;
        // A slot older than the ring reaches is one no newer bucket has reused yet: the ring
        // holds (and writes) it after a quiet spell.
        if b > newest {
            return Err(invalid(r, "bucket", "no newer than the newest", b));
        }
        let slot = &mut f.slots[(b % n) as usize];
        if slot.is_some() {
            return Err(invalid(r, "bucket", "one part per bucket", b));
        }
        *slot = Some((b, counts));
        Ok(())
    })?;
    f.recount();
    Ok(f)
}

/// `TMFREQ.CREATE`.
pub const CREATE: Spec = Spec {
    name: "TMFREQ.CREATE",
    legacy: Some("TM.FREQ.CREATE"),
    access: Access::Write,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key WINDOW ms BUCKET ms [EPSILON e] [DELTA d] [PHI phi]",
    summary: "Creates windowed item counts: a ring of buckets, each exact, then Count-Min naming its heavy items",
    complexity: "O(buckets)",
    run: create,
};

/// `TMFREQ.ADD`.
pub const ADD: Spec = Spec {
    name: "TMFREQ.ADD",
    legacy: Some("TM.FREQ.ADD"),
    access: Access::Write,
    fast: false,
    keys: Keys::First,
    clock: Clock::TimeArg,
    usage: "key time item [count] [item [count] ...]",
    summary: "Counts items at time (ms, or *); an integer after an item is its count (default 1); replies the number of items",
    complexity: "O(d) per item",
    run: add,
};

/// `TMFREQ.QUERY`.
pub const QUERY: Spec = Spec {
    name: "TMFREQ.QUERY",
    legacy: Some("TM.FREQ.QUERY"),
    access: Access::Read,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key item [item ...] [WINDOW ms]",
    summary:
        "Each item's count in the window: [estimate, low, high]; WINDOW ms, if given, comes last",
    complexity: "O(buckets · w · d) to merge the window, then O(d) per item",
    run: query,
};

/// `TMFREQ.TOP`.
pub const TOP: Spec = Spec {
    name: "TMFREQ.TOP",
    legacy: Some("TM.FREQ.TOP"),
    access: Access::Read,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key k [WINDOW ms]",
    summary: "The k largest named items of the window: [[item, estimate, low, high], ...]; every item with phi of the window is named",
    complexity: "O(buckets · w · d) to merge the window",
    run: top,
};

fn create(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let (mut window, mut bucket) = (None, None);
    let dflt = call.env.defaults;
    let (mut epsilon, mut delta, mut phi) = (dflt.epsilon, dflt.delta, dflt.phi);
    let mut seen = a.options();
    while a.left() > 0 {
        if a.option(&mut seen, "WINDOW")? {
            window = Some(a.ms("WINDOW")?);
        } else if a.option(&mut seen, "BUCKET")? {
            bucket = Some(a.ms("BUCKET")?);
        } else if a.option(&mut seen, "EPSILON")? {
            epsilon = a.fraction("EPSILON")?;
        } else if a.option(&mut seen, "DELTA")? {
            delta = a.fraction("DELTA")?;
        } else if a.option(&mut seen, "PHI")? {
            phi = a.fraction("PHI")?;
        } else {
            a.done()?;
        }
    }
    let cmd = call.name();
    let param = |msg: String| CmdError::Param { cmd, msg };
    let window = window.ok_or_else(|| param("WINDOW ms is required".into()))?;
    let bucket = bucket.ok_or_else(|| param("BUCKET ms is required".into()))?;
    call.keys.vacant(key)?;
    if window % bucket != 0 {
        return Err(param(format!(
            "WINDOW ({window} ms) must be a multiple of BUCKET ({bucket} ms)"
        )));
    }
    let n = window / bucket;
    ItemCounts::new(epsilon, delta, phi).map_err(|e| param(e.to_string()))?;
    Freq::check(epsilon, delta, phi, n).map_err(|msg| CmdError::Limit { cmd, msg })?;
    call.keys
        .store(key, Value::Freq(Freq::new(epsilon, delta, phi, bucket, n)));
    let words: Vec<String> = vec![
        "WINDOW".into(),
        window.to_string(),
        "BUCKET".into(),
        bucket.to_string(),
        "EPSILON".into(),
        epsilon.to_string(),
        "DELTA".into(),
        delta.to_string(),
        "PHI".into(),
        phi.to_string(),
    ];
    call.rep = Replicate::create(cmd, key, &words);
    Ok(Reply::Ok)
}

/// Whether an argument is an integer, signed or not: after an item, it is that item's count
/// (and must then be a positive one), never the next item.
fn is_integer(a: &[u8]) -> bool {
    let digits = match a.first() {
        Some(b'+' | b'-') => &a[1..],
        _ => a,
    };
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

/// Refuses an item longer than a key keeps (`index`: its place among the command's items).
fn check_item(cmd: &'static str, index: usize, item: &[u8]) -> Result<(), CmdError> {
    if item.len() > Limits::MAX_FREQ_ITEM {
        return Err(CmdError::Limit {
            cmd,
            msg: format!(
                "item {} is {} bytes; a frequency key takes items of at most {} bytes",
                index + 1,
                item.len(),
                Limits::MAX_FREQ_ITEM
            ),
        });
    }
    Ok(())
}

fn add(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let cmd = call.name();
    let a = &mut call.args;
    let key = a.take()?;
    let time = a.time("time")?;
    let mut items = Vec::new();
    loop {
        let item = a.take()?;
        check_item(cmd, items.len(), item)?;
        let count = if a.peek().is_some_and(is_integer) {
            a.positive(
                "count",
                "a positive integer (at most 2^40)",
                Limits::MAX_FREQ_ADD,
            )?
        } else {
            1
        };
        items.push((item, count));
        if a.left() == 0 {
            break;
        }
    }
    let env = call.env;
    let f = call.keys.write::<Freq>(key)?;
    // The key keeps its items' names: it is refused what could take it past its bound.
    let growth = f.growth(&items);
    if f.held().saturating_add(growth) > Limits::MAX_KEY_BYTES {
        return Err(CmdError::Limit {
            cmd,
            msg: format!(
                "the key holds {} bytes of items' names and counts; these could take it \
                 past the {} byte limit (older buckets free theirs as the window moves)",
                f.held(),
                Limits::MAX_KEY_BYTES
            ),
        });
    }
    let t = env.resolve(time, f.latest());
    for (item, count) in &items {
        // The time is the same for every item: the first refuses or none does.
        f.add(t, item, *count).map_err(|e| CmdError::Time {
            cmd,
            msg: format!(
                "time {t} is older than the ring, which starts at {}",
                e.oldest
            ),
        })?;
    }
    call.replicate_time(time, t);
    Ok(Reply::Integer(items.len() as i64))
}

fn query(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let cmd = call.name();
    let a = &mut call.args;
    let key = a.take()?;
    let mut rest: Vec<&[u8]> = Vec::new();
    while a.left() > 0 {
        rest.push(a.take()?);
    }
    // `WINDOW ms` comes last: the last two arguments, or a `WINDOW` with nothing after it.
    let mut window = None;
    let n = rest.len();
    if n >= 2 && rest[n - 2].eq_ignore_ascii_case(b"WINDOW") {
        // A cursor over `WINDOW ms` reads from its second word.
        let mut w = crate::args::Args::new(cmd, &rest[n - 2..]);
        window = Some(w.ms("WINDOW")?);
        rest.truncate(n - 2);
    } else if n >= 1 && rest[n - 1].eq_ignore_ascii_case(b"WINDOW") {
        return Err(CmdError::MissingValue {
            cmd,
            arg: "WINDOW",
            expected: "a positive integer of milliseconds (at most 2^48)",
        });
    }
    if rest.is_empty() {
        return Err(CmdError::Param {
            cmd,
            msg: "give at least one item before WINDOW ms".into(),
        });
    }
    for (i, item) in rest.iter().enumerate() {
        check_item(cmd, i, item)?;
    }
    let f = call.keys.read::<Freq>(key)?;
    let counts = f.window_counts(f.window_buckets(cmd, window)?);
    Ok(Reply::Array(
        rest.iter().map(|i| counts.point(i).into()).collect(),
    ))
}

fn top(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let k = a.positive("k", "a positive integer (at most 2^31)", 1 << 31)?;
    let window = if a.keyword("WINDOW") {
        Some(a.ms("WINDOW")?)
    } else {
        None
    };
    a.done()?;
    let cmd = call.name();
    let f = call.keys.read::<Freq>(key)?;
    let counts = f.window_counts(f.window_buckets(cmd, window)?);
    let top = counts
        .named()
        .into_iter()
        .take(k as usize)
        .map(|(item, e)| {
            Reply::Array(vec![
                Reply::Bulk(item),
                Reply::Double(e.value),
                Reply::Double(e.low),
                Reply::Double(e.high),
            ])
        })
        .collect();
    Ok(Reply::Array(top))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frequency ring's bytes kept per event equal its buckets' bytes counted, as buckets
    /// fill (names of many lengths, promotion), are reused by newer ones, and come back from
    /// their bytes.
    #[test]
    fn a_frequency_ring_keeps_its_bytes_as_buckets_come_and_go() {
        let mut f = Freq::new(0.05, 0.1, 0.1, 10, 8);
        for i in 0..3_000u64 {
            // A hundred events a bucket (its table promotes), thirty buckets over eight slots.
            let time = i / 100 * 10;
            let item = vec![b'a' + (i % 26) as u8; (i % 300) as usize];
            f.add(time, &item, 1 + i % 3).unwrap();
            if i % 97 == 0 {
                let held = f.held();
                f.recount();
                assert_eq!(held, f.held(), "event {i}");
            }
        }
        let Ok(Value::Freq(mut back)) = Value::from_bytes(&Value::Freq(f).to_bytes()) else {
            panic!("a frequency ring reads its own bytes back")
        };
        // Decoded tables are sized to their items, so the bytes may differ from the grown
        // ring's; they are still the buckets' bytes, counted.
        let held = back.held();
        back.recount();
        assert_eq!(back.held(), held);
        assert!(held > 0);
    }
}
