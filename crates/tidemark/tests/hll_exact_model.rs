//! HyperLogLog against exact models: the exact form counts exactly (a `HashSet`), inserts are
//! idempotent, every representation holds the registers a plain register array would, merges
//! equal the sketch of the union at any precision, and mismatched hashes are refused.

use std::collections::HashSet;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::cardinality::registers::index_and_rank;
use tidemark::cardinality::{Hll, Representation};
use tidemark::hash::ItemHasher;
use tidemark::{Bracket, MergeError, Method};

/// The registers a plain array at precision `p` holds after the given items: the model.
fn model_registers(items: &[u64], p: u8, hasher: ItemHasher) -> Vec<u8> {
    let mut regs = vec![0u8; 1 << p];
    for &x in items {
        let (i, r) = index_and_rank(hasher.hash_u64(x), p);
        regs[i] = regs[i].max(r);
    }
    regs
}

#[test]
fn exact_form_counts_exactly_and_never_holds_more_than_dense_bytes() {
    let mut rng = Pcg64::seed_from_u64(3);
    for p in [4u8, 5, 8, 12, 14, 18] {
        let mut h = Hll::new(p).unwrap();
        let mut model = HashSet::new();
        let m = 1usize << p;
        let heap_limit = m + std::mem::size_of::<Hll>();
        for _ in 0..(3 * m).min(200_000) {
            let x = rng.random_range(0..(2 * m as u64));
            h.insert_u64(x);
            model.insert(x);
            assert!(h.bytes() <= heap_limit, "p={p}: {} bytes", h.bytes());
            if h.representation() == Representation::Exact {
                let e = h.estimate();
                assert_eq!(e.value, model.len() as f64);
                assert_eq!(e.method, Method::Exact);
                assert_eq!(e.bracket, Bracket::Guaranteed);
            }
        }
        assert_eq!(
            h.registers(),
            model_registers(&Vec::from_iter(model), p, h.hasher())
        );
    }
}

#[test]
fn representations_advance_exact_then_sparse_then_dense() {
    let mut h = Hll::new(14).unwrap();
    let mut seen = vec![h.representation()];
    for i in 0..100_000u64 {
        h.insert_u64(i);
        if *seen.last().unwrap() != h.representation() {
            seen.push(h.representation());
        }
    }
    assert_eq!(
        seen,
        [
            Representation::Exact,
            Representation::Sparse,
            Representation::Dense
        ]
    );
}

#[test]
fn inserting_the_same_items_again_changes_nothing() {
    let mut rng = Pcg64::seed_from_u64(4);
    for n in [0usize, 1, 10, 300, 1_500, 5_000, 50_000] {
        let items: Vec<u64> = (0..n).map(|_| rng.random()).collect();
        let mut h = Hll::new(12).unwrap();
        for &x in &items {
            h.insert_u64(x);
        }
        let before = h.to_bytes();
        let est = h.estimate();
        for &x in items.iter().rev() {
            h.insert_u64(x);
        }
        assert_eq!(h.to_bytes(), before, "n={n}");
        assert_eq!(h.estimate(), est);
    }
}

#[test]
fn sparse_and_dense_estimates_track_the_truth_near_exactly_while_sparse() {
    // Sparse uses 2^25 virtual registers: standard error 1.04/√2^25 ≈ 1.8e-4; allow 10σ.
    let mut h = Hll::new(16).unwrap();
    let mut n = 0u64;
    while h.representation() != Representation::Dense {
        h.insert_u64(n);
        n += 1;
        if h.representation() == Representation::Sparse && n % 97 == 0 {
            for e in [h.estimate(), h.estimate_ertl()] {
                let rel = (e.value - n as f64).abs() / n as f64;
                assert!(rel < 10.0 * 1.8e-4 + 1.0 / n as f64, "n={n} {e}");
            }
        }
    }
    assert!(n > 1 << 12, "the sparse form held only {n} items");
}

#[test]
fn merge_equals_the_sketch_of_the_union_at_every_pair_of_representations() {
    let mut rng = Pcg64::seed_from_u64(5);
    let sizes = [0usize, 5, 200, 2_000, 40_000];
    for &na in &sizes {
        for &nb in &sizes {
            for (pa, pb) in [(12u8, 12u8), (14, 10), (10, 14), (4, 18)] {
                let a_items: Vec<u64> = (0..na).map(|_| rng.random_range(0..60_000)).collect();
                let b_items: Vec<u64> = (0..nb).map(|_| rng.random_range(0..60_000)).collect();
                let mut a = Hll::new(pa).unwrap();
                let mut b = Hll::new(pb).unwrap();
                a_items.iter().for_each(|&x| a.insert_u64(x));
                b_items.iter().for_each(|&x| b.insert_u64(x));
                a.merge(&b).unwrap();
                let p = pa.min(pb);
                assert_eq!(a.precision(), p);
                let all: Vec<u64> = a_items.iter().chain(&b_items).copied().collect();
                assert_eq!(
                    a.registers(),
                    model_registers(&all, p, ItemHasher::default()),
                    "{na}@{pa} ∪ {nb}@{pb}"
                );
                // Small unions stay exact and count exactly.
                let truth = all.iter().collect::<HashSet<_>>().len();
                if a.representation() == Representation::Exact {
                    assert_eq!(a.estimate().value, truth as f64);
                }
                // HIP holds for one stream only: a non-empty merge drops it.
                assert_eq!(a.has_martingale(), nb == 0);
            }
        }
    }
}

#[test]
fn merge_is_commutative_and_idempotent() {
    let mut a = Hll::new(11).unwrap();
    let mut b = Hll::new(11).unwrap();
    for i in 0..5_000u64 {
        a.insert_u64(i);
        b.insert_u64(i * 7 + 3);
    }
    let mut ab = a.clone();
    ab.merge(&b).unwrap();
    let mut ba = b.clone();
    ba.merge(&a).unwrap();
    assert_eq!(ab.registers(), ba.registers());
    let once = ab.registers();
    ab.merge(&b).unwrap();
    ab.merge(&a).unwrap();
    assert_eq!(ab.registers(), once);
}

#[test]
fn different_hashes_or_seeds_do_not_merge() {
    let mut a = Hll::new(12).unwrap();
    a.insert_u64(1);
    for other in [
        Hll::with_hasher(12, ItemHasher::xxh3(99)).unwrap(),
        Hll::with_hasher(12, ItemHasher::redis()).unwrap(),
        Hll::redis(),
    ] {
        let before = a.clone();
        assert!(matches!(
            a.merge(&other),
            Err(MergeError::HashMismatch { .. })
        ));
        assert_eq!(a, before, "a refused merge changed the sketch");
    }
}

#[test]
fn hip_is_used_until_a_merge_and_ertl_after() {
    let mut a = Hll::new(10).unwrap();
    for i in 0..10_000u64 {
        a.insert_u64(i);
    }
    assert_eq!(a.estimate().method, Method::HllMartingale);
    let empty = Hll::new(10).unwrap();
    a.merge(&empty).unwrap();
    assert_eq!(
        a.estimate().method,
        Method::HllMartingale,
        "merging nothing keeps HIP"
    );
    let mut b = Hll::new(10).unwrap();
    b.insert_u64(123_456);
    a.merge(&b).unwrap();
    assert_eq!(a.estimate().method, Method::HllErtl);
    assert!(!a.has_martingale());
}

#[test]
fn brackets_widen_with_confidence_and_bad_parameters_are_refused() {
    let mut h = Hll::new(10).unwrap();
    for i in 0..50_000u64 {
        h.insert_u64(i);
    }
    let e95 = h.estimate();
    let e99 = h.clone().with_confidence(0.99).unwrap().estimate();
    assert_eq!(e95.value, e99.value);
    assert!(e99.width() > e95.width());
    assert_eq!(e99.confidence(), 0.99);
    // ± z·σ with z = 1.96 and σ = 0.8326/√1024.
    let half = 1.959_964 * 0.832_554_6 / 32.0 * e95.value;
    assert!((e95.high - e95.value - half).abs() < 1e-6 * e95.value);
    for p in [0u8, 3, 19, 64] {
        assert!(Hll::new(p).is_err(), "p={p}");
    }
    for c in [0.0, 1.0, -0.5, f64::NAN] {
        assert!(Hll::new(10).unwrap().with_confidence(c).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any interleaving of inserts and merges of sketches at random precisions holds exactly
    /// the registers of a plain array fed every item, at the smallest precision involved.
    #[test]
    fn any_insert_merge_sequence_matches_the_register_model(
        parts in proptest::collection::vec(
            (4u8..=18, proptest::collection::vec(0u64..3_000, 0..400)), 1..5)
    ) {
        let mut acc: Option<Hll> = None;
        let mut all = Vec::new();
        let mut pmin = 18;
        for (p, items) in &parts {
            let mut h = Hll::new(*p).unwrap();
            for &x in items { h.insert_u64(x); }
            all.extend_from_slice(items);
            pmin = pmin.min(*p);
            match &mut acc {
                None => acc = Some(h),
                Some(a) => a.merge(&h).unwrap(),
            }
        }
        let acc = acc.unwrap();
        prop_assert_eq!(acc.precision(), pmin);
        prop_assert_eq!(acc.registers(), model_registers(&all, pmin, ItemHasher::default()));
        let truth = all.iter().collect::<HashSet<_>>().len() as f64;
        if acc.representation() == Representation::Exact {
            prop_assert_eq!(acc.estimate().value, truth);
        }
    }

    /// A union is the same sketch however its parts are grouped before merging: buckets
    /// merged one by one into an empty sketch, or first merged in runs and the runs merged,
    /// give the same bytes (form included). A window merged through block merges relies on
    /// it. The hashes are made to share few sparse indices (the low 25 bits) with several
    /// ranks, so that an index's rank rises across parts while a sparse table is full.
    #[test]
    fn a_union_is_the_same_sketch_however_its_parts_are_grouped(
        p in 4u8..=7,
        parts in proptest::collection::vec(
            proptest::collection::vec((0u64..24, 1u32..10), 0..12), 1..30),
        cuts in proptest::collection::vec(any::<bool>(), 30),
    ) {
        let sketch = |hashes: &[(u64, u32)]| {
            let mut h = Hll::new(p).unwrap();
            // Sparse index `i`, rank `r` at the sparse precision (25 bits).
            for &(i, r) in hashes { h.insert_hash(i | 1u64 << (25 + r - 1)); }
            h
        };
        let sketches: Vec<Hll> = parts.iter().map(|x| sketch(x)).collect();
        let mut one_by_one = Hll::new(p).unwrap();
        for s in &sketches { one_by_one.merge(s).unwrap(); }
        // Runs cut where `cuts` says, each merged first, then the runs in order.
        let mut grouped = Hll::new(p).unwrap();
        let mut run: Option<Hll> = None;
        for (k, s) in sketches.iter().enumerate() {
            match &mut run {
                None => run = Some(s.clone()),
                Some(r) => r.merge(s).unwrap(),
            }
            if cuts[k] || k + 1 == sketches.len() {
                if let Some(r) = run.take() { grouped.merge(&r).unwrap(); }
            }
        }
        prop_assert_eq!(grouped.representation(), one_by_one.representation());
        prop_assert_eq!(grouped.to_bytes(), one_by_one.to_bytes());
    }
}
