//! Decoding Count-Min bytes: round trips are identity, hand-built encodings written from the
//! FORMAT.md layout decode to what they say, and no bytes — random, truncated, mutated —
//! make the decoder panic or accept a broken invariant.

use proptest::prelude::*;
use tidemark::codec::{self, Family, Writer};
use tidemark::frequency::{AnyCountMin, CountMin, DyadicCountMin, ItemCounts, Model, RowFamily};
use tidemark::{DecodeError, ItemHasher};

fn sample_plain(model: Model) -> CountMin {
    let mut cm = CountMin::with_dimensions(17, 3, model)
        .unwrap()
        .with_hasher(ItemHasher::xxh3(5));
    for i in 0..200u32 {
        cm.update(format!("k{}", i % 23).as_bytes(), (i % 7) as i64 + 1)
            .unwrap();
    }
    if model == Model::GeneralTurnstile {
        cm.update(b"neg", -1_000).unwrap();
    }
    cm
}

fn sample_dyadic() -> DyadicCountMin {
    let mut s = DyadicCountMin::with_dimensions(8, 2, 8, Model::NonNegativeTurnstile).unwrap();
    for x in 0..256u64 {
        s.update(x, (x % 5) as i64).unwrap();
    }
    s
}

#[test]
fn round_trips_are_identity() {
    for model in [
        Model::CashRegister,
        Model::NonNegativeTurnstile,
        Model::GeneralTurnstile,
    ] {
        let cm = sample_plain(model);
        assert_eq!(CountMin::from_bytes(&cm.to_bytes()).unwrap(), cm);
    }
    let mut cu = CountMin::with_dimensions(9, 2, Model::CashRegister)
        .unwrap()
        .conservative()
        .unwrap();
    for i in 0..100u32 {
        cu.update(&i.to_le_bytes(), 3).unwrap();
    }
    let back = CountMin::from_bytes(&cu.to_bytes()).unwrap();
    assert!(back.is_conservative());
    assert_eq!(back, cu);
    let s = sample_dyadic();
    assert!(s.exact_layers() > 0 && s.exact_layers() < 8);
    assert_eq!(DyadicCountMin::from_bytes(&s.to_bytes()).unwrap(), s);
    assert!(matches!(
        AnyCountMin::from_bytes(&s.to_bytes()).unwrap(),
        AnyCountMin::Dyadic(_)
    ));
    // Each kind refuses to be read as the other.
    assert!(CountMin::from_bytes(&s.to_bytes()).is_err());
    assert!(DyadicCountMin::from_bytes(&cu.to_bytes()).is_err());
}

#[test]
fn a_hand_built_plain_sketch_decodes_as_written() {
    // Width 1: every item lands in column 0, so each row's one counter is the total.
    let mut payload = Writer::new();
    payload.i64(42).u64(42).i64(42).i64(42);
    let sketch = |family: u8| {
        let mut params = Writer::new();
        params.u8(0).u8(family).u8(0).u32(1).u8(2); // plain, rows, cash register, w 1, d 2
        let bytes = codec::encode(
            Family::CountMin,
            0,
            ItemHasher::default(),
            params.bytes(),
            payload.bytes(),
        );
        (CountMin::from_bytes(&bytes), bytes)
    };
    for (byte, family) in [(2, RowFamily::Pairwise), (3, RowFamily::MultiplyShift)] {
        let cm = sketch(byte).0.unwrap();
        assert_eq!((cm.width(), cm.depth(), cm.total()), (1, 2, 42));
        assert_eq!(cm.point(b"anything").value, 42.0);
        assert_eq!(cm.row_family(), family);
        assert_eq!(cm.emptied().row_family(), family);
    }
    // The same sketch built by updates encodes to the same bytes: new sketches take the
    // multiply-shift rows.
    let (_, bytes) = sketch(3);
    let mut built = CountMin::with_dimensions(1, 2, Model::CashRegister).unwrap();
    built.update(b"x", 40).unwrap();
    built.update(b"y", 2).unwrap();
    assert_eq!(built.to_bytes(), bytes);
    // Sketches of the two families do not merge; no other family byte is read.
    let mut old = sketch(2).0.unwrap();
    assert!(old.merge(&built).is_err());
    assert!(built.merge(&sketch(2).0.unwrap()).is_err());
    // A join says why: the family, not the width.
    let join = built.inner_product(&old).unwrap_err().to_string();
    assert!(join.contains("row-hash family"), "{join}");
    for byte in [0u8, 1, 4, 255] {
        assert!(
            matches!(
                sketch(byte).0,
                Err(DecodeError::Invalid {
                    field: "row-hash family",
                    ..
                })
            ),
            "family byte {byte}"
        );
    }
    // A dyadic sketch's layers key by integers: only the pairwise rows are read there.
    let mut dyadic = sample_dyadic().to_bytes();
    assert_eq!(dyadic[codec::HEADER_LEN + 1], 2);
    dyadic[codec::HEADER_LEN + 1] = 3;
    let end = dyadic.len() - codec::CHECKSUM_LEN;
    let sum = codec::checksum_of(&dyadic[..end]);
    dyadic[end..].copy_from_slice(&sum.to_le_bytes());
    assert!(matches!(
        DyadicCountMin::from_bytes(&dyadic),
        Err(DecodeError::Invalid {
            field: "row-hash family",
            ..
        })
    ));
    let mut params = Writer::new();
    params.u8(0).u8(2).u8(0).u32(1).u8(2);
    // A row that does not sum to the total is refused.
    let mut payload = Writer::new();
    payload.i64(42).u64(42).i64(42).i64(41);
    let bad = codec::encode(
        Family::CountMin,
        0,
        ItemHasher::default(),
        params.bytes(),
        payload.bytes(),
    );
    assert!(matches!(
        CountMin::from_bytes(&bad),
        Err(DecodeError::Invalid {
            field: "counters",
            ..
        })
    ));
}

#[test]
fn a_hand_built_dyadic_sketch_decodes_as_written() {
    // bits 1, w 1, d 2: layer 0 has 2 ≤ 1·2 prefixes, so it is exact: counts of items 0, 1.
    let mut params = Writer::new();
    params.u8(1).u8(2).u8(1).u32(1).u8(2).u8(1); // dyadic, family 2, turnstile, w 1, d 2, bits 1
    let mut payload = Writer::new();
    payload.i64(10).u64(14).i64(3).i64(7);
    let bytes = codec::encode(
        Family::CountMin,
        0,
        ItemHasher::default(),
        params.bytes(),
        payload.bytes(),
    );
    let s = DyadicCountMin::from_bytes(&bytes).unwrap();
    assert_eq!(s.point(0).unwrap().value, 3.0);
    assert_eq!(s.point(1).unwrap().value, 7.0);
    assert_eq!(s.range(0, 1).unwrap().value, 10.0);
    assert_eq!(s.quantile(0.5).unwrap().0, 1);
}

#[test]
fn each_field_check_fires() {
    let good = sample_plain(Model::CashRegister).to_bytes();
    let params_at = codec::HEADER_LEN;
    // Re-encode with one parameter byte changed, so the checksum is right and the field
    // check itself must catch it.
    let env = codec::decode(&good).unwrap();
    let cases: [(usize, u8, &str); 6] = [
        (0, 7, "kind"),
        (1, 9, "row-hash family"),
        (1, 1, "row-hash family"), // Carter–Wegman, an earlier build's family
        (2, 3, "model"),
        (7, 0, "depth"),
        (7, 65, "depth"),
    ];
    for (at, value, field) in cases {
        let mut params = env.params.to_vec();
        params[at] = value;
        let bytes = codec::encode(Family::CountMin, 0, env.hasher, &params, env.payload);
        match CountMin::from_bytes(&bytes) {
            Err(DecodeError::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("byte {at} = {value}: {other:?}"),
        }
    }
    let _ = params_at;
    // A negative counter in a cash-register sketch.
    let mut payload = env.payload.to_vec();
    payload[16..24].copy_from_slice(&(-1i64).to_le_bytes());
    let bytes = codec::encode(Family::CountMin, 0, env.hasher, env.params, &payload);
    assert!(matches!(
        CountMin::from_bytes(&bytes),
        Err(DecodeError::Invalid {
            field: "counter",
            ..
        })
    ));
    // Conservative flag on a turnstile sketch.
    let t = sample_plain(Model::NonNegativeTurnstile).to_bytes();
    let env = codec::decode(&t).unwrap();
    let bytes = codec::encode(Family::CountMin, 1, env.hasher, env.params, env.payload);
    assert!(CountMin::from_bytes(&bytes).is_err());
}

#[test]
fn every_truncation_and_bit_flip_is_rejected() {
    let good = sample_dyadic().to_bytes();
    for n in 0..good.len() {
        assert!(AnyCountMin::from_bytes(&good[..n]).is_err());
    }
    for i in (0..good.len()).step_by(7) {
        let mut b = good.clone();
        b[i] ^= 0x10;
        assert!(AnyCountMin::from_bytes(&b).is_err(), "flip at {i} accepted");
    }
}

proptest! {
    /// Random bodies in valid envelopes (random parameters, or a real sketch's parameters with
    /// a random payload), so the Count-Min and item-count decoders' own checks are attacked.
    #[test]
    fn random_bodies_in_valid_envelopes_never_panic(
        which in 0usize..3,
        flags in 0u8..4,
        params in proptest::collection::vec(any::<u8>(), 0..64),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let real = match which {
            0 => sample_plain(Model::CashRegister).to_bytes(),
            1 => sample_plain(Model::GeneralTurnstile).to_bytes(),
            _ => sample_dyadic().to_bytes(),
        };
        let real_params = codec::decode(&real).unwrap().params.to_vec();
        for params in [&params[..], &real_params[..]] {
            for family in [Family::CountMin, Family::ItemCounts] {
                let b = codec::encode(family, flags, ItemHasher::default(), params, &payload);
                if let Ok(d) = AnyCountMin::from_bytes(&b) {
                    match d {
                        AnyCountMin::CountMin(cm) => { let _ = cm.point(b"k1"); }
                        AnyCountMin::Dyadic(s) => { let _ = s.quantile(0.5); }
                    }
                }
                if let Ok(c) = ItemCounts::from_bytes(&b) {
                    prop_assert_eq!(c.to_bytes(), b.clone());
                    let _ = c.heavy_hitters();
                }
            }
        }
    }

    #[test]
    fn mutated_encodings_with_fixed_checksums_never_panic(
        which in 0usize..3,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        // Mutate inside parameters and payload, then re-wrap so the checksum passes and the
        // family decoder sees the damage.
        let bytes = match which {
            0 => sample_plain(Model::CashRegister).to_bytes(),
            1 => sample_plain(Model::GeneralTurnstile).to_bytes(),
            _ => sample_dyadic().to_bytes(),
        };
        let env = codec::decode(&bytes).unwrap();
        let mut params = env.params.to_vec();
        let mut payload = env.payload.to_vec();
        for (at, v) in edits {
            let n = params.len() + payload.len();
            let i = at % n;
            if i < params.len() { params[i] = v } else { payload[i - params.len()] = v }
        }
        let re = codec::encode(Family::CountMin, env.flags, env.hasher, &params, &payload);
        if let Ok(d) = AnyCountMin::from_bytes(&re) {
            // Whatever decodes answers queries without panicking.
            match d {
                AnyCountMin::CountMin(cm) => { let _ = cm.point(b"k1"); }
                AnyCountMin::Dyadic(s) => { let _ = s.quantile(0.5); let _ = s.heavy_hitters(0.1); }
            }
        }
    }
}

/// Item counts keep the pairwise rows (their stored buckets merge across versions): a nested
/// sketch of the multiply-shift family is refused at decode, so no merge meets it later.
#[test]
fn item_counts_refuse_a_nested_sketch_of_other_rows() {
    let mut c = ItemCounts::new(0.05, 0.05, 0.1).unwrap();
    for i in 0..(c.exact_limit() as u32 + 50) {
        c.insert(&i.to_le_bytes());
    }
    assert!(!c.is_exact());
    let good = c.to_bytes();
    assert!(ItemCounts::from_bytes(&good).is_ok());
    // The nested envelope: the second magic; its row-family byte, then both checksums.
    let nested = good[4..]
        .windows(4)
        .position(|w| w == codec::MAGIC)
        .map(|i| i + 4)
        .expect("a sketch-mode summary nests a Count-Min envelope");
    let params_len = u32::from_le_bytes(good[nested + 16..nested + 20].try_into().unwrap());
    let payload_len = u64::from_le_bytes(good[nested + 20..nested + 28].try_into().unwrap());
    let end = nested + codec::HEADER_LEN + params_len as usize + payload_len as usize;
    let mut bad = good.clone();
    assert_eq!(bad[nested + codec::HEADER_LEN + 1], 2, "pairwise rows");
    bad[nested + codec::HEADER_LEN + 1] = 3;
    let sum = codec::checksum_of(&bad[nested..end]);
    bad[end..end + 8].copy_from_slice(&sum.to_le_bytes());
    let outer = bad.len() - codec::CHECKSUM_LEN;
    let sum = codec::checksum_of(&bad[..outer]);
    bad[outer..].copy_from_slice(&sum.to_le_bytes());
    // The nested sketch alone is a valid multiply-shift Count-Min …
    assert_eq!(
        CountMin::from_bytes(&bad[nested..end + 8])
            .unwrap()
            .row_family(),
        RowFamily::MultiplyShift
    );
    // … which the summary refuses.
    assert!(matches!(
        ItemCounts::from_bytes(&bad),
        Err(DecodeError::Invalid {
            field: "sketch",
            ..
        })
    ));
}
