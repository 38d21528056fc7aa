//! Windowed distinct counts: the sliding HyperLogLog's insert and query beside a plain dense
//! HyperLogLog's insert and the ring's window query.
//!
//! `cargo bench -p tidemark-bench --bench sliding`
//!
//! p = 12; the sketches are warmed with the reference run's rate (2,000 events a minute, ticks
//! are seconds; see ACCURACY.md) for two hours before measuring, so lists and buckets are at
//! steady state.

use divan::counter::ItemsCount;
use divan::Bencher;
use tidemark::cardinality::{Hll, RingWindow, SlidingHll};
use tidemark_bench::u64_items;

fn main() {
    divan::main();
}

const P: u8 = 12;
const BATCH: usize = 100_000;
/// Events a second at the reference run's 2,000 a minute, rounded up.
const PER_SECOND: u64 = 34;

fn warm_sliding(retention: u64) -> (SlidingHll, u64) {
    let mut s = SlidingHll::new(P, retention).unwrap();
    let items = u64_items(1, 7_200 * PER_SECOND as usize);
    for (i, &item) in items.iter().enumerate() {
        s.insert_u64(item % 50_000, i as u64 / PER_SECOND).unwrap();
    }
    (s, 7_200)
}

#[divan::bench]
fn hll_dense_insert(bencher: Bencher) {
    let mut h = Hll::new(P).unwrap();
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

#[divan::bench(args = [600, 3_600, 86_400])]
fn sliding_insert(bencher: Bencher, retention: u64) {
    let (s, start) = warm_sliding(retention);
    let items = u64_items(2, BATCH);
    bencher
        .counter(ItemsCount::new(BATCH))
        .with_inputs(|| s.clone())
        .bench_local_values(|mut s| {
            for (i, &x) in items.iter().enumerate() {
                s.insert_u64(x % 50_000, start + i as u64 / PER_SECOND)
                    .unwrap();
            }
            s
        });
}

#[divan::bench(args = [60, 600, 3_600])]
fn sliding_count(bencher: Bencher, window: u64) {
    let (s, now) = warm_sliding(3_600);
    bencher.bench_local(|| s.count(now - 1, window).unwrap());
}

#[divan::bench(args = [1, 10, 60])]
fn ring_count_cached(bencher: Bencher, window: u64) {
    let mut ring = RingWindow::new(P, 60, 60).unwrap();
    let items = u64_items(1, 7_200 * PER_SECOND as usize);
    for (i, &item) in items.iter().enumerate() {
        ring.insert_u64(item % 50_000, i as u64 / PER_SECOND)
            .unwrap();
    }
    bencher.bench_local(|| ring.count(7_199, window).unwrap());
}

#[divan::bench(args = [1, 10, 60])]
fn ring_count_after_close(bencher: Bencher, window: u64) {
    let mut ring = RingWindow::new(P, 60, 60).unwrap();
    let items = u64_items(1, 7_200 * PER_SECOND as usize);
    for (i, &item) in items.iter().enumerate() {
        ring.insert_u64(item % 50_000, i as u64 / PER_SECOND)
            .unwrap();
    }
    // A late event into a closed bucket drops the cache: the next query merges W buckets.
    bencher
        .with_inputs(|| {
            let mut r = ring.clone();
            r.insert_u64(7, 7_100).unwrap();
            r
        })
        .bench_local_values(|mut r| r.count(7_199, window).unwrap());
}
