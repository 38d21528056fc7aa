//! Count-Min's plate (Cormode and Muthukrishnan 2005): its bounds measured against exact
//! answers on seeded streams — point queries (Theorem 1, and conservative update beside it),
//! the general turnstile's median (Theorem 2), inner products (Theorem 3), dyadic ranges
//! (Theorem 4), quantiles (Theorem 5) and heavy hitters.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::frequency::{CountMin, DyadicCountMin, HeavyHitters, Model};
use tidemark::ItemHasher;

use tidemark_cli::outln;
use tidemark_cli::output::{Output, Record};

/// A seeded stream distribution.
#[derive(Clone, Copy, Debug)]
enum Dist {
    Zipf(f64),
    Uniform,
}

impl Dist {
    fn name(self) -> String {
        match self {
            Dist::Zipf(s) => format!("zipf {s}"),
            Dist::Uniform => "uniform".to_string(),
        }
    }
}

const DISTS: [Dist; 4] = [
    Dist::Zipf(0.8),
    Dist::Zipf(1.1),
    Dist::Zipf(1.5),
    Dist::Uniform,
];

/// `len` items of `dist` over `0..n`: Zipf by inverse CDF (rank r weighs 1/(r+1)^s), ranks
/// scattered over the universe by an odd multiplier.
fn stream(dist: Dist, n: u64, len: usize, seed: u64) -> Vec<u64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    match dist {
        Dist::Uniform => (0..len).map(|_| rng.random_range(0..n)).collect(),
        Dist::Zipf(s) => {
            let mut cdf = Vec::with_capacity(n as usize);
            let mut acc = 0.0;
            for r in 0..n {
                acc += 1.0 / ((r + 1) as f64).powf(s);
                cdf.push(acc);
            }
            (0..len)
                .map(|_| {
                    let u = rng.random::<f64>() * acc;
                    let r = cdf.partition_point(|&c| c < u).min(n as usize - 1) as u64;
                    r.wrapping_mul(2_654_435_761) % n
                })
                .collect()
        }
    }
}

fn counts(items: &[u64]) -> HashMap<u64, i64> {
    let mut m = HashMap::new();
    for &x in items {
        *m.entry(x).or_insert(0) += 1;
    }
    m
}

fn title(json: bool, t: &str) -> anyhow::Result<()> {
    if !json {
        outln!("\n## {t}");
    }
    Ok(())
}

const N: u64 = 100_000;
const LEN: usize = 1_000_000;
const TRIALS: u64 = 10;
const QUERIES: usize = 2_000;

/// Every table of the plate.
pub fn accuracy(json: bool) -> anyhow::Result<()> {
    points(json)?;
    median(json)?;
    inner(json)?;
    ranges(json)?;
    heavy(json)?;
    Ok(())
}

fn points(json: bool) -> anyhow::Result<()> {
    title(json, "point queries (Theorem 1): failures = error > ε‖a‖₁")?;
    let mut out = Output::new(json);
    for dist in DISTS {
        for (eps, delta) in [(0.01, 0.1), (0.01, 0.01), (0.001, 0.01)] {
            let (mut fails, mut cu_fails, mut queries) = (0u64, 0u64, 0u64);
            let (mut under, mut worst, mut sum_err, mut cu_sum_err) = (0u64, 0.0f64, 0.0, 0.0);
            let mut shape = (0, 0, 0.0, 0.0);
            for t in 0..TRIALS {
                let seed = 100 * t + 1;
                let items = stream(dist, N, LEN, seed);
                let exact = counts(&items);
                let h = ItemHasher::xxh3(seed);
                let mut cm = CountMin::new(eps, delta, Model::CashRegister)?.with_hasher(h);
                let mut cu = cm.clone().conservative()?;
                for &x in &items {
                    cm.update(&x.to_le_bytes(), 1)?;
                    cu.update(&x.to_le_bytes(), 1)?;
                }
                shape = (cm.width(), cm.depth(), cm.epsilon(), cm.delta());
                let bound = cm.epsilon() * LEN as f64;
                let mut rng = Pcg64::seed_from_u64(seed ^ 0x5eed);
                for _ in 0..QUERIES {
                    let x = rng.random_range(0..N);
                    let truth = *exact.get(&x).unwrap_or(&0) as f64;
                    let (e, c) = (cm.point(&x.to_le_bytes()), cu.point(&x.to_le_bytes()));
                    under += (e.value < truth || c.value < truth) as u64;
                    let err = (e.value - truth) / bound;
                    worst = worst.max(err);
                    sum_err += err;
                    cu_sum_err += (c.value - truth) / bound;
                    fails += (e.value - truth > bound) as u64;
                    cu_fails += (c.value - truth > bound) as u64;
                    queries += 1;
                }
            }
            out.emit(
                &Record::new()
                    .field("stream", dist.name())
                    .field("w", shape.0 as u64)
                    .field("d", shape.1 as u64)
                    .field("delta", shape.3)
                    .field("queries", queries)
                    .field("fail_rate", fails as f64 / queries as f64)
                    .field("mean_err", sum_err / queries as f64)
                    .field("worst_err", worst)
                    .field("cu_fail_rate", cu_fails as f64 / queries as f64)
                    .field("cu_mean_err", cu_sum_err / queries as f64)
                    .field("underestimates", under),
            )?;
        }
    }
    Ok(())
}

fn median(json: bool) -> anyhow::Result<()> {
    title(
        json,
        "general turnstile median (Theorem 2): failures = |error| > 3ε‖a‖₁",
    )?;
    let mut out = Output::new(json);
    for (w, d) in [(272usize, 5usize), (272, 9), (2719, 5)] {
        let (mut fails, mut queries, mut worst) = (0u64, 0u64, 0.0f64);
        let mut delta = 0.0;
        for t in 0..TRIALS {
            let seed = 300 + t;
            let mut rng = Pcg64::seed_from_u64(seed);
            let mut cm = CountMin::with_dimensions(w, d, Model::GeneralTurnstile)?
                .with_hasher(ItemHasher::xxh3(seed));
            delta = cm.delta();
            let mut exact: HashMap<u64, i64> = HashMap::new();
            for _ in 0..LEN / 4 {
                let x = rng.random_range(0..N);
                let c = rng.random_range(-5i64..=5);
                cm.update(&x.to_le_bytes(), c)?;
                *exact.entry(x).or_default() += c;
            }
            let l1: i64 = exact.values().map(|c| c.abs()).sum();
            let bound = 3.0 * cm.epsilon() * l1 as f64;
            for _ in 0..QUERIES {
                let x = rng.random_range(0..N);
                let truth = *exact.get(&x).unwrap_or(&0) as f64;
                let err = (cm.point(&x.to_le_bytes()).value - truth).abs() / bound;
                worst = worst.max(err);
                fails += (err > 1.0) as u64;
                queries += 1;
            }
        }
        out.emit(
            &Record::new()
                .field("w", w as u64)
                .field("d", d as u64)
                .field("bound_fail_prob", delta.powf(0.25))
                .field("queries", queries)
                .field("fail_rate", fails as f64 / queries as f64)
                .field("worst_err", worst),
        )?;
    }
    Ok(())
}

fn inner(json: bool) -> anyhow::Result<()> {
    title(
        json,
        "inner products (Theorem 3): error in units of ε‖a‖₁‖b‖₁",
    )?;
    let mut out = Output::new(json);
    for (da, db) in [
        (Dist::Zipf(1.1), Dist::Zipf(0.8)),
        (Dist::Zipf(1.5), Dist::Zipf(1.5)),
        (Dist::Uniform, Dist::Uniform),
    ] {
        let trials = 3 * TRIALS;
        let (mut fails, mut under, mut worst, mut sum) = (0u64, 0u64, 0.0f64, 0.0);
        let mut rel = 0.0f64;
        for t in 0..trials {
            let seed = 500 + t;
            let a = stream(da, N, LEN / 4, seed);
            let b = stream(db, N, LEN / 4, seed + 1_000_003);
            let (ea, eb) = (counts(&a), counts(&b));
            let truth: i64 = ea.iter().map(|(x, c)| c * eb.get(x).unwrap_or(&0)).sum();
            let mut sa = CountMin::new(0.001, 0.01, Model::CashRegister)?
                .with_hasher(ItemHasher::xxh3(seed));
            let mut sb = sa.clone();
            for &x in &a {
                sa.update(&x.to_le_bytes(), 1)?;
            }
            for &x in &b {
                sb.update(&x.to_le_bytes(), 1)?;
            }
            let e = sa.inner_product(&sb)?;
            let bound = sa.epsilon() * (a.len() * b.len()) as f64;
            let err = (e.value - truth as f64) / bound;
            under += (e.value < truth as f64) as u64;
            fails += (err > 1.0) as u64;
            worst = worst.max(err);
            sum += err;
            rel = rel.max((e.value - truth as f64) / truth.max(1) as f64);
        }
        out.emit(
            &Record::new()
                .field("streams", format!("{} × {}", da.name(), db.name()))
                .field("trials", trials)
                .field("fail_rate", fails as f64 / trials as f64)
                .field("mean_err", sum / trials as f64)
                .field("worst_err", worst)
                .field("worst_relative", rel)
                .field("underestimates", under),
        )?;
    }
    Ok(())
}

fn ranges(json: bool) -> anyhow::Result<()> {
    title(
        json,
        "dyadic ranges (Theorem 4) and quantiles (Theorem 5), universe 2^17, ε = 0.001",
    )?;
    let mut out = Output::new(json);
    let bits = 17; // N = 100,000 < 2^17
    for dist in DISTS {
        let (mut fails, mut queries, mut worst_k, mut worst_bound) = (0u64, 0u64, 0.0f64, 0.0f64);
        let (mut q_short, mut q_past, mut q_worst, mut q_n) = (0u64, 0u64, 0.0f64, 0u64);
        let mut exact_layers = 0;
        for t in 0..TRIALS {
            let seed = 700 + t;
            let items = stream(dist, N, LEN, seed);
            let mut s = DyadicCountMin::new(0.001, 0.01, bits, Model::CashRegister)?;
            let mut exact = vec![0i64; 1 << bits];
            for &x in &items {
                s.update(x, 1)?;
                exact[x as usize] += 1;
            }
            exact_layers = s.exact_layers();
            let mut prefix = Vec::with_capacity(exact.len());
            let mut acc = 0;
            for c in &exact {
                acc += c;
                prefix.push(acc);
            }
            let mut rng = Pcg64::seed_from_u64(seed);
            for _ in 0..QUERIES {
                let (a, b) = (
                    rng.random_range(0..1u64 << bits),
                    rng.random_range(0..1u64 << bits),
                );
                let (lo, hi) = (a.min(b), a.max(b));
                let truth = (prefix[hi as usize]
                    - if lo == 0 { 0 } else { prefix[lo as usize - 1] })
                    as f64;
                let e = s.range(lo, hi)?;
                let err = (e.value - truth) / (s.epsilon() * LEN as f64);
                worst_k = worst_k.max(err);
                // The bound is k·ε‖a‖₁ for the k intervals of the cover that come from
                // sketched (not exact) layers: the lowest bits − exact_layers layers.
                let sketched = bits as usize - s.exact_layers();
                let k = s
                    .cover(lo, hi)?
                    .iter()
                    .filter(|&&(l, _)| (l as usize) < sketched)
                    .count();
                if k > 0 {
                    worst_bound = worst_bound.max(err / k as f64);
                }
                fails += !e.contains(truth) as u64;
                queries += 1;
            }
            for i in 1..100 {
                let phi = i as f64 / 100.0;
                let target = phi * LEN as f64;
                let (x, _) = s.quantile(phi)?;
                let before = if x == 0 { 0 } else { prefix[x as usize - 1] } as f64;
                q_past += (before >= target) as u64;
                let rank = prefix[x as usize] as f64;
                let shortfall = (target - rank).max(0.0) / LEN as f64;
                q_worst = q_worst.max(shortfall);
                q_short += (target - rank > bits as f64 * s.epsilon() * LEN as f64) as u64;
                q_n += 1;
            }
        }
        out.emit(
            &Record::new()
                .field("stream", dist.name())
                .field("exact_layers", exact_layers as u64)
                .field("ranges", queries)
                .field("range_fail_rate", fails as f64 / queries as f64)
                .field("worst_err_in_eps_l1", worst_k)
                .field("worst_err_of_bound", worst_bound)
                .field("quantiles", q_n)
                .field("past_quantile", q_past)
                .field("worst_rank_shortfall", q_worst)
                .field("shortfall_fails", q_short),
        )?;
    }
    Ok(())
}

fn heavy(json: bool) -> anyhow::Result<()> {
    title(
        json,
        "heavy hitters, φ = 0.005, ε = 0.001: cash register (candidates) and turnstile (dyadic)",
    )?;
    let mut out = Output::new(json);
    let (phi, eps) = (0.005, 0.001);
    for dist in DISTS {
        let (mut heavy, mut found_cash, mut found_dy) = (0u64, 0u64, 0u64);
        let (mut reported_cash, mut reported_dy, mut light_cash, mut light_dy) =
            (0u64, 0u64, 0u64, 0u64);
        let mut lights = 0u64;
        for t in 0..TRIALS {
            let seed = 900 + t;
            let items = stream(dist, N, LEN, seed);
            let exact = counts(&items);
            let mut hh = HeavyHitters::new(phi, eps, 0.01)?;
            let mut dy = DyadicCountMin::new(eps, 0.01, 17, Model::NonNegativeTurnstile)?;
            for &x in &items {
                hh.insert(&x.to_le_bytes(), 1)?;
                dy.update(x, 1)?;
            }
            let cash: Vec<u64> = hh
                .heavy_hitters()
                .into_iter()
                .map(|(b, _)| u64::from_le_bytes(b.try_into().expect("8-byte items")))
                .collect();
            let dyadic: Vec<u64> = dy.heavy_hitters(phi)?.into_iter().map(|(x, _)| x).collect();
            reported_cash += cash.len() as u64;
            reported_dy += dyadic.len() as u64;
            let n = LEN as f64;
            for (&x, &c) in &exact {
                if c as f64 >= phi * n {
                    heavy += 1;
                    found_cash += cash.contains(&x) as u64;
                    found_dy += dyadic.contains(&x) as u64;
                } else if (c as f64) < (phi - eps) * n {
                    lights += 1;
                    light_cash += cash.contains(&x) as u64;
                    light_dy += dyadic.contains(&x) as u64;
                }
            }
        }
        out.emit(
            &Record::new()
                .field("stream", dist.name())
                .field("true_heavy", heavy)
                .field_opt("recall_cash", recall(found_cash, heavy))
                .field_opt("recall_dyadic", recall(found_dy, heavy))
                .field("reported_cash", reported_cash)
                .field("reported_dyadic", reported_dy)
                .field("light_items", lights)
                .field("light_reported_cash", light_cash)
                .field("light_reported_dyadic", light_dy),
        )?;
    }
    Ok(())
}

/// Found over true heavy hitters; none (the field is left out) when there are none.
fn recall(found: u64, heavy: u64) -> Option<f64> {
    (heavy > 0).then(|| found as f64 / heavy as f64)
}
