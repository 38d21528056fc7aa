//! Integers out of Python: a column of them beside a batch (counts, ticks), checked into
//! `u64` or `i64` with the first bad index named, and the items of `integers="binary"`,
//! hashed as their 64-bit word instead of their decimal text.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyTuple};

use super::batch::{at_index, Batch};
use super::chunks::LIST_CHUNK;
use super::extract::extract_batch;
use super::numpy::{buffer_batch, numpy_batch};

/// A column of integers beside a batch (counts, ticks): one int for every item, or a
/// sequence of `n`.
pub fn int_column(obj: &Bound<'_, PyAny>, n: usize, name: &str) -> PyResult<Vec<i128>> {
    if let Ok(x) = obj.extract::<i128>() {
        if !obj.is_instance_of::<PyFloat>() {
            // `n` is a length the caller's object reported: reserve it fallibly.
            let mut v = Vec::new();
            v.try_reserve_exact(n).map_err(|_| {
                PyValueError::new_err(format!(
                    "{name}: {n} values (one per item) do not fit in memory"
                ))
            })?;
            v.resize(n, x);
            return Ok(v);
        }
    }
    let v = integers(obj, name)?;
    if v.len() != n {
        return Err(PyValueError::new_err(format!(
            "{name}: expected {n} values (one per item), got {}",
            v.len()
        )));
    }
    Ok(v)
}

/// A sequence of integers: a list, a NumPy integer array, a buffer or an iterable.
pub fn integers(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<i128>> {
    let as_ints = |items: Vec<Bound<'_, PyAny>>| -> PyResult<Vec<i128>> {
        items
            .iter()
            .enumerate()
            .map(|(i, x)| {
                if x.is_instance_of::<PyFloat>() {
                    return Err(PyTypeError::new_err(format!(
                        "{name}[{i}]: expected an integer, got float"
                    )));
                }
                x.extract::<i128>().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "{name}[{i}]: expected an integer, got {}",
                        x.get_type()
                            .name()
                            .map(|n| n.to_string())
                            .unwrap_or_default()
                    ))
                })
            })
            .collect()
    };
    if let Ok(list) = obj.downcast::<PyList>() {
        return as_ints(list.iter().collect());
    }
    if let Ok(t) = obj.downcast::<PyTuple>() {
        return as_ints(t.iter().collect());
    }
    let batch = match numpy_batch(obj, name)? {
        Some(b) => Some(b),
        None => buffer_batch(obj, name)?,
    };
    if let Some(b) = batch {
        return b
            .integers()
            .ok_or_else(|| PyTypeError::new_err(format!("{name}: expected an array of integers")));
    }
    let items: Vec<Bound<'_, PyAny>> = obj
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{name}: expected a sequence of integers")))?
        .collect::<PyResult<_>>()?;
    as_ints(items)
}

/// `v` as `u64`s, each in range, or a `ValueError` naming `name` and the first bad index.
pub fn to_u64(v: &[i128], name: &str) -> PyResult<Vec<u64>> {
    v.iter()
        .enumerate()
        .map(|(i, &x)| {
            u64::try_from(x).map_err(|_| {
                PyValueError::new_err(format!(
                    "{name}[{i}]: expected an integer in [0, 2^64), got {x}"
                ))
            })
        })
        .collect()
}

/// `v` as `i64`s, or a `ValueError` naming `name` and the first bad index.
pub fn to_i64(v: &[i128], name: &str) -> PyResult<Vec<i64>> {
    v.iter()
        .enumerate()
        .map(|(i, &x)| {
            i64::try_from(x).map_err(|_| {
                PyValueError::new_err(format!(
                    "{name}[{i}]: expected an integer in [-2^63, 2^63), got {x}"
                ))
            })
        })
        .collect()
}

/// Whether `integers` (a keyword of `update`/`update_many`) asks for integers hashed as their
/// eight little-endian bytes: `"binary"`; `"text"` (the default) hashes their decimal text,
/// as the CLI reads a line.
pub fn binary_integers(integers: &str) -> PyResult<bool> {
    match integers {
        "text" => Ok(false),
        "binary" => Ok(true),
        other => Err(PyValueError::new_err(format!(
            "integers: expected \"text\" or \"binary\", got {other:?}"
        ))),
    }
}

/// One integer item as the 64-bit word `integers="binary"` hashes: a negative one as its
/// two's complement (as in a NumPy `int64` array), so any int in [−2^63, 2^64).
pub fn binary_word(item: &Bound<'_, PyAny>) -> PyResult<u64> {
    // An int, or an integer that says so (`__index__`: NumPy's integer scalars); a float or
    // a bool (which hashes as text `True` elsewhere) is refused.
    let is_integer = !item.is_instance_of::<PyBool>()
        && (item.is_instance_of::<PyInt>() || item.hasattr("__index__").unwrap_or(false))
        && !item
            .get_type()
            .name()
            .is_ok_and(|n| n.to_string().starts_with("bool"));
    if !is_integer {
        return Err(PyTypeError::new_err(format!(
            "item: integers=\"binary\" takes an int, got {}",
            item.get_type().name()?
        )));
    }
    let x: i128 = item
        .call_method0("__index__")
        .and_then(|i| i.extract())
        .map_err(|_| {
            PyValueError::new_err("item: integers=\"binary\" takes an int within 64 bits")
        })?;
    match (i64::try_from(x), u64::try_from(x)) {
        (Ok(v), _) => Ok(v as u64),
        (_, Ok(v)) => Ok(v),
        _ => Err(PyValueError::new_err(format!(
            "item: integers=\"binary\" takes an int in [-2^63, 2^64), got {x}"
        ))),
    }
}

/// [`for_each_chunk`](super::chunks::for_each_chunk) for `integers="binary"`: a list or
/// tuple of ints is read 2^18 at a time into words ([`binary_word`]; a bad item is named by
/// its index, and the chunks before it stay added), anything else as its batch (a NumPy
/// integer array is read in place).
pub fn for_each_word_chunk<'py>(
    obj: &Bound<'py, PyAny>,
    name: &str,
    mut f: impl FnMut(&Batch<'_>) -> PyResult<()>,
) -> PyResult<()> {
    let (len, item): (usize, &dyn Fn(usize) -> PyResult<Bound<'py, PyAny>>) =
        match (obj.downcast::<PyList>(), obj.downcast::<PyTuple>()) {
            (Ok(l), _) => (l.len(), &move |i| l.get_item(i)),
            (_, Ok(t)) => (t.len(), &move |i| t.get_item(i)),
            _ => return f(&extract_batch(obj, name)?),
        };
    let mut words = Vec::with_capacity(LIST_CHUNK.min(len));
    let mut lo = 0;
    while lo < len {
        words.clear();
        for i in lo..(lo + LIST_CHUNK).min(len) {
            // A list another thread shrinks meanwhile: read what is there.
            let Ok(x) = item(i) else { break };
            words.push(binary_word(&x).map_err(|e| at_index(e, name, i))?);
        }
        if words.is_empty() {
            break;
        }
        lo += words.len();
        let batch = Batch::U64(std::mem::take(&mut words));
        f(&batch)?;
        if let Batch::U64(w) = batch {
            words = w;
        }
    }
    Ok(())
}
