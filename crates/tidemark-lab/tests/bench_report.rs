//! `tidemark-lab bench-report`: a saved divan run becomes the generated appendix of
//! BENCHMARKS.md, between its markers, with the hand-written sections above left alone.

mod common;

use common::{dir, lab, ok};

const RUN: &str = "\
window                          fastest       │ slowest       │ median        │ mean          │ samples │ iters
╰─ push                                       │               │               │               │         │
   ├─ sketch_oxide                            │               │               │               │         │
   │  ╰─ W=1000 d=1             1.5 s         │ 1.6 s         │ 1.55 s        │ 1.6 s         │ 20      │ 20
   ╰─ tidemark                                │               │               │               │         │
      ╰─ W=1000 d=1             699.9 µs      │ 750.7 µs      │ 705 µs        │ 711.6 µs      │ 20      │ 20
";

#[test]
fn a_saved_run_replaces_the_generated_appendix_and_draws_its_chart() {
    let d = dir("bench-report");
    std::fs::write(d.join("run.txt"), RUN).unwrap();
    std::fs::write(
        d.join("BENCHMARKS.md"),
        "# Benchmarks\n\nHand-written.\n\n<!-- bench-report:begin -->\nold\n<!-- bench-report:end -->\n",
    )
    .unwrap();
    let out = lab(&[
        "bench-report",
        "--suite",
        "window",
        "--from",
        d.join("run.txt").to_str().unwrap(),
        "--repo",
        d.to_str().unwrap(),
    ]);
    ok(&out);
    let md = std::fs::read_to_string(d.join("BENCHMARKS.md")).unwrap();
    assert!(md.starts_with("# Benchmarks\n\nHand-written.\n"), "{md}");
    assert!(!md.contains("\nold\n"), "{md}");
    assert_eq!(md.matches("<!-- bench-report:begin -->").count(), 1);
    assert!(md.trim_end().ends_with("<!-- bench-report:end -->"), "{md}");
    // The command that regenerates it, and the peer's ratio: 1.55 s / 705 µs.
    assert!(
        md.contains("`cargo run --release -p tidemark-lab -- bench-report --sample-count 20`"),
        "{md}"
    );
    assert!(
        md.contains("| 1 | push / sketch_oxide / W=1000 d=1 | 1.55 s | 705.00 µs | 2198.58× |"),
        "{md}"
    );
    let svg = std::fs::read_to_string(d.join("docs/benchmarks/window.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("sketch_oxide"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn from_needs_exactly_one_suite() {
    let out = lab(&[
        "bench-report",
        "--suite",
        "window",
        "--suite",
        "filter",
        "--from",
        "run.txt",
        "--dry-run",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--from"), "{err}");
}
