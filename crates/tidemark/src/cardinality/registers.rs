//! The raw HyperLogLog engine: the hash's register index and rank, and the estimators over
//! plain register arrays.
//!
//! These are the pieces every HyperLogLog-shaped structure shares (the [`super::Hll`] sketch,
//! a ring of per-bucket sketches, the sliding HyperLogLog whose per-register lists reduce to
//! a plain register array at query time), for callers that keep registers of their own (the
//! Redis module unions `HYLL` values this way). Their names are stable.
//!
//! - [`index_and_rank`]: a 64-bit hash → (register index, rank). The index is the low `p`
//!   bits; the rank is one plus the number of trailing zeros of the remaining `64 − p` bits,
//!   with a sentinel bit at position `64 − p` so the rank never exceeds `65 − p`
//!   ([`max_rank`]). This is exactly how Redis splits MurmurHash64A at `p = 14`, so one
//!   function serves both.
//! - [`estimate_registers`]: Ertl's improved estimator over a dense register array, with its
//!   ± z·σ bracket ([`z_score`], [`ERTL_RSE`]).
//! - [`ertl_from_histogram`]: the same estimator from a register-value histogram, for callers
//!   that never materialise the registers.
//!
//! ```
//! use tidemark::cardinality::registers::{estimate_registers, index_and_rank, max_rank};
//! use tidemark::ItemHasher;
//!
//! let h = ItemHasher::default();
//! let mut regs = vec![0u8; 1 << 10];
//! for i in 0..5_000u64 {
//!     let (index, rank) = index_and_rank(h.hash_u64(i), 10);
//!     assert!(rank <= max_rank(10));
//!     regs[index] = regs[index].max(rank);
//! }
//! let e = estimate_registers(&regs, 0.95).unwrap();
//! assert!(e.contains(5_000.0) || (e.value - 5_000.0).abs() < 0.2 * 5_000.0);
//! ```

use crate::error::ParamError;
use crate::estimate::{Estimate, Method};

/// The smallest precision tidemark builds.
pub const MIN_PRECISION: u8 = 4;
/// The largest precision tidemark builds.
pub const MAX_PRECISION: u8 = 18;
/// The relative standard error of Ertl's improved estimator times `√m`: `√(3 ln 2 − 1)`.
pub const ERTL_RSE: f64 = 1.038_967_0;
/// The relative standard error of the martingale estimator times `√m`: `√(ln 2)`.
pub const MARTINGALE_RSE: f64 = 0.832_554_6;
/// The default confidence of every HyperLogLog bracket.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;
/// The two-sided normal quantile of [`DEFAULT_CONFIDENCE`], precomputed so that building a
/// sketch costs no bisection (checked against [`z_score`] in the tests).
pub(crate) const Z_95: f64 = 1.959_963_984_540_054;

/// The largest rank a register can hold at precision `p`: `65 − p` (all `64 − p` rank bits
/// zero, the sentinel counted).
#[inline]
pub const fn max_rank(p: u8) -> u8 {
    65 - p
}

/// The register a 64-bit hash updates at precision `p` (1 ≤ p ≤ 63), and the rank it
/// offers that register: the hash split into (index, rank).
///
/// The index is `hash mod 2^p`; the rank is one plus the number of trailing zeros of
/// `hash >> p`, with bit `64 − p` forced on so that the rank is at most [`max_rank`]`(p)`.
///
/// ```
/// use tidemark::cardinality::registers::index_and_rank;
///
/// // hash >> 4 = 0b1011: no trailing zeros.
/// assert_eq!(index_and_rank(0b1011_0110, 4), (0b0110, 1));
/// // hash >> 4 = 0b1000_0000.
/// assert_eq!(index_and_rank(0b1000_0000_0011, 4), (0b0011, 8));
/// // Rank bits all zero: the sentinel's rank, 65 − 14.
/// assert_eq!(index_and_rank(5, 14), (5, 51));
/// ```
#[inline]
pub fn index_and_rank(hash: u64, p: u8) -> (usize, u8) {
    let index = (hash & ((1u64 << p) - 1)) as usize;
    let rest = (hash >> p) | (1u64 << (64 - p as u32));
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Re-expresses a register of precision `from` at a smaller precision `to`: the register
/// `index` holding `rank` becomes register `index mod 2^to` of precision `to`, with the rank
/// the same hash would have had there.
///
/// The bits `to..from` of the hash are the high bits of `index`; if any is set, the new rank
/// counts the trailing zeros among them, otherwise they add `from − to` zeros to `rank`.
/// Folding every register this way and taking maxima gives exactly the sketch a precision-`to`
/// sketch fed the same items would hold (tested against [`index_and_rank`] below).
#[inline]
pub(crate) fn fold(index: usize, rank: u8, from: u8, to: u8) -> (usize, u8) {
    debug_assert!(to <= from && rank >= 1);
    let low = index & ((1usize << to) - 1);
    let high = index >> to;
    if high != 0 {
        (low, high.trailing_zeros() as u8 + 1)
    } else {
        (low, rank + (from - to))
    }
}

/// Ertl's σ(x) = x + Σ_{k≥1} x^(2^k)·2^(k−1), for x in [0, 1): the correction for registers
/// that are still zero. Infinite at x = 1 (every register empty).
pub(crate) fn sigma(x: f64) -> f64 {
    if x >= 1.0 {
        return f64::INFINITY;
    }
    let mut x = x;
    let mut weight = 1.0;
    let mut sum = x;
    loop {
        x *= x;
        let next = sum + x * weight;
        weight += weight;
        if next == sum {
            return sum;
        }
        sum = next;
    }
}

/// Ertl's τ(x) = (1 − x − Σ_{k≥1} (1 − x^(2^−k))²·2^(−k)) / 3, for x in [0, 1]: the
/// correction for registers at the maximum rank. Zero at both ends.
pub(crate) fn tau(x: f64) -> f64 {
    if x <= 0.0 || x >= 1.0 {
        return 0.0;
    }
    let mut x = x;
    let mut weight = 1.0;
    let mut sum = 1.0 - x;
    loop {
        x = x.sqrt();
        weight *= 0.5;
        let d = 1.0 - x;
        let next = sum - d * d * weight;
        if next == sum {
            return sum / 3.0;
        }
        sum = next;
    }
}

/// Ertl's improved estimator (arXiv 1702.01284, section 4) from a histogram of register values
/// at precision `p`: `histogram[k]` is the number of registers holding `k`, for `k` in
/// `0..=65 − p` (a shorter histogram means the missing counts are zero; longer entries must
/// be zero). `m = 2^p` must equal the histogram's total.
///
/// `E = m² / (2 ln 2 · (m·σ(C₀/m) + Σ_{k=1}^{q} C_k 2^−k + m·τ(1 − C_{q+1}/m)·2^−q))`, with
/// `q = 64 − p`, computed by Horner's rule from the top rank down. Unbiased over the whole
/// range without empirical bias tables; relative standard error ≈ [`ERTL_RSE`]`/√m`.
pub fn ertl_from_histogram(histogram: &[u32], p: u8) -> f64 {
    let m = (1u64 << p) as f64;
    let q = 64 - p as usize;
    let count = |k: usize| histogram.get(k).copied().unwrap_or(0) as f64;
    let mut z = m * tau(1.0 - count(q + 1) / m);
    for k in (1..=q).rev() {
        z += count(k);
        z *= 0.5;
    }
    z += m * sigma(count(0) / m);
    if z.is_infinite() {
        return 0.0;
    }
    (m * m / z) / (2.0 * core::f64::consts::LN_2)
}

/// The histogram of register values of a dense register array (values above 64 are counted
/// as 64; a valid array never holds them).
pub(crate) fn histogram(registers: &[u8]) -> [u32; 65] {
    let mut h = [0u32; 65];
    // Four interleaved histograms break the store-to-load dependency on equal neighbours.
    let mut parts = [[0u32; 65]; 4];
    let mut chunks = registers.chunks_exact(4);
    for c in &mut chunks {
        parts[0][c[0].min(64) as usize] += 1;
        parts[1][c[1].min(64) as usize] += 1;
        parts[2][c[2].min(64) as usize] += 1;
        parts[3][c[3].min(64) as usize] += 1;
    }
    for &r in chunks.remainder() {
        parts[0][r.min(64) as usize] += 1;
    }
    for (k, slot) in h.iter_mut().enumerate() {
        *slot = parts[0][k] + parts[1][k] + parts[2][k] + parts[3][k];
    }
    h
}

/// The precision of a register array: its length must be `2^p` with `p` in
/// [`MIN_PRECISION`]`..=`[`MAX_PRECISION`].
pub(crate) fn precision_of(registers: &[u8]) -> Result<u8, ParamError> {
    let len = registers.len();
    if len.is_power_of_two() {
        let p = len.trailing_zeros() as u8;
        if (MIN_PRECISION..=MAX_PRECISION).contains(&p) {
            return Ok(p);
        }
    }
    Err(ParamError::new(
        "registers",
        "a length 2^p with p in 4..=18",
        len,
    ))
}

/// Estimates the distinct count from a plain dense register array (one byte per register,
/// length `2^p`, index and rank as [`index_and_rank`] makes them) with Ertl's improved
/// estimator and a ± z·σ bracket at `confidence` (σ = [`ERTL_RSE`]`/√m` of the estimate).
///
/// This is the query of any max-merged register array: a ring window's merged buckets, or a
/// sliding HyperLogLog's registers for one window.
///
/// ```
/// use tidemark::cardinality::registers::{estimate_registers, index_and_rank};
/// use tidemark::hash::ItemHasher;
///
/// let h = ItemHasher::default();
/// let mut regs = vec![0u8; 1 << 12];
/// for i in 0..20_000u64 {
///     let (idx, rank) = index_and_rank(h.hash_u64(i), 12);
///     regs[idx] = regs[idx].max(rank);
/// }
/// let e = estimate_registers(&regs, 0.95).unwrap();
/// assert!((e.value - 20_000.0).abs() < 0.05 * 20_000.0);
/// assert!(e.low < e.value && e.value < e.high);
/// ```
pub fn estimate_registers(registers: &[u8], confidence: f64) -> Result<Estimate, ParamError> {
    let p = precision_of(registers)?;
    let z = z_score(confidence)?;
    if let Some(&bad) = registers.iter().find(|&&r| r > max_rank(p)) {
        return Err(ParamError::new("registers", "ranks at most 65 − p", bad));
    }
    let value = ertl_from_histogram(&histogram(registers), p);
    Ok(bracket(
        value,
        ERTL_RSE / ((1u64 << p) as f64).sqrt(),
        z,
        confidence,
        Method::HllErtl,
    ))
}

/// A probabilistic estimate `value ± z·rse·value`, the low end clamped at zero.
pub(crate) fn bracket(value: f64, rse: f64, z: f64, confidence: f64, method: Method) -> Estimate {
    let half = z * rse * value;
    Estimate::probabilistic(
        value,
        (value - half).max(0.0),
        value + half,
        confidence,
        method,
    )
}

/// The two-sided normal quantile z with P(|N(0,1)| ≤ z) = `confidence`, for `confidence` in
/// (0, 1): 1.959964 for 95%.
///
/// ```
/// use tidemark::cardinality::registers::z_score;
///
/// assert!((z_score(0.95).unwrap() - 1.959_964).abs() < 1e-6);
/// assert!((z_score(0.6827).unwrap() - 1.0).abs() < 1e-3);
/// assert!(z_score(1.0).is_err());
/// ```
pub fn z_score(confidence: f64) -> Result<f64, ParamError> {
    if !(confidence > 0.0 && confidence < 1.0) {
        return Err(ParamError::new("confidence", "in (0, 1)", confidence));
    }
    // The default is precomputed, so every sketch at 95% carries the very same z.
    if confidence == DEFAULT_CONFIDENCE {
        return Ok(Z_95);
    }
    Ok(z_bisect(confidence))
}

/// Bisects erf(z/√2) = confidence on [0, 40] (erf is increasing).
fn z_bisect(confidence: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 40.0f64);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if erf(mid / core::f64::consts::SQRT_2) < confidence {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// erf(x) for x ≥ 0 by the all-positive series
/// erf(x) = 2/√π · e^(−x²) · Σ_n 2^n x^(2n+1) / (1·3·…·(2n+1)), which has no cancellation.
fn erf(x: f64) -> f64 {
    if x > 6.0 {
        return 1.0;
    }
    let mut term = x;
    let mut sum = x;
    let x2 = x * x;
    let mut n = 0.0;
    loop {
        n += 1.0;
        term *= 2.0 * x2 / (2.0 * n + 1.0);
        let next = sum + term;
        if next == sum {
            break;
        }
        sum = next;
    }
    (2.0 / core::f64::consts::PI.sqrt() * (-x2).exp() * sum).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_matches_a_bit_by_bit_model() {
        let mut state = 0x1234_5678_9abc_def0u64;
        for _ in 0..10_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let h = state ^ (state >> 29);
            for p in [4u8, 10, 14, 18, 25] {
                let (i, r) = index_and_rank(h, p);
                assert_eq!(i as u64, h % (1u64 << p));
                // The model: walk the bits above p one by one.
                let mut rank = 1u8;
                let mut bit = p as u32;
                while bit < 64 && h & (1u64 << bit) == 0 {
                    rank += 1;
                    bit += 1;
                }
                assert_eq!(r, rank.min(max_rank(p)));
            }
        }
        assert_eq!(index_and_rank(0, 14), (0, 51));
    }

    #[test]
    fn fold_equals_splitting_at_the_smaller_precision() {
        let mut state = 7u64;
        for _ in 0..10_000 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Sparse hashes: many zero bits, so the "all high bits zero" branch is exercised.
            for h in [state, state & 0xffff_0000_0000_00ff, state & 0x3ff, 0] {
                for (from, to) in [(25u8, 14u8), (25, 4), (18, 10), (14, 14), (12, 4)] {
                    let (i, r) = index_and_rank(h, from);
                    assert_eq!(
                        fold(i, r, from, to),
                        index_and_rank(h, to),
                        "{h:#x} {from}→{to}"
                    );
                }
            }
        }
    }

    #[test]
    fn sigma_and_tau_match_their_series() {
        for &x in &[0.0f64, 0.1, 0.5, 0.9, 0.999] {
            let mut direct = x;
            for k in 1..60 {
                direct += x.powi(1 << k.min(30)) * 2f64.powi(k - 1);
            }
            assert!(
                (sigma(x) - direct).abs() <= 1e-9 * direct.max(1.0),
                "σ({x})"
            );
            let mut s = 1.0 - x;
            for k in 1..60 {
                let r = x.powf(2f64.powi(-k));
                s -= (1.0 - r) * (1.0 - r) * 2f64.powi(-k);
            }
            assert!((tau(x) - s / 3.0).abs() <= 1e-12, "τ({x})");
        }
        assert_eq!(tau(0.0), 0.0);
        assert_eq!(tau(1.0), 0.0);
        assert!(sigma(1.0).is_infinite());
    }

    #[test]
    fn empty_registers_estimate_zero_and_bad_arrays_are_refused() {
        let e = estimate_registers(&[0u8; 1024], 0.95).unwrap();
        assert_eq!(e.value, 0.0);
        assert!(estimate_registers(&[0u8; 1000], 0.95).is_err());
        assert!(estimate_registers(&[0u8; 8], 0.95).is_err());
        let mut bad = [0u8; 16];
        bad[3] = 62;
        assert!(estimate_registers(&bad, 0.95).is_err());
        assert!(estimate_registers(&[0u8; 16], 1.5).is_err());
    }

    #[test]
    fn saturated_registers_answer_without_panicking() {
        // Every register at the largest rank: no finite estimate exists (τ(0) = 0, σ(0) = 0).
        for p in [4u8, 14, 18] {
            let regs = vec![max_rank(p); 1 << p];
            let e = estimate_registers(&regs, 0.95).unwrap();
            assert!(e.value.is_infinite() && e.low <= e.value && e.value <= e.high);
        }
    }

    #[test]
    fn one_item_in_a_large_sketch_estimates_about_one() {
        // Linear-counting regime: m·ln(m/(m−1)) ≈ 1 for one non-empty register.
        let mut regs = vec![0u8; 1 << 14];
        regs[77] = 1;
        let v = estimate_registers(&regs, 0.95).unwrap().value;
        assert!((v - 1.0).abs() < 0.01, "{v}");
    }

    #[test]
    fn z_scores_of_common_confidences() {
        // Values of the normal quantile from any table.
        assert!((z_score(0.90).unwrap() - 1.644_854).abs() < 1e-5);
        assert!((z_score(0.99).unwrap() - 2.575_829).abs() < 1e-5);
        assert!((z_score(0.999).unwrap() - 3.290_527).abs() < 1e-5);
        assert!((z_bisect(DEFAULT_CONFIDENCE) - Z_95).abs() < 1e-9);
        assert!(z_score(0.0).is_err());
        assert!(z_score(f64::NAN).is_err());
    }
}
