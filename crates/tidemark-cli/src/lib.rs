//! What the `tidemark` binary and the lab's `tidemark-lab` share: the one output schema's
//! printer (tables, JSON lines; docs/output.md) and the error convention (exit 2 for bad input
//! naming what was wrong, 1 for the rest, a closed pipe ending quietly).

pub mod error;
pub mod output;
