//! Alert rules: one subject's streaks advanced by its window estimate.

use tidemark::Estimate;

use super::shape::MetricShape;
use crate::config::{AlertOn, AlertRule};

/// Advances one subject's streaks (one per rule) with its window estimate, calling `fire`
/// with the rule and its limit when a streak reaches the rule's `consecutive`.
pub(crate) fn step(
    rules: &[AlertRule],
    shape: &MetricShape,
    streak: &mut [u32],
    est: &Estimate,
    mut fire: impl FnMut(usize, f64),
) {
    for (ri, rule) in rules.iter().enumerate() {
        let limit = shape.limit(rule);
        let x = match rule.on {
            AlertOn::Value => est.value,
            AlertOn::High => est.high,
            AlertOn::Low => est.low,
        };
        if x > limit {
            streak[ri] = streak[ri].saturating_add(1);
            if streak[ri] == rule.consecutive {
                fire(ri, limit);
            }
        } else {
            streak[ri] = 0;
        }
    }
}
