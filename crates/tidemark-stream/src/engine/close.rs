//! Bucket closes: each open bucket whose end the watermark passed leaves for the store, every
//! key's live window slides to its end and is evaluated against the alert rules (one subject
//! per key, or per named subject of the window), and finished rollup periods are handed out.

use tidemark::Estimate;

use super::alert;
use super::parts::{self, KEYS_PER_THREAD};
use super::{
    bucket_count, new_window, spill, Alert, AlertPhase, Close, ClosedBucket, Engine, Key, KeyState,
    MetricShape, MetricState, Outputs, Rollup, Summary, WindowState,
};
use crate::config::MetricConfig;

impl Engine {
    /// Closes every open bucket of every metric: the input has ended for good.
    pub fn flush(&mut self) {
        debug_assert!(
            self.batch.is_empty(),
            "flushed with events deferred: drain first"
        );
        for i in 0..self.metrics.len() {
            if let Some(&last) = self.metrics[i].open_starts.last() {
                let until = last + self.metrics[i].cfg.bucket;
                self.close_until(i, until, self.max_time.unwrap_or(0));
            }
        }
    }

    pub(super) fn close_until(&mut self, i: usize, until: u64, at: u64) {
        let m = &mut self.metrics[i];
        m.closed_until = Some(until.max(m.closed_until.unwrap_or(0)));
        while let Some(&start) = m.open_starts.first().filter(|&&s| s < until) {
            m.open_starts.pop_first();
            Self::close_bucket(m, i, start, at, &mut self.out, self.close_threads);
        }
        if let (Some(r), Some(rolled), Some(closed)) =
            (m.cfg.rollup, m.rolled_until, m.closed_until)
        {
            let to = closed - closed % r;
            if to > rolled {
                self.out.rollups.push(Rollup {
                    metric: i,
                    from: rolled,
                    to,
                });
                m.rolled_until = Some(to);
                self.out.expire_rollups_before[i] = Some(to.saturating_sub(m.cfg.rollup_retention));
            }
        }
    }

    fn close_bucket(
        m: &mut MetricState,
        i: usize,
        start: u64,
        at: u64,
        out: &mut Outputs,
        threads: usize,
    ) {
        let end = start + m.cfg.bucket;
        let close = Close {
            metric: i,
            start,
            window_start: end.saturating_sub(m.cfg.window),
            end,
            at,
        };
        // Keys spilled with this bucket open: the store moves their rows into the metric.
        m.counters.buckets += spill::close(&mut m.spill, i, start, out);
        // Keys in the table's order; this close's alerts are put in key order below, so the
        // alert stream does not depend on where keys sit (the store's does not on order).
        let alerts_before = out.alerts.len();
        let ctx = KeyClose {
            cfg: &m.cfg,
            shape: &m.shape,
            close: &close,
            min_limit: m.min_limit,
            early: m.early,
        };
        let mut done = KeysClosed {
            closed: std::mem::take(&mut out.closed),
            alerts: std::mem::take(&mut out.alerts),
            ..KeysClosed::default()
        };
        ctx.close_keys(m.keys.states_mut(), threads, &mut done);
        out.closed = done.closed;
        out.alerts = done.alerts;
        out.bytes += done.bytes;
        m.counters.buckets += done.buckets;
        m.counters.alerts += done.raised;
        // Stable: a key's alerts keep their order (its rules, then its items).
        out.alerts[alerts_before..].sort_by(|a, b| a.key.cmp(&b.key));
        for k in done.empty {
            if let Some(ks) = m.keys.remove(k.as_bytes()) {
                m.mem -= ks.mem;
                if ks.has_row {
                    m.spill.forget(k);
                }
            }
        }
        out.expire_before[i] = Some(end.saturating_sub(m.cfg.retention));
    }
}

/// What closing some keys produced, in their order: the closed buckets and alerts, the bytes
/// the buckets hold, the buckets closed and alerts raised, and the keys left with nothing.
#[derive(Default)]
struct KeysClosed {
    closed: Vec<ClosedBucket>,
    alerts: Vec<Alert>,
    bytes: usize,
    buckets: u64,
    raised: u64,
    empty: Vec<Key>,
}

impl KeysClosed {
    /// Appends what the keys after these produced.
    fn append(&mut self, mut next: KeysClosed) {
        self.closed.append(&mut next.closed);
        self.alerts.append(&mut next.alerts);
        self.bytes += next.bytes;
        self.buckets += next.buckets;
        self.raised += next.raised;
        self.empty.append(&mut next.empty);
    }
}

/// What a key's window did as a close slid it.
enum Slid {
    /// The key has no window (no bucket of it closed in the window).
    NoWindow,
    /// Its window emptied: the episode ended, and the window is gone.
    Emptied,
    /// Its window holds buckets still: evaluate it.
    Kept,
}

/// One metric's close, as each key sees it.
struct KeyClose<'a> {
    cfg: &'a MetricConfig,
    shape: &'a MetricShape,
    close: &'a Close,
    /// The smallest limit of the metric's rules.
    min_limit: f64,
    /// Whether a rule of the metric alerts early.
    early: bool,
}

impl KeyClose<'_> {
    /// Closes the bucket in `keys`, split over up to `threads` threads when they are many:
    /// each key's close reads and changes that key alone, and the parts' outputs are put
    /// back in the keys' order, so the outputs are those of one thread.
    fn close_keys(&self, keys: &mut [(Key, KeyState)], threads: usize, done: &mut KeysClosed) {
        parts::in_parts(
            keys,
            threads,
            KEYS_PER_THREAD,
            done,
            |chunk, part| {
                for (key, ks) in chunk.iter_mut() {
                    self.close_key(key, ks, part);
                }
            },
            KeysClosed::append,
        );
    }

    /// Closes the bucket for one key: its closed bucket out, its window slid and evaluated.
    fn close_key(&self, key: &Key, ks: &mut KeyState, done: &mut KeysClosed) {
        // The close moves a bucket from open to closed: the next event builds it again.
        ks.running = None;
        ks.early_end = 0;
        if let Some(s) = ks.open.pop_first_at(self.close.start) {
            done.buckets += 1;
            self.close_into_window(key.as_bytes(), ks, s, done);
        }
        match self.slide(key.as_bytes(), ks, done) {
            Slid::NoWindow => {}
            Slid::Emptied => {
                if ks.open.is_empty() {
                    done.empty.push(key.clone());
                }
            }
            Slid::Kept => {
                if let Some((est, window)) = self.window_to_evaluate(ks) {
                    self.evaluate(key.as_bytes(), ks, est, window, done);
                }
                if self.early {
                    if let Some(WindowState::Buckets(r)) = &mut ks.window {
                        // The window of the next close (the next bucket's), whose bound the
                        // key's next event reads for early alerts: summed now, while the
                        // key's buckets are in the cache.
                        let end = self.close.end + self.cfg.bucket;
                        r.upper_from(end.saturating_sub(self.cfg.window));
                    }
                }
            }
        }
    }
    /// Hands the key's closed bucket to the store and adds it to the key's live window.
    fn close_into_window(&self, key: &[u8], ks: &mut KeyState, s: Summary, out: &mut KeysClosed) {
        let close = self.close;
        ks.row_dirty = true;
        let bytes = s.to_stored();
        out.bytes += bytes.len() + key.len() + 64;
        out.closed.push(ClosedBucket {
            metric: close.metric,
            key: key.into(),
            start: close.start,
            bytes,
            rollup: false,
        });
        let w = ks
            .window
            .get_or_insert_with(|| new_window(self.shape, self.cfg.window));
        match w {
            WindowState::Hist(h) => h.add_bucket(close.end, bucket_count(&s)),
            WindowState::Buckets(r) => r.push_back(close.start, s),
        }
    }

    /// Slides the key's live window to the close's end. An empty window ends the episode: a
    /// window that fills again starts its streaks from zero, and an early alert still
    /// unsettled is withdrawn (an early alert aims at this close, whose window holds its
    /// events: kept for safety).
    fn slide(&self, key: &[u8], ks: &mut KeyState, out: &mut KeysClosed) -> Slid {
        let close = self.close;
        let emptied = match &mut ks.window {
            None => return Slid::NoWindow,
            Some(WindowState::Hist(h)) => {
                h.advance(close.end);
                ks.row_dirty = true;
                h.is_empty()
            }
            Some(WindowState::Buckets(r)) => {
                r.drop_before(close.window_start);
                r.is_empty()
            }
        };
        if !emptied {
            return Slid::Kept;
        }
        for (rule, r) in self.cfg.alerts.iter().enumerate() {
            let w = ks.streak[rule];
            if w & alert::EARLY != 0 && w & !alert::EARLY < r.consecutive {
                out.alerts.push(close.line(
                    key,
                    (rule, r, self.shape.limit(r)),
                    Estimate::exact(0.0),
                    None,
                    AlertPhase::Withdrawn,
                ));
            }
        }
        ks.window = None;
        ks.streak.iter_mut().for_each(|s| *s = 0);
        ks.items.clear();
        ks.row_dirty = true;
        Slid::Emptied
    }

    /// The window's estimate, and its merged summary if it is a ring — or `None` when no rule
    /// can fire on it: no rules, or a ring whose buckets' bounds sum to no more than every
    /// rule's limit (an exact union is at most the sum), whose streaks are reset without a
    /// merge. Most keys are small; the ring keeps the sum, so this costs nothing per bucket.
    /// (An early alert raised must still be confirmed or withdrawn.)
    fn window_to_evaluate(&self, ks: &mut KeyState) -> Option<(Estimate, Option<Summary>)> {
        match ks.window.as_mut()? {
            WindowState::Hist(h) => Some((h.estimate(), None)),
            WindowState::Buckets(_) if self.cfg.alerts.is_empty() => None,
            WindowState::Buckets(r) => {
                let early = ks.streak.iter().any(|&s| s & alert::EARLY != 0);
                if r.upper() <= self.min_limit && !early {
                    if ks.streak.iter().any(|&s| s > 0) || !ks.items.is_empty() {
                        ks.row_dirty = true;
                    }
                    ks.streak.iter_mut().for_each(|s| *s = 0);
                    ks.items.clear();
                    return None;
                }
                let first_kept = self.close.window_start;
                let first = r.first_start().unwrap_or(first_kept);
                let acc = r.merged(self.shape, first, first_kept);
                Some((acc.estimate(), Some(acc)))
            }
        }
    }

    /// Advances the key's streaks with its window and raises the alerts due: one subject per
    /// key, or one per subject the window names (a frequency window's heavy items) and one
    /// for the rest.
    fn evaluate(
        &self,
        key: &[u8],
        ks: &mut KeyState,
        est: Estimate,
        window: Option<Summary>,
        out: &mut KeysClosed,
    ) {
        ks.row_dirty = true;
        let (rules, shape) = (&self.cfg.alerts, self.shape);
        let mut alert = |rule: usize,
                         limit: f64,
                         estimate: Estimate,
                         item: Option<&[u8]>,
                         phase: AlertPhase| {
            out.raised += u64::from(phase.raises());
            let rule = (rule, &rules[rule], limit);
            out.alerts
                .push(self.close.line(key, rule, estimate, item, phase));
        };
        let window = match &window {
            Some(w) => alert::Window::Merged(w),
            None => alert::Window::Estimate(est),
        };
        alert::step_window(
            rules,
            shape,
            self.min_limit,
            &mut ks.streak,
            &mut ks.items,
            window,
            &mut alert,
        );
    }
}
