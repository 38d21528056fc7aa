//! HyperLogLog's plate (Flajolet, Fusy, Gandouet, Meunier 2007): accuracy from 1 to 10^7
//! distinct items.

use tidemark::cardinality::registers::ERTL_RSE;
use tidemark::cardinality::{Hll, Representation};

use tidemark_cli::output::{Output, Record};

/// The checkpoints: 1, 2, 5, 10, 20, 50, … up to `max` (log-spaced, 1-2-5).
pub fn checkpoints(max: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut decade = 1u64;
    while decade <= max {
        for k in [1, 2, 5] {
            if k * decade <= max {
                out.push(k * decade);
            }
        }
        decade *= 10;
    }
    out
}

/// Per checkpoint, sums over trials of the relative errors and their squares.
#[derive(Clone, Default)]
struct Acc {
    ertl: (f64, f64),
    hip: (f64, f64),
    exact_trials: u64,
    exact_right: u64,
    repr: [u64; 3],
}

/// One trial: a single stream of `max` distinct items, every checkpoint read as it passes.
fn trial(p: u8, seed: u64, points: &[u64], accs: &mut [Acc]) {
    let mut h = Hll::new(p).expect("valid precision");
    // Distinct items: a trial-specific offset plus a counter, hashed by xxh3 as any item is.
    let base = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) << 24;
    let mut next = 0u64;
    for (k, &n) in points.iter().enumerate() {
        while next < n {
            h.insert_u64(base.wrapping_add(next));
            next += 1;
        }
        let a = &mut accs[k];
        let truth = n as f64;
        let e = h.estimate_ertl().value / truth - 1.0;
        a.ertl.0 += e;
        a.ertl.1 += e * e;
        let hip = h.estimate_martingale().expect("never merged").value / truth - 1.0;
        a.hip.0 += hip;
        a.hip.1 += hip * hip;
        let r = h.representation();
        a.repr[match r {
            Representation::Exact => 0,
            Representation::Sparse => 1,
            _ => 2,
        }] += 1;
        if r == Representation::Exact {
            a.exact_trials += 1;
            a.exact_right += (h.estimate().value == truth) as u64;
        }
    }
}

/// Runs `trials` seeded trials of `trial` on every core: thread `t` runs seeds `t`, `t +
/// threads`, … into its own accumulator (`fresh()`); the accumulators come back in thread
/// order, for the caller to sum. Shared by the accuracy plates.
pub fn on_every_core<A: Send>(
    trials: u64,
    fresh: impl Fn() -> A + Sync,
    trial: impl Fn(u64, &mut A) + Sync,
) -> Vec<A> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1)
        .clamp(1, trials.max(1));
    let (fresh, trial) = (&fresh, &trial);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || {
                    let mut acc = fresh();
                    let mut seed = t;
                    while seed < trials {
                        trial(seed, &mut acc);
                        seed += threads;
                    }
                    acc
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .expect("a trial thread panicked: its panic is re-raised here")
            })
            .collect()
    })
}

/// Runs `trials` seeded trials at precision `p` up to `max` items on every core, and returns
/// one record per checkpoint.
pub fn sweep(p: u8, trials: u64, max: u64) -> Vec<Record> {
    let points = checkpoints(max);
    let parts: Vec<Vec<Acc>> = on_every_core(
        trials,
        || vec![Acc::default(); points.len()],
        |seed, accs| trial(p, seed + 1_000 * p as u64, &points, accs),
    );
    let m = (1u64 << p) as f64;
    let ertl_theory = ERTL_RSE / m.sqrt();
    let hip_theory = 0.85 / m.sqrt();
    let t = trials as f64;
    points
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            let mut a = Acc::default();
            for part in &parts {
                let b = &part[k];
                a.ertl.0 += b.ertl.0;
                a.ertl.1 += b.ertl.1;
                a.hip.0 += b.hip.0;
                a.hip.1 += b.hip.1;
                a.exact_trials += b.exact_trials;
                a.exact_right += b.exact_right;
                for i in 0..3 {
                    a.repr[i] += b.repr[i];
                }
            }
            let repr = ["exact", "sparse", "dense"][(0..3).max_by_key(|&i| a.repr[i]).unwrap()];
            let ertl_rmse = (a.ertl.1 / t).sqrt();
            let hip_rmse = (a.hip.1 / t).sqrt();
            let round = |x: f64| (x * 1e6).round() / 1e6;
            Record::new()
                .field("p", p as u64)
                .field("n", n)
                .field("trials", trials)
                .field("representation", repr)
                .field("exact_ok", format!("{}/{}", a.exact_right, a.exact_trials))
                .field("ertl_rmse", round(ertl_rmse))
                .field("ertl_bias", round(a.ertl.0 / t))
                .field("ertl_vs_1.04", round(ertl_rmse / ertl_theory))
                .field("hip_rmse", round(hip_rmse))
                .field("hip_bias", round(a.hip.0 / t))
                .field("hip_vs_0.85", round(hip_rmse / hip_theory))
        })
        .collect()
}

/// The plate: p = 10, 12, 14; 200 trials; n from 1 to 10^7.
pub fn accuracy(out: &mut Output, trials: u64, max: u64) -> anyhow::Result<()> {
    for p in [10u8, 12, 14] {
        for r in sweep(p, trials, max) {
            out.emit(&r)?;
        }
    }
    Ok(())
}
