//! `tidemark distinct --window`: the ring and the sliding sketch against exact windowed
//! counts, refused late events, periodic output and errors.

mod common;
use common::{json_lines, ok, tidemark};

use std::collections::HashMap;
use std::process::Output;

fn rows(out: &Output) -> Vec<serde_json::Value> {
    ok(out);
    json_lines(out)
}

/// 5 events a tick for 600 ticks from 300 users (a fixed arithmetic pattern), and the exact
/// distinct count of the last `w` ticks ending at tick 599.
fn events() -> (String, impl Fn(u64) -> usize) {
    let ev: Vec<(u64, u64)> = (0..600u64)
        .flat_map(|t| (0..5u64).map(move |k| (t, (t * 7 + k * 131) % 300)))
        .collect();
    let text = ev.iter().map(|(t, u)| format!("{t} user{u}\n")).collect();
    let exact = move |w: u64| {
        let mut last: HashMap<u64, u64> = HashMap::new();
        for &(t, u) in &ev {
            last.insert(u, t);
        }
        last.values().filter(|&&t| t + w > 599).count()
    };
    (text, exact)
}

#[test]
fn ring_and_sliding_bracket_the_exact_window() {
    let (text, exact) = events();
    for w in [10u64, 60, 300] {
        let truth = exact(w) as f64;
        // Ring with 1-tick buckets: whole buckets are exact ticks; small sets count exactly.
        let ring = rows(&tidemark(
            &[
                "distinct",
                "--window",
                &w.to_string(),
                "--bucket",
                "1",
                "--json",
            ],
            &text,
        ));
        let r = ring.last().unwrap();
        assert_eq!(r["estimate"].as_f64().unwrap(), truth, "ring, window {w}");
        let sliding = rows(&tidemark(
            &[
                "distinct",
                "--window",
                &w.to_string(),
                "--sliding",
                "--json",
            ],
            &text,
        ));
        let s = sliding.last().unwrap();
        let (low, high) = (s["low"].as_f64().unwrap(), s["high"].as_f64().unwrap());
        // p = 14: σ ≈ 0.8%; the 95% bracket should hold; allow the 5% miss by also accepting
        // 3σ, which a seeded run cannot plausibly exceed.
        let sigma = s["std_error"].as_f64().unwrap();
        let est = s["estimate"].as_f64().unwrap();
        assert!(
            (low <= truth && truth <= high) || (est - truth).abs() <= 3.0 * sigma,
            "sliding, window {w}: {est} [{low}, {high}] vs {truth}"
        );
        assert_eq!(s["structure"], "sliding");
    }
}

#[test]
fn late_events_are_refused_and_counted_not_misplaced() {
    // Window 10 ticks in buckets of 1: an event at tick 0 after tick 100 has left the ring.
    let input = "100 a\n101 b\n0 c\n95 d\n";
    let r = rows(&tidemark(
        &["distinct", "--window", "10", "--bucket", "1", "--json"],
        input,
    ));
    let last = r.last().unwrap();
    assert_eq!(last["refused"].as_u64(), Some(1));
    // a, b and d (tick 95 is inside (91, 101]); c was refused.
    assert_eq!(last["estimate"].as_f64(), Some(3.0));
}

#[test]
fn every_prints_at_each_crossing() {
    let (text, _) = events();
    let r = rows(&tidemark(
        &["distinct", "--window", "60", "--every", "100", "--json"],
        &text,
    ));
    // Crossings at 100, 200, …, 500 (printed at 99, 199, …) and the end at 599.
    let ticks: Vec<u64> = r.iter().map(|x| x["tick"].as_u64().unwrap()).collect();
    assert_eq!(ticks, [99, 199, 299, 399, 499, 599]);
}

#[test]
fn a_gap_in_the_ticks_prints_the_emptied_window_once() {
    // Ticks 0 and 10^9, every tick a mark: rows up to two windows after tick 0 (the window
    // empties), one for the empty window, not 10^9 of them; then the end.
    for mode in [&["--sliding"][..], &[][..]] {
        let args = [
            &["distinct", "--window", "10", "--every", "1", "--json"][..],
            mode,
        ]
        .concat();
        let r = rows(&tidemark(&args, "0 a\n1000000000 b\n"));
        let ticks: Vec<u64> = r.iter().map(|x| x["tick"].as_u64().unwrap()).collect();
        let expected: Vec<u64> = (0..=20).chain([1_000_000_000]).collect();
        assert_eq!(ticks, expected, "{mode:?}");
        assert_eq!(r[20]["estimate"].as_f64(), Some(0.0), "{mode:?}");
        // One item in the last window: inside its bracket.
        let (low, high) = (
            r[21]["low"].as_f64().unwrap(),
            r[21]["high"].as_f64().unwrap(),
        );
        assert!(low <= 1.0 && 1.0 <= high, "{mode:?}: {}", r[21]);
    }
}

#[test]
fn every_stops_at_the_last_tick_of_time() {
    // The next multiple of 4 after 2^64 − 2 is past u64::MAX: no mark, no overflow, the end.
    let r = rows(&tidemark(
        &["distinct", "--window", "10", "--every", "4", "--json"],
        "18446744073709551614 a\n18446744073709551615 b\n",
    ));
    let ticks: Vec<u64> = r.iter().map(|x| x["tick"].as_u64().unwrap()).collect();
    assert_eq!(ticks, [u64::MAX]);
    assert_eq!(r[0]["estimate"].as_f64(), Some(2.0));
    // Every tick a multiple of 1: after the last tick there is no next one.
    let r = rows(&tidemark(
        &["distinct", "--window", "10", "--every", "1", "--json"],
        "18446744073709551615 a\n18446744073709551615 b\n",
    ));
    let ticks: Vec<u64> = r.iter().map(|x| x["tick"].as_u64().unwrap()).collect();
    assert_eq!(ticks, [u64::MAX]);
}

#[test]
fn rings_answer_at_the_confidence_asked() {
    // Precision 4, so that 2,000 users make the window's sketch dense (a probabilistic
    // bracket, not an exact count).
    let text: String = (0..2000u64).map(|i| format!("{} u{i}\n", i / 4)).collect();
    for sketch in ["hyperloglog", "exaloglog"] {
        let at = |c: &str| {
            let args = [
                "distinct",
                "--window",
                "600",
                "--precision",
                "4",
                "--sketch",
                sketch,
                "--confidence",
                c,
                "--json",
            ];
            rows(&tidemark(&args, &text)).pop().unwrap()
        };
        let (half, usual) = (at("0.5"), at("0.95"));
        assert_eq!(half["confidence"].as_f64(), Some(0.5), "{sketch}: {half}");
        let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap();
        // One standard error whatever the confidence; the bracket's half-width is z times it.
        let (se_half, se_usual) = (f(&half, "std_error"), f(&usual, "std_error"));
        assert!(
            (se_half - se_usual).abs() <= 1e-9 * se_usual,
            "{sketch}: {half} {usual}"
        );
        let ratio =
            (f(&half, "high") - f(&half, "estimate")) / (f(&usual, "high") - f(&usual, "estimate"));
        let z = 0.674_489_750_196_081_7 / 1.959_963_984_540_054;
        assert!((ratio - z).abs() < 1e-9, "{sketch}: {ratio} against {z}");
    }
}

#[test]
fn bad_lines_and_flags_exit_2_naming_them() {
    let out = tidemark(&["distinct", "--window", "10"], "1 a\nnot-a-tick b\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("<stdin>:2"));
    let out = tidemark(&["distinct", "--window", "10"], "7\n");
    assert_eq!(out.status.code(), Some(2));
    for (args, flag) in [
        (vec!["distinct", "--window", "0"], "--window"),
        (
            vec!["distinct", "--window", "10", "--bucket", "11"],
            "--bucket",
        ),
        (
            vec!["distinct", "--window", "10", "--sliding", "--bucket", "2"],
            "--bucket",
        ),
        (
            vec!["distinct", "--window", "10", "--every", "0"],
            "--every",
        ),
        (vec!["distinct", "--sliding"], "--sliding"),
        (
            vec!["distinct", "--window", "10", "--precision", "3"],
            "--precision",
        ),
    ] {
        let out = tidemark(&args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(flag),
            "{args:?}"
        );
    }
}
