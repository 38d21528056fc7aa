//! The measured false-positive rate against the formula `1 − (1 − 2^−p)^n`, over 10^6
//! absent queries at several loads and sizes, through in-place doublings.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::membership::{QuotientFilter, StackedFilter};

const QUERIES: u64 = 1_000_000;

/// Asserts a measured count of false positives against the expected rate. With `m`
/// independent absent queries the count is binomial: σ = √(m·f·(1 − f)). Five σ (plus a
/// small allowance for the filter's own randomness: the number of distinct stored
/// fingerprints varies by well under 1%) bounds a correct filter with probability
/// > 1 − 10^−6; the design's 15% relative tolerance must hold as well.
fn assert_rate(false_positives: u64, expected: f64, what: &str) {
    let m = QUERIES as f64;
    let measured = false_positives as f64 / m;
    let sigma = (expected * (1.0 - expected) / m).sqrt();
    let tolerance = 5.0 * sigma + 0.01 * expected;
    assert!(
        (measured - expected).abs() <= tolerance,
        "{what}: measured {measured:.5}, expected {expected:.5} ± {tolerance:.5}"
    );
    assert!(
        (measured - expected).abs() <= 0.15 * expected,
        "{what}: measured {measured:.5} not within 15% of {expected:.5}"
    );
}

fn absent_hits(contains: impl Fn(u64) -> bool, rng: &mut Pcg64) -> u64 {
    // Absent: keys with bit 63 set; inserted keys are below 2^40.
    (0..QUERIES)
        .filter(|_| contains(rng.random::<u64>() | 1 << 63))
        .count() as u64
}

#[test]
fn quotient_filter_rate_matches_the_formula_at_several_loads_and_sizes() {
    let mut rng = Pcg64::seed_from_u64(4);
    // (forecast, ε, reserve, checkpoints in keys): checkpoints cross doublings and sit at
    // loads from below 0.4 up to just under 0.75.
    let cases: [(u64, f64, u32, &[u64]); 3] = [
        (2_000, 0.01, 0, &[2_000, 3_000, 16_000, 64_000, 98_000]),
        (10_000, 0.001, 2, &[10_000, 45_000, 98_000]),
        (500, 0.05, 6, &[700, 24_000]),
    ];
    for (n, eps, reserve, checkpoints) in cases {
        let mut f = QuotientFilter::with_reserve(n, eps, reserve).unwrap();
        let mut inserted = 0u64;
        for &c in checkpoints {
            while inserted < c {
                f.insert(&inserted.to_le_bytes()).unwrap();
                inserted += 1;
            }
            let h = f.hasher();
            let fp = absent_hits(|k| f.contains_hash(h.hash_u64(k)), &mut rng);
            let what = format!(
                "n={n} ε={eps} reserve={reserve} at {c} keys, load {:.2}",
                f.load()
            );
            assert_rate(fp, f.fpr(), &what);
        }
    }
}

#[test]
fn stacked_filter_rate_matches_the_product_of_its_layers() {
    let mut rng = Pcg64::seed_from_u64(5);
    let mut s = StackedFilter::new(1_000, 0.02).unwrap();
    for i in 0..60_000u64 {
        s.insert(&i.to_le_bytes());
    }
    // Through the stack's own lookup (not an OR over its layers written here), on the bytes
    // a caller would pass.
    let fp = absent_hits(|k| s.contains(&k.to_le_bytes()), &mut rng);
    assert_rate(fp, s.fpr(), "stack at 60x");
}
