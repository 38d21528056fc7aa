//! Writes the committed format test vectors into `testdata/vectors/`.
//!
//! Run only when the format version changes: `cargo run -p tidemark --example write_vectors`.

use tidemark::cardinality::ExaLogLog;
use tidemark::window::ExpHistogram;

fn main() -> std::io::Result<()> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/vectors");
    std::fs::create_dir_all(dir)?;
    let mut h = ExpHistogram::arrivals_with_k(100, 3)
        .expect("valid parameters")
        .with_interpolation();
    for i in 0..1_000 {
        h.push(i % 3 != 0).expect("an arrivals window");
    }
    std::fs::write(format!("{dir}/exp_histogram_v1.bin"), h.to_bytes())?;
    // ExaLogLog (2, 20, 8): exact after 40 items, dense (written coded) after 5,000. The
    // packed dense vector `exaloglog_dense_v1.bin` (the same 5,000 items) was written by the
    // builds before the coded form, which wrote dense sketches packed; it stays as it is.
    for (name, n) in [("exact", 40u64), ("coded", 5_000)] {
        let mut s = ExaLogLog::new(8).expect("a valid precision");
        for x in 0..n {
            s.insert_u64(x);
        }
        std::fs::write(format!("{dir}/exaloglog_{name}_v1.bin"), s.to_bytes())?;
    }
    Ok(())
}
