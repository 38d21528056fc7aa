//! DDSketch and the quantile ring in the envelope: round trips are identity (equal sketches,
//! equal bytes), damaged or truncated bytes are errors and never panics (random bytes, and
//! valid encodings edited and sealed again so the family decoder itself is attacked), every
//! field's check names the field, and the committed vectors still decode to the sketches
//! their recipes build.

mod quantile_data;

use proptest::prelude::*;
use quantile_data::*;
use tidemark::codec::{self, Family};
use tidemark::hash::ItemHasher;
use tidemark::quantile::{DdSketch, Mapping, QuantileRing, MAX_COUNT};
use tidemark::DecodeError;

fn samples() -> Vec<DdSketch> {
    let mut out = vec![
        DdSketch::default(),
        DdSketch::schema(-4).unwrap(),
        sketch_of(DdSketch::default(), &[1.0]),
        sketch_of(DdSketch::default(), &[0.0, -0.0, 1e-320]),
        sketch_of(DdSketch::default(), &[-3.0, -3.0, 7.5]),
        sketch_of(DdSketch::new(0.3).unwrap(), &lognormal(1, 1_000, 0.0, 3.0)),
        sketch_of(DdSketch::schema(8).unwrap(), &bimodal(2, 5_000)),
        sketch_of(
            DdSketch::with_mapping(Mapping::cubic(0.01).unwrap(), 20).unwrap(),
            &lognormal(3, 2_000, 0.0, 2.0),
        ),
        sketch_of(
            DdSketch::new(1e-9).unwrap(),
            &[1.0, 1.0 + 1e-8, f64::MAX, f64::MIN_POSITIVE],
        ),
    ];
    // Counts past 32 bits, and the count limit.
    let mut big = DdSketch::default();
    big.insert_n(2.0, 1 << 40).unwrap();
    big.insert_n(-2.0, MAX_COUNT - (1 << 40)).unwrap();
    out.push(big);
    // Extremes that are bounds, after a subtraction.
    let part = sketch_of(DdSketch::default(), &[1.0, 900.0]);
    let mut sub = sketch_of(DdSketch::default(), &[1.0, 5.0, 6.0, 900.0]);
    sub.subtract(&part).unwrap();
    out.push(sub);
    // An overflowed sum.
    out.push(sketch_of(DdSketch::default(), &[f64::MAX, f64::MAX]));
    out
}

fn rings() -> Vec<QuantileRing> {
    let mut out = vec![QuantileRing::new(0.01, 10, 1).unwrap()];
    let mut r = QuantileRing::of(DdSketch::schema(4).unwrap(), 5, 7).unwrap();
    for (i, v) in bimodal(5, 500).into_iter().enumerate() {
        r.insert(v, i as u64 / 3).unwrap();
    }
    out.push(r.clone());
    // After a quiet spell: stale slots older than the ring reaches.
    r.insert(1.0, 1_000).unwrap();
    out.push(r);
    out
}

#[test]
fn sketches_round_trip_to_equal_sketches_and_bytes() {
    for s in samples() {
        let bytes = s.to_bytes();
        let back = DdSketch::from_bytes(&bytes).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.to_bytes(), bytes, "re-encoding differs");
        for q in QS.into_iter().chain([0.0, 0.3, 1.0]) {
            assert_eq!(back.quantile(q), s.quantile(q));
        }
        assert_eq!(back.min(), s.min());
        assert_eq!(back.max(), s.max());
        assert_eq!(back.sum(), s.sum());
        assert_eq!(back.rank(5.0), s.rank(5.0));
    }
}

#[test]
fn rings_round_trip_and_answer_alike() {
    for mut r in rings() {
        let bytes = r.to_bytes();
        let mut back = QuantileRing::from_bytes(&bytes).unwrap();
        assert_eq!(back, r);
        assert_eq!(back.to_bytes(), bytes);
        if let Some(nb) = r.newest_bucket() {
            let now = nb * r.width();
            for w in 1..=r.buckets() {
                assert_eq!(back.window(now, w), r.window(now, w));
            }
        }
    }
}

#[test]
fn equal_sketches_built_differently_encode_to_equal_bytes() {
    // Integer values, so that sums are exact in any order.
    let values: Vec<f64> = (1..=5_000)
        .map(|i| ((i * 31) % 997) as f64 - 100.0)
        .collect();
    let forward = sketch_of(DdSketch::default(), &values);
    let mut reversed: Vec<f64> = values.clone();
    reversed.reverse();
    let backward = sketch_of(DdSketch::default(), &reversed);
    let mut merged = sketch_of(DdSketch::default(), &values[..1_234]);
    merged
        .merge(&sketch_of(DdSketch::default(), &values[1_234..]))
        .unwrap();
    let bytes = forward.to_bytes();
    assert_eq!(backward.to_bytes(), bytes);
    assert_eq!(merged.to_bytes(), bytes);
}

#[test]
fn serialized_bytes_are_compact() {
    // 10^6 lognormal values at α = 1%: about 700 bins, under a byte and a half each.
    let s = sketch_of(DdSketch::default(), &lognormal(1, 1_000_000, 0.0, 1.0));
    let bytes = s.to_bytes();
    assert!(
        bytes.len() < 1_000,
        "{} bytes for {} bins",
        bytes.len(),
        s.bins()
    );
}

#[test]
fn every_truncation_and_every_bit_flip_is_an_error() {
    for bytes in [
        sketch_of(DdSketch::default(), &[-3.0, 0.0, 1.0, 2.0, 900.0]).to_bytes(),
        rings()[1].to_bytes(),
    ] {
        for n in 0..bytes.len() {
            assert!(DdSketch::from_bytes(&bytes[..n]).is_err());
            assert!(QuantileRing::from_bytes(&bytes[..n]).is_err());
        }
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(
                    DdSketch::from_bytes(&b).is_err(),
                    "flip of bit {bit} of byte {i}"
                );
                assert!(QuantileRing::from_bytes(&b).is_err());
            }
        }
    }
}

/// `valid` with its parameters and payload replaced, sealed again with a valid checksum.
fn reseal(valid: &[u8], params: &[u8], payload: &[u8]) -> Vec<u8> {
    let env = codec::decode(valid).unwrap();
    codec::encode(env.family, env.flags, env.hasher, params, payload)
}

fn invalid_field(r: Result<DdSketch, DecodeError>) -> &'static str {
    match r {
        Err(DecodeError::Invalid { field, .. }) => field,
        other => panic!("expected an invalid field, got {other:?}"),
    }
}

#[test]
fn each_field_check_names_its_field() {
    let s = sketch_of(DdSketch::default(), &[1.0, 2.0, 3.0]);
    let good = s.to_bytes();
    let env = codec::decode(&good).unwrap();
    let (params, payload) = (env.params.to_vec(), env.payload.to_vec());
    let with_params = |p: &[u8]| DdSketch::from_bytes(&reseal(&good, p, &payload));
    let with_payload = |b: &[u8]| DdSketch::from_bytes(&reseal(&good, &params, b));

    let mut p = params.clone();
    p[0] = 7;
    assert_eq!(invalid_field(with_params(&p)), "mapping");
    let mut p = params.clone();
    p[1..9].copy_from_slice(&1.5f64.to_le_bytes());
    assert_eq!(invalid_field(with_params(&p)), "alpha");
    let mut p = params.clone();
    p[9..13].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(invalid_field(with_params(&p)), "bin limit");
    let mut p = params.clone();
    p[9..13].copy_from_slice(&((1u32 << 24) + 1).to_le_bytes());
    assert_eq!(invalid_field(with_params(&p)), "bin limit");
    let schema = vec![1u8, 9, 0, 16, 0, 0];
    assert_eq!(invalid_field(with_params(&schema)), "schema");
    let mut long = params.clone();
    long.push(0);
    assert!(matches!(
        with_params(&long),
        Err(DecodeError::TrailingBytes { .. })
    ));

    // Payload: state, count, min/max, zero count, bins.
    let mut b = payload.clone();
    b[0] = 4;
    assert_eq!(invalid_field(with_payload(&b)), "state");
    let mut b = payload.clone();
    b[1] = 4; // count 4 where the bins hold 3
    assert_eq!(invalid_field(with_payload(&b)), "zero count");
    let mut b = payload.clone();
    b[2..10].copy_from_slice(&5.0f64.to_le_bytes()); // min 5 > max 3
    assert_eq!(invalid_field(with_payload(&b)), "min");
    let mut b = payload.clone();
    b[2..10].copy_from_slice(&0.5f64.to_le_bytes()); // min outside the lowest bin
    assert_eq!(invalid_field(with_payload(&b)), "min");
    let mut b = payload.clone();
    b[2..10].copy_from_slice(&f64::NAN.to_le_bytes());
    assert_eq!(invalid_field(with_payload(&b)), "min");
    let mut b = payload.clone();
    b.push(0);
    assert!(with_payload(&b).is_err());

    // The envelope: flags, hash, family.
    let env = codec::decode(&good).unwrap();
    let other_seed = codec::encode(
        Family::Quantiles,
        0,
        ItemHasher::xxh3(1),
        env.params,
        env.payload,
    );
    assert_eq!(
        invalid_field(DdSketch::from_bytes(&other_seed)),
        "hash seed"
    );
    let flagged = codec::encode(Family::Quantiles, 1, env.hasher, env.params, env.payload);
    assert_eq!(invalid_field(DdSketch::from_bytes(&flagged)), "flags");
    assert!(matches!(
        QuantileRing::from_bytes(&good),
        Err(DecodeError::WrongFamily { .. })
    ));
}

/// The recipe of the committed vectors (see `examples/write_quantile_vectors.rs`).
fn value(i: u64) -> f64 {
    let x = ((i * 7_919) % 1_000 + 1) as f64 * 0.37;
    if i % 97 == 0 {
        0.0
    } else if i % 10 == 0 {
        -x
    } else {
        x * (1.0 + (i % 3) as f64 * 10.0)
    }
}

fn vector(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../testdata/vectors/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("testdata/vectors/{name} is committed: {e}"))
}

#[test]
fn committed_vectors_decode_to_their_recipes() {
    let values: Vec<f64> = (1..=1_000).map(value).collect();
    let sorted = sorted(&values);

    let bytes = vector("ddsketch_cubic_v1.bin");
    let s = DdSketch::from_bytes(&bytes).unwrap();
    assert_eq!(s, sketch_of(DdSketch::new(0.01).unwrap(), &values));
    assert_eq!(s.to_bytes(), bytes);
    for q in QS {
        let truth = exact(&sorted, q);
        assert_within(&s.quantile(q).unwrap(), truth, 0.01, "cubic vector");
    }

    let bytes = vector("ddsketch_schema_v1.bin");
    let s = DdSketch::from_bytes(&bytes).unwrap();
    let m = Mapping::schema(3).unwrap();
    assert_eq!(
        s,
        sketch_of(DdSketch::with_mapping(m, 16).unwrap(), &values)
    );
    assert_eq!(s.to_bytes(), bytes);
    assert!(s.is_collapsed());
    for q in QS {
        assert!(s.quantile(q).unwrap().estimate.contains(exact(&sorted, q)));
    }

    let bytes = vector("quantile_ring_v1.bin");
    let mut r = QuantileRing::from_bytes(&bytes).unwrap();
    let mut recipe = QuantileRing::new(0.02, 10, 6).unwrap();
    for i in 0..100u64 {
        let tick = if i % 7 == 0 { i.saturating_sub(15) } else { i };
        recipe.insert(value(i + 1), tick).unwrap();
    }
    assert_eq!(r, recipe);
    assert_eq!(r.to_bytes(), bytes);
    // Buckets 4..=9 hold ticks 40..=99: 60 events less the two moved below by 15 ticks.
    assert_eq!(r.window(99, 6).unwrap().count(), 58);
}

fn edited(valid: &[u8], edits: &[(u16, u8)], cut: usize, extra: usize) -> Vec<u8> {
    let env = codec::decode(valid).unwrap();
    let mut body: Vec<u8> = env.params.iter().chain(env.payload).copied().collect();
    for &(at, x) in edits {
        let n = body.len();
        body[at as usize % n] ^= x;
    }
    let plen = env.params.len();
    let (params, payload) = body.split_at(plen);
    let mut payload = payload.to_vec();
    payload.truncate(payload.len().saturating_sub(cut));
    payload.extend(std::iter::repeat_n(0x5a, extra));
    codec::encode(env.family, env.flags, env.hasher, params, &payload)
}

proptest! {
    #[test]
    fn random_streams_round_trip(values in proptest::collection::vec(
        prop_oneof![any::<f64>(), -1e6f64..1e6, 0.0f64..1.0], 0..300),
        limit in 1u64..100, schema in -4i8..=8, cubic in any::<bool>()) {
        let mapping = if cubic { Mapping::cubic(0.02).unwrap() } else { Mapping::schema(schema).unwrap() };
        let mut s = DdSketch::with_mapping(mapping, limit).unwrap();
        for v in values {
            let _ = s.insert(v);
        }
        let bytes = s.to_bytes();
        let back = DdSketch::from_bytes(&bytes).unwrap();
        prop_assert_eq!(&back, &s);
        prop_assert_eq!(back.to_bytes(), bytes);
    }

    #[test]
    fn any_bytes_decode_to_an_error_or_a_sketch(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = DdSketch::from_bytes(&bytes);
        let _ = QuantileRing::from_bytes(&bytes);
    }

    #[test]
    fn edited_and_resealed_encodings_never_panic(
        which in 0usize..100,
        edits in proptest::collection::vec((any::<u16>(), 1u8..), 1..4),
        cut in 0usize..4, extra in 0usize..3) {
        let sketches = samples();
        let s = &sketches[which % sketches.len()];
        let b = edited(&s.to_bytes(), &edits, cut, extra);
        if let Ok(d) = DdSketch::from_bytes(&b) {
            // What decodes is canonical and answers.
            prop_assert_eq!(d.to_bytes(), b);
            for q in QS {
                let _ = d.quantile(q);
            }
            let _ = (d.min(), d.max(), d.sum(), d.rank(1.0), d.cdf(-1.0));
        }
        let ring_list = rings();
        let r = &ring_list[which % ring_list.len()];
        let b = edited(&r.to_bytes(), &edits, cut, extra);
        if let Ok(mut d) = QuantileRing::from_bytes(&b) {
            prop_assert_eq!(d.to_bytes(), b);
            if let Some(nb) = d.newest_bucket() {
                let _ = d.quantile(nb.saturating_mul(d.width()), d.buckets(), 0.5);
            }
        }
    }
}
