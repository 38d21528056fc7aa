//! Quotient filters: tidemark's (classic three-metadata-bit layout, in-place doubling) beside
//! qfilter 0.3 (rank-select quotient filter) at equal fingerprint size and equal load.
//!
//! `cargo bench -p tidemark-bench --bench filter`
//!
//! Both tables have 2^Q slots and p = Q + 8 fingerprint bits (8-bit remainders); both are fed
//! the same pre-computed random 64-bit hashes (no item hashing is timed), duplicates kept.
//! - `insert`: a table at load L − 0.05 takes the keys that bring it to load L (per key);
//! - `lookup_hit` / `lookup_miss`: 10,000 lookups of held / absent hashes at load L;
//! - `double`: the one insert that doubles a full table, counted per key moved.
//!
//! tidemark's table doubles when its load reaches λ = 3/4 (the design's rule), so it has no
//! state at loads 0.8 and 0.9; qfilter (which fills to 0.95) is measured there alone.

use std::fmt;

use divan::counter::ItemsCount;
use divan::Bencher;
use tidemark::membership::QuotientFilter;
use tidemark_bench::u64_items;

fn main() {
    divan::main();
}

const LOOKUPS: usize = 10_000;
const REMAINDER: u32 = 8;

#[derive(Clone, Copy)]
struct Case {
    q: u32,
    load: f64,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "q={} load={}", self.q, self.load)
    }
}

const fn case(q: u32, load: f64) -> Case {
    Case { q, load }
}

/// Loads both filters reach.
const SHARED: &[Case] = &[
    case(16, 0.5),
    case(16, 0.6),
    case(16, 0.7),
    case(20, 0.5),
    case(20, 0.6),
    case(20, 0.7),
];

/// Every load, for qfilter.
const ALL: &[Case] = &[
    case(16, 0.5),
    case(16, 0.6),
    case(16, 0.7),
    case(16, 0.8),
    case(16, 0.9),
    case(20, 0.5),
    case(20, 0.6),
    case(20, 0.7),
    case(20, 0.8),
    case(20, 0.9),
];

fn keys(c: Case) -> usize {
    (c.load * (1u64 << c.q) as f64) as usize
}

fn ours(c: Case, hashes: &[u64]) -> QuotientFilter {
    let mut f = QuotientFilter::with_bits(c.q + REMAINDER, c.q).unwrap();
    for &h in hashes {
        f.insert_hash(h).unwrap();
    }
    assert_eq!(f.slots(), 1 << c.q, "no doubling below load 3/4");
    f
}

fn theirs(c: Case, hashes: &[u64]) -> qfilter::Filter {
    // 2^q slots: qfilter sizes for capacity at 95% of a power of two.
    let mut f =
        qfilter::Filter::with_fingerprint_size((1u64 << c.q) * 9 / 10, (c.q + REMAINDER) as u8)
            .unwrap();
    for &h in hashes {
        f.insert_fingerprint(true, h).unwrap();
    }
    assert_eq!(f.fingerprint_size() as u32, c.q + REMAINDER);
    f
}

/// Held keys below load L − 0.05 and the batch that takes the table to L.
fn insert_split(c: Case) -> (Vec<u64>, Vec<u64>) {
    let all = u64_items(c.q as u64, keys(c));
    let before = keys(case(c.q, c.load - 0.05));
    (all[..before].to_vec(), all[before..].to_vec())
}

mod insert {
    use super::*;

    #[divan::bench(args = SHARED)]
    fn tidemark(b: Bencher, c: Case) {
        let (pre, batch) = insert_split(c);
        let f = ours(c, &pre);
        b.counter(ItemsCount::new(batch.len()))
            .with_inputs(|| f.clone())
            .bench_local_refs(|f| {
                for &h in &batch {
                    f.insert_hash(h).unwrap();
                }
            });
    }

    #[divan::bench(args = ALL)]
    fn qfilter(b: Bencher, c: Case) {
        let (pre, batch) = insert_split(c);
        let f = theirs(c, &pre);
        b.counter(ItemsCount::new(batch.len()))
            .with_inputs(|| f.clone())
            .bench_local_refs(|f| {
                for &h in &batch {
                    f.insert_fingerprint(true, h).unwrap();
                }
            });
    }
}

fn lookup_sets(c: Case) -> (Vec<u64>, Vec<u64>, Vec<u64>) {
    let held = u64_items(c.q as u64, keys(c));
    let hits: Vec<u64> = held
        .iter()
        .step_by(held.len() / LOOKUPS)
        .copied()
        .take(LOOKUPS)
        .collect();
    let misses = u64_items(1_000 + c.q as u64, LOOKUPS);
    (held, hits, misses)
}

mod lookup_hit {
    use super::*;

    #[divan::bench(args = SHARED)]
    fn tidemark(b: Bencher, c: Case) {
        let (held, hits, _) = lookup_sets(c);
        let f = ours(c, &held);
        b.counter(ItemsCount::new(hits.len()))
            .bench_local(|| hits.iter().filter(|&&h| f.contains_hash(h)).count());
    }

    #[divan::bench(args = ALL)]
    fn qfilter(b: Bencher, c: Case) {
        let (held, hits, _) = lookup_sets(c);
        let f = theirs(c, &held);
        b.counter(ItemsCount::new(hits.len()))
            .bench_local(|| hits.iter().filter(|&&h| f.contains_fingerprint(h)).count());
    }
}

mod lookup_miss {
    use super::*;

    #[divan::bench(args = SHARED)]
    fn tidemark(b: Bencher, c: Case) {
        let (held, _, misses) = lookup_sets(c);
        let f = ours(c, &held);
        b.counter(ItemsCount::new(misses.len()))
            .bench_local(|| misses.iter().filter(|&&h| f.contains_hash(h)).count());
    }

    #[divan::bench(args = ALL)]
    fn qfilter(b: Bencher, c: Case) {
        let (held, _, misses) = lookup_sets(c);
        let f = theirs(c, &held);
        b.counter(ItemsCount::new(misses.len())).bench_local(|| {
            misses
                .iter()
                .filter(|&&h| f.contains_fingerprint(h))
                .count()
        });
    }
}

/// The insert that doubles a full table, per key the table held (both rewrite every
/// fingerprint into a table of twice the slots; tidemark walks its runs in order, qfilter
/// iterates its fingerprints into a builder).
mod double {
    use super::*;

    const QS: &[u32] = &[16, 20];

    #[divan::bench(args = QS)]
    fn tidemark(b: Bencher, q: u32) {
        // The table doubles on the insert that would bring it to ⌈3·2^q/4⌉ keys.
        let n = ((3u64 << q) / 4 - 1) as usize;
        let hashes = u64_items(q as u64, n + 1);
        let f = ours(case(q, 0.0), &hashes[..n]);
        let last = hashes[n];
        b.counter(ItemsCount::new(n))
            .with_inputs(|| f.clone())
            .bench_local_refs(|f| {
                f.insert_hash(last).unwrap();
                debug_assert_eq!(f.slots(), 2 << q);
            });
    }

    #[divan::bench(args = QS)]
    fn qfilter(b: Bencher, q: u32) {
        let mut f =
            qfilter::Filter::with_fingerprint_size((1u64 << q) * 9 / 10, (q + REMAINDER) as u8)
                .unwrap();
        let n = f.capacity() as usize;
        let hashes = u64_items(q as u64, n + 1);
        for &h in &hashes[..n] {
            f.insert_fingerprint(true, h).unwrap();
        }
        let last = hashes[n];
        b.counter(ItemsCount::new(n))
            .with_inputs(|| f.clone())
            .bench_local_refs(|f| {
                f.insert_fingerprint(true, last).unwrap();
            });
    }
}
