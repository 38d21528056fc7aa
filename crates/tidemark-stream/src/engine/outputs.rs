//! What the engine hands its caller: closed buckets, late merges, rollups, expiries, alerts
//! and state rows ([`Outputs`]), and the counters it keeps per metric.

use tidemark::Estimate;

use super::{AlertPhase, StateRow};

/// A bucket whose watermark has passed: its bytes go to the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClosedBucket {
    /// Index of the metric in the config.
    pub metric: usize,
    /// The key's bytes.
    pub key: Box<[u8]>,
    /// The bucket's start, ms.
    pub start: u64,
    /// The summary's bytes.
    pub bytes: Vec<u8>,
    /// Whether this is a bucket of the metric's rollup (a late merge into a period already
    /// rolled up), stored under the rollup name.
    pub rollup: bool,
}

/// What a run's committer may write ahead of a checkpoint ([`super::Engine::take_ahead`]):
/// the closed buckets, and before them the starts whose spilled keys' open rows the store
/// promotes into buckets (closed buckets overwrite what a promotion moved, as in a commit).
#[derive(Debug, Default)]
pub(crate) struct Ahead {
    pub promote: Vec<(usize, u64)>,
    pub closed: Vec<ClosedBucket>,
}

/// A period whose buckets are all closed: merge them into rollup buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rollup {
    /// Index of the metric.
    pub metric: usize,
    /// Start of the first period to roll up, ms.
    pub from: u64,
    /// End of the last one, ms (a multiple of the rollup width).
    pub to: u64,
}

/// An alert: a key's window estimate crossed a rule's limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    /// Index of the metric.
    pub metric: usize,
    /// Index of the rule within the metric.
    pub rule: usize,
    /// The key's bytes.
    pub key: Box<[u8]>,
    /// Start of the bucket whose close raised it, ms.
    pub bucket: u64,
    /// The window's start, ms: `window_end` minus the metric's window.
    pub window_start: u64,
    /// The window's end (the bucket's end), ms.
    pub window_end: u64,
    /// The window estimate.
    pub estimate: Estimate,
    /// For a frequency metric, the item whose window count crossed (`None`: the bound of the
    /// items its sketch does not name crossed, or another kind of metric).
    pub item: Option<Box<[u8]>>,
    /// For a quantile metric, the quantile the rule compared (`None` for other kinds).
    pub quantile: Option<f64>,
    /// The rule's threshold.
    pub threshold: f64,
    /// The threshold plus the margin: what the estimate was compared with.
    pub limit: f64,
    /// Raised early (at an event, before the close), at a close, or an early alert confirmed
    /// or withdrawn by its close (see [`AlertPhase`]).
    pub phase: AlertPhase,
    /// The event time at which it was raised, ms: the event's (early) or that of the record
    /// whose time closed the bucket (the newest time seen, at the end of the input).
    pub at: u64,
}

/// What the engine has produced since the caller last took its outputs.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    /// Closed buckets, to write.
    pub closed: Vec<ClosedBucket>,
    /// Too-late events under the `merge` policy: the summary of the event alone, to merge into
    /// the stored bucket (read-merge-write).
    pub late_merges: Vec<ClosedBucket>,
    /// Per metric, buckets starting before this are past retention and may be deleted.
    pub expire_before: Vec<Option<u64>>,
    /// Periods to roll up (after this batch's buckets are written).
    pub rollups: Vec<Rollup>,
    /// Per metric, rollup buckets starting before this may be deleted.
    pub expire_rollups_before: Vec<Option<u64>>,
    /// Alerts raised.
    pub alerts: Vec<Alert>,
    /// `(metric, start)`: buckets closed while some keys were spilled: the store moves the
    /// start's open rows into the metric's buckets (before this batch's closed buckets,
    /// which overwrite them).
    pub promote: Vec<(usize, u64)>,
    /// State rows of the keys changed since the last checkpoint (see [`spill`]), deletions
    /// first.
    pub state: Vec<StateRow>,
    /// Per metric: key rows whose expiry is at or before this are swept.
    pub sweep_before: Vec<Option<u64>>,
    /// Per metric: open rows of buckets starting before this are stale (their buckets closed:
    /// in memory, or by this batch's promotions, which go first) and are deleted.
    pub open_before: Vec<Option<u64>>,
    /// Bytes the closed buckets hold (for [`Engine::memory`]).
    pub(super) bytes: usize,
}

impl Outputs {
    pub(super) fn empty(metrics: usize) -> Outputs {
        Outputs {
            expire_before: vec![None; metrics],
            expire_rollups_before: vec![None; metrics],
            sweep_before: vec![None; metrics],
            open_before: vec![None; metrics],
            ..Outputs::default()
        }
    }

    /// Whether there is anything the store must commit.
    pub fn needs_commit(&self) -> bool {
        !self.closed.is_empty()
            || !self.late_merges.is_empty()
            || !self.rollups.is_empty()
            || !self.promote.is_empty()
            || !self.state.is_empty()
    }
}

/// Counters the engine keeps per metric (persisted with its state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Events added.
    pub events: u64,
    /// Events that arrived after a newer bucket had opened but within the lateness: landed
    /// in their own (older, still open) bucket.
    pub late: u64,
    /// Too-late events dropped (`drop`).
    pub dropped: u64,
    /// Too-late events merged into their stored bucket (`merge`).
    pub merged: u64,
    /// Buckets closed.
    pub buckets: u64,
    /// Alerts raised.
    pub alerts: u64,
}
