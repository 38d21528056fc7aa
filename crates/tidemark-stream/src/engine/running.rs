//! The running window of a key: the window the metric's next close (of its oldest open
//! bucket, whichever key holds it) will evaluate, `[end − window, end)`, kept up to date
//! between closes for early alerts.
//!
//! It is derived state, never stored: built at a key's first event that could raise an early
//! alert after a close (from the closed buckets in that range and the open ones), fed each
//! event after that, and dropped at every close (the next event builds it again). For a count
//! metric it is the closed part's estimate, to which the open buckets' exact counts are added
//! per event. For a distinct metric it starts as a bound — the sum of the buckets' exact
//! counts, which no union of them passes — and becomes a sketch of the range's items only
//! once that bound passes the smallest early limit: most keys stay far below every limit and
//! cost an addition per event, not a merge per bucket and an estimate per event.

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
    /// A distinct window's closed buckets' bound (∞ if one is an estimate); the open buckets'
    /// are added when estimated.
    Bound(f64),
    /// A distinct window's items: its closed and open buckets merged, and every event since.
    Sketch(Summary),
}

impl Running {
    /// The running window ending at `end`, of `span` ms, from a key's closed buckets: a
    /// distinct window's only as a bound ([`Running::estimate`] builds its sketch when
    /// needed).
    pub(super) fn build(window: Option<&WindowState>, end: u64, span: u64) -> Running {
        let from = end.saturating_sub(span);
        let base = match window {
            Some(WindowState::Hist(h)) => Base::Count(h.estimate_from(from)),
            Some(WindowState::Ring(r)) => Base::Bound(
                r.iter()
                    .filter(|(s, _)| (from..end).contains(s))
                    .map(|(_, b)| b.upper())
                    .sum(),
            ),
            // No bucket closed yet: a count or distinct window of its open buckets alone
            // (both kinds' open buckets bound themselves while exact).
            None => Base::Bound(0.0),
        };
        Running { end, base }
    }

    /// The end of the window it runs for.
    pub(super) fn end(&self) -> u64 {
        self.end
    }

    /// Adds an event of a bucket inside the window (the other forms read the open buckets
    /// when estimated instead).
    pub(super) fn add(&mut self, item: u64, bytes: &[u8]) {
        if let Base::Sketch(s) = &mut self.base {
            s.add(item, bytes);
        }
    }

    /// The running window's estimate, given the key's closed and open buckets; `None` while a
    /// bound says it is at most `below` (no early rule can fire).
    pub(super) fn estimate(
        &mut self,
        shape: &MetricShape,
        window: Option<&WindowState>,
        open: &OpenBuckets,
        span: u64,
        below: f64,
    ) -> Option<Estimate> {
        let (from, end) = (self.end.saturating_sub(span), self.end);
        let open_upper = || -> f64 {
            open.iter()
                .filter(|o| (from..end).contains(&o.start))
                .map(|o| o.summary.upper())
                .sum()
        };
        match &self.base {
            Base::Sketch(s) => Some(s.estimate()),
            Base::Count(closed) => {
                let open = open_upper();
                Some(Estimate {
                    value: closed.value + open,
                    low: closed.low + open,
                    high: closed.high + open,
                    ..*closed
                })
            }
            Base::Bound(closed) => {
                let bound = closed + open_upper();
                if bound <= below {
                    return None;
                }
                if let Some(Summary::Count(_)) = open.iter().next().map(|o| &o.summary) {
                    // A count window with no closed bucket: its open counts are exact.
                    return Some(Estimate::exact(bound));
                }
                let sketch = sketch(shape, window, open, from, end);
                let e = sketch.estimate();
                self.base = Base::Sketch(sketch);
                Some(e)
            }
        }
    }

    /// Heap bytes held.
    pub(super) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Running>()
            + match &self.base {
                Base::Count(_) | Base::Bound(_) => 0,
                Base::Sketch(s) => s.heap_bytes(),
            }
    }
}

/// A bound on the count of a window `[from, end)` of a key's buckets, closed and open: the
/// sum of their exact counts (∞ if one is an estimate), a count window's closed part by its
/// histogram's upper end. No window of them holds more.
pub(super) fn bound(window: Option<&WindowState>, open: &OpenBuckets, from: u64, end: u64) -> f64 {
    let inside = |s: &u64| (from..end).contains(s);
    let closed = match window {
        Some(WindowState::Hist(h)) => h.estimate_from(from).high,
        Some(WindowState::Ring(r)) => r
            .iter()
            .filter(|(s, _)| inside(s))
            .map(|(_, b)| b.upper())
            .sum(),
        None => 0.0,
    };
    closed
        + open
            .iter()
            .filter(|o| inside(&o.start))
            .map(|o| o.summary.upper())
            .sum::<f64>()
}

/// The summary of the buckets in `[from, end)`, closed and open, merged.
fn sketch(
    shape: &MetricShape,
    window: Option<&WindowState>,
    open: &OpenBuckets,
    from: u64,
    end: u64,
) -> Summary {
    let mut acc = shape.empty(from);
    let closed = match window {
        Some(WindowState::Ring(r)) => Some(r),
        _ => None,
    };
    let parts = closed
        .into_iter()
        .flatten()
        .map(|(s, b)| (*s, b))
        .chain(open.iter().map(|o| (o.start, &o.summary)));
    for (_, b) in parts.filter(|(s, _)| (from..end).contains(s)) {
        acc.merge(b).expect(
            "a metric's buckets share its shape: built by it, or decoded by it, so their merge \
             cannot be refused",
        );
    }
    acc
}
