//! `tidemark distinct` end to end: exact small counts, brackets around large ones, saved
//! sketches (native and Redis) merging into the union, and errors that exit 2.

mod common;
use common::{lines, ok, temp, tidemark};

use std::collections::HashSet;
use std::process::Output;

fn one_json(out: &Output) -> serde_json::Value {
    ok(out);
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    serde_json::from_str(lines[0]).unwrap()
}

#[test]
fn small_inputs_are_counted_exactly_with_every_field() {
    // Repeated lines, an empty line (no record: skipped) and CRLF endings: distinct lines are
    // what counts.
    let input = "a\nb\na\n\nc\r\nb\n";
    let truth = ["a", "b", "c"].iter().collect::<HashSet<_>>().len() as f64;
    let r = one_json(&tidemark(&["distinct", "--json"], input.as_bytes()));
    for field in [
        "estimate",
        "low",
        "high",
        "std_error",
        "representation",
        "bytes",
    ] {
        assert!(r.get(field).is_some(), "missing {field}: {r}");
    }
    assert_eq!(r["estimate"].as_f64().unwrap(), truth);
    assert_eq!(r["low"].as_f64().unwrap(), truth);
    assert_eq!(r["high"].as_f64().unwrap(), truth);
    assert_eq!(r["std_error"].as_f64().unwrap(), 0.0);
    assert_eq!(r["representation"], "exact");
}

#[test]
fn large_inputs_get_a_bracket_of_the_stated_width() {
    let n = 60_000u64;
    let r = one_json(&tidemark(
        &["distinct", "--precision", "10", "--json"],
        lines(0..n).as_bytes(),
    ));
    let (est, low, high, se) = (
        r["estimate"].as_f64().unwrap(),
        r["low"].as_f64().unwrap(),
        r["high"].as_f64().unwrap(),
        r["std_error"].as_f64().unwrap(),
    );
    assert_eq!(r["representation"], "dense");
    // HIP at p = 10: σ ≈ 0.83/32 = 2.6%; 5σ is out of reach for a fixed input.
    assert!((est - n as f64).abs() < 5.0 * 0.026 * n as f64, "{r}");
    assert!((high - est - 1.959_964 * se).abs() < 1e-6 * est);
    assert!(low < est && est < high);
    assert!(r["bytes"].as_u64().unwrap() >= 1024);
}

#[test]
fn saved_sketches_merge_into_the_union_native_and_redis() {
    let (a, b, c) = (temp("a.tdmk"), temp("b.tdmk"), temp("c.hyll"));
    let (a_s, b_s, c_s) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    );
    // Exact unions count exactly: 0..300 ∪ 200..500 = 500 lines.
    assert!(
        tidemark(&["distinct", "--save", a_s], lines(0..300).as_bytes())
            .status
            .success()
    );
    assert!(
        tidemark(&["distinct", "--save", b_s], lines(200..500).as_bytes())
            .status
            .success()
    );
    let r = one_json(&tidemark(&["distinct", "--merge", a_s, b_s, "--json"], b""));
    assert_eq!(r["estimate"].as_f64().unwrap(), 500.0);

    // Redis values merge with Redis values; the merged count equals tidemark's own Redis-mode
    // count of the union's items (not a count from a Redis server: `hll_redis.rs` checks
    // tidemark's Redis mode against PFADD/PFCOUNT).
    let d = temp("d.hyll");
    let d_s = d.to_str().unwrap();
    assert!(tidemark(
        &["distinct", "--redis", "--save", c_s],
        lines(0..3_000).as_bytes()
    )
    .status
    .success());
    assert!(tidemark(
        &["distinct", "--redis", "--save", d_s],
        lines(2_000..9_000).as_bytes()
    )
    .status
    .success());
    assert!(std::fs::read(&c).unwrap().starts_with(b"HYLL"));
    let merged = one_json(&tidemark(&["distinct", "--merge", c_s, d_s, "--json"], b""));
    let all = one_json(&tidemark(
        &["distinct", "--redis", "--json"],
        lines(0..9_000).as_bytes(),
    ));
    assert_eq!(merged["estimate"], all["estimate"]);

    // A native and a Redis sketch hash differently: refused, exit 2, naming the file.
    let out = tidemark(&["distinct", "--merge", a_s, c_s], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("c.hyll"));
}

#[test]
fn bad_flags_and_bad_files_exit_2() {
    let junk = temp("junk.bin");
    std::fs::write(&junk, b"not a sketch").unwrap();
    let junk_s = junk.to_str().unwrap();
    for args in [
        vec!["distinct", "--precision", "3"],
        vec!["distinct", "--precision", "19"],
        vec!["distinct", "--redis", "--precision", "12"],
        vec!["distinct", "--confidence", "1.5"],
        vec!["distinct", "--merge"],
        vec!["distinct", "--merge", junk_s],
        vec!["distinct", "--merge", "/nonexistent/file"],
        vec!["distinct", "--bogus"],
    ] {
        let out = tidemark(&args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    // A line that is not UTF-8 names the file and line.
    let bad = temp("bad.txt");
    std::fs::write(&bad, b"ok\n\xff\xfe\n").unwrap();
    let out = tidemark(&["distinct", bad.to_str().unwrap()], b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.txt:2"));
}

#[test]
fn binary_integers_hash_as_their_eight_bytes() {
    // Integers across the range, negative ones as two's complement, some repeated.
    let xs: Vec<i128> = (0..5_000i128)
        .map(|i| (i * 7_919) % 3_001 - 1_000)
        .chain([i64::MIN as i128, u64::MAX as i128, 0])
        .collect();
    let input: String = xs.iter().map(|x| format!("{x}\n")).collect();
    let saved = temp("binary.tdmk");
    let out = tidemark(
        &[
            "distinct",
            "--precision",
            "12",
            "--binary-integers",
            "--save",
            saved.to_str().unwrap(),
        ],
        input.as_bytes(),
    );
    ok(&out);
    // The model: the library's insert_u64 of each word.
    let mut model = tidemark::cardinality::Hll::new(12).unwrap();
    for &x in &xs {
        model.insert_u64(if x < 0 { x as i64 as u64 } else { x as u64 });
    }
    assert_eq!(std::fs::read(&saved).unwrap(), model.to_bytes());
    let distinct = xs.iter().collect::<HashSet<_>>().len() as f64;
    let r = one_json(&tidemark(
        &["distinct", "--binary-integers", "--json"],
        input.as_bytes(),
    ));
    assert!(r["low"].as_f64().unwrap() <= distinct && distinct <= r["high"].as_f64().unwrap());
    // Not an integer: named with its line; not with --redis.
    let out = tidemark(&["distinct", "--binary-integers"], "1\n2\nx3\n");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(":3") && err.contains("x3"), "{err}");
    let out = tidemark(&["distinct", "--binary-integers", "--redis"], "1\n");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn exaloglog_counts_saves_merges_and_windows() {
    // Exact while small, with the sketch named.
    let r = one_json(&tidemark(
        &["distinct", "--sketch", "exaloglog", "--json"],
        lines(0..100).as_bytes(),
    ));
    assert_eq!(r["estimate"].as_f64().unwrap(), 100.0);
    assert_eq!(r["representation"], "exact");
    assert_eq!(r["sketch"], "exaloglog");
    // Dense: the martingale at p = 11, σ = 0.318/√2048 = 0.70%; 5σ is out of reach.
    let n = 200_000u64;
    let r = one_json(&tidemark(
        &["distinct", "--sketch", "exaloglog", "--json"],
        lines(0..n).as_bytes(),
    ));
    assert_eq!(r["representation"], "dense");
    assert_eq!(r["method"], "exaloglog-martingale");
    let est = r["estimate"].as_f64().unwrap();
    assert!((est - n as f64).abs() < 5.0 * 0.0070 * n as f64, "{r}");
    // Saved sketches merge into the union (exactly, while exact)...
    let (a, b, h) = (temp("e1.tdmk"), temp("e2.tdmk"), temp("h.tdmk"));
    let (a_s, b_s, h_s) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        h.to_str().unwrap(),
    );
    for (path, range) in [(a_s, 0..300u64), (b_s, 200..500)] {
        ok(&tidemark(
            &["distinct", "--sketch", "exaloglog", "--save", path],
            lines(range).as_bytes(),
        ));
    }
    let r = one_json(&tidemark(&["distinct", "--merge", a_s, b_s, "--json"], b""));
    assert_eq!(r["estimate"].as_f64().unwrap(), 500.0);
    assert_eq!(r["sketch"], "exaloglog");
    // A sketch with fewer history bits (d = 16, written by the library) merges at its d, and
    // the note says so.
    let d16 = temp("e-d16.tdmk");
    let mut e = tidemark::cardinality::ExaLogLog::with_params(2, 16, 11).unwrap();
    lines(500..600).lines().for_each(|l| e.insert(l.as_bytes()));
    std::fs::write(&d16, e.to_bytes()).unwrap();
    let out = tidemark(
        &["distinct", "--merge", a_s, d16.to_str().unwrap(), "--json"],
        b"",
    );
    let r = one_json(&out);
    assert_eq!(r["estimate"].as_f64().unwrap(), 400.0);
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(
        note.contains("d = 16") && note.contains("d = 20") && note.contains("keeps the fewest"),
        "{note}"
    );
    // ...but not with a HyperLogLog, nor under Redis or the sliding sketch.
    ok(&tidemark(
        &["distinct", "--save", h_s],
        lines(0..10).as_bytes(),
    ));
    let out = tidemark(&["distinct", "--merge", a_s, h_s], b"");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("h.tdmk") && err.contains("ExaLogLog"), "{err}");
    for extra in [&["--redis"][..], &["--window", "10", "--sliding"][..]] {
        let mut args = vec!["distinct", "--sketch", "exaloglog"];
        args.extend_from_slice(extra);
        let out = tidemark(&args, b"");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--sketch"));
    }
    // A ring of ExaLogLogs over a window: the last 10 ticks hold items 90..100.
    let input: String = (0..100u64).map(|t| format!("{t} item{t}\n")).collect();
    let r = one_json(&tidemark(
        &[
            "distinct",
            "--sketch",
            "exaloglog",
            "--window",
            "10",
            "--bucket",
            "1",
            "--json",
        ],
        input.as_bytes(),
    ));
    assert_eq!(r["estimate"].as_f64().unwrap(), 10.0);
    assert_eq!(r["structure"], "ring");
    assert_eq!(r["sketch"], "exaloglog");
}
