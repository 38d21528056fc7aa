//! Backward compatibility: committed Count-Min encodings (format version 1) still decode,
//! re-encode byte for byte, and answer for the streams they were built from — so a change to
//! the layout, or to how row functions derive from the seed, fails here.
//!
//! The vectors hold the sketches of `stream()` below, and this build must write the same bytes
//! for it. Regenerate them only with a new format version:
//! `cargo test -p tidemark --test frequency_vectors -- --ignored write_vectors` (a tool, not
//! a test: it is ignored by default and checks nothing).

use std::collections::HashMap;

use tidemark::frequency::{CountMin, DyadicCountMin, Model, RowFamily};

/// A plain sketch with multiply-shift rows (family byte 3), as this build makes them.
const PLAIN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/vectors/countmin_multiply_shift_v1.bin"
);
/// The same stream's plain sketch with pairwise rows (family byte 2), written by the builds
/// before the multiply-shift rows: read, never written again.
const PLAIN_PAIRWISE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/vectors/countmin_v1.bin"
);
const DYADIC: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/vectors/countmin_dyadic_v1.bin"
);

/// Item `i` (0..300) occurs `1 + i % 17` times.
fn stream() -> Vec<(u64, i64)> {
    (0..300u64).map(|i| (i, 1 + (i % 17) as i64)).collect()
}

fn build() -> (CountMin, DyadicCountMin) {
    let mut cm = CountMin::with_dimensions(64, 3, Model::CashRegister).unwrap();
    let mut dy = DyadicCountMin::with_dimensions(16, 2, 10, Model::NonNegativeTurnstile).unwrap();
    for (x, c) in stream() {
        cm.update(&x.to_le_bytes(), c).unwrap();
        dy.update(x, c).unwrap();
    }
    (cm, dy)
}

/// A tool, not a test, so CI never runs it: it rewrites the committed vectors that the tests
/// above check the encoder against, which would make those checks pass by construction. Run it
/// only when a new format version is introduced
/// (`cargo test -p tidemark --test frequency_vectors -- --ignored write_vectors`).
#[test]
#[ignore = "a tool: rewrites testdata/vectors/countmin_{multiply_shift,dyadic}_v1.bin; run only for a new format version"]
fn write_vectors() {
    let (cm, dy) = build();
    std::fs::write(PLAIN, cm.to_bytes()).unwrap();
    std::fs::write(DYADIC, dy.to_bytes()).unwrap();
}

/// This build writes the committed bytes for the same stream: a change to the layout or to
/// how row functions derive from the seed fails here even if the old bytes still decode.
#[test]
fn this_build_writes_the_committed_bytes() {
    let (cm, dy) = build();
    let plain = std::fs::read(PLAIN).expect("the multiply-shift vector is committed");
    assert!(
        cm.to_bytes() == plain,
        "Count-Min format v1 changed: bump the version"
    );
    let dyadic =
        std::fs::read(DYADIC).expect("testdata/vectors/countmin_dyadic_v1.bin is committed");
    assert!(
        dy.to_bytes() == dyadic,
        "dyadic Count-Min format v1 changed: bump the version"
    );
}

#[test]
fn committed_vectors_decode_and_answer() {
    let exact: HashMap<u64, i64> = stream().into_iter().collect();
    let total: i64 = exact.values().sum();

    for (path, family) in [
        (PLAIN, RowFamily::MultiplyShift),
        (PLAIN_PAIRWISE, RowFamily::Pairwise),
    ] {
        let bytes = std::fs::read(path).expect("the plain vectors are committed");
        let cm = CountMin::from_bytes(&bytes).unwrap();
        assert_eq!(cm.to_bytes(), bytes);
        assert_eq!(cm.row_family(), family);
        assert_eq!((cm.width(), cm.depth(), cm.total()), (64, 3, total));
        // Counters laid by other row functions would under-count some item.
        for (&x, &c) in &exact {
            assert!(
                cm.point(&x.to_le_bytes()).value >= c as f64,
                "{path}: item {x}"
            );
        }
    }

    let bytes =
        std::fs::read(DYADIC).expect("testdata/vectors/countmin_dyadic_v1.bin is committed");
    let dy = DyadicCountMin::from_bytes(&bytes).unwrap();
    assert_eq!(dy.to_bytes(), bytes);
    for (&x, &c) in &exact {
        assert!(dy.point(x).unwrap().value >= c as f64, "item {x}");
    }
    let truth: i64 = (100..200u64).map(|x| exact[&x]).sum();
    assert!(dy.range(100, 199).unwrap().value >= truth as f64);
    assert_eq!(dy.range(0, 1023).unwrap().value, total as f64);
}
