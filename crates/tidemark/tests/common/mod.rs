//! Seeded streams shared by the frequency tests.
#![allow(dead_code)]

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// A Zipf(s) sampler over `0..n` by inverse CDF (rank r has weight 1/(r+1)^s).
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut acc = 0.0;
        let mut cdf = Vec::with_capacity(n);
        for r in 0..n {
            acc += 1.0 / ((r + 1) as f64).powf(s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf { cdf }
    }

    pub fn sample(&self, rng: &mut Pcg64) -> u64 {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u64
    }
}

/// The distributions the acceptance criteria name: Zipf s = 0.8, 1.1, 1.5 and uniform.
#[derive(Clone, Copy, Debug)]
pub enum Dist {
    Zipf(f64),
    Uniform,
}

pub const DISTS: [Dist; 4] = [
    Dist::Zipf(0.8),
    Dist::Zipf(1.1),
    Dist::Zipf(1.5),
    Dist::Uniform,
];

/// `len` items of `dist` over `0..n`, seeded. Zipf ranks are scattered over the universe by
/// a fixed odd multiplier so that heavy items are not all small integers.
pub fn stream(dist: Dist, n: usize, len: usize, seed: u64) -> Vec<u64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    match dist {
        Dist::Uniform => (0..len).map(|_| rng.random_range(0..n as u64)).collect(),
        Dist::Zipf(s) => {
            let z = Zipf::new(n, s);
            (0..len)
                .map(|_| (z.sample(&mut rng).wrapping_mul(2_654_435_761)) % n as u64)
                .collect()
        }
    }
}

/// Exact counts.
pub fn counts(items: &[u64]) -> std::collections::HashMap<u64, i64> {
    let mut m = std::collections::HashMap::new();
    for &x in items {
        *m.entry(x).or_insert(0) += 1;
    }
    m
}

/// The acceptance threshold for a mean of `trials` per-trial failure fractions whose
/// expectation is at most `p`: each fraction lies in [0, 1], so its variance is at most
/// E[f²] ≤ E[f] ≤ p whatever the dependence between queries of one trial; trials are
/// independent (fresh seeds), so the mean's standard deviation is at most √(p/trials), and we
/// allow four of them (a false alarm below 1/16 by Chebyshev's one-sided bound, far less in
/// practice).
pub fn tolerance(p: f64, trials: usize) -> f64 {
    p + 4.0 * (p / trials as f64).sqrt()
}
