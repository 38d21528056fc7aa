//! One Python value as its item bytes, by the [rules](super): `str` as UTF-8, `bytes` and
//! `bytearray` as themselves, `bool` as `True`/`False`, an `int` (or anything with
//! `__index__`) as its decimal text, a `float` as `repr`, and a NumPy scalar as the
//! one-element array of it.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyFloat, PyInt, PyString};

use super::dtype::{decode, numpy_types, NumpyTypes};
use super::text::{float_repr, push_str};

/// One item's bytes.
pub fn item_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let mut v = Vec::new();
    push_item(obj, &mut v)?;
    Ok(v)
}

/// Appends one item's bytes to `out`.
pub(super) fn push_item(obj: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
    if let Ok(s) = obj.downcast::<PyString>() {
        push_str(s, out)?;
    } else if let Ok(b) = obj.downcast::<PyBytes>() {
        out.extend_from_slice(b.as_bytes());
    } else if let Ok(b) = obj.downcast::<PyBool>() {
        out.extend_from_slice(if b.is_true() { b"True" } else { b"False" });
    } else if let Ok(i) = obj.downcast::<PyInt>() {
        push_int(i.as_any(), out)?;
    } else if let Ok(f) = obj.downcast::<PyFloat>() {
        float_repr(f.value(), out);
    } else if let Ok(b) = obj.downcast::<PyByteArray>() {
        out.extend_from_slice(&b.to_vec());
    } else if let Some(np) = numpy_types(obj.py()).filter(|np| np.is_scalar(obj)) {
        push_numpy_scalar(obj, np, out)?;
    } else if obj.hasattr("__index__")? {
        let i = obj.call_method0("__index__")?;
        push_int(&i, out)?;
    } else {
        return Err(PyTypeError::new_err(format!(
            "an item is str, bytes, int or float, got {}",
            obj.get_type().name()?
        )));
    }
    Ok(())
}

/// An int's decimal text, `str(i)`, appended to `out`: one within 64 bits formatted here,
/// without asking Python for a `str`.
fn push_int(i: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
    let mut buf = itoa::Buffer::new();
    if let Ok(x) = i.extract::<i64>() {
        out.extend_from_slice(buf.format(x).as_bytes());
    } else if let Ok(x) = i.extract::<u64>() {
        out.extend_from_slice(buf.format(x).as_bytes());
    } else {
        let s = i.str()?;
        out.extend_from_slice(s.encode_utf8()?.as_bytes());
    }
    Ok(())
}

/// A NumPy scalar that is not already a Python `str`, `bytes` or `float` (as `str_`,
/// `bytes_` and `float64` are), read as the one-element array of it: its bytes decoded by its
/// dtype, so that it hashes exactly as that array's item and is refused as that array is.
fn push_numpy_scalar(obj: &Bound<'_, PyAny>, np: &NumpyTypes, out: &mut Vec<u8>) -> PyResult<()> {
    let py = obj.py();
    // The common scalar (from iterating an integer array) the short way: its decimal text,
    // as the array's. `timedelta64` is an integer without `__index__`: it goes by its dtype
    // and is refused, as its arrays are.
    if np.is_integer(obj)? && obj.hasattr("__index__")? {
        return push_int(&obj.call_method0("__index__")?, out);
    }
    let dtype = obj.getattr("dtype")?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    let size: usize = dtype.getattr("itemsize")?.extract()?;
    // A scalar's bytes are in native order.
    let raw = obj.call_method0("tobytes")?;
    let batch = decode(
        py,
        &kind,
        size,
        false,
        raw.downcast::<PyBytes>()?.as_bytes(),
        "item",
    )?;
    batch.for_each(|b| out.extend_from_slice(b));
    Ok(())
}
