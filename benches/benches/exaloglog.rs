//! ExaLogLog beside HyperLogLog: dense inserts and estimates, the same items, one run.
//!
//! `cargo bench -p tidemark-bench --bench exaloglog`
//!
//! Each sketch is warmed with 100,000 distinct items (dense, the martingale live) before the
//! measured batch of 100,000 further seeded random `u64`s. `Hll` at p = 10 and 12; ExaLogLog
//! (t, d) = (2, 20) at p = 7 (about the error of `Hll` p = 10), 8 and 10.

use divan::counter::ItemsCount;
use divan::Bencher;
use tidemark::cardinality::{ExaLogLog, Hll};
use tidemark_bench::u64_items;

fn main() {
    divan::main();
}

const BATCH: usize = 100_000;

#[divan::bench(args = [10, 12])]
fn hll_dense_insert(bencher: Bencher, p: u8) {
    let mut h = Hll::new(p).unwrap();
    for i in 0..100_000u64 {
        h.insert_u64(i);
    }
    let items = u64_items(2, BATCH);
    bencher
        .counter(ItemsCount::new(BATCH))
        .with_inputs(|| h.clone())
        .bench_local_values(|mut h| {
            for &x in &items {
                h.insert_u64(x);
            }
            h
        });
}

#[divan::bench(args = [7, 8, 10])]
fn exaloglog_dense_insert(bencher: Bencher, p: u8) {
    let mut s = ExaLogLog::new(p).unwrap();
    for i in 0..100_000u64 {
        s.insert_u64(i);
    }
    let items = u64_items(2, BATCH);
    bencher
        .counter(ItemsCount::new(BATCH))
        .with_inputs(|| s.clone())
        .bench_local_values(|mut s| {
            for &x in &items {
                s.insert_u64(x);
            }
            s
        });
}

#[divan::bench(args = [10, 12])]
fn hll_estimate_ertl(bencher: Bencher, p: u8) {
    let mut h = Hll::new(p).unwrap();
    for i in 0..100_000u64 {
        h.insert_u64(i);
    }
    bencher.bench_local(|| h.estimate_ertl());
}

#[divan::bench(args = [7, 8, 10])]
fn exaloglog_estimate_ml(bencher: Bencher, p: u8) {
    let mut s = ExaLogLog::new(p).unwrap();
    for i in 0..100_000u64 {
        s.insert_u64(i);
    }
    bencher.bench_local(|| s.estimate_ml());
}

#[divan::bench(args = [7, 10])]
fn exaloglog_dense_insert_merged(bencher: Bencher, p: u8) {
    let mut s = ExaLogLog::new(p).unwrap();
    for i in 0..100_000u64 {
        s.insert_u64(i);
    }
    let mut merged = ExaLogLog::new(p).unwrap();
    merged.merge(&s).unwrap();
    let items = u64_items(2, BATCH);
    bencher
        .counter(ItemsCount::new(BATCH))
        .with_inputs(|| merged.clone())
        .bench_local_values(|mut s| {
            for &x in &items {
                s.insert_u64(x);
            }
            s
        });
}
