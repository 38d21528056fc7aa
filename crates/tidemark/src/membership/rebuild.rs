//! Rebuild: a new table with a fingerprint chosen for the size reached, fed from the keys
//! the caller reads back from its store.

use core::fmt;

use super::quotient::{Exhausted, QuotientFilter};
use crate::error::ParamError;

/// A rebuilt filter and what it cost.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Rebuilt {
    /// The new filter.
    pub filter: QuotientFilter,
    /// Keys read back from the caller's iterator.
    pub keys_reread: u64,
}

/// Why a rebuild failed.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RebuildError {
    /// The new filter's parameters are out of range.
    Param(ParamError),
    /// The keys supplied outgrew even the new filter (its forecast was the old filter's
    /// key count; give it a reserve).
    Exhausted {
        /// Keys read back before the refusal.
        keys_reread: u64,
        /// The refusal.
        source: Exhausted,
    },
}

impl fmt::Display for RebuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RebuildError::Param(e) => write!(f, "cannot rebuild: {e}"),
            RebuildError::Exhausted {
                keys_reread,
                source,
            } => write!(
                f,
                "rebuild failed after {keys_reread} keys re-read: {source}"
            ),
        }
    }
}

impl std::error::Error for RebuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RebuildError::Param(e) => Some(e),
            RebuildError::Exhausted { source, .. } => Some(source),
        }
    }
}

impl QuotientFilter {
    /// Builds a new filter for the size this one has reached — a forecast of
    /// `max(len, 1)` keys at rate `fpr`, with `reserve` bits for further growth — and feeds
    /// it every key from `keys` (the caller's store: a filter does not keep its keys).
    ///
    /// ```
    /// use tidemark::membership::QuotientFilter;
    ///
    /// let keys: Vec<[u8; 8]> = (0..3_000u64).map(|i| i.to_le_bytes()).collect();
    /// let mut small = QuotientFilter::new(10, 0.01).unwrap();
    /// let err = keys.iter().try_for_each(|k| small.insert(k)).unwrap_err();
    /// let held = err.keys as usize;
    /// let r = small.rebuild(keys.iter().take(held), 0.01, 4).unwrap();
    /// assert_eq!(r.keys_reread, held as u64);
    /// assert!(r.filter.fingerprint_bits() > small.fingerprint_bits());
    /// assert!(keys[..held].iter().all(|k| r.filter.contains(k)));
    /// ```
    pub fn rebuild<I, K>(&self, keys: I, fpr: f64, reserve: u32) -> Result<Rebuilt, RebuildError>
    where
        I: IntoIterator<Item = K>,
        K: AsRef<[u8]>,
    {
        let mut filter = QuotientFilter::with_reserve(self.len().max(1), fpr, reserve)
            .map_err(RebuildError::Param)?
            .with_hasher(self.hasher);
        let mut keys_reread = 0u64;
        for k in keys {
            keys_reread += 1;
            filter
                .insert(k.as_ref())
                .map_err(|source| RebuildError::Exhausted {
                    keys_reread,
                    source,
                })?;
        }
        Ok(Rebuilt {
            filter,
            keys_reread,
        })
    }
}
