//! HyperLogLog, ExaLogLog, the ring window and the sliding HyperLogLog.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use tidemark::cardinality::{ExaLogLog, Hll, RingWindow, SlidingError, SlidingHll};
use tidemark::hash::ItemHasher;

use crate::items::{
    binary_integers, binary_word, extract_batch, for_each_chunk_overlapped, for_each_word_chunk,
    int_column, item_bytes, to_u64, Batch,
};
use crate::{bytes_arg, decode_error, merge_error, param_error, reduce, value_error, PyEstimate};

const P_NAMES: &[(&str, &str)] = &[("p", "precision")];

fn check_precision(p: u8) -> PyResult<()> {
    if !(4..=18).contains(&p) {
        return Err(value_error(
            "precision",
            format!("expected 4..=18, got {p}"),
        ));
    }
    Ok(())
}

fn check_confidence(c: f64) -> PyResult<()> {
    if !(c > 0.0 && c < 1.0) {
        return Err(value_error(
            "confidence",
            format!("expected a number in (0, 1), got {c}"),
        ));
    }
    Ok(())
}

/// HyperLogLog: distinct items, exact while small, then sparse, then dense.
///
/// The same parameters as `tidemark distinct`: `precision` p in 4..=18 (2^p registers,
/// standard error about 1.04/√(2^p)), `redis=True` for Redis mode (MurmurHash64A, p = 14,
/// counted as PFCOUNT counts, `to_redis()` gives a `HYLL` value), `confidence` of the
/// bracket.
///
/// >>> import tidemark
/// >>> h = tidemark.HyperLogLog(12)
/// >>> h.update_many(range(1000))
/// >>> e = h.estimate()
/// >>> 950 < e.value < 1050 and e.low <= e.value <= e.high
/// True
/// >>> tidemark.HyperLogLog.from_bytes(h.to_bytes()).estimate().value == e.value
/// True
#[pyclass(module = "tidemark", name = "HyperLogLog")]
pub struct PyHll {
    inner: Hll,
}

impl PyHll {
    pub fn from_tdmk(bytes: &[u8]) -> PyResult<PyHll> {
        Ok(PyHll {
            inner: Hll::from_bytes(bytes).map_err(decode_error)?,
        })
    }

    pub fn from_redis_bytes(bytes: &[u8]) -> PyResult<PyHll> {
        Ok(PyHll {
            inner: Hll::from_redis(bytes)
                .map_err(|e| crate::TidemarkDecodeError::new_err(e.to_string()))?,
        })
    }
}

#[pymethods]
impl PyHll {
    #[new]
    #[pyo3(signature = (precision = None, *, redis = false, confidence = 0.95))]
    fn new(precision: Option<u8>, redis: bool, confidence: f64) -> PyResult<Self> {
        check_confidence(confidence)?;
        let h = if redis {
            if let Some(p) = precision.filter(|&p| p != 14) {
                return Err(value_error(
                    "precision",
                    format!("Redis mode has p = 14, got {p}"),
                ));
            }
            Hll::redis()
        } else {
            let p = precision.unwrap_or(14);
            check_precision(p)?;
            Hll::new(p).map_err(|e| param_error(e, P_NAMES))?
        };
        let inner = h
            .with_confidence(confidence)
            .map_err(|e| param_error(e, &[]))?;
        Ok(PyHll { inner })
    }

    /// Adds one item (str, bytes, int or float; see the module's notes on hashing).
    #[pyo3(signature = (item, *, integers = "text"))]
    fn update(&mut self, item: &Bound<'_, PyAny>, integers: &str) -> PyResult<()> {
        if binary_integers(integers)? {
            no_binary_in_redis(&self.inner)?;
            let x = binary_word(item)?;
            self.inner.insert_u64(x);
        } else {
            let b = item_bytes(item)?;
            self.inner.insert(&b);
        }
        Ok(())
    }

    /// Adds every item of a list, a NumPy array, a buffer or an iterable, hashing with the
    /// GIL released. `integers="binary"` hashes integers as their eight little-endian bytes
    /// (as `tidemark distinct --binary-integers` does) instead of their decimal text: about
    /// three times faster, and a sketch of its own (use one way for a sketch).
    #[pyo3(signature = (items, *, integers = "text"))]
    fn update_many(
        &mut self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        integers: &str,
    ) -> PyResult<()> {
        if binary_integers(integers)? {
            no_binary_in_redis(&self.inner)?;
        }
        let h = &mut self.inner;
        insert_many(py, items, integers, h.hasher(), &mut |x| h.insert_hash(x))
    }

    /// The distinct count with its bracket: the exact count while exact; PFCOUNT's in Redis
    /// mode; else the HIP (martingale) estimate of a sketch fed by one stream (`hll-hip`),
    /// Ertl's estimator once merged (`hll-ertl`).
    fn estimate(&self) -> PyEstimate {
        self.inner.estimate().into()
    }

    /// The HIP (historic inverse probability) estimate, when the sketch has one (built by
    /// inserts only, never merged).
    fn estimate_hip(&self) -> Option<PyEstimate> {
        self.inner.estimate_martingale().map(Into::into)
    }

    /// What Redis's PFCOUNT answers for this sketch (Redis mode only: PFCOUNT's formula is
    /// for Redis's 16,384 registers and hash).
    fn pfcount(&self) -> PyResult<u64> {
        if !self.inner.is_redis() {
            return Err(value_error(
                "redis",
                "pfcount() is PFCOUNT's count, for a sketch in Redis mode (HyperLogLog(redis=True) or from_redis)",
            ));
        }
        Ok(self.inner.pfcount())
    }

    /// Merges `other` in (register-wise maximum; at the smaller precision if they differ).
    /// Sketches of different hashes raise `tidemark.MergeError`.
    fn merge(slf: &Bound<'_, Self>, other: &Bound<'_, PyHll>) -> PyResult<()> {
        // Borrowed one after the other, so `x.merge(x)` works (as with a copy of x).
        let o = crate::read_other(other, |o| o.inner.clone())?;
        crate::write_self(slf)?.inner.merge(&o).map_err(merge_error)
    }

    /// A merged copy of the two sketches.
    fn __or__(&self, other: PyRef<'_, PyHll>) -> PyResult<PyHll> {
        let mut h = self.inner.clone();
        h.merge(&other.inner).map_err(merge_error)?;
        Ok(PyHll { inner: h })
    }

    /// A copy.
    fn copy(&self) -> PyHll {
        PyHll {
            inner: self.inner.clone(),
        }
    }

    /// The precision p.
    #[getter]
    fn precision(&self) -> u8 {
        self.inner.precision()
    }

    /// The bracket's confidence.
    #[getter]
    fn confidence(&self) -> f64 {
        self.inner.confidence()
    }

    /// Whether the sketch is in Redis mode.
    #[getter]
    fn redis(&self) -> bool {
        self.inner.is_redis()
    }

    /// `exact`, `sparse` or `dense`.
    #[getter]
    fn representation(&self) -> &'static str {
        self.inner.representation().name()
    }

    /// Memory held, in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.bytes()
    }

    /// The envelope `tidemark distinct --save` writes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A sketch from `to_bytes()` or `tidemark distinct --save`; raises
    /// `tidemark.DecodeError` on anything else.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PyHll> {
        PyHll::from_tdmk(&bytes_arg(data)?)
    }

    /// A Redis `HYLL` value (what `GET` returns for a PFADD key, and what
    /// `tidemark distinct --redis --save` writes); the sketch must be in Redis mode.
    fn to_redis<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let b = self
            .inner
            .to_redis()
            .map_err(|e| value_error("redis", format!("cannot write a Redis value: {e}")))?;
        Ok(PyBytes::new(py, &b))
    }

    /// A sketch from a Redis `HYLL` value.
    #[staticmethod]
    fn from_redis(data: &Bound<'_, PyAny>) -> PyResult<PyHll> {
        PyHll::from_redis_bytes(&bytes_arg(data)?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, &self.inner.to_bytes())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        match other.downcast::<PyHll>() {
            Ok(o) => crate::read_other(o, |o| o.inner == self.inner),
            Err(_) => Ok(false),
        }
    }

    fn __repr__(&self) -> String {
        let e = self.inner.estimate();
        format!(
            "HyperLogLog(precision={}{}, representation={:?}, estimate={})",
            self.inner.precision(),
            if self.inner.is_redis() {
                ", redis=True"
            } else {
                ""
            },
            self.inner.representation().name(),
            e.value
        )
    }
}

/// Feeds every item of `items` to `insert` as its hash: text (or bytes, floats, integers as
/// their decimal text) with `integers="text"`, 64-bit words with `"binary"`, hashing with the
/// GIL released. What `update_many` of the distinct-count sketches shares.
fn insert_many(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    integers: &str,
    hasher: ItemHasher,
    insert: &mut (dyn FnMut(u64) + Send),
) -> PyResult<()> {
    if binary_integers(integers)? {
        return for_each_word_chunk(items, "items", |batch| {
            let each = |x| {
                insert(x);
                Ok::<(), ()>(())
            };
            match py.allow_threads(|| batch.try_for_each_binary_hash(hasher, each)) {
                Some(_) => Ok(()),
                None => Err(PyTypeError::new_err(
                    "items: integers=\"binary\" takes integers (a NumPy integer array, or a \
                     list or tuple of ints within 64 bits)",
                )),
            }
        });
    }
    for_each_chunk_overlapped(py, items, "items", |batch| {
        batch.try_for_each_hash(hasher, |x| {
            insert(x);
            Ok::<(), ()>(())
        })
    })
    .map(|_| ())
}

/// ExaLogLog: distinct items with HyperLogLog's answers in about 60% fewer bytes at rest.
///
/// The same sketch as `tidemark distinct --sketch exaloglog`: `precision` p in 4..=18 (2^p
/// registers; default 11, HyperLogLog p = 14's error of 0.8%), `t` and `d` (the paper's 2 and
/// 20: 28 bits a register), `confidence` of the bracket. A sketch fed by one stream answers
/// with its martingale estimate; a merged one by maximum likelihood.
///
/// >>> import tidemark
/// >>> e = tidemark.ExaLogLog(8)
/// >>> e.update_many(range(100_000))
/// >>> est = e.estimate()
/// >>> 93_000 < est.value < 107_000 and est.method == "exaloglog-martingale"
/// True
/// >>> tidemark.ExaLogLog.from_bytes(e.to_bytes()) == e
/// True
#[pyclass(module = "tidemark", name = "ExaLogLog")]
pub struct PyExaLogLog {
    inner: ExaLogLog,
}

impl PyExaLogLog {
    pub fn decode(bytes: &[u8]) -> PyResult<PyExaLogLog> {
        Ok(PyExaLogLog {
            inner: ExaLogLog::from_bytes(bytes).map_err(decode_error)?,
        })
    }
}

#[pymethods]
impl PyExaLogLog {
    #[new]
    #[pyo3(signature = (precision = 11, *, t = 2, d = 20, confidence = 0.95))]
    fn new(precision: u8, t: u8, d: u8, confidence: f64) -> PyResult<Self> {
        check_confidence(confidence)?;
        let inner = ExaLogLog::with_params(t, d, precision)
            .and_then(|e| e.with_confidence(confidence))
            .map_err(|e| param_error(e, P_NAMES))?;
        Ok(PyExaLogLog { inner })
    }

    /// Adds one item (str, bytes, int or float; see the module's notes on hashing).
    #[pyo3(signature = (item, *, integers = "text"))]
    fn update(&mut self, item: &Bound<'_, PyAny>, integers: &str) -> PyResult<()> {
        if binary_integers(integers)? {
            self.inner.insert_u64(binary_word(item)?);
        } else {
            self.inner.insert(&item_bytes(item)?);
        }
        Ok(())
    }

    /// Adds every item of a list, a NumPy array, a buffer or an iterable (as
    /// `HyperLogLog.update_many`).
    #[pyo3(signature = (items, *, integers = "text"))]
    fn update_many(
        &mut self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        integers: &str,
    ) -> PyResult<()> {
        let e = &mut self.inner;
        insert_many(py, items, integers, e.hasher(), &mut |x| e.insert_hash(x))
    }

    /// The distinct count with its bracket: exact while exact, else the martingale estimate
    /// when the sketch was fed by one stream, maximum likelihood otherwise.
    fn estimate(&self) -> PyEstimate {
        self.inner.estimate().into()
    }

    /// The maximum-likelihood estimate (any sketch).
    fn estimate_ml(&self) -> PyEstimate {
        self.inner.estimate_ml().into()
    }

    /// The martingale estimate, when the sketch has one (built by inserts only, never merged).
    fn estimate_martingale(&self) -> Option<PyEstimate> {
        self.inner.estimate_martingale().map(Into::into)
    }

    /// Merges `other` in: the sketch of the union (at the smaller p and d if they differ).
    /// Another `t` or hash raises `tidemark.MergeError`.
    fn merge(slf: &Bound<'_, Self>, other: &Bound<'_, PyExaLogLog>) -> PyResult<()> {
        // Borrowed one after the other, so `x.merge(x)` works (as with a copy of x).
        let o = crate::read_other(other, |o| o.inner.clone())?;
        crate::write_self(slf)?.inner.merge(&o).map_err(merge_error)
    }

    /// A merged copy of the two sketches.
    fn __or__(&self, other: PyRef<'_, PyExaLogLog>) -> PyResult<PyExaLogLog> {
        let mut e = self.inner.clone();
        e.merge(&other.inner).map_err(merge_error)?;
        Ok(PyExaLogLog { inner: e })
    }

    /// A copy.
    fn copy(&self) -> PyExaLogLog {
        PyExaLogLog {
            inner: self.inner.clone(),
        }
    }

    /// The precision p.
    #[getter]
    fn precision(&self) -> u8 {
        self.inner.precision()
    }

    /// t: update values are geometric with base 2^(2^-t).
    #[getter]
    fn t(&self) -> u8 {
        self.inner.t()
    }

    /// d: the history bits a register keeps.
    #[getter]
    fn d(&self) -> u8 {
        self.inner.d()
    }

    /// The bracket's confidence.
    #[getter]
    fn confidence(&self) -> f64 {
        self.inner.confidence()
    }

    /// `exact` or `dense`.
    #[getter]
    fn representation(&self) -> &'static str {
        self.inner.representation().name()
    }

    /// Memory held, in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.bytes()
    }

    /// The envelope `tidemark distinct --sketch exaloglog --save` writes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A sketch from `to_bytes()` or `tidemark distinct --sketch exaloglog --save`; raises
    /// `tidemark.DecodeError` on anything else.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PyExaLogLog> {
        PyExaLogLog::decode(&bytes_arg(data)?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, &self.inner.to_bytes())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        match other.downcast::<PyExaLogLog>() {
            Ok(o) => crate::read_other(o, |o| o.inner == self.inner),
            Err(_) => Ok(false),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "ExaLogLog(precision={}, t={}, d={}, representation={:?}, estimate={})",
            self.inner.precision(),
            self.inner.t(),
            self.inner.d(),
            self.inner.representation().name(),
            self.inner.estimate().value
        )
    }
}

/// Resolves the `window`/`bucket` pair the way `tidemark distinct --window W --bucket B`
/// does: `bucket` defaults to ⌈W/60⌉, must be in 1..=W, and W/B at most 10^6 buckets.
pub(crate) fn ring_shape(window: u64, bucket: Option<u64>) -> PyResult<(u64, u32)> {
    if window == 0 {
        return Err(value_error("window", "expected at least 1 tick, got 0"));
    }
    let bucket = bucket.unwrap_or(window.div_ceil(60));
    if bucket == 0 || bucket > window {
        return Err(value_error(
            "bucket",
            format!("expected 1..=window ({window}), got {bucket}"),
        ));
    }
    let n = u32::try_from(window.div_ceil(bucket))
        .ok()
        .filter(|&n| n <= 1_000_000)
        .ok_or_else(|| value_error("bucket", "at most 10^6 buckets a window"))?;
    Ok((bucket, n))
}

/// A ring of per-bucket HyperLogLogs: distinct items over the last `window` ticks, in whole
/// buckets of `bucket` ticks (default ⌈window/60⌉), as `tidemark distinct --window W
/// [--bucket B]`.
///
/// >>> import tidemark
/// >>> r = tidemark.RingWindow(60, bucket=10, precision=12)
/// >>> r.update_many(["a", "b", "c"], ticks=[1, 2, 65])
/// 0
/// >>> r.count(now=65).value   # buckets 10..70: only "c"
/// 1.0
#[pyclass(module = "tidemark", name = "RingWindow")]
pub struct PyRing {
    inner: RingWindow,
    window: u64,
}

impl PyRing {
    pub fn decode(bytes: &[u8]) -> PyResult<PyRing> {
        let inner = RingWindow::from_bytes(bytes).map_err(decode_error)?;
        let window = inner.width().saturating_mul(inner.buckets());
        Ok(PyRing { inner, window })
    }
}

#[pymethods]
impl PyRing {
    #[new]
    #[pyo3(signature = (window, bucket = None, precision = 14))]
    fn new(window: u64, bucket: Option<u64>, precision: u8) -> PyResult<Self> {
        check_precision(precision)?;
        let (bucket, n) = ring_shape(window, bucket)?;
        let inner = RingWindow::new(precision, bucket, n).map_err(|e| {
            param_error(
                e,
                &[
                    ("p", "precision"),
                    ("bucket width", "bucket"),
                    ("buckets", "bucket"),
                ],
            )
        })?;
        Ok(PyRing { inner, window })
    }

    /// Adds `item` at `tick`; returns False (and adds nothing) when its bucket has left the
    /// ring.
    fn update(&mut self, item: &Bound<'_, PyAny>, tick: u64) -> PyResult<bool> {
        let b = item_bytes(item)?;
        Ok(self.inner.insert(&b, tick).is_ok())
    }

    /// Adds `items[i]` at `ticks[i]` (or all at one tick); returns how many were refused as
    /// too old.
    fn update_many(
        &mut self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        ticks: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let batch = extract_batch(items, "items")?;
        let ticks = to_u64(&int_column(ticks, batch.len(), "ticks")?, "ticks")?;
        let r = &mut self.inner;
        Ok(py.allow_threads(|| insert_ticked(&batch, &ticks, |b, t| r.insert(b, t).is_ok())))
    }

    /// Distinct items in the buckets covering the last `window` ticks (default: the whole
    /// ring) up to `now` (default: the newest tick seen).
    #[pyo3(signature = (now = None, window = None))]
    fn count(&mut self, now: Option<u64>, window: Option<u64>) -> PyResult<PyEstimate> {
        let now = now.or(self.inner.newest_bucket().map(|b| {
            b.saturating_mul(self.inner.width())
                .saturating_add(self.inner.width() - 1)
        }));
        let now = now.unwrap_or(0);
        let window = window.unwrap_or(self.window);
        if window == 0 {
            return Err(value_error("window", "expected at least 1 tick, got 0"));
        }
        let buckets = window.div_ceil(self.inner.width());
        self.inner
            .count(now, buckets)
            .map(Into::into)
            .map_err(|e| value_error("window", e))
    }

    /// Merges a ring of the same shape and hash.
    fn merge(slf: &Bound<'_, Self>, other: &Bound<'_, PyRing>) -> PyResult<()> {
        // Borrowed one after the other, so `x.merge(x)` works (as with a copy of x).
        let o = crate::read_other(other, |o| o.inner.clone())?;
        crate::write_self(slf)?.inner.merge(&o).map_err(merge_error)
    }

    /// Bucket width in ticks.
    #[getter]
    fn bucket(&self) -> u64 {
        self.inner.width()
    }

    /// Number of buckets.
    #[getter]
    fn buckets(&self) -> u64 {
        self.inner.buckets()
    }

    /// The precision of each bucket's sketch.
    #[getter]
    fn precision(&self) -> u8 {
        self.inner.precision()
    }

    /// Memory held, in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.bytes()
    }

    /// The ring's envelope.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A ring from `to_bytes()`.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PyRing> {
        PyRing::decode(&bytes_arg(data)?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, &self.inner.to_bytes())
    }

    fn __repr__(&self) -> String {
        format!(
            "RingWindow(window={}, bucket={}, precision={})",
            self.window,
            self.inner.width(),
            self.inner.precision()
        )
    }
}

fn insert_ticked(batch: &Batch, ticks: &[u64], mut insert: impl FnMut(&[u8], u64) -> bool) -> u64 {
    let mut refused = 0;
    let mut i = 0;
    batch.for_each(|b| {
        if !insert(b, ticks[i]) {
            refused += 1;
        }
        i += 1;
    });
    refused
}

/// The sliding HyperLogLog (Chabchoub–Hébrail): distinct items in any window up to
/// `window` ticks, with exact window edges, as `tidemark distinct --window W --sliding`.
///
/// >>> import tidemark
/// >>> s = tidemark.SlidingHyperLogLog(100, precision=12)
/// >>> s.update_many(["a", "b", "c"], ticks=[1, 2, 150])
/// 0
/// >>> round(s.count(now=150, window=100).value)   # only "c" in (50, 150]
/// 1
#[pyclass(module = "tidemark", name = "SlidingHyperLogLog")]
pub struct PySliding {
    inner: SlidingHll,
}

impl PySliding {
    pub fn decode(bytes: &[u8]) -> PyResult<PySliding> {
        Ok(PySliding {
            inner: SlidingHll::from_bytes(bytes).map_err(decode_error)?,
        })
    }
}

#[pymethods]
impl PySliding {
    #[new]
    #[pyo3(signature = (window, precision = 14, *, confidence = 0.95))]
    fn new(window: u64, precision: u8, confidence: f64) -> PyResult<Self> {
        check_precision(precision)?;
        check_confidence(confidence)?;
        let inner = SlidingHll::new(precision, window)
            .map_err(|e| param_error(e, &[("p", "precision"), ("retention", "window")]))?
            .with_confidence(confidence)
            .map_err(|e| param_error(e, &[]))?;
        Ok(PySliding { inner })
    }

    /// Adds `item` at `tick`; returns False (and adds nothing) when the tick is older than
    /// the structure still holds.
    fn update(&mut self, item: &Bound<'_, PyAny>, tick: u64) -> PyResult<bool> {
        let b = item_bytes(item)?;
        Ok(self.inner.insert(&b, tick).is_ok())
    }

    /// Adds `items[i]` at `ticks[i]` (or all at one tick); returns how many were refused as
    /// too old.
    fn update_many(
        &mut self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        ticks: &Bound<'_, PyAny>,
    ) -> PyResult<u64> {
        let batch = extract_batch(items, "items")?;
        let ticks = to_u64(&int_column(ticks, batch.len(), "ticks")?, "ticks")?;
        let s = &mut self.inner;
        Ok(py.allow_threads(|| insert_ticked(&batch, &ticks, |b, t| s.insert(b, t).is_ok())))
    }

    /// Distinct items in `(now − window, now]` (defaults: the newest tick, the whole
    /// retention).
    #[pyo3(signature = (now = None, window = None))]
    fn count(&self, now: Option<u64>, window: Option<u64>) -> PyResult<PyEstimate> {
        let now = now.or(self.inner.newest()).unwrap_or(0);
        let window = window.unwrap_or(self.inner.retention());
        self.inner.count(now, window).map(Into::into).map_err(|e| {
            let name = match e {
                SlidingError::QueryBeforeNewest { .. } => "now",
                _ => "window",
            };
            value_error(name, e)
        })
    }

    /// The longest window it answers, in ticks.
    #[getter]
    fn window(&self) -> u64 {
        self.inner.retention()
    }

    /// The precision p.
    #[getter]
    fn precision(&self) -> u8 {
        self.inner.precision()
    }

    /// Memory held, in bytes.
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.stats().bytes
    }

    /// The envelope.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A sliding HyperLogLog from `to_bytes()`.
    #[staticmethod]
    fn from_bytes(data: &Bound<'_, PyAny>) -> PyResult<PySliding> {
        PySliding::decode(&bytes_arg(data)?)
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        reduce(py, &self.inner.to_bytes())
    }

    fn __repr__(&self) -> String {
        format!(
            "SlidingHyperLogLog(window={}, precision={})",
            self.inner.retention(),
            self.inner.precision()
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyHll>()?;
    m.add_class::<PyExaLogLog>()?;
    m.add_class::<PyRing>()?;
    m.add_class::<PySliding>()?;
    Ok(())
}

/// Redis hashes what PFADD is given, text: a Redis-mode sketch takes no binary integers (as
/// `tidemark distinct --redis` refuses `--binary-integers`).
fn no_binary_in_redis(h: &Hll) -> PyResult<()> {
    if h.is_redis() {
        return Err(value_error(
            "integers",
            "\"binary\" is not for a Redis-mode sketch (Redis hashes the text PFADD is given)",
        ));
    }
    Ok(())
}
