//! The distinct-per-byte plate: relative RMSE and bias against n of tidemark's HyperLogLog
//! (Ertl's estimator and HIP) and ExaLogLog (O. Ertl, EDBT 2025: maximum likelihood and the
//! martingale), with each one's bytes at rest and memory-variance product (MVP).
//!
//! Every trial feeds all sketches the same stream of seeded random 64-bit hashes (what
//! hashing distinct items gives), read at 1, 2, 5, 10, … up to the largest n. A sketch answers
//! exactly while it holds its exact form; that answer is the estimator's below its cut-over
//! (it is what the sketch, merged or not, says).
//!
//! MVP is the paper's: register bits `m·b` times the relative variance (RMSE²), so it does not
//! depend on m. `rmse_at_1kib` rescales each RMSE to 1,024 bytes at rest (variance is
//! inversely proportional to bytes at a fixed number of bits a register): the column in
//! which sketches of different sizes compare at equal bytes.

use tidemark::cardinality::{DistinctSketch, ExaLogLog, Hll, Representation};

use super::hll::{checkpoints, on_every_core};
use tidemark_cli::output::{Output, Record};

/// One sketch of the plate.
#[derive(Clone, Copy)]
enum Kind {
    Hll(u8),
    ExaLogLog(u8, u8, u8),
}

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::Hll(p) => format!("hyperloglog p={p}"),
            Kind::ExaLogLog(t, d, p) => format!("exaloglog({t},{d}) p={p}"),
        }
    }

    /// The estimators reported, in order.
    fn estimators(self) -> [&'static str; 2] {
        match self {
            Kind::Hll(_) => ["ertl", "hip"],
            Kind::ExaLogLog(..) => ["ml", "martingale"],
        }
    }

    /// Register bits at rest, `m·b`.
    fn register_bits(self) -> f64 {
        match self {
            Kind::Hll(p) => 6.0 * (1u64 << p) as f64,
            Kind::ExaLogLog(t, d, p) => (6 + t as u32 + d as u32) as f64 * (1u64 << p) as f64,
        }
    }
}

const KINDS: [Kind; 4] = [
    Kind::Hll(10),
    Kind::Hll(12),
    Kind::ExaLogLog(2, 20, 8),
    Kind::ExaLogLog(2, 20, 10),
];

impl Kind {
    fn sketch(self) -> DistinctSketch {
        match self {
            Kind::Hll(p) => DistinctSketch::Hll(Hll::new(p).expect("a valid precision")),
            Kind::ExaLogLog(t, d, p) => DistinctSketch::ExaLogLog(
                ExaLogLog::with_params(t, d, p).expect("valid parameters"),
            ),
        }
    }
}

/// The two estimates of [`Kind::estimators`], in order. An ExaLogLog answers exactly while
/// exact, merged or not; its maximum-likelihood column is that answer there.
fn estimates(s: &DistinctSketch) -> [f64; 2] {
    match s {
        DistinctSketch::Hll(h) => [h.estimate_ertl().value, h.estimate().value],
        DistinctSketch::ExaLogLog(e) => {
            let answer = e.estimate().value;
            if e.representation() == Representation::Exact {
                [answer, answer]
            } else {
                [e.estimate_ml().value, answer]
            }
        }
    }
}

/// Per (sketch, checkpoint): sums of each estimator's relative error and its square, and of
/// the bytes at rest.
#[derive(Clone, Default)]
struct Acc {
    err: [(f64, f64); 2],
    bytes: f64,
}

/// SplitMix64: the trial's stream of random 64-bit hashes.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn trial(seed: u64, points: &[u64], accs: &mut [Vec<Acc>]) {
    let mut sketches: Vec<DistinctSketch> = KINDS.iter().map(|&k| k.sketch()).collect();
    let mut state = seed.wrapping_mul(0x2545_f491_4f6c_dd1d);
    let mut n = 0u64;
    for (c, &point) in points.iter().enumerate() {
        while n < point {
            let h = splitmix(&mut state);
            for s in &mut sketches {
                s.insert_hash(h);
            }
            n += 1;
        }
        for (s, acc) in sketches.iter().zip(accs.iter_mut()) {
            let a = &mut acc[c];
            for (slot, e) in a.err.iter_mut().zip(estimates(s)) {
                let rel = e / point as f64 - 1.0;
                slot.0 += rel;
                slot.1 += rel * rel;
            }
            a.bytes += s.to_bytes().len() as f64;
        }
    }
}

/// The plate: every sketch, `trials` seeded trials, n from 1 to `max`, on every core.
pub fn run(out: &mut Output, trials: u64, max: u64) -> anyhow::Result<()> {
    let points = checkpoints(max);
    let parts: Vec<Vec<Vec<Acc>>> = on_every_core(
        trials,
        || vec![vec![Acc::default(); points.len()]; KINDS.len()],
        |seed, accs| trial(seed, &points, accs),
    );
    let t = trials as f64;
    let round = |x: f64| (x * 1e6).round() / 1e6;
    for (k, kind) in KINDS.iter().enumerate() {
        for (c, &n) in points.iter().enumerate() {
            let mut a = Acc::default();
            for part in &parts {
                let b = &part[k][c];
                for i in 0..2 {
                    a.err[i].0 += b.err[i].0;
                    a.err[i].1 += b.err[i].1;
                }
                a.bytes += b.bytes;
            }
            let bytes = a.bytes / t;
            for (i, estimator) in kind.estimators().iter().enumerate() {
                let bias = a.err[i].0 / t;
                let rmse = (a.err[i].1 / t).sqrt();
                out.emit(
                    &Record::new()
                        .field("sketch", kind.name())
                        .field("estimator", *estimator)
                        .field("series", format!("{} {estimator}", kind.name()))
                        .field("n", n)
                        .field("trials", trials)
                        .field("bias", round(bias))
                        .field("rmse", round(rmse))
                        .field(
                            "bias_over_rmse",
                            if rmse > 0.0 { round(bias / rmse) } else { 0.0 },
                        )
                        .field("mean_bytes", round(bytes))
                        .field("mvp", round(rmse * rmse * kind.register_bits()))
                        .field("rmse_at_1kib", round(rmse * (bytes / 1024.0).sqrt())),
                )?;
            }
        }
    }
    Ok(())
}
