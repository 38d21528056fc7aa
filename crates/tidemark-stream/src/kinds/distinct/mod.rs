//! `kind = "distinct"`: the distinct items of each key, a HyperLogLog (`sketch =
//! "hyperloglog"`, the default) or an ExaLogLog (`"exaloglog"`) of precision `p` per bucket
//! (`precision`, 4..=18; default 12, or 9 for ExaLogLog). The window's standard error is the
//! sketch's: `1.04/√(2^p)` for HyperLogLog, `0.362/√(2^p)` for ExaLogLog's maximum likelihood.

use tidemark::DecodeError;

use crate::error::ConfigError;
use crate::kinds::keys::KindKeys;
use crate::kinds::{Input, MetricKind};

mod bucket;

pub use bucket::DistinctBucket;

/// The sketch a distinct metric keeps per key and bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SketchKind {
    /// HyperLogLog (the default; interchangeable with Redis): standard error `1.04/√(2^p)`.
    HyperLogLog,
    /// ExaLogLog `(t, d) = (2, 20)`: standard error `0.362/√(2^p)` (ML) in 28 bits a
    /// register, about 43% fewer bytes than HyperLogLog at equal error.
    ExaLogLog,
}

impl SketchKind {
    /// `hyperloglog` or `exaloglog`, as the config spells it.
    pub fn name(self) -> &'static str {
        match self {
            SketchKind::HyperLogLog => "hyperloglog",
            SketchKind::ExaLogLog => "exaloglog",
        }
    }

    /// The precision a metric gets when it names none: 12 for HyperLogLog, 9 for ExaLogLog
    /// (the same error, 1.6%, in 1,792 bytes of registers instead of 3,072).
    pub fn default_precision(self) -> u8 {
        match self {
            SketchKind::HyperLogLog => 12,
            SketchKind::ExaLogLog => 9,
        }
    }

    /// The relative standard error at precision `p` of the estimate a window answers with
    /// (a merge: Ertl's estimator, or ExaLogLog's maximum likelihood).
    pub fn rse(self, p: u8) -> f64 {
        let m = ((1u64 << p) as f64).sqrt();
        match self {
            // 1.04, as alert limits have always used (Ertl's constant is 1.0390).
            SketchKind::HyperLogLog => 1.04 / m,
            SketchKind::ExaLogLog => {
                tidemark::cardinality::exaloglog::estimator::ml_rse_constant(
                    tidemark::cardinality::ExaLogLog::DEFAULT_T,
                    tidemark::cardinality::ExaLogLog::DEFAULT_D,
                ) / m
            }
        }
    }
}

/// A distinct metric's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DistinctParams {
    /// Precision: `2^p` registers.
    pub precision: u8,
    /// Which sketch.
    pub sketch: SketchKind,
}

impl MetricKind for DistinctParams {
    type Bucket = DistinctBucket;
    const NAME: &'static str = "distinct";
    const KEYS: &'static [&'static str] = &["precision", "sketch"];
    const INPUT: Input = Input::Items { named: false };
    /// Registers take maxima: however a window's buckets are grouped, its merge is the same.
    const REGROUPS: bool = true;
    /// A merge of more buckets has no register smaller than a window of fewer.
    const MONOTONE: bool = true;

    fn parse(keys: &KindKeys<'_>) -> Result<DistinctParams, ConfigError> {
        let sketch = match keys.text("sketch")? {
            None | Some("hyperloglog") => SketchKind::HyperLogLog,
            Some("exaloglog") => SketchKind::ExaLogLog,
            Some(other) => {
                return Err(ConfigError::invalid(
                    keys.at("sketch"),
                    "\"hyperloglog\" (the default) or \"exaloglog\"",
                    format!("{other:?}"),
                ))
            }
        };
        let p = keys
            .integer("precision")?
            .unwrap_or(sketch.default_precision() as i64);
        if !(4..=18).contains(&p) {
            return Err(ConfigError::invalid(
                keys.at("precision"),
                "an integer in 4..=18",
                p,
            ));
        }
        Ok(DistinctParams {
            precision: p as u8,
            sketch,
        })
    }

    /// As stores have always been fingerprinted: the text from before distinct metrics had a
    /// choice of sketch, so that stores written then still match; ExaLogLog adds its sketch.
    fn fingerprint(&self) -> String {
        match self.sketch {
            SketchKind::HyperLogLog => format!("Distinct {{ precision: {} }}", self.precision),
            SketchKind::ExaLogLog => format!(
                "Distinct {{ precision: {}, sketch: ExaLogLog }}",
                self.precision
            ),
        }
    }

    fn empty(&self, _start: u64, _width: u64) -> DistinctBucket {
        DistinctBucket::of(self.sketch, self.precision)
    }

    fn decode(
        &self,
        envelope: &[u8],
        _start: u64,
        _width: u64,
    ) -> Result<DistinctBucket, DecodeError> {
        DistinctBucket::from_bytes(envelope, self.sketch, self.precision)
    }

    fn sigma_at(&self, x: f64) -> f64 {
        x.abs() * self.sketch.rse(self.precision)
    }
}
