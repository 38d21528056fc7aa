//! Alert rules: one subject's streaks advanced by its window estimate at a close, and a rule's
//! early alert raised by the running window between closes.
//!
//! A rule's state per subject is one streak word: the successive closes above the limit
//! (bits 0–30) and whether an early alert was raised in the current episode (bit 31,
//! [`EARLY`]). An episode starts when a window passes the limit and ends at the first close
//! below it; a rule alerts once per episode:
//!
//! - at the close that makes `consecutive` closes above the limit ([`AlertPhase::Closed`]), or
//! - with `early = true`, at the event that takes the window the metric's next close will
//!   evaluate past the limit when that close would be the `consecutive`-th
//!   ([`AlertPhase::Early`]). That close then confirms it ([`AlertPhase::Confirmed`]) or, if
//!   the closed window is not past the limit after all, withdraws it
//!   ([`AlertPhase::Withdrawn`]) and the episode ends.

use std::collections::BTreeMap;

use tidemark::Estimate;

use super::shape::{MetricShape, Summary};
use crate::rule::{AlertOn, AlertRule};

/// Bit 31 of a streak word: an early alert was raised in this episode.
pub(super) const EARLY: u32 = 1 << 31;

/// Where an alert line stands in its episode: raised early or at a close, or an early one
/// confirmed or withdrawn by the close that follows (what an alert line says).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertPhase {
    /// Raised at the event that took the running window past the limit, before its close.
    Early,
    /// Raised when a bucket closed (no early alert came first).
    Closed,
    /// The close confirmed an early alert (not counted again).
    Confirmed,
    /// The close withdrew an early alert: the closed window is not past the limit.
    Withdrawn,
}

impl AlertPhase {
    /// The name in alert lines.
    pub fn name(self) -> &'static str {
        match self {
            AlertPhase::Early => "early",
            AlertPhase::Closed => "closed",
            AlertPhase::Confirmed => "confirmed",
            AlertPhase::Withdrawn => "withdrawn",
        }
    }

    /// Whether the line raises an alert (the other two settle an early one).
    pub fn raises(self) -> bool {
        matches!(self, AlertPhase::Early | AlertPhase::Closed)
    }
}

fn side(rule: &AlertRule, est: &Estimate) -> f64 {
    match rule.on {
        AlertOn::Value => est.value,
        AlertOn::High => est.high,
        AlertOn::Low => est.low,
    }
}

/// Advances one subject's streaks (one per rule) with its window estimate at a close (what
/// `estimate` says each rule compares), calling `fire` with the rule, its limit, the estimate
/// and the phase when a line is due.
pub(crate) fn step(
    rules: &[AlertRule],
    shape: &MetricShape,
    streak: &mut [u32],
    estimate: impl Fn(&AlertRule) -> Estimate,
    mut fire: impl FnMut(usize, f64, Estimate, AlertPhase),
) {
    for (ri, rule) in rules.iter().enumerate() {
        let limit = shape.limit(rule);
        let est = estimate(rule);
        let est = &est;
        let early = streak[ri] & EARLY != 0;
        let closes = streak[ri] & !EARLY;
        if side(rule, est) > limit {
            let closes = (closes + 1).min(EARLY - 1);
            streak[ri] = closes | (streak[ri] & EARLY);
            if closes == rule.consecutive {
                fire(
                    ri,
                    limit,
                    *est,
                    if early {
                        AlertPhase::Confirmed
                    } else {
                        AlertPhase::Closed
                    },
                );
            }
        } else {
            if early && closes < rule.consecutive {
                fire(ri, limit, *est, AlertPhase::Withdrawn);
            }
            streak[ri] = 0;
        }
    }
}

/// Whether some rule could raise an early alert now: it is early, has none raised in this
/// episode, and the next close would be its `consecutive`-th above the limit.
pub(crate) fn early_due(rules: &[AlertRule], streak: &[u32]) -> bool {
    rules
        .iter()
        .zip(streak)
        .any(|(rule, &s)| rule.early && s == rule.consecutive - 1)
}

/// Raises the early alerts the running window `est` is past the limit of, calling `fire` with
/// the rule and its limit; marks them raised in the streak words.
pub(crate) fn step_early(
    rules: &[AlertRule],
    shape: &MetricShape,
    streak: &mut [u32],
    est: &Estimate,
    mut fire: impl FnMut(usize, f64),
) {
    for (ri, rule) in rules.iter().enumerate() {
        // `s == consecutive − 1` also says bit 31 is clear.
        if !(rule.early && streak[ri] == rule.consecutive - 1) {
            continue;
        }
        let limit = shape.limit(rule);
        if side(rule, est) > limit {
            streak[ri] |= EARLY;
            fire(ri, limit);
        }
    }
}

/// What a key's rules compare at a close: its window merged, or (a count's histogram) only
/// the window's estimate.
pub(crate) enum Window<'a> {
    /// The window's summary: each rule asks it what it compares (a quantile rule, its
    /// quantile), and a window that names subjects (a frequency window's heavy items) is
    /// evaluated per subject.
    Merged(&'a Summary),
    /// The window's estimate, which every rule compares.
    Estimate(Estimate),
}

/// Advances a key's streaks (`streak`, one word a rule, and its named subjects' `items`)
/// with its window at a close, calling `fire` with the rule, its limit, the estimate, the
/// subject (`None`: the key, or the rest of a window's subjects) and the phase when a line is
/// due. A named subject whose bound is at most `min_limit` (every rule's limit) is reset by
/// leaving it out. The engine's close and the merged alerts (`crate::merged_alerts`) both
/// evaluate through this.
#[allow(clippy::too_many_arguments)]
pub(crate) fn step_window(
    rules: &[AlertRule],
    shape: &MetricShape,
    min_limit: f64,
    streak: &mut [u32],
    items: &mut BTreeMap<Box<[u8]>, Vec<u32>>,
    window: Window<'_>,
    mut fire: impl FnMut(usize, f64, Estimate, Option<&[u8]>, AlertPhase),
) {
    let w = match window {
        Window::Merged(w) => w,
        Window::Estimate(est) => {
            return step(
                rules,
                shape,
                streak,
                |_| est,
                |ri, limit, e, phase| fire(ri, limit, e, None, phase),
            )
        }
    };
    let Some(subjects) = w.named_subjects() else {
        return step(
            rules,
            shape,
            streak,
            |rule| shape.kind().rule_estimate(w, rule),
            |ri, limit, e, phase| fire(ri, limit, e, None, phase),
        );
    };
    let mut running = BTreeMap::new();
    for (item, e) in subjects.named {
        // Below every limit: its streaks are reset by leaving it out.
        if e.high <= min_limit {
            continue;
        }
        let mut s = items
            .remove(item.as_slice())
            .unwrap_or_else(|| vec![0; rules.len()]);
        step(
            rules,
            shape,
            &mut s,
            |_| e,
            |ri, limit, e, phase| fire(ri, limit, e, Some(&item), phase),
        );
        if s.iter().any(|&w| w > 0) {
            running.insert(item.into_boxed_slice(), s);
        }
    }
    *items = running;
    let rest = subjects.rest;
    step(
        rules,
        shape,
        streak,
        |_| rest,
        |ri, limit, e, phase| fire(ri, limit, e, None, phase),
    );
}
