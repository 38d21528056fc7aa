//! A quantile metric's bucket: a DDSketch (Masson, Rim, Lee, PVLDB 2019) of the key's values
//! in the bucket. Merging adds bin counts, exactly, in any order; so does a window of
//! buckets. Every answer is within α of the true value of its rank (unless the sketch's bin
//! limit collapsed that rank's bin, which the estimate's method says), with the bin's bounds
//! as a guaranteed bracket.

use tidemark::quantile::{DdSketch, QuantileError};
use tidemark::{DecodeError, Estimate, MergeError};

use crate::kinds::BucketSummary;

/// The values of one key in one bucket (or a window of buckets).
#[derive(Clone, Debug)]
pub struct QuantileBucket {
    /// Boxed: a summary is held per key and bucket, and most kinds' are smaller.
    sketch: Box<DdSketch>,
}

impl QuantileBucket {
    /// An empty bucket of the metric's mapping and bin limit.
    pub fn new(sketch: DdSketch) -> QuantileBucket {
        QuantileBucket {
            sketch: Box::new(sketch),
        }
    }

    /// Decodes a stored bucket, refusing one of another mapping or bin limit (its bins would
    /// mean other intervals, or collapse otherwise).
    pub fn from_bytes(bytes: &[u8], like: &DdSketch) -> Result<QuantileBucket, DecodeError> {
        let sketch = DdSketch::from_bytes(bytes)?;
        if sketch.mapping() != like.mapping() {
            return Err(DecodeError::Invalid {
                field: "quantile mapping",
                offset: tidemark::codec::HEADER_LEN,
                expected: "the metric's alpha or schema",
                got: sketch.alpha().to_bits(),
            });
        }
        if sketch.bin_limit() != like.bin_limit() {
            return Err(DecodeError::Invalid {
                field: "bin limit",
                offset: tidemark::codec::HEADER_LEN,
                expected: "the metric's bin_limit",
                got: sketch.bin_limit(),
            });
        }
        Ok(QuantileBucket::new(sketch))
    }

    /// The sketch.
    pub fn sketch(&self) -> &DdSketch {
        &self.sketch
    }

    /// The value at quantile `q` (in `[0, 1]`), or `None` for an empty bucket.
    pub fn quantile(&self, q: f64) -> Option<Estimate> {
        self.sketch.quantile(q).ok().map(|a| a.estimate)
    }
}

/// A merge the sketch refused, as the pipeline's merge error.
fn merge_error(e: QuantileError, ours: &DdSketch, theirs: &DdSketch) -> MergeError {
    match e {
        QuantileError::Incompatible(e) => e,
        // Only a count past 2^63 − 1 is left.
        _ => MergeError::Incompatible {
            field: "count (at most 2^63 - 1 values)",
            ours: ours.count(),
            theirs: theirs.count(),
        },
    }
}

impl BucketSummary for QuantileBucket {
    /// Adds the value whose bits `item` is (the record reader passes only finite values; a
    /// count past 2^63 − 1 values is refused by the sketch and cannot be reached).
    #[inline]
    fn add(&mut self, item: u64, _bytes: &[u8]) {
        let _ = self.sketch.insert(f64::from_bits(item));
    }

    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        self.sketch
            .merge(&other.sketch)
            .map_err(|e| merge_error(e, &self.sketch, &other.sketch))
    }

    fn to_bytes(&self) -> Vec<u8> {
        self.sketch.to_bytes()
    }

    /// The median (a metric's rows and rules ask for their own quantiles); exactly 0 when
    /// empty.
    fn estimate(&self) -> Estimate {
        self.quantile(0.5).unwrap_or(Estimate::exact(0.0))
    }

    fn heap_bytes(&self) -> usize {
        self.sketch.bytes()
    }

    /// None: a quantile is not bounded by a count.
    fn upper(&self) -> f64 {
        f64::INFINITY
    }

    fn events(&self) -> Option<u64> {
        Some(self.sketch.count())
    }
}
