//! [`DistinctSketch`]: a HyperLogLog or an ExaLogLog, chosen at run time.
//!
//! Callers that let their users pick the sketch (a config key, a command-line flag) hold one
//! of these instead of matching on the kind at every call. Both kinds insert the same 64-bit
//! item hashes; they never merge with each other (their registers mean different things).
//!
//! ```
//! use tidemark::cardinality::{DistinctSketch, ExaLogLog, Hll};
//!
//! let mut a = DistinctSketch::ExaLogLog(ExaLogLog::new(8).unwrap());
//! for i in 0..1_000u64 {
//!     a.insert_u64(i);
//! }
//! let b = DistinctSketch::from_bytes(&a.to_bytes()).unwrap();
//! assert_eq!(b.estimate().value, a.estimate().value);
//! assert!(a.merge(&DistinctSketch::Hll(Hll::new(8).unwrap())).is_err());
//! ```

use super::{ExaLogLog, Hll, Representation};
use crate::codec::{self, Family};
use crate::error::{DecodeError, MergeError, ParamError};
use crate::estimate::Estimate;
use crate::hash::ItemHasher;

/// A HyperLogLog or an ExaLogLog.
#[derive(Clone, Debug, PartialEq)]
pub enum DistinctSketch {
    /// A HyperLogLog.
    Hll(Hll),
    /// An ExaLogLog.
    ExaLogLog(ExaLogLog),
}

impl DistinctSketch {
    /// `hyperloglog` or `exaloglog`.
    pub fn kind(&self) -> &'static str {
        match self {
            DistinctSketch::Hll(_) => "hyperloglog",
            DistinctSketch::ExaLogLog(_) => "exaloglog",
        }
    }

    /// Inserts an item's bytes.
    pub fn insert(&mut self, item: &[u8]) {
        match self {
            DistinctSketch::Hll(h) => h.insert(item),
            DistinctSketch::ExaLogLog(e) => e.insert(item),
        }
    }

    /// Inserts a `u64` item (hashed as its 8 little-endian bytes).
    pub fn insert_u64(&mut self, item: u64) {
        match self {
            DistinctSketch::Hll(h) => h.insert_u64(item),
            DistinctSketch::ExaLogLog(e) => e.insert_u64(item),
        }
    }

    /// Inserts an item by its hash.
    #[inline]
    pub fn insert_hash(&mut self, hash: u64) {
        match self {
            DistinctSketch::Hll(h) => h.insert_hash(hash),
            DistinctSketch::ExaLogLog(e) => e.insert_hash(hash),
        }
    }

    /// Whether inserting `hash` would change the sketch (read-only; see
    /// [`Hll::would_change`]).
    #[inline]
    pub fn would_change(&self, hash: u64) -> bool {
        match self {
            DistinctSketch::Hll(h) => h.would_change(hash),
            DistinctSketch::ExaLogLog(e) => e.would_change(hash),
        }
    }

    /// The precision `p`.
    pub fn precision(&self) -> u8 {
        match self {
            DistinctSketch::Hll(h) => h.precision(),
            DistinctSketch::ExaLogLog(e) => e.precision(),
        }
    }

    /// The hash.
    pub fn hasher(&self) -> ItemHasher {
        match self {
            DistinctSketch::Hll(h) => h.hasher(),
            DistinctSketch::ExaLogLog(e) => e.hasher(),
        }
    }

    /// Merges `other` in (see [`Hll::merge`] and [`ExaLogLog::merge`]); sketches of the two
    /// kinds are refused (`field: "sketch"`, 0 for HyperLogLog and 1 for ExaLogLog).
    pub fn merge(&mut self, other: &DistinctSketch) -> Result<(), MergeError> {
        match (self, other) {
            (DistinctSketch::Hll(a), DistinctSketch::Hll(b)) => a.merge(b),
            (DistinctSketch::ExaLogLog(a), DistinctSketch::ExaLogLog(b)) => a.merge(b),
            (a, b) => Err(MergeError::Incompatible {
                field: "sketch",
                ours: a.kind_number(),
                theirs: b.kind_number(),
            }),
        }
    }

    fn kind_number(&self) -> u64 {
        matches!(self, DistinctSketch::ExaLogLog(_)) as u64
    }

    /// The same sketch answering with brackets at `confidence`.
    pub fn with_confidence(self, confidence: f64) -> Result<DistinctSketch, ParamError> {
        Ok(match self {
            DistinctSketch::Hll(h) => DistinctSketch::Hll(h.with_confidence(confidence)?),
            DistinctSketch::ExaLogLog(e) => {
                DistinctSketch::ExaLogLog(e.with_confidence(confidence)?)
            }
        })
    }

    /// The answer (each kind's own choice of estimator).
    pub fn estimate(&self) -> Estimate {
        match self {
            DistinctSketch::Hll(h) => h.estimate(),
            DistinctSketch::ExaLogLog(e) => e.estimate(),
        }
    }

    /// The current representation.
    pub fn representation(&self) -> Representation {
        match self {
            DistinctSketch::Hll(h) => h.representation(),
            DistinctSketch::ExaLogLog(e) => e.representation(),
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        match self {
            DistinctSketch::Hll(h) => h.bytes(),
            DistinctSketch::ExaLogLog(e) => e.bytes(),
        }
    }

    /// The sketch's envelope (family 16 or 19).
    pub fn to_bytes(&self) -> Vec<u8> {
        match self {
            DistinctSketch::Hll(h) => h.to_bytes(),
            DistinctSketch::ExaLogLog(e) => e.to_bytes(),
        }
    }

    /// Decodes either kind's envelope; any other family is [`DecodeError::WrongFamily`].
    pub fn from_bytes(bytes: &[u8]) -> Result<DistinctSketch, DecodeError> {
        match codec::peek_family(bytes)? {
            Family::ExaLogLog => Ok(DistinctSketch::ExaLogLog(ExaLogLog::from_bytes(bytes)?)),
            _ => Ok(DistinctSketch::Hll(Hll::from_bytes(bytes)?)),
        }
    }
}
