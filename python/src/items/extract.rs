//! Copying a batch out of Python: what kind of object it is (a list or tuple, a NumPy array,
//! a buffer, any other iterable) decides how it is read, and Python objects are copied item
//! by item, an item's error named by its index in the batch (`items[3]: …`).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::batch::Batch;
use super::numpy::{buffer_batch, numpy_batch};
use super::objects::objects;

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
