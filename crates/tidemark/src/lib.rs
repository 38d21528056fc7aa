//! tidemark: streaming summaries that forget.
//!
//! Windowed, keyed sketches whose every answer carries its error bar:
//!
//! - [`window`]: the exponential histogram (DGIM) for sliding-window counts and sums, with
//!   the block-counter baseline it improves on.
//! - [`cardinality`]: HyperLogLog, exact while small, interchangeable with Redis.
//! - [`frequency`]: the Count-Min sketch.
//! - [`membership`]: resizable quotient filters.
//!
//! Every query answers with an [`Estimate`]: a point value and a bracket `[low, high]` that
//! says whether it is guaranteed or holds with a stated probability. Every summary encodes
//! into the same binary envelope ([`codec`]), which records the hash ([`hash`]) it was built
//! with so that summaries of different hashes never merge silently.
//!
//! The core never reads a clock, a file or a socket: time is a caller-supplied `u64` tick.
//!
//! ```
//! use tidemark::window::ExpHistogram;
//!
//! // The last 1,000 arrivals of a bit stream, within 5% (k = 10).
//! let mut h = ExpHistogram::arrivals(1_000, 0.1).unwrap();
//! for i in 0..10_000u32 {
//!     h.push(i % 4 == 0);
//! }
//! let e = h.estimate();
//! assert!(e.low <= 250.0 && 250.0 <= e.high);
//! assert!((e.value - 250.0).abs() <= 0.05 * 250.0);
//! ```

pub mod cardinality;
pub mod codec;
pub mod error;
pub mod estimate;
mod family;
pub mod frequency;
pub mod hash;
pub mod membership;
mod range_coder;
pub mod window;

pub use error::{DecodeError, MergeError, ParamError};
pub use estimate::{Bracket, Estimate, Method};
pub use hash::{HashId, ItemHasher};
