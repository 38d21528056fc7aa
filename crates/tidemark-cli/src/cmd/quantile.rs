//! `tidemark quantile`: quantiles with relative error by DDSketch (Masson, Rim, Lee, PVLDB
//! 2019), over a whole input or a sliding window of ticks, or the union of saved sketches.
//!
//! Each input line is one number. Every answer is the representative of the bin holding the
//! value of nearest rank `⌈q·n⌉`, within `α·|value|` of it, and the bin's bounds (clamped to
//! the exact minimum and maximum) are a guaranteed bracket: `confidence` is 1. A store that
//! collapsed its lowest bins under `--bins` says so on the answers that fall in them
//! (`ddsketch-collapsed`, a bracket reaching down to the minimum). `--cdf V` answers the
//! fraction of values at most `V`, bracketed by the counts below and including `V`'s bin.
//!
//! With `--window W` lines are `TICK VALUE` and a ring of per-bucket sketches answers over the
//! last `W` ticks in whole buckets of `--bucket` ticks (default `⌈W/60⌉`), as `distinct
//! --window` does: an event older than the ring is refused and counted (`refused`), `--every
//! T` prints the answers each time the ticks cross a multiple of `T`.
//!
//! `--save` writes the envelope (`FORMAT.md`): the sketch's (family 64), or with `--window`
//! the ring's (family 65), the bytes Python's `Quantiles.to_bytes()` holds for the same sketch
//! or ring, and the Redis module's `TM.DUMP` for a quantile key (a ring). `--merge` reads
//! either and answers for their union: a ring stands for its last window (every bucket it
//! holds, merged), and bin counts add, so the union is exactly the sketch of the values of
//! every file.

use std::path::PathBuf;

use tidemark::codec::Family;
use tidemark::quantile::{
    DdSketch, Mapping, QuantileError, QuantileRing, DEFAULT_ALPHA, DEFAULT_BIN_LIMIT,
    MAX_RING_BUCKETS, MAX_SCHEMA, MIN_SCHEMA,
};
use tidemark::ParamError;

use crate::input::{for_each_line, read_envelope, Loc, SaveTo};
use crate::UsageError;
use tidemark_cli::output::{Output, Record};

/// The quantiles answered when neither `--quantile` nor `--cdf` is given.
const DEFAULT_QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// Arguments of `tidemark quantile`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
Input lines are one number each (or TICK VALUE with --window): finite, in any form Rust's \
f64 parser reads (12, -3.5, 1e-3). Text, an empty value, NaN, inf and numbers past the \
largest f64 (1e400) stop with the file and line named, exit code 2; blank lines are skipped.

Each answer is a row: quantile, estimate (within alpha of the value of nearest rank \
ceil(q*n)), low and high (the bin's bounds, clamped to the minimum and maximum: the true \
value always lies between them, confidence 1), method (ddsketch, or ddsketch-collapsed where \
--bins made the lowest bins collapse and the alpha bound no longer holds), rank (ceil(q*n)) \
and count (n). With --cdf V: at_most V, and the fraction of values at most V as estimate, low \
and high (method ddsketch-rank). An empty input or window answers with count 0 and no \
estimate.

--save writes tidemark's envelope: the sketch's (family 64), or with --window the ring's \
(family 65), the bytes Python's Quantiles.to_bytes() holds for the same sketch or ring and \
the Redis module's TM.DUMP of a quantile key (a ring); it never replaces an existing file \
unless --force is given (exit 2, naming the file). --merge reads sketches and rings (a ring \
stands for its last window: every bucket it holds); their mappings (alpha or schema) must be \
equal, and the union keeps the largest bin limit among them.")]
pub struct Args {
    /// Relative accuracy α, in [1e-9, 1): every answer within α·|value| of the true quantile
    /// (default 0.01).
    #[arg(
        long,
        value_name = "ALPHA",
        conflicts_with = "schema",
        allow_negative_numbers = true
    )]
    pub alpha: Option<f64>,
    /// The bins of Prometheus native-histogram schema S (-4..=8; 5: α ≈ 1.08%) instead of
    /// --alpha's.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub schema: Option<i64>,
    /// Bins a store may hold (1..=2^24, default 4096); past it the lowest bins collapse.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub bins: Option<u64>,
    /// Quantiles to answer, in [0, 1]: comma-separated or repeated (default
    /// 0.5,0.9,0.99,0.999, unless --cdf is given).
    #[arg(
        long = "quantile",
        value_name = "Q",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub quantiles: Vec<f64>,
    /// Also answer the fraction of values at most V: comma-separated or repeated.
    #[arg(
        long,
        value_name = "V",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    pub cdf: Vec<f64>,
    /// Write the sketch (with --window, the ring) to FILE (a file already there is refused
    /// unless --force).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// With --save: replace a file already at FILE.
    #[arg(long, requires = "save")]
    pub force: bool,
    /// Merge saved sketches or rings (the FILES) instead of reading numbers.
    #[arg(long)]
    pub merge: bool,
    /// Quantiles over the last W ticks: lines are `TICK VALUE`.
    #[arg(long, value_name = "W", allow_negative_numbers = true)]
    pub window: Option<u64>,
    /// With --window: bucket width of the ring of per-bucket sketches (default ⌈W/60⌉).
    #[arg(long, value_name = "B", allow_negative_numbers = true)]
    pub bucket: Option<u64>,
    /// With --window: print the answers every T ticks, not only at the end.
    #[arg(long, value_name = "T", allow_negative_numbers = true)]
    pub every: Option<u64>,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Input files (standard input if none); with --merge, the sketches.
    pub files: Vec<PathBuf>,
}

/// Runs `tidemark quantile`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let (quantiles, cdf) = questions(&args)?;
    if args.window.is_none() {
        for (flag, given) in [
            ("--bucket", args.bucket.is_some()),
            ("--every", args.every.is_some()),
        ] {
            if given {
                return Err(UsageError::flag(flag, "only with --window"));
            }
        }
    }
    if args.merge {
        for (flag, given) in [
            ("--alpha", args.alpha.is_some()),
            ("--schema", args.schema.is_some()),
            ("--bins", args.bins.is_some()),
        ] {
            if given {
                return Err(UsageError::flag(
                    flag,
                    "not with --merge: the sketches carry their mapping and bin limit",
                ));
            }
        }
        if args.window.is_some() {
            return Err(UsageError::flag("--window", "not with --merge"));
        }
        if args.files.is_empty() {
            return Err(UsageError::flag(
                "--merge",
                "expected at least one sketch file",
            ));
        }
    }
    let empty = if args.merge {
        None
    } else {
        Some(sketch(&args)?)
    };
    let ring = match (args.window, &empty) {
        (Some(window), Some(empty)) => Some(ring(window, args.bucket, empty.clone())?),
        _ => None,
    };
    if args.every == Some(0) {
        return Err(UsageError::flag(
            "--every",
            "expected at least 1 tick, got 0",
        ));
    }
    let save = args
        .save
        .as_deref()
        .map(|path| SaveTo::new(path, "--save", args.force));
    if let Some(save) = &save {
        save.check()?;
    }
    if let (Some(ring), Some(window)) = (ring, args.window) {
        return windowed(ring, window, &args, save.as_ref(), &quantiles, &cdf);
    }
    let s = match empty {
        None => merge_files(&args.files)?,
        Some(mut s) => {
            for_each_line(&args.files, |loc, line| {
                let value = parse_value(loc, line)?;
                s.insert(value).map_err(|e| loc.error(e))
            })?;
            s
        }
    };
    if let Some(save) = &save {
        save.write(&s.to_bytes())?;
    }
    let mut out = Output::new(args.json);
    for r in answers(&Record::new(), &s, &quantiles, &cdf)? {
        out.emit(&r)?;
    }
    Ok(())
}

/// The quantiles and CDF points asked, checked: `q` in `[0, 1]`, CDF points finite.
fn questions(args: &Args) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    if let Some(q) = args.quantiles.iter().find(|q| !(0.0..=1.0).contains(*q)) {
        return Err(UsageError::flag(
            "--quantile",
            format!("expected a quantile in [0, 1], got {q}"),
        ));
    }
    if let Some(v) = args.cdf.iter().find(|v| !v.is_finite()) {
        return Err(UsageError::flag(
            "--cdf",
            format!("expected a finite number, got {v}"),
        ));
    }
    let quantiles = if args.quantiles.is_empty() && args.cdf.is_empty() {
        DEFAULT_QUANTILES.to_vec()
    } else {
        args.quantiles.clone()
    };
    Ok((quantiles, args.cdf.clone()))
}

/// A parameter's refusal as the flag that set it.
fn param_flag(flag: &'static str, e: ParamError) -> anyhow::Error {
    UsageError::flag(flag, format!("expected {}, got {}", e.expected, e.got))
}

/// The empty sketch the flags describe.
fn sketch(args: &Args) -> anyhow::Result<DdSketch> {
    let mapping = match args.schema {
        Some(s) => {
            let schema = i8::try_from(s)
                .ok()
                .filter(|s| (MIN_SCHEMA..=MAX_SCHEMA).contains(s))
                .ok_or_else(|| {
                    UsageError::flag(
                        "--schema",
                        format!("expected a schema in {MIN_SCHEMA}..={MAX_SCHEMA}, got {s}"),
                    )
                })?;
            Mapping::schema(schema).map_err(|e| param_flag("--schema", e))?
        }
        None => Mapping::cubic(args.alpha.unwrap_or(DEFAULT_ALPHA))
            .map_err(|e| param_flag("--alpha", e))?,
    };
    DdSketch::with_mapping(mapping, args.bins.unwrap_or(DEFAULT_BIN_LIMIT))
        .map_err(|e| param_flag("--bins", e))
}

/// The ring for `--window W --bucket B`: `⌈W/B⌉` buckets of `B` ticks.
fn ring(window: u64, bucket: Option<u64>, empty: DdSketch) -> anyhow::Result<QuantileRing> {
    if window == 0 {
        return Err(UsageError::flag(
            "--window",
            "expected at least 1 tick, got 0",
        ));
    }
    let bucket = bucket.unwrap_or(window.div_ceil(60));
    if bucket == 0 || bucket > window {
        return Err(UsageError::flag(
            "--bucket",
            format!("expected 1..=window ({window}), got {bucket}"),
        ));
    }
    let n = u32::try_from(window.div_ceil(bucket))
        .ok()
        .filter(|&n| n <= MAX_RING_BUCKETS)
        .ok_or_else(|| {
            UsageError::flag(
                "--bucket",
                format!("at most {MAX_RING_BUCKETS} buckets a window"),
            )
        })?;
    QuantileRing::of(empty, bucket, n).map_err(|e| param_flag("--bucket", e))
}

/// The longest piece of a bad line a message quotes.
const QUOTED_CHARS: usize = 60;

/// `text` quoted for a message, cut after [`QUOTED_CHARS`] characters.
fn quoted(text: &str) -> String {
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((cut, _)) => format!("{:?}… ({} bytes)", &text[..cut], text.len()),
        None => format!("{text:?}"),
    }
}

/// A line's value: a finite `f64`, or an error naming the line.
fn parse_value(loc: &Loc, text: &str) -> anyhow::Result<f64> {
    let t = text.trim();
    if t.is_empty() {
        return Err(loc.error("expected a number, got an empty value"));
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(v) if v.is_nan() => Err(loc.error(format!(
            "expected a finite number, got {} (not a number)",
            quoted(t)
        ))),
        Ok(_) => Err(loc.error(format!(
            "expected a finite number, got {}: infinite, or past the largest f64 (about \
             1.8e308)",
            quoted(t)
        ))),
        Err(_) => Err(loc.error(format!("expected a number, got {}", quoted(t)))),
    }
}

/// One row per quantile, then one per CDF point, each after `base`'s fields. An empty sketch
/// answers with its count, 0, and no estimate.
fn answers(
    base: &Record,
    s: &DdSketch,
    quantiles: &[f64],
    cdf: &[f64],
) -> anyhow::Result<Vec<Record>> {
    let mut rows = Vec::with_capacity(quantiles.len() + cdf.len());
    for &q in quantiles {
        let r = base.clone().field("quantile", q);
        rows.push(match s.quantile(q) {
            Ok(a) => r
                .estimate(&a.estimate)
                .field("rank", a.rank)
                .field("count", a.count),
            Err(QuantileError::Empty) => r.field("count", 0u64),
            Err(e) => return Err(anyhow::anyhow!("internal: quantile {q}: {e}")),
        });
    }
    for &v in cdf {
        let r = base.clone().field("at_most", v);
        rows.push(match s.cdf(v) {
            Ok(e) => r.estimate(&e).field("count", s.count()),
            Err(QuantileError::Empty) => r.field("count", 0u64),
            Err(e) => return Err(anyhow::anyhow!("internal: cdf at {v}: {e}")),
        });
    }
    Ok(rows)
}

/// A saved sketch, or a saved ring's last window: the merge of every bucket it holds (the
/// window of its length ending at its newest bucket).
fn read_sketch(path: &std::path::Path) -> anyhow::Result<DdSketch> {
    let name = path.display().to_string();
    let families = [Family::Quantiles, Family::QuantileRing];
    let (family, bytes) = read_envelope(path, &families, "a quantile sketch or ring (DDSketch)")?;
    let bad = |e: &dyn std::fmt::Display| UsageError::file(&name, e);
    if family != Family::QuantileRing {
        return DdSketch::from_bytes(&bytes).map_err(|e| bad(&e));
    }
    let mut ring = QuantileRing::from_bytes(&bytes).map_err(|e| bad(&e))?;
    match ring.newest_bucket() {
        None => Ok(ring.empty_sketch().clone()),
        Some(newest) => {
            let now = newest.saturating_mul(ring.width());
            let buckets = ring.buckets();
            ring.window(now, buckets).map_err(|e| bad(&e))
        }
    }
}

/// Reads and merges saved sketches and rings. Their mappings must be equal (else the file
/// that differs is named); the union keeps the largest bin limit among them, so it collapses
/// no further than the largest of its parts needs.
fn merge_files(files: &[PathBuf]) -> anyhow::Result<DdSketch> {
    let mut parts: Vec<DdSketch> = Vec::with_capacity(files.len());
    for path in files {
        let name = path.display().to_string();
        let s = read_sketch(path)?;
        if let Some(first) = parts.first() {
            if first.mapping() != s.mapping() {
                return Err(UsageError::saved(
                    &name,
                    format!(
                        "holds a DDSketch of {} bins, the sketches before it {} bins: their \
                         bins are different intervals, so they do not merge",
                        s.mapping(),
                        first.mapping()
                    ),
                ));
            }
        }
        parts.push(s);
    }
    let first = parts
        .first()
        .ok_or_else(|| UsageError::flag("--merge", "expected at least one sketch file"))?;
    let limit = parts.iter().map(DdSketch::bin_limit).max().unwrap_or(1);
    let mut union = DdSketch::with_mapping(first.mapping(), limit)?;
    for (s, path) in parts.iter().zip(files) {
        union
            .merge(s)
            .map_err(|e| UsageError::file(path.display(), e))?;
    }
    Ok(union)
}

/// The windowed form: `TICK VALUE` lines into the ring, answered over the last `window`
/// ticks in whole buckets (see the module documentation).
fn windowed(
    mut ring: QuantileRing,
    window: u64,
    args: &Args,
    save: Option<&SaveTo<'_>>,
    quantiles: &[f64],
    cdf: &[f64],
) -> anyhow::Result<()> {
    let buckets = ring.buckets();
    let mut out = Output::new(args.json);
    let mut newest: Option<u64> = None;
    let mut refused = 0u64;
    let emit = |ring: &mut QuantileRing, out: &mut Output, now: u64, refused: u64| {
        let s = ring.window(now, buckets)?;
        for r in answers(&Record::new().field("tick", now), &s, quantiles, cdf)? {
            out.emit(&r.field("refused", refused))?;
        }
        anyhow::Ok(())
    };
    for_each_line(&args.files, |loc, line| {
        let (tick, value) = line
            .trim_start()
            .split_once([' ', '\t'])
            .ok_or_else(|| loc.error(format!("expected `TICK VALUE`, got {}", quoted(line))))?;
        let tick: u64 = tick.parse().map_err(|_| {
            loc.error(format!(
                "expected a tick (unsigned integer), got {}",
                quoted(tick)
            ))
        })?;
        let value = parse_value(loc, value)?;
        if let (Some(every), Some(n)) = (args.every, newest) {
            // Print at each multiple of `every` the ticks have crossed (none past u64::MAX).
            let mut mark = (n / every)
                .checked_add(1)
                .and_then(|q| q.checked_mul(every));
            while let Some(m) = mark.filter(|&m| m <= tick) {
                emit(&mut ring, &mut out, m - 1, refused)?;
                // Two windows after the newest event the window is empty, and stays so up to
                // this tick: one row says it, not one per mark.
                if m > n.saturating_add(window.saturating_mul(2)) {
                    break;
                }
                mark = m.checked_add(every);
            }
        }
        match ring.insert(value, tick) {
            Ok(()) => newest = newest.max(Some(tick)),
            Err(QuantileError::TooOld { .. }) => refused += 1,
            Err(e) => return Err(loc.error(e)),
        }
        Ok(())
    })?;
    if let Some(save) = save {
        save.write(&ring.to_bytes())?;
    }
    emit(&mut ring, &mut out, newest.unwrap_or(0), refused)?;
    Ok(())
}
