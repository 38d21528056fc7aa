//! `distinct`: a windowed distinct count, a ring of bucket HyperLogLogs or the sliding
//! HyperLogLog (Chabchoub, Hébrail 2010). Items are hashed as Redis hashes them
//! (MurmurHash64A, seed `0xadc83b19`), so at precision 14 a window is a Redis HyperLogLog
//! (`TMDISTINCT.TOPF`). The bracket is probabilistic: ± z·σ with σ ≈ 1.04/√2^p.
//!
//! ```text
//! TMDISTINCT.CREATE key WINDOW ms [BUCKET ms | SLIDING] [PRECISION p]
//! TMDISTINCT.ADD key time item [item ...]
//! TMDISTINCT.COUNT key [key ...] [WINDOW ms] [AT time]
//! TMDISTINCT.TOPF key dest [WINDOW ms]
//! ```

use tidemark::cardinality::registers::{estimate_registers, DEFAULT_CONFIDENCE};
use tidemark::cardinality::{RingWindow, SlidingHll};
use tidemark::codec::{self, Family};
use tidemark::hash::ItemHasher;
use tidemark::{Bracket, Estimate};

use super::{Access, Call, Clock, Encoded, Keys, LoadError, Plain, Spec, TmType, Value};
use crate::args::{show, Time};
use crate::error::CmdError;
use crate::limits::Limits;
use crate::reply::{bracket_text, Replicate, Reply};

/// A windowed distinct count.
#[derive(Clone, Debug)]
pub enum Distinct {
    /// A ring of bucket HyperLogLogs: windows are whole buckets.
    Ring(RingWindow),
    /// The sliding HyperLogLog: any window up to the retention, to the millisecond.
    Sliding(SlidingHll),
}

impl Distinct {
    /// The longest sliding retention, ms.
    pub const MAX_SLIDING_MS: u64 = SlidingHll::MAX_RETENTION;

    /// The longest window, ms.
    pub fn window(&self) -> u64 {
        match self {
            Distinct::Ring(r) => r.width() * r.buckets(),
            Distinct::Sliding(s) => s.retention(),
        }
    }

    /// The precision.
    pub fn precision(&self) -> u8 {
        match self {
            Distinct::Ring(r) => r.precision(),
            Distinct::Sliding(s) => s.precision(),
        }
    }

    /// The hash.
    pub fn hasher(&self) -> ItemHasher {
        match self {
            Distinct::Ring(r) => r.hasher(),
            Distinct::Sliding(s) => s.hasher(),
        }
    }

    /// Checks WINDOW and AT against the key and resolves them: (the window's end, the window
    /// in the structure's units).
    fn window_at(
        &self,
        cmd: &'static str,
        window: Option<u64>,
        at: Option<Time>,
        env: crate::env::Env,
    ) -> Result<(u64, u64), CmdError> {
        let latest = self.latest();
        let now = env.window_end(cmd, at, latest)?;
        let w = window.unwrap_or(self.window());
        match self {
            Distinct::Ring(r) => {
                if w % r.width() != 0 || w > self.window() {
                    return Err(param(cmd, format!("WINDOW must be a multiple of the bucket ({} ms) up to the key's window ({} ms), got {w}", r.width(), self.window())));
                }
                Ok((now, w / r.width()))
            }
            Distinct::Sliding(_) => {
                if w > self.window() {
                    return Err(param(
                        cmd,
                        format!(
                            "WINDOW must be at most the key's window ({} ms), got {w}",
                            self.window()
                        ),
                    ));
                }
                Ok((now, w))
            }
        }
    }

    /// The window's estimate.
    fn count(
        &mut self,
        cmd: &'static str,
        window: Option<u64>,
        at: Option<Time>,
        env: crate::env::Env,
    ) -> Result<Estimate, CmdError> {
        let (now, w) = self.window_at(cmd, window, at, env)?;
        match self {
            Distinct::Ring(r) => r.count(now, w).map_err(|e| param(cmd, e.to_string())),
            Distinct::Sliding(s) => s.count(now, w).map_err(|e| param(cmd, e.to_string())),
        }
    }

    /// The window's registers.
    fn registers(
        &mut self,
        cmd: &'static str,
        window: Option<u64>,
        at: Option<Time>,
        env: crate::env::Env,
    ) -> Result<Vec<u8>, CmdError> {
        let (now, w) = self.window_at(cmd, window, at, env)?;
        match self {
            Distinct::Ring(r) => r
                .window_sketch(now, w)
                .map(|h| h.registers())
                .map_err(|e| param(cmd, e.to_string())),
            Distinct::Sliding(s) => s.registers(now, w).map_err(|e| param(cmd, e.to_string())),
        }
    }
}

fn param(cmd: &'static str, msg: impl Into<String>) -> CmdError {
    CmdError::Param {
        cmd,
        msg: msg.into(),
    }
}

fn check_ring(buckets: u64, p: u8) -> Result<(), LoadError> {
    if buckets > Limits::MAX_RING_BUCKETS {
        return Err(LoadError::Limit("more than 65,536 ring buckets"));
    }
    if buckets.saturating_mul(1u64.checked_shl(p as u32).unwrap_or(u64::MAX))
        > Limits::MAX_KEY_BYTES
    {
        return Err(LoadError::Limit("ring buckets × 2^precision above 1 GiB"));
    }
    Ok(())
}

impl TmType for Distinct {
    const NAME: &'static str = "distinct";

    fn heap_bytes(&self) -> usize {
        match self {
            Distinct::Ring(r) => r.bytes(),
            Distinct::Sliding(s) => s.stats().bytes,
        }
    }

    fn to_bytes(&self) -> Vec<u8> {
        match self {
            Distinct::Ring(r) => r.to_bytes(),
            Distinct::Sliding(s) => s.to_bytes(),
        }
    }

    fn latest(&self) -> Option<u64> {
        match self {
            Distinct::Ring(r) => r.newest_bucket().map(|b| b.saturating_mul(r.width())),
            Distinct::Sliding(s) => s.newest(),
        }
    }

    fn info(&self, m: &mut Vec<(&'static str, Reply)>) {
        match self {
            Distinct::Ring(r) => {
                m.push(("structure", Reply::text("ring of bucket HyperLogLogs")));
                m.push(("bucket_ms", Reply::Integer(r.width() as i64)));
                m.push(("buckets", Reply::Integer(r.buckets() as i64)));
            }
            Distinct::Sliding(_) => m.push((
                "structure",
                Reply::text("sliding HyperLogLog (Chabchoub, Hebrail 2010)"),
            )),
        }
        m.push(("window_ms", Reply::Integer(self.window() as i64)));
        m.push(("precision", Reply::Integer(self.precision() as i64)));
        m.push((
            "hash",
            Reply::text(format!(
                "{} seed {:#x}",
                self.hasher().id(),
                self.hasher().seed()
            )),
        ));
        m.push((
            "latest_ms",
            self.latest()
                .map_or(Reply::Null, |t| Reply::Integer(t as i64)),
        ));
        m.push((
            "bracket",
            Reply::text(
                bracket_text(Bracket::Probabilistic {
                    confidence: DEFAULT_CONFIDENCE,
                }) + " (estimate ± z·σ, σ = 1.04/√2^p)",
            ),
        ));
    }

    fn decode(encoded: &mut Encoded<'_>) -> Option<Result<Self, LoadError>> {
        match encoded {
            Encoded::Envelope(Family::RingWindow, bytes) => Some(decode_ring(bytes)),
            Encoded::Envelope(Family::SlidingHll, bytes) => Some(
                SlidingHll::from_bytes(bytes)
                    .map(Distinct::Sliding)
                    .map_err(LoadError::Decode),
            ),
            _ => None,
        }
    }
}

fn decode_ring(bytes: &[u8]) -> Result<Distinct, LoadError> {
    let d = LoadError::Decode;
    // The ring's slot table is allocated from its parameters: check them first.
    let env = codec::decode(bytes).map_err(d)?;
    let mut params = env.params();
    let p = params.u8("precision").map_err(d)?;
    params.u64("bucket width").map_err(d)?;
    let n = params.u32("buckets").map_err(d)?;
    check_ring(n as u64, p)?;
    let r = RingWindow::from_bytes(bytes).map_err(d)?;
    check_ring(r.buckets(), r.precision())?;
    if r.width()
        .checked_mul(r.buckets())
        .is_none_or(|w| w > Limits::MAX_WINDOW_MS)
    {
        return Err(LoadError::Limit("window longer than 2^48 ms"));
    }
    Ok(Distinct::Ring(r))
}

/// `TMDISTINCT.CREATE`.
pub const CREATE: Spec = Spec {
    name: "TMDISTINCT.CREATE",
    legacy: Some("TM.DISTINCT.CREATE"),
    access: Access::Write,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key WINDOW ms [BUCKET ms | SLIDING] [PRECISION p]",
    summary: "Creates a windowed distinct count: a ring of bucket HyperLogLogs (60 buckets unless BUCKET), or the sliding HyperLogLog",
    complexity: "O(buckets)",
    run: create,
};

/// `TMDISTINCT.ADD`.
pub const ADD: Spec = Spec {
    name: "TMDISTINCT.ADD",
    legacy: Some("TM.DISTINCT.ADD"),
    access: Access::Write,
    fast: true,
    keys: Keys::First,
    clock: Clock::TimeArg,
    usage: "key time item [item ...]",
    summary:
        "Adds items seen at time (ms, or * for the server's clock); replies the number of items",
    complexity: "O(1) per item",
    run: add,
};

/// `TMDISTINCT.COUNT`.
pub const COUNT: Spec = Spec {
    name: "TMDISTINCT.COUNT",
    legacy: Some("TM.DISTINCT.COUNT"),
    access: Access::Read,
    fast: false,
    keys: Keys::UntilOption(&["WINDOW", "AT"]),
    clock: Clock::No,
    usage: "key [key ...] [WINDOW ms] [AT time]",
    summary: "The distinct items of the window (of several keys: of their union): [estimate, low, high] at 95%",
    complexity: "O(2^precision) per key, O(1) for a ring's repeated window",
    run: count,
};

/// `TMDISTINCT.TOPF`.
pub const TOPF: Spec = Spec {
    name: "TMDISTINCT.TOPF",
    legacy: Some("TM.DISTINCT.TOPF"),
    access: Access::Write,
    fast: false,
    keys: Keys::FirstTwo,
    clock: Clock::No,
    usage: "key dest [WINDOW ms]",
    summary: "Writes the window as a Redis HyperLogLog string at dest (precision 14), which PFCOUNT, PFMERGE and PFADD take",
    complexity: "O(2^precision)",
    run: topf,
};

fn create(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let (mut window, mut bucket, mut sliding) = (None, None, false);
    let mut precision = call.env.defaults.precision;
    let mut seen = a.options();
    while a.left() > 0 {
        if a.option(&mut seen, "WINDOW")? {
            window = Some(a.ms("WINDOW")?);
        } else if a.option(&mut seen, "BUCKET")? {
            bucket = Some(a.ms("BUCKET")?);
        } else if a.option(&mut seen, "SLIDING")? {
            sliding = true;
        } else if a.option(&mut seen, "PRECISION")? {
            precision = a.precision("PRECISION")?;
        } else {
            a.done()?;
        }
    }
    let cmd = call.name();
    if sliding && bucket.is_some() {
        return Err(param(cmd, "give one of BUCKET ms and SLIDING"));
    }
    let window = window.ok_or_else(|| param(cmd, "WINDOW ms is required"))?;
    let bucket = match bucket {
        Some(b) => Some(b),
        None if sliding => None,
        None if window % 60 == 0 => Some(window / 60),
        None => {
            return Err(param(
                cmd,
                "without BUCKET the ring has 60 buckets, so WINDOW must be a multiple of 60 ms; give BUCKET ms or SLIDING",
            ))
        }
    };
    call.keys.vacant(key)?;
    let hasher = ItemHasher::redis();
    let (d, shape) = match bucket {
        Some(bucket) => {
            if window % bucket != 0 {
                return Err(param(
                    cmd,
                    format!("WINDOW ({window} ms) must be a multiple of BUCKET ({bucket} ms)"),
                ));
            }
            let n = window / bucket;
            if n > Limits::MAX_RING_BUCKETS {
                return Err(CmdError::Limit {
                    cmd,
                    msg: format!(
                        "WINDOW/BUCKET must be at most {}, got {n}",
                        Limits::MAX_RING_BUCKETS
                    ),
                });
            }
            let full = n.saturating_mul(1 << precision);
            if full > Limits::MAX_KEY_BYTES {
                return Err(CmdError::Limit { cmd, msg: format!("{n} buckets at PRECISION {precision} would need up to {full} bytes, above the {} byte limit", Limits::MAX_KEY_BYTES) });
            }
            let r = RingWindow::with_hasher(precision, bucket, n as u32, hasher)
                .map_err(|e| param(cmd, e.to_string()))?;
            (Distinct::Ring(r), vec!["BUCKET".into(), bucket.to_string()])
        }
        None => {
            if window > Distinct::MAX_SLIDING_MS {
                return Err(param(cmd, format!("a SLIDING window is at most {} ms (18.6 hours), got {window}; use BUCKET ms for longer windows", Distinct::MAX_SLIDING_MS)));
            }
            let s = SlidingHll::with_hasher(precision, window, hasher)
                .map_err(|e| param(cmd, e.to_string()))?;
            (Distinct::Sliding(s), vec!["SLIDING".into()])
        }
    };
    call.keys.store(key, Value::Distinct(d));
    let mut words = vec!["WINDOW".to_string(), window.to_string()];
    words.extend(shape);
    words.extend(["PRECISION".to_string(), precision.to_string()]);
    call.rep = Replicate::create(cmd, key, &words);
    Ok(Reply::Ok)
}

fn add(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let time = a.time("time")?;
    let items = a.rest_nonempty()?;
    let (cmd, env) = (call.name(), call.env);
    let d = call.keys.write::<Distinct>(key)?;
    let t = env.resolve(time, d.latest());
    for item in items.iter() {
        let res = match d {
            Distinct::Ring(r) => r.insert(item, t).map_err(|e| e.to_string()),
            Distinct::Sliding(s) => s.insert(item, t).map_err(|e| e.to_string()),
        };
        // The time is the same for every item: the first refuses or none does.
        res.map_err(|e| CmdError::Time {
            cmd,
            msg: format!("time {t} refused: {e}"),
        })?;
    }
    call.replicate_time(time, t);
    Ok(Reply::Integer(items.len() as i64))
}

fn count(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let mut keys = vec![a.take()?];
    let is_option = |x: &[u8]| x.eq_ignore_ascii_case(b"WINDOW") || x.eq_ignore_ascii_case(b"AT");
    while a.peek().is_some_and(|x| !is_option(x)) {
        keys.push(a.take()?);
    }
    let (mut window, mut at) = (None, None);
    let mut seen = a.options();
    while a.left() > 0 {
        if a.option(&mut seen, "WINDOW")? {
            window = Some(a.ms("WINDOW")?);
        } else if a.option(&mut seen, "AT")? {
            at = Some(a.time("AT")?);
        } else {
            a.done()?;
        }
    }
    let (cmd, env) = (call.name(), call.env);
    // A key named again adds nothing to the union: each is read once (and one key named
    // many times is that key, counted as one).
    let mut once = std::collections::HashSet::with_capacity(keys.len());
    keys.retain(|k| once.insert(*k));
    if let [key] = keys[..] {
        let d = call.keys.read::<Distinct>(key)?;
        return Ok(d.count(cmd, window, at, env)?.into());
    }
    // A union: every key's window registers, register-wise max.
    let mut latest = None::<u64>;
    let mut shape = None::<(u8, ItemHasher)>;
    for &key in &keys {
        let d = call.keys.read::<Distinct>(key)?;
        latest = latest.max(d.latest());
        match shape {
            None => shape = Some((d.precision(), d.hasher())),
            Some(s) if s != (d.precision(), d.hasher()) => {
                return Err(param(
                    cmd,
                    format!(
                        "key '{}' has another precision or hash than '{}': they cannot be united",
                        show(key),
                        show(keys[0])
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    let at = Some(Time::At(
        at.map_or(latest.unwrap_or(0), |a| env.resolve(a, latest)),
    ));
    let mut union: Option<Vec<u8>> = None;
    for &key in &keys {
        let regs = call
            .keys
            .read::<Distinct>(key)?
            .registers(cmd, window, at, env)?;
        match &mut union {
            None => union = Some(regs),
            Some(u) => u.iter_mut().zip(&regs).for_each(|(a, b)| *a = (*a).max(*b)),
        }
    }
    let e = estimate_registers(&union.unwrap_or_default(), DEFAULT_CONFIDENCE)
        .map_err(|e| param(cmd, e.to_string()))?;
    Ok(e.into())
}

fn topf(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let dest = a.take()?;
    let window = if a.keyword("WINDOW") {
        Some(a.ms("WINDOW")?)
    } else {
        None
    };
    a.done()?;
    let (cmd, env) = (call.name(), call.env);
    let d = call.keys.read::<Distinct>(key)?;
    if d.precision() != 14 || d.hasher() != ItemHasher::redis() {
        return Err(param(cmd, format!("a Redis HyperLogLog needs PRECISION 14 and Redis's hash; key '{}' has precision {}", show(key), d.precision())));
    }
    let regs = d.registers(cmd, window, None, env)?;
    let bytes = redis_dense(&regs).ok_or_else(|| {
        param(
            cmd,
            "the window's registers do not form a Redis HyperLogLog",
        )
    })?;
    // As PFMERGE: the destination is missing, or a string that is a HyperLogLog.
    match call.keys.plain(dest) {
        Plain::Missing => {}
        Plain::Str(s) if is_redis_hll(&s) => {}
        Plain::Str(_) => {
            return Err(CmdError::NotAnHll {
                cmd,
                key: show(dest),
            })
        }
        Plain::Other => {
            return Err(CmdError::NotAString {
                cmd,
                key: show(dest),
            })
        }
    }
    if !call.keys.store_string(dest, bytes) {
        return Err(CmdError::NotAString {
            cmd,
            key: show(dest),
        });
    }
    call.rep = Replicate::Verbatim;
    Ok(Reply::Ok)
}

/// Whether `s` is a string Redis's `PFMERGE` takes as a HyperLogLog: its 16-byte header with
/// the magic `HYLL` and encoding 0 (dense, then exactly the dense length) or 1 (sparse).
fn is_redis_hll(s: &[u8]) -> bool {
    s.len() >= 16
        && s.starts_with(b"HYLL")
        && match s[4] {
            0 => s.len() == tidemark::cardinality::redis::REDIS_DENSE_LEN,
            1 => true,
            _ => false,
        }
}

/// Packs 16,384 registers (p = 14, each at most 51, from MurmurHash64A with Redis's seed) as
/// a dense Redis `HYLL` string: `"HYLL"`, encoding 0, three zero bytes, the cached
/// cardinality marked invalid (bit 7 of byte 15), then register `i` in bits `6i..6i+6`
/// counted from the least significant bit of the first register byte. PFCOUNT recomputes
/// and caches the count on first use; PFMERGE and PFADD take the value as Redis's own.
///
/// `None` for a register count other than 16,384 or a register above 51.
pub fn redis_dense(registers: &[u8]) -> Option<Vec<u8>> {
    if registers.len() != tidemark::cardinality::redis::REDIS_REGISTERS
        || registers.iter().any(|&r| r > 51)
    {
        return None;
    }
    let mut out = Vec::with_capacity(tidemark::cardinality::redis::REDIS_DENSE_LEN);
    out.extend_from_slice(b"HYLL");
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x80]);
    let start = out.len();
    out.resize(tidemark::cardinality::redis::REDIS_DENSE_LEN, 0);
    for (i, &r) in registers.iter().enumerate() {
        let bit = 6 * i;
        let (byte, shift) = (start + bit / 8, bit % 8);
        let v = (r as u16) << shift;
        out[byte] |= v as u8;
        if shift > 2 {
            out[byte + 1] |= (v >> 8) as u8;
        }
    }
    Some(out)
}
