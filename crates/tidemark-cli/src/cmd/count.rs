//! `tidemark count`: ones in a sliding window, by exponential histogram.
//!
//! Without `--time` each line is `0` or `1`, one arrival; the window is the last W arrivals.
//! With `--time` each line is a tick, one event; the window is the last W ticks.

use std::path::PathBuf;

use tidemark::window::{ClockError, ExpHistogram, Window};
use tidemark::ParamError;

use crate::input::for_each_line;
use crate::UsageError;
use tidemark_cli::output::{Output, Record};

/// Arguments of `tidemark count`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Window length: arrivals, or ticks with --time.
    #[arg(long)]
    pub window: u64,
    /// Relative error bound ε: the estimate is within ε/2 of the truth (k = ⌈1/ε⌉).
    #[arg(long, default_value_t = 0.1)]
    pub epsilon: f64,
    /// Lines are ticks (one event each) instead of 0/1 arrivals.
    #[arg(long)]
    pub time: bool,
    /// Print the window's estimate after every N input lines, not only at the end.
    #[arg(long, value_name = "N")]
    pub every: Option<u64>,
    /// Also report the estimate interpolated over the oldest bucket's time span.
    #[arg(long)]
    pub interpolate: bool,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Input files (standard input if none).
    pub files: Vec<PathBuf>,
}

/// A constructor's parameter error, named by its flag.
pub fn param_to_flag(e: ParamError) -> anyhow::Error {
    let flag = match e.name {
        "window" => "--window",
        "epsilon" => "--epsilon",
        "k" => "--epsilon",
        _ => "argument",
    };
    UsageError::flag(flag, format!("expected {}, got {}", e.expected, e.got))
}

/// Runs `tidemark count`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.every == Some(0) {
        return Err(UsageError::flag("--every", "expected at least 1, got 0"));
    }
    let build = if args.time {
        ExpHistogram::ticks(args.window, args.epsilon)
    } else {
        ExpHistogram::arrivals(args.window, args.epsilon)
    };
    let mut h = build.map_err(param_to_flag)?;
    if args.interpolate {
        h = h.with_interpolation();
    }
    let mut out = Output::new(args.json);
    let mut lines = 0u64;
    // Ticks earlier than the latest one seen: the histogram keeps its buckets in time order,
    // so such a tick cannot enter it. It is counted here and left out (as `run` drops a late
    // event); the bracket holds for the ticks counted.
    let mut late = 0u64;
    for_each_line(&args.files, |loc, line| {
        let line = line.trim();
        let result = match h.window() {
            Window::Ticks(_) => {
                let tick: u64 = line.parse().map_err(|_| {
                    loc.error(format!("expected a tick (unsigned integer), got {line:?}"))
                })?;
                h.record(tick)
            }
            Window::Arrivals(_) => match line {
                "0" => h.push(false),
                "1" => h.push(true),
                other => return Err(loc.error(format!("expected 0 or 1, got {other:?}"))),
            },
        };
        match result {
            Err(ClockError::Backwards { .. }) => late += 1,
            r => r.map_err(|e: ClockError| loc.error(e))?,
        }
        lines += 1;
        if args.every.is_some_and(|n| lines % n == 0) {
            out.emit(&record(&h, lines, args.time.then_some(late)))?;
        }
        Ok(())
    })?;
    if args.every.is_none_or(|n| lines % n != 0) {
        out.emit(&record(&h, lines, args.time.then_some(late)))?;
    }
    Ok(())
}

fn record(h: &ExpHistogram, lines: u64, refused: Option<u64>) -> Record {
    let stats = h.stats();
    let mut r = Record::new().field("lines", lines);
    // Ticks before the newest, left out (as `distinct --window` names them).
    if let Some(refused) = refused {
        r = r.field("refused", refused);
    }
    let mut r = r
        .estimate(&h.estimate())
        .field("buckets", stats.buckets as u64)
        .field("bits", stats.bits);
    if let Some(i) = h.interpolated() {
        r = r.field("interpolated", i.value);
    }
    r
}
