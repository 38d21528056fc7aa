//! One module per subcommand.

pub mod count;
pub mod demo;
pub mod query;
pub mod reproduce;
pub mod run;
