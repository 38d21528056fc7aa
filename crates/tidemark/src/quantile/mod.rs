//! Quantiles with relative error: DDSketch, and a ring of them for windows.
//!
//! Reference: C. Masson, J. E. Rim, H. K. Lee, *DDSketch: A Fast and Fully-Mergeable
//! Quantile Sketch with Relative-Error Guarantees*, PVLDB 12(12), 2019.
//!
//! # The rule
//!
//! Fix `α` in `(0, 1)` and `γ = (1 + α)/(1 − α)`. A value `x > 0` is counted in bin `i`
//! with `γ^(i−1) < x ≤ γ^i`; a negative value in the same bin of a mirrored store for
//! `|x|`; zero, and anything of magnitude below `2^−1022` (the subnormals), in a zero count.
//! A bin is a counter, so the sketch is the histogram of the stream over a fixed,
//! data-independent grid of bins, and:
//!
//! - the `q`-quantile — the value of nearest rank `r = ⌈q·n⌉` in sorted order
//!   ([`nearest_rank`]) — lies in the bin where the cumulative count first reaches `r`
//!   (counting the negative store from its largest magnitude down, the zero count, then the
//!   positive store up). That bin's representative `y = 2γ^i/(γ + 1)` is within `α` of
//!   every value in `(γ^(i−1), γ^i]`: `|y − x| ≤ α·|x|`. This is a **deterministic**
//!   guarantee, for every stream and every `q` (Masson et al. 2019, Proposition 3); the
//!   bracket `[γ^(i−1), γ^i]` — `[y/(1 + α), y/(1 − α)]` — clamped to the exact minimum and
//!   maximum always holds the true value ([`Bracket::Guaranteed`](crate::Bracket));
//! - **merging** adds bin counts: the merge of two sketches is exactly the sketch of the
//!   concatenated streams, in any order and tree shape ([`DdSketch::merge`]);
//! - **subtracting** a sketch of a part of the stream is exact too ([`DdSketch::subtract`]):
//!   a window is its running total minus the bucket that expired, which is how
//!   [`QuantileRing`] slides a window by one merge and one subtraction.
//!
//! Two ways to choose the bins, neither calling `ln` per value ([`Mapping`]): the
//! **cubic** mapping from `α` (the float's exponent plus a cubic in its mantissa, with `γ`
//! shrunk so that every bin's ratio is still at most `(1 + α)/(1 − α)`; about 1% more bins
//! than the exact logarithm), and Prometheus native-histogram (OpenTelemetry
//! exponential-histogram) **schemas** `s` with `γ = 2^(2^−s)`, whose bins are exactly
//! `(γ^(i−1), γ^i]` (schema 5: α ≈ 1.08%).
//!
//! # Memory: the bin limit, and what collapsing costs
//!
//! A store holds its bins densely from its lowest to its highest key: `ln(max/min)/ln γ`
//! bins, about 700 for six decades at α = 1%, at 4 bytes each. The bin limit
//! ([`DEFAULT_BIN_LIMIT`] = 4,096 a store, at most [`MAX_BIN_LIMIT`] = 2^24) bounds that:
//! when a store would pass it, its lowest bins collapse into one (Masson et al. 2019, §2.2).
//! The guarantee then no longer holds for ranks that fall in the collapsed bin, and the
//! sketch says so: such answers carry [`Method::QuantileCollapsed`](crate::Method) and the
//! bracket `[the exact minimum, that bin's upper bound]` — wider, still guaranteed. Every
//! other rank keeps its α bound. Nothing is lost silently.
//!
//! # Answers
//!
//! [`DdSketch::quantile`] (a [`QuantileEstimate`]: the [`Estimate`](crate::Estimate) and its
//! rank), [`DdSketch::rank`] and [`DdSketch::cdf`] (the count or fraction of values at most
//! a value, bracketed by the counts below and including its bin), [`DdSketch::count`],
//! [`DdSketch::sum`], [`DdSketch::min`], [`DdSketch::max`]. Ranks 1 and `n` answer with the
//! exact minimum and maximum. NaN and ±∞ are refused on insert ([`QuantileError`]), as is a
//! `q` outside `[0, 1]`; parameters out of their domain are a [`ParamError`](crate::ParamError)
//! naming the parameter.
//!
//! # Worked example
//!
//! ```
//! use tidemark::quantile::{nearest_rank, DdSketch};
//! use tidemark::Method;
//!
//! let mut a = DdSketch::new(0.01).unwrap();
//! let mut b = DdSketch::new(0.01).unwrap();
//! let mut all = Vec::new();
//! for i in 1..=10_000u32 {
//!     let latency = 1.0 + (i % 977) as f64 * 0.37; // milliseconds
//!     if i % 2 == 0 { a.insert(latency).unwrap() } else { b.insert(latency).unwrap() }
//!     all.push(latency);
//! }
//! a.merge(&b).unwrap();
//! all.sort_by(f64::total_cmp);
//!
//! let p99 = a.quantile(0.99).unwrap();
//! let truth = all[nearest_rank(0.99, 10_000) as usize - 1];
//! assert_eq!(p99.rank, 9_900);
//! assert!((p99.estimate.value - truth).abs() <= 0.01 * truth);
//! assert!(p99.estimate.contains(truth));
//! assert_eq!(p99.estimate.method, Method::QuantileBin);
//!
//! // Bad input is an error, never a panic.
//! assert!(a.insert(f64::NAN).is_err());
//! assert!(a.quantile(1.5).is_err());
//! assert!(DdSketch::new(0.0).is_err());
//! ```

mod bits;
mod encoding;
mod error;
mod few;
mod mapping;
mod ring;
mod ring_encoding;
mod sketch;
mod store;

pub use error::{Part, QuantileError};
pub use few::MAX_FEW_VALUES;
pub use mapping::{Mapping, MappingKind, MAX_SCHEMA, MIN_ALPHA, MIN_INDEXABLE, MIN_SCHEMA};
pub use ring::{QuantileRing, MAX_RING_BUCKETS};
pub use sketch::{
    nearest_rank, BinLimit, DdSketch, QuantileEstimate, DEFAULT_ALPHA, DEFAULT_BIN_LIMIT,
    MAX_BIN_LIMIT, MAX_COUNT,
};
