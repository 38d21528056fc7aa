//! One module per subcommand.

pub mod check;
pub mod config;
pub mod count;
pub mod demo;
pub mod distinct;
pub mod filter;
pub mod freq;
pub mod quantile;
pub mod query;
pub mod run;
pub mod serve;
