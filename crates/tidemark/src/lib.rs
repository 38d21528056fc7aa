//! tidemark: streaming summaries that forget.
//!
//! Windowed, keyed sketches whose every answer carries its error bar:
//!
//! - [`window`]: the exponential histogram (DGIM) for sliding-window counts and sums, with
//!   the block-counter baseline it improves on.
//! - [`cardinality`]: HyperLogLog, exact while small, interchangeable with Redis.
//! - [`frequency`]: the Count-Min sketch.
//! - [`membership`]: resizable quotient filters.
//! - [`quantile`]: DDSketch, quantiles within a relative error α, and a ring of them for
//!   windows.
//!
//! Every summary encodes into the same binary envelope ([`codec`]), which records the hash
//! ([`hash`], [`ItemHasher`]) it was built with so that summaries of different hashes never
//! merge silently. The core never reads a clock, a file or a socket: time is a
//! caller-supplied `u64` tick.
//!
//! # Answers and errors
//!
//! Every query answers with an [`Estimate`]: a point value and a bracket `[low, high]`. What
//! the bracket means differs by structure and is part of the answer, in [`Bracket`]:
//! [`Bracket::Guaranteed`] (the truth is always inside: the exponential histogram, whose
//! whole error is its oldest bucket, and any exact count) or [`Bracket::Probabilistic`] (the
//! truth is inside with the stated probability: HyperLogLog's ± z·σ, Count-Min's `1 − δ`).
//! [`Method`] says how the point value was computed, so a reader can tell an exact count
//! from an estimate and one estimator from another.
//!
//! Errors are one enum per kind of operation, each variant carrying its evidence:
//! [`ParamError`] (a constructor's parameter outside its domain), [`MergeError`] (two
//! summaries of different hashes, seeds or shapes) and [`DecodeError`] (bytes that are not a
//! valid summary: what was wrong, and at which offset). None is ever a panic: a panic in
//! tidemark means a broken internal invariant.
//!
//! ```
//! use tidemark::{Bracket, Estimate, Method};
//!
//! let e = Estimate::guaranteed(199.5, 184.0, 215.0, Method::ExpHistogram);
//! assert!(e.contains(200.0));
//! assert_eq!(e.bracket, Bracket::Guaranteed);
//! assert_eq!(Estimate::exact(7.0).width(), 0.0);
//! ```
//!
//! # Example
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
mod error;
mod estimate;
mod family;
pub mod frequency;
pub mod hash;
pub mod membership;
pub mod quantile;
mod range_coder;
pub mod window;

pub use error::{DecodeError, MergeError, ParamError};
pub use estimate::{Bracket, Estimate, Method};
pub use hash::ItemHasher;
