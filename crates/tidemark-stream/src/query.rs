//! Answers from stored sketches: a key's window, or the top keys by window estimate.
//!
//! A window `[at − W, at)` is answered by merging the key's stored buckets that start inside
//! it (`at` is rounded down to a bucket boundary): HyperLogLogs by register-wise maximum,
//! counts by adding (exact at bucket granularity), item counts by adding counters and uniting
//! the named heavy items (a frequency row's estimate is its most frequent item's count, and
//! it lists the heavy items of the window with their brackets). The config is read from the store, so a
//! query needs only the file.

use core::fmt;
use std::collections::BTreeMap;

use tidemark::Estimate;

use crate::config::{Config, ConfigError};
use crate::engine::{Engine, MetricShape, Summary};
use crate::pipeline::RunState;
use crate::store::{Store, StoreError};

/// A query that cannot be answered.
#[derive(Debug)]
#[non_exhaustive]
pub enum QueryError {
    /// The store holds no committed run.
    Empty,
    /// No metric of that name.
    NoMetric {
        /// The name asked for.
        name: String,
        /// The metrics the store has.
        have: Vec<String>,
    },
    /// The window is not a positive multiple of the metric's bucket width.
    BadWindow {
        /// The window asked for, ms.
        window: u64,
        /// The bucket width, ms.
        bucket: u64,
    },
    /// The store failed.
    Store(StoreError),
    /// The stored config or state does not parse.
    Corrupt {
        /// What failed.
        message: String,
    },
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::Empty => write!(f, "the store holds no committed run"),
            QueryError::NoMetric { name, have } => {
                write!(
                    f,
                    "no metric {name:?} in the store (it has {})",
                    have.join(", ")
                )
            }
            QueryError::BadWindow { window, bucket } => write!(
                f,
                "window {} is not a positive multiple of the bucket width {}",
                crate::time::format_duration(*window),
                crate::time::format_duration(*bucket)
            ),
            QueryError::Store(e) => e.fmt(f),
            QueryError::Corrupt { message } => write!(f, "stored state: {message}"),
        }
    }
}

impl std::error::Error for QueryError {}

/// One key's window answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The key (lossy UTF-8).
    pub key: String,
    /// The window's estimate.
    pub estimate: Estimate,
    /// Buckets merged.
    pub buckets: u64,
    /// A frequency metric's heavy items in the window (those reaching φ of the key's events;
    /// for an exact table with none, its most frequent item), largest first, with their
    /// counts; empty for other kinds, or for a sketch naming no item.
    pub items: Vec<(String, Estimate)>,
    /// A frequency metric's events of the key in the window (exact); `None` for other kinds.
    pub events: Option<u64>,
}

/// The answer to a window query.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The metric's kind (`count`, `distinct`).
    pub kind: &'static str,
    /// Window start, ms (inclusive).
    pub from: u64,
    /// Window end, ms (exclusive).
    pub to: u64,
    /// Rows: one per key, by estimate descending then key (or the one key asked for).
    pub rows: Vec<Row>,
}

/// A stored metric's config, the default query time (its watermark) and its shape.
fn open_metric(
    store: &dyn Store,
    metric: &str,
) -> Result<(Config, usize, MetricShape, u64), QueryError> {
    let meta = store
        .meta()
        .map_err(QueryError::Store)?
        .ok_or(QueryError::Empty)?;
    let config = Config::from_toml(&meta.config).map_err(|e: ConfigError| QueryError::Corrupt {
        message: e.to_string(),
    })?;
    let Some((i, shape)) = MetricShape::for_name(&config, metric) else {
        return Err(QueryError::NoMetric {
            name: metric.to_string(),
            have: config
                .metrics
                .iter()
                .flat_map(|m| std::iter::once(m.name.clone()).chain(m.rollup_name()))
                .collect(),
        });
    };
    let state = RunState::from_bytes(&meta.state).map_err(|e| QueryError::Corrupt {
        message: e.to_string(),
    })?;
    let engine = Engine::restore(&config, &state.engine, &mut |_, _, _, _| {}).map_err(|e| {
        QueryError::Corrupt {
            message: e.to_string(),
        }
    })?;
    // A rollup answers up to its last complete period.
    let closed = engine.closed_until(i).unwrap_or(0);
    let at = closed - closed % shape.width();
    Ok((config, i, shape, at))
}

/// The window of length `window` ms ending at `at` (default: the metric's watermark), for
/// one key or every key; `top` keeps the largest `top` estimates.
pub fn window(
    store: &dyn Store,
    metric: &str,
    window: u64,
    at: Option<u64>,
    key: Option<&[u8]>,
    top: Option<usize>,
) -> Result<Answer, QueryError> {
    let (config, i, shape, watermark) = open_metric(store, metric)?;
    let m = &config.metrics[i];
    let width = shape.width();
    if window == 0 || window % width != 0 {
        return Err(QueryError::BadWindow {
            window,
            bucket: width,
        });
    }
    let at = at.unwrap_or(watermark);
    let to = at - at % width;
    let from = to.saturating_sub(window);
    let mut acc: BTreeMap<Vec<u8>, (Summary, u64)> = BTreeMap::new();
    let mut err = None;
    store
        .scan(metric, from, to, &mut |k, start, bytes| {
            if key.is_some_and(|want| want != k) || err.is_some() {
                return;
            }
            match shape.decode(bytes, start) {
                Ok(s) => match acc.get_mut(k) {
                    Some((a, n)) => {
                        *n += 1;
                        if let Err(e) = a.absorb(&s) {
                            err = Some(e.to_string());
                        }
                    }
                    None => {
                        acc.insert(k.to_vec(), (s, 1));
                    }
                },
                Err(e) => err = Some(e.to_string()),
            }
        })
        .map_err(QueryError::Store)?;
    if let Some(message) = err {
        return Err(QueryError::Corrupt { message });
    }
    let mut rows: Vec<Row> = acc
        .into_iter()
        .map(|(k, (s, n))| {
            let (items, events) = match &s {
                Summary::Frequency(f) => {
                    let c = f.counts();
                    let mut heavy = c.heavy_hitters();
                    // An exact table knows its most frequent item even below φ: name it.
                    if heavy.is_empty() && c.is_exact() {
                        heavy.extend(c.heaviest());
                    }
                    let named = heavy
                        .into_iter()
                        .map(|(i, e)| (String::from_utf8_lossy(&i).into_owned(), e))
                        .collect();
                    (named, Some(c.total()))
                }
                _ => (Vec::new(), None),
            };
            Row {
                key: String::from_utf8_lossy(&k).into_owned(),
                estimate: s.estimate(),
                buckets: n,
                items,
                events,
            }
        })
        .collect();
    if let (Some(k), true) = (key, rows.is_empty()) {
        // A key with nothing in the window has an exact answer: zero.
        rows.push(Row {
            key: String::from_utf8_lossy(k).into_owned(),
            estimate: Estimate::exact(0.0),
            buckets: 0,
            items: Vec::new(),
            events: matches!(m.kind, crate::config::Kind::Frequency { .. }).then_some(0),
        });
    }
    rows.sort_by(|a, b| {
        b.estimate
            .value
            .total_cmp(&a.estimate.value)
            .then_with(|| a.key.cmp(&b.key))
    });
    if let Some(n) = top {
        rows.truncate(n);
    }
    Ok(Answer {
        kind: m.kind.name(),
        from,
        to,
        rows,
    })
}
