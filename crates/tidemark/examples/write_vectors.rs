//! Writes the committed format test vectors into `testdata/vectors/`.
//!
//! Run only when the format version changes: `cargo run -p tidemark --example write_vectors`.

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
    Ok(())
}
