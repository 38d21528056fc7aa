//! `tidemark`: one subcommand per structure for ad-hoc work on files and pipes.
//!
//! Exit codes: 0 success; 2 bad input or arguments (the message names the file and line, or
//! the flag); 1 an internal failure. Nothing panics on input.

mod cmd;
mod input;

use std::process::ExitCode;

/// The pipeline opens and closes a summary per key and bucket, millions an hour: mimalloc's
/// per-thread free lists serve that churn with fewer instructions and page faults than the
/// system allocator. Built without transparent huge pages (`no_thp`): with them, every fresh
/// page it took was a 2 MiB page the kernel zeroed, 40% of a short run's time
/// (docs/history/benchmarks-2026-12-04.md, "Allocator, early alerts, and where the pipeline
/// stands").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{Parser, Subcommand};

pub use tidemark_cli::error::UsageError;

/// Streaming summaries that forget: windowed sketches whose every answer carries its error
/// bar.
#[derive(Parser, Debug)]
#[command(
    name = "tidemark",
    version,
    about,
    after_help = "The plates behind ACCURACY.md and the benchmark report: `tidemark-lab` \
                  (crates/tidemark-lab).",
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Count the ones in a sliding window (exponential histogram).
    Count(cmd::count::Args),
    /// Count distinct lines (HyperLogLog), or merge saved sketches.
    Distinct(cmd::distinct::Args),
    /// Run a demonstration on a generated stream.
    Demo(cmd::demo::Args),
    /// Item frequencies by Count-Min: points, heavy hitters, top-k, ranges, quantiles, joins.
    Freq(cmd::freq::Args),
    /// Quantiles within a relative error (DDSketch), over numbers or a window; save, merge.
    Quantile(cmd::quantile::Args),
    /// Build, add to, query and describe resizable quotient filters ("seen before?").
    Filter(cmd::filter::Args),
    /// Run the keyed event-time pipeline of a config over files or stdin, into a store.
    Run(cmd::run::Args),
    /// Window estimates with error bars from a store's sketches.
    Query(cmd::query::Args),
    /// Serve a store over HTTP: a JSON API, Prometheus /metrics with bounds, a live dashboard.
    Serve(cmd::serve::Args),
    /// Verify a store: its pages, its metadata and every stored sketch.
    Check(cmd::check::Args),
    /// Print every pipeline config key with its default and domain, or --check a config.
    Config(cmd::config::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Count(args) => cmd::count::run(args),
        Command::Distinct(args) => cmd::distinct::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Freq(args) => cmd::freq::run(args),
        Command::Quantile(args) => cmd::quantile::run(args),
        Command::Filter(args) => cmd::filter::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Query(args) => cmd::query::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Check(args) => cmd::check::run(args),
        Command::Config(args) => cmd::config::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => tidemark_cli::error::report("tidemark", &err),
    }
}
