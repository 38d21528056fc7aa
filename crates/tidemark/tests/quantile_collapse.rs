//! The bin limit: a store that would pass it collapses its lowest bins into one, and every
//! answer that falls in that bin says so and widens its bracket to [the minimum, the bin's
//! upper bound] — which still holds the truth. Answers above it keep the α bound.

mod quantile_data;

use quantile_data::*;
use tidemark::quantile::{DdSketch, Mapping};
use tidemark::{Bracket, Method};

#[test]
fn collapsed_answers_say_so_and_their_brackets_still_hold_the_truth() {
    // Lognormal σ = 2 over 10^5 values spans about 17 e-folds: 850 bins at α = 1%; a limit
    // of 400 keeps the top eight e-folds (about the top third of the values).
    let values = lognormal(21, 100_000, 0.0, 2.0);
    let sorted = sorted(&values);
    let s = sketch_of(
        DdSketch::with_mapping(Mapping::cubic(0.01).unwrap(), 400).unwrap(),
        &values,
    );
    assert!(s.is_collapsed());
    assert!(s.bins() <= 400);
    let (mut collapsed, mut kept) = (0, 0);
    for k in 1..1_000 {
        let q = k as f64 / 1_000.0;
        let a = s.quantile(q).unwrap();
        let truth = exact(&sorted, q);
        let e = a.estimate;
        assert!(
            e.contains(truth),
            "q = {q}: [{}, {}] misses {truth}",
            e.low,
            e.high
        );
        assert_eq!(e.bracket, Bracket::Guaranteed);
        match e.method {
            Method::QuantileCollapsed => {
                collapsed += 1;
                // [the exact minimum, the collapsed bin's upper bound]
                assert_eq!(e.low, sorted[0]);
            }
            Method::QuantileBin => {
                kept += 1;
                assert_within(&a, truth, s.alpha(), &format!("q = {q}"));
            }
            m => panic!("unexpected method {m}"),
        }
    }
    assert!(
        collapsed > 400 && kept > 200,
        "{collapsed} collapsed, {kept} kept"
    );
    // Ranks and CDFs in the collapsed bin say so too.
    let r = s.rank(exact(&sorted, 0.5)).unwrap();
    assert_eq!(r.method, Method::QuantileCollapsed);
    assert!(r.contains(nearest(&sorted, exact(&sorted, 0.5))));
    // The extremes stay exact.
    assert_eq!(s.min().unwrap().value, sorted[0]);
    assert_eq!(s.max().unwrap().value, sorted[sorted.len() - 1]);
}

fn nearest(sorted: &[f64], v: f64) -> f64 {
    sorted.partition_point(|&x| x <= v) as f64
}

#[test]
fn the_negative_store_collapses_its_most_negative_bins() {
    let values: Vec<f64> = lognormal(22, 50_000, 0.0, 2.0).iter().map(|v| -v).collect();
    let sorted = sorted(&values);
    let s = sketch_of(
        DdSketch::with_mapping(Mapping::cubic(0.01).unwrap(), 100).unwrap(),
        &values,
    );
    assert!(s.is_collapsed());
    // The lowest values (largest magnitudes) lost their bins; the values near zero kept them.
    let low = s.quantile(0.01).unwrap();
    assert_eq!(low.estimate.method, Method::QuantileCollapsed);
    assert!(low.estimate.contains(exact(&sorted, 0.01)));
    assert_eq!(low.estimate.low, sorted[0]);
    let high = s.quantile(0.999).unwrap();
    assert_eq!(high.estimate.method, Method::QuantileBin);
    assert_within(&high, exact(&sorted, 0.999), s.alpha(), "q = 0.999");
}

#[test]
fn merging_past_the_limit_collapses_and_keeps_the_brackets() {
    let low = lognormal(23, 10_000, 0.0, 0.3);
    let high = lognormal(24, 10_000, 12.0, 0.3);
    let limit = 300;
    let mapping = Mapping::cubic(0.01).unwrap();
    let a = sketch_of(DdSketch::with_mapping(mapping, limit).unwrap(), &low);
    let b = sketch_of(DdSketch::with_mapping(mapping, limit).unwrap(), &high);
    assert!(!a.is_collapsed() && !b.is_collapsed());
    let mut m = a.clone();
    m.merge(&b).unwrap();
    assert!(m.is_collapsed());
    // Merging is order-independent even when it collapses.
    let mut m2 = b.clone();
    m2.merge(&a).unwrap();
    let all: Vec<f64> = low.iter().chain(&high).copied().collect();
    let direct = sketch_of(DdSketch::with_mapping(mapping, limit).unwrap(), &all);
    let sorted = sorted(&all);
    for k in 1..100 {
        let q = k as f64 / 100.0;
        let (x, y, z) = (
            m.quantile(q).unwrap(),
            m2.quantile(q).unwrap(),
            direct.quantile(q).unwrap(),
        );
        assert_eq!(x, y);
        assert_eq!(x, z);
        assert!(x.estimate.contains(exact(&sorted, q)));
    }
}
