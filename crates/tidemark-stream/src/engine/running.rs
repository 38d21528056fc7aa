//! The running window of a key: the window the metric's next close (of its oldest open
//! bucket, whichever key holds it) will evaluate, `[end − window, end)`, kept up to date
//! between closes for early alerts.
//!
//! It is derived state, never stored, in two steps. The key's state holds a [`bound`] on the
//! window's count — the buckets' exact counts summed, plus one per event since — which most
//! keys never take past the smallest early limit: an addition per event. Past it (and the
//! exact bound past it too), a [`Running`] estimate is built from the buckets and fed each
//! event after: for a count metric the closed part's estimate, to which the open buckets'
//! exact counts are added; for a distinct metric a sketch of the window's items. A close drops
//! both (the next event builds them again).

use tidemark::Estimate;

use super::open::OpenBuckets;
use super::shape::{MetricShape, Summary};
use super::WindowState;

/// What the metric's next close will evaluate of a key, so far.
pub(super) struct Running {
    /// The end of the window (the metric's oldest open bucket's end).
    end: u64,
    /// Its closed part (a count metric), or all of it (a distinct metric).
    base: Base,
}

enum Base {
    /// The closed buckets' count in the window; the open buckets are added when estimated.
    Count(Estimate),
    /// A distinct window's items: its closed and open buckets merged, and every event since.
    Sketch(Summary),
}

impl Running {
    /// The running window ending at `end`, of `span` ms, from a key's closed and open buckets.
    pub(super) fn build(
        shape: &MetricShape,
        window: Option<&mut WindowState>,
        open: &OpenBuckets,
        end: u64,
        span: u64,
    ) -> Running {
        let from = end.saturating_sub(span);
        let inside = |s: &u64| (from..end).contains(s);
        let base = match window {
            Some(WindowState::Hist(h)) => Base::Count(h.estimate_from(from)),
            None if !shape.rings() => Base::Count(Estimate::exact(0.0)),
            ring => {
                // The closed buckets (all before `end`) through the ring's merge, then the
                // open ones inside the window.
                let mut acc = match ring {
                    Some(WindowState::Buckets(r)) => r.merged(shape, from, from),
                    _ => shape.empty(from),
                };
                for o in open.iter().filter(|o| inside(&o.start)) {
                    // Cannot fail: a metric's summaries all have its shape.
                    let _ = acc.merge(&o.summary);
                }
                Base::Sketch(acc)
            }
        };
        Running { end, base }
    }

    /// The end of the window it runs for.
    pub(super) fn end(&self) -> u64 {
        self.end
    }

    /// Adds an event of a bucket inside the window (a count metric reads its open buckets
    /// when estimated instead).
    pub(super) fn add(&mut self, item: u64, bytes: &[u8]) {
        if let Base::Sketch(s) = &mut self.base {
            s.add(item, bytes);
        }
    }

    /// The running window's estimate, given the key's open buckets.
    pub(super) fn estimate(&self, open: &OpenBuckets, span: u64) -> Estimate {
        match &self.base {
            Base::Sketch(s) => s.estimate(),
            Base::Count(closed) => {
                let from = self.end.saturating_sub(span);
                let open: f64 = open
                    .iter()
                    .filter(|o| (from..self.end).contains(&o.start))
                    .map(|o| o.summary.upper())
                    .sum();
                Estimate {
                    value: closed.value + open,
                    low: closed.low + open,
                    high: closed.high + open,
                    ..*closed
                }
            }
        }
    }

    /// Heap bytes held.
    pub(super) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Running>()
            + match &self.base {
                Base::Count(_) => 0,
                Base::Sketch(s) => s.heap_bytes(),
            }
    }
}

/// A bound on the count of a window `[from, end)` of a key's buckets, closed and open: the
/// sum of their exact counts (∞ if one is an estimate), a count window's closed part by its
/// histogram's upper end. No window of them holds more.
pub(super) fn bound(
    window: Option<&mut WindowState>,
    open: &OpenBuckets,
    from: u64,
    end: u64,
) -> f64 {
    let inside = |s: &u64| (from..end).contains(s);
    let closed = match window {
        Some(WindowState::Hist(h)) => h.estimate_from(from).high,
        // Closed buckets all start before `end`.
        Some(WindowState::Buckets(r)) => r.upper_from(from),
        None => 0.0,
    };
    closed
        + open
            .iter()
            .filter(|o| inside(&o.start))
            .map(|o| o.summary.upper())
            .sum::<f64>()
}
