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
//!
//! One concept a file, each using only those listed before it: [`text`] writes a `str`'s
//! UTF-8 and a float's `repr`; [`batch`] is a batch copied out of Python and its hashing
//! loops; [`dtype`] knows NumPy's types and decodes raw bytes by NumPy kind; [`scalar`] turns
//! one value into its bytes; [`objects`] copies Python objects item by item; [`numpy`] reads
//! arrays and buffers as one block of memory; [`extract`] copies a batch out (choosing among
//! those); [`chunks`] works a long list through in bounded chunks; [`integers`](mod@integers)
//! reads integer columns (counts, ticks) and the items of `integers="binary"`.

mod batch;
mod chunks;
mod dtype;
mod extract;
mod integers;
mod numpy;
mod objects;
mod scalar;
mod text;

pub use batch::{parallel, Batch, Native, PARALLEL_MIN};
pub use chunks::{for_each_chunk, for_each_chunk_overlapped};
pub(crate) use dtype::numpy_types;
pub use extract::extract_batch;
pub use integers::{
    binary_integers, binary_word, for_each_word_chunk, int_column, integers, to_i64, to_u64,
};
pub(crate) use numpy::{buffer_batch, numpy_batch};
pub use scalar::item_bytes;
pub use text::float_repr;
