//! The quantile-error plate: the relative error of p50, p90, p99 and p99.9 against the exact
//! nearest-rank quantile, for tidemark's DDSketch (Masson, Rim, Lee, PVLDB 2019) at α = 1%
//! beside KLL (Karnin, Lang, Liberty 2016), REQ (Cormode, Karnin, Liberty, Thaler, Veselý
//! 2021) and two t-digests (Dunning, Ertl 2019) at equal bytes; and a `QuantileRing`'s
//! windowed answers against the exact window.
//!
//! **Equal bytes.** Each stream is first summarised by the DDSketch; its envelope's length
//! (`to_bytes`) is the budget. Each peer's parameter is then the largest whose serialized
//! sketch of the same stream fits in that budget: KLL's and REQ's `k` (datasketches 0.6,
//! `serialize`), datasketches' t-digest `k`, and the tdigest crate's centroid limit (that
//! crate does not serialize; its centroids are counted as datasketches' t-digest format
//! stores them: a 32-byte header with the minimum and maximum, and 16 bytes a centroid).
//!
//! **Errors.** A relative error is `|answer − exact| / |exact|`; a rank error is the distance
//! from the nearest rank `⌈q·n⌉` to the ranks the answer holds in the sorted stream, over `n`.
//! KLL and REQ flip coins from the datasketches crate's generator, which is seeded per thread
//! by the process and takes no seed, so their figures vary from run to run: each is built
//! `trials` times and reported as the mean and the worst over them. The DDSketch and the
//! t-digests are deterministic: one build.
//!
//! **Streams** (fixed seeds, `n` values each, 10^6 unless `--max-n` says fewer): lognormal
//! latencies (median 10, σ = 1), Pareto with tail index 1.1 (scale 1: a mean, no variance),
//! and a bimodal latency mix (95% around 1 with σ = 0.25, 5% around 50 with σ = 0.6).
//!
//! **Windows.** Six hours of one-second ticks, the same number of values spread evenly, their
//! latencies lognormal around 10 save for hours two and three, when a fifth of the requests
//! take five times as long; 5% of the events arrive up to two minutes late. A `QuantileRing`
//! of sixty one-minute buckets at α = 1% answers the last hour every thirty minutes; the
//! exact window is every event that arrived by then whose minute is one of the hour's sixty.

use datasketches::common::SearchCriteria;
use datasketches::kll::{KllFloat, KllSketch};
use datasketches::req::{RankAccuracy, ReqFloat, ReqSketch};
use datasketches::tdigest::TDigestMut;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::quantile::{nearest_rank, DdSketch, QuantileRing};

use super::hll::on_every_core;
use tidemark_cli::outln;
use tidemark_cli::output::{Output, Record};

/// The quantiles every sketch answers.
pub const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];
/// tidemark's relative accuracy.
const ALPHA: f64 = 0.01;

/// A seeded stream of the plate.
#[derive(Clone, Copy, Debug)]
enum Stream {
    Lognormal,
    Pareto,
    Bimodal,
}

const STREAMS: [Stream; 3] = [Stream::Lognormal, Stream::Pareto, Stream::Bimodal];

/// A standard normal draw (Box–Muller; one of the pair).
fn normal(rng: &mut Pcg64) -> f64 {
    let u: f64 = 1.0 - rng.random::<f64>(); // (0, 1]: its logarithm is finite
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Lognormal => "lognormal",
            Stream::Pareto => "pareto-1.1",
            Stream::Bimodal => "bimodal",
        }
    }

    fn values(self, n: usize) -> Vec<f64> {
        let seed = match self {
            Stream::Lognormal => 1,
            Stream::Pareto => 2,
            Stream::Bimodal => 3,
        };
        let mut rng = Pcg64::seed_from_u64(seed);
        (0..n)
            .map(|_| match self {
                Stream::Lognormal => (10f64.ln() + normal(&mut rng)).exp(),
                Stream::Pareto => (1.0 - rng.random::<f64>()).powf(-1.0 / 1.1),
                Stream::Bimodal => {
                    if rng.random::<f64>() < 0.95 {
                        (0.25 * normal(&mut rng)).exp()
                    } else {
                        (50f64.ln() + 0.6 * normal(&mut rng)).exp()
                    }
                }
            })
            .collect()
    }
}

/// A peer of the plate, built at parameter `k`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Peer {
    Kll,
    Req,
    DsTDigest,
    TDigest,
}

const PEERS: [Peer; 4] = [Peer::Kll, Peer::Req, Peer::DsTDigest, Peer::TDigest];

impl Peer {
    /// The sketch and its parameter, as the `sketch` column shows it.
    fn name(self, k: u16) -> String {
        match self {
            Peer::Kll => format!("kll k={k}"),
            Peer::Req => format!("req k={k} high-rank"),
            Peer::DsTDigest => format!("t-digest (datasketches) k={k}"),
            Peer::TDigest => format!("t-digest (tdigest crate) max={k}"),
        }
    }

    /// The parameter's range, and its step (REQ's k is even).
    fn range(self) -> (u16, u16, u16) {
        match self {
            Peer::Kll => (8, u16::MAX, 1),
            Peer::Req => (4, 1024, 2),
            Peer::DsTDigest => (10, u16::MAX, 1),
            Peer::TDigest => (2, u16::MAX, 1),
        }
    }

    /// Whether two builds of the same stream can answer differently.
    fn randomized(self) -> bool {
        matches!(self, Peer::Kll | Peer::Req)
    }

    /// Builds the sketch of `values` and returns its serialized bytes and its answers to
    /// [`QUANTILES`].
    fn build(self, k: u16, values: &[f64]) -> (usize, [f64; 4]) {
        let mut answers = [0.0; 4];
        match self {
            Peer::Kll => {
                let mut s = KllSketch::<KllFloat<f64>>::new(k).expect("k in range");
                for &v in values {
                    s.update(KllFloat::<f64>::new(v).expect("finite values"));
                }
                for (a, &q) in answers.iter_mut().zip(&QUANTILES) {
                    *a = *s
                        .quantile(q, SearchCriteria::Inclusive)
                        .expect("q in [0, 1]")
                        .expect("not empty");
                }
                (s.serialize().len(), answers)
            }
            Peer::Req => {
                let mut s =
                    ReqSketch::<ReqFloat<f64>>::new(k, RankAccuracy::HighRank).expect("k in range");
                for &v in values {
                    s.update(ReqFloat::<f64>::new(v).expect("finite values"));
                }
                for (a, &q) in answers.iter_mut().zip(&QUANTILES) {
                    *a = *s
                        .quantile(q, SearchCriteria::Inclusive)
                        .expect("q in [0, 1]")
                        .expect("not empty");
                }
                (s.serialize().len(), answers)
            }
            Peer::DsTDigest => {
                let mut s = TDigestMut::new(k).expect("k in range");
                for &v in values {
                    s.update(v);
                }
                for (a, &q) in answers.iter_mut().zip(&QUANTILES) {
                    *a = s.quantile(q).expect("q in [0, 1]").expect("not empty");
                }
                (s.serialize().len(), answers)
            }
            Peer::TDigest => {
                let mut s = tdigest::TDigest::new_with_size(k as usize);
                s.extend_values(values.iter().copied());
                s.flush();
                for (a, &q) in answers.iter_mut().zip(&QUANTILES) {
                    *a = s.estimate_quantile(q).expect("not empty");
                }
                (32 + 16 * s.centroids().len(), answers)
            }
        }
    }

    /// The bench suite's parameters (`benches/benches/quantile.rs`).
    fn usual(self) -> u16 {
        match self {
            Peer::Kll => 200,
            Peer::Req => 12,
            Peer::DsTDigest => 100,
            Peer::TDigest => 100,
        }
    }

    /// The largest parameter whose sketch of `values` serializes within `budget` bytes (the
    /// smallest if none does). A binary search: sizes grow with the parameter.
    fn fit(self, values: &[f64], budget: usize) -> u16 {
        let (lo, hi, step) = self.range();
        let size = |k: u16| self.build(k, values).0;
        let (mut lo_i, mut hi_i) = (0u32, (hi - lo) as u32 / step as u32);
        let at = |i: u32| lo + (i * step as u32) as u16;
        if size(at(lo_i)) > budget {
            return at(lo_i);
        }
        // Invariant: at(lo_i) fits; everything above hi_i does not.
        while lo_i < hi_i {
            let mid = lo_i + (hi_i - lo_i).div_ceil(2);
            if size(at(mid)) <= budget {
                lo_i = mid;
            } else {
                hi_i = mid - 1;
            }
        }
        at(lo_i)
    }
}

/// Errors of one answer against the sorted stream: relative, and normalized rank error.
fn errors(sorted: &[f64], q: f64, answer: f64) -> (f64, f64) {
    let n = sorted.len() as u64;
    let r = nearest_rank(q, n);
    let exact = sorted[r as usize - 1];
    let rel = (answer - exact).abs() / exact.abs();
    // The ranks `answer` holds: those of the values equal to it, or (between two values) the
    // count at most it.
    let below = sorted.partition_point(|&v| v < answer) as u64;
    let at_most = sorted.partition_point(|&v| v <= answer) as u64;
    let (lo, hi) = if at_most > below {
        (below + 1, at_most)
    } else {
        (at_most, at_most)
    };
    let gap = lo.saturating_sub(r).max(r.saturating_sub(hi));
    (rel, gap as f64 / n as f64)
}

/// Rounded for the table: six significant digits are more than the figures carry.
fn round(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = 6 - x.abs().log10().ceil() as i32;
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

/// Mean and worst relative error and worst rank error over trials, per quantile.
#[derive(Clone, Copy, Default)]
struct Acc {
    rel_sum: [f64; 4],
    rel_worst: [f64; 4],
    rank_worst: [f64; 4],
}

impl Acc {
    fn add(&mut self, sorted: &[f64], answers: &[f64; 4]) {
        for (i, (&q, &a)) in QUANTILES.iter().zip(answers).enumerate() {
            let (rel, rank) = errors(sorted, q, a);
            self.rel_sum[i] += rel;
            self.rel_worst[i] = self.rel_worst[i].max(rel);
            self.rank_worst[i] = self.rank_worst[i].max(rank);
        }
    }

    fn merge(&mut self, o: &Acc) {
        for i in 0..4 {
            self.rel_sum[i] += o.rel_sum[i];
            self.rel_worst[i] = self.rel_worst[i].max(o.rel_worst[i]);
            self.rank_worst[i] = self.rank_worst[i].max(o.rank_worst[i]);
        }
    }
}

/// The rows of one sketch on one stream: one per quantile.
#[allow(clippy::too_many_arguments)]
fn emit_rows(
    out: &mut Output,
    stream: Stream,
    sketch: &str,
    sizing: &str,
    bytes: usize,
    sorted: &[f64],
    acc: &Acc,
    trials: u64,
    bound: Option<f64>,
) -> anyhow::Result<()> {
    for (i, &q) in QUANTILES.iter().enumerate() {
        let exact = sorted[nearest_rank(q, sorted.len() as u64) as usize - 1];
        let r = Record::new()
            .field("stream", stream.name())
            .field("sketch", sketch)
            .field("sizing", sizing)
            .field("serialized_bytes", bytes as u64)
            .field("quantile", q)
            .field("tail", round(1.0 - q))
            .field("exact", round(exact))
            .field("trials", trials)
            .field("mean_rel_error", round(acc.rel_sum[i] / trials as f64))
            .field("worst_rel_error", round(acc.rel_worst[i]))
            .field("worst_rank_error", round(acc.rank_worst[i]))
            .field_opt("bound", bound);
        out.emit(&r)?;
    }
    Ok(())
}

/// A peer built at `k` (`trials` times if it is randomized), its rows emitted.
#[allow(clippy::too_many_arguments)]
fn peer_rows(
    out: &mut Output,
    stream: Stream,
    peer: Peer,
    k: u16,
    sizing: &str,
    values: &[f64],
    sorted: &[f64],
    trials: u64,
) -> anyhow::Result<()> {
    let runs = if peer.randomized() { trials } else { 1 };
    let bytes = std::sync::atomic::AtomicUsize::new(0);
    let parts = on_every_core(runs, Acc::default, |_, acc| {
        let (b, answers) = peer.build(k, values);
        bytes.fetch_max(b, std::sync::atomic::Ordering::Relaxed);
        acc.add(sorted, &answers)
    });
    let mut acc = Acc::default();
    for p in &parts {
        acc.merge(p);
    }
    let bytes = bytes.into_inner();
    emit_rows(
        out,
        stream,
        &peer.name(k),
        sizing,
        bytes,
        sorted,
        &acc,
        runs,
        None,
    )
}

/// A table's title, in table mode.
fn title(json: bool, t: &str) -> anyhow::Result<()> {
    if !json {
        outln!("\n## {t}");
    }
    Ok(())
}

/// The plate: each stream of `n` values, tidemark's DDSketch and the peers at its bytes (KLL
/// and REQ built `trials` times) and at the bench suite's parameters; then the windowed table.
pub fn run(json: bool, n: u64, trials: u64) -> anyhow::Result<()> {
    let n = n.max(1) as usize;
    title(
        json,
        "relative error against the exact quantile: the DDSketch, and each peer at its bytes \
         (equal-bytes: the largest parameter whose serialized sketch fits, or the smallest) \
         and at the bench suite's parameters (usual)",
    )?;
    let mut out = Output::new(json);
    for stream in STREAMS {
        let values = stream.values(n);
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);

        let mut dd = DdSketch::new(ALPHA).expect("a valid alpha");
        for &v in &values {
            dd.insert(v).expect("finite values");
        }
        let budget = dd.to_bytes().len();
        let mut acc = Acc::default();
        let answers = QUANTILES.map(|q| dd.quantile(q).expect("not empty").estimate.value);
        acc.add(&sorted, &answers);
        emit_rows(
            &mut out,
            stream,
            &format!("tidemark ddsketch alpha={ALPHA}"),
            "equal-bytes",
            budget,
            &sorted,
            &acc,
            1,
            Some(ALPHA),
        )?;
        for peer in PEERS {
            let k = peer.fit(&values, budget);
            peer_rows(
                &mut out,
                stream,
                peer,
                k,
                "equal-bytes",
                &values,
                &sorted,
                trials,
            )?;
        }
        for peer in PEERS {
            let k = peer.usual();
            peer_rows(&mut out, stream, peer, k, "usual", &values, &sorted, trials)?;
        }
    }
    out.finish()?;
    drop(out);
    title(
        json,
        "windows: a QuantileRing of 60 one-minute buckets (alpha = 1%) against the exact last hour",
    )?;
    let mut out = Output::new(json);
    window(&mut out, n)?;
    out.finish()
}

/// Ticks a minute, minutes a window, and the hours of the windowed stream.
const MINUTE: u64 = 60;
const WINDOW_MINUTES: u64 = 60;
const HOURS: u64 = 6;
/// The windows are answered at every multiple of this many ticks.
const EVERY: u64 = 1_800;

/// The windowed table: a ring of minute buckets against the exact last hour.
fn window(out: &mut Output, n: usize) -> anyhow::Result<()> {
    let span = HOURS * 3_600;
    let mut rng = Pcg64::seed_from_u64(4);
    let mut ring =
        QuantileRing::new(ALPHA, MINUTE, WINDOW_MINUTES as u32).expect("valid parameters");
    // (tick, value) of every event the ring took.
    let mut seen: Vec<(u64, f64)> = Vec::with_capacity(n);
    let mut next_mark = EVERY;
    for i in 0..n as u64 {
        // Arrival time: evenly spread over the span.
        let now = i * span / n as u64;
        while next_mark <= now {
            answer(out, &mut ring, &seen, next_mark - 1)?;
            next_mark += EVERY;
        }
        let slow = (2 * 3_600..3 * 3_600).contains(&now) && rng.random::<f64>() < 0.2;
        let value = (10f64.ln() + normal(&mut rng)).exp() * if slow { 5.0 } else { 1.0 };
        let late = if rng.random::<f64>() < 0.05 {
            rng.random_range(1..=120)
        } else {
            0
        };
        let tick = now.saturating_sub(late);
        ring.insert(value, tick)?;
        seen.push((tick, value));
    }
    while next_mark <= span {
        answer(out, &mut ring, &seen, next_mark - 1)?;
        next_mark += EVERY;
    }
    Ok(())
}

/// The ring's answers at `now` for the last hour, beside the exact window of `seen`.
fn answer(
    out: &mut Output,
    ring: &mut QuantileRing,
    seen: &[(u64, f64)],
    now: u64,
) -> anyhow::Result<()> {
    let last = now / MINUTE;
    let first = last.saturating_sub(WINDOW_MINUTES - 1);
    let mut exact: Vec<f64> = seen
        .iter()
        .filter(|(t, _)| (first..=last).contains(&(t / MINUTE)))
        .map(|&(_, v)| v)
        .collect();
    exact.sort_by(f64::total_cmp);
    let w = ring.window(now, WINDOW_MINUTES)?;
    if w.count() != exact.len() as u64 {
        anyhow::bail!(
            "internal: the ring's window at tick {now} holds {} values, the exact one {}",
            w.count(),
            exact.len()
        );
    }
    for q in QUANTILES {
        let Ok(a) = w.quantile(q) else {
            continue; // an empty window: nothing to compare
        };
        let truth = exact[nearest_rank(q, exact.len() as u64) as usize - 1];
        out.emit(
            &Record::new()
                .field("tick", now)
                .field("quantile", q)
                .field("exact", truth)
                .estimate(&a.estimate)
                .field("rank", a.rank)
                .field("count", a.count)
                .field("rel_error", round((a.estimate.value - truth) / truth.abs())),
        )?;
    }
    Ok(())
}
