//! Shared inputs for the benchmarks: seeded streams, generated once per case.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

/// A seeded Bernoulli bit stream of `len` arrivals with the given density of ones.
pub fn bit_stream(seed: u64, density: f64, len: usize) -> Vec<bool> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..len).map(|_| rng.random_bool(density)).collect()
}

/// `len` distinct-ish seeded `u64` items.
pub fn u64_items(seed: u64, len: usize) -> Vec<u64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..len).map(|_| rng.random()).collect()
}

/// `len` seeded 16-byte string items.
pub fn string_items(seed: u64, len: usize) -> Vec<[u8; 16]> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..len)
        .map(|_| {
            let mut b = [0u8; 16];
            rng.fill(&mut b);
            b
        })
        .collect()
}
