//! Events for buckets already closed: dropped and counted, or (`late = "merge"`) gathered
//! per bucket and key for the store's read-merge-write, and added to the key's live window
//! when the bucket is inside it.

use super::{spill, ClosedBuckets, Engine, Key, KeyState, MetricState, WindowState};
use crate::config::LatePolicy;

impl Engine {
    /// An event for a closed bucket: dropped, or (`merge`) gathered for the store and, inside
    /// the key's live window, added to it.
    pub(super) fn add_too_late(
        m: &mut MetricState,
        start: u64,
        key: &[u8],
        item: u64,
        bytes: &[u8],
    ) {
        let closed_until = m.closed_until.unwrap_or(0);
        // A bucket past retention has been deleted: merging into it would bring it back
        // holding the late events alone, a partial bucket that reads as exact.
        let expired = start < closed_until.saturating_sub(m.cfg.retention);
        match m.cfg.late {
            LatePolicy::Drop => m.counters.dropped += 1,
            LatePolicy::Merge if expired => m.counters.dropped += 1,
            LatePolicy::Merge => {
                m.counters.merged += 1;
                // A bucket inside the key's live window gets the item too, so the next
                // closes see it — also a bucket the key had no event in before, and a key
                // with no live window yet (a key read back rebuilds its ring from the
                // store, which holds them: both must agree).
                if m.shape.rings() && start >= closed_until.saturating_sub(m.cfg.window) {
                    let rules = m.cfg.alerts.len();
                    let (ks, made) = m.keys.get_or_insert_with(key, || KeyState::new(rules));
                    if made {
                        m.mem += ks.mem;
                    }
                    if start > ks.last_start {
                        // The row carries the expiry: it changes with it.
                        ks.last_start = start;
                        ks.row_dirty = true;
                    }
                    if ks.window.is_none() {
                        ks.window = Some(WindowState::Buckets(ClosedBuckets::default()));
                    }
                    // Its running window misses the event: the next event builds it again.
                    ks.running = None;
                    ks.early_end = 0;
                    if let Some(WindowState::Buckets(ring)) = &mut ks.window {
                        ring.add_late(start, item, bytes, || m.shape.empty(start));
                    }
                    let before = ks.mem;
                    ks.mem = spill::key_bytes(ks);
                    m.mem = m.mem + ks.mem - before;
                }
                // The store gets it by read-merge-write at the next checkpoint: late
                // events of one bucket and key are gathered into one summary first, so a
                // stream of late events costs an insert each, not a store write each.
                let k = (false, start, Key::new(key));
                let shape = &m.shape;
                m.late
                    .entry(k)
                    .or_insert_with(|| shape.empty(start))
                    .add(item, bytes);
                // A period already rolled up gets the event too.
                if let (Some(r), Some(rolled), Some(rshape)) =
                    (m.cfg.rollup, m.rolled_until, &m.rollup_shape)
                {
                    let period = start - start % r;
                    let kept = rolled.saturating_sub(m.cfg.rollup_retention);
                    if period < rolled && period >= kept {
                        m.late
                            .entry((true, period, Key::new(key)))
                            .or_insert_with(|| rshape.empty(period))
                            .add(item, bytes);
                    }
                }
            }
        }
    }
}
