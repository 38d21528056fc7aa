//! DDSketch against the exact model (the sorted values): every quantile of a sketch that did
//! not collapse is within α of the exact nearest-rank quantile, and its guaranteed bracket
//! holds it. The bound is deterministic, so it is asserted for every answer (100%), over
//! 10^6 values of three distributions, directly and after merges of up to 1,000 parts in a
//! random order (fixed seeds).

mod quantile_data;

use quantile_data::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::quantile::{nearest_rank, DdSketch};
use tidemark::Method;

const N: usize = 1_000_000;

fn sketches() -> Vec<DdSketch> {
    vec![
        DdSketch::new(0.01).unwrap(),
        // 0.2% a bin: six decades need more than the default 4,096 bins.
        DdSketch::new(0.001)
            .unwrap()
            .with_bin_limit(1 << 16)
            .unwrap(),
        DdSketch::schema(5).unwrap(),
        DdSketch::schema(-1).unwrap(),
    ]
}

/// The named quantiles and a grid of 999 more.
fn quantiles() -> impl Iterator<Item = f64> {
    QS.into_iter().chain((1..1_000).map(|k| k as f64 / 1_000.0))
}

fn assert_all_quantiles(s: &DdSketch, sorted: &[f64], what: &str) {
    assert!(!s.is_collapsed(), "{what}: collapsed");
    assert_eq!(s.count(), sorted.len() as u64);
    for q in quantiles() {
        let a = s.quantile(q).unwrap();
        assert_eq!(a.rank, nearest_rank(q, sorted.len() as u64));
        assert_within(&a, exact(sorted, q), s.alpha(), &format!("{what} q = {q}"));
    }
    assert_eq!(s.min().unwrap().value, sorted[0]);
    assert_eq!(s.max().unwrap().value, sorted[sorted.len() - 1]);
}

#[test]
fn every_quantile_is_within_alpha_of_the_exact_one() {
    for (name, values) in distributions(N) {
        let sorted = sorted(&values);
        for empty in sketches() {
            let what = format!("{name}, {}", empty.mapping());
            let s = sketch_of(empty, &values);
            assert_all_quantiles(&s, &sorted, &what);
        }
    }
}

#[test]
fn negative_and_zero_values_mirror_the_guarantee() {
    // The bimodal mix, half of it negated, and some zeros and subnormals.
    let mut rng = Pcg64::seed_from_u64(11);
    let mut values = bimodal(4, 200_000);
    for v in &mut values {
        match rng.random_range(0..10) {
            0..=4 => *v = -*v,
            5 => *v = 0.0,
            6 => *v = 1e-310, // below 2^-1022: counted as zero
            _ => {}
        }
    }
    let sorted = sorted(&values);
    for empty in sketches() {
        let s = sketch_of(empty, &values);
        for q in quantiles() {
            let a = s.quantile(q).unwrap();
            let truth = exact(&sorted, q);
            let e = a.estimate;
            assert!(
                e.contains(truth),
                "q = {q}: [{}, {}] misses {truth}",
                e.low,
                e.high
            );
            if truth.abs() >= f64::MIN_POSITIVE {
                assert_within(&a, truth, s.alpha(), &format!("{} q = {q}", s.mapping()));
            } else {
                assert_eq!(e.value, 0.0); // the zero bin
            }
        }
    }
}

#[test]
fn merges_of_up_to_a_thousand_parts_in_random_order_keep_the_guarantee() {
    for (seed, (name, values)) in distributions(N).into_iter().enumerate() {
        let sorted = sorted(&values);
        let mut rng = Pcg64::seed_from_u64(100 + seed as u64);
        for parts in [2usize, 37, 1_000] {
            let empty = DdSketch::new(0.01).unwrap();
            let mut sketches = vec![empty.clone(); parts];
            for &v in &values {
                sketches[rng.random_range(0..parts)].insert(v).unwrap();
            }
            sketches.shuffle(&mut rng);
            // Half folded one by one, half as a tree: any shape gives the same bins.
            let (left, right) = sketches.split_at(parts / 2);
            let mut a = empty.clone();
            for s in left {
                a.merge(s).unwrap();
            }
            let mut level: Vec<DdSketch> = right.to_vec();
            while level.len() > 1 {
                level = level
                    .chunks(2)
                    .map(|pair| {
                        let mut m = pair[0].clone();
                        if let Some(b) = pair.get(1) {
                            m.merge(b).unwrap();
                        }
                        m
                    })
                    .collect();
            }
            a.merge(&level[0]).unwrap();
            let what = format!("{name}, {parts} parts");
            assert_all_quantiles(&a, &sorted, &what);
            // The merge is the sketch of the whole stream: the same answers, bit for bit.
            let direct = sketch_of(empty, &values);
            for q in quantiles() {
                assert_eq!(
                    a.quantile(q).unwrap(),
                    direct.quantile(q).unwrap(),
                    "{what}"
                );
            }
            assert_eq!(a.bins(), direct.bins());
        }
    }
}

#[test]
fn rank_and_cdf_brackets_hold_the_exact_counts() {
    let values = lognormal(7, 100_000, 1.0, 1.5);
    let sorted = sorted(&values);
    let s = sketch_of(DdSketch::new(0.01).unwrap(), &values);
    let n = sorted.len() as f64;
    let mut rng = Pcg64::seed_from_u64(8);
    let probes = (0..2_000)
        .map(|_| sorted[rng.random_range(0..sorted.len())] * rng.random_range(0.98..1.02))
        .chain([
            0.0,
            -1.0,
            sorted[0],
            sorted[sorted.len() - 1],
            f64::INFINITY,
            f64::NEG_INFINITY,
        ]);
    for v in probes {
        let truth = sorted.partition_point(|&x| x <= v) as f64;
        let r = s.rank(v).unwrap();
        assert!(
            r.contains(truth),
            "rank({v}) = [{}, {}] misses {truth}",
            r.low,
            r.high
        );
        let c = s.cdf(v).unwrap();
        assert!(c.low <= truth / n && truth / n <= c.high);
        if v < sorted[0] || v >= sorted[sorted.len() - 1] {
            assert_eq!(r.method, Method::Exact);
            assert_eq!(r.value, truth);
        } else {
            // The bracket is one bin's count: narrow.
            assert!(r.width() <= 0.02 * n, "{v}: width {}", r.width());
        }
    }
}

#[test]
fn sum_min_max_and_count_answer_with_their_brackets() {
    let values = pareto(9, 100_000, 1.1);
    let s = sketch_of(DdSketch::new(0.01).unwrap(), &values);
    let exact_sum: f64 = values.iter().sum();
    let sum = s.sum();
    assert_eq!(sum.method, Method::QuantileSum);
    assert!(sum.contains(exact_sum), "{sum} misses {exact_sum}");
    assert!((sum.value - exact_sum).abs() <= 1e-9 * exact_sum);
    assert!(sum.width() <= 2.0 * 0.0101 * exact_sum, "{sum}");
    assert_eq!(s.count(), 100_000);
    let sorted = sorted(&values);
    assert_eq!(s.min().unwrap(), tidemark::Estimate::exact(sorted[0]));
    assert_eq!(
        s.max().unwrap(),
        tidemark::Estimate::exact(sorted[sorted.len() - 1])
    );
    // Ranks 1 and n are the exact extremes.
    assert_eq!(s.quantile(0.0).unwrap().estimate.value, sorted[0]);
    assert_eq!(
        s.quantile(1.0).unwrap().estimate.value,
        sorted[sorted.len() - 1]
    );
}
