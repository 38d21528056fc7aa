//! [`Command`] → effect on the keyspace → [`Reply`].

use tidemark::cardinality::{estimate_registers, RingWindow, SlidingHll, DEFAULT_CONFIDENCE};
use tidemark::hash::ItemHasher;
use tidemark::window::ExpHistogram;
use tidemark::{Bracket, Estimate};

use super::args::{show, Time};
use super::{CmdError, Command, DistinctShape, Env, Keyspace, Lookup, Outcome, Replicate, Reply};
use crate::value::{redis_dense, Counter, Distinct, Filter, FilterSpec, Freq, Limits, Value};

/// Executes a parsed command.
pub fn execute(ks: &mut dyn Keyspace, env: Env, cmd: &Command<'_>) -> Outcome {
    let mut rep = Replicate::Nothing;
    let reply = exec(ks, env, cmd, &mut rep);
    Outcome {
        reply,
        replicate: rep,
    }
}

/// How a write that resolved `time` (argument `pos`) to `t` replicates.
fn replicate_time(time: Time, pos: usize, t: u64) -> Replicate {
    match time {
        Time::Now => Replicate::WithTime { pos, time: t },
        Time::Clock(_) | Time::At(_) => Replicate::Verbatim,
    }
}

fn resolve(time: Time, env: Env, latest: Option<u64>) -> u64 {
    match time {
        Time::At(t) => t,
        Time::Now => env.now_ms.min(Limits::MAX_TIME_MS).max(latest.unwrap_or(0)),
        Time::Clock(ms) => ms.max(latest.unwrap_or(0)),
    }
}

fn get<'k>(
    ks: &'k mut dyn Keyspace,
    cmd: &'static str,
    key: &[u8],
) -> Result<&'k mut Value, CmdError> {
    match ks.lookup(key) {
        Lookup::Found(v) => Ok(v),
        Lookup::Missing => Err(CmdError::NoSuchKey {
            cmd,
            key: show(key),
        }),
        Lookup::Foreign => Err(CmdError::WrongType {
            cmd,
            key: show(key),
            holds: None,
        }),
    }
}

fn wrong(cmd: &'static str, key: &[u8], v: &Value) -> CmdError {
    CmdError::WrongType {
        cmd,
        key: show(key),
        holds: Some(v.type_name()),
    }
}

macro_rules! get_as {
    ($ks:expr, $cmd:expr, $key:expr, $variant:ident) => {{
        let v = get($ks, $cmd, $key)?;
        match v {
            Value::$variant(x) => x,
            other => return Err(wrong($cmd, $key, other)),
        }
    }};
}

fn create(ks: &mut dyn Keyspace, cmd: &'static str, key: &[u8]) -> Result<(), CmdError> {
    match ks.lookup(key) {
        Lookup::Missing => Ok(()),
        Lookup::Found(_) => Err(CmdError::KeyExists {
            cmd,
            key: show(key),
        }),
        Lookup::Foreign => Err(CmdError::WrongType {
            cmd,
            key: show(key),
            holds: None,
        }),
    }
}

fn param(cmd: &'static str, msg: impl Into<String>) -> CmdError {
    CmdError::Param {
        cmd,
        msg: msg.into(),
    }
}

fn exec(
    ks: &mut dyn Keyspace,
    env: Env,
    cmd: &Command<'_>,
    rep: &mut Replicate,
) -> Result<Reply, CmdError> {
    match cmd {
        Command::CountCreate {
            key,
            window,
            epsilon,
        } => {
            let name = "TM.COUNT.CREATE";
            create(ks, name, key)?;
            let hist =
                ExpHistogram::ticks(*window, *epsilon).map_err(|e| param(name, e.to_string()))?;
            ks.store(key, Value::Count(Counter { hist }));
            *rep = Replicate::Verbatim;
            Ok(Reply::Ok)
        }
        Command::CountAdd { key, time, n } => {
            let name = "TM.COUNT.ADD";
            let c = get_as!(ks, name, key, Count);
            let t = resolve(*time, env, c.latest());
            if c.hist.upper_bound().saturating_add(*n) > Limits::MAX_COUNT_TOTAL {
                return Err(param(name, "the window's count would pass 2^62"));
            }
            c.hist.record_value(t, *n).map_err(|_| CmdError::Time {
                cmd: name,
                msg: format!(
                    "time {t} is before the key's latest time {}: a counter takes events in time order",
                    c.hist.now()
                ),
            })?;
            *rep = replicate_time(*time, 2, t);
            Ok(c.hist.estimate().into())
        }
        Command::CountGet { key, at } => {
            let name = "TM.COUNT.GET";
            let c = get_as!(ks, name, key, Count);
            let latest = c.latest();
            let at = at.map_or(c.hist.now(), |a| resolve(a, env, latest));
            if latest.is_some_and(|l| at < l) {
                return Err(CmdError::Time {
                    cmd: name,
                    msg: format!("AT {at} is before the key's latest time {}: the window can only end at or after it", c.hist.now()),
                });
            }
            Ok(c.estimate_at(at).into())
        }
        Command::DistinctCreate {
            key,
            window,
            shape,
            precision,
        } => {
            let name = "TM.DISTINCT.CREATE";
            create(ks, name, key)?;
            let hasher = ItemHasher::redis();
            let d = match shape {
                DistinctShape::Ring { bucket } => {
                    if window % bucket != 0 {
                        return Err(param(
                            name,
                            format!(
                                "WINDOW ({window} ms) must be a multiple of BUCKET ({bucket} ms)"
                            ),
                        ));
                    }
                    let n = window / bucket;
                    if n > Limits::MAX_RING_BUCKETS {
                        return Err(param(
                            name,
                            format!(
                                "WINDOW/BUCKET must be at most {}, got {n}",
                                Limits::MAX_RING_BUCKETS
                            ),
                        ));
                    }
                    let full = n.saturating_mul(1 << precision);
                    if full > Limits::MAX_KEY_BYTES {
                        return Err(param(name, format!("{n} buckets at PRECISION {precision} would need up to {full} bytes, above the {} byte limit", Limits::MAX_KEY_BYTES)));
                    }
                    Distinct::Ring(
                        RingWindow::with_hasher(*precision, *bucket, n as u32, hasher)
                            .map_err(|e| param(name, e.to_string()))?,
                    )
                }
                DistinctShape::Sliding => {
                    if *window > Distinct::MAX_SLIDING_MS {
                        return Err(param(name, format!("a SLIDING window is at most {} ms (18.6 hours), got {window}; use BUCKET ms for longer windows", Distinct::MAX_SLIDING_MS)));
                    }
                    Distinct::Sliding(
                        SlidingHll::with_hasher(*precision, *window, hasher)
                            .map_err(|e| param(name, e.to_string()))?,
                    )
                }
            };
            ks.store(key, Value::Distinct(d));
            *rep = Replicate::Verbatim;
            Ok(Reply::Ok)
        }
        Command::DistinctAdd { key, time, items } => {
            let name = "TM.DISTINCT.ADD";
            let d = get_as!(ks, name, key, Distinct);
            let latest = match d {
                Distinct::Ring(r) => r.newest_bucket().map(|b| b.saturating_mul(r.width())),
                Distinct::Sliding(s) => s.newest(),
            };
            let t = resolve(*time, env, latest);
            for item in items.iter() {
                let res = match d {
                    Distinct::Ring(r) => r.insert(item, t).map_err(|e| e.to_string()),
                    Distinct::Sliding(s) => s.insert(item, t).map_err(|e| e.to_string()),
                };
                // The time is the same for every item: the first refuses or none does.
                res.map_err(|e| CmdError::Time {
                    cmd: name,
                    msg: format!("time {t} refused: {e}"),
                })?;
            }
            *rep = replicate_time(*time, 2, t);
            Ok(Reply::Integer(items.len() as i64))
        }
        Command::DistinctCount { keys, window, at } => {
            let name = "TM.DISTINCT.COUNT";
            // A key named again adds nothing to the union: each is read once (and one key
            // named many times is that key, counted as one).
            let mut seen = std::collections::HashSet::with_capacity(keys.len());
            let keys: Vec<_> = keys.iter().copied().filter(|k| seen.insert(*k)).collect();
            if keys.len() == 1 {
                let d = get_as!(ks, name, keys[0], Distinct);
                let regs = distinct_window(name, d, *window, *at, env, None)?;
                return Ok(regs.into());
            }
            // A union: every key's window registers, register-wise max.
            let mut latest = None::<u64>;
            let mut shape = None::<(u8, ItemHasher)>;
            for &key in &keys {
                let d = get_as!(ks, name, key, Distinct);
                let l = match d {
                    Distinct::Ring(r) => r.newest_bucket().map(|b| b.saturating_mul(r.width())),
                    Distinct::Sliding(s) => s.newest(),
                };
                latest = latest.max(l);
                match shape {
                    None => shape = Some((d.precision(), d.hasher())),
                    Some(s) if s != (d.precision(), d.hasher()) => {
                        return Err(param(name, format!("key '{}' has another precision or hash than '{}': they cannot be united", show(key), show(keys[0]))));
                    }
                    Some(_) => {}
                }
            }
            let at = Some(Time::At(
                at.map_or(latest.unwrap_or(0), |a| resolve(a, env, latest)),
            ));
            let mut union: Option<Vec<u8>> = None;
            for &key in &keys {
                let d = get_as!(ks, name, key, Distinct);
                let regs = distinct_registers(name, d, *window, at, env)?;
                match &mut union {
                    None => union = Some(regs),
                    Some(u) => u.iter_mut().zip(&regs).for_each(|(a, b)| *a = (*a).max(*b)),
                }
            }
            let regs = union.unwrap_or_default();
            let e = estimate_registers(&regs, DEFAULT_CONFIDENCE)
                .map_err(|e| param(name, e.to_string()))?;
            Ok(e.into())
        }
        Command::DistinctTopf { key, dest, window } => {
            let name = "TM.DISTINCT.TOPF";
            let d = get_as!(ks, name, key, Distinct);
            if d.precision() != 14 || d.hasher() != ItemHasher::redis() {
                return Err(param(name, format!("a Redis HyperLogLog needs PRECISION 14 and Redis's hash; key '{}' has precision {}", show(key), d.precision())));
            }
            let regs = distinct_registers(name, d, *window, None, env)?;
            let bytes = redis_dense(&regs).ok_or_else(|| {
                param(
                    name,
                    "the window's registers do not form a Redis HyperLogLog",
                )
            })?;
            if !ks.store_string(dest, bytes) {
                return Err(CmdError::NotAString {
                    cmd: name,
                    key: show(dest),
                });
            }
            *rep = Replicate::Verbatim;
            Ok(Reply::Ok)
        }
        Command::FreqCreate {
            key,
            window,
            bucket,
            epsilon,
            delta,
            phi,
        } => {
            let name = "TM.FREQ.CREATE";
            create(ks, name, key)?;
            if window % bucket != 0 {
                return Err(param(
                    name,
                    format!("WINDOW ({window} ms) must be a multiple of BUCKET ({bucket} ms)"),
                ));
            }
            let n = window / bucket;
            Freq::check(*epsilon, *delta, *phi, n).map_err(|e| param(name, e))?;
            ks.store(
                key,
                Value::Freq(Freq::new(*epsilon, *delta, *phi, *bucket, n)),
            );
            *rep = Replicate::Verbatim;
            Ok(Reply::Ok)
        }
        Command::FreqAdd { key, time, items } => {
            let name = "TM.FREQ.ADD";
            let f = get_as!(ks, name, key, Freq);
            // The key keeps its items' names: it is refused what could take it past its bound.
            let growth = f.growth(items);
            if f.held().saturating_add(growth) > Limits::MAX_KEY_BYTES {
                return Err(param(
                    name,
                    format!(
                        "the key holds {} bytes of items' names and counts; these could take it \
                         past the {} byte limit (older buckets free theirs as the window moves)",
                        f.held(),
                        Limits::MAX_KEY_BYTES
                    ),
                ));
            }
            let t = resolve(*time, env, f.newest.map(|b| b.saturating_mul(f.bucket_ms)));
            for (item, count) in items {
                // The time is the same for every item: the first refuses or none does.
                f.add(t, item, *count).map_err(|e| CmdError::Time {
                    cmd: name,
                    msg: format!(
                        "time {t} is older than the ring, which starts at {}",
                        e.oldest
                    ),
                })?;
            }
            *rep = replicate_time(*time, 2, t);
            Ok(Reply::Integer(items.len() as i64))
        }
        Command::FreqQuery { key, items, window } => {
            let name = "TM.FREQ.QUERY";
            let f = get_as!(ks, name, key, Freq);
            let wb = freq_window(name, f, *window)?;
            let counts = f.window_counts(wb);
            Ok(Reply::Array(
                items.iter().map(|i| counts.point(i).into()).collect(),
            ))
        }
        Command::FreqTop { key, k, window } => {
            let name = "TM.FREQ.TOP";
            let f = get_as!(ks, name, key, Freq);
            let wb = freq_window(name, f, *window)?;
            let counts = f.window_counts(wb);
            let top = counts
                .named()
                .into_iter()
                .take(*k as usize)
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
        Command::FilterCreate {
            key,
            capacity,
            fpr,
            reserve,
            stacked,
            expire,
        } => {
            let name = "TM.FILTER.CREATE";
            create(ks, name, key)?;
            let spec = FilterSpec {
                capacity: *capacity,
                fpr: *fpr,
                reserve: *reserve,
                stacked: *stacked,
            };
            let table = spec.check().map_err(|e| param(name, e))?;
            // An expiring filter holds a table a generation: the bound covers them all.
            if expire.is_some()
                && table.saturating_mul(Limits::GENERATIONS) > Limits::MAX_FILTER_BYTES
            {
                return Err(param(
                    name,
                    format!(
                        "with EXPIRE its {} generations' tables would need {} bytes, above the {} byte limit",
                        Limits::GENERATIONS,
                        table.saturating_mul(Limits::GENERATIONS),
                        Limits::MAX_FILTER_BYTES
                    ),
                ));
            }
            // Build one generation to check the shape even when generations start lazily.
            spec.build().map_err(|e| param(name, e))?;
            let f = Filter::new(spec, *expire).map_err(|e| param(name, e))?;
            ks.store(key, Value::Filter(f));
            *rep = Replicate::Verbatim;
            Ok(Reply::Ok)
        }
        Command::FilterAdd { key, time, items } => {
            let name = if time.is_some() {
                "TM.FILTER.ADDAT"
            } else {
                "TM.FILTER.ADD"
            };
            let f = get_as!(ks, name, key, Filter);
            let expiring = f.expire_ms.is_some();
            let latest = f.newest_gen.map(|g| g.saturating_mul(f.gen_ms()));
            let t = resolve(time.unwrap_or(Time::Now), env, latest);
            let mut out = Vec::with_capacity(items.len());
            let mut result = Ok(());
            for item in items {
                let present = f.live_gens(t).any(|g| g.contains(item));
                if present && !expiring {
                    out.push(Reply::Integer(0));
                    continue;
                }
                // An expiring filter remembers an item for EXPIRE ms after its *latest* add:
                // one seen only in an older generation is written again into the current one.
                let inserted = f.target(t).map(|g| g.contains(item) || g.insert(item));
                match inserted {
                    Some(true) => out.push(Reply::Integer(!present as i64)),
                    _ => {
                        let added = out.iter().filter(|r| **r == Reply::Integer(1)).count();
                        result = Err(CmdError::Full {
                            cmd: name,
                            key: show(key),
                            added,
                        });
                        break;
                    }
                }
            }
            // Replicas replay the same items on the same state and stop at the same place.
            *rep = match (time, expiring) {
                (None, true) => {
                    let mut v: Vec<Vec<u8>> = vec![
                        b"TM.FILTER.ADDAT".to_vec(),
                        key.to_vec(),
                        t.to_string().into_bytes(),
                    ];
                    v.extend(items.iter().map(|i| i.to_vec()));
                    Replicate::Rewritten(v)
                }
                (Some(tm), _) => replicate_time(*tm, 2, t),
                (None, false) => Replicate::Verbatim,
            };
            result.map(|()| Reply::Array(out))
        }
        Command::FilterExists { key, items } => {
            let name = "TM.FILTER.EXISTS";
            let f = get_as!(ks, name, key, Filter);
            let now = resolve(
                Time::Now,
                env,
                f.newest_gen.map(|g| g.saturating_mul(f.gen_ms())),
            );
            Ok(Reply::Array(
                items
                    .iter()
                    .map(|i| Reply::Integer(f.live_gens(now).any(|g| g.contains(i)) as i64))
                    .collect(),
            ))
        }
        Command::FilterDel { key, item } => {
            let name = "TM.FILTER.DEL";
            let f = get_as!(ks, name, key, Filter);
            let mut removed = false;
            for (_, g) in f.gens.iter_mut() {
                if g.contains(item) {
                    removed |= g.remove(item);
                }
            }
            if removed {
                *rep = Replicate::Verbatim;
            }
            Ok(Reply::Integer(removed as i64))
        }
        Command::Info { key } => {
            let v = get(ks, "TM.INFO", key)?;
            Ok(info(v))
        }
        Command::Dump { key } => {
            let v = get(ks, "TM.DUMP", key)?;
            Ok(Reply::Bulk(v.to_bytes()))
        }
        Command::Load { key, bytes } => {
            let name = "TM.LOAD";
            if let Lookup::Foreign = ks.lookup(key) {
                return Err(CmdError::WrongType {
                    cmd: name,
                    key: show(key),
                    holds: None,
                });
            }
            let v = Value::from_bytes(bytes).map_err(|e| CmdError::Load {
                cmd: name,
                msg: e.to_string(),
            })?;
            ks.store(key, v);
            *rep = Replicate::Verbatim;
            Ok(Reply::Ok)
        }
    }
}

/// The window in whole buckets of a frequency ring.
fn freq_window(name: &'static str, f: &Freq, window: Option<u64>) -> Result<u64, CmdError> {
    match window {
        None => Ok(f.buckets()),
        Some(w) if w % f.bucket_ms == 0 && w <= f.window() => Ok(w / f.bucket_ms),
        Some(w) => Err(param(name, format!("WINDOW must be a multiple of the bucket ({} ms) up to the key's window ({} ms), got {w}", f.bucket_ms, f.window()))),
    }
}

/// Checks WINDOW and AT against a distinct key and resolves them: (now, window in the
/// structure's units).
fn distinct_args(
    name: &'static str,
    d: &Distinct,
    window: Option<u64>,
    at: Option<Time>,
    env: Env,
) -> Result<(u64, u64), CmdError> {
    let latest = match d {
        Distinct::Ring(r) => r.newest_bucket().map(|b| b.saturating_mul(r.width())),
        Distinct::Sliding(s) => s.newest(),
    };
    let now = match at {
        None => match d {
            Distinct::Ring(r) => r.newest_bucket().map_or(0, |b| b.saturating_mul(r.width())),
            Distinct::Sliding(s) => s.newest().unwrap_or(0),
        },
        Some(a) => resolve(a, env, latest),
    };
    if latest.is_some_and(|l| now < l) {
        return Err(CmdError::Time {
            cmd: name,
            msg: format!(
                "AT {now} is before the key's latest time {}",
                latest.unwrap_or(0)
            ),
        });
    }
    let w = window.unwrap_or(d.window());
    match d {
        Distinct::Ring(r) => {
            if w % r.width() != 0 || w > d.window() {
                return Err(param(name, format!("WINDOW must be a multiple of the bucket ({} ms) up to the key's window ({} ms), got {w}", r.width(), d.window())));
            }
            Ok((now, w / r.width()))
        }
        Distinct::Sliding(_) => {
            if w > d.window() {
                return Err(param(
                    name,
                    format!(
                        "WINDOW must be at most the key's window ({} ms), got {w}",
                        d.window()
                    ),
                ));
            }
            Ok((now, w))
        }
    }
}

fn distinct_window(
    name: &'static str,
    d: &mut Distinct,
    window: Option<u64>,
    at: Option<Time>,
    env: Env,
    _u: Option<()>,
) -> Result<Estimate, CmdError> {
    let (now, w) = distinct_args(name, d, window, at, env)?;
    match d {
        Distinct::Ring(r) => r.count(now, w).map_err(|e| param(name, e.to_string())),
        Distinct::Sliding(s) => s.count(now, w).map_err(|e| param(name, e.to_string())),
    }
}

fn distinct_registers(
    name: &'static str,
    d: &mut Distinct,
    window: Option<u64>,
    at: Option<Time>,
    env: Env,
) -> Result<Vec<u8>, CmdError> {
    let (now, w) = distinct_args(name, d, window, at, env)?;
    match d {
        Distinct::Ring(r) => r
            .window_sketch(now, w)
            .map(|h| h.registers())
            .map_err(|e| param(name, e.to_string())),
        Distinct::Sliding(s) => s.registers(now, w).map_err(|e| param(name, e.to_string())),
    }
}

fn bracket_text(b: Bracket) -> String {
    match b {
        Bracket::Guaranteed => "guaranteed: the true value is always within [low, high]".into(),
        Bracket::Probabilistic { confidence } => {
            format!(
                "probabilistic: the true value is within [low, high] with probability {confidence}"
            )
        }
        _ => "see the documentation".into(),
    }
}

fn info(v: &Value) -> Reply {
    let mut m: Vec<(&'static str, Reply)> = vec![("type", Reply::text(v.type_name()))];
    let latest = v.latest().map_or(Reply::Null, |t| Reply::Integer(t as i64));
    match v {
        Value::Count(c) => {
            m.push((
                "structure",
                Reply::text("exponential histogram (Datar, Gionis, Indyk, Motwani 2002)"),
            ));
            m.push(("window_ms", Reply::Integer(c.window() as i64)));
            m.push(("k", Reply::Integer(c.hist.k() as i64)));
            m.push(("epsilon", Reply::Double(1.0 / c.hist.k() as f64)));
            m.push(("buckets", Reply::Integer(c.hist.bucket_count() as i64)));
            m.push(("hash", Reply::text("none")));
            m.push(("latest_ms", latest));
            m.push((
                "bracket",
                Reply::text(
                    bracket_text(Bracket::Guaranteed) + "; value is within epsilon/2 of the truth",
                ),
            ));
        }
        Value::Distinct(d) => {
            match d {
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
            m.push(("window_ms", Reply::Integer(d.window() as i64)));
            m.push(("precision", Reply::Integer(d.precision() as i64)));
            m.push((
                "hash",
                Reply::text(format!("{} seed {:#x}", d.hasher().id(), d.hasher().seed())),
            ));
            m.push(("latest_ms", latest));
            m.push((
                "bracket",
                Reply::text(
                    bracket_text(Bracket::Probabilistic {
                        confidence: DEFAULT_CONFIDENCE,
                    }) + " (estimate ± z·σ, σ = 1.04/√2^p)",
                ),
            ));
        }
        Value::Freq(f) => {
            m.push(("structure", Reply::text("ring of per-bucket item counts: exact, then Count-Min (Cormode, Muthukrishnan 2005) with named heavy items")));
            m.push(("window_ms", Reply::Integer(f.window() as i64)));
            m.push(("bucket_ms", Reply::Integer(f.bucket_ms as i64)));
            m.push(("buckets", Reply::Integer(f.buckets() as i64)));
            m.push(("epsilon", Reply::Double(f.epsilon)));
            m.push(("delta", Reply::Double(f.delta)));
            m.push(("phi", Reply::Double(f.phi)));
            m.push((
                "hash",
                Reply::text(format!("{}", ItemHasher::default().id())),
            ));
            m.push(("latest_ms", latest));
            m.push(("bracket", Reply::text("high never under-counts; low = high − ε·N holds with probability 1 − δ (exact while few items)")));
        }
        Value::Filter(f) => {
            m.push((
                "structure",
                Reply::text(if f.spec.stacked {
                    "stacked quotient filters"
                } else {
                    "quotient filter growing in place (Bender et al. 2012)"
                }),
            ));
            m.push(("capacity", Reply::Integer(f.spec.capacity as i64)));
            m.push(("fpr", Reply::Double(f.spec.fpr)));
            m.push(("reserve", Reply::Integer(f.spec.reserve as i64)));
            m.push((
                "expire_ms",
                f.expire_ms
                    .map_or(Reply::Null, |e| Reply::Integer(e as i64)),
            ));
            m.push(("generations", Reply::Integer(f.gens.len() as i64)));
            m.push((
                "items",
                Reply::Integer(f.gens.iter().map(|(_, g)| g.items()).sum::<u64>() as i64),
            ));
            m.push((
                "fpr_now",
                // Folded from +0 (an empty sum of floats is -0).
                Reply::Double(f.gens.iter().fold(0.0, |a, (_, g)| a + g.fpr())),
            ));
            m.push((
                "hash",
                Reply::text(format!("{}", ItemHasher::default().id())),
            ));
            m.push(("bracket", Reply::text("no false negatives (unless an item was deleted that was never added); false positives at about fpr_now")));
        }
    }
    m.push(("bytes", Reply::Integer(v.bytes() as i64)));
    Reply::Map(m)
}
