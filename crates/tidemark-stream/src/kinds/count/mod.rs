//! `kind = "count"`: the events of each key, exact per bucket; the live window an
//! exponential histogram over the window within relative error ε/2 (`epsilon`, default 0.1).

use tidemark::DecodeError;

use crate::error::ConfigError;
use crate::kinds::keys::KindKeys;
use crate::kinds::{Input, MetricKind, WindowModel};

mod bucket;
mod window;

pub use bucket::CountBucket;
pub use window::CountWindow;

/// A count metric's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CountParams {
    /// The window histogram's ε: relative error at most ε/2.
    pub epsilon: f64,
}

impl MetricKind for CountParams {
    type Bucket = CountBucket;
    const NAME: &'static str = "count";
    const KEYS: &'static [&'static str] = &["epsilon"];
    const INPUT: Input = Input::Events;
    /// A count bucket holds its start.
    const CLONES_EMPTY: bool = false;

    fn parse(keys: &KindKeys<'_>) -> Result<CountParams, ConfigError> {
        let epsilon = keys.number("epsilon")?.unwrap_or(0.1);
        // The exponential histogram's own rule (k = ⌈1/ε⌉ at most 10^6), asked of it here: a
        // bucket's close must not be the first to hear of it.
        if tidemark::window::ExpHistogram::ticks(1, epsilon).is_err() {
            return Err(ConfigError::invalid(
                keys.at("epsilon"),
                "a number in [0.000001, 1)",
                epsilon,
            ));
        }
        Ok(CountParams { epsilon })
    }

    /// As stores have always been fingerprinted (the `Debug` text of the kind before kinds
    /// had folders).
    fn fingerprint(&self) -> String {
        format!("Count {{ epsilon: {:?} }}", self.epsilon)
    }

    fn empty(&self, start: u64, width: u64) -> CountBucket {
        CountBucket::new(start, width)
    }

    fn decode(&self, envelope: &[u8], start: u64, width: u64) -> Result<CountBucket, DecodeError> {
        CountBucket::from_bytes(envelope, start, width)
    }

    fn decode_count(&self, start: u64, width: u64, count: u64) -> Option<CountBucket> {
        Some(CountBucket::holding(start, width, count))
    }

    fn window_model(&self) -> WindowModel {
        WindowModel::Histogram {
            epsilon: self.epsilon,
        }
    }
}
