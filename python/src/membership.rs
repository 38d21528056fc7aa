//! Quotient filters: one that grows in place with a reserve, and a stack that never fills.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use tidemark::membership::{Exhausted, QuotientFilter, StackedFilter};

use crate::items::{for_each_chunk, item_bytes};
use crate::{bytes_arg, decode_error, param_error, reduce, CapacityError, PyEstimate};

const NAMES: &[(&str, &str)] = &[];

/// A quotient filter (Bender et al. 2012) that doubles in place, living `2^reserve` times
/// past its forecast, as `tidemark filter build --capacity N --fpr F --reserve R`. No false
/// negatives; false positives at about `fpr`.
///
/// >>> import tidemark
/// >>> f = tidemark.QuotientFilter(1000, 0.01)
/// >>> f.update_many(["a", "b"])
/// >>> "a" in f, len(f)
/// (True, 2)
#[pyclass(module = "tidemark", name = "QuotientFilter")]
pub struct PyQuotient {
    inner: QuotientFilter,
}

impl PyQuotient {
    pub fn decode(bytes: &[u8]) -> PyResult<PyQuotient> {
        Ok(PyQuotient {
            inner: QuotientFilter::from_bytes(bytes).map_err(decode_error)?,
        })
    }
}

#[pymethods]
impl PyQuotient {
    #[new]
    #[pyo3(signature = (capacity, fpr, reserve = 0))]
    fn new(capacity: u64, fpr: f64, reserve: u32) -> PyResult<Self> {
        let inner = QuotientFilter::with_reserve(capacity, fpr, reserve)
            .map_err(|e| param_error(e, NAMES))?;
        Ok(PyQuotient { inner })
    }

    /// Adds `item`; raises `tidemark.CapacityError` when the filter is full for good.
    fn update(&mut self, item: &Bound<'_, PyAny>) -> PyResult<()> {
        let b = item_bytes(item)?;
        self.inner
            .insert(&b)
            .map_err(|e| CapacityError::new_err(e.to_string()))
    }

    /// Adds every item, with the GIL released; raises `tidemark.CapacityError` naming how
    /// many went in when the filter fills for good.
    fn update_many(&mut self, py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<()> {
        let f = &mut self.inner;
        let hasher = f.hasher();
        for_each_chunk(items, "items", |offset, batch| {
            let mut done = offset;
            py.allow_threads(|| {
                batch.try_for_each_hash(hasher, |h| -> Result<(), Exhausted> {
                    f.insert_hash(h)?;
                    done += 1;
                    Ok(())
                })
            })
            .map_err(|e| CapacityError::new_err(format!("items[{done}]: {e}")))
        })
    }

    /// Whether the filter may hold `item` (never False for an item added).
    fn __contains__(&self, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.contains(&item_bytes(item)?))
    }

    /// The membership answer as an estimate: 1 (may hold, with the rate as the chance of a
    /// false positive) or 0 (guaranteed absent).
    fn query(&self, item: &Bound<'_, PyAny>) -> PyResult<PyEstimate> {
        Ok(self.inner.query(&item_bytes(item)?).into())
    }

    /// Removes one copy of `item`; returns whether it was found.
    fn remove(&mut self, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.remove(&item_bytes(item)?))
    }

    fn __len__(&self) -> usize {
        self.inner.len() as usize
    }

    /// Slots in the table.
    #[getter]
    fn slots(&self) -> u64 {
        self.inner.slots()
    }

    /// Keys over slots.
    #[getter]
    fn load(&self) -> f64 {
        self.inner.load()
    }

    /// The false-positive rate now.
    #[getter]
    fn fpr(&self) -> f64 {
        self.inner.fpr()
    }

    /// Doublings left before the filter is full for good.
    #[getter]
    fn doublings_left(&self) -> u32 {
        self.inner.remaining_doublings()
    }

    /// The most keys it can ever hold.
    #[getter]
    fn max_keys(&self) -> u64 {
        self.inner.max_keys()
    }

    /// Fingerprint bits.
    #[getter]
    fn fingerprint_bits(&self) -> u32 {
        self.inner.fingerprint_bits()
    }

    /// Memory, in bits.
    #[getter]
    fn bits(&self) -> u64 {
        self.inner.bits()
    }

    /// The envelope `tidemark filter build --save` writes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A filter from `to_bytes()` or `tidemark filter build --save`.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PyQuotient> {
        PyQuotient::decode(&bytes_arg(data)?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, &self.inner.to_bytes())
    }

    fn __repr__(&self) -> String {
        format!(
            "QuotientFilter(keys={}, slots={}, fingerprint_bits={}, fpr={:.3e})",
            self.inner.len(),
            self.inner.slots(),
            self.inner.fingerprint_bits(),
            self.inner.fpr()
        )
    }
}

/// A stack of quotient filters (×2 capacity, ×½ rate a layer) that never fills up, as
/// `tidemark filter build --stacked`.
///
/// >>> import tidemark
/// >>> s = tidemark.StackedFilter(100, 0.01)
/// >>> s.update_many(range(1000))
/// >>> all(i in s for i in range(1000))
/// True
#[pyclass(module = "tidemark", name = "StackedFilter")]
pub struct PyStacked {
    inner: StackedFilter,
}

impl PyStacked {
    pub fn decode(bytes: &[u8]) -> PyResult<PyStacked> {
        Ok(PyStacked {
            inner: StackedFilter::from_bytes(bytes).map_err(decode_error)?,
        })
    }
}

#[pymethods]
impl PyStacked {
    #[new]
    #[pyo3(signature = (capacity, fpr))]
    fn new(capacity: u64, fpr: f64) -> PyResult<Self> {
        let inner = StackedFilter::new(capacity, fpr).map_err(|e| param_error(e, NAMES))?;
        Ok(PyStacked { inner })
    }

    /// Adds `item`.
    fn update(&mut self, item: &Bound<'_, PyAny>) -> PyResult<()> {
        let b = item_bytes(item)?;
        self.inner.insert(&b);
        Ok(())
    }

    /// Adds every item, with the GIL released.
    fn update_many(&mut self, py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<()> {
        let f = &mut self.inner;
        let hasher = f.hasher();
        for_each_chunk(items, "items", |_, batch| {
            py.allow_threads(|| {
                batch.try_for_each_hash::<()>(hasher, |h| {
                    f.insert_hash(h);
                    Ok(())
                })
            })
            .ok();
            Ok(())
        })
    }

    /// Whether the stack may hold `item`.
    fn __contains__(&self, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.contains(&item_bytes(item)?))
    }

    /// The membership answer as an estimate.
    fn query(&self, item: &Bound<'_, PyAny>) -> PyResult<PyEstimate> {
        Ok(self.inner.query(&item_bytes(item)?).into())
    }

    /// Removes one copy of `item`; returns whether it was found.
    fn remove(&mut self, item: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.remove(&item_bytes(item)?))
    }

    fn __len__(&self) -> usize {
        self.inner.len() as usize
    }

    /// Layers in the stack.
    #[getter]
    fn layers(&self) -> usize {
        self.inner.layers()
    }

    /// The false-positive rate now (union over the layers).
    #[getter]
    fn fpr(&self) -> f64 {
        self.inner.fpr()
    }

    /// Memory, in bits.
    #[getter]
    fn bits(&self) -> u64 {
        self.inner.bits()
    }

    /// The envelope `tidemark filter build --stacked --save` writes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A stack from `to_bytes()` or the command line.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PyStacked> {
        PyStacked::decode(&bytes_arg(data)?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, &self.inner.to_bytes())
    }

    fn __repr__(&self) -> String {
        format!(
            "StackedFilter(keys={}, layers={}, fpr={:.3e})",
            self.inner.len(),
            self.inner.layers(),
            self.inner.fpr()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyQuotient>()?;
    m.add_class::<PyStacked>()?;
    Ok(())
}
