//! PFCOUNT: the count Redis (≥ 5) gives for a HyperLogLog of 2^14 registers, Ertl's improved
//! estimator over the register histogram with `m = 16384` and `q = 50`, rounded to the nearest
//! integer. It is evaluated in Redis's order of floating-point operations, so the results are
//! equal, not just close. Both the sketch ([`super::Hll::estimate`] in Redis mode) and the
//! `HYLL` value import use it.
//!
//! Reference: O. Ertl, "New cardinality estimation algorithms for HyperLogLog sketches",
//! arXiv:1702.01284, 2017.

use super::registers::{sigma, tau};

/// The precision of Redis's HyperLogLogs.
pub const REDIS_PRECISION: u8 = 14;
/// Registers of a Redis HyperLogLog.
pub const REDIS_REGISTERS: usize = 1 << REDIS_PRECISION;

/// PFCOUNT's count of a dense register array of 16,384 registers: Ertl's improved estimator
/// with `m = 16384`, `q = 50`, rounded to the nearest integer (halves away from zero).
///
/// ```
/// use tidemark::cardinality::redis::pfcount_registers;
///
/// assert_eq!(pfcount_registers(&[0u8; 16384]), 0);
/// let mut regs = [0u8; 16384];
/// regs[9] = 1;
/// assert_eq!(pfcount_registers(&regs), 1);
/// ```
pub fn pfcount_registers(registers: &[u8]) -> u64 {
    let mut hist = [0u32; 64];
    for &r in registers {
        hist[(r & 63) as usize] += 1;
    }
    pfcount_histogram(&hist)
}

/// PFCOUNT's count from a histogram of the 16,384 registers' values.
pub fn pfcount_histogram(hist: &[u32; 64]) -> u64 {
    const Q: usize = 64 - REDIS_PRECISION as usize;
    // 1 / (2 ln 2), the estimator's constant for m → ∞.
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    let m = REDIS_REGISTERS as f64;
    let mut z = m * tau((m - hist[Q + 1] as f64) / m);
    for k in (1..=Q).rev() {
        z += hist[k] as f64;
        z *= 0.5;
    }
    z += m * sigma(hist[0] as f64 / m);
    let e = (ALPHA_INF * m * m / z).round();
    if e.is_finite() {
        e as u64
    } else {
        0
    }
}
