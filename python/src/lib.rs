//! tidemark's Python bindings: every structure of the library, estimates with their
//! brackets, the same bytes as the command line, and the pipeline's store read-only.
//!
//! The Python package `tidemark` re-exports this module (`tidemark._tidemark`) and adds the
//! store's result types and `to_pandas()` in Python.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use tidemark::codec::{self, Family};
use tidemark::{Bracket, DecodeError, MergeError, ParamError};

mod cardinality;
mod frequency;
mod items;
mod membership;
mod numbers;
mod quantile;
mod store;
mod window;

/// The package's exceptions, their classes named as the package exports them (so that a
/// traceback says `tidemark.DecodeError`, and an exception pickles by that name); in Rust,
/// beside the core's error types of the same names, they go by `Tidemark…`.
mod exceptions {
    use pyo3::create_exception;
    use pyo3::exceptions::PyValueError;

    create_exception!(
        tidemark,
        DecodeError,
        PyValueError,
        "Bytes that are not a valid tidemark summary (of the family asked for)."
    );
    create_exception!(
        tidemark,
        MergeError,
        PyValueError,
        "Summaries that cannot be merged: different hashes, seeds or parameters."
    );
    create_exception!(
        tidemark,
        CapacityError,
        PyValueError,
        "A filter that is full and cannot grow (a quotient filter past its reserve)."
    );
}

pub(crate) use exceptions::{
    CapacityError, DecodeError as TidemarkDecodeError, MergeError as TidemarkMergeError,
};

/// A `ValueError` naming the parameter, with `renames` mapping the core's names to Python's.
pub(crate) fn param_error(e: ParamError, renames: &[(&str, &str)]) -> PyErr {
    let name = renames
        .iter()
        .find(|(core, _)| *core == e.name)
        .map_or(e.name, |(_, py)| *py);
    match e.needed_bytes {
        Some(bytes) => PyValueError::new_err(format!(
            "{name}: {} asks for {bytes} bytes, which cannot be allocated",
            e.got
        )),
        None => PyValueError::new_err(format!("{name}: expected {}, got {}", e.expected, e.got)),
    }
}

pub(crate) fn value_error(name: &str, message: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{name}: {message}"))
}

/// `f` of `other`, borrowed for the call only — so that a method may then borrow its own
/// object mutably, even when `other` is that object (`x.merge(x)`).
pub(crate) fn read_other<T: pyo3::PyClass, U>(
    other: &Bound<'_, T>,
    f: impl FnOnce(&T) -> U,
) -> PyResult<U> {
    Ok(f(&*other.try_borrow().map_err(|_| busy_error())?))
}

/// `slf` borrowed mutably, or [`busy_error`].
pub(crate) fn write_self<'py, T: pyo3::PyClass<Frozen = pyo3::pyclass::boolean_struct::False>>(
    slf: &Bound<'py, T>,
) -> PyResult<PyRefMut<'py, T>> {
    slf.try_borrow_mut().map_err(|_| busy_error())
}

/// The error for a sketch another thread holds for an update (with the GIL released).
pub(crate) fn busy_error() -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err(
        "Already borrowed: the other sketch is being updated (by another thread)",
    )
}

pub(crate) fn decode_error(e: DecodeError) -> PyErr {
    TidemarkDecodeError::new_err(e.to_string())
}

pub(crate) fn merge_error(e: MergeError) -> PyErr {
    TidemarkMergeError::new_err(e.to_string())
}

/// `bytes` from a bytes-like object.
pub(crate) fn bytes_arg(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.downcast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = obj.extract::<Vec<u8>>() {
        if !obj.is_instance_of::<pyo3::types::PyString>() {
            return Ok(b);
        }
    }
    let py = obj.py();
    let mv = py
        .import("builtins")?
        .getattr("memoryview")?
        .call1((obj,))
        .map_err(|_| PyTypeError::new_err("expected bytes or a bytes-like object"))?;
    let b = mv.call_method0("tobytes")?;
    Ok(b.downcast::<PyBytes>()?.as_bytes().to_vec())
}

/// `(tidemark._restore, (bytes,))`: how every summary pickles.
pub(crate) fn reduce<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyTuple>> {
    let restore = py.import("tidemark")?.getattr("_restore")?;
    PyTuple::new(
        py,
        [
            restore,
            PyTuple::new(py, [PyBytes::new(py, bytes)])?.into_any(),
        ],
    )
}

/// An answer: a point value and a bracket `[low, high]` that is guaranteed, or holds with
/// probability `confidence`.
///
/// Usable as a float (`float(e)`, `f"{e:.1f}"`, comparisons with numbers).
///
/// >>> import tidemark
/// >>> e = tidemark.Estimate(10.0, 9.0, 11.0, confidence=0.95, method="hll-ertl")
/// >>> float(e), e.low, e.high, e.bracket
/// (10.0, 9.0, 11.0, 'probabilistic (95%)')
/// >>> 9.5 in e
/// True
#[pyclass(frozen, module = "tidemark", name = "Estimate")]
#[derive(Clone)]
pub struct PyEstimate {
    /// The point estimate.
    #[pyo3(get)]
    value: f64,
    /// The bracket's lower end.
    #[pyo3(get)]
    low: f64,
    /// The bracket's upper end.
    #[pyo3(get)]
    high: f64,
    /// The probability that `[low, high]` holds the truth (1.0 when guaranteed).
    #[pyo3(get)]
    confidence: f64,
    /// How the value was computed (`hll-hip`, `hll-ertl`, `count-min`, `exp-histogram`,
    /// `exact`, …).
    #[pyo3(get)]
    method: String,
    /// Whether `[low, high]` always holds the truth.
    #[pyo3(get)]
    guaranteed: bool,
}

impl From<tidemark::Estimate> for PyEstimate {
    fn from(e: tidemark::Estimate) -> Self {
        PyEstimate {
            value: e.value,
            low: e.low,
            high: e.high,
            confidence: e.confidence(),
            method: e.method.to_string(),
            guaranteed: matches!(e.bracket, Bracket::Guaranteed),
        }
    }
}

impl PyEstimate {
    fn bracket_text(&self) -> String {
        if self.guaranteed {
            "guaranteed".to_string()
        } else {
            format!("probabilistic ({}%)", percent(self.confidence))
        }
    }
}

/// A probability as a readable percentage: a whole percentage as such (`95`), else two
/// decimals without trailing zeros (`99.33` for Count-Min's 1 − e^−5, `99.5`), with more
/// only where two would round a probability below 1 up to `100` or one above 0 down to `0`
/// (a filter's `99.99996`).
fn percent(p: f64) -> String {
    let pct = p * 100.0;
    if !pct.is_finite() {
        return format!("{pct}");
    }
    let whole = pct.round();
    // 0.95 · 100 is 95.00000000000001: within 1e-9 is whole, unless it would show a
    // probability below 1 as 100 or one above 0 as 0.
    if (pct - whole).abs() < 1e-9 && (whole < 100.0 || pct >= 100.0) && (whole > 0.0 || pct <= 0.0)
    {
        return format!("{whole:.0}");
    }
    for decimals in 2..=15 {
        let text = format!("{pct:.decimals$}");
        let text = text.trim_end_matches('0').trim_end_matches('.');
        let shown: f64 = text.parse().unwrap_or(pct);
        if (shown < 100.0 || pct >= 100.0) && (shown > 0.0 || pct <= 0.0) {
            return text.to_string();
        }
    }
    format!("{pct}")
}

#[pymethods]
impl PyEstimate {
    #[new]
    #[pyo3(signature = (value, low, high, *, confidence = 1.0, method = "exact".to_string(), guaranteed = None))]
    fn new(
        value: f64,
        low: f64,
        high: f64,
        confidence: f64,
        method: String,
        guaranteed: Option<bool>,
    ) -> PyResult<Self> {
        if !(confidence > 0.0 && confidence <= 1.0) {
            return Err(value_error(
                "confidence",
                format!("expected a number in (0, 1], got {confidence}"),
            ));
        }
        Ok(PyEstimate {
            value,
            low,
            high,
            confidence,
            method,
            guaranteed: guaranteed.unwrap_or(confidence == 1.0),
        })
    }

    /// What the bracket promises: `guaranteed` or `probabilistic (95%)`.
    #[getter]
    fn bracket(&self) -> String {
        self.bracket_text()
    }

    /// Whether `truth` lies in `[low, high]`.
    fn contains(&self, truth: f64) -> bool {
        self.low <= truth && truth <= self.high
    }

    fn __contains__(&self, truth: f64) -> bool {
        self.contains(truth)
    }

    /// `high − low`.
    #[getter]
    fn width(&self) -> f64 {
        self.high - self.low
    }

    fn __float__(&self) -> f64 {
        self.value
    }

    fn __int__(&self) -> PyResult<i128> {
        if !self.value.is_finite() {
            return Err(PyValueError::new_err(
                "cannot convert a non-finite estimate to int",
            ));
        }
        Ok(self.value.trunc() as i128)
    }

    #[pyo3(signature = (ndigits = None))]
    fn __round__(&self, py: Python<'_>, ndigits: Option<i32>) -> PyResult<PyObject> {
        let f = pyo3::types::PyFloat::new(py, self.value);
        let r = match ndigits {
            None => f.call_method1("__round__", ())?,
            Some(n) => f.call_method1("__round__", (n,))?,
        };
        Ok(r.unbind())
    }

    fn __format__(&self, py: Python<'_>, spec: &str) -> PyResult<String> {
        pyo3::types::PyFloat::new(py, self.value)
            .call_method1("__format__", (spec,))?
            .extract()
    }

    fn __richcmp__(
        &self,
        other: &Bound<'_, PyAny>,
        op: pyo3::basic::CompareOp,
    ) -> PyResult<PyObject> {
        let py = other.py();
        let o = if let Ok(e) = other.downcast::<PyEstimate>() {
            e.get().value
        } else if let Ok(x) = other.extract::<f64>() {
            x
        } else {
            return Ok(py.NotImplemented());
        };
        let r = op.matches(
            self.value
                .partial_cmp(&o)
                .unwrap_or(std::cmp::Ordering::Less),
        ) && !(self.value.is_nan() || o.is_nan());
        Ok(pyo3::types::PyBool::new(py, r)
            .to_owned()
            .into_any()
            .unbind())
    }

    fn __repr__(&self) -> String {
        format!(
            "Estimate(value={}, low={}, high={}, bracket='{}', method='{}')",
            py_float(self.value),
            py_float(self.low),
            py_float(self.high),
            self.bracket_text(),
            self.method
        )
    }

    fn __str__(&self) -> String {
        format!(
            "{} [{}, {}] {}",
            py_float(self.value),
            py_float(self.low),
            py_float(self.high),
            self.bracket_text()
        )
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let cls = py.get_type::<PyEstimate>();
        let kwargs = [
            ("confidence", self.confidence.into_pyobject(py)?.into_any()),
            ("method", self.method.clone().into_pyobject(py)?.into_any()),
            (
                "guaranteed",
                pyo3::types::PyBool::new(py, self.guaranteed)
                    .to_owned()
                    .into_any(),
            ),
        ];
        let partial = py.import("functools")?.getattr("partial")?.call(
            (cls,),
            Some(&pyo3::types::IntoPyDict::into_py_dict(kwargs, py)?),
        )?;
        PyTuple::new(
            py,
            [
                partial,
                PyTuple::new(py, [self.value, self.low, self.high])?.into_any(),
            ],
        )
    }
}

pub(crate) fn py_float(x: f64) -> String {
    let mut v = Vec::new();
    items::float_repr(x, &mut v);
    String::from_utf8(v).unwrap_or_default()
}

/// Loads any summary saved by the command line, the Redis module or `to_bytes()`, as the
/// class its bytes hold; a Redis `HYLL` value loads as a `HyperLogLog`.
///
/// >>> import tidemark
/// >>> h = tidemark.HyperLogLog(12)
/// >>> h.update_many(["a", "b"])
/// >>> type(tidemark.load(h.to_bytes())).__name__
/// 'HyperLogLog'
#[pyfunction]
fn load(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<PyObject> {
    let bytes = bytes_arg(data)?;
    if bytes.starts_with(b"HYLL") {
        return Ok(cardinality::PyHll::from_redis_bytes(&bytes)?
            .into_pyobject(py)?
            .into_any()
            .unbind());
    }
    let family = codec::peek_family(&bytes).map_err(decode_error)?;
    Ok(match family {
        Family::Hll => cardinality::PyHll::from_tdmk(&bytes)?
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Family::ExaLogLog => cardinality::PyExaLogLog::decode(&bytes)?
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Family::RingWindow => cardinality::PyRing::decode(&bytes)?
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Family::SlidingHll => cardinality::PySliding::decode(&bytes)?
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Family::ExpHistogram => window::PyExpHistogram::decode(&bytes)?
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Family::CountMin => frequency::decode_any(py, &bytes)?,
        Family::QuotientFilter => membership::PyQuotient::decode(&bytes)?
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Family::StackedFilter => membership::PyStacked::decode(&bytes)?
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        Family::Quantiles | Family::QuantileRing => quantile::PyQuantiles::decode(&bytes)?
            .into_pyobject(py)?
            .into_any()
            .unbind(),
        other => {
            return Err(TidemarkDecodeError::new_err(format!(
                "{} summaries have no Python class",
                other.name()
            )))
        }
    })
}

/// The bytes an item hashes as (the bytes the command line would read for it on a line).
///
/// >>> import tidemark
/// >>> tidemark.item_bytes(42), tidemark.item_bytes(0.1), tidemark.item_bytes("é")
/// (b'42', b'0.1', b'\xc3\xa9')
#[pyfunction]
fn item_bytes<'py>(py: Python<'py>, item: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(py, &items::item_bytes(item)?))
}

#[pymodule]
fn _tidemark(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyEstimate>()?;
    m.add("DecodeError", py.get_type::<TidemarkDecodeError>())?;
    m.add("MergeError", py.get_type::<TidemarkMergeError>())?;
    m.add("CapacityError", py.get_type::<CapacityError>())?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(item_bytes, m)?)?;
    cardinality::register(m)?;
    frequency::register(m)?;
    membership::register(m)?;
    window::register(m)?;
    quantile::register(m)?;
    store::register(m)?;
    Ok(())
}
