//! Writes the committed HyperLogLog format test vectors into `testdata/vectors/`.
//!
//! Run only when the format version changes: `cargo run -p tidemark --example write_hll_vectors`.
//! `tests/hll_encoding.rs` rebuilds each sketch from the same recipe and compares.

use tidemark::cardinality::Hll;

fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/vectors");
    for (name, n) in [("exact", 100u64), ("sparse", 400), ("dense", 5_000)] {
        let mut h = Hll::new(12).unwrap();
        for i in 0..n {
            h.insert_u64(i);
        }
        assert_eq!(h.representation().name(), name);
        std::fs::write(format!("{dir}/hll_{name}_v1.bin"), h.to_bytes()).unwrap();
    }
    let mut r = Hll::redis();
    for i in 0..20_000u64 {
        r.insert(format!("item:{i}").as_bytes());
    }
    std::fs::write(format!("{dir}/hll_redis_v1.bin"), r.to_bytes()).unwrap();
}
