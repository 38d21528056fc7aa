//! Writes the committed DDSketch and quantile-ring format test vectors into
//! `testdata/vectors/`.
//!
//! Run only when the format version changes: `cargo run -p tidemark --example
//! write_quantile_vectors`. `tests/quantile_encoding.rs` rebuilds each from the same recipe
//! (plain arithmetic, no random generator whose stream could change) and compares.

use tidemark::quantile::{DdSketch, Mapping, QuantileRing};

/// The recipe's i-th value: spread over three decades, every tenth negated, every 97th zero.
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

fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/vectors");
    // The cubic mapping at α = 1%, 1,000 values.
    let mut cubic = DdSketch::new(0.01).unwrap();
    for i in 1..=1_000 {
        cubic.insert(value(i)).unwrap();
    }
    std::fs::write(format!("{dir}/ddsketch_cubic_v1.bin"), cubic.to_bytes()).unwrap();
    // Schema 3 with a limit of 16 bins a store: collapsed.
    let mut schema = DdSketch::with_mapping(Mapping::schema(3).unwrap(), 16).unwrap();
    for i in 1..=1_000 {
        schema.insert(value(i)).unwrap();
    }
    assert!(schema.is_collapsed());
    std::fs::write(format!("{dir}/ddsketch_schema_v1.bin"), schema.to_bytes()).unwrap();
    // A ring: α = 2%, buckets of 10 ticks, 6 of them, ticks 0..100 with every 7th event late.
    let mut ring = QuantileRing::new(0.02, 10, 6).unwrap();
    for i in 0..100u64 {
        let tick = if i % 7 == 0 { i.saturating_sub(15) } else { i };
        ring.insert(value(i + 1), tick).unwrap();
    }
    std::fs::write(format!("{dir}/quantile_ring_v1.bin"), ring.to_bytes()).unwrap();
}
