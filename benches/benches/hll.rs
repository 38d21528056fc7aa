//! HyperLogLog: tidemark's `Hll` beside hyperloglockless 0.5 (dense `HyperLogLog` and sparse
//! `HyperLogLogPlus`), cardinality-estimator 1.0 (wyhash), hyperloglogplus 0.4
//! (`HyperLogLogPlus`, std `RandomState`) and datasketches 0.6 (`HllSketch`, `Hll8`), all at
//! p = 14, each with its own default hash.
//!
//! `cargo bench -p tidemark-bench --bench hll`
//!
//! - `insert_*`: build a sketch from empty with n distinct items (n = 10^2, 10^4, 10^6), so
//!   the figure covers each crate's small representations and its transitions; per item.
//! - `insert_dense_u64`: 100,000 more distinct `u64` items into a clone of a sketch already
//!   holding 10^6 (every crate dense); per item.
//! - `count`: one estimate of a sketch holding n items (hyperloglogplus and hyperloglockless's
//!   sparse sketch need `&mut self`, so they count a fresh clone, the clone untimed).
//! - `merge`: merge a sketch of n items into a clone of another of n items (clone untimed).
//!
//! Bytes held are printed to stderr before the benchmarks, from each crate's own accounting
//! where it has one.

use std::collections::hash_map::RandomState;
use std::hash::Hash;

use cardinality_estimator::CardinalityEstimator;
use datasketches::hll::{HllSketch, HllType};
use divan::counter::ItemsCount;
use divan::Bencher;
use tidemark::cardinality::Hll;
use tidemark_bench::{string_items, u64_items};
use wyhash::WyHash;

const P: u8 = 14;
const NS: [usize; 3] = [100, 10_000, 1_000_000];

type Str16 = [u8; 16];

/// An item type tidemark knows how to insert (u64 by its fast path, strings by bytes).
trait Item: Hash + Clone + 'static {
    fn tm_insert(h: &mut Hll, x: &Self);
    fn items(seed: u64, n: usize) -> Vec<Self>;
}

impl Item for u64 {
    #[inline]
    fn tm_insert(h: &mut Hll, x: &u64) {
        h.insert_u64(*x);
    }
    fn items(seed: u64, n: usize) -> Vec<u64> {
        u64_items(seed, n)
    }
}

impl Item for Str16 {
    #[inline]
    fn tm_insert(h: &mut Hll, x: &Str16) {
        h.insert(x);
    }
    fn items(seed: u64, n: usize) -> Vec<Str16> {
        string_items(seed, n)
    }
}

/// What every contender offers.
trait Sketch: Clone {
    type I: Item;
    fn new() -> Self;
    fn add(&mut self, x: &Self::I);
    fn count(&mut self) -> f64;
    fn merge(&mut self, other: &Self);
    fn bytes(&self) -> Option<usize>;
}

#[derive(Clone)]
struct Tidemark<I>(Hll, std::marker::PhantomData<I>);
impl<I: Item> Sketch for Tidemark<I> {
    type I = I;
    fn new() -> Self {
        Tidemark(Hll::new(P).unwrap(), Default::default())
    }
    #[inline]
    fn add(&mut self, x: &I) {
        I::tm_insert(&mut self.0, x);
    }
    fn count(&mut self) -> f64 {
        self.0.estimate().value
    }
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0).unwrap();
    }
    fn bytes(&self) -> Option<usize> {
        Some(self.0.bytes())
    }
}

/// tidemark's Ertl estimate (the count of a merged sketch: a pass over the registers).
#[derive(Clone)]
struct TidemarkErtl<I>(Tidemark<I>);
impl<I: Item> Sketch for TidemarkErtl<I> {
    type I = I;
    fn new() -> Self {
        TidemarkErtl(Tidemark::new())
    }
    fn add(&mut self, x: &I) {
        self.0.add(x);
    }
    fn count(&mut self) -> f64 {
        self.0 .0.estimate_ertl().value
    }
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0);
    }
    fn bytes(&self) -> Option<usize> {
        self.0.bytes()
    }
}

#[derive(Clone)]
struct Lockless<I>(hyperloglockless::HyperLogLog, std::marker::PhantomData<I>);
impl<I: Item> Sketch for Lockless<I> {
    type I = I;
    fn new() -> Self {
        Lockless(
            hyperloglockless::HyperLogLog::seeded(P, 7),
            Default::default(),
        )
    }
    #[inline]
    fn add(&mut self, x: &I) {
        self.0.insert(x);
    }
    fn count(&mut self) -> f64 {
        self.0.raw_count()
    }
    fn merge(&mut self, other: &Self) {
        self.0.union(&other.0).unwrap();
    }
    fn bytes(&self) -> Option<usize> {
        Some(self.0.len() + std::mem::size_of_val(&self.0))
    }
}

#[derive(Clone)]
struct LocklessPlus<I>(
    hyperloglockless::HyperLogLogPlus,
    std::marker::PhantomData<I>,
);
impl<I: Item> Sketch for LocklessPlus<I> {
    type I = I;
    fn new() -> Self {
        LocklessPlus(
            hyperloglockless::HyperLogLogPlus::seeded(P, 7),
            Default::default(),
        )
    }
    #[inline]
    fn add(&mut self, x: &I) {
        self.0.insert(x);
    }
    fn count(&mut self) -> f64 {
        self.0.count() as f64
    }
    fn merge(&mut self, other: &Self) {
        self.0.union(&other.0).unwrap();
    }
    fn bytes(&self) -> Option<usize> {
        None
    }
}

#[derive(Clone)]
struct CardEst<I: Item>(CardinalityEstimator<I, WyHash, 14, 6>);
impl<I: Item> Sketch for CardEst<I> {
    type I = I;
    fn new() -> Self {
        CardEst(CardinalityEstimator::new())
    }
    #[inline]
    fn add(&mut self, x: &I) {
        self.0.insert(x);
    }
    fn count(&mut self) -> f64 {
        self.0.estimate() as f64
    }
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0);
    }
    fn bytes(&self) -> Option<usize> {
        Some(self.0.size_of())
    }
}

#[derive(Clone)]
struct HlPlus<I: Item>(hyperloglogplus::HyperLogLogPlus<I, RandomState>);
impl<I: Item> Sketch for HlPlus<I> {
    type I = I;
    fn new() -> Self {
        HlPlus(hyperloglogplus::HyperLogLogPlus::new(P, RandomState::new()).unwrap())
    }
    #[inline]
    fn add(&mut self, x: &I) {
        use hyperloglogplus::HyperLogLog;
        self.0.insert(x);
    }
    fn count(&mut self) -> f64 {
        use hyperloglogplus::HyperLogLog;
        self.0.count()
    }
    fn merge(&mut self, other: &Self) {
        self.0.merge(&other.0).unwrap();
    }
    fn bytes(&self) -> Option<usize> {
        None
    }
}

#[derive(Clone)]
struct DataSketches<I>(HllSketch, std::marker::PhantomData<I>);
impl<I: Item> Sketch for DataSketches<I> {
    type I = I;
    fn new() -> Self {
        DataSketches(
            HllSketch::new(P, HllType::Hll8).unwrap(),
            Default::default(),
        )
    }
    #[inline]
    fn add(&mut self, x: &I) {
        self.0.update(x);
    }
    fn count(&mut self) -> f64 {
        self.0.estimate()
    }
    fn merge(&mut self, other: &Self) {
        // datasketches merges through a union; the union is the merged sketch.
        let mut u = datasketches::hll::HllUnion::new(P).unwrap();
        u.update(&self.0);
        u.update(&other.0);
        self.0 = u.to_sketch(HllType::Hll8);
    }
    fn bytes(&self) -> Option<usize> {
        Some(self.0.estimated_size())
    }
}

fn built<S: Sketch>(seed: u64, n: usize) -> S {
    let mut s = S::new();
    for x in S::I::items(seed, n) {
        s.add(&x);
    }
    s
}

fn print_bytes<S: Sketch>(name: &str) {
    let cells: Vec<String> = NS
        .iter()
        .map(|&n| match built::<S>(1, n).bytes() {
            Some(b) => b.to_string(),
            None => "n/a".into(),
        })
        .collect();
    eprintln!("bytes {name:<28} {}", cells.join(" "));
}

fn main() {
    eprintln!("bytes held (u64 items) at n = 10^2 10^4 10^6, p = {P}:");
    print_bytes::<Tidemark<u64>>("tidemark");
    print_bytes::<Lockless<u64>>("hyperloglockless");
    print_bytes::<LocklessPlus<u64>>("hyperloglockless-plus");
    print_bytes::<CardEst<u64>>("cardinality-estimator");
    print_bytes::<HlPlus<u64>>("hyperloglogplus");
    print_bytes::<DataSketches<u64>>("datasketches-hll8");
    divan::main();
}

#[divan::bench(types = [Tidemark<u64>, Lockless<u64>, LocklessPlus<u64>, CardEst<u64>, HlPlus<u64>, DataSketches<u64>], args = NS)]
fn insert_u64<S: Sketch>(bencher: Bencher, n: usize) {
    let items = S::I::items(1, n);
    bencher.counter(ItemsCount::new(n)).bench_local(|| {
        let mut s = S::new();
        for x in &items {
            s.add(x);
        }
        s
    });
}

#[divan::bench(types = [Tidemark<Str16>, Lockless<Str16>, LocklessPlus<Str16>, CardEst<Str16>, HlPlus<Str16>, DataSketches<Str16>], args = NS)]
fn insert_str16<S: Sketch>(bencher: Bencher, n: usize) {
    let items = S::I::items(1, n);
    bencher.counter(ItemsCount::new(n)).bench_local(|| {
        let mut s = S::new();
        for x in &items {
            s.add(x);
        }
        s
    });
}

#[divan::bench(types = [Tidemark<u64>, Lockless<u64>, LocklessPlus<u64>, CardEst<u64>, HlPlus<u64>, DataSketches<u64>])]
fn insert_dense_u64<S: Sketch>(bencher: Bencher) {
    let warm: S = built(1, 1_000_000);
    let more = S::I::items(2, 100_000);
    bencher
        .counter(ItemsCount::new(more.len()))
        .with_inputs(|| warm.clone())
        .bench_local_refs(|s| {
            for x in &more {
                s.add(x);
            }
        });
}

#[divan::bench(types = [Tidemark<u64>, TidemarkErtl<u64>, Lockless<u64>, LocklessPlus<u64>, CardEst<u64>, HlPlus<u64>, DataSketches<u64>], args = NS)]
fn count<S: Sketch>(bencher: Bencher, n: usize) {
    let s: S = built(1, n);
    bencher
        .with_inputs(|| s.clone())
        .bench_local_refs(|s| s.count());
}

#[divan::bench(types = [Tidemark<u64>, Lockless<u64>, LocklessPlus<u64>, CardEst<u64>, HlPlus<u64>, DataSketches<u64>], args = NS)]
fn merge<S: Sketch>(bencher: Bencher, n: usize) {
    let a: S = built(1, n);
    let b: S = built(2, n);
    bencher
        .with_inputs(|| a.clone())
        .bench_local_refs(|s| s.merge(&b));
}
