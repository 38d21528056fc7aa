//! NumPy arrays and other buffer-protocol objects, read as one block of memory and decoded by
//! dtype (or buffer format, [`super::dtype`]) so that every element gives the bytes its item
//! in `tolist()` would.
//!
//! Only one-dimensional arrays and buffers are read. A masked array is refused, an object
//! array goes item by item, and a C-contiguous native-order array of 8-byte integers or
//! floats is borrowed where it lies instead of copied. NumPy is never imported here: it is
//! looked up in `sys.modules`, and without it no object is one of its arrays or scalars.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use super::batch::{Batch, Native};
use super::dtype::{decode, numpy_types};
use super::objects::objects;

/// A NumPy array (anything with `dtype` and `tobytes`), one-dimensional; `None` for other
/// objects. Object arrays go item by item.
pub(crate) fn numpy_batch<'a>(
    obj: &'a Bound<'_, PyAny>,
    name: &str,
) -> PyResult<Option<Batch<'a>>> {
    if !(obj.hasattr("dtype")? && obj.hasattr("tobytes")? && obj.hasattr("ndim")?) {
        return Ok(None);
    }
    if numpy_types(obj.py()).is_some_and(|np| np.is_masked(obj)) {
        // Its buffer holds whatever lies under the masked entries, which tolist() gives as
        // None: counting them would add phantom items.
        return Err(PyTypeError::new_err(format!(
            "{name}: a masked array is not read (its masked entries have no value to hash): \
             pass .compressed() for the unmasked entries, or .filled(x) to count masked \
             entries as x"
        )));
    }
    let ndim: usize = obj.getattr("ndim")?.extract()?;
    if ndim != 1 {
        return Err(PyValueError::new_err(format!(
            "{name}: expected a one-dimensional array, got {ndim} dimensions"
        )));
    }
    if let Some(b) = numpy_native8(obj)? {
        return Ok(Some(b));
    }
    let dtype = obj.getattr("dtype")?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    let itemsize: usize = dtype.getattr("itemsize")?.extract()?;
    let byteorder: String = dtype.getattr("byteorder")?.extract()?;
    if kind == "O" {
        let list = obj.call_method0("tolist")?;
        let list = list.downcast::<PyList>()?;
        return objects(list.len(), list.iter(), name).map(Some);
    }
    let swap = byteorder == ">" && cfg!(target_endian = "little")
        || byteorder == "<" && cfg!(target_endian = "big");
    let bytes = obj.call_method0("tobytes")?;
    let raw = bytes.downcast::<PyBytes>()?.as_bytes();
    decode(obj.py(), &kind, itemsize, swap, raw, name).map(Some)
}

/// A C-contiguous one-dimensional NumPy array of 8-byte integers or floats in native byte
/// order, borrowed where it lies (through `__array_interface__`); `None` for anything else.
///
/// Copying 10^7 items (`tobytes()`, then into a typed vector) took about half of
/// `update_many`'s time; a borrow takes none. The array must not be written while
/// `update_many` reads it (as with NumPy's own functions that release the GIL): its items
/// would be read as they are at that moment.
#[allow(unsafe_code)]
fn numpy_native8<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Option<Batch<'a>>> {
    // Only NumPy's own arrays (not a subclass, not a look-alike): the memory is read in place,
    // so the interface must be NumPy's, which names memory the array owns. NumPy not imported
    // means no object is one of its arrays.
    let py = obj.py();
    let ndarray = py
        .import("sys")
        .and_then(|sys| sys.getattr("modules"))
        .and_then(|m| m.get_item("numpy"))
        .and_then(|np| np.getattr("ndarray"));
    match ndarray {
        Ok(t) if obj.get_type().is(&t) => {}
        _ => return Ok(None),
    }
    let Ok(face) = obj.getattr("__array_interface__") else {
        return Ok(None);
    };
    let Ok(face) = face.downcast_into::<pyo3::types::PyDict>() else {
        return Ok(None);
    };
    let get = |k: &str| face.get_item(k).ok().flatten();
    let (Some(typestr), Some(shape), Some(data)) = (get("typestr"), get("shape"), get("data"))
    else {
        return Ok(None);
    };
    let typestr: String = typestr.extract()?;
    let native = if cfg!(target_endian = "little") {
        '<'
    } else {
        '>'
    };
    let kind = match typestr.as_str() {
        t if t.len() == 3 && t.starts_with(native) => match &t[1..] {
            "i8" => Native::I64,
            "u8" => Native::U64,
            "f8" => Native::F64,
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    if get("strides").is_some_and(|s| !s.is_none()) || get("mask").is_some_and(|m| !m.is_none()) {
        return Ok(None);
    }
    let Ok((n,)) = shape.extract::<(usize,)>() else {
        return Ok(None);
    };
    let Ok((ptr, _readonly)) = data.extract::<(usize, bool)>() else {
        return Ok(None);
    };
    let Some(len) = n.checked_mul(8).filter(|&l| l <= isize::MAX as usize) else {
        return Ok(None);
    };
    if n == 0 || ptr == 0 {
        return Ok(Some(Batch::Native8 { data: &[], kind }));
    }
    // SAFETY: NumPy's array interface promises that `ptr` addresses `n` contiguous items of
    // 8 bytes (no strides given: C order), owned by the array or the base it keeps alive;
    // `obj` holds a strong reference to the array for `'a`, the lifetime of the slice, and
    // an array with outside references cannot be resized (`resize` checks its refcount). We
    // only read; an array written during the read (by another thread) would give the
    // values it held then, item by item (the bytes are plain integers or floats).
    let data = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    Ok(Some(Batch::Native8 { data, kind }))
}

/// Any other buffer-protocol object, read through `memoryview`; `None` if it has no buffer.
pub(crate) fn buffer_batch(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Option<Batch<'static>>> {
    let py = obj.py();
    let Ok(mv) = py.import("builtins")?.getattr("memoryview")?.call1((obj,)) else {
        return Ok(None);
    };
    let ndim: usize = mv.getattr("ndim")?.extract()?;
    if ndim > 1 {
        return Err(PyValueError::new_err(format!(
            "{name}: expected a one-dimensional buffer, got {ndim} dimensions"
        )));
    }
    let format: String = mv.getattr("format")?.extract()?;
    let itemsize: usize = mv.getattr("itemsize")?.extract()?;
    let (order, code) = match format.chars().next() {
        Some(c @ ('@' | '=' | '<' | '>' | '!')) => (c, &format[1..]),
        _ => ('@', format.as_str()),
    };
    let swap = matches!(order, '>' | '!') && cfg!(target_endian = "little")
        || order == '<' && cfg!(target_endian = "big");
    let kind = match code {
        "b" | "h" | "i" | "l" | "q" | "n" => "i",
        "B" | "H" | "I" | "L" | "Q" | "N" => "u",
        "f" | "d" => "f",
        "?" => "b",
        "c" => "S",
        c if c.ends_with('s') => "S",
        c if c.ends_with('w') => "U",
        other => {
            return Err(PyTypeError::new_err(format!(
                "{name}: buffer items of format {other:?} are not supported (integers, floats, \
                 bools and fixed-width bytes are)"
            )))
        }
    };
    let bytes = mv.call_method0("tobytes")?;
    let raw = bytes.downcast::<PyBytes>()?.as_bytes();
    decode(py, kind, itemsize, swap, raw, name).map(Some)
}
