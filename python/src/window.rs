//! The exponential histogram (Datar–Gionis–Indyk–Motwani 2002): ones in a sliding window.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use tidemark::window::{ExpHistogram, Window};

use crate::items::{integers, to_u64};
use crate::{bytes_arg, decode_error, param_error, reduce, value_error, PyEstimate};

const NAMES: &[(&str, &str)] = &[("k", "epsilon")];

/// Ones among the last `window` arrivals (or events in the last `window` ticks with
/// `time=True`), within a relative error of epsilon/2, with a guaranteed bracket — as
/// `tidemark count --window W --epsilon E [--time] [--interpolate]`.
///
/// >>> import tidemark
/// >>> h = tidemark.ExpHistogram(1000, 0.1)
/// >>> h.update_many([i % 4 == 0 for i in range(10_000)])
/// >>> e = h.estimate()
/// >>> e.low <= 250 <= e.high, e.bracket
/// (True, 'guaranteed')
#[pyclass(module = "tidemark", name = "ExpHistogram")]
pub struct PyExpHistogram {
    inner: ExpHistogram,
}

impl PyExpHistogram {
    pub fn decode(bytes: &[u8]) -> PyResult<PyExpHistogram> {
        Ok(PyExpHistogram {
            inner: ExpHistogram::from_bytes(bytes).map_err(decode_error)?,
        })
    }

    fn is_ticks(&self) -> bool {
        matches!(self.inner.window(), Window::Ticks(_))
    }
}

#[pymethods]
impl PyExpHistogram {
    #[new]
    #[pyo3(signature = (window, epsilon = 0.1, *, time = false, interpolate = false))]
    fn new(window: u64, epsilon: f64, time: bool, interpolate: bool) -> PyResult<Self> {
        let h = if time {
            ExpHistogram::ticks(window, epsilon)
        } else {
            ExpHistogram::arrivals(window, epsilon)
        };
        let mut inner = h.map_err(|e| param_error(e, NAMES))?;
        if interpolate {
            inner = inner.with_interpolation();
        }
        Ok(PyExpHistogram { inner })
    }

    /// One event: an arrival (`value` is a bit, truthy or not) for an arrivals window, or a
    /// tick (`value` is the event's tick, never decreasing) for a ticks window. An arrivals
    /// window counts at most 2^62 arrivals: the next raises `ValueError`, changing nothing.
    fn update(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let r = if self.is_ticks() {
            let tick: u64 = value
                .extract()
                .map_err(|_| PyTypeError::new_err("tick: expected a non-negative int"))?;
            self.inner.record(tick)
        } else {
            self.inner.push(value.is_truthy()?)
        };
        r.map_err(|e| value_error(if self.is_ticks() { "tick" } else { "value" }, e))
    }

    /// Many events: bits (bools or 0/1) for an arrivals window, ticks for a ticks window;
    /// a list, a NumPy array or an iterable. The loop runs with the GIL released.
    fn update_many(&mut self, py: Python<'_>, values: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = integers(values, "values")?;
        let h = &mut self.inner;
        if matches!(h.window(), Window::Ticks(_)) {
            let ticks = to_u64(&v, "values")?;
            py.allow_threads(|| {
                ticks
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, &t)| h.record(t).map_err(|e| (i, e)))
            })
            .map_err(|(i, e)| value_error(&format!("values[{i}]"), e))
        } else {
            if let Some((i, x)) = v.iter().enumerate().find(|(_, &x)| x != 0 && x != 1) {
                return Err(value_error(
                    &format!("values[{i}]"),
                    format!("expected 0 or 1, got {x}"),
                ));
            }
            // An arrival past the clock's bound is refused by its index; those before it
            // stay added.
            py.allow_threads(|| {
                v.iter()
                    .enumerate()
                    .try_for_each(|(i, &x)| h.push(x == 1).map_err(|e| (i, e)))
            })
            .map_err(|(i, e)| value_error(&format!("values[{i}]"), e))
        }
    }

    /// Moves a ticks window's clock to `tick` without an event.
    fn advance_to(&mut self, tick: u64) -> PyResult<()> {
        self.inner
            .advance_to(tick)
            .map_err(|e| value_error("tick", e))
    }

    /// The count in the window with its guaranteed bracket.
    fn estimate(&self) -> PyEstimate {
        self.inner.estimate().into()
    }

    /// The interpolated estimate (with `interpolate=True`), else None.
    fn interpolated(&self) -> Option<PyEstimate> {
        self.inner.interpolated().map(Into::into)
    }

    /// The window's length (arrivals or ticks).
    #[getter]
    fn window(&self) -> u64 {
        self.inner.window().length()
    }

    /// Whether the window counts ticks.
    #[getter]
    fn time(&self) -> bool {
        self.is_ticks()
    }

    /// The clock: arrivals seen, or the latest tick.
    #[getter]
    fn now(&self) -> u64 {
        self.inner.now()
    }

    /// Buckets held.
    #[getter]
    fn buckets(&self) -> usize {
        self.inner.bucket_count()
    }

    /// The envelope.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A histogram from `to_bytes()`.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PyExpHistogram> {
        PyExpHistogram::decode(&bytes_arg(data)?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, &self.inner.to_bytes())
    }

    fn __repr__(&self) -> String {
        format!(
            "ExpHistogram(window={}, k={}, time={}, estimate={})",
            self.inner.window().length(),
            self.inner.k(),
            if self.is_ticks() { "True" } else { "False" },
            self.inner.estimate().value
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyExpHistogram>()?;
    Ok(())
}
