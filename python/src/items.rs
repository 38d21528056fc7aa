//! Python values to item bytes, the way the command line hashes its lines.
//!
//! An item hashes as the bytes the CLI would read for it on one line:
//! - `str`: its UTF-8 bytes; `bytes`/`bytearray`: themselves;
//! - `int` (and `bool`, and anything with `__index__`): its decimal text, `str(x)` (so
//!   `True` is `b"True"`, as `str(True)`);
//! - `float`: `repr(x)` (shortest round-trip digits: `0.1` is `b"0.1"`, `1e16` is
//!   `b"1e+16"`).
//!
//! A batch (`update_many`) is copied out of Python first — a list or tuple item by item, a
//! NumPy array or any buffer-protocol object as one block of memory — so that the hashing
//! loop runs with the GIL released. A NumPy array hashes exactly as its `tolist()`: integers
//! as decimal text, floats (float32 widened to float64) as `repr`, fixed-width bytes (`S`)
//! without their trailing NULs, fixed-width text (`U`) as UTF-8 without trailing NULs,
//! booleans as `True`/`False`. An array that `tolist()` would give an item refused as text
//! (a lone surrogate in a `U` array, which NumPy stores but UTF-8 cannot encode) is refused
//! with that item's error, named by its index. A masked array is refused: its masked entries
//! have no value (`tolist()` gives `None`) and its buffer holds whatever lies beneath them.
//!
//! A NumPy scalar hashes as the one-element array of it: it is read by the same decoding of
//! its dtype and bytes, so `np.float32(0.1)` is `repr(float(np.float32(0.1)))` and `np.True_`
//! is `True`, and a scalar of a dtype arrays refuse (`float16`, `complex64`, …) is refused.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use tidemark::ItemHasher;

use pyo3::sync::GILOnceCell;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyFloat, PyInt, PyList, PyString, PyTuple, PyType,
};

/// Batches of at least this many items are hashed on two threads.
pub const PARALLEL_MIN: usize = 1 << 16;
/// Items hashed per round on two threads (2 MiB of hashes).
const CHUNK: usize = 1 << 18;

/// Whether large batches hash on two threads: yes when the machine has two cores or more,
/// unless the environment variable `TIDEMARK_THREADS` is `1` (read once).
pub fn parallel() -> bool {
    static PARALLEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PARALLEL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores >= 2 && std::env::var("TIDEMARK_THREADS").map_or(true, |v| v.trim() != "1")
    })
}

/// A batch of items copied out of Python.
pub enum Batch<'a> {
    /// Eight-byte integers (signed or not) or floats in native byte order, borrowed from a
    /// C-contiguous NumPy array without a copy.
    Native8 { data: &'a [u8], kind: Native },
    /// Items as bytes, back to back; `ends[i]` is where item `i` ends.
    Bytes { data: Vec<u8>, ends: Vec<usize> },
    /// Signed integers.
    I64(Vec<i64>),
    /// Unsigned integers.
    U64(Vec<u64>),
    /// Floats.
    F64(Vec<f64>),
    /// Booleans.
    Bool(Vec<bool>),
    /// Fixed-width byte strings, trailing NULs not part of the item.
    Fixed { data: Vec<u8>, width: usize },
    /// Fixed-width text (NumPy `U`), trailing NULs not part of the item: checked to be
    /// Unicode scalar values when copied out (see [`text`]).
    Ucs4 { data: Vec<char>, width: usize },
}

/// Calls `sink` with the hashes of items `0..n`, in order, as `fill(lo, hi, out)` computes
/// them into `out` (of length `hi − lo`): a large batch is hashed on two threads a chunk at a
/// time (each half of a chunk on one), and `sink` still sees every hash in order.
fn in_order_on_two_threads<E>(
    n: usize,
    fill: impl Fn(usize, usize, &mut [u64]) + Sync,
    mut sink: impl FnMut(u64) -> Result<(), E>,
) -> Result<(), E> {
    let mut hashes = vec![0u64; CHUNK.min(n)];
    let two = n >= PARALLEL_MIN && parallel();
    let mut lo = 0;
    while lo < n {
        let hi = (lo + CHUNK).min(n);
        if two {
            let mid = lo + (hi - lo) / 2;
            let (a, b) = hashes[..hi - lo].split_at_mut(mid - lo);
            std::thread::scope(|s| {
                s.spawn(|| fill(mid, hi, b));
                fill(lo, mid, a);
            });
        } else {
            fill(lo, hi, &mut hashes[..hi - lo]);
        }
        for &h in &hashes[..hi - lo] {
            sink(h)?;
        }
        lo = hi;
    }
    Ok(())
}

/// What a [`Batch::Native8`] holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Native {
    I64,
    U64,
    F64,
}

impl Batch<'_> {
    /// The number of items.
    pub fn len(&self) -> usize {
        match self {
            Batch::Native8 { data, .. } => data.len() / 8,
            Batch::Bytes { ends, .. } => ends.len(),
            Batch::I64(v) => v.len(),
            Batch::U64(v) => v.len(),
            Batch::F64(v) => v.len(),
            Batch::Bool(v) => v.len(),
            Batch::Fixed { data, width } => data.len().checked_div(*width).unwrap_or(0),
            Batch::Ucs4 { data, width } => data.len().checked_div(*width).unwrap_or(0),
        }
    }

    /// Calls `f` with each item's bytes, in order; stops at the first error.
    pub fn try_for_each<E>(&self, f: impl FnMut(&[u8]) -> Result<(), E>) -> Result<(), E> {
        self.try_for_each_in(0, self.len(), f)
    }

    /// Calls `f` with the bytes of items `lo..hi`, in order; stops at the first error.
    pub fn try_for_each_in<E>(
        &self,
        lo: usize,
        hi: usize,
        mut f: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Batch::Native8 { data, kind } => {
                let words = data[lo * 8..hi * 8].chunks_exact(8).map(|c| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(c);
                    a
                });
                match kind {
                    Native::I64 => {
                        let mut buf = itoa::Buffer::new();
                        for a in words {
                            f(buf.format(i64::from_ne_bytes(a)).as_bytes())?;
                        }
                    }
                    Native::U64 => {
                        let mut buf = itoa::Buffer::new();
                        for a in words {
                            f(buf.format(u64::from_ne_bytes(a)).as_bytes())?;
                        }
                    }
                    Native::F64 => {
                        let mut buf = Vec::with_capacity(32);
                        for a in words {
                            buf.clear();
                            float_repr(f64::from_ne_bytes(a), &mut buf);
                            f(&buf)?;
                        }
                    }
                }
            }
            Batch::Bytes { data, ends } => {
                let mut start = if lo == 0 { 0 } else { ends[lo - 1] };
                for &end in &ends[lo..hi] {
                    f(&data[start..end])?;
                    start = end;
                }
            }
            Batch::I64(v) => {
                let mut buf = itoa::Buffer::new();
                for &x in &v[lo..hi] {
                    f(buf.format(x).as_bytes())?;
                }
            }
            Batch::U64(v) => {
                let mut buf = itoa::Buffer::new();
                for &x in &v[lo..hi] {
                    f(buf.format(x).as_bytes())?;
                }
            }
            Batch::F64(v) => {
                let mut buf = Vec::with_capacity(32);
                for &x in &v[lo..hi] {
                    buf.clear();
                    float_repr(x, &mut buf);
                    f(&buf)?;
                }
            }
            Batch::Bool(v) => {
                for &b in &v[lo..hi] {
                    f(if b { b"True" } else { b"False" })?;
                }
            }
            Batch::Fixed { data, width } => {
                if *width > 0 {
                    for chunk in data[lo * width..hi * width].chunks_exact(*width) {
                        let n = chunk.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
                        f(&chunk[..n])?;
                    }
                }
            }
            Batch::Ucs4 { data, width } => {
                if *width > 0 {
                    let mut buf = Vec::with_capacity(*width * 4);
                    for chunk in data[lo * width..hi * width].chunks_exact(*width) {
                        let n = chunk.iter().rposition(|&c| c != '\0').map_or(0, |i| i + 1);
                        buf.clear();
                        for &ch in &chunk[..n] {
                            let mut tmp = [0u8; 4];
                            buf.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                        }
                        f(&buf)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Calls `sink` with each item's hash under `hasher`, in order; stops at the first error.
    /// Large batches are hashed on two threads, a chunk at a time, while `sink` still sees
    /// every hash in the batch's order: the result equals hashing item by item.
    pub fn try_for_each_hash<E>(
        &self,
        hasher: ItemHasher,
        sink: impl FnMut(u64) -> Result<(), E>,
    ) -> Result<(), E> {
        in_order_on_two_threads(
            self.len(),
            |lo, hi, out| self.fill_hashes(hasher, lo, hi, out),
            sink,
        )
    }

    /// [`Batch::try_for_each_hash`] for integers hashed as their eight little-endian bytes
    /// (`Hll::insert_u64`, the CLI's `--binary-integers`): no decimal text to format, about a
    /// third of the work. `None` for a batch of other items.
    pub fn try_for_each_binary_hash<E>(
        &self,
        hasher: ItemHasher,
        sink: impl FnMut(u64) -> Result<(), E>,
    ) -> Option<Result<(), E>> {
        let words: &(dyn Fn(usize, usize, &mut [u64]) + Sync) = match self {
            Batch::Native8 { data, kind } if *kind != Native::F64 => &|lo, hi, out| {
                for (o, c) in out.iter_mut().zip(data[lo * 8..hi * 8].chunks_exact(8)) {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(c);
                    *o = hasher.hash_u64(u64::from_ne_bytes(a));
                }
            },
            // Negative integers as their two's complement, as a NumPy `int64` array's bytes.
            Batch::I64(v) => &|lo, hi, out| {
                for (o, &x) in out.iter_mut().zip(&v[lo..hi]) {
                    *o = hasher.hash_u64(x as u64);
                }
            },
            Batch::U64(v) => &|lo, hi, out| {
                for (o, &x) in out.iter_mut().zip(&v[lo..hi]) {
                    *o = hasher.hash_u64(x);
                }
            },
            _ => return None,
        };
        Some(in_order_on_two_threads(
            self.len(),
            |lo, hi, out| words(lo, hi, out),
            sink,
        ))
    }

    /// Applies the items' hashes on two threads: the first half of the batch to `a`, the
    /// second to `b` (for summaries whose updates commute and merge exactly, as Count-Min's
    /// counters add). Stops each half at its first error.
    pub fn split_for_each_hash<A: Send, E: Send>(
        &self,
        hasher: ItemHasher,
        a: &mut A,
        b: &mut A,
        f: impl Fn(&mut A, u64) -> Result<(), E> + Sync,
    ) -> Result<(), E> {
        let n = self.len();
        let mid = n / 2;
        let f = &f;
        let (ra, rb) = std::thread::scope(|s| {
            let second = s.spawn(move || self.try_for_each_in(mid, n, |x| f(b, hasher.hash(x))));
            let first = self.try_for_each_in(0, mid, |x| f(a, hasher.hash(x)));
            (first, second.join())
        });
        ra?;
        match rb {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    fn fill_hashes(&self, hasher: ItemHasher, lo: usize, hi: usize, out: &mut [u64]) {
        debug_assert_eq!(out.len(), hi - lo);
        let mut i = 0;
        let _ = self.try_for_each_in::<()>(lo, hi, |b| {
            out[i] = hasher.hash(b);
            i += 1;
            Ok(())
        });
    }

    /// Calls `f` with each item's bytes, in order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        let _ = self.try_for_each::<()>(|b| {
            f(b);
            Ok(())
        });
    }

    /// The items as integers, or `None` if they are not integers.
    pub fn integers(&self) -> Option<Vec<i128>> {
        match self {
            Batch::Native8 { data, kind } => {
                let words = data.chunks_exact(8).map(|c| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(c);
                    a
                });
                match kind {
                    Native::I64 => Some(words.map(|a| i64::from_ne_bytes(a) as i128).collect()),
                    Native::U64 => Some(words.map(|a| u64::from_ne_bytes(a) as i128).collect()),
                    Native::F64 => None,
                }
            }
            Batch::I64(v) => Some(v.iter().map(|&x| x as i128).collect()),
            Batch::U64(v) => Some(v.iter().map(|&x| x as i128).collect()),
            Batch::Bool(v) => Some(v.iter().map(|&x| x as i128).collect()),
            _ => None,
        }
    }
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

/// Appends one item's bytes to `out`.
pub fn push_item(obj: &Bound<'_, PyAny>, out: &mut Vec<u8>) -> PyResult<()> {
    if let Ok(s) = obj.downcast::<PyString>() {
        if utf8::cached_available(obj.py()) {
            out.extend_from_slice(utf8::cached(s)?);
        } else {
            out.extend_from_slice(s.encode_utf8()?.as_bytes());
        }
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
}

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

/// A NumPy scalar that is not already a Python `str`, `bytes` or `float` (as `str_`,
/// `bytes_` and `float64` are), read as the one-element array of it: its bytes decoded by its
/// dtype, so that it hashes exactly as that array's item and is refused as that array is.
fn push_numpy_scalar(obj: &Bound<'_, PyAny>, np: &NumpyTypes, out: &mut Vec<u8>) -> PyResult<()> {
    let py = obj.py();
    // The common scalar (from iterating an integer array) the short way: its decimal text,
    // as the array's. `timedelta64` is an integer without `__index__`: it goes by its dtype
    // and is refused, as its arrays are.
    if obj.is_instance(np.integer.bind(py))? && obj.hasattr("__index__")? {
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

/// One item's bytes.
pub fn item_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let mut v = Vec::new();
    push_item(obj, &mut v)?;
    Ok(v)
}

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

fn objects<'py>(
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
fn objects_into<'py>(
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

/// Items of a list or tuple copied out per round: bounded memory, a buffer that stays in
/// cache, and no growth of one buffer the size of the whole list.
const LIST_CHUNK: usize = 1 << 18;

/// Calls `f(offset, batch)` on the items of `obj` in order: a list or tuple copied out
/// [`LIST_CHUNK`] items at a time (the items of the chunks before a bad item stay added),
/// anything else as one batch. A list is read up to the length it had at the call.
pub fn for_each_chunk(
    obj: &Bound<'_, PyAny>,
    name: &str,
    mut f: impl FnMut(usize, &Batch<'_>) -> PyResult<()>,
) -> PyResult<()> {
    let Some(mut chunks) = Chunks::of(obj, name) else {
        return f(0, &extract_batch(obj, name)?);
    };
    while let Some((lo, batch)) = chunks.next()? {
        f(lo, &batch)?;
        chunks.recycle(batch);
    }
    Ok(())
}

/// A list or tuple copied out [`LIST_CHUNK`] items at a time, each chunk a [`Batch::Bytes`]
/// of its own (so that it can cross to another thread). A list is read up to the length it
/// had at the start; if another thread shrinks it meanwhile, what is there.
struct Chunks<'a, 'py> {
    obj: &'a Bound<'py, PyAny>,
    name: &'a str,
    len: usize,
    lo: usize,
    /// The buffers of a chunk done with, for the next.
    spare: Option<(Vec<u8>, Vec<usize>)>,
}

impl<'a, 'py> Chunks<'a, 'py> {
    /// The chunks of `obj`, if it is a list or a tuple.
    fn of(obj: &'a Bound<'py, PyAny>, name: &'a str) -> Option<Self> {
        let len = match (obj.downcast::<PyList>(), obj.downcast::<PyTuple>()) {
            (Ok(l), _) => l.len(),
            (_, Ok(t)) => t.len(),
            _ => return None,
        };
        Some(Chunks {
            obj,
            name,
            len,
            lo: 0,
            spare: None,
        })
    }

    fn item(&self, i: usize) -> Option<Bound<'py, PyAny>> {
        match (
            self.obj.downcast::<PyList>(),
            self.obj.downcast::<PyTuple>(),
        ) {
            (Ok(l), _) => l.get_item(i).ok(),
            (_, Ok(t)) => t.get_item(i).ok(),
            _ => None,
        }
    }

    /// The next chunk and the index of its first item; an invalid item is an error naming
    /// its index.
    fn next(&mut self) -> PyResult<Option<(usize, Batch<'static>)>> {
        if self.lo >= self.len {
            return Ok(None);
        }
        let hi = (self.lo + LIST_CHUNK).min(self.len);
        let (mut data, mut ends) = self.spare.take().unwrap_or_default();
        data.clear();
        ends.clear();
        let items = (self.lo..hi).map_while(|i| self.item(i));
        objects_into(&mut data, &mut ends, items, self.name, self.lo)?;
        if ends.is_empty() {
            self.lo = self.len;
            return Ok(None);
        }
        let lo = self.lo;
        self.lo += ends.len();
        Ok(Some((lo, Batch::Bytes { data, ends })))
    }

    /// Takes a chunk's buffers back for the next.
    fn recycle(&mut self, batch: Batch<'_>) {
        if let Batch::Bytes { data, ends } = batch {
            self.spare = Some((data, ends));
        }
    }
}

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

/// Items of NumPy kind `kind` and `size` bytes each (an array's or a scalar's), as a batch.
fn decode(
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
/// gets from [`push_item`] (a lone surrogate's `UnicodeEncodeError`, a `ValueError`), named
/// by its index as a list's bad item is.
fn text_error(py: Python<'_>, raw: &[u8], width: usize, swap: bool, i: usize, name: &str) -> PyErr {
    let element = &raw[i * width * 4..(i + 1) * width * 4];
    let codes: Vec<u32> = words::<4>(element, swap).map(u32::from_ne_bytes).collect();
    let n = codes.iter().rposition(|&c| c != 0).map_or(0, |k| k + 1);
    let le: Vec<u8> = codes[..n].iter().flat_map(|c| c.to_le_bytes()).collect();
    // The str NumPy gives for the element (it keeps lone surrogates): UTF-32 decoded with
    // "surrogatepass".
    let e = match PyBytes::new(py, &le).call_method1("decode", ("utf-32-le", "surrogatepass")) {
        Ok(s) => match push_item(&s, &mut Vec::new()) {
            Err(e) => e,
            Ok(()) => PyValueError::new_err("not Unicode text"),
        },
        // A value past U+10FFFF: no str holds it (NumPy's own tolist() fails on it), and the
        // decoder's UnicodeDecodeError says so.
        Err(e) => e,
    };
    at_index(e, name, i)
}

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

/// [`for_each_chunk`] for `integers="binary"`: a list or tuple of ints is read 2^18 at a
/// time into words ([`binary_word`]; a bad item is named by its index, and the chunks before
/// it stay added), anything else as its batch (a NumPy integer array is read in place).
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

/// An item's error, named by the batch and the item's index (the message without its type's
/// name, which the new error carries: a `ValueError` stays one, anything else is a
/// `TypeError`).
fn at_index(e: PyErr, name: &str, i: usize) -> PyErr {
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

/// [`for_each_chunk`] with the copying and the work overlapped: while `work` (which needs no
/// Python) runs on a worker thread over one chunk of a list or tuple, this thread copies the
/// next out of Python, so a batch of `str` costs about the larger of the two instead of their
/// sum. Chunks reach `work` in order; the chunks before a bad item are applied, as with
/// [`for_each_chunk`], and the first error of `work` stops it (returned inside). Anything else
/// than a list or tuple is one batch, worked with the GIL released.
pub fn for_each_chunk_overlapped<E: Send>(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    name: &str,
    mut work: impl FnMut(&Batch<'_>) -> Result<(), E> + Send,
) -> PyResult<Result<(), E>> {
    let Some(mut chunks) = Chunks::of(obj, name) else {
        let batch = extract_batch(obj, name)?;
        return Ok(py.allow_threads(|| work(&batch)));
    };
    if chunks.len <= LIST_CHUNK || !parallel() {
        // One chunk (or one thread asked for): nothing to overlap, no thread to start.
        while let Some((_, batch)) = chunks.next()? {
            if let Err(e) = py.allow_threads(|| work(&batch)) {
                return Ok(Err(e));
            }
            chunks.recycle(batch);
        }
        return Ok(Ok(()));
    }
    std::thread::scope(|s| {
        // A rendezvous: the worker holds one chunk while the next is copied, two chunks of
        // memory at most.
        let (to_worker, received) = std::sync::mpsc::sync_channel::<Batch<'static>>(0);
        let worker = s.spawn(move || {
            for batch in received {
                work(&batch)?;
            }
            Ok(())
        });
        let mut copied = Ok(());
        loop {
            let batch = match chunks.next() {
                Ok(Some((_, batch))) => batch,
                Ok(None) => break,
                Err(e) => {
                    copied = Err(e);
                    break;
                }
            };
            // The worker stopped (its work refused a chunk): nothing more to send.
            if py.allow_threads(|| to_worker.send(batch)).is_err() {
                break;
            }
        }
        drop(to_worker);
        // The worker applies what it was sent, then ends; its panic is ours.
        let worked = match py.allow_threads(|| worker.join()) {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        copied.map(|()| worked)
    })
}
