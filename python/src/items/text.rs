//! The text forms of items that are not Python's own objects' bytes: a `str`'s UTF-8 (read
//! where CPython caches it) and a float's `repr`, written here without asking Python.

use pyo3::prelude::*;
use pyo3::types::PyString;

/// A `str`'s UTF-8 bytes, appended to `out` (a lone surrogate is Python's
/// `UnicodeEncodeError`).
pub(super) fn push_str(s: &Bound<'_, PyString>, out: &mut Vec<u8>) -> PyResult<()> {
    if utf8::cached_available(s.py()) {
        out.extend_from_slice(utf8::cached(s)?);
    } else {
        out.extend_from_slice(s.encode_utf8()?.as_bytes());
    }
    Ok(())
}

/// Python's `repr(x)` of a float, appended to `out`: the shortest digits that round-trip,
/// positional for decimal exponents in `-4..16`, else scientific with a signed exponent of
/// at least two digits.
pub fn float_repr(x: f64, out: &mut Vec<u8>) {
    if x.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if x.is_infinite() {
        out.extend_from_slice(if x > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    if x == 0.0 {
        out.extend_from_slice(if x.is_sign_negative() {
            b"-0.0"
        } else {
            b"0.0"
        });
        return;
    }
    // Ryū prints the shortest digits that round-trip and, among those, the closest to the
    // exact value, as Python's repr (David Gay's mode 0); only its layout differs.
    let mut buf = ryu::Buffer::new();
    let s = buf.format_finite(x);
    let (negative, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (mantissa, e) = s.split_once(['e', 'E']).unwrap_or((s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let (int_part, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: Vec<u8> = int_part.bytes().chain(frac.bytes()).collect();
    // The decimal point sits after `point` digits.
    let mut point = int_part.len() as i32 + e;
    let lead = digits.iter().take_while(|&&d| d == b'0').count();
    digits.drain(..lead);
    point -= lead as i32;
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    let exp = point - 1;
    if negative {
        out.push(b'-');
    }
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.extend_from_slice(&digits);
                out.extend(std::iter::repeat_n(b'0', int_len - digits.len()));
                out.extend_from_slice(b".0");
            } else {
                out.extend_from_slice(&digits[..int_len]);
                out.push(b'.');
                out.extend_from_slice(&digits[int_len..]);
            }
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
            out.extend_from_slice(&digits);
        }
    } else {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(e.to_string().as_bytes());
    }
}

/// A `str`'s UTF-8 without a temporary `bytes` object.
///
/// `PyUnicode_AsUTF8AndSize` returns the UTF-8 form CPython caches inside the string (ASCII
/// strings share their own buffer): no allocation per item, where the limited API of Python
/// 3.9 only offers `PyUnicode_AsUTF8String`, which builds a `bytes` object (measured: about
/// 40% of `update_many`'s time over a list of short strings). It is in the stable ABI from
/// Python 3.10, so it is used only there; 3.9 takes the checked twin, `encode_utf8`.
#[allow(unsafe_code)]
mod utf8 {
    use std::os::raw::c_char;
    use std::sync::OnceLock;

    use pyo3::ffi;
    use pyo3::prelude::*;
    use pyo3::types::PyString;

    extern "C" {
        fn PyUnicode_AsUTF8AndSize(
            unicode: *mut ffi::PyObject,
            size: *mut ffi::Py_ssize_t,
        ) -> *const c_char;
    }

    /// Whether the running interpreter has the function in its stable ABI (3.10 or later).
    pub fn cached_available(py: Python<'_>) -> bool {
        static AVAILABLE: OnceLock<bool> = OnceLock::new();
        // TIDEMARK_STR_FALLBACK=1 forces the 3.9 path, so that tests cover it on any Python.
        *AVAILABLE.get_or_init(|| {
            py.version_info() >= (3, 10)
                && std::env::var("TIDEMARK_STR_FALLBACK").map_or(true, |v| v.trim() != "1")
        })
    }

    /// The UTF-8 bytes of `s`, borrowed from `s`.
    pub fn cached<'a>(s: &'a Bound<'_, PyString>) -> PyResult<&'a [u8]> {
        let mut size: ffi::Py_ssize_t = 0;
        // SAFETY: `s` is a live `str` (the GIL is held: we have a `Bound`); the function
        // returns NULL with an exception set (a lone surrogate), or a pointer to `size` bytes
        // that the string object owns and keeps until it is freed — and `s` holds a strong
        // reference for the lifetime `'a` of the returned slice.
        let p = unsafe { PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size) };
        if p.is_null() {
            return Err(PyErr::fetch(s.py()));
        }
        let len = usize::try_from(size).unwrap_or(0);
        // SAFETY: as above: `p` points to `len` initialised bytes owned by `s`.
        Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
    }
}
