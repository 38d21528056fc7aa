//! ExaLogLog beside HyperLogLog: dense inserts and estimates, the same items, one run.
//!
//! `cargo bench -p tidemark-bench --bench exaloglog`
//!
//! Each sketch is warmed with 100,000 distinct items (dense, the martingale live), then every
//! sample inserts the next 100,000 distinct `u64` items of one endless stream into the same
//! sketch (no copy a sample: a fresh copy's allocation made the times bimodal), so a sketch
//! of a 100-sample run ends at about 10^7 items. `Hll` at p = 10 and 12; ExaLogLog (t, d) =
//! (2, 20) at p = 7 (the error of `Hll` p = 10), 8 (about its bytes) and 10 (its p). Then
//! each dense sketch of 10^6 items written (`to_bytes`) and read (`from_bytes`).

use std::cell::RefCell;

use divan::counter::ItemsCount;
use divan::Bencher;
use tidemark::cardinality::{ExaLogLog, Hll};

fn main() {
    divan::main();
}

const BATCH: u64 = 100_000;

/// Feeds `sketch` the next batch of its stream each sample.
fn stream_inserts<S>(bencher: Bencher, sketch: S, insert: fn(&mut S, u64)) {
    let state = RefCell::new((sketch, BATCH));
    bencher
        .counter(ItemsCount::new(BATCH as usize))
        .bench_local(|| {
            let (s, next) = &mut *state.borrow_mut();
            for item in *next..*next + BATCH {
                insert(s, item);
            }
            *next += BATCH;
        });
}

#[divan::bench(args = [10, 12])]
fn hll_dense_insert(bencher: Bencher, p: u8) {
    let mut h = Hll::new(p).unwrap();
    for i in 0..BATCH {
        h.insert_u64(i);
    }
    stream_inserts(bencher, h, Hll::insert_u64);
}

#[divan::bench(args = [7, 8, 10])]
fn exaloglog_dense_insert(bencher: Bencher, p: u8) {
    let mut s = ExaLogLog::new(p).unwrap();
    for i in 0..BATCH {
        s.insert_u64(i);
    }
    stream_inserts(bencher, s, ExaLogLog::insert_u64);
}

#[divan::bench(args = [10, 12])]
fn hll_estimate_ertl(bencher: Bencher, p: u8) {
    let mut h = Hll::new(p).unwrap();
    for i in 0..BATCH {
        h.insert_u64(i);
    }
    bencher.bench_local(|| h.estimate_ertl());
}

#[divan::bench(args = [7, 8, 10])]
fn exaloglog_estimate_ml(bencher: Bencher, p: u8) {
    let mut s = ExaLogLog::new(p).unwrap();
    for i in 0..BATCH {
        s.insert_u64(i);
    }
    bencher.bench_local(|| s.estimate_ml());
}

/// A dense sketch of 10^6 items, as saved and read back: `Hll` packs 6-bit registers,
/// ExaLogLog range-codes its registers (and its reader codes them again to check the bytes).
fn dense<S>(mut sketch: S, insert: fn(&mut S, u64)) -> S {
    for i in 0..1_000_000 {
        insert(&mut sketch, i);
    }
    sketch
}

#[divan::bench(args = [10, 12])]
fn hll_to_bytes(bencher: Bencher, p: u8) {
    let h = dense(Hll::new(p).unwrap(), Hll::insert_u64);
    bencher.bench_local(|| h.to_bytes());
}

#[divan::bench(args = [10, 12])]
fn hll_from_bytes(bencher: Bencher, p: u8) {
    let bytes = dense(Hll::new(p).unwrap(), Hll::insert_u64).to_bytes();
    bencher.bench_local(|| Hll::from_bytes(&bytes).unwrap());
}

#[divan::bench(args = [7, 8, 10])]
fn exaloglog_to_bytes(bencher: Bencher, p: u8) {
    let s = dense(ExaLogLog::new(p).unwrap(), ExaLogLog::insert_u64);
    bencher.bench_local(|| s.to_bytes());
}

#[divan::bench(args = [7, 8, 10])]
fn exaloglog_from_bytes(bencher: Bencher, p: u8) {
    let bytes = dense(ExaLogLog::new(p).unwrap(), ExaLogLog::insert_u64).to_bytes();
    bencher.bench_local(|| ExaLogLog::from_bytes(&bytes).unwrap());
}
