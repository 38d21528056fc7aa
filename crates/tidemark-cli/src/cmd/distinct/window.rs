//! `tidemark distinct --window W`: distinct items over a sliding window of ticks.
//!
//! Input lines are `TICK ITEM` (the item is the rest of the line after the first run of
//! spaces or tabs). By default a ring of per-bucket sketches answers the window as whole
//! buckets of `--bucket` ticks (default `⌈W/60⌉`); with `--sliding` one sliding HyperLogLog
//! answers the exact window `(now − W, now]`. Events may arrive out of order; one older than
//! the structure still holds is refused and counted (`refused`), never added to the current
//! bucket. With `--every T` the estimate is printed each time the ticks cross a multiple of
//! `T` (at the tick just before it), and always at the end (at the newest tick); of the marks
//! a gap in the ticks crosses, those more than two windows after the last event (the window
//! empty) print once, not once each.

use tidemark::cardinality::registers::z_score;
use tidemark::cardinality::{BucketSketch, ExaLogLog, Hll, RingWindow, SlidingHll};
use tidemark::{Bracket, Estimate};

use std::path::PathBuf;

use super::sketch::SketchArg;
use crate::input::for_each_line;
use crate::UsageError;
use tidemark_cli::output::{Output, Record};

enum Window {
    Ring(RingWindow),
    ExaLogLogRing(RingWindow<ExaLogLog>),
    Sliding(SlidingHll),
}

/// A ring's answer for the last `window` ticks, in whole buckets.
fn ring_count<S: BucketSketch>(
    r: &mut RingWindow<S>,
    now: u64,
    window: u64,
) -> anyhow::Result<Estimate> {
    let buckets = window.div_ceil(r.width());
    Ok(r.count(now, buckets)?)
}

/// What a ring adds to a record.
fn ring_fields<S: BucketSketch>(r: Record, ring: &RingWindow<S>, sketch: &str) -> Record {
    r.field("structure", "ring")
        .field("sketch", sketch)
        .field("buckets", ring.buckets())
        .field("bytes", ring.bytes() as u64)
}

impl Window {
    fn insert(&mut self, item: &[u8], tick: u64) -> bool {
        match self {
            Window::Ring(r) => r.insert(item, tick).is_ok(),
            Window::ExaLogLogRing(r) => r.insert(item, tick).is_ok(),
            Window::Sliding(s) => s.insert(item, tick).is_ok(),
        }
    }

    fn count(&mut self, now: u64, window: u64) -> anyhow::Result<Estimate> {
        Ok(match self {
            Window::Ring(r) => ring_count(r, now, window)?,
            Window::ExaLogLogRing(r) => ring_count(r, now, window)?,
            Window::Sliding(s) => s.count(now, window)?,
        })
    }

    fn record(
        &mut self,
        now: u64,
        window: u64,
        confidence: f64,
        refused: u64,
    ) -> anyhow::Result<Record> {
        let e = self.count(now, window)?;
        let std_error = match e.bracket {
            Bracket::Guaranteed => 0.0,
            _ => (e.high - e.value) / z_score(confidence)?,
        };
        let r = Record::new()
            .field("tick", now)
            .estimate(&e)
            .field("std_error", std_error);
        Ok(match self {
            Window::Ring(ring) => ring_fields(r, ring, "hyperloglog"),
            Window::ExaLogLogRing(ring) => ring_fields(r, ring, "exaloglog"),
            Window::Sliding(s) => {
                let stats = s.stats();
                r.field("structure", "sliding")
                    .field("pairs", stats.pairs as u64)
                    .field("bytes", stats.bytes as u64)
            }
        }
        .field("refused", refused))
    }
}

/// What the windowed form reads of `tidemark distinct`'s flags.
pub struct Options<'a> {
    /// `--window`: ticks.
    pub window: u64,
    pub precision: Option<u8>,
    pub sketch: SketchArg,
    pub confidence: f64,
    pub bucket: Option<u64>,
    pub sliding: bool,
    pub every: Option<u64>,
    pub json: bool,
    pub files: &'a [PathBuf],
}

/// Runs the windowed form of `tidemark distinct`.
pub fn run(args: &Options<'_>) -> anyhow::Result<()> {
    let window = args.window;
    if window == 0 {
        return Err(UsageError::flag(
            "--window",
            "expected at least 1 tick, got 0",
        ));
    }
    if args.every == Some(0) {
        return Err(UsageError::flag(
            "--every",
            "expected at least 1 tick, got 0",
        ));
    }
    let exaloglog = args.sketch == SketchArg::Exaloglog;
    let p = args.precision.unwrap_or(if exaloglog { 11 } else { 14 });
    let mut w = if args.sliding {
        if args.bucket.is_some() {
            return Err(UsageError::flag("--bucket", "not with --sliding"));
        }
        let s = SlidingHll::new(p, window)
            .map_err(|e| UsageError::flag("--window", e))?
            .with_confidence(args.confidence)
            .map_err(|e| UsageError::flag("--confidence", e))?;
        Window::Sliding(s)
    } else {
        let bucket = args.bucket.unwrap_or(window.div_ceil(60));
        if bucket == 0 || bucket > window {
            return Err(UsageError::flag(
                "--bucket",
                format!("expected 1..=window ({window}), got {bucket}"),
            ));
        }
        let n = u32::try_from(window.div_ceil(bucket))
            .ok()
            .filter(|&n| n <= 1_000_000)
            .ok_or_else(|| UsageError::flag("--bucket", "at most 10^6 buckets a window"))?;
        // The buckets' sketch carries the confidence of the ring's answers.
        let confidence = |e| UsageError::flag("--confidence", e);
        if exaloglog {
            let sketch = ExaLogLog::new(p)
                .map_err(|e| UsageError::flag("--precision", e))?
                .with_confidence(args.confidence)
                .map_err(confidence)?;
            let ring =
                RingWindow::of(sketch, bucket, n).map_err(|e| UsageError::flag("--bucket", e))?;
            Window::ExaLogLogRing(ring)
        } else {
            let sketch = Hll::new(p)
                .map_err(|e| UsageError::flag("--precision", e))?
                .with_confidence(args.confidence)
                .map_err(confidence)?;
            let ring =
                RingWindow::of(sketch, bucket, n).map_err(|e| UsageError::flag("--bucket", e))?;
            Window::Ring(ring)
        }
    };
    let mut out = Output::new(args.json);
    let mut newest: Option<u64> = None;
    let mut refused = 0u64;
    for_each_line(args.files, |loc, line| {
        let (tick, item) = line
            .trim_start()
            .split_once([' ', '\t'])
            .ok_or_else(|| loc.error(format!("expected `TICK ITEM`, got {line:?}")))?;
        let tick: u64 = tick
            .parse()
            .map_err(|_| loc.error(format!("expected a tick (unsigned integer), got {tick:?}")))?;
        let item = item.trim_start_matches([' ', '\t']);
        if let (Some(every), Some(n)) = (args.every, newest) {
            // Print at each multiple of `every` the ticks have crossed (none past u64::MAX).
            let mut mark = (n / every)
                .checked_add(1)
                .and_then(|q| q.checked_mul(every));
            while let Some(m) = mark.filter(|&m| m <= tick) {
                out.emit(&w.record(m - 1, window, args.confidence, refused)?)?;
                // Two windows after the newest event (the ring's buckets are at most a window
                // wide) the window is empty, and stays so up to this tick: one row says it,
                // not one per mark (a tick far ahead would print without end).
                if m > n.saturating_add(window.saturating_mul(2)) {
                    break;
                }
                mark = m.checked_add(every);
            }
        }
        if w.insert(item.as_bytes(), tick) {
            newest = newest.max(Some(tick));
        } else {
            refused += 1;
        }
        Ok(())
    })?;
    let now = newest.unwrap_or(0);
    out.emit(&w.record(now, window, args.confidence, refused)?)?;
    Ok(())
}
