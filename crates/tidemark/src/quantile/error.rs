//! [`QuantileError`]: why a quantile sketch or ring refused a value, a query or a combination.

use core::fmt;

use crate::MergeError;

/// Which part of a sketch a [`QuantileError::NotContained`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Part {
    /// The whole sketch's count.
    Count,
    /// The store of negative values (its keys are the negated keys of `|x|`).
    Negative,
    /// The zero bin.
    Zero,
    /// The store of positive values.
    Positive,
}

impl Part {
    /// A lower-case name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Part::Count => "count",
            Part::Negative => "negative store",
            Part::Zero => "zero bin",
            Part::Positive => "positive store",
        }
    }
}

/// Why a quantile sketch or ring refused a value, a query, a merge or a subtraction.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum QuantileError {
    /// A value that is NaN or infinite where a finite one is needed (inserts), or NaN (rank
    /// and CDF queries, which take ±∞).
    NotFinite {
        /// The value.
        value: f64,
    },
    /// A quantile outside `[0, 1]` (or NaN).
    Quantile {
        /// The quantile asked for.
        q: f64,
    },
    /// A query that needs at least one value, on a sketch (or window) that holds none.
    Empty,
    /// The count would pass [`MAX_COUNT`](super::MAX_COUNT).
    Overflow {
        /// The count held.
        count: u64,
        /// The count being added.
        adding: u64,
    },
    /// Two sketches of different mappings: their bins mean different intervals.
    Incompatible(MergeError),
    /// A subtraction of a sketch that is not a part of this one: a bin (or the count) of it
    /// holds more than ours. Nothing was changed.
    NotContained {
        /// Where.
        part: Part,
        /// The bin's key (0 for the count and the zero bin).
        key: i64,
        /// Our count there.
        ours: u64,
        /// Theirs.
        theirs: u64,
    },
    /// A subtraction of a sketch whose store collapsed at a higher key than ours: its
    /// collapsed bin holds values we keep in separate bins, so which to take is unknown.
    /// Nothing was changed.
    Collapsed {
        /// The store.
        part: Part,
        /// Our collapsed key, if any.
        ours: Option<i64>,
        /// Theirs.
        theirs: i64,
    },
    /// A ring's event whose bucket has already left the ring.
    TooOld {
        /// The event's bucket (tick / width).
        bucket: u64,
        /// The oldest bucket the ring still holds.
        oldest: u64,
    },
    /// A ring's window that is empty or longer than the ring.
    Window {
        /// Buckets asked for.
        window: u64,
        /// Buckets in the ring.
        buckets: u64,
    },
}

impl From<MergeError> for QuantileError {
    fn from(e: MergeError) -> Self {
        QuantileError::Incompatible(e)
    }
}

impl fmt::Display for QuantileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuantileError::NotFinite { value } => {
                write!(
                    f,
                    "value {value} refused: a sketch holds finite values only"
                )
            }
            QuantileError::Quantile { q } => write!(f, "quantile {q}: must be in [0, 1]"),
            QuantileError::Empty => f.write_str("no values: the query needs at least one"),
            QuantileError::Overflow { count, adding } => write!(
                f,
                "adding {adding} values to {count} would pass the limit of 2^63 - 1 values"
            ),
            QuantileError::Incompatible(e) => e.fmt(f),
            QuantileError::NotContained {
                part,
                key,
                ours,
                theirs,
            } => write!(
                f,
                "cannot subtract a sketch that is not a part of this one: its {} holds {theirs} \
                 at key {key}, this one {ours}",
                part.name()
            ),
            QuantileError::Collapsed { part, ours, theirs } => write!(
                f,
                "cannot subtract: its {} collapsed at key {theirs}, this one's {}",
                part.name(),
                match ours {
                    Some(k) => format!("at key {k}"),
                    None => "not at all".to_string(),
                }
            ),
            QuantileError::TooOld { bucket, oldest } => write!(
                f,
                "bucket {bucket} has left the ring (oldest held: {oldest}); refused rather than \
                 added to the current bucket"
            ),
            QuantileError::Window { window, buckets } => {
                write!(f, "window of {window} buckets: must be 1..={buckets}")
            }
        }
    }
}

impl std::error::Error for QuantileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QuantileError::Incompatible(e) => Some(e),
            _ => None,
        }
    }
}
