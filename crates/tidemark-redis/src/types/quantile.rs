//! `quantile`: windowed quantiles with relative error, a ring of bucket DDSketches (Masson,
//! Rim, Lee, *DDSketch: A Fast and Fully-Mergeable Quantile Sketch with Relative-Error
//! Guarantees*, PVLDB 2019) whose window is kept merged and slides by one merge and one exact
//! subtraction as buckets close ([`QuantileRing`]).
//!
//! ```text
//! TMQUANTILE.CREATE key WINDOW ms [BUCKET ms] [ALPHA alpha | SCHEMA schema] [BINS n]
//! TMQUANTILE.ADD key time value [value ...]
//! TMQUANTILE.QUANTILE key q [q ...] [WINDOW ms] [AT time]
//! TMQUANTILE.CDF key value [WINDOW ms] [AT time]
//! ```
//!
//! The bracket is guaranteed. A bin's upper bound is at most `γ = (1 + α)/(1 − α)` times its
//! lower (a schema's bins are exactly `(γ^(i−1), γ^i]`), so the `q`-quantile — the value of nearest rank `⌈q·n⌉` among the window's `n` values — is
//! in the bin where the cumulative count reaches that rank: the estimate (the bin's
//! representative) is within `α·|x|` of the true value `x`, and `[low, high]` (the bin's
//! bounds, clamped to the window's exact minimum and maximum) holds it. A store that passed
//! `BINS` bins collapsed its lowest ones: a rank that falls in the collapsed bin keeps a
//! guaranteed bracket, `[minimum, that bin's upper bound]`, but not the α bound. The CDF at
//! `value` is bracketed by the counts below `value`'s bin and including it.
//!
//! Windows are whole buckets ending with the bucket of the latest time (or of `AT`); a late
//! value goes to its own bucket while the ring holds it, and an older one is refused. A key
//! dumps as the ring's envelope (family 65): the bytes the CLI and the store read.

use tidemark::codec::{self, Family, Reader};
use tidemark::quantile::{
    DdSketch, Mapping, MappingKind, QuantileError, QuantileRing, MAX_BIN_LIMIT, MAX_SCHEMA,
    MIN_ALPHA, MIN_SCHEMA,
};
use tidemark::Bracket;

use super::{Access, Call, Clock, Encoded, Keys, LoadError, Spec, TmType, Value};
use crate::args::{parse_u64, show, Args, Time};
use crate::env::Env;
use crate::error::CmdError;
use crate::limits::Limits;
use crate::reply::{bracket_text, Replicate, Reply};

/// Windowed quantiles: a ring of bucket DDSketches.
#[derive(Clone, Debug)]
pub struct Quantiles {
    /// The ring (a tick is a millisecond), boxed: its inline part (an empty sketch, the
    /// window's aggregate) is several times the size of the other types' values.
    pub ring: Box<QuantileRing>,
}

/// Bytes counted for one sketch beside its bins: the struct, and in a slot the slot's pointer
/// and the bucket number.
const SKETCH_OVERHEAD: u64 = core::mem::size_of::<DdSketch>() as u64 + 16;

impl Quantiles {
    /// The most buckets a key's ring holds (WINDOW / BUCKET).
    pub const MAX_BUCKETS: u64 = 65_536;

    /// The longest window, ms.
    pub fn window(&self) -> u64 {
        self.ring.width() * self.ring.buckets()
    }

    /// The bytes a ring of `buckets` sketches of `bins` bins a store may reach: every bucket,
    /// the window's aggregate and a query's copy of it, each with both stores full of 8-byte
    /// counts (counts widen from 32 bits past 2^32 − 1 in a bin).
    pub fn full_bytes(buckets: u64, bins: u64) -> u64 {
        buckets
            .saturating_add(2)
            .saturating_mul(bins.saturating_mul(16).saturating_add(SKETCH_OVERHEAD))
    }

    /// Checks a shape against the module's bounds: the bucket count, the bytes at full size.
    fn check(buckets: u64, bins: u64) -> Result<(), String> {
        if buckets > Quantiles::MAX_BUCKETS {
            return Err(format!(
                "WINDOW/BUCKET must be at most {}, got {buckets}",
                Quantiles::MAX_BUCKETS
            ));
        }
        let full = Quantiles::full_bytes(buckets, bins);
        if full > Limits::MAX_KEY_BYTES {
            return Err(format!(
                "{buckets} buckets of BINS {bins} would need up to {full} bytes, above the {} \
                 byte limit; give fewer buckets or BINS",
                Limits::MAX_KEY_BYTES
            ));
        }
        Ok(())
    }

    /// The sketches of the buckets in the window of the whole ring ending at the latest time.
    fn window_buckets(&self) -> impl Iterator<Item = &DdSketch> + '_ {
        let newest = self.ring.newest_bucket();
        let from = newest.map_or(1, |nb| (nb + 1).saturating_sub(self.ring.buckets()));
        (from..=newest.unwrap_or(0)).filter_map(|b| self.ring.bucket(b))
    }

    /// The values in the window of the whole ring ending at the latest time.
    pub fn count(&self) -> u64 {
        self.window_buckets().map(DdSketch::count).sum()
    }

    /// Checks WINDOW and AT against the key and merges that window: the sketch of its values.
    fn window_sketch(
        &mut self,
        cmd: &'static str,
        window: Option<u64>,
        at: Option<Time>,
        env: Env,
    ) -> Result<DdSketch, CmdError> {
        let latest = self.latest();
        let now = env.window_end(cmd, at, latest)?;
        let width = self.ring.width();
        let w = window.unwrap_or(self.window());
        if w % width != 0 || w > self.window() {
            return Err(param(
                cmd,
                format!(
                    "WINDOW must be a multiple of the bucket ({width} ms) up to the key's window \
                     ({} ms), got {w}",
                    self.window()
                ),
            ));
        }
        self.ring
            .window(now, w / width)
            .map_err(|e| param(cmd, e.to_string()))
    }
}

fn param(cmd: &'static str, msg: impl Into<String>) -> CmdError {
    CmdError::Param {
        cmd,
        msg: msg.into(),
    }
}

/// A number as Redis reads one: text that parses as an `f64` (`1`, `-2.5`, `1e-3`, `inf`).
fn number(a: &[u8]) -> Option<f64> {
    core::str::from_utf8(a).ok()?.parse::<f64>().ok()
}

/// The value after an option's keyword, or the error naming the missing value.
fn option_value<'a>(
    a: &mut Args<'a>,
    arg: &'static str,
    expected: &'static str,
) -> Result<&'a [u8], CmdError> {
    if a.left() == 0 {
        return Err(CmdError::MissingValue {
            cmd: a.cmd(),
            arg,
            expected,
        });
    }
    a.take()
}

/// A relative accuracy α in `[1e-9, 1)`, the value of option `arg` (`ALPHA` of a `CREATE`,
/// and of the module's load arguments).
pub fn alpha(a: &mut Args<'_>, arg: &'static str) -> Result<f64, CmdError> {
    const EXPECTED: &str = "a relative accuracy in [1e-9, 1)";
    let v = option_value(a, arg, EXPECTED)?;
    number(v)
        .filter(|x| (MIN_ALPHA..1.0).contains(x))
        .ok_or_else(|| CmdError::BadArg {
            cmd: a.cmd(),
            arg,
            expected: EXPECTED,
            got: show(v),
        })
}

/// A Prometheus native-histogram schema, `-4..=8` (`γ = 2^(2^−schema)`).
fn schema(a: &mut Args<'_>) -> Result<i8, CmdError> {
    const EXPECTED: &str = "an integer in -4..=8 (a Prometheus native-histogram schema)";
    let v = option_value(a, "SCHEMA", EXPECTED)?;
    let (negative, digits) = match v.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, v),
    };
    parse_u64(digits)
        .filter(|m| *m <= 8)
        .map(|m| if negative { -(m as i8) } else { m as i8 })
        .filter(|s| (MIN_SCHEMA..=MAX_SCHEMA).contains(s))
        .ok_or_else(|| CmdError::BadArg {
            cmd: a.cmd(),
            arg: "SCHEMA",
            expected: EXPECTED,
            got: show(v),
        })
}

/// Value `i` (1-based) of an `ADD`: a finite number.
fn finite(cmd: &'static str, i: usize, v: &[u8]) -> Result<f64, CmdError> {
    number(v).filter(|x| x.is_finite()).ok_or_else(|| {
        param(
            cmd,
            format!(
                "value {i} must be a finite number (NaN, inf and numbers beyond +-1.8e308 are \
                 refused), got '{}'",
                show(v)
            ),
        )
    })
}

/// `WINDOW ms` and `AT time`, each at most once, in any order, to the end.
fn window_options(a: &mut Args<'_>) -> Result<(Option<u64>, Option<Time>), CmdError> {
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
    Ok((window, at))
}

fn is_option(a: &[u8]) -> bool {
    a.eq_ignore_ascii_case(b"WINDOW") || a.eq_ignore_ascii_case(b"AT")
}

impl TmType for Quantiles {
    const NAME: &'static str = "quantile";

    fn heap_bytes(&self) -> usize {
        self.ring.bytes()
    }

    fn to_bytes(&self) -> Vec<u8> {
        self.ring.to_bytes()
    }

    fn latest(&self) -> Option<u64> {
        self.ring
            .newest_bucket()
            .map(|b| b.saturating_mul(self.ring.width()))
    }

    fn info(&self, m: &mut Vec<(&'static str, Reply)>) {
        let sketch = self.ring.empty_sketch();
        let mapping = sketch.mapping();
        m.push((
            "structure",
            Reply::text("ring of bucket DDSketches (Masson, Rim, Lee 2019)"),
        ));
        m.push(("window_ms", Reply::Integer(self.window() as i64)));
        m.push(("bucket_ms", Reply::Integer(self.ring.width() as i64)));
        m.push(("buckets", Reply::Integer(self.ring.buckets() as i64)));
        match mapping.kind() {
            MappingKind::Schema { schema } => {
                m.push(("mapping", Reply::text("schema")));
                m.push(("schema", Reply::Integer(schema as i64)));
            }
            MappingKind::Cubic { .. } => m.push(("mapping", Reply::text("cubic"))),
            _ => m.push(("mapping", Reply::text(mapping.to_string()))),
        }
        m.push(("alpha", Reply::Double(mapping.alpha())));
        m.push(("bin_limit", Reply::Integer(sketch.bin_limit() as i64)));
        m.push(("count", Reply::Integer(self.count() as i64)));
        let collapsed = self.window_buckets().filter(|s| s.is_collapsed()).count();
        m.push(("collapsed_buckets", Reply::Integer(collapsed as i64)));
        m.push(("hash", Reply::text("none")));
        m.push((
            "latest_ms",
            self.latest()
                .map_or(Reply::Null, |t| Reply::Integer(t as i64)),
        ));
        m.push((
            "bracket",
            Reply::text(
                bracket_text(Bracket::Guaranteed)
                    + "; QUANTILE: the estimate is within alpha (relative) of the value of \
                       nearest rank ceil(q*n), low and high its bin's bounds clamped to the \
                       window's minimum and maximum (in a bin that BINS collapsed: \
                       [minimum, the bin's upper bound], no alpha bound); CDF: the fraction of \
                       values <= value, low and high counting its bin out and in",
            ),
        ));
    }

    fn decode(encoded: &mut Encoded<'_>) -> Option<Result<Self, LoadError>> {
        let Encoded::Envelope(Family::QuantileRing, bytes) = encoded else {
            return None;
        };
        Some(decode_ring(bytes))
    }
}

/// The buckets' bin limit, the bucket width and the bucket count of a ring's parameters, if
/// they read as the core writes them (else the core's decoder names what is wrong).
fn peek_shape(bytes: &[u8]) -> Option<(u64, u64, u64)> {
    let env = codec::decode(bytes).ok()?;
    let mut p: Reader<'_> = env.params();
    match p.u8("mapping").ok()? {
        0 => {
            p.f64("alpha").ok()?;
        }
        1 => {
            p.u8("schema").ok()?;
        }
        _ => return None,
    }
    let bins = p.u32("bin limit").ok()? as u64;
    let width = p.u64("bucket width").ok()?;
    let buckets = p.u32("buckets").ok()? as u64;
    Some((bins, width, buckets))
}

fn decode_ring(bytes: &[u8]) -> Result<Quantiles, LoadError> {
    let limit = |_| LoadError::Limit("a quantile ring beyond what TMQUANTILE.CREATE allows");
    // The ring's slot table is allocated from its parameters: check them first.
    if let Some((bins, _, buckets)) = peek_shape(bytes) {
        Quantiles::check(buckets, bins).map_err(limit)?;
    }
    let ring = QuantileRing::from_bytes(bytes).map_err(LoadError::Decode)?;
    Quantiles::check(ring.buckets(), ring.empty_sketch().bin_limit()).map_err(limit)?;
    if ring
        .width()
        .checked_mul(ring.buckets())
        .is_none_or(|w| w > Limits::MAX_WINDOW_MS)
    {
        return Err(LoadError::Limit("window longer than 2^48 ms"));
    }
    Ok(Quantiles {
        ring: Box::new(ring),
    })
}

/// `TMQUANTILE.CREATE`.
pub const CREATE: Spec = Spec {
    name: "TMQUANTILE.CREATE",
    legacy: None,
    access: Access::Write,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key WINDOW ms [BUCKET ms] [ALPHA alpha | SCHEMA schema] [BINS n]",
    summary: "Creates windowed quantiles within a relative error: a ring of bucket DDSketches (60 buckets unless BUCKET) of accuracy ALPHA or a Prometheus SCHEMA's, at most BINS bins a store",
    complexity: "O(buckets)",
    run: create,
};

/// `TMQUANTILE.ADD`.
pub const ADD: Spec = Spec {
    name: "TMQUANTILE.ADD",
    legacy: None,
    access: Access::Write,
    fast: true,
    keys: Keys::First,
    clock: Clock::TimeArg,
    usage: "key time value [value ...]",
    summary: "Adds values (finite numbers) seen at time (ms, or * for the server's clock); replies the number of values",
    complexity: "O(1) per value; a value that opens a bucket slides the cached window by a merge and a subtraction",
    run: add,
};

/// `TMQUANTILE.QUANTILE`.
pub const QUANTILE: Spec = Spec {
    name: "TMQUANTILE.QUANTILE",
    legacy: None,
    access: Access::Read,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key q [q ...] [WINDOW ms] [AT time]",
    summary: "Each q-quantile of the window (the value of nearest rank ceil(q*n)): [estimate, low, high], guaranteed, the estimate within ALPHA; nil for a window without values",
    complexity: "O(bins) to merge the cached window with the open bucket, then O(bins) per q; a new WINDOW or AT merges its buckets: O(buckets * bins)",
    run: quantile,
};

/// `TMQUANTILE.CDF`.
pub const CDF: Spec = Spec {
    name: "TMQUANTILE.CDF",
    legacy: None,
    access: Access::Read,
    fast: false,
    keys: Keys::First,
    clock: Clock::No,
    usage: "key value [WINDOW ms] [AT time]",
    summary: "The fraction of the window's values at most value: [estimate, low, high], guaranteed; nil for a window without values",
    complexity: "O(bins) to merge the cached window with the open bucket; a new WINDOW or AT merges its buckets: O(buckets * bins)",
    run: cdf,
};

fn create(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let a = &mut call.args;
    let key = a.take()?;
    let (mut window, mut bucket, mut given_alpha, mut given_schema) = (None, None, None, None);
    let mut bins = tidemark::quantile::DEFAULT_BIN_LIMIT;
    let mut seen = a.options();
    while a.left() > 0 {
        if a.option(&mut seen, "WINDOW")? {
            window = Some(a.ms("WINDOW")?);
        } else if a.option(&mut seen, "BUCKET")? {
            bucket = Some(a.ms("BUCKET")?);
        } else if a.option(&mut seen, "ALPHA")? {
            given_alpha = Some(alpha(a, "ALPHA")?);
        } else if a.option(&mut seen, "SCHEMA")? {
            given_schema = Some(schema(a)?);
        } else if a.option(&mut seen, "BINS")? {
            bins = a.positive("BINS", "an integer in 1..=16777216 (2^24)", MAX_BIN_LIMIT)?;
        } else {
            a.done()?;
        }
    }
    let cmd = call.name();
    let window = window.ok_or_else(|| param(cmd, "WINDOW ms is required"))?;
    let bucket = match bucket {
        Some(b) => b,
        None if window % 60 == 0 => window / 60,
        None => {
            return Err(param(
                cmd,
                "without BUCKET the ring has 60 buckets, so WINDOW must be a multiple of 60 ms; give BUCKET ms",
            ))
        }
    };
    let (mapping, shape) = match (given_alpha, given_schema) {
        (Some(_), Some(_)) => return Err(param(cmd, "give one of ALPHA and SCHEMA")),
        (None, Some(s)) => (Mapping::schema(s), ["SCHEMA".to_string(), s.to_string()]),
        (a, None) => {
            let a = a.unwrap_or(call.env.defaults.alpha);
            (Mapping::cubic(a), ["ALPHA".to_string(), a.to_string()])
        }
    };
    let mapping = mapping.map_err(|e| param(cmd, e.to_string()))?;
    call.keys.vacant(key)?;
    if window % bucket != 0 {
        return Err(param(
            cmd,
            format!("WINDOW ({window} ms) must be a multiple of BUCKET ({bucket} ms)"),
        ));
    }
    let n = window / bucket;
    Quantiles::check(n, bins).map_err(|msg| CmdError::Limit { cmd, msg })?;
    let sketch = DdSketch::with_mapping(mapping, bins).map_err(|e| param(cmd, e.to_string()))?;
    let ring = QuantileRing::of(sketch, bucket, n as u32).map_err(|e| param(cmd, e.to_string()))?;
    call.keys.store(
        key,
        Value::Quantile(Quantiles {
            ring: Box::new(ring),
        }),
    );
    let mut words = vec![
        "WINDOW".to_string(),
        window.to_string(),
        "BUCKET".to_string(),
        bucket.to_string(),
    ];
    words.extend(shape);
    words.extend(["BINS".to_string(), bins.to_string()]);
    call.rep = Replicate::create(cmd, key, &words);
    Ok(Reply::Ok)
}

fn add(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let cmd = call.name();
    let a = &mut call.args;
    let key = a.take()?;
    let time = a.time("time")?;
    let raw = a.rest_nonempty()?;
    // Every value is read before any is added: a refused command adds nothing.
    let values = raw
        .iter()
        .enumerate()
        .map(|(i, v)| finite(cmd, i + 1, v))
        .collect::<Result<Vec<f64>, CmdError>>()?;
    let env = call.env;
    let q = call.keys.write::<Quantiles>(key)?;
    let t = env.resolve(time, q.latest());
    let width = q.ring.width();
    for &v in &values {
        // The time is the same for every value: the first refuses or none does.
        q.ring.insert(v, t).map_err(|e| match e {
            QuantileError::TooOld { oldest, .. } => CmdError::Time {
                cmd,
                msg: format!(
                    "time {t} is older than the ring, which starts at {}",
                    oldest.saturating_mul(width)
                ),
            },
            other => CmdError::Limit {
                cmd,
                msg: other.to_string(),
            },
        })?;
    }
    call.replicate_time(time, t);
    Ok(Reply::Integer(values.len() as i64))
}

fn quantile(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let cmd = call.name();
    let a = &mut call.args;
    let key = a.take()?;
    if a.left() == 0 {
        return Err(CmdError::Arity { cmd });
    }
    let mut qs = Vec::new();
    while a.peek().is_some_and(|x| !is_option(x)) {
        let v = a.take()?;
        let q = number(v)
            .filter(|q| (0.0..=1.0).contains(q))
            .ok_or_else(|| {
                param(
                    cmd,
                    format!(
                        "q {} must be a number in [0, 1], got '{}'",
                        qs.len() + 1,
                        show(v)
                    ),
                )
            })?;
        qs.push(q);
    }
    if qs.is_empty() {
        return Err(param(
            cmd,
            "give at least one q in [0, 1] before WINDOW or AT",
        ));
    }
    let (window, at) = window_options(a)?;
    let env = call.env;
    let sketch = call
        .keys
        .read::<Quantiles>(key)?
        .window_sketch(cmd, window, at, env)?;
    Ok(Reply::Array(
        qs.iter()
            .map(|&q| match sketch.quantile(q) {
                Ok(e) => e.estimate.into(),
                // An empty window has no quantile (q was checked above).
                Err(_) => Reply::Null,
            })
            .collect(),
    ))
}

fn cdf(call: &mut Call<'_, '_>) -> Result<Reply, CmdError> {
    let cmd = call.name();
    let a = &mut call.args;
    let key = a.take()?;
    let v = a.take()?;
    let value = number(v).filter(|x| !x.is_nan()).ok_or_else(|| {
        param(
            cmd,
            format!(
                "value must be a number (inf and -inf allowed, NaN not), got '{}'",
                show(v)
            ),
        )
    })?;
    let (window, at) = window_options(a)?;
    let env = call.env;
    let sketch = call
        .keys
        .read::<Quantiles>(key)?
        .window_sketch(cmd, window, at, env)?;
    Ok(match sketch.cdf(value) {
        Ok(e) => e.into(),
        // An empty window has no distribution (the value was checked above).
        Err(_) => Reply::Null,
    })
}
