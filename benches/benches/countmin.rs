//! Count-Min: tidemark beside datasketches 0.6 (`CountMinSketch`), count-min-sketch 0.2 and
//! pdatastructs 0.7 at equal (w, d) = (2048, 5), on one seeded Zipf(1.1) stream of `u64`
//! items; then tidemark's range, quantile and heavy-hitter costs, which the peers lack.
//!
//! `cargo bench -p tidemark-bench --bench countmin`
//!
//! Every case feeds or queries the same 100,000 items, counted as items (divan reports the
//! time per batch and the throughput). tidemark hashes each item once (xxh3-64 of its 8
//! bytes) and derives its 5 columns with the pairwise family; datasketches hashes the item
//! once per row (MurmurHash3); count-min-sketch hashes once (SipHash-1-3, 128 bits) and uses
//! double hashing with a power-of-two width, and always updates conservatively, so it is also
//! set beside tidemark's conservative update; pdatastructs hashes with the standard library's
//! SipHash through its `HashIterBuilder`.

use divan::counter::ItemsCount;
use divan::Bencher;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::frequency::{CountMin, DyadicCountMin, HeavyHitters, Model};

fn main() {
    divan::main();
}

const W: usize = 2048;
const D: usize = 5;
const BATCH: usize = 100_000;

/// A seeded Zipf(1.1) stream over 2^20 items (inverse CDF), ranks scattered by an odd
/// multiplier.
fn zipf_items() -> Vec<u64> {
    let n = 1usize << 20;
    let mut cdf = Vec::with_capacity(n);
    let mut acc = 0.0;
    for r in 0..n {
        acc += 1.0 / ((r + 1) as f64).powf(1.1);
        cdf.push(acc);
    }
    let mut rng = Pcg64::seed_from_u64(42);
    (0..BATCH)
        .map(|_| {
            let u = rng.random::<f64>() * acc;
            let r = cdf.partition_point(|&c| c < u).min(n - 1) as u64;
            r.wrapping_mul(2_654_435_761) & ((n as u64) - 1)
        })
        .collect()
}

fn tidemark_filled(conservative: bool) -> CountMin {
    let mut cm = CountMin::with_dimensions(W, D, Model::CashRegister).unwrap();
    if conservative {
        cm = cm.conservative().unwrap();
    }
    for &x in &zipf_items() {
        cm.update(&x.to_le_bytes(), 1).unwrap();
    }
    cm
}

fn dyadic_filled() -> DyadicCountMin {
    let mut s = DyadicCountMin::with_dimensions(W, D, 20, Model::CashRegister).unwrap();
    for &x in &zipf_items() {
        s.update(x, 1).unwrap();
    }
    s
}

fn count_min_sketch_new() -> count_min_sketch::CountMinSketch64<u64> {
    // width = next_pow2(round(2·capacity/tolerance)) = 2048; k = ⌊ln(1 − 0.97)/ln ½⌋ = 5.
    count_min_sketch::CountMinSketch64::new(1024, 0.97, 1.0).unwrap()
}

mod update {
    use super::*;

    #[divan::bench]
    fn tidemark(bencher: Bencher) {
        let items = zipf_items();
        bencher
            .counter(ItemsCount::new(items.len()))
            .with_inputs(|| CountMin::with_dimensions(W, D, Model::CashRegister).unwrap())
            .bench_local_refs(|cm| {
                for &x in &items {
                    cm.update(&x.to_le_bytes(), 1).unwrap();
                }
            });
    }

    /// The same updates with the item hash computed outside the timed loop: the cost of the
    /// d row functions and counters alone.
    #[divan::bench]
    fn tidemark_prehashed(bencher: Bencher) {
        let hasher = tidemark::ItemHasher::default();
        let hashes: Vec<u64> = zipf_items().iter().map(|x| hasher.hash_u64(*x)).collect();
        bencher
            .counter(ItemsCount::new(hashes.len()))
            .with_inputs(|| CountMin::with_dimensions(W, D, Model::CashRegister).unwrap())
            .bench_local_refs(|cm| {
                for &h in &hashes {
                    cm.update_hash(h, 1).unwrap();
                }
            });
    }

    #[divan::bench]
    fn tidemark_conservative(bencher: Bencher) {
        let items = zipf_items();
        bencher
            .counter(ItemsCount::new(items.len()))
            .with_inputs(|| {
                CountMin::with_dimensions(W, D, Model::CashRegister)
                    .unwrap()
                    .conservative()
                    .unwrap()
            })
            .bench_local_refs(|cm| {
                for &x in &items {
                    cm.update(&x.to_le_bytes(), 1).unwrap();
                }
            });
    }

    #[divan::bench]
    fn datasketches(bencher: Bencher) {
        let items = zipf_items();
        bencher
            .counter(ItemsCount::new(items.len()))
            .with_inputs(|| {
                datasketches::countmin::CountMinSketch::<i64>::new(D as u8, W as u32).unwrap()
            })
            .bench_local_refs(|cm| {
                for &x in &items {
                    cm.update(x);
                }
            });
    }

    #[divan::bench]
    fn count_min_sketch_conservative(bencher: Bencher) {
        let items = zipf_items();
        bencher
            .counter(ItemsCount::new(items.len()))
            .with_inputs(count_min_sketch_new)
            .bench_local_refs(|cm| {
                for x in &items {
                    cm.add(x, 1);
                }
            });
    }

    #[divan::bench]
    fn pdatastructs(bencher: Bencher) {
        let items = zipf_items();
        bencher
            .counter(ItemsCount::new(items.len()))
            .with_inputs(|| {
                pdatastructs::countminsketch::CountMinSketch::<u64, u64>::with_params(W, D)
            })
            .bench_local_refs(|cm| {
                for x in &items {
                    cm.add(x);
                }
            });
    }
}

mod point {
    use super::*;

    #[divan::bench]
    fn tidemark(bencher: Bencher) {
        let items = zipf_items();
        let cm = tidemark_filled(false);
        bencher
            .counter(ItemsCount::new(items.len()))
            .bench_local(|| {
                let mut s = 0.0;
                for &x in &items {
                    s += cm.point(&x.to_le_bytes()).value;
                }
                s
            });
    }

    #[divan::bench]
    fn datasketches(bencher: Bencher) {
        let items = zipf_items();
        let mut cm = datasketches::countmin::CountMinSketch::<i64>::new(D as u8, W as u32).unwrap();
        for &x in &items {
            cm.update(x);
        }
        bencher
            .counter(ItemsCount::new(items.len()))
            .bench_local(|| items.iter().map(|&x| cm.estimate(x)).sum::<i64>());
    }

    #[divan::bench]
    fn count_min_sketch(bencher: Bencher) {
        let items = zipf_items();
        let mut cm = count_min_sketch_new();
        for x in &items {
            cm.add(x, 1);
        }
        bencher
            .counter(ItemsCount::new(items.len()))
            .bench_local(|| items.iter().map(|x| cm.estimate(x)).sum::<u64>());
    }

    #[divan::bench]
    fn pdatastructs(bencher: Bencher) {
        let items = zipf_items();
        let mut cm = pdatastructs::countminsketch::CountMinSketch::<u64, u64>::with_params(W, D);
        for x in &items {
            cm.add(x);
        }
        bencher
            .counter(ItemsCount::new(items.len()))
            .bench_local(|| items.iter().map(|x| cm.query_point(x)).sum::<u64>());
    }
}

/// tidemark only: the paper's other queries (no peer offers them).
mod beyond_point {
    use super::*;

    /// One update of the 20 layers of a 2^20 universe.
    #[divan::bench]
    fn dyadic_update(bencher: Bencher) {
        let items = zipf_items();
        bencher
            .counter(ItemsCount::new(items.len()))
            .with_inputs(|| DyadicCountMin::with_dimensions(W, D, 20, Model::CashRegister).unwrap())
            .bench_local_refs(|s| {
                for &x in &items {
                    s.update(x, 1).unwrap();
                }
            });
    }

    /// 1,000 random ranges over [0, 2^20).
    #[divan::bench]
    fn range(bencher: Bencher) {
        let s = dyadic_filled();
        let mut rng = Pcg64::seed_from_u64(7);
        let ranges: Vec<(u64, u64)> = (0..1_000)
            .map(|_| {
                let (a, b) = (
                    rng.random_range(0..1u64 << 20),
                    rng.random_range(0..1u64 << 20),
                );
                (a.min(b), a.max(b))
            })
            .collect();
        bencher
            .counter(ItemsCount::new(ranges.len()))
            .bench_local(|| {
                ranges
                    .iter()
                    .map(|&(l, r)| s.range(l, r).unwrap().value)
                    .sum::<f64>()
            });
    }

    /// The 99 percentiles.
    #[divan::bench]
    fn quantile(bencher: Bencher) {
        let s = dyadic_filled();
        bencher.counter(ItemsCount::new(99usize)).bench_local(|| {
            (1..100)
                .map(|i| s.quantile(i as f64 / 100.0).unwrap().0)
                .sum::<u64>()
        });
    }

    /// Turnstile heavy hitters at φ = 0.01: one descent of the layers.
    #[divan::bench]
    fn heavy_hitters_dyadic(bencher: Bencher) {
        let s = dyadic_filled();
        bencher.bench_local(|| s.heavy_hitters(0.01).unwrap().len());
    }

    /// Top 10 by best-first descent.
    #[divan::bench]
    fn top_10_dyadic(bencher: Bencher) {
        let s = dyadic_filled();
        bencher.bench_local(|| s.top_k(10).len());
    }

    /// Cash-register heavy hitters at φ = 0.01: update plus candidate upkeep per item.
    #[divan::bench]
    fn heavy_hitters_cash_insert(bencher: Bencher) {
        let items = zipf_items();
        bencher
            .counter(ItemsCount::new(items.len()))
            .with_inputs(|| {
                HeavyHitters::with_sketch(
                    0.01,
                    CountMin::with_dimensions(W, D, Model::CashRegister).unwrap(),
                )
                .unwrap()
            })
            .bench_local_refs(|hh| {
                for &x in &items {
                    hh.insert(&x.to_le_bytes(), 1).unwrap();
                }
            });
    }

    /// Join size of two sketches (5 rows of 2048 products).
    #[divan::bench]
    fn inner_product(bencher: Bencher) {
        let a = tidemark_filled(false);
        let b = tidemark_filled(false);
        bencher.bench_local(|| a.inner_product(&b).unwrap().value);
    }
}

/// The row-hash family alone: 5 columns of w = 2048 for each of 100,000 pre-hashed keys.
/// tidemark's multiply-add-shift beside Carter–Wegman's `(a·x + b) mod (2^61 − 1)` (written
/// here for the comparison), the family Cormode and Muthukrishnan's analysis assumes.
mod row_hash {
    use super::*;
    use tidemark::hash::PairwiseHash;

    const P: u64 = (1 << 61) - 1;

    fn keys() -> Vec<u64> {
        let h = tidemark::ItemHasher::default();
        zipf_items().iter().map(|&x| h.hash_u64(x)).collect()
    }

    /// The 5 row functions `column` of each pre-hashed item, summed so none is optimized out.
    fn time_rows(bencher: Bencher, column: impl Fn(&PairwiseHash, u64) -> usize) {
        let keys = keys();
        let rows = PairwiseHash::rows(1, 0, D);
        bencher
            .counter(ItemsCount::new(keys.len()))
            .bench_local(|| {
                let mut s = 0usize;
                for &x in &keys {
                    for h in &rows {
                        s = s.wrapping_add(column(h, divan::black_box(x)));
                    }
                }
                s
            });
    }

    #[divan::bench]
    fn multiply_add_shift_32x2(bencher: Bencher) {
        time_rows(bencher, |h, x| h.column(x, W));
    }

    /// The rows new sketches use: one multiplication of the item hash a row.
    #[divan::bench]
    fn multiply_shift_of_hash(bencher: Bencher) {
        time_rows(bencher, |h, x| (h.multiply_shift(x) >> 21) as usize);
    }

    #[divan::bench]
    fn carter_wegman_mod_p(bencher: Bencher) {
        let keys = keys();
        let mut rng = Pcg64::seed_from_u64(1);
        let rows: Vec<(u64, u64)> = (0..D)
            .map(|_| (rng.random_range(1..P), rng.random_range(0..P)))
            .collect();
        bencher
            .counter(ItemsCount::new(keys.len()))
            .bench_local(|| {
                let mut s = 0usize;
                for &x in &keys {
                    let x = divan::black_box(x);
                    let x = (x & P) + (x >> 61);
                    let x = if x >= P { x - P } else { x };
                    for &(a, b) in &rows {
                        let v = a as u128 * x as u128 + b as u128;
                        let r = (v as u64 & P) + (v >> 61) as u64;
                        let r = (r & P) + (r >> 61);
                        let r = if r >= P { r - P } else { r };
                        s = s.wrapping_add(((r as u128 * W as u128) >> 61) as usize);
                    }
                }
                s
            });
    }
}
