//! Python objects copied item by item into a batch of bytes, an item's error named by its
//! index in the batch (`items[3]: …`).

use pyo3::prelude::*;

use super::batch::{at_index, Batch};
use super::scalar::push_item;

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
