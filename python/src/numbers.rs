//! Numbers out of Python: the values a quantile sketch measures, and their ticks.
//!
//! A value is a number: a `float`, an `int` (rounded to the nearest float, as `float(x)`
//! rounds it; one past the float range is refused), a NumPy integer or float scalar, or
//! anything else with `__float__` (`Decimal`, `Fraction`). A `bool` (and a NumPy boolean) is
//! refused: a truth value is no measurement, and sketching 0s and 1s by accident would go
//! unnoticed (`.astype(float)` says it on purpose). So are text, complex numbers and `None`.
//!
//! A batch is a list or tuple of values, a one-dimensional NumPy array of integers or floats
//! of any width and byte order, an object array item by item, another buffer-protocol object
//! of integers or floats (`array.array("d")`) or an iterable. A C-contiguous `float64`,
//! `int64` or `uint64` array is read in place ([`Values::Native`]); `float16` and
//! `longdouble` go through `astype("float64")`; integers become the nearest float, as
//! `astype(float)` makes them. A masked array is refused, as everywhere in the package.
//!
//! Nothing here checks finiteness: the caller scans the batch first
//! ([`Values::first_not_finite`]), so that a refused batch adds nothing.

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::items::{buffer_batch, int_column, numpy_batch, numpy_types, to_u64, Batch, Native};

/// A batch of values.
pub enum Values<'a> {
    /// Eight-byte integers or floats in native byte order, borrowed from a NumPy array.
    Native { data: &'a [u8], kind: Native },
    /// Values copied out (and converted to floats).
    Owned(Vec<f64>),
}

/// Word `i` of eight-byte words.
#[inline(always)]
fn word(data: &[u8], i: usize) -> [u8; 8] {
    let mut a = [0u8; 8];
    a.copy_from_slice(&data[i * 8..i * 8 + 8]);
    a
}

impl Values<'_> {
    /// The number of values.
    pub fn len(&self) -> usize {
        match self {
            Values::Native { data, .. } => data.len() / 8,
            Values::Owned(v) => v.len(),
        }
    }

    /// Calls `f(i, value)` for each value in order; stops at the first error. The kind of a
    /// borrowed array is matched once, outside the loop.
    pub fn try_for_each<E>(&self, mut f: impl FnMut(usize, f64) -> Result<(), E>) -> Result<(), E> {
        match self {
            Values::Native { data, kind } => {
                let n = data.len() / 8;
                match kind {
                    Native::F64 => (0..n).try_for_each(|i| f(i, f64::from_ne_bytes(word(data, i)))),
                    Native::I64 => {
                        (0..n).try_for_each(|i| f(i, i64::from_ne_bytes(word(data, i)) as f64))
                    }
                    Native::U64 => {
                        (0..n).try_for_each(|i| f(i, u64::from_ne_bytes(word(data, i)) as f64))
                    }
                }
            }
            Values::Owned(v) => v.iter().enumerate().try_for_each(|(i, &x)| f(i, x)),
        }
    }

    /// The index and value of the first NaN or ±∞, if any (integers are always finite).
    pub fn first_not_finite(&self) -> Option<(usize, f64)> {
        match self {
            Values::Native {
                kind: Native::I64 | Native::U64,
                ..
            } => None,
            _ => self
                .try_for_each(|i, x| if x.is_finite() { Ok(()) } else { Err((i, x)) })
                .err(),
        }
    }
}

/// The error for a value that is NaN or infinite, named `what` (`value`, `values[3]`).
pub fn not_finite(what: &str, x: f64) -> PyErr {
    PyValueError::new_err(format!(
        "{what}: expected a finite number, got {}",
        crate::py_float(x)
    ))
}

fn type_name(x: &Bound<'_, PyAny>) -> String {
    x.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

fn not_a_number(x: &Bound<'_, PyAny>, what: &str) -> PyErr {
    let name = type_name(x);
    let hint = if x.is_instance_of::<PyBool>() || name.starts_with("bool") {
        " (a truth value is no measurement: pass float(x), or .astype(float) for an array, to \
         sketch 0 and 1)"
    } else {
        ""
    };
    PyTypeError::new_err(format!(
        "{what}: expected a number (int or float), got {name}{hint}"
    ))
}

/// One value as a float (not checked for finiteness), or an error named `what`.
pub fn number(x: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    if let Ok(f) = x.downcast::<PyFloat>() {
        return Ok(f.value());
    }
    if x.is_instance_of::<PyBool>() {
        return Err(not_a_number(x, what));
    }
    if !x.is_instance_of::<PyInt>() {
        if numpy_types(x.py()).is_some_and(|np| np.is_scalar(x)) {
            // NumPy booleans and complex numbers have a `__float__` (the latter dropping the
            // imaginary part): only integers and floats are numbers here.
            let kind: String = x.getattr("dtype")?.getattr("kind")?.extract()?;
            if !matches!(kind.as_str(), "i" | "u" | "f") {
                return Err(not_a_number(x, what));
            }
        } else if x.is_instance_of::<PyString>()
            || x.is_instance_of::<PyBytes>()
            || x.is_instance_of::<PyByteArray>()
        {
            return Err(not_a_number(x, what));
        }
    }
    // `float(x)`: an int rounded to the nearest float, `__float__` or `__index__` otherwise.
    x.extract::<f64>().map_err(|e| {
        if e.is_instance_of::<PyOverflowError>(x.py()) {
            PyValueError::new_err(format!(
                "{what}: an int beyond the range of a float (about ±1.8e308)"
            ))
        } else {
            not_a_number(x, what)
        }
    })
}

/// Values `items`, each converted by [`number`], an error naming its index in `name`.
fn each<'py>(items: impl Iterator<Item = Bound<'py, PyAny>>, name: &str) -> PyResult<Vec<f64>> {
    items
        .enumerate()
        .map(|(i, x)| number(&x, &format!("{name}[{i}]")))
        .collect()
}

/// A batch of integers or floats from NumPy or a buffer, as values; anything else refused.
fn from_batch<'a>(batch: Batch<'a>, name: &str, what: impl Fn() -> String) -> PyResult<Values<'a>> {
    Ok(match batch {
        Batch::Native8 { data, kind } => Values::Native { data, kind },
        Batch::F64(v) => Values::Owned(v),
        Batch::I64(v) => Values::Owned(v.into_iter().map(|x| x as f64).collect()),
        Batch::U64(v) => Values::Owned(v.into_iter().map(|x| x as f64).collect()),
        Batch::Bool(_) => {
            return Err(PyTypeError::new_err(format!(
                "{name}: expected numbers, got {} of booleans (a truth value is no \
                 measurement: pass .astype(float) to sketch 0 and 1)",
                what()
            )))
        }
        _ => {
            return Err(PyTypeError::new_err(format!(
                "{name}: expected numbers, got {} of text or bytes",
                what()
            )))
        }
    })
}

/// A batch of values: see the [module documentation](self).
pub fn values<'a>(obj: &'a Bound<'_, PyAny>, name: &str) -> PyResult<Values<'a>> {
    if obj.is_instance_of::<PyString>()
        || obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyFloat>()
        || obj.is_instance_of::<PyInt>()
    {
        return Err(PyTypeError::new_err(format!(
            "{name}: expected a sequence of numbers, got one {} (use update() for one value, or \
             wrap it in a list)",
            type_name(obj)
        )));
    }
    if let Ok(list) = obj.downcast::<PyList>() {
        return each(list.iter(), name).map(Values::Owned);
    }
    if let Ok(t) = obj.downcast::<PyTuple>() {
        return each(t.iter(), name).map(Values::Owned);
    }
    if obj.hasattr("dtype")? && obj.hasattr("tobytes")? && obj.hasattr("ndim")? {
        if numpy_types(obj.py()).is_some_and(|np| np.is_masked(obj)) {
            return Err(PyTypeError::new_err(format!(
                "{name}: a masked array is not read (its masked entries have no value): pass \
                 .compressed() for the unmasked entries, or .filled(x) to count masked entries \
                 as x"
            )));
        }
        let dtype = obj.getattr("dtype")?;
        let kind: String = dtype.getattr("kind")?.extract()?;
        let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
        let array = || format!("a NumPy array of kind {kind:?}");
        match kind.as_str() {
            "O" => {
                let ndim: usize = obj.getattr("ndim")?.extract()?;
                if ndim != 1 {
                    return Err(PyValueError::new_err(format!(
                        "{name}: expected a one-dimensional array, got {ndim} dimensions"
                    )));
                }
                let list = obj.call_method0("tolist")?;
                return each(list.downcast::<PyList>()?.iter(), name).map(Values::Owned);
            }
            "f" if itemsize != 4 && itemsize != 8 => {
                let wide = obj.call_method1("astype", ("float64",))?;
                let batch = numpy_batch(&wide, name)?
                    .ok_or_else(|| PyTypeError::new_err(format!("{name}: not an array")))?;
                let values = from_batch(batch, name, array)?;
                // Borrowed from `wide`, which ends here: copied out.
                let mut v = Vec::with_capacity(values.len());
                let _ = values.try_for_each::<()>(|_, x| {
                    v.push(x);
                    Ok(())
                });
                return Ok(Values::Owned(v));
            }
            "i" | "u" | "f" | "b" => {}
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "{name}: expected numbers, got {} (integers and floats are read)",
                    array()
                )))
            }
        }
        if let Some(batch) = numpy_batch(obj, name)? {
            return from_batch(batch, name, array);
        }
    }
    if let Some(batch) = buffer_batch(obj, name)? {
        return from_batch(batch, name, || "a buffer".to_string());
    }
    let iter = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{name}: expected a list, a NumPy array, a buffer or an iterable of numbers, got {}",
            type_name(obj)
        ))
    })?;
    let items: Vec<Bound<'_, PyAny>> = iter.collect::<PyResult<_>>()?;
    each(items.into_iter(), name).map(Values::Owned)
}

/// The ticks of a batch: one for every value, or one each.
pub enum Ticks<'a> {
    One(u64),
    /// Eight-byte words borrowed from a NumPy `uint64` array, or an `int64` one checked to
    /// hold no negative tick (so that its words read as the same `u64`).
    Native(&'a [u8]),
    Owned(Vec<u64>),
}

impl Ticks<'_> {
    #[inline(always)]
    pub fn get(&self, i: usize) -> u64 {
        match self {
            Ticks::One(t) => *t,
            Ticks::Native(data) => u64::from_ne_bytes(word(data, i)),
            Ticks::Owned(v) => v[i],
        }
    }
}

/// Ticks for `n` values: an int for all of them, or a sequence of `n` non-negative ints (a
/// C-contiguous NumPy `int64`/`uint64` array read in place; anything else as `RingWindow`
/// reads its ticks).
pub fn ticks<'a>(obj: &'a Bound<'_, PyAny>, n: usize, name: &str) -> PyResult<Ticks<'a>> {
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        let t: i128 = obj.extract()?;
        return u64::try_from(t).map(Ticks::One).map_err(|_| {
            PyValueError::new_err(format!("{name}: expected an integer in [0, 2^64), got {t}"))
        });
    }
    let native = obj.hasattr("dtype")? && obj.hasattr("tobytes")? && obj.hasattr("ndim")?;
    if native && !numpy_types(obj.py()).is_some_and(|np| np.is_masked(obj)) {
        if let Ok(Some(Batch::Native8 { data, kind })) = numpy_batch(obj, name) {
            let m = data.len() / 8;
            if m != n {
                return Err(PyValueError::new_err(format!(
                    "{name}: expected {n} values (one per item), got {m}"
                )));
            }
            match kind {
                Native::U64 => return Ok(Ticks::Native(data)),
                Native::I64 => {
                    if let Some(i) = (0..m).find(|&i| i64::from_ne_bytes(word(data, i)) < 0) {
                        let t = i64::from_ne_bytes(word(data, i));
                        return Err(PyValueError::new_err(format!(
                            "{name}[{i}]: expected an integer in [0, 2^64), got {t}"
                        )));
                    }
                    return Ok(Ticks::Native(data));
                }
                Native::F64 => {}
            }
        }
    }
    Ok(Ticks::Owned(to_u64(&int_column(obj, n, name)?, name)?))
}
