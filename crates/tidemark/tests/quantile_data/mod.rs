//! Seeded value streams and the exact model shared by the quantile tests.
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::quantile::{nearest_rank, DdSketch, QuantileEstimate};
use tidemark::Bracket;

/// A standard normal draw (Box–Muller).
pub fn normal(rng: &mut Pcg64) -> f64 {
    let u: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

/// `n` lognormal values `e^(μ + σZ)`.
pub fn lognormal(seed: u64, n: usize, mu: f64, sigma: f64) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|_| (mu + sigma * normal(&mut rng)).exp())
        .collect()
}

/// `n` Pareto values of shape `shape` and scale 1: `U^(−1/shape)`.
pub fn pareto(seed: u64, n: usize, shape: f64) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|_| (1.0 - rng.random::<f64>()).powf(-1.0 / shape))
        .collect()
}

/// A latency mix in milliseconds: 90% fast (lognormal around 2 ms), 10% slow (around
/// 250 ms), the two modes far apart.
pub fn bimodal(seed: u64, n: usize) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            if rng.random_bool(0.9) {
                (2f64.ln() + 0.4 * normal(&mut rng)).exp()
            } else {
                (250f64.ln() + 0.6 * normal(&mut rng)).exp()
            }
        })
        .collect()
}

/// The three distributions the acceptance criteria name, 10^6 values each.
pub fn distributions(n: usize) -> Vec<(&'static str, Vec<f64>)> {
    vec![
        ("lognormal", lognormal(1, n, 0.0, 1.0)),
        ("pareto 1.1", pareto(2, n, 1.1)),
        ("bimodal", bimodal(3, n)),
    ]
}

pub const QS: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// The exact nearest-rank quantile of sorted values.
pub fn exact(sorted: &[f64], q: f64) -> f64 {
    sorted[nearest_rank(q, sorted.len() as u64) as usize - 1]
}

pub fn sorted(values: &[f64]) -> Vec<f64> {
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

/// Asserts the deterministic guarantee: the answer within α of the exact quantile (relative
/// to it) and a guaranteed bracket that holds it.
pub fn assert_within(a: &QuantileEstimate, truth: f64, alpha: f64, what: &str) {
    let e = a.estimate;
    assert!(
        (e.value - truth).abs() <= alpha * truth.abs(),
        "{what}: {} for {truth} (rank {}), error {:.3e} > α = {alpha}",
        e.value,
        a.rank,
        ((e.value - truth) / truth).abs()
    );
    assert!(
        e.contains(truth),
        "{what}: [{}, {}] misses {truth}",
        e.low,
        e.high
    );
    assert_eq!(e.bracket, Bracket::Guaranteed);
}

/// A sketch of `values`.
pub fn sketch_of(mut sketch: DdSketch, values: &[f64]) -> DdSketch {
    for &v in values {
        sketch.insert(v).unwrap();
    }
    sketch
}
