//! One module per subcommand.

pub mod bench_report;
pub mod reproduce;
