//! A metric's alert rules as written (`[[metric.alert]]`), validated into [`AlertRule`]s.

use serde::Deserialize;

use crate::error::ConfigError;
use crate::kinds::Kind;
use crate::rule::{AlertOn, AlertRule};

/// One `[[metric.alert]]` table as written.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAlert {
    above: f64,
    margin: Option<f64>,
    consecutive: Option<i64>,
    on: Option<String>,
    early: Option<bool>,
    quantile: Option<f64>,
}

/// Validates metric `i`'s rules against its kind.
pub(super) fn parse(
    i: usize,
    kind: &Kind,
    raw: &[RawAlert],
) -> Result<Vec<AlertRule>, ConfigError> {
    let mut alerts = Vec::with_capacity(raw.len());
    for (j, a) in raw.iter().enumerate() {
        let ak = |k: &str| format!("metric[{i}].alert[{j}].{k}");
        if !a.above.is_finite() {
            return Err(ConfigError::invalid(
                ak("above"),
                "a finite number",
                a.above,
            ));
        }
        let margin = a.margin.unwrap_or(0.0);
        if !(margin.is_finite() && margin >= 0.0) {
            return Err(ConfigError::invalid(ak("margin"), "a number ≥ 0", margin));
        }
        let consecutive = a.consecutive.unwrap_or(1);
        if !(1..=1_000_000).contains(&consecutive) {
            return Err(ConfigError::invalid(
                ak("consecutive"),
                "an integer in 1..=1000000",
                consecutive,
            ));
        }
        let on = match a.on.as_deref().unwrap_or("value") {
            "value" => AlertOn::Value,
            "high" => AlertOn::High,
            "low" => AlertOn::Low,
            other => {
                return Err(ConfigError::invalid(
                    ak("on"),
                    "\"value\", \"high\" or \"low\"",
                    format!("{other:?}"),
                ))
            }
        };
        let rule = AlertRule {
            above: a.above,
            margin,
            consecutive: consecutive as u32,
            on,
            early: a.early.unwrap_or(false),
            quantile: a.quantile,
        };
        kind.check_rule(&rule, &ak)?;
        alerts.push(rule);
    }
    Ok(alerts)
}
