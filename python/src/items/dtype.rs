//! NumPy's types, and items decoded from raw bytes by NumPy kind and size (an array's, a
//! buffer's or a NumPy scalar's): every element gives the bytes its item in `tolist()` would.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyString, PyType};

use super::batch::{at_index, Batch};
use super::text::push_str;

/// NumPy's types, once NumPy is imported. They are looked up in `sys.modules`, never imported
/// here: without NumPy, no object is one of its arrays or scalars.
pub(crate) struct NumpyTypes {
    generic: Py<PyType>,
    integer: Py<PyType>,
    masked: Py<PyType>,
}

impl NumpyTypes {
    pub(crate) fn is_scalar(&self, obj: &Bound<'_, PyAny>) -> bool {
        obj.is_instance(self.generic.bind(obj.py()))
            .unwrap_or(false)
    }

    pub(crate) fn is_masked(&self, obj: &Bound<'_, PyAny>) -> bool {
        obj.is_instance(self.masked.bind(obj.py())).unwrap_or(false)
    }

    /// Whether `obj` is a NumPy integer scalar (`timedelta64` is one, without `__index__`).
    pub(super) fn is_integer(&self, obj: &Bound<'_, PyAny>) -> PyResult<bool> {
        obj.is_instance(self.integer.bind(obj.py()))
    }
}

/// NumPy's types, or `None` while NumPy is not imported.
pub(crate) fn numpy_types(py: Python<'_>) -> Option<&'static NumpyTypes> {
    static TYPES: GILOnceCell<NumpyTypes> = GILOnceCell::new();
    if let Some(t) = TYPES.get(py) {
        return Some(t);
    }
    // Not cached while NumPy is absent: it may be imported later.
    let np = py
        .import("sys")
        .and_then(|sys| sys.getattr("modules"))
        .and_then(|m| m.get_item("numpy"))
        .ok()?;
    let ty = |t: PyResult<Bound<'_, PyAny>>| -> Option<Py<PyType>> {
        Some(t.ok()?.downcast_into::<PyType>().ok()?.unbind())
    };
    let types = NumpyTypes {
        generic: ty(np.getattr("generic"))?,
        integer: ty(np.getattr("integer"))?,
        masked: ty(np.getattr("ma").and_then(|ma| ma.getattr("MaskedArray")))?,
    };
    let _ = TYPES.set(py, types);
    TYPES.get(py)
}

/// Items of NumPy kind `kind` and `size` bytes each (an array's or a scalar's), as a batch.
pub(super) fn decode(
    py: Python<'_>,
    kind: &str,
    size: usize,
    swap: bool,
    raw: &[u8],
    name: &str,
) -> PyResult<Batch<'static>> {
    let unsupported = || {
        PyTypeError::new_err(format!(
            "{name}: NumPy items of kind {kind:?} and size {size} are not supported (arrays and \
             scalars of integers, float32/float64, bool, fixed-width bytes S and text U are)"
        ))
    };
    Ok(match (kind, size) {
        ("i", 1) => Batch::I64(raw.iter().map(|&b| b as i8 as i64).collect()),
        ("i", 2) => Batch::I64(
            words::<2>(raw, swap)
                .map(|a| i16::from_ne_bytes(a) as i64)
                .collect(),
        ),
        ("i", 4) => Batch::I64(
            words::<4>(raw, swap)
                .map(|a| i32::from_ne_bytes(a) as i64)
                .collect(),
        ),
        ("i", 8) => Batch::I64(words::<8>(raw, swap).map(i64::from_ne_bytes).collect()),
        ("u", 1) => Batch::U64(raw.iter().map(|&b| b as u64).collect()),
        ("u", 2) => Batch::U64(
            words::<2>(raw, swap)
                .map(|a| u16::from_ne_bytes(a) as u64)
                .collect(),
        ),
        ("u", 4) => Batch::U64(
            words::<4>(raw, swap)
                .map(|a| u32::from_ne_bytes(a) as u64)
                .collect(),
        ),
        ("u", 8) => Batch::U64(words::<8>(raw, swap).map(u64::from_ne_bytes).collect()),
        ("f", 4) => Batch::F64(
            words::<4>(raw, swap)
                .map(|a| f32::from_ne_bytes(a) as f64)
                .collect(),
        ),
        ("f", 8) => Batch::F64(words::<8>(raw, swap).map(f64::from_ne_bytes).collect()),
        ("b", 1) => Batch::Bool(raw.iter().map(|&b| b != 0).collect()),
        ("S", w) => Batch::Fixed {
            data: raw.to_vec(),
            width: w,
        },
        ("U", w) if w % 4 == 0 => text(py, raw, w / 4, swap, name)?,
        _ => return Err(unsupported()),
    })
}

/// `raw` as words of `N` bytes in native order.
fn words<const N: usize>(raw: &[u8], swap: bool) -> impl Iterator<Item = [u8; N]> + '_ {
    raw.chunks_exact(N).map(move |c| {
        let mut a = [0u8; N];
        a.copy_from_slice(c);
        if swap {
            a.reverse();
        }
        a
    })
}

/// Fixed-width UCS-4 text as a [`Batch::Ucs4`], every code point checked: NumPy stores any
/// 32-bit value in a `U` array (a lone surrogate from a Python `str`, anything from a raw
/// buffer), and such an element is no text that UTF-8 can hash.
fn text(
    py: Python<'_>,
    raw: &[u8],
    width: usize,
    swap: bool,
    name: &str,
) -> PyResult<Batch<'static>> {
    let mut data = Vec::with_capacity(raw.len() / 4);
    for (pos, a) in words::<4>(raw, swap).enumerate() {
        match char::from_u32(u32::from_ne_bytes(a)) {
            Some(c) => data.push(c),
            None => return Err(text_error(py, raw, width, swap, pos / width, name)),
        }
    }
    Ok(Batch::Ucs4 { data, width })
}

/// The error for element `i` of a `U` array that is not text: the one its item in `tolist()`
/// gets from `push_item` (a lone surrogate's `UnicodeEncodeError`, a `ValueError`), named
/// by its index as a list's bad item is.
fn text_error(py: Python<'_>, raw: &[u8], width: usize, swap: bool, i: usize, name: &str) -> PyErr {
    let element = &raw[i * width * 4..(i + 1) * width * 4];
    let codes: Vec<u32> = words::<4>(element, swap).map(u32::from_ne_bytes).collect();
    let n = codes.iter().rposition(|&c| c != 0).map_or(0, |k| k + 1);
    let le: Vec<u8> = codes[..n].iter().flat_map(|c| c.to_le_bytes()).collect();
    // The str NumPy gives for the element (it keeps lone surrogates): UTF-32 decoded with
    // "surrogatepass".
    let e = match PyBytes::new(py, &le).call_method1("decode", ("utf-32-le", "surrogatepass")) {
        Ok(s) => match s.downcast_into::<PyString>() {
            Ok(s) => match push_str(&s, &mut Vec::new()) {
                Err(e) => e,
                Ok(()) => PyValueError::new_err("not Unicode text"),
            },
            Err(e) => e.into(),
        },
        // A value past U+10FFFF: no str holds it (NumPy's own tolist() fails on it), and the
        // decoder's UnicodeDecodeError says so.
        Err(e) => e,
    };
    at_index(e, name, i)
}
