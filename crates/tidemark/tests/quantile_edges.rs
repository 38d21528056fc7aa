//! Bad input is an error, never a panic: NaN, ±∞ (1e400 parses to ∞), quantiles outside
//! [0, 1], parameters out of their domain, empty sketches; negative values, zero and the
//! subnormals are counted; subtraction takes a part of the stream back out, exactly, and
//! refuses anything else.

mod quantile_data;

use quantile_data::*;
use tidemark::quantile::{DdSketch, Mapping, Part, QuantileError, MAX_COUNT};
use tidemark::{Estimate, MergeError, Method};

#[test]
fn nan_and_infinities_are_refused_by_value() {
    let mut s = DdSketch::default();
    let inf: f64 = "1e400".parse().unwrap();
    assert_eq!(inf, f64::INFINITY);
    for v in [f64::NAN, inf, f64::NEG_INFINITY, -inf] {
        match s.insert(v) {
            Err(QuantileError::NotFinite { value }) => {
                assert!(value.is_nan() == v.is_nan() && (v.is_nan() || value == v))
            }
            other => panic!("{v}: {other:?}"),
        }
        assert!(s.insert_n(v, 3).is_err());
    }
    assert!(s.is_empty(), "a refused value changes nothing");
    assert!(matches!(
        s.rank(f64::NAN),
        Err(QuantileError::NotFinite { .. })
    ));
    // The largest finite values are counted, with brackets that stay finite.
    s.insert(f64::MAX).unwrap();
    s.insert(-f64::MAX).unwrap();
    let top = s.quantile(1.0).unwrap().estimate;
    assert_eq!(top, Estimate::exact(f64::MAX));
    let mid = s.quantile(0.5).unwrap().estimate;
    assert!(mid.low.is_finite() && mid.contains(-f64::MAX));
}

#[test]
fn quantiles_outside_zero_one_and_empty_sketches_are_errors() {
    let mut s = DdSketch::default();
    assert_eq!(s.quantile(0.5), Err(QuantileError::Empty));
    assert_eq!(s.min(), Err(QuantileError::Empty));
    assert_eq!(s.max(), Err(QuantileError::Empty));
    assert_eq!(s.cdf(1.0), Err(QuantileError::Empty));
    assert_eq!(s.rank(1.0).unwrap(), Estimate::exact(0.0));
    assert_eq!(s.sum(), Estimate::exact(0.0));
    s.insert(1.0).unwrap();
    for q in [-0.1, 1.0000001, f64::NAN, f64::INFINITY, -0.0 - 1e-300] {
        assert!(
            matches!(s.quantile(q), Err(QuantileError::Quantile { .. })),
            "{q}"
        );
    }
    assert!(s.quantile(0.0).is_ok() && s.quantile(1.0).is_ok() && s.quantile(-0.0).is_ok());
}

#[test]
fn parameters_out_of_their_domain_name_the_parameter() {
    for a in [0.0, 1.0, -0.5, 2.0, f64::NAN] {
        assert_eq!(DdSketch::new(a).unwrap_err().name, "alpha", "{a}");
    }
    let m = Mapping::cubic(0.01).unwrap();
    for limit in [0u64, (1 << 24) + 1, 1 << 40, u64::MAX] {
        assert_eq!(
            DdSketch::with_mapping(m, limit).unwrap_err().name,
            "bin limit"
        );
    }
    assert!(DdSketch::with_mapping(m, 1).is_ok());
    assert!(DdSketch::with_mapping(m, 1 << 24).is_ok());
    assert_eq!(DdSketch::schema(9).unwrap_err().name, "schema");
    assert_eq!(DdSketch::schema(-5).unwrap_err().name, "schema");
}

#[test]
fn negatives_zero_and_subnormals_are_counted_in_their_places() {
    let mut s = DdSketch::new(0.01).unwrap();
    for v in [-5.0, -1e-300, 0.0, -0.0, 5e-324, 1e-310, 3.0] {
        s.insert(v).unwrap();
    }
    assert_eq!(s.count(), 7);
    // Ranks: -5, -1e-300, then four in the zero bin, then 3.
    let q = |q: f64| s.quantile(q).unwrap().estimate;
    assert_eq!(q(0.0), Estimate::exact(-5.0));
    let second = q(2.0 / 7.0);
    assert!((second.value + 1e-300).abs() <= 0.01 * 1e-300 && second.contains(-1e-300));
    for k in 3..=6 {
        let e = q(k as f64 / 7.0);
        assert_eq!(e.value, 0.0, "rank {k}");
        assert!(e.contains(0.0) && e.contains(1e-310) && e.contains(5e-324));
        assert!(e.high <= f64::MIN_POSITIVE && e.low >= -f64::MIN_POSITIVE);
    }
    assert_eq!(q(1.0), Estimate::exact(3.0));
    let r = s.rank(0.0).unwrap();
    assert!(r.low <= 5.0 && 5.0 <= r.high);
    assert!(s.sum().contains(-2.0));
}

#[test]
fn merging_different_mappings_names_the_parameter() {
    let mut a = DdSketch::new(0.01).unwrap();
    let b = DdSketch::new(0.02).unwrap();
    let c = DdSketch::schema(5).unwrap();
    a.insert(1.0).unwrap();
    match a.merge(&b) {
        Err(QuantileError::Incompatible(MergeError::Incompatible { field, .. })) => {
            assert_eq!(field, "alpha (f64 bits)")
        }
        other => panic!("{other:?}"),
    }
    match a.merge(&c) {
        Err(QuantileError::Incompatible(MergeError::Incompatible {
            field,
            ours,
            theirs,
        })) => {
            assert!(field.starts_with("index mapping"));
            assert_eq!((ours, theirs), (0, 1));
        }
        other => panic!("{other:?}"),
    }
    match c.clone().merge(&DdSketch::schema(4).unwrap()) {
        Err(QuantileError::Incompatible(MergeError::Incompatible { field, .. })) => {
            assert!(field.starts_with("schema"))
        }
        other => panic!("{other:?}"),
    }
    assert!(a.subtract(&b).is_err());
    assert_eq!(a.count(), 1, "nothing changed");
    // Bin limits may differ: ours is kept.
    let mut small = DdSketch::new(0.01).unwrap().with_bin_limit(10).unwrap();
    small
        .merge(&sketch_of(DdSketch::new(0.01).unwrap(), &[1.0, 1e6]))
        .unwrap();
    assert!(small.is_collapsed() && small.bin_limit() == 10);
}

#[test]
fn counts_stop_at_the_limit_instead_of_wrapping() {
    let mut s = DdSketch::default();
    s.insert_n(1.0, MAX_COUNT).unwrap();
    assert!(matches!(s.insert(2.0), Err(QuantileError::Overflow { .. })));
    assert!(matches!(
        s.insert_n(2.0, 1),
        Err(QuantileError::Overflow { .. })
    ));
    let copy = s.clone();
    assert!(matches!(
        s.merge(&copy),
        Err(QuantileError::Overflow { .. })
    ));
    assert_eq!(s.count(), MAX_COUNT);
    assert_eq!(s.quantile(0.5).unwrap().estimate.value, 1.0);
}

#[test]
fn subtracting_a_merged_part_gives_back_the_rest() {
    let old = lognormal(31, 20_000, 0.0, 1.0);
    let new = lognormal(32, 20_000, 0.5, 1.0);
    let a = sketch_of(DdSketch::default(), &old);
    let b = sketch_of(DdSketch::default(), &new);
    let mut window = a.clone();
    window.merge(&b).unwrap();
    window.subtract(&a).unwrap();
    assert_eq!(window.count(), b.count());
    assert_eq!(window.bins(), b.bins());
    let sorted = sorted(&new);
    for q in QS.into_iter().chain([0.01, 0.1, 0.25]) {
        let w = window.quantile(q).unwrap();
        let truth = exact(&sorted, q);
        assert_eq!(
            w.estimate.value,
            b.quantile(q).unwrap().estimate.value,
            "q = {q}"
        );
        assert_within(&w, truth, window.alpha(), &format!("q = {q}"));
    }
    // The minimum and maximum became bounds wherever `a` could have held them, and they
    // say so; each bracket holds the true extreme.
    for (e, truth) in [
        (window.min().unwrap(), sorted[0]),
        (window.max().unwrap(), sorted[sorted.len() - 1]),
    ] {
        assert!(e.contains(truth), "{e} misses {truth}");
    }
    let exact_sum: f64 = new.iter().sum();
    assert!((window.sum().value - exact_sum).abs() <= 1e-9 * exact_sum);
    // Subtracting everything leaves an empty sketch equal to a new one.
    window.subtract(&b).unwrap();
    assert!(window.is_empty());
    assert_eq!(window, DdSketch::default());
}

#[test]
fn extremes_stay_exact_when_the_part_could_not_have_held_them() {
    let mut a = sketch_of(DdSketch::default(), &[1.0, 5.0, 100.0]);
    let b = sketch_of(DdSketch::default(), &[5.0]);
    a.subtract(&b).unwrap();
    assert_eq!(a.min().unwrap(), Estimate::exact(1.0));
    assert_eq!(a.max().unwrap(), Estimate::exact(100.0));
    let c = sketch_of(DdSketch::default(), &[100.0]);
    a.subtract(&c).unwrap();
    let max = a.max().unwrap();
    assert_eq!(max.method, Method::QuantileBin);
    assert!(max.contains(1.0) && max.high < 1.03, "{max}");
}

#[test]
fn subtracting_what_is_not_a_part_is_refused_and_changes_nothing() {
    let a = sketch_of(DdSketch::default(), &[1.0, 2.0, 3.0]);
    let before = a.clone();
    let mut x = a.clone();
    let other = sketch_of(DdSketch::default(), &[2.0, 2.0]);
    match x.subtract(&other) {
        Err(QuantileError::NotContained {
            part: Part::Positive,
            ours: 1,
            theirs: 2,
            ..
        }) => {}
        e => panic!("{e:?}"),
    }
    assert_eq!(x, before);
    let more = sketch_of(DdSketch::default(), &[1.0, 2.0, 3.0, 4.0]);
    assert!(matches!(
        x.subtract(&more),
        Err(QuantileError::NotContained {
            part: Part::Count,
            ..
        })
    ));
    let zeros = sketch_of(DdSketch::default(), &[0.0]);
    assert!(matches!(
        x.subtract(&zeros),
        Err(QuantileError::NotContained {
            part: Part::Zero,
            ..
        })
    ));
    let negative = sketch_of(DdSketch::default(), &[-1.0]);
    assert!(matches!(
        x.subtract(&negative),
        Err(QuantileError::NotContained {
            part: Part::Negative,
            ..
        })
    ));
    // A part that collapsed further than we did.
    let m = Mapping::cubic(0.01).unwrap();
    let collapsed = sketch_of(DdSketch::with_mapping(m, 2).unwrap(), &[1.0, 2.0]);
    let mut wide = sketch_of(DdSketch::default(), &[1.0, 2.0, 3.0]);
    assert!(matches!(
        wide.subtract(&collapsed),
        Err(QuantileError::Collapsed {
            part: Part::Positive,
            ours: None,
            ..
        })
    ));
    assert_eq!(x, before);
}
