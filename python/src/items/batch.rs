//! A batch of items copied out of Python, the loops that hash it, and the error of one of its
//! items, named by its index ([`at_index`]).
//!
//! However a batch holds its items (bytes back to back, typed integers or floats, booleans,
//! fixed-width strings, or a NumPy array borrowed in place), each is visited as the bytes the
//! [rules](super) give it, in the batch's order. A batch of [`PARALLEL_MIN`] items or more is
//! hashed on two threads, a chunk at a time, and the hashes still reach the caller in order:
//! the result is that of hashing item by item. Only [`Batch::split_for_each_hash`] gives up
//! the order, for summaries whose updates commute and merge exactly. `TIDEMARK_THREADS=1`
//! keeps everything on one thread.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use tidemark::ItemHasher;

use super::text::float_repr;

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
    /// Unicode scalar values when copied out (see `text` in the `numpy` module).
    Ucs4 { data: Vec<char>, width: usize },
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
