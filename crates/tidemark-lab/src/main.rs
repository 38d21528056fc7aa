//! `tidemark-lab`: the measurements behind tidemark's documents, kept out of the `tidemark`
//! binary users install. `reproduce` regenerates each structure's measured tables (the
//! plates) and draws them; `bench-report` reruns the benchmark suites and writes their ratios
//! into BENCHMARKS.md and their charts into docs/benchmarks/.
//!
//! Exit codes: 0 success; 2 bad arguments (the message names the flag or the file); 1 an
//! internal failure. Nothing panics on input.

mod chart;
mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use tidemark_cli::error::UsageError;

/// The tidemark lab: regenerate the measured tables and charts behind the documents, and the
/// benchmark report.
#[derive(Parser, Debug)]
#[command(name = "tidemark-lab", version, about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Regenerate a structure's measured tables from this implementation.
    Reproduce(cmd::reproduce::Args),
    /// Run the benchmark suites (from the repository) and write their ratios to BENCHMARKS.md.
    BenchReport(cmd::bench_report::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Reproduce(args) => cmd::reproduce::run(args),
        Command::BenchReport(args) => cmd::bench_report::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => tidemark_cli::error::report("tidemark-lab", &err),
    }
}
