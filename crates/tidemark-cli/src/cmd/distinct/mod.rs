//! `tidemark distinct`: distinct lines by HyperLogLog (or ExaLogLog, `--sketch exaloglog`),
//! or the union of saved sketches.
//!
//! Each input line (without its line ending) is one item. `--merge` instead reads saved
//! sketches, tidemark's own files or Redis `HYLL` values (as `GET` returns them, alone or with
//! the one newline `redis-cli --raw` writes after them), merges them and reports the count of
//! the union. `--save` writes the sketch: tidemark's format, or a
//! Redis value with `--redis`. With `--window` the items are counted over a sliding window of
//! ticks instead (the `window` module).

use std::path::PathBuf;

use tidemark::cardinality::redis::REDIS_REGISTERS;
use tidemark::cardinality::registers::z_score;
use tidemark::cardinality::{DistinctSketch as Sketch, ExaLogLog, Hll, RedisError};
use tidemark::codec::Family;
use tidemark::Bracket;

use crate::input::{for_each_line, read_saved, SaveTo, Saved};
use crate::UsageError;
use tidemark_cli::output::{Output, Record};

mod sketch;
mod window;

pub use sketch::SketchArg;

/// Arguments of `tidemark distinct`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
--merge reads tidemark's sketch files and Redis HYLL values, told apart by their first bytes. \
Save a Redis value with `redis-cli --raw GET KEY > FILE`: it writes the value's bytes and one \
newline after them, which is accepted (exactly one newline, after a valid value; nothing else \
may follow it); `redis-cli --raw -D '' GET KEY > FILE` writes the bytes alone. Redis hashes \
with MurmurHash64A at p = 14, so the sketches of a union with Redis values are saved with \
--redis; sketches of different hashes are refused, never merged into a wrong number.

--save never replaces an existing file unless --force is given (exit 2, naming the file).")]
pub struct Args {
    /// Precision p (4..=18): 2^p registers (default 14, or 11 for ExaLogLog: the same error,
    /// about 0.8%).
    #[arg(long, value_name = "P")]
    pub precision: Option<u8>,
    /// The sketch: hyperloglog (Redis-compatible) or exaloglog.
    #[arg(long, value_enum, default_value = "hyperloglog")]
    pub sketch: SketchArg,
    /// Redis mode: MurmurHash64A, p = 14, counted as PFCOUNT counts; --save writes a Redis
    /// HYLL value.
    #[arg(long)]
    pub redis: bool,
    /// Confidence of the [low, high] bracket, in (0, 1).
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Write the sketch to FILE (a file already there is refused unless --force).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// With --save: replace a file already at FILE.
    #[arg(long, requires = "save")]
    pub force: bool,
    /// Merge saved sketches (the FILES: tidemark's, or Redis HYLL values) instead of reading
    /// lines.
    #[arg(long)]
    pub merge: bool,
    /// Distinct items over the last W ticks: lines are `TICK ITEM`.
    #[arg(long, value_name = "W")]
    pub window: Option<u64>,
    /// With --window: bucket width of the ring of per-bucket sketches (default ⌈W/60⌉).
    #[arg(long, value_name = "B")]
    pub bucket: Option<u64>,
    /// With --window: one sliding HyperLogLog (exact window edges) instead of the ring.
    #[arg(long)]
    pub sliding: bool,
    /// With --window: print the estimate every T ticks, not only at the end.
    #[arg(long, value_name = "T")]
    pub every: Option<u64>,
    /// Each line is an integer (in [-2^63, 2^64)), hashed as its eight little-endian bytes
    /// (negative ones as two's complement) instead of its text: Python's
    /// `update_many(array, integers="binary")` builds the same sketch.
    #[arg(long)]
    pub binary_integers: bool,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Input files (standard input if none); with --merge, the sketches.
    pub files: Vec<PathBuf>,
}

/// Runs `tidemark distinct`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        return Err(UsageError::flag(
            "--confidence",
            format!("expected a number in (0, 1), got {}", args.confidence),
        ));
    }
    if args.sketch == SketchArg::Exaloglog && (args.redis || args.sliding) {
        return Err(UsageError::flag(
            "--sketch",
            "exaloglog not with --redis (Redis keeps HyperLogLogs) or --sliding (the sliding \
             sketch is a HyperLogLog; a ring of ExaLogLogs is --window without --sliding)",
        ));
    }
    if args.binary_integers && (args.merge || args.redis || args.window.is_some()) {
        return Err(UsageError::flag(
            "--binary-integers",
            "not with --merge, --redis or --window (lines of items for one sketch)",
        ));
    }
    if let Some(window) = args.window {
        if let Some(p) = args.precision.filter(|p| !(4..=18).contains(p)) {
            return Err(UsageError::flag(
                "--precision",
                format!("expected 4..=18, got {p}"),
            ));
        }
        if args.merge || args.save.is_some() || args.redis {
            return Err(UsageError::flag(
                "--window",
                "not with --merge, --save or --redis",
            ));
        }
        return window::run(&window::Options {
            window,
            precision: args.precision,
            sketch: args.sketch,
            confidence: args.confidence,
            bucket: args.bucket,
            sliding: args.sliding,
            every: args.every,
            json: args.json,
            files: &args.files,
        });
    }
    for (flag, given) in [
        ("--bucket", args.bucket.is_some()),
        ("--sliding", args.sliding),
        ("--every", args.every.is_some()),
    ] {
        if given {
            return Err(UsageError::flag(flag, "only with --window"));
        }
    }
    if let Some(p) = args.precision {
        if args.redis && p != 14 {
            return Err(UsageError::flag(
                "--precision",
                format!("Redis mode has p = 14, got {p}"),
            ));
        }
        if !(4..=18).contains(&p) {
            return Err(UsageError::flag(
                "--precision",
                format!("expected 4..=18, got {p}"),
            ));
        }
    }
    let save = args
        .save
        .as_deref()
        .map(|path| SaveTo::new(path, "--save", args.force));
    if let Some(save) = &save {
        save.check()?;
    }
    let h = if args.merge {
        if args.precision.is_some() || args.sketch != SketchArg::Hyperloglog {
            let flag = if args.precision.is_some() {
                "--precision"
            } else {
                "--sketch"
            };
            return Err(UsageError::flag(
                flag,
                "not with --merge: the sketches carry their kind and precision",
            ));
        }
        if args.files.is_empty() {
            return Err(UsageError::flag(
                "--merge",
                "expected at least one sketch file",
            ));
        }
        merge_files(&args.files)?
    } else {
        let mut h = match args.sketch {
            _ if args.redis => Sketch::Hll(Hll::redis()),
            SketchArg::Hyperloglog => Sketch::Hll(
                Hll::new(args.precision.unwrap_or(14)).expect("precision checked above"),
            ),
            SketchArg::Exaloglog => Sketch::ExaLogLog(
                ExaLogLog::new(args.precision.unwrap_or(11)).expect("precision checked above"),
            ),
        };
        for_each_line(&args.files, |loc, line| {
            if args.binary_integers {
                h.insert_u64(binary_word(line).ok_or_else(|| {
                    loc.error(format!(
                        "--binary-integers: expected an integer in [-2^63, 2^64), got {line:?}"
                    ))
                })?);
            } else {
                h.insert(line.as_bytes());
            }
            Ok(())
        })?;
        h
    };
    let h = h
        .with_confidence(args.confidence)
        .map_err(|e| UsageError::flag("--confidence", e))?;
    if let Some(save) = &save {
        let bytes = match &h {
            Sketch::Hll(h) if args.redis => h
                .to_redis()
                .map_err(|e| UsageError::flag("--redis", format!("cannot save as Redis: {e}")))?,
            h => h.to_bytes(),
        };
        save.write(&bytes)?;
    }
    let mut out = Output::new(args.json);
    out.emit(&record(&h, args.confidence))?;
    Ok(())
}

/// A line's integer as the 64-bit word it hashes as (a negative one as two's complement).
fn binary_word(line: &str) -> Option<u64> {
    let t = line.trim();
    t.parse::<u64>()
        .ok()
        .or_else(|| t.parse::<i64>().ok().map(|x| x as u64))
}

/// Reads and merges sketch files: tidemark envelopes (HyperLogLog or ExaLogLog) or Redis
/// `HYLL` values, told apart by their magic. Sketches of different precisions merge at the
/// smallest (each register of a finer sketch folds into the coarser one); that loses
/// accuracy, so it is said on stderr.
fn merge_files(files: &[PathBuf]) -> anyhow::Result<Sketch> {
    let mut acc: Option<Sketch> = None;
    let mut precisions: Vec<(u8, String)> = Vec::new();
    // ExaLogLog's history bits: a union keeps the fewest.
    let mut history: Vec<(u8, String)> = Vec::new();
    for path in files {
        let name = path.display().to_string();
        let families = [Family::Hll, Family::ExaLogLog];
        let h = match read_saved(path, &families, "a HyperLogLog or ExaLogLog sketch", true)? {
            Saved::RedisHyll(bytes) => Sketch::Hll(redis_value(&name, &bytes)?),
            Saved::Envelope(Family::ExaLogLog, bytes) => Sketch::ExaLogLog(
                ExaLogLog::from_bytes(&bytes).map_err(|e| UsageError::file(&name, e))?,
            ),
            Saved::Envelope(_, bytes) => {
                Sketch::Hll(Hll::from_bytes(&bytes).map_err(|e| UsageError::file(&name, e))?)
            }
        };
        if !precisions.iter().any(|(p, _)| *p == h.precision()) {
            precisions.push((h.precision(), name.clone()));
        }
        if let Sketch::ExaLogLog(e) = &h {
            if !history.iter().any(|(d, _)| *d == e.d()) {
                history.push((e.d(), name.clone()));
            }
        }
        match &mut acc {
            None => acc = Some(h),
            Some(a) if a.kind() != h.kind() => {
                return Err(UsageError::file(
                    &name,
                    format!(
                        "holds {}, the sketches before it {}: their registers mean different \
                         things, so they do not merge",
                        article(h.kind()),
                        article(a.kind())
                    ),
                ))
            }
            Some(a) => a.merge(&h).map_err(|e| {
                // Redis hashes with its own function: the usual mix-up has a name.
                let redis = tidemark::ItemHasher::redis();
                if (a.hasher() == redis) != (h.hasher() == redis) {
                    UsageError::file(
                        &name,
                        format!(
                            "{e}; Redis values, and sketches saved with `tidemark distinct \
                             --redis`, hash with MurmurHash64A at p = 14: build every sketch of \
                             the union with --redis"
                        ),
                    )
                } else {
                    UsageError::file(&name, e)
                }
            })?,
        }
    }
    let acc =
        acc.ok_or_else(|| UsageError::flag("--merge", "expected at least one sketch file"))?;
    if let Some(list) = mixed("p", precisions) {
        let p = acc.precision();
        let rse = match &acc {
            Sketch::Hll(_) => 1.04,
            Sketch::ExaLogLog(e) => {
                tidemark::cardinality::exaloglog::estimator::ml_rse_constant(e.t(), e.d())
            }
        };
        eprintln!(
            "tidemark: note: the sketches have different precisions: {list}; the union is at \
             p = {p}, the smallest, with a standard error of about {:.2}%",
            100.0 * rse / f64::from(1u32 << p).sqrt()
        );
    }
    if let Some(list) = mixed("d", history) {
        eprintln!(
            "tidemark: note: the ExaLogLog sketches keep different history bits: {list}; the \
             union keeps the fewest"
        );
    }
    Ok(acc)
}

/// A Redis `HYLL` value read from a file: the value's bytes, or the value and exactly one
/// `\n` after it, as `redis-cli --raw GET KEY > FILE` writes it. Taking that newline off is
/// never a guess: no valid value stays valid with a byte more or less at its end (a dense
/// value has one length; a sparse value's opcodes cover exactly 16,384 registers, and a
/// byte more, `\n` included, is an opcode covering more), so at most one reading is valid.
fn redis_value(name: &str, bytes: &[u8]) -> anyhow::Result<Hll> {
    let err = match Hll::from_redis(bytes) {
        Ok(h) => return Ok(h),
        Err(e) => e,
    };
    if let Some(Ok(h)) = bytes.strip_suffix(b"\n").map(Hll::from_redis) {
        return Ok(h);
    }
    // A whole value followed by more bytes than that newline: where the decoder stopped
    // past the last register, or at the end of a dense value's length, the value may end.
    let end = match err {
        RedisError::SparseOverrun {
            offset, covered, ..
        } if covered == REDIS_REGISTERS => Some(offset),
        RedisError::SparseTruncated { offset } => Some(offset),
        RedisError::DenseLength { expected, got } if got > expected => Some(expected),
        _ => None,
    };
    let whole = |end: &usize| {
        bytes
            .get(..*end)
            .is_some_and(|v| Hll::from_redis(v).is_ok())
    };
    if let Some(end) = end.filter(whole) {
        return Err(UsageError::saved(
            name,
            format!(
                "has {} bytes past the end of the Redis HYLL value it starts with: a saved \
                 value is followed by at most one newline (`redis-cli --raw GET KEY > FILE` \
                 writes one); `redis-cli --raw -D '' GET KEY > FILE` writes the value alone",
                bytes.len() - end
            ),
        ));
    }
    Err(UsageError::file(name, err))
}

/// `"p = 10 (a.tdmk), p = 12 (b.tdmk)"` when the files had more than one value of a
/// parameter, smallest first.
fn mixed(name: &str, mut seen: Vec<(u8, String)>) -> Option<String> {
    if seen.len() < 2 {
        return None;
    }
    seen.sort();
    let list: Vec<String> = seen
        .iter()
        .map(|(v, file)| format!("{name} = {v} ({file})"))
        .collect();
    Some(list.join(", "))
}

fn record(h: &Sketch, confidence: f64) -> Record {
    let e = h.estimate();
    // σ is the bracket's upper half-width over z (the lower end may be clamped at zero).
    let std_error = if e.bracket == Bracket::Guaranteed {
        0.0
    } else {
        (e.high - e.value) / z_score(confidence).expect("confidence checked")
    };
    Record::new()
        .estimate(&e)
        .field("std_error", std_error)
        .field("representation", h.representation().name())
        .field("bytes", h.bytes() as u64)
        .field("sketch", h.kind())
}

/// A sketch kind with its article, for messages.
fn article(kind: &str) -> &'static str {
    match kind {
        "exaloglog" => "an ExaLogLog",
        _ => "a HyperLogLog",
    }
}
