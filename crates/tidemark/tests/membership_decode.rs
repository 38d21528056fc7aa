//! Decoders never panic on any bytes, and round trips are identity.

mod common;

use proptest::prelude::*;
use tidemark::codec::Family;
use tidemark::membership::{LengtheningFilter, QuotientFilter, StackedFilter};
use tidemark::DecodeError;

fn qf(keys: u64, reserve: u32) -> QuotientFilter {
    let mut f = QuotientFilter::with_reserve(40, 0.02, reserve).unwrap();
    for i in 0..keys {
        f.insert(&i.to_le_bytes()).unwrap();
    }
    f
}

fn stack(keys: u64) -> StackedFilter {
    let mut s = StackedFilter::new(20, 0.05).unwrap();
    for i in 0..keys {
        s.insert(&i.to_le_bytes());
    }
    s
}

fn lengthening(keys: u64) -> LengtheningFilter {
    let mut t = LengtheningFilter::new(20, 0.05, 2).unwrap();
    for i in 0..keys {
        t.insert(&i.to_le_bytes()).unwrap();
    }
    t
}

#[test]
fn round_trips_are_identity() {
    for keys in [0, 1, 30, 200] {
        let mut f = qf(keys, 4);
        // Removes leave a table in a different shape from inserts alone.
        for i in (0..keys).step_by(3) {
            assert!(f.remove(&i.to_le_bytes()));
        }
        let b = f.to_bytes();
        let g = QuotientFilter::from_bytes(&b).unwrap();
        assert_eq!(g, f);
        assert_eq!(g.to_bytes(), b);

        let s = stack(keys);
        let b = s.to_bytes();
        let t = StackedFilter::from_bytes(&b).unwrap();
        assert_eq!(t, s);
        assert_eq!(t.to_bytes(), b);

        let l = lengthening(keys.min(100));
        let b = l.to_bytes();
        let m = LengtheningFilter::from_bytes(&b).unwrap();
        assert_eq!(m, l);
        assert_eq!(m.to_bytes(), b);
    }
}

#[test]
fn a_decoded_filter_keeps_growing_and_answering() {
    let f = qf(25, 3);
    let mut g = QuotientFilter::from_bytes(&f.to_bytes()).unwrap();
    for i in 25..600u64 {
        g.insert(&i.to_le_bytes()).unwrap();
    }
    assert!((0..600u64).all(|i| g.contains(&i.to_le_bytes())));
}

#[test]
fn a_table_with_a_broken_layout_is_refused() {
    // Flip one bit of the table and re-seal the checksum: the structural check, not the
    // checksum, must catch a broken layout. The first 192 bits are metadata words; the bits
    // after them hold the remainders too, where a flip can leave a valid table (another
    // fingerprint), which must then behave as one.
    let f = qf(25, 1);
    let good = f.to_bytes();
    let params_len = u32::from_le_bytes(good[16..20].try_into().unwrap()) as usize;
    let table = 28 + params_len + 1 + 8; // q, len, then the occupied words
    let table_bits = (good.len() - 8 - table) * 8;
    let (mut refused, mut accepted, mut metadata_refused) = (0, 0, 0);
    for bit in 0..table_bits {
        let mut b = good.clone();
        b[table + bit / 8] ^= 1 << (bit % 8);
        let end = b.len() - 8;
        let sum = tidemark::codec::checksum_of(&b[..end]);
        b[end..].copy_from_slice(&sum.to_le_bytes());
        match QuotientFilter::from_bytes(&b) {
            Err(DecodeError::Invalid { .. }) => {
                refused += 1;
                metadata_refused += u32::from(bit < 192);
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(g) => {
                // Accepted only if still a valid table: it holds what the bytes say (it
                // re-encodes to them, so the flip was not silently dropped), it still counts
                // its keys, and it works as a filter: new keys go in and are found, and each
                // removal finds its key and takes exactly one fingerprint out.
                assert_eq!(g.to_bytes(), b, "bit {bit}: decoded to other bytes");
                assert_ne!(g, f, "bit {bit}: the flip was ignored");
                assert_eq!(g.len(), f.len());
                let mut h = g.clone();
                for i in 1_000..1_200u64 {
                    h.insert(&i.to_le_bytes()).unwrap();
                }
                assert!(
                    (1_000..1_200u64).all(|i| h.contains(&i.to_le_bytes())),
                    "bit {bit}"
                );
                for i in 1_000..1_200u64 {
                    assert!(h.remove(&i.to_le_bytes()), "bit {bit}: key {i} lost");
                }
                assert_eq!(h.len(), g.len(), "bit {bit}");
                accepted += 1;
            }
        }
    }
    assert!(
        metadata_refused > 100,
        "only {metadata_refused} of 192 single-bit metadata flips refused"
    );
    eprintln!("{table_bits} flips: {refused} refused ({metadata_refused} of 192 metadata), {accepted} decoded to valid tables");
    assert!(
        accepted > 0,
        "no flip decoded: the checks on a decoded flip never ran"
    );
}

proptest! {
    /// Random bodies in valid envelopes of each family: random parameters, or a real filter's
    /// parameters with a random payload, so the filters' own field checks are attacked.
    #[test]
    fn random_bodies_in_valid_envelopes_never_panic(
        which in 0usize..3,
        flags in 0u8..4,
        params in proptest::collection::vec(any::<u8>(), 0..48),
        payload in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let (family, real) = match which {
            0 => (Family::QuotientFilter, qf(20, 2).to_bytes()),
            1 => (Family::StackedFilter, stack(60).to_bytes()),
            _ => (Family::LengtheningFilter, lengthening(30).to_bytes()),
        };
        let real_params = common::params_of(&real);
        for params in [&params[..], &real_params[..]] {
            let b = common::envelope(family, flags, params, &payload);
            decode_all(&b);
        }
    }

    /// Real encodings with edited bodies and cut payloads, sealed again in valid envelopes.
    #[test]
    fn mutated_encodings_never_panic(
        which in 0usize..3,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in 0usize..16,
    ) {
        let valid = match which {
            0 => qf(20, 2).to_bytes(),
            1 => stack(60).to_bytes(),
            _ => lengthening(30).to_bytes(),
        };
        decode_all(&common::reseal_body(&valid, &edits, cut));
    }
}

/// Every decoder on `b`; whatever decodes must re-encode to bytes that decode to it.
fn decode_all(b: &[u8]) {
    if let Ok(f) = QuotientFilter::from_bytes(b) {
        assert_eq!(QuotientFilter::from_bytes(&f.to_bytes()).unwrap(), f);
        let _ = f.contains(b"x");
    }
    if let Ok(s) = StackedFilter::from_bytes(b) {
        assert_eq!(StackedFilter::from_bytes(&s.to_bytes()).unwrap(), s);
        let _ = s.contains(b"x");
    }
    if let Ok(l) = LengtheningFilter::from_bytes(b) {
        assert_eq!(LengtheningFilter::from_bytes(&l.to_bytes()).unwrap(), l);
        let _ = l.contains(b"x");
    }
}

fn vector(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../../testdata/vectors/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|_| panic!("testdata/vectors/{name} is committed"))
}

/// Forecast 100 at 1%, reserve 2, keys 0..1000 (four doublings), then every fifth removed.
fn committed_qf() -> QuotientFilter {
    let mut f = QuotientFilter::with_reserve(100, 0.01, 2).unwrap();
    for i in 0..1_000u64 {
        f.insert(&i.to_le_bytes()).unwrap();
    }
    for i in (0..1_000u64).step_by(5) {
        assert!(f.remove(&i.to_le_bytes()));
    }
    f
}

/// Forecast 50 at 2%, keys 0..500 (four layers).
fn committed_stack() -> StackedFilter {
    let mut s = StackedFilter::new(50, 0.02).unwrap();
    for i in 0..500u64 {
        s.insert(&i.to_le_bytes());
    }
    s
}

/// Forecast 50 at 2%, one bit a doubling, keys 0..300.
fn committed_lengthening() -> LengtheningFilter {
    let mut t = LengtheningFilter::new(50, 0.02, 1).unwrap();
    for i in 0..300u64 {
        t.insert(&i.to_le_bytes()).unwrap();
    }
    t
}

/// The committed vectors decode, hold their keys, and equal what this build writes for the
/// same inserts: a change to format v1 fails here.
#[test]
fn committed_vectors_decode_and_reencode_byte_for_byte() {
    let b = vector("quotient_filter_v1.bin");
    let f = QuotientFilter::from_bytes(&b).unwrap();
    assert_eq!((f.len(), f.fingerprint_bits(), f.reserve()), (800, 16, 2));
    assert!((0..1_000u64)
        .filter(|i| i % 5 != 0)
        .all(|i| f.contains(&i.to_le_bytes())));
    assert_eq!(
        committed_qf().to_bytes(),
        b,
        "format v1 changed: bump the version"
    );

    let b = vector("stacked_filter_v1.bin");
    let s = StackedFilter::from_bytes(&b).unwrap();
    assert_eq!(s.len(), 500);
    assert!((0..500u64).all(|i| s.contains(&i.to_le_bytes())));
    assert_eq!(
        committed_stack().to_bytes(),
        b,
        "format v1 changed: bump the version"
    );

    let b = vector("lengthening_filter_v1.bin");
    let t = LengtheningFilter::from_bytes(&b).unwrap();
    assert_eq!(t.len(), 300);
    assert!((0..300u64).all(|i| t.contains(&i.to_le_bytes())));
    assert_eq!(
        committed_lengthening().to_bytes(),
        b,
        "format v1 changed: bump the version"
    );
}

/// Found by a mutation test: a stack whose stored capacity is the largest allowed (2^38 keys)
/// made the decoder build that layer's table (about 96 GiB) before it read a single layer.
/// The schedule is now checked without building anything.
#[test]
fn a_forged_stack_capacity_allocates_nothing() {
    use tidemark::codec::{self, Family, Writer};
    let mut params = Writer::new();
    params.u64(1 << 38).f64(0.01).f64(2.0).f64(0.5);
    let mut payload = Writer::new();
    payload.u64(0); // no layers
    let bytes = codec::encode(
        Family::StackedFilter,
        0,
        tidemark::hash::ItemHasher::default(),
        params.bytes(),
        payload.bytes(),
    );
    assert!(matches!(
        StackedFilter::from_bytes(&bytes),
        Err(DecodeError::Invalid {
            field: "layers",
            ..
        })
    ));
}
