//! The one guarantee that holds always: on non-negative streams, Count-Min never
//! under-counts — point queries, conservative update, dyadic ranges, inner products — and
//! the bracket's high end is that never-under-counting value.

use std::collections::HashMap;

use proptest::prelude::*;
use tidemark::frequency::{CountMin, DyadicCountMin, Model};
use tidemark::ItemHasher;

fn updates() -> impl Strategy<Value = Vec<(u16, i64)>> {
    proptest::collection::vec((0u16..300, 1i64..50), 0..400)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn point_queries_never_underestimate(
        ups in updates(),
        width in 1usize..40,
        depth in 1usize..6,
        seed in any::<u64>(),
        conservative in any::<bool>(),
    ) {
        let mut cm = CountMin::with_dimensions(width, depth, Model::CashRegister)
            .unwrap()
            .with_hasher(ItemHasher::xxh3(seed));
        if conservative {
            cm = cm.conservative().unwrap();
        }
        let mut exact: HashMap<u16, i64> = HashMap::new();
        for &(x, c) in &ups {
            cm.update(&x.to_le_bytes(), c).unwrap();
            *exact.entry(x).or_default() += c;
        }
        prop_assert_eq!(cm.total(), exact.values().sum::<i64>());
        for x in 0u16..300 {
            let truth = *exact.get(&x).unwrap_or(&0) as f64;
            let e = cm.point(&x.to_le_bytes());
            prop_assert!(e.value >= truth, "item {}: {} < {}", x, e.value, truth);
            prop_assert!(e.high >= truth && e.low <= e.value && e.low >= 0.0);
        }
    }

    #[test]
    fn turnstile_with_deletions_never_underestimates(
        ups in updates(),
        deletes in proptest::collection::vec((0usize..400, 0.0f64..1.0), 0..200),
        seed in any::<u64>(),
    ) {
        // Insert, then delete a fraction of some earlier updates: frequencies stay ≥ 0.
        let mut cm = CountMin::with_dimensions(16, 3, Model::NonNegativeTurnstile)
            .unwrap()
            .with_hasher(ItemHasher::xxh3(seed));
        let mut exact: HashMap<u16, i64> = HashMap::new();
        for &(x, c) in &ups {
            cm.update(&x.to_le_bytes(), c).unwrap();
            *exact.entry(x).or_default() += c;
        }
        for &(i, frac) in &deletes {
            if ups.is_empty() { break; }
            let x = ups[i % ups.len()].0;
            let have = exact[&x];
            let take = (have as f64 * frac) as i64;
            if take > 0 {
                cm.update(&x.to_le_bytes(), -take).unwrap();
                *exact.get_mut(&x).unwrap() -= take;
            }
        }
        for (&x, &truth) in &exact {
            prop_assert!(cm.point(&x.to_le_bytes()).value >= truth as f64);
        }
    }

    #[test]
    fn dyadic_ranges_and_points_never_underestimate(
        ups in proptest::collection::vec((0u64..1024, 1i64..20), 0..300),
        ranges in proptest::collection::vec((0u64..1024, 0u64..1024), 1..30),
        width in 2usize..30,
    ) {
        let mut s = DyadicCountMin::with_dimensions(width, 2, 10, Model::CashRegister).unwrap();
        let mut exact = vec![0i64; 1024];
        for &(x, c) in &ups {
            s.update(x, c).unwrap();
            exact[x as usize] += c;
        }
        for &(a, b) in &ranges {
            let (lo, hi) = (a.min(b), a.max(b));
            let truth: i64 = exact[lo as usize..=hi as usize].iter().sum();
            let e = s.range(lo, hi).unwrap();
            prop_assert!(e.value >= truth as f64);
            let cover = s.cover(lo, hi).unwrap();
            prop_assert!(cover.len() <= 20);
            let covered: u64 = cover.iter().map(|&(l, _)| 1u64 << l).sum();
            prop_assert_eq!(covered, hi - lo + 1);
        }
        for x in 0..1024u64 {
            prop_assert!(s.point(x).unwrap().value >= exact[x as usize] as f64);
        }
    }

    #[test]
    fn inner_products_never_underestimate(
        a in updates(),
        b in updates(),
        width in 1usize..40,
    ) {
        let mut sa = CountMin::with_dimensions(width, 3, Model::CashRegister).unwrap();
        let mut sb = CountMin::with_dimensions(width, 3, Model::CashRegister).unwrap();
        let mut ea: HashMap<u16, i64> = HashMap::new();
        let mut eb: HashMap<u16, i64> = HashMap::new();
        for &(x, c) in &a { sa.update(&x.to_le_bytes(), c).unwrap(); *ea.entry(x).or_default() += c; }
        for &(x, c) in &b { sb.update(&x.to_le_bytes(), c).unwrap(); *eb.entry(x).or_default() += c; }
        let truth: i64 = ea.iter().map(|(x, c)| c * eb.get(x).unwrap_or(&0)).sum();
        let e = sa.inner_product(&sb).unwrap();
        prop_assert!(e.value >= truth as f64);
        prop_assert_eq!(e.high, e.value);
    }
}
