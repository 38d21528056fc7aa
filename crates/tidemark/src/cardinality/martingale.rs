//! The martingale estimator's running state, one type for HyperLogLog and ExaLogLog.
//!
//! A sketch fed by one stream adds `1/P(change)` each time an insert changes its state, where
//! `P(change)` is the probability that the next new item would change it (Cohen 2014 and
//! Ting 2014 call it the historic inverse probability, HIP, estimator; Ertl's papers the
//! martingale estimator). The sum behind `P(change)` is kept as an exact integer, scaled so
//! that it never drifts: Σ 2^(64 − r) over HyperLogLog's registers, and Σ P(change of
//! register i)·2^63 over ExaLogLog's.

/// The running estimate and the exact sum behind the change probability.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Martingale {
    pub(crate) value: f64,
    pub(crate) sum: u128,
}

impl Martingale {
    /// The increment `m / P(change)` = `m·scale / sum` of a sketch of `m` registers whose
    /// change probability is `sum / (m·scale)`. The 128-bit sum converts as two 64-bit
    /// halves (a native conversion each), not through the slow generic `u128 → f64`.
    #[inline]
    pub(crate) fn increment(m: f64, scale: f64, sum: u128) -> f64 {
        const TWO_64: f64 = 18_446_744_073_709_551_616.0;
        let s = (sum >> 64) as u64 as f64 * TWO_64 + sum as u64 as f64;
        m * scale / s
    }

    /// Sets the sum afresh, if the sketch keeps a martingale (`state`): `fresh` computes it
    /// from the registers of the sketch's current form, after the form or the registers
    /// changed other than by an insert. The running value carries on.
    #[inline]
    pub(crate) fn resync(state: &mut Option<Martingale>, fresh: impl FnOnce() -> u128) {
        if let Some(m) = state {
            m.sum = fresh();
        }
    }
}
