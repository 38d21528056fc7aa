//! `tidemark distinct --merge` of sketches of different precisions: the union is at the
//! smallest precision, and the command line says so.

mod common;
use common::{json_lines, lines, ok, temp, tidemark};

#[test]
fn merging_precisions_12_and_18_says_it_folds_to_12() {
    let a = temp("p12.tdmk");
    let b = temp("p18.tdmk");
    ok(&tidemark(
        &[
            "distinct",
            "--precision",
            "12",
            "--save",
            a.to_str().unwrap(),
        ],
        &lines(0..5_000),
    ));
    ok(&tidemark(
        &[
            "distinct",
            "--precision",
            "18",
            "--save",
            b.to_str().unwrap(),
        ],
        &lines(2_500..7_500),
    ));
    let out = tidemark(
        &[
            "distinct",
            "--merge",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--json",
        ],
        "",
    );
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("p = 12 (") && err.contains("p = 18 (") && err.contains("p12.tdmk"),
        "{err}"
    );
    assert!(err.contains("the union is at p = 12"), "{err}");
    // 1.04/√4096 = 1.625%.
    assert!(err.contains("1.62%") || err.contains("1.63%"), "{err}");
    // The answer itself is still one JSON line on stdout.
    assert_eq!(json_lines(&out).len(), 1);

    // Sketches of one precision merge silently.
    let out = tidemark(
        &[
            "distinct",
            "--merge",
            a.to_str().unwrap(),
            a.to_str().unwrap(),
        ],
        "",
    );
    ok(&out);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
