//! `tidemark-lab reproduce --out`: a plate's CSV and charts are written and are what they say.

mod common;

use common::{dir, lab, ok};

#[test]
fn a_small_plate_writes_csv_svg_and_png_with_its_series() {
    let dir = dir("charts");
    let out = lab(&[
        "reproduce",
        "histogram-twenty",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    ok(&out);

    // The CSV holds the same twenty rows the command printed, with a header.
    let csv = std::fs::read_to_string(dir.join("histogram-twenty.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("arrival,merges,total_merges,sizes"));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 20);
    assert_eq!(rows[19], "20,1,12,4 4 4 2 2 2 1 1");

    // The SVG is an SVG naming its series and title; the PNG has PNG's signature and the
    // size the chart is drawn at (1000 × 640, in the IHDR chunk).
    let svg = std::fs::read_to_string(dir.join("histogram-twenty.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..40.min(svg.len())]);
    assert!(svg.contains("total_merges"));
    assert!(svg.contains("merges over the first twenty ones"));
    let png = std::fs::read(dir.join("histogram-twenty.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(&png[12..16], b"IHDR");
    assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), 1000);
    assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), 640);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unwritable_out_dir_is_a_usage_error() {
    let out = lab(&[
        "reproduce",
        "histogram-twenty",
        "--out",
        "/proc/no-such-dir",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/proc/no-such-dir"), "{err}");
    assert!(err.starts_with("tidemark-lab: error:"), "{err}");
}
