//! Copying a batch out of Python: what kind of object it is (a list or tuple, a NumPy array,
//! a buffer, any other iterable) decides how it is read, and Python objects are copied item
//! by item, an item's error named by its index in the batch (`items[3]: …`).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::batch::Batch;
use super::numpy::{buffer_batch, numpy_batch};
use super::scalar::push_item;

/// Copies a batch out of Python: a list, a tuple, a NumPy array, a buffer-protocol object
/// or any iterable of items.
pub fn extract_batch<'a>(obj: &'a Bound<'_, PyAny>, name: &str) -> PyResult<Batch<'a>> {
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(format!(
            "{name}: expected a sequence of items, got one {} (use update() for one item, or \
             wrap it in a list)",
            obj.get_type().name()?
        )));
    }
    if let Ok(list) = obj.downcast::<PyList>() {
        return objects(list.len(), list.iter(), name);
    }
    if let Ok(t) = obj.downcast::<PyTuple>() {
        return objects(t.len(), t.iter(), name);
    }
    if let Some(b) = numpy_batch(obj, name)? {
        return Ok(b);
    }
    if let Some(b) = buffer_batch(obj, name)? {
        return Ok(b);
    }
    let iter = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{name}: expected a list, a NumPy array, a buffer or an iterable of items, got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    let items: Vec<Bound<'_, PyAny>> = iter.collect::<PyResult<_>>()?;
    objects(items.len(), items.into_iter(), name)
}

/// Python objects copied into one [`Batch::Bytes`] (`n` of them: room for their ends is
/// reserved up front); an error names the item's index.
pub(super) fn objects<'py>(
    n: usize,
    iter: impl Iterator<Item = Bound<'py, PyAny>>,
    name: &str,
) -> PyResult<Batch<'static>> {
    let mut data = Vec::new();
    let mut ends = Vec::with_capacity(n);
    objects_into(&mut data, &mut ends, iter, name, 0)?;
    Ok(Batch::Bytes { data, ends })
}

/// Appends the items' bytes to `data` and their ends to `ends`; an error names the item's
/// index, counted from `offset`.
pub(super) fn objects_into<'py>(
    data: &mut Vec<u8>,
    ends: &mut Vec<usize>,
    iter: impl Iterator<Item = Bound<'py, PyAny>>,
    name: &str,
    offset: usize,
) -> PyResult<()> {
    for (i, item) in iter.enumerate() {
        push_item(&item, data).map_err(|e| at_index(e, name, offset + i))?;
        ends.push(data.len());
    }
    Ok(())
}

/// An item's error, named by the batch and the item's index (the message without its type's
/// name, which the new error carries: a `ValueError` stays one, anything else is a
/// `TypeError`).
pub(super) fn at_index(e: PyErr, name: &str, i: usize) -> PyErr {
    Python::with_gil(|py| {
        let message = e.value(py).to_string();
        let message = message.strip_prefix("item: ").unwrap_or(&message);
        if e.is_instance_of::<PyValueError>(py) {
            PyValueError::new_err(format!("{name}[{i}]: {message}"))
        } else {
            PyTypeError::new_err(format!("{name}[{i}]: {message}"))
        }
    })
}
