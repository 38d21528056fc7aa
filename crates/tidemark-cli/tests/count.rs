//! `tidemark count` end to end: answers, JSON fields, and errors that name file, line or flag.

mod common;
use common::{json_lines, ok, tidemark};

#[test]
fn counts_arrivals_with_a_bracket_holding_the_truth() {
    // 1,000 arrivals, a one at every third: the last 100 hold 33 ones (positions 900..999 with
    // i % 3 == 0: 900, 903, …, 999 → 34).
    let input: String = (0..1_000)
        .map(|i| if i % 3 == 0 { "1\n" } else { "0\n" })
        .collect();
    let truth = (900..1_000).filter(|i| i % 3 == 0).count() as f64;
    let out = tidemark(&["count", "--window", "100", "--json"], &input);
    ok(&out);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    let (est, low, high) = (
        r["estimate"].as_f64().unwrap(),
        r["low"].as_f64().unwrap(),
        r["high"].as_f64().unwrap(),
    );
    assert!(
        low <= truth && truth <= high,
        "[{low}, {high}] misses {truth}"
    );
    assert!((est - truth).abs() <= 0.05 * truth);
    assert!(r["buckets"].as_u64().unwrap() > 0);
    assert!(r["bits"].as_u64().unwrap() > 0);
}

#[test]
fn every_n_lines_prints_a_row_per_n() {
    let input: String = (0..10).map(|t| format!("{t}\n")).collect();
    let out = tidemark(
        &[
            "count",
            "--window",
            "5",
            "--time",
            "--every",
            "3",
            "--interpolate",
            "--json",
        ],
        &input,
    );
    assert!(out.status.success());
    let rows = json_lines(&out);
    // After lines 3, 6, 9, and the end (10).
    assert_eq!(rows.len(), 4);
    // At the end the clock reads 9 and ticks 5..=9 are inside: 5 events, all size-1 exact.
    assert_eq!(rows[3]["estimate"].as_f64(), Some(5.0));
    assert!(rows[3].get("interpolated").is_some());
}

#[test]
fn a_bad_line_names_file_and_line_and_exits_2() {
    let out = tidemark(&["count", "--window", "10"], "1\n0\nx\n");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("<stdin>:3"), "{err}");
    assert!(err.contains("\"x\""), "{err}");
}

#[test]
fn a_decreasing_tick_is_refused_and_left_out() {
    // `distinct --window` places an out-of-order tick at its own time; the exponential
    // histogram cannot (its buckets are in time order): it leaves the tick out, says so, and
    // goes on — it no longer stops the run.
    let dir = std::env::temp_dir().join(format!("tidemark-count-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ticks.txt");
    std::fs::write(&file, "1\n5\n4\n6\n").unwrap();
    let out = tidemark(
        &[
            "count",
            "--window",
            "10",
            "--time",
            "--json",
            file.to_str().unwrap(),
        ],
        "",
    );
    ok(&out);
    let r = &json_lines(&out)[0];
    assert_eq!(r["lines"], 4);
    assert_eq!(r["refused"], 1);
    // Ticks 1, 5 and 6 in the 10-tick window ending at 6: exact at this size.
    assert_eq!(r["estimate"].as_f64(), Some(3.0));
    // Arrivals have no clock and no `refused`.
    let out = tidemark(&["count", "--window", "10", "--json"], "1\n0\n");
    assert!(json_lines(&out)[0].get("refused").is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn invalid_parameters_name_their_flag() {
    for (args, flag) in [
        (vec!["count", "--window", "0"], "--window"),
        (
            vec!["count", "--window", "10", "--epsilon", "1.5"],
            "--epsilon",
        ),
        (
            vec!["count", "--window", "10", "--epsilon", "0"],
            "--epsilon",
        ),
        (vec!["count", "--window", "10", "--every", "0"], "--every"),
    ] {
        let out = tidemark(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{args:?}: {err}");
    }
    let out = tidemark(&["count", "--window", "10", "/no/such/file"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/file"));
}

#[test]
fn a_blank_line_is_no_record_in_any_command() {
    // `count` refused it, `freq` skipped it, `distinct` counted it as an item: every command
    // now skips it, as `run` does (and a bad line after it keeps its own line number).
    let out = tidemark(&["count", "--window", "10", "--json"], "1\n\n0\n1\r\n\n");
    ok(&out);
    assert_eq!(json_lines(&out)[0]["estimate"].as_f64(), Some(2.0));
    let out = tidemark(&["distinct", "--json"], "a\n\nb\n\n");
    assert_eq!(json_lines(&out)[0]["estimate"].as_f64(), Some(2.0));
    let out = tidemark(&["count", "--window", "10"], "1\n\nx\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("<stdin>:3"));
}

#[test]
fn an_unwritable_save_path_is_refused_before_any_input_is_read() {
    // The input file does not exist either: the --save check comes first, so the user learns
    // about it before minutes of input, not after.
    for args in [
        &[
            "distinct",
            "--save",
            "/nonexistent-dir/x.tdmk",
            "/nonexistent-input",
        ][..],
        &[
            "freq",
            "--save",
            "/nonexistent-dir/x.tdmk",
            "/nonexistent-input",
        ][..],
        &[
            "filter",
            "build",
            "--capacity",
            "10",
            "--fpr",
            "0.01",
            "--save",
            "/nonexistent-dir/x.qf",
            "/nonexistent-input",
        ][..],
    ] {
        let out = tidemark(args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--save") && err.contains("/nonexistent-dir/x."),
            "{args:?}: {err}"
        );
        assert!(!err.contains("nonexistent-input"), "{args:?}: {err}");
    }
    // A writable path that did not exist is not left behind by the check when the run fails.
    let dir = std::env::temp_dir().join(format!("tidemark-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x.tdmk");
    let out = tidemark(
        &[
            "distinct",
            "--save",
            path.to_str().unwrap(),
            "/nonexistent-input",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(!path.exists(), "the check left an empty file behind");
    std::fs::remove_dir_all(&dir).unwrap();
}
