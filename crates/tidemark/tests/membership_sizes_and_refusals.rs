//! The resizable filters' deterministic figures, asserted against the design's target figures.

use tidemark::membership::{LengtheningFilter, QuotientFilter, StackedFilter};

fn key(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

/// Inserts keys 0.. until the filter refuses; returns the 1-based number of the refused key.
fn refused_key(mut insert: impl FnMut(&[u8]) -> bool, limit: u64) -> Option<u64> {
    (0..limit).find(|&i| !insert(&key(i))).map(|i| i + 1)
}

#[test]
fn forecast_2000_at_one_percent_gives_18_bit_fingerprints_and_4096_slots() {
    let f = QuotientFilter::new(2_000, 0.01).unwrap();
    assert_eq!(f.fingerprint_bits(), 18);
    assert_eq!(f.quotient_bits(), 12);
    assert_eq!(f.slots(), 4_096);
    assert_eq!(f.life(), 64);
    assert_eq!(f.remaining_doublings(), 5);
    // 4,096 slots × (6 remainder + 3 metadata) bits.
    assert_eq!(f.bits(), 4_096 * 9);
}

#[test]
fn the_table_with_no_reserve_refuses_its_98304th_key() {
    let mut f = QuotientFilter::new(2_000, 0.01).unwrap();
    let mut last_err = None;
    let refused = refused_key(
        |k| match f.insert(k) {
            Ok(()) => true,
            Err(e) => {
                last_err = Some(e);
                false
            }
        },
        200_000,
    );
    assert_eq!(refused, Some(98_304));
    let err = last_err.unwrap();
    assert_eq!(err.keys, 98_303);
    assert_eq!((err.fingerprint_bits, err.quotient_bits), (18, 17));
    assert_eq!(f.max_keys(), 98_303);
    // Still a filter: every key it took is found, and a refused insert changed nothing.
    assert_eq!(f.len(), 98_303);
    assert!((0..98_303).all(|i| f.contains(&key(i))));
    let msg = err.to_string();
    assert!(msg.contains("98303 keys") && msg.contains("reserve") && msg.contains("rebuild"));
}

#[test]
fn reserves_7_and_5_reach_256_times_the_forecast_in_the_same_bits() {
    for (reserve, bits) in [(7, 8_388_608u64), (5, 6_291_456)] {
        let mut f = QuotientFilter::with_reserve(2_000, 0.01, reserve).unwrap();
        for i in 0..512_000 {
            f.insert(&key(i)).unwrap();
        }
        assert_eq!(f.slots(), 1 << 20, "reserve {reserve}");
        assert_eq!(f.bits(), bits, "reserve {reserve}");
        assert_eq!(f.bits(), f.slots() * (f.remainder_bits() as u64 + 3));
    }
}

#[test]
fn two_bit_lengthening_at_64000_keys_holds_2228224_bits() {
    let mut t = LengtheningFilter::new(2_000, 0.01, 2).unwrap();
    for i in 0..64_000 {
        t.insert(&key(i)).unwrap();
    }
    // Five doublings: 131,072 slots of 11 remainder + 3 metadata + 3 generation bits.
    assert_eq!(t.slots(), 131_072);
    assert_eq!(t.slot_bits(), 17);
    assert_eq!(t.bits(), 2_228_224);
}

#[test]
fn lengthening_dies_on_the_same_key_as_no_reserve() {
    for step in [1, 2] {
        let mut t = LengtheningFilter::new(2_000, 0.01, step).unwrap();
        let refused = refused_key(|k| t.insert(k).is_ok(), 200_000);
        assert_eq!(refused, Some(98_304), "step {step}");
        assert!((0..98_303).all(|i| t.contains(&key(i))));
    }
}

#[test]
fn the_stack_passes_where_every_single_table_dies() {
    let mut s = StackedFilter::new(2_000, 0.01).unwrap();
    for i in 0..200_000 {
        s.insert(&key(i));
    }
    assert!((0..200_000).all(|i| s.contains(&key(i))));
    // Layers of 2,000 · 2^i keys: 2,000 + … + 128,000 = 254,000 ≥ 200,000 > 126,000.
    assert_eq!(s.layers(), 7);
    // The rate stays under the geometric bound 2ε.
    assert!(s.fpr() < 0.02);
}
