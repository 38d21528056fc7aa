//! `tidemark demo`: the exponential histogram on a generated stream, beside the exact count.
//!
//! A bursty event stream (quiet, then a burst, then quiet again) is counted over the last
//! 60 ticks by an exponential histogram at ε = 0.1, and by an exact window for comparison. At
//! every tenth tick the demo prints the truth, the estimate, its guaranteed bracket, the
//! one-sided bound a rate limiter would use, and the buckets held.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::window::ExpHistogram;

use crate::output::{Output, Record};

/// Arguments of `tidemark demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Window length in ticks.
    #[arg(long, default_value_t = 60)]
    pub window: u64,
    /// Ticks to simulate.
    #[arg(long, default_value_t = 300)]
    pub ticks: u64,
    /// Random seed of the generated stream.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs the demo.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut h = ExpHistogram::ticks(args.window, 0.1)
        .map_err(super::count::param_to_flag)?
        .with_interpolation();
    let mut exact: VecDeque<u64> = VecDeque::new();
    let mut rng = Pcg64::seed_from_u64(args.seed);
    let mut out = Output::new(args.json);
    if !args.json {
        println!(
            "events in the last {} ticks: exponential histogram (ε = 0.1) against the exact count",
            args.window
        );
    }
    let mut worst = 0.0f64;
    for tick in 0..args.ticks {
        // Quiet background, a burst in the middle third.
        let rate = if tick >= args.ticks / 3 && tick < 2 * args.ticks / 3 {
            40.0
        } else {
            4.0
        };
        let events = rng.random_range(0.0..2.0 * rate) as u64;
        h.advance_to(tick)?;
        for _ in 0..events {
            h.record(tick)?;
            exact.push_back(tick);
        }
        while exact.front().is_some_and(|&t| t + args.window <= tick) {
            exact.pop_front();
        }
        let truth = exact.len() as f64;
        let e = h.estimate();
        anyhow::ensure!(e.contains(truth), "bracket missed the truth at tick {tick}");
        if truth > 0.0 {
            worst = worst.max((e.value - truth).abs() / truth);
        }
        if (tick + 1) % 10 == 0 {
            let stats = h.stats();
            out.emit(
                &Record::new()
                    .field("tick", tick)
                    .field("exact", truth)
                    .estimate(&e)
                    .field("upper_bound", h.upper_bound())
                    .field("interpolated", h.interpolated().map(|i| i.value))
                    .field("buckets", stats.buckets as u64)
                    .field("bits", stats.bits),
            )?;
        }
    }
    if !args.json {
        let sizes: Vec<String> = h.buckets().map(|b| b.size.to_string()).collect();
        println!("buckets now, oldest first: {}", sizes.join(" "));
        println!(
            "worst relative error {:.2}% (bound ε/2 = 5%); every bracket held the truth",
            worst * 100.0
        );
    }
    Ok(())
}
