//! `tidemark-lab reproduce <plate>`: regenerate a structure's measured tables from this
//! implementation.
//!
//! Each plate is seeded and deterministic; the deterministic ones are also tests.

mod countmin;
mod distinct_per_byte;
mod filters;
mod histogram;
mod hll;
mod quantile;
mod sliding;

mod plates;

use std::path::PathBuf;

use tidemark_cli::error::UsageError;
use tidemark_cli::outln;
use tidemark_cli::output::{self, Output};

/// The plates.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plate {
    /// Exponential histogram (Datar et al.): the first twenty arrivals at k = 2, bucket by
    /// bucket.
    HistogramTwenty,
    /// Exponential histogram (Datar et al.): the window-400 example at ε = 0.2 (k = 5).
    HistogramWindow400,
    /// Exponential histogram (Datar et al.): worst relative error against ε and window, beside
    /// the bound ε/2.
    HistogramError,
    /// Exponential histogram (Datar et al.): buckets and bits held against k·log2(N/k), and the
    /// block counter's bits.
    HistogramBits,
    /// HyperLogLog (Flajolet et al.): relative RMSE and bias (Ertl and HIP) from 1 to 10^7
    /// distinct items at p = 10, 12, 14, 200 seeded trials per point.
    HllAccuracy,
    /// HyperLogLog beside ExaLogLog (Ertl 2025): relative RMSE, bias, bytes at rest and
    /// memory-variance product from 1 to 10^7 distinct items, 1,000 seeded trials a point
    /// (HyperLogLog p = 10, 12 with Ertl's estimator and HIP; ExaLogLog (2, 20) p = 8, 10 with
    /// maximum likelihood and the martingale).
    DistinctPerByte,
    /// Sliding HyperLogLog (Chabchoub and Hébrail): the ring of minute sketches and the sliding
    /// HyperLogLog against exact counts.
    SlidingHll,
    /// Sliding HyperLogLog (Chabchoub and Hébrail): its memory against its retention, beside the
    /// ring.
    SlidingMemory,
    /// Count-Min (Cormode and Muthukrishnan): its bounds against exact answers — points, median,
    /// inner products, ranges, quantiles, heavy hitters — on seeded Zipf and uniform streams.
    CountminAccuracy,
    /// Quotient filters (Bender et al.; Dayan et al.): rate and bits against growth (1× to 256×)
    /// for reserves 0, 5, 7, lengthening by 1 and 2 bits, and the stack, with the key at which
    /// each table dies.
    Filters,
    /// Quotient filters (Dayan et al.): each generation's share of a lengthening table's rate at
    /// 32× the forecast.
    FiltersGenerations,
    /// Quotient filters, the design's open question: rebuilding from the store against a stack
    /// and a large reserve, over a thousandfold growth.
    FiltersRebuild,
    /// Quantiles: relative error of p50, p90, p99, p99.9 against the exact quantile for
    /// tidemark's DDSketch (Masson et al.) at α = 1% beside KLL, REQ and two t-digests at equal
    /// serialized bytes, on lognormal, Pareto (1.1) and bimodal streams; and a ring's windowed
    /// answers against the exact window.
    QuantileError,
    /// Every plate above, in order (with --out, every CSV and chart).
    All,
}

/// Arguments of `tidemark-lab reproduce`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which plate.
    #[arg(value_enum)]
    pub plate: Plate,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Trials a point for hll-accuracy (default 200) and distinct-per-byte (default 1000);
    /// builds of quantile-error's randomized peers, KLL and REQ (default 20).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub trials: Option<u64>,
    /// The largest n of hll-accuracy and distinct-per-byte (default 10^7); the values of each
    /// quantile-error stream (default 10^6).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub max_n: Option<u64>,
    /// Also write each plate's records as DIR/<plate>.csv and its charts as
    /// DIR/<plate>[-<chart>].svg and .png.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Runs `tidemark-lab reproduce`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).map_err(|e| UsageError::file(dir.display(), e))?;
    }
    let plates: Vec<Plate> = if args.plate == Plate::All {
        <Plate as clap::ValueEnum>::value_variants()
            .iter()
            .copied()
            .filter(|&p| p != Plate::All)
            .collect()
    } else {
        vec![args.plate]
    };
    for plate in plates {
        let name = clap::ValueEnum::to_possible_value(&plate)
            .expect("no plate is skipped")
            .get_name()
            .to_string();
        if args.plate == Plate::All && !args.json {
            outln!("\n== {name}");
        }
        output::start_recording();
        let result = run_plate(plate, &args);
        let records = output::take_recorded();
        result?;
        if let Some(dir) = &args.out {
            let csv = dir.join(format!("{name}.csv"));
            output::write_csv(&records, &csv).map_err(|e| UsageError::file(csv.display(), e))?;
            for chart in plates::charts(plate) {
                let stem = dir.join(format!("{name}{}", chart.suffix));
                crate::chart::render(chart, &records, &stem)?;
            }
        }
    }
    Ok(())
}

fn run_plate(plate: Plate, args: &Args) -> anyhow::Result<()> {
    let json = args.json;
    let max_n = args.max_n.unwrap_or(10_000_000);
    let mut out = Output::new(json);
    match plate {
        Plate::HistogramTwenty => histogram::twenty(&mut out),
        Plate::HistogramWindow400 => histogram::window_400(&mut out),
        Plate::HistogramError => histogram::error_sweep(&mut out),
        Plate::HistogramBits => histogram::bits(&mut out),
        Plate::HllAccuracy => hll::accuracy(&mut out, args.trials.unwrap_or(200), max_n),
        Plate::DistinctPerByte => {
            distinct_per_byte::run(&mut out, args.trials.unwrap_or(1_000), max_n)
        }
        Plate::SlidingHll => sliding::run(&mut out),
        Plate::SlidingMemory => sliding::memory(&mut out),
        Plate::CountminAccuracy => countmin::accuracy(json),
        Plate::Filters => filters::growth(&mut out),
        Plate::FiltersGenerations => filters::generations(&mut out),
        Plate::FiltersRebuild => filters::rebuild(&mut out),
        Plate::QuantileError => quantile::run(
            json,
            args.max_n.unwrap_or(1_000_000),
            args.trials.unwrap_or(20),
        ),
        Plate::All => unreachable!("`all` runs the plates one by one"),
    }
}
