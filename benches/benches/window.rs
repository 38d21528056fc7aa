//! Sliding-window counts: tidemark's exponential histogram beside sketch_oxide's at equal ε.
//!
//! `cargo bench -p tidemark-bench --bench window`
//!
//! Each case feeds 100,000 arrivals of a seeded bit stream to a histogram already warmed past
//! its window, so the cost includes expiry and merging at steady state. sketch_oxide's
//! histogram takes (timestamp, count) inserts and needs `expire(now)` to drop old buckets;
//! it is fed the same ones with their arrival index as timestamp and expired after every
//! arrival, which is what keeps its state (and its answer) bounded to the window as ours is.

use std::fmt;

use divan::counter::ItemsCount;
use divan::Bencher;
use tidemark::window::ExpHistogram;
use tidemark_bench::bit_stream;

fn main() {
    divan::main();
}

const BATCH: usize = 100_000;

#[derive(Clone, Copy)]
struct Case {
    window: u64,
    density: f64,
    epsilon: f64,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "W={} d={} e={}", self.window, self.density, self.epsilon)
    }
}

const fn case(window: u64, density: f64, epsilon: f64) -> Case {
    Case {
        window,
        density,
        epsilon,
    }
}

const CASES: &[Case] = &[
    case(1_000, 0.01, 0.1),
    case(1_000, 0.5, 0.1),
    case(1_000, 1.0, 0.1),
    case(1_000, 0.01, 0.01),
    case(1_000, 0.5, 0.01),
    case(1_000, 1.0, 0.01),
    case(1_000_000, 0.01, 0.1),
    case(1_000_000, 0.5, 0.1),
    case(1_000_000, 1.0, 0.1),
    case(1_000_000, 0.01, 0.01),
    case(1_000_000, 0.5, 0.01),
    case(1_000_000, 1.0, 0.01),
];

/// Arrivals to warm a histogram with before measuring: past the window.
fn warmup(c: &Case) -> usize {
    (c.window as usize * 11) / 10 + 1_000
}

/// Our histogram, warmed past its window.
fn warmed(c: &Case) -> ExpHistogram {
    let mut h = ExpHistogram::arrivals(c.window, c.epsilon).unwrap();
    for b in bit_stream(1, c.density, warmup(c)) {
        h.push(b).unwrap();
    }
    h
}

/// Arrivals pushed: ours, and sketch_oxide's two ways.
mod push {
    use super::*;

    #[divan::bench(args = CASES)]
    fn tidemark(bencher: Bencher, c: &Case) {
        let h = warmed(c);
        let bits = bit_stream(2, c.density, BATCH);
        bencher
            .counter(ItemsCount::new(BATCH))
            .with_inputs(|| h.clone())
            .bench_local_values(|mut h| {
                for &b in &bits {
                    h.push(b).unwrap();
                }
                h
            });
    }

    #[divan::bench(args = CASES)]
    fn sketch_oxide_expire_each(bencher: Bencher, c: &Case) {
        sketch_oxide(bencher, c, 1);
    }

    /// sketch_oxide with expiry amortised: `expire(now)` once every 1,024 arrivals, so its
    /// insert cost is measured nearly alone (its state then briefly exceeds the window).
    #[divan::bench(args = CASES)]
    fn sketch_oxide_expire_every_1024(bencher: Bencher, c: &Case) {
        sketch_oxide(bencher, c, 1_024);
    }

    /// sketch_oxide fed the same ones, stamped with their arrival index, expiring every
    /// `expire_every` arrivals.
    fn sketch_oxide(bencher: Bencher, c: &Case, expire_every: u64) {
        use sketch_oxide::streaming::ExponentialHistogram;
        let feed = |h: &mut ExponentialHistogram, mut t: u64, bits: &[bool]| -> u64 {
            for &b in bits {
                t += 1;
                if b {
                    h.insert(t, 1);
                }
                if t % expire_every == 0 {
                    h.expire(t);
                }
            }
            t
        };
        let mut h = ExponentialHistogram::new(c.window, c.epsilon).unwrap();
        let t = feed(&mut h, 0, &bit_stream(1, c.density, warmup(c)));
        let bits = bit_stream(2, c.density, BATCH);
        bencher
            .counter(ItemsCount::new(BATCH))
            .with_inputs(|| h.clone())
            .bench_local_values(|mut h| {
                feed(&mut h, t, &bits);
                h
            });
    }
}

/// The query.
mod estimate {
    use super::*;

    #[divan::bench(args = CASES)]
    fn tidemark(bencher: Bencher, c: &Case) {
        let h = warmed(c);
        bencher.bench_local(|| divan::black_box(&h).estimate());
    }
}
