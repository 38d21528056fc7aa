//! The pipeline's store, read-only: what `tidemark query` answers, for notebooks.

use std::path::PathBuf;

use pyo3::exceptions::{PyFileNotFoundError, PyOSError};
use pyo3::prelude::*;

use tidemark_stream::query::{self, Ask, Label, QueryError};
use tidemark_stream::store::RedbStore;
use tidemark_stream::time::{parse_duration, parse_rfc3339, TimeFormat};

use crate::{value_error, PyEstimate};

/// A row's label: an item's name or a quantile.
#[derive(IntoPyObject)]
enum PyLabel {
    Text(String),
    Number(f64),
}

/// A row: key, estimate, buckets merged, labelled answers `[(label, Estimate)]` (heavy items,
/// quantiles), events, and whether an open bucket is in it.
type Row = (
    String,
    PyEstimate,
    u64,
    Vec<(PyLabel, PyEstimate)>,
    Option<u64>,
    bool,
);

/// An answer: kind, the field its rows' labels go under (if any), window start and end (ms),
/// and the rows.
type Answer = (String, Option<String>, u64, u64, Vec<Row>);

/// A store written by `tidemark run`, opened read-only (a running writer may hold it).
/// Use `tidemark.Store`, which wraps this with result types and `to_pandas()`.
#[pyclass(module = "tidemark", name = "_Store")]
pub struct PyStore {
    inner: RedbStore,
    path: PathBuf,
}

#[pymethods]
impl PyStore {
    #[new]
    fn new(path: PathBuf) -> PyResult<Self> {
        if !path.exists() {
            return Err(PyFileNotFoundError::new_err(format!(
                "{}: no such store",
                path.display()
            )));
        }
        let inner = RedbStore::open_existing(&path)
            .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
        Ok(PyStore { inner, path })
    }

    /// `(kind, part, from_ms, to_ms, rows)` for the window of `window_ms` ending at `at_ms`
    /// (default: the metric's watermark), for one key or every key (the best `top`); `part`
    /// names the rows' labelled answers (`item`, `quantile`), if the kind has them.
    #[pyo3(signature = (metric, window_ms, key = None, top = None, at_ms = None, quantiles = None))]
    #[allow(clippy::too_many_arguments)]
    fn query(
        &self,
        py: Python<'_>,
        metric: &str,
        window_ms: u64,
        key: Option<Vec<u8>>,
        top: Option<usize>,
        at_ms: Option<u64>,
        quantiles: Option<Vec<f64>>,
    ) -> PyResult<Answer> {
        if top == Some(0) {
            return Err(value_error("top", "expected at least 1, got 0"));
        }
        let store = &self.inner;
        let ask = Ask {
            quantiles: quantiles.as_deref(),
        };
        let answer = py
            .allow_threads(|| {
                query::window_asking(store, metric, window_ms, at_ms, key.as_deref(), top, &ask)
            })
            .map_err(|e| match e {
                QueryError::NoMetric { .. } => value_error("metric", e),
                QueryError::BadWindow { .. } => value_error("window", e),
                QueryError::BeforeRetention { .. } if at_ms.is_some() => value_error("at", e),
                QueryError::BeforeRetention { .. } => value_error("window", e),
                QueryError::BadQuantiles { .. } => value_error("quantiles", e),
                e => PyOSError::new_err(format!("{}: {e}", self.path.display())),
            })?;
        let rows = answer
            .rows
            .into_iter()
            .map(|r| {
                (
                    r.key,
                    r.estimate.into(),
                    r.buckets,
                    r.parts
                        .into_iter()
                        .map(|(label, e)| {
                            let label = match label {
                                Label::Text(t) => PyLabel::Text(t),
                                Label::Number(x) => PyLabel::Number(x),
                            };
                            (label, e.into())
                        })
                        .collect(),
                    r.events,
                    r.partial,
                )
            })
            .collect();
        Ok((
            answer.kind.to_string(),
            answer.part.map(str::to_string),
            answer.from,
            answer.to,
            rows,
        ))
    }

    /// The store's path.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }
}

/// A duration as `tidemark query --window` reads it (`5m`, `1h`, `500ms`), in ms.
#[pyfunction]
fn _parse_duration(text: &str) -> PyResult<u64> {
    parse_duration(text).filter(|&w| w > 0).ok_or_else(|| {
        value_error(
            "window",
            format!("expected a duration like 5m or 1h, got {text:?}"),
        )
    })
}

/// A time as `tidemark query --at` reads it (RFC 3339 or epoch seconds), in epoch ms.
#[pyfunction]
fn _parse_time(text: &str) -> PyResult<u64> {
    parse_rfc3339(text)
        .or_else(|_| TimeFormat::EpochSeconds.parse(text))
        .map_err(|_| {
            value_error(
                "at",
                format!("expected RFC 3339 or epoch seconds, got {text:?}"),
            )
        })
}

/// Epoch ms as RFC 3339, as `tidemark query` prints it.
#[pyfunction]
fn _format_time(ms: u64) -> String {
    tidemark_stream::time::format_rfc3339(ms)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStore>()?;
    m.add_function(wrap_pyfunction!(_parse_duration, m)?)?;
    m.add_function(wrap_pyfunction!(_parse_time, m)?)?;
    m.add_function(wrap_pyfunction!(_format_time, m)?)?;
    Ok(())
}
