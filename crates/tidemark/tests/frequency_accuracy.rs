//! The probabilistic bounds, measured over seeded streams against exact counts: Theorem 1's
//! failure rate ≤ δ on Zipf (s = 0.8, 1.1, 1.5) and uniform streams, Theorem 2's median on a
//! general turnstile, Theorem 3's inner products, Theorem 4's ranges, quantiles, and heavy
//! hitters' recall and false positives. The full tables come from
//! `tidemark reproduce countmin-accuracy`; these are smaller versions.

mod common;

use std::collections::HashMap;

use common::{counts, stream, tolerance, Dist, DISTS};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::frequency::{CountMin, DyadicCountMin, HeavyHitters, Model};
use tidemark::ItemHasher;

const N: usize = 5_000; // universe
const LEN: usize = 20_000; // updates per stream
const TRIALS: usize = 150;
const QUERIES: usize = 40;

#[test]
fn point_query_failures_are_at_most_delta() {
    // ε = 0.02 → w = 136; δ = 0.05 → d = 3 (δ = e^−3 ≈ 0.0498).
    for dist in DISTS {
        let mut fractions = 0.0;
        for t in 0..TRIALS {
            let seed = 1_000 + t as u64;
            let items = stream(dist, N, LEN, seed);
            let exact = counts(&items);
            let mut cm = CountMin::new(0.02, 0.05, Model::CashRegister)
                .unwrap()
                .with_hasher(ItemHasher::xxh3(seed));
            for &x in &items {
                cm.update(&x.to_le_bytes(), 1).unwrap();
            }
            let bound = cm.epsilon() * LEN as f64;
            let mut rng = Pcg64::seed_from_u64(seed ^ 0xabc);
            let mut failures = 0;
            for _ in 0..QUERIES {
                let x = rng.random_range(0..N as u64);
                let truth = *exact.get(&x).unwrap_or(&0) as f64;
                let e = cm.point(&x.to_le_bytes());
                assert!(e.value >= truth);
                if e.value - truth > bound {
                    failures += 1;
                    assert!(!e.contains(truth));
                } else {
                    assert!(e.contains(truth));
                }
            }
            fractions += failures as f64 / QUERIES as f64;
        }
        let mean = fractions / TRIALS as f64;
        let delta = (-3.0f64).exp();
        assert!(
            mean <= tolerance(delta, TRIALS),
            "{dist:?}: failure rate {mean} > δ = {delta} + tolerance"
        );
    }
}

#[test]
fn median_estimator_bound_holds_on_a_general_turnstile() {
    // Updates of ±1..±5 over a uniform universe: frequencies go negative. d = 5 (odd, a
    // true median), δ = e^−5, so the bound ±3ε‖a‖₁ fails with probability ≤ δ^(1/4) ≈ 0.287.
    let delta = (-5.0f64).exp();
    let mut fractions = 0.0;
    for t in 0..TRIALS {
        let seed = 7_000 + t as u64;
        let mut rng = Pcg64::seed_from_u64(seed);
        let mut cm = CountMin::with_dimensions(136, 5, Model::GeneralTurnstile)
            .unwrap()
            .with_hasher(ItemHasher::xxh3(seed));
        let mut exact: HashMap<u64, i64> = HashMap::new();
        for _ in 0..LEN {
            let x = rng.random_range(0..N as u64);
            let c = rng.random_range(-5i64..=5);
            cm.update(&x.to_le_bytes(), c).unwrap();
            *exact.entry(x).or_default() += c;
        }
        let l1: i64 = exact.values().map(|c| c.abs()).sum();
        assert!(exact.values().any(|&c| c < 0));
        let bound = 3.0 * cm.epsilon() * l1 as f64;
        let mut failures = 0;
        for _ in 0..QUERIES {
            let x = rng.random_range(0..N as u64);
            let truth = *exact.get(&x).unwrap_or(&0) as f64;
            let e = cm.point(&x.to_le_bytes());
            if (e.value - truth).abs() > bound {
                failures += 1;
            }
        }
        fractions += failures as f64 / QUERIES as f64;
    }
    let p = delta.powf(0.25);
    let mean = fractions / TRIALS as f64;
    assert!(mean <= tolerance(p, TRIALS), "failure rate {mean} > {p}");
}

#[test]
fn inner_products_are_within_their_bound() {
    // Two Zipf(1.1) relations on one key universe; the join size is Σ a_i b_i.
    let delta = (-3.0f64).exp();
    let mut failures = 0usize;
    for t in 0..TRIALS {
        let seed = 9_000 + t as u64;
        let a = stream(Dist::Zipf(1.1), N, LEN / 2, seed);
        let b = stream(Dist::Zipf(0.8), N, LEN / 2, seed + 77_777);
        let (ea, eb) = (counts(&a), counts(&b));
        let truth: i64 = ea.iter().map(|(x, c)| c * eb.get(x).unwrap_or(&0)).sum();
        let h = ItemHasher::xxh3(seed);
        let mut sa = CountMin::new(0.02, 0.05, Model::CashRegister)
            .unwrap()
            .with_hasher(h);
        let mut sb = sa.clone();
        for &x in &a {
            sa.update(&x.to_le_bytes(), 1).unwrap();
        }
        for &x in &b {
            sb.update(&x.to_le_bytes(), 1).unwrap();
        }
        let e = sa.inner_product(&sb).unwrap();
        assert!(e.value >= truth as f64);
        if !e.contains(truth as f64) {
            failures += 1;
        }
    }
    // One query per trial: a Bernoulli(≤ δ) per trial, independent.
    let rate = failures as f64 / TRIALS as f64;
    assert!(rate <= tolerance(delta, TRIALS), "{rate}");
}

#[test]
fn range_sums_and_quantiles_against_exact() {
    let delta = (-3.0f64).exp();
    let bits = 13; // N = 5,000 < 2^13
    for dist in DISTS {
        let mut fractions = 0.0;
        let mut quantile_fractions = 0.0;
        let trials = TRIALS / 3;
        for t in 0..trials {
            let seed = 11_000 + t as u64;
            let items = stream(dist, N, LEN, seed);
            let mut s = DyadicCountMin::new(0.02, 0.05, bits, Model::CashRegister).unwrap();
            let mut exact = vec![0i64; 1 << bits];
            for &x in &items {
                s.update(x, 1).unwrap();
                exact[x as usize] += 1;
            }
            let mut prefix = vec![0i64; 1 << bits];
            let mut acc = 0;
            for (i, c) in exact.iter().enumerate() {
                acc += c;
                prefix[i] = acc;
            }
            let mut rng = Pcg64::seed_from_u64(seed);
            let mut failures = 0;
            for _ in 0..QUERIES {
                let (a, b) = (
                    rng.random_range(0..1u64 << bits),
                    rng.random_range(0..1u64 << bits),
                );
                let (lo, hi) = (a.min(b), a.max(b));
                let truth = (prefix[hi as usize]
                    - if lo == 0 { 0 } else { prefix[lo as usize - 1] })
                    as f64;
                let e = s.range(lo, hi).unwrap();
                assert!(e.value >= truth, "range never under-counts");
                if !e.contains(truth) {
                    failures += 1;
                }
            }
            fractions += failures as f64 / QUERIES as f64;
            // Quantiles: the answer x never passes the true φ-quantile (the estimated prefix
            // before x is below φN and never under-counts), and its true rank reaches φN
            // minus the error of the cover [0, x] the descent checked (at most b intervals,
            // Theorem 4's argument: probability ≥ 1 − δ).
            let phis = [0.1, 0.25, 0.5, 0.75, 0.9, 0.99];
            let mut short = 0;
            for phi in phis {
                let target = phi * LEN as f64;
                let (x, rank) = s.quantile(phi).unwrap();
                let before = if x == 0 { 0 } else { prefix[x as usize - 1] } as f64;
                assert!(
                    before < target,
                    "{dist:?} φ = {phi}: x = {x} is past the quantile"
                );
                assert!(rank.value >= prefix[x as usize] as f64);
                let slack = bits as f64 * s.epsilon() * LEN as f64;
                if (prefix[x as usize] as f64) < target - slack {
                    short += 1;
                }
            }
            quantile_fractions += short as f64 / phis.len() as f64;
        }
        let mean = fractions / trials as f64;
        assert!(mean <= tolerance(delta, trials), "{dist:?}: {mean}");
        let mean = quantile_fractions / trials as f64;
        assert!(
            mean <= tolerance(delta, trials),
            "{dist:?} quantiles: {mean}"
        );
    }
}

#[test]
fn heavy_hitters_have_recall_one_and_few_false_positives() {
    // φ = 0.01, ε = 0.002 (w = 1,360), δ = e^−3.
    let (phi, eps) = (0.01, 0.002);
    let delta = (-3.0f64).exp();
    for dist in DISTS {
        let mut fractions = 0.0;
        let trials = TRIALS / 3;
        for t in 0..trials {
            let seed = 13_000 + t as u64;
            let items = stream(dist, N, LEN, seed);
            let exact = counts(&items);
            let mut hh = HeavyHitters::new(phi, eps, 0.05).unwrap();
            let mut dy = DyadicCountMin::new(eps, 0.05, 13, Model::NonNegativeTurnstile).unwrap();
            for &x in &items {
                hh.insert(&x.to_le_bytes(), 1).unwrap();
                dy.update(x, 1).unwrap();
            }
            let n = LEN as f64;
            let cash: Vec<u64> = hh
                .heavy_hitters()
                .into_iter()
                .map(|(b, _)| u64::from_le_bytes(b.try_into().unwrap()))
                .collect();
            let turnstile: Vec<u64> = dy
                .heavy_hitters(phi)
                .unwrap()
                .into_iter()
                .map(|(x, _)| x)
                .collect();
            for (&x, &c) in &exact {
                if c as f64 >= phi * n {
                    assert!(
                        cash.contains(&x),
                        "{dist:?}: cash register missed {x} ({c})"
                    );
                    assert!(turnstile.contains(&x), "{dist:?}: dyadic missed {x} ({c})");
                }
            }
            let light: Vec<u64> = exact
                .iter()
                .filter(|(_, &c)| (c as f64) < (phi - eps) * n)
                .map(|(&x, _)| x)
                .collect();
            if light.is_empty() {
                continue;
            }
            let bad = light
                .iter()
                .filter(|x| cash.contains(x) || turnstile.contains(x))
                .count();
            fractions += bad as f64 / light.len() as f64;
        }
        // Each light item is reported by a given method only if its estimate erred by more
        // than εN (probability ≤ δ); by either of the two, ≤ 2δ.
        let mean = fractions / trials as f64;
        assert!(mean <= tolerance(2.0 * delta, trials), "{dist:?}: {mean}");
    }
}
