//! Count-Min: plain, dyadic (ranges, quantiles), heavy hitters and top-k.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString, PyTuple};

use tidemark::frequency::{
    AnyCountMin, CountMin, DyadicCountMin, FrequencyError, HeavyHitters, Model, TopK,
};

use crate::items::{
    extract_batch, for_each_chunk, for_each_chunk_overlapped, int_column, integers, item_bytes,
    parallel, to_i64, to_u64, Batch, PARALLEL_MIN,
};
use crate::{bytes_arg, decode_error, param_error, reduce, value_error, PyEstimate};

const NAMES: &[(&str, &str)] = &[
    ("width", "epsilon"),
    ("depth", "delta"),
    ("k", "k"),
    ("phi", "phi"),
];

fn model_arg(model: &str) -> PyResult<Model> {
    Ok(match model {
        "cash" => Model::CashRegister,
        "turnstile" => Model::NonNegativeTurnstile,
        "general" => Model::GeneralTurnstile,
        other => {
            return Err(value_error(
                "model",
                format!("expected 'cash', 'turnstile' or 'general', got {other:?}"),
            ))
        }
    })
}

fn model_name(m: Model) -> &'static str {
    match m {
        Model::CashRegister => "cash",
        Model::NonNegativeTurnstile => "turnstile",
        _ => "general",
    }
}

/// A frequency error as a Python exception: merges as `tidemark.MergeError`, the rest as
/// `ValueError` naming `what`.
fn freq_error(e: FrequencyError, what: &str) -> PyErr {
    match e {
        FrequencyError::Incompatible(m) => crate::merge_error(m),
        other => value_error(what, other),
    }
}

/// An item's bytes as Python: `str` when they are UTF-8, else `bytes`.
fn item_object(py: Python<'_>, item: &[u8]) -> PyObject {
    match std::str::from_utf8(item) {
        Ok(s) => PyString::new(py, s).into_any().unbind(),
        Err(_) => PyBytes::new(py, item).into_any().unbind(),
    }
}

/// Adds a batch with its counts; an error names the first item that failed (the items
/// before it stay added).
fn update_batch(
    batch: &Batch,
    counts: &[i64],
    mut f: impl FnMut(&[u8], i64) -> Result<(), FrequencyError>,
) -> Result<(), (usize, FrequencyError)> {
    let mut i = 0;
    batch.try_for_each(|b| {
        f(b, counts[i]).map_err(|e| (i, e))?;
        i += 1;
        Ok(())
    })
}

fn counts_for(batch: &Batch, counts: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<i64>> {
    match counts {
        None => Ok(vec![1; batch.len()]),
        Some(c) => to_i64(&int_column(c, batch.len(), "counts")?, "counts"),
    }
}

/// The Count-Min sketch (Cormode–Muthukrishnan 2005): item frequencies within ε‖a‖₁ with
/// probability 1 − δ, as `tidemark freq --epsilon E --delta D --model M [--conservative]`.
///
/// >>> import tidemark
/// >>> cm = tidemark.CountMin(epsilon=0.01, delta=0.01)
/// >>> cm.update_many(["a", "b", "a"])
/// >>> e = cm.query("a")
/// >>> e.low <= 2 <= e.high
/// True
#[pyclass(module = "tidemark", name = "CountMin")]
pub struct PyCountMin {
    pub(crate) inner: CountMin,
}

impl PyCountMin {
    /// Adds a batch whose first item is item `offset` of the call; `counts` (all of the
    /// call's, or None for ones) is read from `offset`.
    fn apply(
        &mut self,
        py: Python<'_>,
        batch: &Batch<'_>,
        offset: usize,
        counts: Option<&[i64]>,
    ) -> PyResult<()> {
        let cm = &mut self.inner;
        let hasher = cm.hasher();
        let mut i = offset;
        py.allow_threads(|| {
            batch.try_for_each_hash(hasher, |h| {
                let c = counts.map_or(1, |c| c.get(i).copied().unwrap_or(1));
                cm.update_hash(h, c).map_err(|e| (i, e))?;
                i += 1;
                Ok(())
            })
        })
        .map_err(|(i, e)| freq_error(e, &format!("counts[{i}]")))
    }

    pub fn decode(bytes: &[u8]) -> PyResult<PyCountMin> {
        Ok(PyCountMin {
            inner: CountMin::from_bytes(bytes).map_err(decode_error)?,
        })
    }
}

#[pymethods]
impl PyCountMin {
    #[new]
    #[pyo3(signature = (epsilon = 0.001, delta = 0.01, *, model = "cash", conservative = false))]
    fn new(epsilon: f64, delta: f64, model: &str, conservative: bool) -> PyResult<Self> {
        let model = model_arg(model)?;
        let mut cm = CountMin::new(epsilon, delta, model).map_err(|e| param_error(e, NAMES))?;
        if conservative {
            cm = cm
                .conservative()
                .map_err(|e| value_error("conservative", e))?;
        }
        Ok(PyCountMin { inner: cm })
    }

    /// Adds `count` (default 1) to `item`'s frequency.
    #[pyo3(signature = (item, count = 1))]
    fn update(&mut self, item: &Bound<'_, PyAny>, count: i64) -> PyResult<()> {
        let b = item_bytes(item)?;
        self.inner
            .update(&b, count)
            .map_err(|e| freq_error(e, "count"))
    }

    /// Adds every item (count 1 each, or `counts[i]`, or one int for all), hashing with the
    /// GIL released. An invalid count raises `ValueError` naming its index; the items before
    /// it stay added.
    #[pyo3(signature = (items, counts = None))]
    fn update_many(
        &mut self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        counts: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let n = items.len().ok();
        let counts = match (counts, n) {
            (None, _) => None,
            (Some(c), Some(n)) => Some(to_i64(&int_column(c, n, "counts")?, "counts")?),
            (Some(c), None) => {
                // An iterable without a length: materialise it first.
                let batch = extract_batch(items, "items")?;
                let v = to_i64(&int_column(c, batch.len(), "counts")?, "counts")?;
                return self.apply(py, &batch, 0, Some(&v));
            }
        };
        // Ones into a plain sketch: counters add, so two threads each fill a sketch of the
        // same shape with half the items and the halves merge into exactly the sequential
        // sketch (checked by the tests against TIDEMARK_THREADS=1).
        let split = counts.is_none()
            && !self.inner.is_conservative()
            && n.is_some_and(|n| n >= PARALLEL_MIN)
            && self.inner.counters().len() <= 1 << 22
            && parallel();
        // A twin takes half the batch: `emptied` has this sketch's hasher, shape, model, update
        // rule and rows, so it merges back.
        if let Some(mut t) = split.then(|| self.inner.emptied()) {
            // Ones into two sketches: the copying of a list overlapped with the counting.
            let hasher = self.inner.hasher();
            let cm = &mut self.inner;
            let counted = for_each_chunk_overlapped(py, items, "items", |batch| {
                if batch.len() >= PARALLEL_MIN {
                    batch.split_for_each_hash(hasher, cm, &mut t, |s, h| s.update_hash(h, 1))
                } else {
                    batch.try_for_each_hash(hasher, |h| cm.update_hash(h, 1))
                }
            });
            // What was counted stays counted, an error or not.
            let merged = self.inner.merge(&t).map_err(|e| freq_error(e, "items"));
            counted?.map_err(|e| freq_error(e, "items"))?;
            return merged;
        }
        for_each_chunk(items, "items", |offset, batch| {
            self.apply(py, batch, offset, counts.as_deref())
        })
    }

    /// `item`'s estimated frequency, with its bracket.
    fn query(&self, item: &Bound<'_, PyAny>) -> PyResult<PyEstimate> {
        Ok(self.inner.point(&item_bytes(item)?).into())
    }

    /// The join size (inner product) with a sketch of the same shape.
    fn inner_product(&self, other: PyRef<'_, PyCountMin>) -> PyResult<PyEstimate> {
        self.inner
            .inner_product(&other.inner)
            .map(Into::into)
            .map_err(|e| freq_error(e, "other"))
    }

    /// Adds `other`'s counts (same shape and hash, or `tidemark.MergeError`).
    fn merge(slf: &Bound<'_, Self>, other: &Bound<'_, PyCountMin>) -> PyResult<()> {
        // Borrowed one after the other, so `x.merge(x)` works (as with a copy of x).
        let o = crate::read_other(other, |o| o.inner.clone())?;
        crate::write_self(slf)?
            .inner
            .merge(&o)
            .map_err(|e| freq_error(e, "other"))
    }

    /// Subtracts `other`'s counts (turnstile models only).
    fn subtract(slf: &Bound<'_, Self>, other: &Bound<'_, PyCountMin>) -> PyResult<()> {
        // Borrowed one after the other, so `x.subtract(x)` works (as with a copy of x).
        let o = crate::read_other(other, |o| o.inner.clone())?;
        crate::write_self(slf)?
            .inner
            .subtract(&o)
            .map_err(|e| freq_error(e, "other"))
    }

    /// The sum of all counts (exact).
    #[getter]
    fn total(&self) -> i64 {
        self.inner.total()
    }

    /// Columns w = ⌈e/ε⌉.
    #[getter]
    fn width(&self) -> usize {
        self.inner.width()
    }

    /// Rows d = ⌈ln 1/δ⌉.
    #[getter]
    fn depth(&self) -> usize {
        self.inner.depth()
    }

    /// ε.
    #[getter]
    fn epsilon(&self) -> f64 {
        self.inner.epsilon()
    }

    /// δ.
    #[getter]
    fn delta(&self) -> f64 {
        self.inner.delta()
    }

    /// `cash`, `turnstile` or `general`.
    #[getter]
    fn model(&self) -> &'static str {
        model_name(self.inner.model())
    }

    /// The envelope `tidemark freq --save` writes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A sketch from `to_bytes()` or `tidemark freq --save`.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PyCountMin> {
        PyCountMin::decode(&bytes_arg(data)?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, &self.inner.to_bytes())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        match other.downcast::<PyCountMin>() {
            Ok(o) => crate::read_other(o, |o| o.inner.to_bytes() == self.inner.to_bytes()),
            Err(_) => Ok(false),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "CountMin(width={}, depth={}, model={:?}, total={})",
            self.inner.width(),
            self.inner.depth(),
            model_name(self.inner.model()),
            self.inner.total()
        )
    }
}

/// Dyadic Count-Min over integer items in [0, 2^bits): point, range sums, quantiles, heavy
/// hitters and top-k (cash register or non-negative turnstile), as `tidemark freq --range`.
///
/// >>> import tidemark
/// >>> d = tidemark.DyadicCountMin(epsilon=0.001, delta=0.01, bits=16)
/// >>> d.update_many([1, 2, 3, 100])
/// >>> d.range(0, 10).value
/// 3.0
#[pyclass(module = "tidemark", name = "DyadicCountMin")]
pub struct PyDyadic {
    inner: DyadicCountMin,
}

impl PyDyadic {
    pub fn decode(bytes: &[u8]) -> PyResult<PyDyadic> {
        Ok(PyDyadic {
            inner: DyadicCountMin::from_bytes(bytes).map_err(decode_error)?,
        })
    }
}

#[pymethods]
impl PyDyadic {
    #[new]
    #[pyo3(signature = (epsilon = 0.001, delta = 0.01, bits = 32, *, model = "cash"))]
    fn new(epsilon: f64, delta: f64, bits: u32, model: &str) -> PyResult<Self> {
        let model = model_arg(model)?;
        let inner =
            DyadicCountMin::new(epsilon, delta, bits, model).map_err(|e| param_error(e, NAMES))?;
        Ok(PyDyadic { inner })
    }

    /// Adds `count` to integer item `x`.
    #[pyo3(signature = (x, count = 1))]
    fn update(&mut self, x: u64, count: i64) -> PyResult<()> {
        self.inner.update(x, count).map_err(|e| freq_error(e, "x"))
    }

    /// Adds every integer item (count 1 each, or `counts[i]`), with the GIL released.
    #[pyo3(signature = (items, counts = None))]
    fn update_many(
        &mut self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        counts: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let xs = to_u64(&integers(items, "items")?, "items")?;
        let counts = match counts {
            None => vec![1; xs.len()],
            Some(c) => to_i64(&int_column(c, xs.len(), "counts")?, "counts")?,
        };
        let d = &mut self.inner;
        py.allow_threads(|| {
            xs.iter()
                .zip(&counts)
                .enumerate()
                .try_for_each(|(i, (&x, &c))| d.update(x, c).map_err(|e| (i, e)))
        })
        .map_err(|(i, e)| freq_error(e, &format!("items[{i}]")))
    }

    /// `x`'s estimated frequency.
    fn query(&self, x: u64) -> PyResult<PyEstimate> {
        self.inner
            .point(x)
            .map(Into::into)
            .map_err(|e| freq_error(e, "x"))
    }

    /// The sum of frequencies of the items in [lo, hi].
    fn range(&self, lo: u64, hi: u64) -> PyResult<PyEstimate> {
        self.inner
            .range(lo, hi)
            .map(Into::into)
            .map_err(|e| freq_error(e, "range"))
    }

    /// The q-quantile, q in (0, 1]: `(item, estimate of its rank)`.
    fn quantile(&self, q: f64) -> PyResult<(u64, PyEstimate)> {
        if !(q > 0.0 && q <= 1.0) {
            return Err(value_error("q", format!("expected Q in (0, 1], got {q}")));
        }
        self.inner
            .quantile(q)
            .map(|(x, e)| (x, e.into()))
            .map_err(|e| freq_error(e, "q"))
    }

    /// The items whose frequency reaches phi·‖a‖₁, with their estimates.
    fn heavy_hitters(&self, phi: f64) -> PyResult<Vec<(u64, PyEstimate)>> {
        if !(phi > 0.0 && phi <= 1.0) {
            return Err(value_error(
                "phi",
                format!("expected PHI in (0, 1], got {phi}"),
            ));
        }
        self.inner
            .heavy_hitters(phi)
            .map(|v| v.into_iter().map(|(x, e)| (x, e.into())).collect())
            .map_err(|e| freq_error(e, "phi"))
    }

    /// The k most frequent items, with their estimates.
    fn top(&self, k: usize) -> PyResult<Vec<(u64, PyEstimate)>> {
        if k == 0 {
            return Err(value_error("k", "expected at least 1, got 0"));
        }
        Ok(self
            .inner
            .top_k(k)
            .into_iter()
            .map(|(x, e)| (x, e.into()))
            .collect())
    }

    /// Adds `other`'s counts (same shape, or `tidemark.MergeError`).
    fn merge(slf: &Bound<'_, Self>, other: &Bound<'_, PyDyadic>) -> PyResult<()> {
        // Borrowed one after the other, so `x.merge(x)` works (as with a copy of x).
        let o = crate::read_other(other, |o| o.inner.clone())?;
        crate::write_self(slf)?
            .inner
            .merge(&o)
            .map_err(|e| freq_error(e, "other"))
    }

    /// The sum of all counts.
    #[getter]
    fn total(&self) -> i64 {
        self.inner.total()
    }

    /// The universe is [0, 2^bits).
    #[getter]
    fn bits(&self) -> u32 {
        self.inner.bits()
    }

    /// The envelope `tidemark freq --range … --save` writes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A sketch from `to_bytes()`.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PyDyadic> {
        PyDyadic::decode(&bytes_arg(data)?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, &self.inner.to_bytes())
    }

    fn __repr__(&self) -> String {
        format!(
            "DyadicCountMin(bits={}, width={}, depth={}, model={:?}, total={})",
            self.inner.bits(),
            self.inner.width(),
            self.inner.depth(),
            model_name(self.inner.model()),
            self.inner.total()
        )
    }
}

/// Heavy hitters: the items reaching phi·‖a‖₁ over a cash-register Count-Min, as
/// `tidemark freq --heavy PHI`. Items come back as `str` (bytes that are not UTF-8 as
/// `bytes`). It pickles (its Count-Min's envelope and its candidates); it has no envelope of
/// its own: `.sketch.to_bytes()` is what `tidemark freq --save` writes.
///
/// >>> import tidemark
/// >>> hh = tidemark.HeavyHitters(0.3, epsilon=0.01)
/// >>> hh.update_many(["a"] * 50 + ["b"] * 10 + list("cdefghij"))
/// >>> [item for item, e in hh.heavy_hitters()]
/// ['a']
#[pyclass(module = "tidemark", name = "HeavyHitters")]
pub struct PyHeavy {
    inner: HeavyHitters,
}

#[pymethods]
impl PyHeavy {
    #[new]
    #[pyo3(signature = (phi, epsilon = 0.001, delta = 0.01, *, conservative = false))]
    fn new(phi: f64, epsilon: f64, delta: f64, conservative: bool) -> PyResult<Self> {
        if !(phi > 0.0 && phi <= 1.0) {
            return Err(value_error(
                "phi",
                format!("expected PHI in (0, 1], got {phi}"),
            ));
        }
        let cm = candidates_sketch(epsilon, delta, conservative)?;
        let inner = HeavyHitters::with_sketch(phi, cm).map_err(|e| param_error(e, NAMES))?;
        Ok(PyHeavy { inner })
    }

    /// Adds `count` (default 1, positive) occurrences of `item`.
    #[pyo3(signature = (item, count = 1))]
    fn update(&mut self, item: &Bound<'_, PyAny>, count: i64) -> PyResult<()> {
        let b = item_bytes(item)?;
        self.inner
            .insert(&b, count)
            .map_err(|e| freq_error(e, "count"))
    }

    /// Adds every item (count 1 each, or `counts[i]`), with the GIL released.
    #[pyo3(signature = (items, counts = None))]
    fn update_many(
        &mut self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        counts: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let h = &mut self.inner;
        update_counted(py, items, counts, |b, c| h.insert(b, c))
    }

    /// The heavy hitters, most frequent first: `[(item, Estimate)]`.
    fn heavy_hitters(&self, py: Python<'_>) -> Vec<(PyObject, PyEstimate)> {
        named(py, self.inner.heavy_hitters())
    }

    /// `item`'s estimated frequency.
    fn query(&self, item: &Bound<'_, PyAny>) -> PyResult<PyEstimate> {
        Ok(self.inner.sketch().point(&item_bytes(item)?).into())
    }

    /// A copy of the underlying Count-Min sketch.
    #[getter]
    fn sketch(&self) -> PyCountMin {
        PyCountMin {
            inner: self.inner.sketch().clone(),
        }
    }

    /// φ.
    #[getter]
    fn phi(&self) -> f64 {
        self.inner.phi()
    }

    /// Pickles as its parts: φ, the Count-Min's envelope, the candidates and when the next
    /// sweep runs, so that the copy answers as this one now and after further updates.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let h = &self.inner;
        let mut candidates: Vec<&[u8]> = h.candidate_items().collect();
        // In a fixed order, so that equal heavy hitters pickle to equal bytes.
        candidates.sort_unstable();
        let candidates =
            pyo3::types::PyList::new(py, candidates.into_iter().map(|c| PyBytes::new(py, c)))?;
        let args = (
            h.phi(),
            PyBytes::new(py, &h.sketch().to_bytes()),
            candidates,
            h.next_sweep(),
        );
        restorer(
            py,
            "_restore_heavy_hitters",
            args.into_pyobject(py)?.into_any(),
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "HeavyHitters(phi={}, total={}, candidates={})",
            self.inner.phi(),
            self.inner.sketch().total(),
            self.inner.candidates()
        )
    }
}

/// The k most frequent items over a cash-register Count-Min, as `tidemark freq --top K`.
///
/// >>> import tidemark
/// >>> t = tidemark.TopK(2, epsilon=0.01)
/// >>> t.update_many(["a"] * 5 + ["b"] * 3 + ["c"])
/// >>> [item for item, e in t.top()]
/// ['a', 'b']
#[pyclass(module = "tidemark", name = "TopK")]
pub struct PyTopK {
    inner: TopK,
}

#[pymethods]
impl PyTopK {
    #[new]
    #[pyo3(signature = (k, epsilon = 0.001, delta = 0.01, *, conservative = false))]
    fn new(k: usize, epsilon: f64, delta: f64, conservative: bool) -> PyResult<Self> {
        if k == 0 {
            return Err(value_error("k", "expected at least 1, got 0"));
        }
        let cm = candidates_sketch(epsilon, delta, conservative)?;
        let inner = TopK::with_sketch(k, cm).map_err(|e| param_error(e, NAMES))?;
        Ok(PyTopK { inner })
    }

    /// Adds `count` (default 1, positive) occurrences of `item`.
    #[pyo3(signature = (item, count = 1))]
    fn update(&mut self, item: &Bound<'_, PyAny>, count: i64) -> PyResult<()> {
        let b = item_bytes(item)?;
        self.inner
            .insert(&b, count)
            .map_err(|e| freq_error(e, "count"))
    }

    /// Adds every item (count 1 each, or `counts[i]`), with the GIL released.
    #[pyo3(signature = (items, counts = None))]
    fn update_many(
        &mut self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        counts: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let t = &mut self.inner;
        update_counted(py, items, counts, |b, c| t.insert(b, c))
    }

    /// The k best, most frequent first: `[(item, Estimate)]`.
    fn top(&self, py: Python<'_>) -> Vec<(PyObject, PyEstimate)> {
        named(py, self.inner.top())
    }

    /// `item`'s estimated frequency.
    fn query(&self, item: &Bound<'_, PyAny>) -> PyResult<PyEstimate> {
        Ok(self.inner.sketch().point(&item_bytes(item)?).into())
    }

    /// A copy of the underlying Count-Min sketch.
    #[getter]
    fn sketch(&self) -> PyCountMin {
        PyCountMin {
            inner: self.inner.sketch().clone(),
        }
    }

    /// Pickles as its parts: k, the Count-Min's envelope, and the items held with the
    /// estimates a newcomer must beat, so that the copy answers as this one.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let t = &self.inner;
        let mut held: Vec<(&[u8], i64)> = t.held().collect();
        held.sort_unstable();
        let held = pyo3::types::PyList::new(
            py,
            held.into_iter()
                .map(|(item, v)| (PyBytes::new(py, item), v).into_pyobject(py))
                .collect::<PyResult<Vec<_>>>()?,
        )?;
        let args = (t.k(), PyBytes::new(py, &t.sketch().to_bytes()), held);
        restorer(py, "_restore_top_k", args.into_pyobject(py)?.into_any())
    }

    fn __repr__(&self) -> String {
        format!("TopK(total={})", self.inner.sketch().total())
    }
}

/// `(tidemark._tidemark.<name>, args)`: how the summaries without an envelope of their own
/// pickle.
fn restorer<'py>(
    py: Python<'py>,
    name: &str,
    args: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    let f = py.import("tidemark._tidemark")?.getattr(name)?;
    PyTuple::new(py, [f, args])
}

/// Unpickles `HeavyHitters` from the parts its `__reduce__` gives.
#[pyfunction]
fn _restore_heavy_hitters(
    phi: f64,
    sketch: &Bound<'_, PyAny>,
    candidates: Vec<Vec<u8>>,
    next_sweep: usize,
) -> PyResult<PyHeavy> {
    let cm = PyCountMin::decode(&bytes_arg(sketch)?)?.inner;
    let inner = HeavyHitters::from_parts(phi, cm, candidates, next_sweep)
        .map_err(|e| param_error(e, NAMES))?;
    Ok(PyHeavy { inner })
}

/// Unpickles `TopK` from the parts its `__reduce__` gives.
#[pyfunction]
fn _restore_top_k(
    k: usize,
    sketch: &Bound<'_, PyAny>,
    held: Vec<(Vec<u8>, i64)>,
) -> PyResult<PyTopK> {
    let cm = PyCountMin::decode(&bytes_arg(sketch)?)?.inner;
    let inner = TopK::from_parts(k, cm, held).map_err(|e| param_error(e, NAMES))?;
    Ok(PyTopK { inner })
}

/// The Count-Min sketch behind heavy hitters or top-k: a cash register, conservative if asked.
fn candidates_sketch(epsilon: f64, delta: f64, conservative: bool) -> PyResult<CountMin> {
    let cm =
        CountMin::new(epsilon, delta, Model::CashRegister).map_err(|e| param_error(e, NAMES))?;
    if conservative {
        cm.conservative()
            .map_err(|e| value_error("conservative", e))
    } else {
        Ok(cm)
    }
}

/// Items with their counts (`count 1 each, or counts[i]`) inserted by `insert`, with the GIL
/// released; an error names the count's index.
fn update_counted(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    counts: Option<&Bound<'_, PyAny>>,
    insert: impl FnMut(&[u8], i64) -> Result<(), FrequencyError> + Send,
) -> PyResult<()> {
    let batch = extract_batch(items, "items")?;
    let counts = counts_for(&batch, counts)?;
    py.allow_threads(|| update_batch(&batch, &counts, insert))
        .map_err(|(i, e)| freq_error(e, &format!("counts[{i}]")))
}

/// Named items for Python: `[(item, Estimate)]`.
fn named(py: Python<'_>, items: Vec<(Vec<u8>, tidemark::Estimate)>) -> Vec<(PyObject, PyEstimate)> {
    items
        .into_iter()
        .map(|(i, e)| (item_object(py, &i), e.into()))
        .collect()
}

/// Decodes either Count-Min kind.
pub fn decode_any(py: Python<'_>, bytes: &[u8]) -> PyResult<PyObject> {
    Ok(
        match AnyCountMin::from_bytes(bytes).map_err(decode_error)? {
            AnyCountMin::CountMin(cm) => PyCountMin { inner: cm }
                .into_pyobject(py)?
                .into_any()
                .unbind(),
            AnyCountMin::Dyadic(d) => PyDyadic { inner: d }.into_pyobject(py)?.into_any().unbind(),
        },
    )
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCountMin>()?;
    m.add_class::<PyDyadic>()?;
    m.add_class::<PyHeavy>()?;
    m.add_class::<PyTopK>()?;
    m.add_function(wrap_pyfunction!(_restore_heavy_hitters, m)?)?;
    m.add_function(wrap_pyfunction!(_restore_top_k, m)?)?;
    Ok(())
}
