//! Quantiles: tidemark's `DdSketch` (cubic mapping at α = 1%, and Prometheus schema 5,
//! α ≈ 1.08%) beside sketches-ddsketch 0.4 (α = 1%, 4,096 bins a store like tidemark's
//! default), hdrhistogram 7.6 (2 significant digits, values as integer nanoseconds),
//! datasketches 0.6 (KLL k = 200, REQ k = 12 high-rank, t-digest k = 100) and tdigest 1.0
//! (100 centroids).
//!
//! `cargo bench -p tidemark-bench --bench quantile`
//!
//! - `insert`: build a sketch from empty with 10^6 lognormal values (μ = ln 10^6 ns, σ = 1;
//!   the same values, as `u64` nanoseconds for hdrhistogram); per value.
//! - `merge`: merge a sketch of 10^6 values into a clone of another (clone untimed).
//! - `window_60`: the p99 of the last 60 one-minute buckets of 10,000 values each. Each peer
//!   merges the 60 bucket sketches and asks; tidemark's `QuantileRing` answers from its
//!   sliding aggregate (`ring_answer`), or first opens the next minute — one merge and one
//!   subtraction — and then answers (`ring_slide_and_answer`, the ring's clone untimed);
//!   `tidemark_merge_60` is tidemark merging the 60 sketches like the peers.
//!
//! Bytes held (each crate's own accounting where it has one, else its arrays' lengths) and
//! serialized, and each sketch's relative error at p50, p99 and p99.9 against the exact
//! nearest-rank quantile, are printed to stderr before the benchmarks.

use datasketches::common::SearchCriteria;
use datasketches::kll::{KllFloat, KllSketch};
use datasketches::req::{RankAccuracy, ReqFloat, ReqSketch};
use datasketches::tdigest::TDigestMut;
use divan::counter::ItemsCount;
use divan::Bencher;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use sketches_ddsketch::{Config, DDSketch};
use tidemark::quantile::{DdSketch, QuantileRing};

const N: usize = 1_000_000;
const BUCKETS: usize = 60;
const PER_BUCKET: usize = 10_000;

/// `n` lognormal values, `e^(ln 10^6 + Z)`: latencies in nanoseconds around a millisecond.
fn lognormal(seed: u64, n: usize) -> Vec<f64> {
    let mut rng = Pcg64::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let u: f64 = 1.0 - rng.random::<f64>();
            let v: f64 = rng.random();
            let z = (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos();
            (1e6f64.ln() + z).exp()
        })
        .collect()
}

fn integers(values: &[f64]) -> Vec<u64> {
    values.iter().map(|&v| (v.round() as u64).max(1)).collect()
}

/// What every contender offers.
trait Quantiles: Clone {
    const NAME: &'static str;
    fn new() -> Self;
    fn add(&mut self, v: f64, ns: u64);
    fn merge(&mut self, other: &Self);
    fn quantile(&mut self, q: f64) -> f64;
    /// Bytes held, and serialized (where the crate serializes).
    fn sizes(&mut self) -> (usize, Option<usize>);
}

#[derive(Clone)]
struct Tidemark(DdSketch);
impl Quantiles for Tidemark {
    const NAME: &'static str = "tidemark DdSketch (cubic, α = 1%)";
    fn new() -> Self {
        Tidemark(DdSketch::new(0.01).unwrap())
    }
    #[inline]
    fn add(&mut self, v: f64, _: u64) {
        self.0.insert(v).unwrap();
    }
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0).unwrap();
    }
    fn quantile(&mut self, q: f64) -> f64 {
        self.0.quantile(q).unwrap().estimate.value
    }
    fn sizes(&mut self) -> (usize, Option<usize>) {
        (self.0.bytes(), Some(self.0.to_bytes().len()))
    }
}

#[derive(Clone)]
struct TidemarkSchema(DdSketch);
impl Quantiles for TidemarkSchema {
    const NAME: &'static str = "tidemark DdSketch (schema 5, α = 1.08%)";
    fn new() -> Self {
        TidemarkSchema(DdSketch::schema(5).unwrap())
    }
    #[inline]
    fn add(&mut self, v: f64, _: u64) {
        self.0.insert(v).unwrap();
    }
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0).unwrap();
    }
    fn quantile(&mut self, q: f64) -> f64 {
        self.0.quantile(q).unwrap().estimate.value
    }
    fn sizes(&mut self) -> (usize, Option<usize>) {
        (self.0.bytes(), Some(self.0.to_bytes().len()))
    }
}

#[derive(Clone)]
struct SketchesDd(DDSketch);
impl Quantiles for SketchesDd {
    const NAME: &'static str = "sketches-ddsketch 0.4 (α = 1%)";
    fn new() -> Self {
        SketchesDd(DDSketch::new(Config::new(0.01, 4_096, 1e-9)))
    }
    #[inline]
    fn add(&mut self, v: f64, _: u64) {
        self.0.add(v);
    }
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0).unwrap();
    }
    fn quantile(&mut self, q: f64) -> f64 {
        self.0.quantile(q).unwrap().unwrap()
    }
    fn sizes(&mut self) -> (usize, Option<usize>) {
        // Its stores' bin arrays (u64 counts) by their lengths: a lower bound, as their
        // capacities are not visible.
        (
            std::mem::size_of::<DDSketch>() + 8 * self.0.length(),
            Some(self.0.to_java_bytes().len()),
        )
    }
}

#[derive(Clone)]
struct Hdr(Histogram<u64>);
impl Quantiles for Hdr {
    const NAME: &'static str = "hdrhistogram 7.6 (2 digits)";
    fn new() -> Self {
        Hdr(Histogram::new_with_bounds(1, 1 << 40, 2).unwrap())
    }
    #[inline]
    fn add(&mut self, _: f64, ns: u64) {
        self.0.record(ns).unwrap();
    }
    fn merge(&mut self, other: &Self) {
        self.0.add(&other.0).unwrap();
    }
    fn quantile(&mut self, q: f64) -> f64 {
        self.0.value_at_quantile(q) as f64
    }
    fn sizes(&mut self) -> (usize, Option<usize>) {
        let mut out = Vec::new();
        V2Serializer::new().serialize(&self.0, &mut out).unwrap();
        (
            std::mem::size_of::<Histogram<u64>>() + 8 * self.0.distinct_values(),
            Some(out.len()),
        )
    }
}

/// hdrhistogram's compressed serialization (bytes only; the same histogram otherwise).
fn hdr_deflated(h: &Hdr) -> usize {
    let mut out = Vec::new();
    V2DeflateSerializer::new()
        .serialize(&h.0, &mut out)
        .unwrap();
    out.len()
}

#[derive(Clone)]
struct Kll(KllSketch<KllFloat<f64>>);
impl Quantiles for Kll {
    const NAME: &'static str = "datasketches 0.6 KLL (k = 200)";
    fn new() -> Self {
        Kll(KllSketch::new(200).unwrap())
    }
    #[inline]
    fn add(&mut self, v: f64, _: u64) {
        self.0.update(KllFloat::<f64>::new(v).unwrap());
    }
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0).unwrap();
    }
    fn quantile(&mut self, q: f64) -> f64 {
        *self
            .0
            .quantile(q, SearchCriteria::Inclusive)
            .unwrap()
            .unwrap()
    }
    fn sizes(&mut self) -> (usize, Option<usize>) {
        (
            std::mem::size_of::<KllSketch<KllFloat<f64>>>() + 8 * self.0.num_retained(),
            Some(self.0.serialize().len()),
        )
    }
}

#[derive(Clone)]
struct Req(ReqSketch<ReqFloat<f64>>);
impl Quantiles for Req {
    const NAME: &'static str = "datasketches 0.6 REQ (k = 12, high ranks)";
    fn new() -> Self {
        Req(ReqSketch::new(12, RankAccuracy::HighRank).unwrap())
    }
    #[inline]
    fn add(&mut self, v: f64, _: u64) {
        self.0.update(ReqFloat::<f64>::new(v).unwrap());
    }
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0).unwrap();
    }
    fn quantile(&mut self, q: f64) -> f64 {
        *self
            .0
            .quantile(q, SearchCriteria::Inclusive)
            .unwrap()
            .unwrap()
    }
    fn sizes(&mut self) -> (usize, Option<usize>) {
        (
            std::mem::size_of::<ReqSketch<ReqFloat<f64>>>() + 8 * self.0.num_retained() as usize,
            Some(self.0.serialize().len()),
        )
    }
}

#[derive(Clone)]
struct DsTDigest(TDigestMut);
impl Quantiles for DsTDigest {
    const NAME: &'static str = "datasketches 0.6 t-digest (k = 100)";
    fn new() -> Self {
        DsTDigest(TDigestMut::new(100).unwrap())
    }
    #[inline]
    fn add(&mut self, v: f64, _: u64) {
        self.0.update(v);
    }
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0);
    }
    fn quantile(&mut self, q: f64) -> f64 {
        self.0.quantile(q).unwrap().unwrap()
    }
    fn sizes(&mut self) -> (usize, Option<usize>) {
        (self.0.estimated_size(), Some(self.0.serialize().len()))
    }
}

#[derive(Clone)]
struct TDigestCrate(tdigest::TDigest);
impl Quantiles for TDigestCrate {
    const NAME: &'static str = "tdigest 1.0 (100 centroids)";
    fn new() -> Self {
        TDigestCrate(tdigest::TDigest::new_with_size(100))
    }
    #[inline]
    fn add(&mut self, v: f64, _: u64) {
        self.0.push(v);
    }
    fn merge(&mut self, other: &Self) {
        self.0.flush();
        let mut o = other.0.clone();
        o.flush();
        self.0 = tdigest::TDigest::merge_digests(vec![self.0.clone(), o]);
    }
    fn quantile(&mut self, q: f64) -> f64 {
        self.0.flush();
        self.0.estimate_quantile(q).unwrap()
    }
    fn sizes(&mut self) -> (usize, Option<usize>) {
        self.0.flush();
        (
            std::mem::size_of::<tdigest::TDigest>() + 16 * self.0.centroids().len(),
            None,
        )
    }
}

fn build<S: Quantiles>(values: &[f64], ns: &[u64]) -> S {
    let mut s = S::new();
    for (&v, &n) in values.iter().zip(ns) {
        s.add(v, n);
    }
    s
}

fn report<S: Quantiles>(values: &[f64], ns: &[u64], sorted: &[f64]) {
    let mut s: S = build(values, ns);
    let (held, serialized) = s.sizes();
    let errors: Vec<String> = [0.5, 0.99, 0.999]
        .iter()
        .map(|&q| {
            let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            let truth = sorted[rank - 1];
            format!("{:.3}%", 100.0 * (s.quantile(q) - truth).abs() / truth)
        })
        .collect();
    eprintln!(
        "{:<44} {:>9} {:>11} {:>9} {:>9} {:>9}",
        S::NAME,
        held,
        serialized.map_or("-".to_string(), |b| b.to_string()),
        errors[0],
        errors[1],
        errors[2]
    );
}

fn main() {
    let values = lognormal(1, N);
    let ns = integers(&values);
    let mut sorted = values.clone();
    sorted.sort_by(f64::total_cmp);
    eprintln!("10^6 lognormal values (ns, μ = ln 10^6, σ = 1): bytes and relative errors");
    eprintln!(
        "{:<44} {:>9} {:>11} {:>9} {:>9} {:>9}",
        "sketch", "held", "serialized", "p50", "p99", "p99.9"
    );
    report::<Tidemark>(&values, &ns, &sorted);
    report::<TidemarkSchema>(&values, &ns, &sorted);
    report::<SketchesDd>(&values, &ns, &sorted);
    report::<Hdr>(&values, &ns, &sorted);
    eprintln!(
        "{:<44} {:>9} {:>11}",
        "hdrhistogram 7.6, V2 + deflate",
        "",
        hdr_deflated(&build::<Hdr>(&values, &ns))
    );
    report::<Kll>(&values, &ns, &sorted);
    report::<Req>(&values, &ns, &sorted);
    report::<DsTDigest>(&values, &ns, &sorted);
    report::<TDigestCrate>(&values, &ns, &sorted);
    divan::main();
}

fn inputs() -> (Vec<f64>, Vec<u64>) {
    let values = lognormal(1, N);
    let ns = integers(&values);
    (values, ns)
}

#[divan::bench(
    types = [Tidemark, TidemarkSchema, SketchesDd, Hdr, Kll, Req, DsTDigest, TDigestCrate],
    sample_count = 20
)]
fn insert<S: Quantiles>(bencher: Bencher) {
    let (values, ns) = inputs();
    bencher
        .counter(ItemsCount::new(N))
        .bench_local(|| build::<S>(&values, &ns));
}

#[divan::bench(
    types = [Tidemark, TidemarkSchema, SketchesDd, Hdr, Kll, Req, DsTDigest, TDigestCrate],
    sample_count = 50
)]
fn merge<S: Quantiles>(bencher: Bencher) {
    let (values, ns) = inputs();
    let a: S = build(&values, &ns);
    let other = lognormal(2, N);
    let b: S = build(&other, &integers(&other));
    bencher
        .with_inputs(|| a.clone())
        .bench_local_values(|mut s| {
            s.merge(&b);
            s
        });
}

/// 60 one-minute bucket sketches of 10,000 values each.
fn buckets<S: Quantiles>() -> Vec<S> {
    (0..BUCKETS)
        .map(|b| {
            let v = lognormal(100 + b as u64, PER_BUCKET);
            build(&v, &integers(&v))
        })
        .collect()
}

#[divan::bench(
    types = [Tidemark, TidemarkSchema, SketchesDd, Hdr, Kll, Req, DsTDigest, TDigestCrate],
    sample_count = 50
)]
fn window_60_merge_and_p99<S: Quantiles>(bencher: Bencher) {
    let parts: Vec<S> = buckets();
    bencher.bench_local(|| {
        let mut w = S::new();
        for p in &parts {
            w.merge(p);
        }
        w.quantile(0.99)
    });
}

/// A ring of minute buckets (ticks in seconds) holding 61 minutes of 10,000 values each, its
/// window of 60 already built by one query.
fn ring() -> QuantileRing {
    let mut ring = QuantileRing::new(0.01, 60, BUCKETS as u32).unwrap();
    for b in 0..=BUCKETS as u64 {
        for (i, v) in lognormal(100 + b, PER_BUCKET).into_iter().enumerate() {
            ring.insert(v, b * 60 + (i as u64 * 60 / PER_BUCKET as u64))
                .unwrap();
        }
    }
    ring.quantile(BUCKETS as u64 * 60, 60, 0.99).unwrap();
    ring
}

#[divan::bench(sample_count = 50)]
fn window_60_ring_answer(bencher: Bencher) {
    let mut ring = ring();
    let now = BUCKETS as u64 * 60;
    bencher.bench_local(|| ring.quantile(now, 60, 0.99).unwrap());
}

#[divan::bench(sample_count = 50)]
fn window_60_ring_slide_and_answer(bencher: Bencher) {
    let ring = ring();
    let next = (BUCKETS as u64 + 1) * 60;
    bencher
        .with_inputs(|| ring.clone())
        .bench_local_values(|mut r| {
            r.insert(1_000_000.0, next).unwrap(); // opens a minute: one merge, one subtraction
            let a = r.quantile(next, 60, 0.99).unwrap();
            (r, a)
        });
}
