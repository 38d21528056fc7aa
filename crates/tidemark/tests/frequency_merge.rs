//! Merge and subtract: the sketch is linear, so merging equals sketching the concatenated
//! stream and subtracting equals sketching the difference, bit for bit; sketches of
//! different hashers, seeds, widths, depths, models or update rules refuse.

use tidemark::frequency::{CountMin, DyadicCountMin, FrequencyError, Model};
use tidemark::{ItemHasher, MergeError};

fn feed(cm: &mut CountMin, range: std::ops::Range<u32>) {
    for i in range {
        cm.update(format!("item{}", i % 97).as_bytes(), (i % 3) as i64 + 1)
            .unwrap();
    }
}

#[test]
fn merge_equals_the_concatenated_stream() {
    for model in [Model::CashRegister, Model::GeneralTurnstile] {
        let empty = CountMin::with_dimensions(50, 4, model).unwrap();
        let (mut a, mut b, mut both) = (empty.clone(), empty.clone(), empty.clone());
        feed(&mut a, 0..500);
        feed(&mut b, 500..900);
        feed(&mut both, 0..900);
        a.merge(&b).unwrap();
        assert_eq!(a, both);
    }
}

#[test]
fn subtract_is_the_window_total_minus_expired() {
    let empty = CountMin::with_dimensions(50, 4, Model::CashRegister).unwrap();
    let (mut total, mut expired, mut live) = (empty.clone(), empty.clone(), empty.clone());
    feed(&mut total, 0..900);
    feed(&mut expired, 0..300);
    feed(&mut live, 300..900);
    total.subtract(&expired).unwrap();
    assert_eq!(total.counters(), live.counters());
    assert_eq!(total.total(), live.total());
    // Subtracting what was never added is refused in a non-negative model, and the refused
    // subtract leaves the sketch as it was: `everything` holds more than `live` in some
    // counter (it has the expired part too), so `live − everything` goes below zero there.
    let mut everything = empty.clone();
    feed(&mut everything, 0..900);
    let before = live.clone();
    let err = live.subtract(&everything);
    assert!(
        matches!(err, Err(FrequencyError::BelowZero { .. })),
        "{err:?}"
    );
    assert_eq!(live, before, "a refused subtract changed the sketch");
    assert_eq!(live.to_bytes(), before.to_bytes());
}

#[test]
fn incompatible_sketches_refuse() {
    let base = CountMin::with_dimensions(50, 4, Model::CashRegister).unwrap();
    let cases: Vec<(CountMin, &str)> = vec![
        (
            CountMin::with_dimensions(51, 4, Model::CashRegister).unwrap(),
            "width",
        ),
        (
            CountMin::with_dimensions(50, 5, Model::CashRegister).unwrap(),
            "depth",
        ),
        (
            CountMin::with_dimensions(50, 4, Model::NonNegativeTurnstile).unwrap(),
            "model",
        ),
        (base.clone().conservative().unwrap(), "conservative update"),
    ];
    for (other, field) in cases {
        let mut a = base.clone();
        match a.merge(&other) {
            Err(FrequencyError::Incompatible(MergeError::Incompatible { field: f, .. })) => {
                assert_eq!(f, field)
            }
            r => panic!("{field}: {r:?}"),
        }
    }
    let mut a = base.clone();
    let other = base.clone().with_hasher(ItemHasher::xxh3(1));
    assert!(matches!(
        a.merge(&other),
        Err(FrequencyError::Incompatible(
            MergeError::HashMismatch { .. }
        ))
    ));
    assert!(a.inner_product(&other).is_err());
    assert_ne!(a.row_hashes(), other.row_hashes());
    // Redis-mode hashing with the same seed is still another hash.
    let redis = base.clone().with_hasher(ItemHasher::redis());
    assert!(a.merge(&redis).is_err());
}

#[test]
fn models_enforce_their_rules() {
    let mut cash = CountMin::with_dimensions(10, 2, Model::CashRegister).unwrap();
    assert_eq!(
        cash.update(b"a", -1),
        Err(FrequencyError::NegativeUpdate { count: -1 })
    );
    let mut nn = CountMin::with_dimensions(10, 2, Model::NonNegativeTurnstile).unwrap();
    nn.update(b"a", 3).unwrap();
    nn.update(b"a", -3).unwrap();
    assert!(matches!(
        nn.update(b"a", -1),
        Err(FrequencyError::BelowZero { .. })
    ));
    assert_eq!(nn.total(), 0);
    let mut general = CountMin::with_dimensions(10, 3, Model::GeneralTurnstile).unwrap();
    general.update(b"a", -5).unwrap();
    assert_eq!(general.point(b"a").value, -5.0);
    assert!(general.inner_product(&general).is_err());
    assert!(CountMin::with_dimensions(10, 2, Model::GeneralTurnstile)
        .unwrap()
        .conservative()
        .is_err());
    let mut big = CountMin::with_dimensions(10, 2, Model::CashRegister).unwrap();
    big.update(b"a", i64::MAX).unwrap();
    assert!(matches!(
        big.update(b"a", 1),
        Err(FrequencyError::Overflow { .. })
    ));
    assert!(matches!(
        general.update(b"a", i64::MIN),
        Err(FrequencyError::Overflow { .. })
    ));
}

#[test]
fn conservative_update_never_exceeds_the_plain_sketch() {
    let plain = CountMin::with_dimensions(20, 3, Model::CashRegister).unwrap();
    let mut cu = plain.clone().conservative().unwrap();
    let mut plain = plain;
    for i in 0..2_000u32 {
        let item = format!("x{}", (i * i) % 301);
        plain.update(item.as_bytes(), 1).unwrap();
        cu.update(item.as_bytes(), 1).unwrap();
    }
    let mut tighter = 0;
    for i in 0..301u32 {
        let item = format!("x{i}");
        let (p, c) = (plain.point(item.as_bytes()), cu.point(item.as_bytes()));
        assert!(c.value <= p.value);
        tighter += (c.value < p.value) as u32;
    }
    assert!(tighter > 0, "conservative update changed nothing");
    assert!(cu.subtract(&cu.clone()).is_err());
}

#[test]
fn dyadic_merge_and_subtract() {
    let empty = DyadicCountMin::with_dimensions(16, 2, 12, Model::NonNegativeTurnstile).unwrap();
    let (mut a, mut b, mut both) = (empty.clone(), empty.clone(), empty.clone());
    for x in 0..3_000u64 {
        let item = (x * 7) % 4096;
        if x < 1_000 {
            a.update(item, 1).unwrap();
        } else {
            b.update(item, 1).unwrap();
        }
        both.update(item, 1).unwrap();
    }
    let a0 = a.clone();
    a.merge(&b).unwrap();
    assert_eq!(a, both);
    a.subtract(&b).unwrap();
    // Counters are back to a0's (the mass, a bound on Σ|c| used against overflow, is not).
    assert_eq!(a.total(), a0.total());
    for x in 0..4096u64 {
        assert_eq!(a.point(x).unwrap(), a0.point(x).unwrap());
    }
    let before = a.clone();
    assert!(a.subtract(&both).is_err());
    assert_eq!(a, before, "a refused subtract changed the dyadic sketch");
    let other = DyadicCountMin::with_dimensions(16, 2, 11, Model::NonNegativeTurnstile).unwrap();
    assert!(a.merge(&other).is_err());
    assert!(matches!(
        a.update(4096, 1),
        Err(FrequencyError::OutsideUniverse {
            item: 4096,
            bits: 12
        })
    ));
}

#[test]
fn oversized_dyadic_sketches_are_refused_before_allocating() {
    // 60 layers of 2^26 × 2 counters would be 60 GiB.
    let err = DyadicCountMin::with_dimensions(1 << 26, 2, 60, Model::CashRegister).unwrap_err();
    assert_eq!(err.name, "width");
    // 36 sketched layers of 2^24 counters (2^29.2) are refused.
    assert!(DyadicCountMin::with_dimensions(1 << 22, 4, 60, Model::CashRegister).is_err());
    assert!(DyadicCountMin::with_dimensions(1 << 10, 4, 60, Model::CashRegister).is_ok());
}
