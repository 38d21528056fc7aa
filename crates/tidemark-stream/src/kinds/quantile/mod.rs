//! `kind = "quantile"`: the distribution of a numeric field (`value = "latency_ms"`) per key,
//! a DDSketch per bucket (Masson, Rim, Lee, PVLDB 2019) whose every answer is within
//! relative error α of the true value of its rank: `alpha` (default 0.01), or `schema` for
//! bins that are a Prometheus native histogram's (OpenTelemetry's exponential histogram's)
//! of that schema (`−4..=8`; 5 is α ≈ 1.08%); at most `bin_limit` bins a sign (default
//! 4,096, at most 2^24), past which the lowest collapse and their answers say so. A row
//! answers `quantiles` (default `[0.5, 0.9, 0.99]`); an alert rule names its own
//! (`quantile = 0.99`, `above = 250`).
//!
//! The window is a ring of bucket sketches, merged exactly; the bracket is guaranteed, so
//! margins in standard errors do not apply (σ = 0): alert on `low` to fire only when the p99
//! is surely above the threshold, on `high` to never miss one.

use tidemark::quantile::{
    BinLimit, DdSketch, Mapping, DEFAULT_ALPHA, DEFAULT_BIN_LIMIT, MAX_BIN_LIMIT,
};
use tidemark::{DecodeError, Estimate};

use crate::error::ConfigError;
use crate::kinds::keys::KindKeys;
use crate::kinds::{Ask, Input, Label, MetricKind};
use crate::rule::AlertRule;

mod bucket;

pub use bucket::QuantileBucket;

/// The most quantiles a metric lists for its rows.
pub const MAX_QUANTILES: usize = 16;

/// A quantile metric's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantileParams {
    /// How values map to bins (α, or a schema).
    pub mapping: Mapping,
    /// The bins a sign's store may hold before its lowest collapse.
    pub bin_limit: u64,
    /// The same, as the config checked it.
    limit: BinLimit,
    quantiles: [f64; MAX_QUANTILES],
    count: u8,
}

impl QuantileParams {
    /// The quantiles a row answers by default, in the config's order.
    pub fn quantiles(&self) -> &[f64] {
        &self.quantiles[..self.count as usize]
    }

    fn sketch(&self) -> DdSketch {
        DdSketch::with_limit(self.mapping, self.limit)
    }
}

/// Whether `q` is a quantile a row or rule may ask for: in `(0, 1]`.
pub fn valid_quantile(q: f64) -> bool {
    q > 0.0 && q <= 1.0
}

impl MetricKind for QuantileParams {
    type Bucket = QuantileBucket;
    const NAME: &'static str = "quantile";
    const KEYS: &'static [&'static str] = &["alpha", "schema", "bin_limit", "quantiles"];
    const INPUT: Input = Input::Value;
    /// A window's quantile has no running bound: the engine's early bound counts events.
    const EARLY_ALERTS: bool = false;
    /// Bin counts add: however a window's buckets are grouped, its bins are the same (a
    /// collapse folds every bin below the union's cut into it, whichever group went first).
    const REGROUPS: bool = true;
    const PART: Option<&'static str> = Some("quantile");

    fn parse(keys: &KindKeys<'_>) -> Result<QuantileParams, ConfigError> {
        let mapping = match (keys.number("alpha")?, keys.integer("schema")?) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(
                    keys.at("schema"),
                    "alpha or schema, not both (a schema fixes its own α)",
                    "both",
                ))
            }
            (None, Some(s)) => i8::try_from(s)
                .ok()
                .and_then(|s| Mapping::schema(s).ok())
                .ok_or_else(|| {
                    ConfigError::invalid(keys.at("schema"), "an integer in -4..=8", s)
                })?,
            (alpha, None) => {
                let a = alpha.unwrap_or(DEFAULT_ALPHA);
                // The core takes α down to 1e-9; a metric's buckets at α = 0.0001 already
                // hold 10,000 bins a decade, so finer is refused here.
                if !(1e-4..1.0).contains(&a) {
                    return Err(ConfigError::invalid(
                        keys.at("alpha"),
                        "a number in [0.0001, 1)",
                        a,
                    ));
                }
                Mapping::cubic(a)
                    .map_err(|e| ConfigError::invalid(keys.at("alpha"), e.to_string(), a))?
            }
        };
        let bin_limit = keys
            .integer("bin_limit")?
            .unwrap_or(DEFAULT_BIN_LIMIT as i64);
        let limit = u64::try_from(bin_limit)
            .ok()
            .and_then(|b| BinLimit::new(b).ok())
            .ok_or_else(|| {
                ConfigError::invalid(
                    keys.at("bin_limit"),
                    format!("an integer in 1..={MAX_BIN_LIMIT}"),
                    bin_limit,
                )
            })?;
        let listed = keys
            .numbers("quantiles", MAX_QUANTILES)?
            .unwrap_or_else(|| vec![0.5, 0.9, 0.99]);
        if listed.is_empty() {
            return Err(ConfigError::invalid(
                keys.at("quantiles"),
                "at least one quantile in (0, 1]",
                "[]",
            ));
        }
        let mut quantiles = [0.0; MAX_QUANTILES];
        for (i, &q) in listed.iter().enumerate() {
            if !valid_quantile(q) {
                return Err(ConfigError::invalid(
                    keys.at(&format!("quantiles[{i}]")),
                    "a quantile in (0, 1] (0.99 is the p99)",
                    q,
                ));
            }
            quantiles[i] = q;
        }
        Ok(QuantileParams {
            mapping,
            bin_limit: limit.get(),
            limit,
            quantiles,
            count: listed.len() as u8,
        })
    }

    /// The mapping and bin limit: what the buckets hold (the quantiles a row lists do not
    /// change them, as alert rules do not).
    fn fingerprint(&self) -> String {
        format!(
            "Quantile {{ mapping: {:?}, bin_limit: {} }}",
            self.mapping.kind(),
            self.bin_limit
        )
    }

    fn check_rule(&self, rule: &AlertRule, at: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
        if rule.early {
            return Err(ConfigError::invalid(
                at("early"),
                "false for a quantile metric (a window's quantile has no running bound to \
                 alert on before its close)",
                rule.early,
            ));
        }
        match rule.quantile {
            Some(q) if valid_quantile(q) => Ok(()),
            Some(q) => Err(ConfigError::invalid(
                at("quantile"),
                "a quantile in (0, 1] (0.99 is the p99)",
                q,
            )),
            None => Err(ConfigError::invalid(
                at("quantile"),
                "the quantile the rule compares (quantile = 0.99 with above = 250: the p99 \
                 above 250)",
                "none",
            )),
        }
    }

    fn empty(&self, _start: u64, _width: u64) -> QuantileBucket {
        QuantileBucket::new(self.sketch())
    }

    fn decode(
        &self,
        envelope: &[u8],
        _start: u64,
        _width: u64,
    ) -> Result<QuantileBucket, DecodeError> {
        QuantileBucket::from_bytes(envelope, &self.sketch())
    }

    /// The rule's quantile of the window (a window a close evaluates holds a value).
    fn rule_estimate(&self, window: &QuantileBucket, rule: &AlertRule) -> Estimate {
        let q = rule.quantile.unwrap_or(1.0);
        window.quantile(q).unwrap_or(Estimate::exact(0.0))
    }

    /// The highest quantile asked: the tail a list of slow keys ranks by.
    fn rank(&self, window: &QuantileBucket, ask: &Ask<'_>) -> Estimate {
        let qs = ask.quantiles.unwrap_or(self.quantiles());
        let top = qs.iter().copied().fold(f64::NAN, f64::max);
        window.quantile(top).unwrap_or(Estimate::exact(0.0))
    }

    /// Each quantile asked, in order.
    fn parts(&self, window: &QuantileBucket, ask: &Ask<'_>) -> Vec<(Label, Estimate)> {
        ask.quantiles
            .unwrap_or(self.quantiles())
            .iter()
            .filter_map(|&q| Some((Label::Number(q), window.quantile(q)?)))
            .collect()
    }
}
