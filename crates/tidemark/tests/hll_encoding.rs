//! HyperLogLog in the envelope: every representation round-trips to an equal sketch and equal
//! bytes, no byte string makes a decoder panic (random bytes, and valid encodings mutated with
//! their checksum repaired so the family decoder itself is attacked), and the committed test
//! vectors still decode to the sketches their recipes build.

mod common;

use proptest::prelude::*;
use tidemark::cardinality::{Hll, Representation};
use tidemark::codec::{Family, CHECKSUM_LEN, HEADER_LEN};
use tidemark::hash::ItemHasher;
use tidemark::DecodeError;

fn fed(p: u8, n: u64) -> Hll {
    let mut h = Hll::new(p).unwrap();
    for i in 0..n {
        h.insert_u64(i);
    }
    h
}

fn samples() -> Vec<Hll> {
    let mut out = Vec::new();
    for p in [4u8, 9, 12, 18] {
        for n in [0u64, 1, 3, 50, 400, 3_000, 100_000] {
            out.push(fed(p, n));
        }
    }
    // Merged (no HIP), another confidence, another seed, Redis mode.
    let mut merged = fed(12, 2_000);
    merged.merge(&fed(10, 30)).unwrap();
    out.push(merged);
    out.push(fed(14, 7_000).with_confidence(0.99).unwrap());
    let mut seeded = Hll::with_hasher(8, ItemHasher::xxh3(42)).unwrap();
    seeded.insert(b"x");
    out.push(seeded);
    let mut r = Hll::redis();
    for i in 0..500u64 {
        r.insert(format!("u{i}").as_bytes());
    }
    out.push(r.clone());
    // Imported from Redis with a valid cache.
    let mut v = r.to_redis().unwrap();
    let c = r.pfcount();
    v[8..16].copy_from_slice(&c.to_le_bytes());
    out.push(Hll::from_redis(&v).unwrap());
    out
}

#[test]
fn every_representation_round_trips() {
    let mut kinds = std::collections::HashSet::new();
    for h in samples() {
        kinds.insert(h.representation());
        let bytes = h.to_bytes();
        let back = Hll::from_bytes(&bytes).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.estimate(), h.estimate());
        assert_eq!(back.estimate_ertl(), h.estimate_ertl());
        assert_eq!(back.to_bytes(), bytes, "re-encoding differs");
    }
    assert_eq!(kinds.len(), 3, "samples cover exact, sparse and dense");
}

#[test]
fn a_decoded_sketch_keeps_counting_like_the_original() {
    for n in [10u64, 500, 50_000] {
        let mut a = fed(12, n);
        let mut b = Hll::from_bytes(&a.to_bytes()).unwrap();
        for i in n..n + 20_000 {
            a.insert_u64(i);
            b.insert_u64(i);
        }
        assert_eq!(a, b);
    }
}

#[test]
fn committed_vectors_decode_to_their_recipes() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/vectors");
    for (name, n, repr) in [
        ("exact", 100u64, Representation::Exact),
        ("sparse", 400, Representation::Sparse),
        ("dense", 5_000, Representation::Dense),
    ] {
        let bytes = std::fs::read(format!("{dir}/hll_{name}_v1.bin")).expect("vector committed");
        let h = Hll::from_bytes(&bytes).unwrap();
        assert_eq!(h.representation(), repr);
        assert_eq!(h, fed(12, n), "{name}");
        assert_eq!(h.to_bytes(), bytes);
    }
    let bytes = std::fs::read(format!("{dir}/hll_redis_v1.bin")).expect("vector committed");
    let mut r = Hll::redis();
    for i in 0..20_000u64 {
        r.insert(format!("item:{i}").as_bytes());
    }
    assert_eq!(Hll::from_bytes(&bytes).unwrap(), r);
}

/// Replaces the checksum so that a mutated body reaches the family decoder.
fn reseal(bytes: &mut [u8]) {
    let n = bytes.len() - CHECKSUM_LEN;
    let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..n]);
    bytes[n..].copy_from_slice(&sum.to_le_bytes());
}

#[test]
fn each_field_is_checked() {
    let good = fed(12, 100).to_bytes();
    let params = HEADER_LEN;
    let cases: Vec<(usize, u8, &str)> = vec![
        (6, 0x80, "flags"),
        (params, 3, "precision"),
        (params, 19, "precision"),
        (params + 1, 24, "sparse precision"),
        (params + 10, 3, "representation"),
    ];
    for (off, val, field) in cases {
        let mut b = good.clone();
        b[off] = val;
        reseal(&mut b);
        // The field's own check must refuse it, by name: a length error further on would
        // mean the field was read unchecked and the layout misparsed.
        match Hll::from_bytes(&b) {
            Err(DecodeError::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field} = {val}: {other:?}"),
        }
    }
    // Confidence 1.0 (params + 2..10).
    let mut b = good.clone();
    b[params + 2..params + 10].copy_from_slice(&1.0f64.to_le_bytes());
    reseal(&mut b);
    assert!(matches!(
        Hll::from_bytes(&b),
        Err(DecodeError::Invalid {
            field: "confidence",
            ..
        })
    ));
    // Redis flag on a non-Redis sketch.
    let mut b = good.clone();
    b[6] |= 1;
    reseal(&mut b);
    assert!(matches!(
        Hll::from_bytes(&b),
        Err(DecodeError::Invalid { field: "flags", .. })
    ));
    // Exact hashes out of order: swap the first two (payload: repr, HIP, count, hashes).
    let mut b = good.clone();
    let first = params + 10 + 1 + 8 + 8;
    let (x, y) = (first, first + 8);
    let tmp: Vec<u8> = b[x..x + 8].to_vec();
    b.copy_within(y..y + 8, x);
    b[y..y + 8].copy_from_slice(&tmp);
    reseal(&mut b);
    assert!(matches!(
        Hll::from_bytes(&b),
        Err(DecodeError::Invalid { field: "hash", .. })
    ));
    // A dense register above 65 − p.
    let d = fed(12, 50_000);
    let mut b = d.to_bytes();
    let regs = params + 10 + 1 + 8;
    b[regs] |= 63;
    reseal(&mut b);
    assert!(matches!(
        Hll::from_bytes(&b),
        Err(DecodeError::Invalid {
            field: "registers",
            ..
        })
    ));
}

proptest! {
    /// Random bodies in valid envelopes: random parameters, or a real sketch's parameters with
    /// a random payload, so the HyperLogLog decoder's field checks are what is attacked.
    #[test]
    fn random_bodies_in_valid_envelopes_never_panic(
        which in any::<usize>(),
        flags in 0u8..8,
        params in proptest::collection::vec(any::<u8>(), 0..24),
        payload in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let real = [fed(4, 3), fed(9, 400), fed(12, 3_000), Hll::redis()];
        let real_params = common::params_of(&real[which % real.len()].to_bytes());
        for params in [&params[..], &real_params[..]] {
            let b = common::envelope(Family::Hll, flags, params, &payload);
            if let Ok(h) = Hll::from_bytes(&b) {
                let e = h.estimate();
                prop_assert!(e.low <= e.value && e.value <= e.high);
                prop_assert_eq!(Hll::from_bytes(&h.to_bytes()).unwrap(), h);
            }
        }
    }

    /// Real encodings with edited bodies and cut payloads, sealed again in valid envelopes
    /// (a cut of the whole encoding would only ever reach the envelope's length check).
    #[test]
    fn mutated_encodings_never_panic_and_what_decodes_reencodes(
        which in 0usize..40,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in proptest::option::of(0usize..64),
    ) {
        let s = samples();
        let b = common::reseal_body(&s[which % s.len()].to_bytes(), &edits, cut.unwrap_or(0));
        if let Ok(h) = Hll::from_bytes(&b) {
            let e = h.estimate();
            prop_assert!(e.low <= e.value && e.value <= e.high);
            let again = Hll::from_bytes(&h.to_bytes()).unwrap();
            prop_assert_eq!(again, h);
        }
    }
}
