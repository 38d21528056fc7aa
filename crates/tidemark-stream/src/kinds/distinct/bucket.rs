//! A distinct metric's bucket: a HyperLogLog (Flajolet, Fusy, Gandouet, Meunier, AofA 2007;
//! exact while small, sparse, then dense) or an ExaLogLog (Ertl, 2024; exact, then dense) of
//! the metric's precision. Merging is the register-wise union; most keys stay small.

use tidemark::cardinality::{DistinctSketch, ExaLogLog, Hll, Representation};
use tidemark::{DecodeError, Estimate, MergeError};

use super::SketchKind;
use crate::kinds::BucketSummary;

/// The distinct items of one key in one bucket: a HyperLogLog (exact while small, sparse,
/// then dense) or an ExaLogLog (exact, then dense) of the metric's precision; most keys stay
/// small.
#[derive(Clone, Debug)]
pub struct DistinctBucket {
    sketch: DistinctSketch,
}

impl DistinctBucket {
    /// An empty bucket of the metric's sketch and precision.
    ///
    /// # Panics
    /// If `p` is outside 4..=18: the pipeline passes a `Kind::Distinct` precision, which
    /// `Config::from_toml` accepts only in 4..=18 (as the count and frequency buckets trust
    /// their ε, δ and φ).
    pub(crate) fn of(kind: SketchKind, p: u8) -> DistinctBucket {
        const VALIDATED: &str = "a distinct metric's precision comes from Config::from_toml, \
                                 which refuses any outside 4..=18";
        let sketch = match kind {
            SketchKind::HyperLogLog => DistinctSketch::Hll(Hll::new(p).expect(VALIDATED)),
            SketchKind::ExaLogLog => DistinctSketch::ExaLogLog(ExaLogLog::new(p).expect(VALIDATED)),
        };
        DistinctBucket { sketch }
    }

    /// Decodes a stored bucket, refusing one of another sketch, precision or hash (a merge
    /// would silently fold it to the smaller precision).
    pub fn from_bytes(
        bytes: &[u8],
        kind: SketchKind,
        p: u8,
    ) -> Result<DistinctBucket, DecodeError> {
        let sketch = match kind {
            SketchKind::HyperLogLog => DistinctSketch::Hll(Hll::from_bytes(bytes)?),
            SketchKind::ExaLogLog => {
                let e = ExaLogLog::from_bytes(bytes)?;
                // The envelope's parameters start with t, then d.
                let wrong = if e.t() != ExaLogLog::DEFAULT_T {
                    Some(("t", 0, e.t()))
                } else if e.d() != ExaLogLog::DEFAULT_D {
                    Some(("d", 1, e.d()))
                } else {
                    None
                };
                if let Some((field, at, got)) = wrong {
                    return Err(DecodeError::Invalid {
                        field,
                        offset: tidemark::codec::HEADER_LEN + at,
                        expected: "the pipeline's ExaLogLog (t, d) = (2, 20)",
                        got: got as u64,
                    });
                }
                DistinctSketch::ExaLogLog(e)
            }
        };
        if sketch.precision() != p {
            return Err(DecodeError::Invalid {
                field: "precision",
                offset: 0,
                expected: "the metric's precision",
                got: sketch.precision() as u64,
            });
        }
        if sketch.hasher() != tidemark::ItemHasher::default() {
            return Err(DecodeError::Invalid {
                field: "hash",
                offset: 7,
                expected: "tidemark's native hash (xxh3, default seed)",
                got: sketch.hasher().seed(),
            });
        }
        Ok(DistinctBucket { sketch })
    }

    /// The sketch.
    pub fn sketch(&self) -> &DistinctSketch {
        &self.sketch
    }

    /// Whether the sketch still counts exactly.
    pub fn is_exact(&self) -> bool {
        self.sketch.representation() == Representation::Exact
    }
}

impl BucketSummary for DistinctBucket {
    #[inline]
    fn add(&mut self, item: u64, _bytes: &[u8]) {
        self.sketch.insert_hash(item);
    }

    /// Merges a bucket of the same sketch and precision (a merge across precisions would fold
    /// silently; decoding already refuses another ExaLogLog `t` or `d`).
    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        let (ours, theirs) = (self.sketch.precision(), other.sketch.precision());
        if ours != theirs {
            return Err(MergeError::Incompatible {
                field: "precision",
                ours: ours as u64,
                theirs: theirs as u64,
            });
        }
        self.sketch.merge(&other.sketch)
    }

    fn to_bytes(&self) -> Vec<u8> {
        self.sketch.to_bytes()
    }

    fn estimate(&self) -> Estimate {
        self.sketch.estimate()
    }

    #[inline]
    fn would_change(&self, item: u64) -> bool {
        self.sketch.would_change(item)
    }

    fn heap_bytes(&self) -> usize {
        self.sketch.bytes()
            - match self.sketch {
                DistinctSketch::Hll(_) => std::mem::size_of::<Hll>(),
                DistinctSketch::ExaLogLog(_) => std::mem::size_of::<ExaLogLog>(),
            }
    }

    /// Only while exact: an estimate has no hard bound.
    fn upper(&self) -> f64 {
        let e = self.sketch.estimate();
        if e.low == e.high {
            e.high
        } else {
            f64::INFINITY
        }
    }
}
