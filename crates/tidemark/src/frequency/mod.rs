//! Frequencies: the Count-Min sketch (Cormode and Muthukrishnan 2005) and everything the
//! paper builds on it — point queries, inner products (join sizes), range sums, quantiles and
//! heavy hitters — each answer with the paper's bound attached.
//!
//! References: G. Cormode, S. Muthukrishnan, *An Improved Data Stream Summary: The Count-Min
//! Sketch and its Applications*, Journal of Algorithms 55(1), 2005.
//!
//! # The problem
//!
//! A vector `a` of dimension `n` starts at zero; a stream of updates `(i, c)` adds `c` to
//! `a_i`. The paper's three update models, chosen at construction ([`Model`]):
//!
//! - **cash register**: `c > 0` always (a negative update is an error here);
//! - **non-negative turnstile**: `c` may be negative, but no `a_i` ever goes below zero (the
//!   caller's promise; tidemark refuses an update that would take a counter below zero, which
//!   proves the promise broken);
//! - **general turnstile**: anything goes, `a_i` may be negative.
//!
//! # The sketch
//!
//! A `d × w` matrix of counters, `w = ⌈e/ε⌉`, `d = ⌈ln(1/δ)⌉`, and `d` functions `h_j`. An
//! update `(i, c)` adds `c` to `count[j][h_j(i)]` in every row: `d` counters touched, whatever
//! the matrix's size. The theorems need each `h_j` pairwise independent and the rows drawn
//! independently. Two families ([`RowFamily`]), both applied to `x`, the item's 64-bit hash:
//! - multiply-shift (new sketches): the top bits of `(a_j | 1)·x mod 2^64`, one multiplication
//!   a row. Multiplying by an odd constant is a bijection, so for a uniform hash each column is
//!   uniform and two items' columns are independent as their hashes are; the rows are different
//!   views of one hash, whose independence `tests/frequency_accuracy.rs` measures;
//! - Dietzfelbinger's multiply-add-shift on the hash's two 32-bit halves (strongly universal,
//!   hence pairwise independent on any key, proof at [`crate::hash::PairwiseHash`]): dyadic
//!   layers, whose keys are integers rather than hashes, item counts, and sketches written
//!   before the multiply-shift rows.
//!
//! The coefficients derive from the hasher's seed, so a sketch stores only the seed, and
//! sketches of different hashers, seeds, widths, depths or row families refuse to merge.
//!
//! # Point queries (Theorems 1 and 2)
//!
//! Each counter holds `a_i` plus the items that collide with `i` in that row. For
//! non-negative streams the collisions only add, so the minimum over rows never
//! under-counts; a collision has probability at most `1/w = ε/e`, so a row's excess has
//! expectation at most `ε‖a‖₁/e` and, by Markov, passes `ε‖a‖₁` with probability below
//! `1/e`; all `d` rows fail with probability below `e^−d ≤ δ`. Hence
//!
//! ```text
//! a_i ≤ â_i                      always
//! â_i ≤ a_i + ε‖a‖₁              with probability ≥ 1 − δ
//! ```
//!
//! and the [`Estimate`](crate::Estimate) is `[max(0, â_i − ε‖a‖₁), â_i]` with confidence
//! `1 − δ`. In the general turnstile the median over rows is within `±3ε‖a‖₁` with
//! probability `1 − δ^(1/4)`. tidemark reports the ε and `δ = e^−d` of the actual
//! dimensions: `ε = e·⌈2^32/w⌉/2^32`, the row functions' exact collision bound times `e`
//! (`e/w` for a power-of-two `w`, otherwise within `1 + w/2^32` of it), and in the general turnstile uses `Σ|c|`,
//! an upper bound of `‖a‖₁`, since the sketch cannot know `‖a‖₁` itself.
//!
//! Conservative update ([`CountMin::conservative`]) is offered for the cash register; it is
//! *not* in the paper (Estan and Varghese 2002) and keeps Theorem 1's guarantees.
//!
//! # Inner products (Theorem 3)
//!
//! Two sketches with the same functions: in each row, the dot product of the rows; the
//! minimum over rows never under-counts `a·b` and is within `ε‖a‖₁‖b‖₁` with probability
//! `1 − δ` ([`CountMin::inner_product`]). With `a_i`, `b_i` the tuples of two relations
//! holding value `i`, that is the size of their equi-join.
//!
//! # Ranges, quantiles, heavy hitters (Theorems 4 and 5, Section 5)
//!
//! Over an integer universe `[0, 2^b)`, [`DyadicCountMin`] sketches each dyadic layer (the
//! intervals of length `2^l`); a range is the union of at most `2b` dyadic intervals, each a
//! point query, so it errs by at most `2b·ε‖a‖₁` with probability `1 − δ`. φ-quantiles are a
//! binary search on prefix sums (one descent of the layers). Heavy hitters: in the cash
//! register, [`HeavyHitters`] keeps the candidates whose estimate reached `φ‖a‖₁`; in the
//! non-negative turnstile, [`DyadicCountMin::heavy_hitters`] descends the layers, splitting
//! only intervals whose count reaches `φ‖a‖₁`. Either way every item with `a_i ≥ φ‖a‖₁` is
//! reported, and an item below `(φ − ε)‖a‖₁` only with probability δ.
//!
//! # Worked example
//!
//! ```
//! use tidemark::frequency::{CountMin, Model};
//! use tidemark::Bracket;
//!
//! // ε = 0.01, δ = 0.01: w = ⌈e/0.01⌉ = 272, d = ⌈ln 100⌉ = 5.
//! let mut cm = CountMin::new(0.01, 0.01, Model::CashRegister).unwrap();
//! for i in 0..10_000u64 {
//!     cm.update(format!("user{}", i % 100).as_bytes(), 1).unwrap();
//! }
//! cm.update(b"alice", 500).unwrap();
//! let e = cm.point(b"alice");
//! // Never below the truth, and within ε‖a‖₁ = (e/272)·10,500 ≈ 105 of it w.p. 1 − e^−5.
//! assert!(e.value >= 500.0 && e.high == e.value);
//! assert!(e.low <= 500.0 && e.value - e.low <= 105.0);
//! assert_eq!(e.bracket, Bracket::Probabilistic { confidence: 1.0 - (-5.0f64).exp() });
//!
//! // A window is the total minus what expired.
//! let mut expired = CountMin::new(0.01, 0.01, Model::CashRegister).unwrap();
//! expired.update(b"alice", 200).unwrap();
//! cm.subtract(&expired).unwrap();
//! assert!(cm.point(b"alice").value >= 300.0);
//! ```

mod count_min;
mod dyadic;
mod encoding;
mod heavy;
mod item_counts;
mod table;

pub use count_min::CountMin;
pub use dyadic::DyadicCountMin;
pub use encoding::AnyCountMin;
pub use heavy::{HeavyHitters, TopK};
pub use item_counts::ItemCounts;
pub use table::RowFamily;

use core::fmt;

use crate::error::{MergeError, ParamError};

/// The update model, fixed at construction. The discriminant is the stored byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Model {
    /// Only positive updates.
    CashRegister = 0,
    /// Negative updates allowed, no frequency below zero.
    NonNegativeTurnstile = 1,
    /// Any update; frequencies may be negative.
    GeneralTurnstile = 2,
}

impl Model {
    /// The model of a stored byte.
    pub fn from_byte(b: u8) -> Option<Model> {
        match b {
            0 => Some(Model::CashRegister),
            1 => Some(Model::NonNegativeTurnstile),
            2 => Some(Model::GeneralTurnstile),
            _ => None,
        }
    }
}

impl fmt::Display for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Model::CashRegister => "cash register",
            Model::NonNegativeTurnstile => "non-negative turnstile",
            Model::GeneralTurnstile => "general turnstile",
        })
    }
}

/// What a Count-Min operation refused, with the evidence.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum FrequencyError {
    /// A negative count in the cash-register model.
    NegativeUpdate {
        /// The count given.
        count: i64,
    },
    /// In the non-negative turnstile, an update (or subtraction) that would take a counter
    /// below zero: the stream broke its promise.
    BelowZero {
        /// The smallest counter the update touches.
        counter: i64,
        /// The count given.
        count: i64,
    },
    /// The sum of the updates' absolute values would pass `2^63 − 1`.
    Overflow {
        /// The mass so far.
        mass: u64,
        /// The count given.
        count: i64,
    },
    /// Two sketches that cannot be combined.
    Incompatible(MergeError),
    /// An operation the sketch's model or update rule does not allow.
    Unsupported {
        /// The operation.
        operation: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// An item outside the dyadic universe `[0, 2^bits)`.
    OutsideUniverse {
        /// The item.
        item: u64,
        /// The universe's bits.
        bits: u32,
    },
    /// A range whose low end is past its high end.
    EmptyRange {
        /// The low end.
        low: u64,
        /// The high end.
        high: u64,
    },
    /// A quantile of an empty stream.
    EmptyStream,
    /// A parameter outside its domain.
    Param(ParamError),
}

impl From<MergeError> for FrequencyError {
    fn from(e: MergeError) -> Self {
        FrequencyError::Incompatible(e)
    }
}

impl From<ParamError> for FrequencyError {
    fn from(e: ParamError) -> Self {
        FrequencyError::Param(e)
    }
}

impl fmt::Display for FrequencyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrequencyError::NegativeUpdate { count } => write!(
                f,
                "negative count {count} in the cash-register model (use a turnstile model)"
            ),
            FrequencyError::BelowZero { counter, count } => write!(
                f,
                "count {count} would take a counter of {counter} below zero \
                 (the non-negative turnstile forbids negative frequencies)"
            ),
            FrequencyError::Overflow { mass, count } => write!(
                f,
                "count {count} would take the sketch's mass {mass} past 2^63 − 1"
            ),
            FrequencyError::Incompatible(e) => e.fmt(f),
            FrequencyError::Unsupported { operation, reason } => {
                write!(f, "{operation} is not available: {reason}")
            }
            FrequencyError::OutsideUniverse { item, bits } => {
                write!(f, "item {item} is outside the universe [0, 2^{bits})")
            }
            FrequencyError::EmptyRange { low, high } => {
                write!(f, "empty range: low end {low} is past high end {high}")
            }
            FrequencyError::EmptyStream => write!(f, "the stream is empty"),
            FrequencyError::Param(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for FrequencyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FrequencyError::Incompatible(e) => Some(e),
            _ => None,
        }
    }
}
