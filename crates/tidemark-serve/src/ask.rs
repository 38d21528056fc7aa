//! A window question: the metric a stored name denotes, and a request's `metric`, `window`,
//! `at`, `quantile` and `items`, read and bounded, asked of the stream crate's window query
//! ([`tidemark_stream::query::window_asking`], the function behind `tidemark query`).

use tidemark_stream::config::Config;
use tidemark_stream::query::{self, Answer, Ask, QueryError};
use tidemark_stream::store::Store;
use tidemark_stream::time::parse_duration;

use crate::error::ApiError;
use crate::params::Params;

/// The most quantiles one request asks.
pub const MAX_QUANTILES: usize = 16;

/// A stored metric (or its rollup) as a window query sees it.
pub struct MetricRef {
    /// The stored name (`fanout`, `fanout@1h`).
    pub name: String,
    /// The kind's name.
    pub kind: &'static str,
    /// Bucket width, ms.
    pub width: u64,
    /// Retention, ms.
    pub retention: u64,
    /// The default window, ms.
    pub window: u64,
    /// The field of its rows' labelled answers (`item`, `quantile`).
    pub part: Option<&'static str>,
}

/// The metric of a stored name (a metric's or its rollup's).
pub fn metric_ref(config: &Config, name: &str) -> Option<MetricRef> {
    config.metrics.iter().find_map(|m| {
        let r = |name: String, width: u64, retention: u64, window: u64| MetricRef {
            name,
            kind: m.kind.name(),
            width,
            retention,
            window,
            part: m.kind.part(),
        };
        if m.name == name {
            Some(r(m.name.clone(), m.bucket, m.retention, m.window))
        } else {
            match (m.rollup, m.rollup_name()) {
                (Some(w), Some(n)) if n == name => Some(r(n, w, m.rollup_retention, w)),
                _ => None,
            }
        }
    })
}

/// Each metric's stored names: its own, and its rollup's.
pub fn stored_tables(config: &Config) -> Vec<Vec<String>> {
    config
        .metrics
        .iter()
        .map(|m| {
            std::iter::once(m.name.clone())
                .chain(m.rollup_name())
                .collect()
        })
        .collect()
}

/// A window question's parameters, read and bounded.
pub struct WindowAsk {
    /// The metric.
    pub metric: MetricRef,
    /// The window, ms.
    pub window: u64,
    /// The window's end, ms (`None`: the newest).
    pub at: Option<u64>,
    /// Quantiles asked (empty: the metric's).
    pub quantiles: Vec<f64>,
    /// Items per frequency row.
    pub items: Option<usize>,
}

impl WindowAsk {
    /// Reads `metric`, `window`, `at`, `quantile` and `items`, and bounds them.
    pub fn read(p: &Params, config: &Config) -> Result<WindowAsk, ApiError> {
        let name = p.required("metric")?;
        let metric = metric_ref(config, name).ok_or_else(|| {
            let have: Vec<String> = stored_tables(config).into_iter().flatten().collect();
            ApiError::no_metric(format!(
                "no metric {name:?} in this store (it has {})",
                have.join(", ")
            ))
        })?;
        let window = match p.one("window")? {
            None => metric.window,
            Some(t) => parse_duration(t).filter(|&w| w > 0).ok_or_else(|| {
                ApiError::bad(
                    "window",
                    format!("expected a duration like 5m or 1h, got {t:?}"),
                )
            })?,
        };
        if window > metric.retention {
            return Err(ApiError::bad(
                "window",
                format!(
                    "{} is longer than {}'s retention ({})",
                    tidemark_stream::time::format_duration(window),
                    metric.name,
                    tidemark_stream::time::format_duration(metric.retention)
                ),
            ));
        }
        let mut quantiles = Vec::new();
        for (_, v) in p.pairs.iter().filter(|(n, _)| n == "quantile") {
            for q in v.split(',') {
                let x = q
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| *x > 0.0 && *x <= 1.0)
                    .ok_or_else(|| {
                        ApiError::bad(
                            "quantile",
                            format!("expected a quantile in (0, 1] (0.99 is the p99), got {q:?}"),
                        )
                    })?;
                quantiles.push(x);
            }
        }
        if quantiles.len() > MAX_QUANTILES {
            return Err(ApiError::bad(
                "quantile",
                format!("at most {MAX_QUANTILES} quantiles, got {}", quantiles.len()),
            ));
        }
        if !quantiles.is_empty() && metric.part != Some("quantile") {
            return Err(ApiError::bad(
                "quantile",
                format!(
                    "only for a quantile metric; {} is a {} metric",
                    metric.name, metric.kind
                ),
            ));
        }
        let items = match p.one("items")? {
            None => None,
            Some(_) if metric.part != Some("item") => {
                return Err(ApiError::bad(
                    "items",
                    format!(
                        "only for a frequency metric; {} is a {} metric",
                        metric.name, metric.kind
                    ),
                ))
            }
            Some(_) => Some(p.count("items", 1)? as usize),
        };
        Ok(WindowAsk {
            window,
            at: p.time("at")?,
            quantiles,
            items,
            metric,
        })
    }

    /// The stream crate's window answer, its errors as the API's.
    pub fn run(
        &self,
        store: &dyn Store,
        key: Option<&[u8]>,
        top: Option<usize>,
        at: Option<u64>,
    ) -> Result<Answer, ApiError> {
        let ask = Ask {
            quantiles: (!self.quantiles.is_empty()).then_some(&self.quantiles[..]),
        };
        query::window_asking(store, &self.metric.name, self.window, at, key, top, &ask).map_err(
            |e| match e {
                QueryError::NoMetric { .. } => ApiError::no_metric(e.to_string()),
                QueryError::BadWindow { .. } => ApiError::bad("window", e.to_string()),
                QueryError::BeforeRetention { .. } if at.is_some() => {
                    ApiError::bad("at", e.to_string())
                }
                QueryError::BeforeRetention { .. } => ApiError::bad("window", e.to_string()),
                QueryError::Empty | QueryError::Store(_) | QueryError::Corrupt { .. } => {
                    ApiError::unavailable(format!("the store cannot be read: {e}"))
                }
                e => ApiError::status(500, e.to_string()),
            },
        )
    }
}
