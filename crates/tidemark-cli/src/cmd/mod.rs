//! One module per subcommand.

pub mod count;
pub mod demo;
pub mod filter;
pub mod reproduce;
