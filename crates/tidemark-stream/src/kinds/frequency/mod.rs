//! `kind = "frequency"`: the item counts of each key — exact while few, then Count-Min with
//! additive error `ε·N` with probability `1 − δ` (`epsilon`, `delta`, default 0.01 each), the
//! items reaching `φ·N` named (`phi`, default 0.05). A row lists the window's heavy items.

use tidemark::{DecodeError, Estimate};

use crate::error::ConfigError;
use crate::kinds::keys::KindKeys;
use crate::kinds::{Ask, Input, Label, MetricKind};

mod bucket;

pub use bucket::FrequencyBucket;

/// A frequency metric's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrequencyParams {
    /// Additive error ε·N (N the key's events in the bucket or window).
    pub epsilon: f64,
    /// Failure probability δ.
    pub delta: f64,
    /// Heavy-hitter fraction: the items kept by name are those reaching φ·N.
    pub phi: f64,
}

impl MetricKind for FrequencyParams {
    type Bucket = FrequencyBucket;
    const NAME: &'static str = "frequency";
    const KEYS: &'static [&'static str] = &["epsilon", "delta", "phi"];
    const INPUT: Input = Input::Items { named: true };
    /// A frequency window names its heavy items only when merged at a close; an item's count
    /// while the bucket is open has no bound to alert on.
    const EARLY_ALERTS: bool = false;
    const PART: Option<&'static str> = Some("item");

    fn parse(keys: &KindKeys<'_>) -> Result<FrequencyParams, ConfigError> {
        let e = keys.number("epsilon")?.unwrap_or(0.01);
        let d = keys.number("delta")?.unwrap_or(0.01);
        let phi = keys.number("phi")?.unwrap_or(0.05);
        // Also bounds the sketch: w = ⌈e/ε⌉ ≤ 2^26, d = ⌈ln 1/δ⌉ ≤ 64.
        if !(1e-6..1.0).contains(&e) {
            return Err(ConfigError::invalid(
                keys.at("epsilon"),
                "a number in [0.000001, 1)",
                e,
            ));
        }
        if !(1e-12..1.0).contains(&d) {
            return Err(ConfigError::invalid(
                keys.at("delta"),
                "a number in [1e-12, 1)",
                d,
            ));
        }
        if !(phi > e && phi <= 1.0) {
            return Err(ConfigError::invalid(
                keys.at("phi"),
                format!("a number in (epsilon = {e}, 1]: below ε the heavy items are noise"),
                phi,
            ));
        }
        Ok(FrequencyParams {
            epsilon: e,
            delta: d,
            phi,
        })
    }

    fn fingerprint(&self) -> String {
        format!(
            "Frequency {{ epsilon: {:?}, delta: {:?}, phi: {:?} }}",
            self.epsilon, self.delta, self.phi
        )
    }

    fn empty(&self, _start: u64, _width: u64) -> FrequencyBucket {
        FrequencyBucket::new(self.epsilon, self.delta, self.phi)
    }

    fn decode(
        &self,
        envelope: &[u8],
        _start: u64,
        _width: u64,
    ) -> Result<FrequencyBucket, DecodeError> {
        FrequencyBucket::from_bytes(envelope, self.epsilon, self.delta, self.phi)
    }

    /// The window's heavy items (those reaching φ of the key's events; for an exact table
    /// with none, its most frequent item, which it knows even below φ), largest first.
    fn parts(&self, window: &FrequencyBucket, _ask: &Ask<'_>) -> Vec<(Label, Estimate)> {
        let c = window.counts();
        let mut heavy = c.heavy_hitters();
        if heavy.is_empty() && c.is_exact() {
            heavy.extend(c.heaviest());
        }
        heavy
            .into_iter()
            .map(|(i, e)| (Label::Text(String::from_utf8_lossy(&i).into_owned()), e))
            .collect()
    }
}
