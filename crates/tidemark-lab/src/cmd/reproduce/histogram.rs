//! The exponential histogram's plates (Datar, Gionis, Indyk, Motwani 2002).

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::window::{BlockCounter, ExpHistogram};

use tidemark_cli::output::{Output, Record};

fn sizes(h: &ExpHistogram) -> String {
    h.buckets()
        .map(|b| b.size.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first twenty arrivals at k = 2: one row per arrival.
pub fn twenty(out: &mut Output) -> anyhow::Result<()> {
    let mut h = ExpHistogram::arrivals_with_k(1_000, 2)?;
    for arrival in 1..=20u64 {
        let before = h.stats().merges;
        h.push(true)?;
        out.emit(
            &Record::new()
                .field("arrival", arrival)
                .field("merges", h.stats().merges - before)
                .field("total_merges", h.stats().merges)
                .field("sizes", sizes(&h)),
        )?;
    }
    Ok(())
}

/// A seeded Bernoulli bit stream.
fn bits_stream(seed: u64, density: f64) -> impl Iterator<Item = bool> {
    let mut rng = Pcg64::seed_from_u64(seed);
    std::iter::from_fn(move || Some(rng.random_bool(density)))
}

/// Window 400 at k = 5 over 4,000 arrivals of density 1/2, as in the design's worked example.
pub fn window_400(out: &mut Output) -> anyhow::Result<()> {
    let (w, n) = (400u64, 4_000usize);
    for seed in 1..=5u64 {
        let mut h = ExpHistogram::arrivals(w, 0.2)?;
        let mut exact = VecDeque::new();
        for bit in bits_stream(seed, 0.5).take(n) {
            h.push(bit)?;
            exact.push_back(bit);
            if exact.len() > w as usize {
                exact.pop_front();
            }
        }
        let truth = exact.iter().filter(|&&b| b).count();
        let e = h.estimate();
        let stats = h.stats();
        out.emit(
            &Record::new()
                .field("seed", seed)
                .field("exact", truth as u64)
                .estimate(&e)
                .field("buckets", stats.buckets as u64)
                .field("merges", stats.merges)
                .field("bits", stats.bits)
                .field("sizes", sizes(&h)),
        )?;
    }
    Ok(())
}

/// Worst relative error over every query of seeded streams, against ε and window.
pub fn error_sweep(out: &mut Output) -> anyhow::Result<()> {
    for &w in &[1_000u64, 20_000] {
        for &eps in &[0.5, 0.2, 0.1, 0.05, 0.02] {
            let mut worst = 0.0f64;
            let mut checks = 0u64;
            for seed in 0..4u64 {
                let mut h = ExpHistogram::arrivals(w, eps)?;
                let mut exact = VecDeque::with_capacity(w as usize + 1);
                let mut ones = 0u64;
                for (i, bit) in bits_stream(seed, 0.5).take(4 * w as usize).enumerate() {
                    h.push(bit)?;
                    exact.push_back(bit);
                    ones += bit as u64;
                    if exact.len() > w as usize {
                        ones -= exact.pop_front().expect("non-empty") as u64;
                    }
                    if i as u64 >= w && ones > 0 {
                        let rel = (h.estimate().value - ones as f64).abs() / ones as f64;
                        worst = worst.max(rel);
                        checks += 1;
                    }
                }
            }
            out.emit(
                &Record::new()
                    .field("window", w)
                    .field("epsilon", eps)
                    .field("k", (1.0 / eps).ceil() as u64)
                    .field("checks", checks)
                    .field("worst_rel_error", worst)
                    .field("bound", eps / 2.0)
                    .field("worst_over_bound", worst / (eps / 2.0)),
            )?;
        }
    }
    Ok(())
}

/// Buckets and bits held after a long stream, against k·log2(N/k) and the block counter.
pub fn bits(out: &mut Output) -> anyhow::Result<()> {
    for &w in &[1_000u64, 100_000, 1_000_000] {
        for &density in &[0.01f64, 0.5, 1.0] {
            for &eps in &[0.1f64, 0.01] {
                let k = (1.0 / eps).ceil();
                let mut h = ExpHistogram::arrivals(w, eps)?;
                let mut blocks = BlockCounter::arrivals(w, k as u32)?;
                for bit in bits_stream(w ^ density.to_bits(), density).take(2 * w as usize) {
                    h.push(bit)?;
                    blocks.push(bit)?;
                }
                let n = h.estimate().value;
                let predicted = if n > k { k * (n / k).log2() } else { n };
                let stats = h.stats();
                out.emit(
                    &Record::new()
                        .field("window", w)
                        .field("density", density)
                        .field("epsilon", eps)
                        .field("ones", n.round())
                        .field("buckets", stats.buckets as u64)
                        .field("k_log2_n_over_k", predicted.round())
                        .field("bits", stats.bits)
                        .field("block_bits", blocks.bits())
                        .field("exact_bits", w),
                )?;
            }
        }
    }
    Ok(())
}
