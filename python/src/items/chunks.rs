//! A list or tuple worked through [`LIST_CHUNK`] items at a time: bounded memory for a batch
//! of any length and, for work that needs no Python, the copying of one chunk overlapped
//! with the work on the one before. Chunks reach the work in order, and the chunks before a
//! bad item stay applied. Anything other than a list or tuple is one batch.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use super::batch::{parallel, Batch};
use super::extract::extract_batch;
use super::objects::objects_into;

/// Items of a list or tuple copied out per round: bounded memory, a buffer that stays in
/// cache, and no growth of one buffer the size of the whole list.
pub(super) const LIST_CHUNK: usize = 1 << 18;

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
