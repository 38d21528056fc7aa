//! DDSketch (Masson, Rim, Lee 2019): quantiles within a relative error α, over all the values
//! or over a window of ticks.

use std::borrow::Cow;

use pyo3::exceptions::{PyNotImplementedError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use tidemark::codec::{self, Family};
use tidemark::quantile::{
    nearest_rank, DdSketch, Mapping, MappingKind, QuantileError, QuantileRing, DEFAULT_ALPHA,
    MAX_COUNT, MAX_SCHEMA, MIN_SCHEMA,
};

use crate::cardinality::ring_shape;
use crate::numbers::{not_finite, number, values};
use crate::{bytes_arg, decode_error, merge_error, param_error, reduce, value_error, PyEstimate};

/// The core's parameter names as the constructor's.
const NAMES: &[(&str, &str)] = &[
    ("bin limit", "bins"),
    ("bucket width", "bucket"),
    ("buckets", "bucket"),
];

// One per Python object, held in place: the larger variant's few hundred bytes are paid once.
#[allow(clippy::large_enum_variant)]
enum Inner {
    Sketch(DdSketch),
    Ring(QuantileRing),
}

/// The sketch a query answers from: the whole sketch, or a window's merge of a ring's
/// buckets (then `span`: the ticks its buckets cover, for the message of an empty window).
struct View<'a> {
    sketch: Cow<'a, DdSketch>,
    span: Option<(u64, u64)>,
}

impl View<'_> {
    /// A query's error: an empty sketch or window says which; the rest name `name`.
    fn error(&self, e: QuantileError, name: &str) -> PyErr {
        match e {
            QuantileError::Empty => match self.span {
                None => PyValueError::new_err(
                    "no values: the sketch is empty, and the query needs at least one",
                ),
                Some((lo, hi)) => PyValueError::new_err(format!(
                    "window: no values in ticks {lo}..={hi}, and the query needs at least one"
                )),
            },
            other => quantile_error(other, name),
        }
    }
}

/// A core error as a Python exception: merges of different mappings as
/// `tidemark.MergeError`, the rest as `ValueError` naming `name`.
fn quantile_error(e: QuantileError, name: &str) -> PyErr {
    match e {
        QuantileError::Incompatible(m) => merge_error(m),
        other => value_error(name, other),
    }
}

fn check_q(q: f64, what: &str) -> PyResult<()> {
    if !(0.0..=1.0).contains(&q) {
        return Err(value_error(
            what,
            format!("expected a quantile in [0, 1], got {}", crate::py_float(q)),
        ));
    }
    Ok(())
}

/// The value of a rank or CDF query: a number, ±∞ allowed, NaN refused.
fn query_value(value: &Bound<'_, PyAny>) -> PyResult<f64> {
    let x = number(value, "value")?;
    if x.is_nan() {
        return Err(value_error(
            "value",
            "expected a number, got nan (±inf are allowed)",
        ));
    }
    Ok(x)
}

fn no_window(what: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "{what}: a Quantiles without a window takes no {what} (make one with \
         Quantiles(window=W) for windows of ticks)"
    ))
}

/// Quantiles within a relative error α (DDSketch: Masson, Rim, Lee 2019), over all the values
/// or, with `window`, over the last `window` ticks.
///
/// The `q`-quantile is the value of nearest rank ⌈q·n⌉ in sorted order. Its answer is the
/// representative of the bin that holds that rank: within α of the true value
/// (|answer − truth| ≤ α·|truth|) for every stream, with the bin's bounds, clamped to the
/// minimum and maximum, as a guaranteed bracket (`method` `ddsketch`). Ranks 1 and n answer
/// with the exact minimum and maximum. Only when a store passes `bins` bins do its lowest bins
/// collapse; answers that fall in the collapsed bin say so (`ddsketch-collapsed`) and carry
/// the wider bracket [minimum, that bin's upper bound], still guaranteed.
///
/// `alpha` (default 0.01) picks the bins by the cubic mapping; `schema` (−4..=8) instead takes
/// Prometheus native-histogram (OpenTelemetry exponential-histogram) bins, γ = 2^(2^−schema)
/// (schema 5: α ≈ 1.08%). `bins` bounds the bins a store holds (1..=2^24; 4,096 span 35
/// decades at α = 1%). With `window`, a ring of per-bucket sketches: `bucket` ticks a bucket
/// (default ⌈window/60⌉), the window rounded up to whole buckets, as `RingWindow`. NaN and ±∞
/// are refused.
///
/// >>> import tidemark
/// >>> q = tidemark.Quantiles(0.01)
/// >>> q.update_many([float(i) for i in range(1, 1001)])
/// 0
/// >>> p99 = q.quantile(0.99)       # rank 990 holds 990
/// >>> abs(p99.value - 990) <= 0.01 * 990, 990 in p99, p99.method, q.quantile_rank(0.99)
/// (True, True, 'ddsketch', 990)
/// >>> q.min(), q.count()
/// (Estimate(value=1.0, low=1.0, high=1.0, bracket='guaranteed', method='exact'), 1000)
/// >>> tidemark.Quantiles.from_bytes(q.to_bytes()) == q
/// True
#[pyclass(module = "tidemark", name = "Quantiles")]
pub struct PyQuantiles {
    inner: Inner,
}

impl PyQuantiles {
    /// A sketch (family 64) or a ring (family 65) from its envelope.
    pub fn decode(bytes: &[u8]) -> PyResult<PyQuantiles> {
        let inner = match codec::peek_family(bytes) {
            Ok(Family::QuantileRing) => {
                Inner::Ring(QuantileRing::from_bytes(bytes).map_err(decode_error)?)
            }
            // Anything else is read as a sketch, whose decoder names what it found.
            _ => Inner::Sketch(DdSketch::from_bytes(bytes).map_err(decode_error)?),
        };
        Ok(PyQuantiles { inner })
    }

    fn empty_sketch(&self) -> &DdSketch {
        match &self.inner {
            Inner::Sketch(s) => s,
            Inner::Ring(r) => r.empty_sketch(),
        }
    }

    fn ring(&self) -> Option<&QuantileRing> {
        match &self.inner {
            Inner::Sketch(_) => None,
            Inner::Ring(r) => Some(r),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        match &self.inner {
            Inner::Sketch(s) => s.to_bytes(),
            Inner::Ring(r) => r.to_bytes(),
        }
    }

    /// What a query with `now` and `window` answers from.
    fn view(&mut self, now: Option<u64>, window: Option<u64>) -> PyResult<View<'_>> {
        let ring = match &mut self.inner {
            Inner::Sketch(s) => {
                if now.is_some() {
                    return Err(no_window("now"));
                }
                if window.is_some() {
                    return Err(no_window("window"));
                }
                return Ok(View {
                    sketch: Cow::Borrowed(s),
                    span: None,
                });
            }
            Inner::Ring(r) => r,
        };
        let width = ring.width();
        // Default: the end of the newest bucket, as RingWindow.count.
        let now = now
            .or(ring
                .newest_bucket()
                .map(|b| b.saturating_mul(width).saturating_add(width - 1)))
            .unwrap_or(0);
        let span = ring.buckets().saturating_mul(width);
        let window = window.unwrap_or(span);
        if window == 0 || window > span {
            return Err(value_error(
                "window",
                format!(
                    "expected 1..={span} ticks (the ring's {} buckets of {width}), got {window}",
                    ring.buckets()
                ),
            ));
        }
        let buckets = window.div_ceil(width);
        let sketch = ring
            .window(now, buckets)
            .map_err(|e| quantile_error(e, "window"))?;
        let last = now / width;
        let first = last.saturating_sub(buckets - 1);
        let span = (
            first.saturating_mul(width),
            last.saturating_mul(width).saturating_add(width - 1),
        );
        Ok(View {
            sketch: Cow::Owned(sketch),
            span: Some(span),
        })
    }
}

#[pymethods]
impl PyQuantiles {
    #[new]
    #[pyo3(signature = (alpha = None, *, schema = None, bins = 4096, window = None, bucket = None))]
    fn new(
        alpha: Option<f64>,
        schema: Option<i64>,
        bins: u64,
        window: Option<u64>,
        bucket: Option<u64>,
    ) -> PyResult<Self> {
        let mapping = match (alpha, schema) {
            (Some(a), Some(s)) => {
                return Err(value_error(
                    "schema",
                    format!("expected alpha or a schema, not both (got alpha={a}, schema={s})"),
                ))
            }
            (None, Some(s)) => {
                let s8 = i8::try_from(s)
                    .ok()
                    .filter(|s| (MIN_SCHEMA..=MAX_SCHEMA).contains(s))
                    .ok_or_else(|| {
                        value_error(
                            "schema",
                            format!("expected {MIN_SCHEMA}..={MAX_SCHEMA}, got {s}"),
                        )
                    })?;
                Mapping::schema(s8).map_err(|e| param_error(e, NAMES))?
            }
            (a, None) => {
                Mapping::cubic(a.unwrap_or(DEFAULT_ALPHA)).map_err(|e| param_error(e, NAMES))?
            }
        };
        let sketch = DdSketch::with_mapping(mapping, bins).map_err(|e| param_error(e, NAMES))?;
        let inner = match window {
            None => {
                if let Some(b) = bucket {
                    return Err(value_error(
                        "bucket",
                        format!("a bucket ({b}) needs a window: Quantiles(window=W, bucket=B)"),
                    ));
                }
                Inner::Sketch(sketch)
            }
            Some(w) => {
                let (width, n) = ring_shape(w, bucket)?;
                Inner::Ring(QuantileRing::of(sketch, width, n).map_err(|e| param_error(e, NAMES))?)
            }
        };
        Ok(PyQuantiles { inner })
    }

    /// Adds one value (an int or a float; NaN and ±∞ raise `ValueError`), at `tick` for a
    /// windowed Quantiles (which needs one) — False, adding nothing, when the tick's bucket
    /// has left the ring. True when added.
    #[pyo3(signature = (value, tick = None))]
    fn update(&mut self, value: &Bound<'_, PyAny>, tick: Option<u64>) -> PyResult<bool> {
        let x = number(value, "value")?;
        if !x.is_finite() {
            return Err(not_finite("value", x));
        }
        match (&mut self.inner, tick) {
            (Inner::Sketch(s), None) => s
                .insert(x)
                .map(|()| true)
                .map_err(|e| quantile_error(e, "value")),
            (Inner::Sketch(_), Some(_)) => Err(no_window("tick")),
            (Inner::Ring(_), None) => Err(PyTypeError::new_err(
                "tick: a windowed Quantiles needs each value's tick: update(value, tick)",
            )),
            (Inner::Ring(r), Some(t)) => match r.insert(x, t) {
                Ok(()) => Ok(true),
                Err(QuantileError::TooOld { .. }) => Ok(false),
                Err(e) => Err(quantile_error(e, "value")),
            },
        }
    }

    /// Adds every value of a list, a NumPy array (integers or floats of any width; float64
    /// and 8-byte integers read in place), a buffer or an iterable, with the GIL released;
    /// for a windowed Quantiles at `ticks` (one int for all, or one each). Returns how many
    /// were refused as too old (0 without a window). A NaN or ±∞ raises `ValueError` naming
    /// its index, and then nothing of the batch is added.
    #[pyo3(signature = (values, ticks = None))]
    fn update_many(
        &mut self,
        py: Python<'_>,
        values: &Bound<'_, PyAny>,
        ticks: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u64> {
        let v = crate::numbers::values(values, "values")?;
        let at = |i: usize| format!("values[{i}]");
        match &mut self.inner {
            Inner::Sketch(s) => {
                if ticks.is_some() {
                    return Err(no_window("ticks"));
                }
                let n = v.len() as u64;
                if n > MAX_COUNT - s.count() {
                    return Err(value_error(
                        "values",
                        QuantileError::Overflow {
                            count: s.count(),
                            adding: n,
                        },
                    ));
                }
                py.allow_threads(|| {
                    if let Some((i, x)) = v.first_not_finite() {
                        return Err((i, Err(x)));
                    }
                    v.try_for_each(|i, x| s.insert(x).map_err(|e| (i, Ok(e))))
                })
                .map_err(|(i, e)| match e {
                    Err(x) => not_finite(&at(i), x),
                    Ok(e) => quantile_error(e, &at(i)),
                })?;
                Ok(0)
            }
            Inner::Ring(r) => {
                let Some(ticks) = ticks else {
                    return Err(PyTypeError::new_err(
                        "ticks: a windowed Quantiles needs the values' ticks: \
                         update_many(values, ticks)",
                    ));
                };
                let t = crate::numbers::ticks(ticks, v.len(), "ticks")?;
                let mut refused = 0u64;
                py.allow_threads(|| {
                    if let Some((i, x)) = v.first_not_finite() {
                        return Err((i, Err(x)));
                    }
                    v.try_for_each(|i, x| match r.insert(x, t.get(i)) {
                        Ok(()) => Ok(()),
                        Err(QuantileError::TooOld { .. }) => {
                            refused += 1;
                            Ok(())
                        }
                        Err(e) => Err((i, Ok(e))),
                    })
                })
                .map_err(|(i, e)| match e {
                    Err(x) => not_finite(&at(i), x),
                    Ok(e) => quantile_error(e, &at(i)),
                })?;
                Ok(refused)
            }
        }
    }

    /// The `q`-quantile (`q` in [0, 1]): the value of nearest rank ⌈q·n⌉, within α, with a
    /// guaranteed bracket. For a windowed Quantiles, over the buckets covering the last
    /// `window` ticks (default: the whole ring) up to `now` (default: the end of the newest
    /// bucket). An empty sketch or window raises `ValueError`.
    #[pyo3(signature = (q, *, now = None, window = None))]
    fn quantile(&mut self, q: f64, now: Option<u64>, window: Option<u64>) -> PyResult<PyEstimate> {
        check_q(q, "q")?;
        let view = self.view(now, window)?;
        view.sketch
            .quantile(q)
            .map(|a| a.estimate.into())
            .map_err(|e| view.error(e, "q"))
    }

    /// The quantiles of a list or array of `q`s, from one view of the window.
    #[pyo3(signature = (qs, *, now = None, window = None))]
    fn quantiles(
        &mut self,
        qs: &Bound<'_, PyAny>,
        now: Option<u64>,
        window: Option<u64>,
    ) -> PyResult<Vec<PyEstimate>> {
        if qs.is_instance_of::<pyo3::types::PyFloat>() || qs.is_instance_of::<pyo3::types::PyInt>()
        {
            return Err(PyTypeError::new_err(
                "qs: expected a sequence of quantiles, got one number (use quantile(q) for one)",
            ));
        }
        let qs = values(qs, "qs")?;
        let mut all = Vec::with_capacity(qs.len());
        qs.try_for_each(|i, q| {
            all.push(q);
            check_q(q, &format!("qs[{i}]"))
        })?;
        let view = self.view(now, window)?;
        all.iter()
            .enumerate()
            .map(|(i, &q)| {
                view.sketch
                    .quantile(q)
                    .map(|a| a.estimate.into())
                    .map_err(|e| view.error(e, &format!("qs[{i}]")))
            })
            .collect()
    }

    /// The rank whose value `quantile(q)` answers: ⌈q·n⌉ among the `n` values (at least 1),
    /// 1-based. An empty sketch or window raises `ValueError`, as `quantile` does.
    #[pyo3(signature = (q, *, now = None, window = None))]
    fn quantile_rank(&mut self, q: f64, now: Option<u64>, window: Option<u64>) -> PyResult<u64> {
        check_q(q, "q")?;
        let view = self.view(now, window)?;
        let n = view.sketch.count();
        if n == 0 {
            return Err(view.error(QuantileError::Empty, "q"));
        }
        Ok(nearest_rank(q, n))
    }

    /// How many values are at most `value` (±∞ allowed): exact below the minimum and from
    /// the maximum up, else bracketed by the counts below and including `value`'s bin
    /// (guaranteed). 0 for an empty sketch or window.
    #[pyo3(signature = (value, *, now = None, window = None))]
    fn rank(
        &mut self,
        value: &Bound<'_, PyAny>,
        now: Option<u64>,
        window: Option<u64>,
    ) -> PyResult<PyEstimate> {
        let x = query_value(value)?;
        let view = self.view(now, window)?;
        view.sketch
            .rank(x)
            .map(Into::into)
            .map_err(|e| view.error(e, "value"))
    }

    /// The fraction of values at most `value`: `rank(value)` over the count. An empty sketch
    /// or window raises `ValueError`.
    #[pyo3(signature = (value, *, now = None, window = None))]
    fn cdf(
        &mut self,
        value: &Bound<'_, PyAny>,
        now: Option<u64>,
        window: Option<u64>,
    ) -> PyResult<PyEstimate> {
        let x = query_value(value)?;
        let view = self.view(now, window)?;
        view.sketch
            .cdf(x)
            .map(Into::into)
            .map_err(|e| view.error(e, "value"))
    }

    /// The number of values (exact).
    #[pyo3(signature = (*, now = None, window = None))]
    fn count(&mut self, now: Option<u64>, window: Option<u64>) -> PyResult<u64> {
        Ok(self.view(now, window)?.sketch.count())
    }

    /// The sum of the values, bracketed by each bin's bounds times its count (guaranteed);
    /// 0 for an empty sketch or window.
    #[pyo3(signature = (*, now = None, window = None))]
    fn sum(&mut self, now: Option<u64>, window: Option<u64>) -> PyResult<PyEstimate> {
        Ok(self.view(now, window)?.sketch.sum().into())
    }

    /// The smallest value (exact). An empty sketch or window raises `ValueError`.
    #[pyo3(signature = (*, now = None, window = None))]
    fn min(&mut self, now: Option<u64>, window: Option<u64>) -> PyResult<PyEstimate> {
        let view = self.view(now, window)?;
        view.sketch
            .min()
            .map(Into::into)
            .map_err(|e| view.error(e, "min"))
    }

    /// The largest value (exact). An empty sketch or window raises `ValueError`.
    #[pyo3(signature = (*, now = None, window = None))]
    fn max(&mut self, now: Option<u64>, window: Option<u64>) -> PyResult<PyEstimate> {
        let view = self.view(now, window)?;
        view.sketch
            .max()
            .map(Into::into)
            .map_err(|e| view.error(e, "max"))
    }

    /// Merges `other`'s values in: bin counts add, so the result is exactly the sketch of
    /// both streams. Another mapping (alpha or schema) raises `tidemark.MergeError`; the bin
    /// limits may differ (this one's is kept). Windowed Quantiles do not merge yet.
    fn merge(slf: &Bound<'_, Self>, other: &Bound<'_, PyQuantiles>) -> PyResult<()> {
        // Borrowed one after the other, so `x.merge(x)` works (as with a copy of x).
        let theirs = crate::read_other(other, |o| match &o.inner {
            Inner::Sketch(s) => Some(s.clone()),
            Inner::Ring(_) => None,
        })?;
        let mut me = crate::write_self(slf)?;
        match (&mut me.inner, theirs) {
            (Inner::Sketch(s), Some(o)) => s.merge(&o).map_err(|e| quantile_error(e, "other")),
            (Inner::Ring(_), None) => Err(PyNotImplementedError::new_err(
                "merge: windowed Quantiles do not merge yet (merge unwindowed ones, or query \
                 each ring's windows)",
            )),
            _ => Err(crate::TidemarkMergeError::new_err(
                "a windowed Quantiles and one without a window do not merge",
            )),
        }
    }

    /// A copy.
    fn copy(&self) -> PyQuantiles {
        PyQuantiles {
            inner: match &self.inner {
                Inner::Sketch(s) => Inner::Sketch(s.clone()),
                Inner::Ring(r) => Inner::Ring(r.clone()),
            },
        }
    }

    /// The relative accuracy every uncollapsed answer is within (a schema's own α).
    #[getter]
    fn alpha(&self) -> f64 {
        self.empty_sketch().alpha()
    }

    /// The Prometheus schema of the bins, or None for the cubic mapping from alpha.
    #[getter]
    fn schema(&self) -> Option<i8> {
        match self.empty_sketch().mapping().kind() {
            MappingKind::Schema { schema } => Some(schema),
            _ => None,
        }
    }

    /// The most bins a store holds before its lowest collapse.
    #[getter]
    fn bins(&self) -> u64 {
        self.empty_sketch().bin_limit()
    }

    /// The ticks the ring spans (whole buckets), or None without a window.
    #[getter]
    fn window(&self) -> Option<u64> {
        self.ring().map(|r| r.width().saturating_mul(r.buckets()))
    }

    /// Ticks a bucket, or None without a window.
    #[getter]
    fn bucket(&self) -> Option<u64> {
        self.ring().map(|r| r.width())
    }

    /// Buckets in the ring, or None without a window.
    #[getter]
    fn buckets(&self) -> Option<u64> {
        self.ring().map(|r| r.buckets())
    }

    /// Memory held, in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        match &self.inner {
            Inner::Sketch(s) => s.bytes(),
            Inner::Ring(r) => r.bytes(),
        }
    }

    /// The envelope (family 64 for a sketch, 65 for a windowed ring): the bytes the command
    /// line's `--save` and the Redis module's `TM.DUMP` give for the same sketch.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.bytes())
    }

    /// A sketch or ring from `to_bytes()`, the command line or the Redis module; raises
    /// `tidemark.DecodeError` on anything else.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PyQuantiles> {
        PyQuantiles::decode(&bytes_arg(data)?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, &self.bytes())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        match other.downcast::<PyQuantiles>() {
            Ok(o) => crate::read_other(o, |o| match (&self.inner, &o.inner) {
                (Inner::Sketch(a), Inner::Sketch(b)) => a == b,
                (Inner::Ring(a), Inner::Ring(b)) => a == b,
                _ => false,
            }),
            Err(_) => Ok(false),
        }
    }

    fn __repr__(&self) -> String {
        let e = self.empty_sketch();
        let mapping = match e.mapping().kind() {
            MappingKind::Schema { schema } => format!("schema={schema}"),
            _ => format!("alpha={}", crate::py_float(e.alpha())),
        };
        match &self.inner {
            Inner::Sketch(s) => format!(
                "Quantiles({mapping}, bins={}, count={})",
                s.bin_limit(),
                s.count()
            ),
            Inner::Ring(r) => format!(
                "Quantiles({mapping}, bins={}, window={}, bucket={})",
                e.bin_limit(),
                r.width().saturating_mul(r.buckets()),
                r.width()
            ),
        }
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyQuantiles>()?;
    Ok(())
}
