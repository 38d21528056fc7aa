//! ExaLogLog's estimators: the maximum-likelihood solve, its bias correction, and the
//! theoretical errors of both estimators.
//!
//! With `n` distinct items Poisson-spread over `m` registers (`λ = n/m` a register), update
//! value `k` reaches a register with probability `1 − e^(−λ·ρ(k))`. A register knows some
//! values seen, some unseen, and nothing of those below its window, so the log-likelihood is
//!
//! `ln L(λ) = −α·λ + Σ_j β_j · ln(1 − e^(−λ·2^−j))`
//!
//! with `α` the summed probability of the values known unseen and `β_j` the number of values
//! seen whose probability is `2^−j`. `L` has one maximum, which the sketch finds by Newton's
//! method on the convex, decreasing `g(λ) = Σ_j β_j·φ(λ·2^−j) − α·λ` (`g = λ·dlnL/dλ`,
//! `φ(z) = z/(e^z − 1)`), started at the lower bound Jensen's inequality gives, from where
//! the iterates rise monotonically to the root.
//!
//! The asymptotic constants (O. Ertl, *ExaLogLog: Space-Efficient and Practical Approximate
//! Distinct Counting up to the Exa-Scale*, EDBT 2025, arXiv 2402.13726), with
//! `b = 2^(2^−t)`, `x = b^−d / (b − 1)` and `ζ(s, a)` the Hurwitz zeta function:
//!
//! - ML relative standard error `√(ln b / ζ(2, 1 + x)) / √m`;
//! - martingale relative standard error `√(ln b · (1 + x) / 2) / √m`;
//! - ML bias, removed by dividing by `1 + c/m`, `c = ln b · (1 + 2x) · ζ(3, 1 + x) /
//!   ζ(2, 1 + x)²`.
//!
//! At `(t, d) = (0, 0)` (HyperLogLog) they are `1.0367`, `√(ln 2) = 0.8326` and `1.0102`;
//! the memory-variance products (bits a register × relative variance × `m`) of the
//! recommended `(2, 20)` are 3.67 (ML) and 2.83 (martingale).

/// `(ln b, x)` of parameters `(t, d)`.
fn base(t: u8, d: u8) -> (f64, f64) {
    let ln_b = core::f64::consts::LN_2 / (1u64 << t) as f64;
    let b = ln_b.exp();
    (ln_b, b.powi(-(d as i32)) / (b - 1.0))
}

/// The Hurwitz zeta function `ζ(s, a) = Σ_{k≥0} (a + k)^−s` for `s ≥ 2`, `a ≥ 1`: 32 terms
/// summed, the rest by Euler–Maclaurin (error far below 1e−12 there).
fn hurwitz_zeta(s: f64, a: f64) -> f64 {
    const N: usize = 32;
    let head: f64 = (0..N).map(|k| (a + k as f64).powf(-s)).sum();
    let x = a + N as f64;
    let tail = x.powf(1.0 - s) / (s - 1.0) + 0.5 * x.powf(-s) + s * x.powf(-s - 1.0) / 12.0
        - s * (s + 1.0) * (s + 2.0) * x.powf(-s - 3.0) / 720.0;
    head + tail
}

/// The maximum-likelihood estimate's relative standard error times `√m`.
pub fn ml_rse_constant(t: u8, d: u8) -> f64 {
    let (ln_b, x) = base(t, d);
    (ln_b / hurwitz_zeta(2.0, 1.0 + x)).sqrt()
}

/// The martingale estimate's relative standard error times `√m`.
pub fn martingale_rse_constant(t: u8, d: u8) -> f64 {
    let (ln_b, x) = base(t, d);
    (ln_b * (1.0 + x) / 2.0).sqrt()
}

/// `c` of the ML estimate's bias correction `n̂ / (1 + c/m)`.
pub(crate) fn ml_bias_constant(t: u8, d: u8) -> f64 {
    let (ln_b, x) = base(t, d);
    let z2 = hurwitz_zeta(2.0, 1.0 + x);
    ln_b * (1.0 + 2.0 * x) * hurwitz_zeta(3.0, 1.0 + x) / (z2 * z2)
}

/// `φ(z) = z / (e^z − 1)` and its derivative, accurate at both ends.
fn phi(z: f64) -> (f64, f64) {
    if z < 1e-4 {
        return (1.0 - z / 2.0 + z * z / 12.0, -0.5 + z / 6.0);
    }
    let em1 = z.exp_m1();
    if !em1.is_finite() {
        return (0.0, 0.0);
    }
    let f = z / em1;
    // φ' = (e^z − 1 − z·e^z) / (e^z − 1)² = φ/z − φ·(1 + 1/(e^z − 1)).
    (f, f / z - f * (1.0 + 1.0 / em1))
}

/// The `λ` maximising `−α·λ + Σ_j β_j ln(1 − e^(−λ·2^−j))`: 0 with nothing seen, infinite
/// with nothing known unseen (every register at its largest value).
pub(crate) fn solve(alpha: f64, beta: &[u32; 65]) -> f64 {
    let (mut s0, mut s1) = (0.0f64, 0.0f64);
    for (j, &b) in beta.iter().enumerate() {
        s0 += b as f64;
        s1 += b as f64 * (-(j as f64)).exp2();
    }
    if s0 == 0.0 {
        return 0.0;
    }
    if alpha <= 0.0 {
        return f64::INFINITY;
    }
    let g = |x: f64| -> (f64, f64) {
        let (mut v, mut dv) = (-alpha * x, -alpha);
        for (j, &b) in beta.iter().enumerate() {
            if b != 0 {
                let scale = (-(j as f64)).exp2();
                let (f, df) = phi(x * scale);
                v += b as f64 * f;
                dv += b as f64 * scale * df;
            }
        }
        (v, dv)
    };
    // Jensen's inequality on the convex 1/(e^y − 1) gives a point at or below the root.
    let mut x = s0 / s1 * (s1 / alpha).ln_1p();
    // Should rounding put the start past the root, step back below it.
    while g(x).0 < 0.0 && x > f64::MIN_POSITIVE {
        x /= 2.0;
    }
    for _ in 0..200 {
        let (v, dv) = g(x);
        if v <= 0.0 || dv >= 0.0 {
            // At or past the root (rounding): the previous iterate was already within it.
            break;
        }
        let step = -v / dv;
        x += step;
        if step <= x * 1e-15 {
            break;
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_equal_the_published_ones() {
        // O. Ertl's table of ML and martingale MVPs, and HyperLogLog's known constants.
        let mvp = |t: u8, d: u8, c: f64| c * c * (6 + t as u32 + d as u32) as f64;
        for (t, d, ml, mart, bias) in [
            (0u8, 0u8, 6.4485, 4.1589, 1.01016),
            (0, 2, 4.6313, 3.4657, 0.48147),
            (1, 9, 3.9025, 3.0684, 0.190741),
            (2, 16, 3.7843, 2.7663, 0.134468),
            (2, 20, 3.6732, 2.8267, 0.105538),
            (2, 24, 3.7814, 3.0016, 0.091194),
        ] {
            let got = mvp(t, d, ml_rse_constant(t, d));
            assert!((got - ml).abs() < 1e-3, "ML MVP ({t}, {d}): {got}");
            let got = mvp(t, d, martingale_rse_constant(t, d));
            assert!(
                (got - mart).abs() < 1e-3,
                "martingale MVP ({t}, {d}): {got}"
            );
            let got = ml_bias_constant(t, d);
            assert!((got - bias).abs() < 1e-5, "bias ({t}, {d}): {got}");
        }
        assert!((martingale_rse_constant(0, 0) - core::f64::consts::LN_2.sqrt()).abs() < 1e-12);
    }

    /// The log-likelihood itself.
    fn log_likelihood(x: f64, alpha: f64, beta: &[u32; 65]) -> f64 {
        let mut l = -alpha * x;
        for (j, &b) in beta.iter().enumerate() {
            if b != 0 {
                l += b as f64 * (-(-x * (-(j as f64)).exp2()).exp_m1()).ln();
            }
        }
        l
    }

    #[test]
    fn solve_finds_the_maximum_of_the_likelihood() {
        let cases: Vec<(f64, [u32; 65])> = vec![
            (3.0, {
                let mut b = [0; 65];
                b[3] = 40;
                b
            }),
            (0.25, {
                let mut b = [0; 65];
                b[3] = 900;
                b[5] = 700;
                b[9] = 12;
                b
            }),
            (1e-9, {
                let mut b = [0; 65];
                b[40] = 3;
                b[3] = 1000;
                b
            }),
        ];
        for (alpha, beta) in cases {
            let x = solve(alpha, &beta);
            let l = log_likelihood(x, alpha, &beta);
            for f in [0.999, 0.9999, 1.0001, 1.001] {
                assert!(log_likelihood(x * f, alpha, &beta) < l, "{x} not a maximum");
            }
        }
        // One level alone has the closed form 2^j·ln(1 + β/(α·2^j)).
        let mut b = [0u32; 65];
        b[6] = 17;
        let want = 64.0 * (1.0 + 17.0 / (0.5 * 64.0f64)).ln();
        assert!((solve(0.5, &b) - want).abs() < 1e-9 * want);
        assert_eq!(solve(1.0, &[0; 65]), 0.0);
        assert_eq!(solve(0.0, &b), f64::INFINITY);
    }
}
