//! `tidemark quantile`: every answer against the exact nearest-rank quantile (within α, the
//! bracket holding the truth), windowed answers against exact windows, saved and merged
//! sketches, the refusal to replace a file, and bad lines and flags.

mod common;
use common::{dir, ok, s, tidemark};

use std::process::Output;

use serde_json::Value;
use tidemark::quantile::{nearest_rank, DdSketch, QuantileRing};

/// One JSON line: parsed, and as printed. Numbers are read from the text: serde_json's
/// default parser may round an f64's last digit (its exact parser is a feature these tests
/// do not build), and the answers are compared here bit for bit.
#[derive(Debug, PartialEq)]
struct Row {
    json: Value,
    line: String,
}

impl std::ops::Index<&str> for Row {
    type Output = Value;
    fn index(&self, field: &str) -> &Value {
        &self.json[field]
    }
}

impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.line)
    }
}

impl Row {
    fn has(&self, field: &str) -> bool {
        self.json.get(field).is_some()
    }
}

/// Each stdout line of a command that succeeded.
fn json_lines(out: &Output) -> Vec<Row> {
    ok(out);
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| Row {
            json: serde_json::from_str(l).expect("each line is JSON"),
            line: l.to_string(),
        })
        .collect()
}

/// SplitMix64: the tests' seeded streams.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// Seeded streams of different shapes: lognormal latencies, a Pareto tail, values of both
/// signs around zero with zeros among them, and few distinct values (ties).
fn streams() -> Vec<(&'static str, Vec<f64>)> {
    let mut r = Rng(7);
    let n = 20_000;
    vec![
        (
            "lognormal",
            (0..n).map(|_| (3.0 + r.normal()).exp()).collect(),
        ),
        (
            "pareto",
            (0..n).map(|_| r.unit().powf(-1.0 / 1.1)).collect(),
        ),
        (
            "signed",
            (0..n)
                .map(|i| if i % 17 == 0 { 0.0 } else { r.normal() * 1e3 })
                .collect(),
        ),
        (
            "ties",
            (0..n).map(|_| (r.next() % 12) as f64 * 2.5).collect(),
        ),
    ]
}

fn text(values: &[f64]) -> String {
    // `{}` prints the shortest text that parses back to the same f64.
    values.iter().map(|v| format!("{v}\n")).collect()
}

/// A number field, parsed from its text (the lines are flat objects whose strings hold no
/// commas).
fn num(row: &Row, field: &str) -> f64 {
    let key = format!("\"{field}\":");
    let start = row
        .line
        .find(&key)
        .unwrap_or_else(|| panic!("{field} missing: {row}"))
        + key.len();
    let rest = &row.line[start..];
    let end = rest.find([',', '}']).expect("a JSON object");
    rest[..end]
        .parse()
        .unwrap_or_else(|e| panic!("{field}: {e}: {row}"))
}

/// Checks one quantile row against the sorted values: the nearest rank, the count, the
/// bracket and the α bound (unless the row says its bin collapsed).
fn check_row(row: &Row, sorted: &[f64], alpha: f64, at: &str) {
    let n = sorted.len() as u64;
    let q = num(row, "quantile");
    let rank = nearest_rank(q, n);
    let truth = sorted[rank as usize - 1];
    assert_eq!(row["rank"].as_u64(), Some(rank), "{at}: {row}");
    assert_eq!(row["count"].as_u64(), Some(n), "{at}: {row}");
    assert_eq!(num(row, "confidence"), 1.0, "{at}: {row}");
    let (est, low, high) = (num(row, "estimate"), num(row, "low"), num(row, "high"));
    assert!(low <= truth && truth <= high, "{at}: {truth} outside {row}");
    assert!(low <= est && est <= high, "{at}: {row}");
    match row["method"].as_str().unwrap() {
        "exact" => assert_eq!(est, truth, "{at}: {row}"),
        "ddsketch" => assert!(
            (est - truth).abs() <= alpha * truth.abs() * (1.0 + 1e-12),
            "{at}: {est} not within {alpha} of {truth}: {row}"
        ),
        "ddsketch-collapsed" => {}
        other => panic!("{at}: method {other}: {row}"),
    }
}

const QS: &str = "0,0.001,0.01,0.1,0.25,0.5,0.75,0.9,0.99,0.999,0.9999,1";

#[test]
fn every_answer_is_within_alpha_of_the_exact_quantile_and_bracketed() {
    for (name, values) in streams() {
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        for (flags, alpha) in [
            (vec!["--alpha", "0.01"], 0.01),
            (vec!["--alpha", "0.05"], 0.05),
            (vec![], 0.01),
            // Schema 5: γ = 2^(1/32), α = (γ − 1)/(γ + 1).
            (vec!["--schema", "5"], {
                let g = 2f64.powf(1.0 / 32.0);
                (g - 1.0) / (g + 1.0)
            }),
        ] {
            let mut args = vec!["quantile", "--json", "--quantile", QS];
            args.extend(&flags);
            let out = tidemark(&args, &text(&values));
            ok(&out);
            let rows = json_lines(&out);
            assert_eq!(rows.len(), 12, "{name} {flags:?}");
            for row in &rows {
                check_row(row, &sorted, alpha, &format!("{name} {flags:?}"));
                assert_ne!(row["method"], "ddsketch-collapsed", "{name}: {row}");
            }
            // Ranks 1 and n are the exact minimum and maximum.
            assert_eq!(num(&rows[0], "estimate"), sorted[0]);
            assert_eq!(num(&rows[11], "estimate"), sorted[sorted.len() - 1]);
        }
    }
}

#[test]
fn the_default_quantiles_are_p50_p90_p99_p999() {
    let out = tidemark(&["quantile", "--json"], "1\n2\n3\n");
    ok(&out);
    let qs: Vec<f64> = json_lines(&out)
        .iter()
        .map(|r| num(r, "quantile"))
        .collect();
    assert_eq!(qs, [0.5, 0.9, 0.99, 0.999]);
    // The table carries the same fields.
    let table = tidemark(&["quantile"], "1\n2\n3\n");
    ok(&table);
    let header = String::from_utf8(table.stdout).unwrap();
    let header = header.lines().next().unwrap();
    let cols: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        cols,
        [
            "quantile",
            "estimate",
            "low",
            "high",
            "confidence",
            "method",
            "rank",
            "count"
        ]
    );
}

#[test]
fn a_collapsed_store_says_so_and_its_brackets_still_hold() {
    // Eight bins a store over values spanning 12 decades: the low ranks fall in the collapsed
    // bin, answered with the bracket down to the minimum; the high ranks keep their α bound.
    let mut r = Rng(3);
    let values: Vec<f64> = (0..5_000).map(|_| 10f64.powf(r.unit() * 12.0)).collect();
    let mut sorted = values.clone();
    sorted.sort_by(f64::total_cmp);
    let out = tidemark(
        &["quantile", "--json", "--bins", "8", "--quantile", QS],
        &text(&values),
    );
    ok(&out);
    let rows = json_lines(&out);
    let collapsed = rows
        .iter()
        .filter(|r| r["method"] == "ddsketch-collapsed")
        .count();
    assert!(collapsed >= 5, "{rows:?}");
    for row in &rows {
        check_row(row, &sorted, 0.01, "bins 8");
    }
}

#[test]
fn cdf_rows_bracket_the_exact_fraction() {
    let (_, values) = streams().swap_remove(0);
    let n = values.len() as f64;
    let out = tidemark(
        &["quantile", "--json", "--cdf", "5,20,20.5,100,-1,1e9"],
        &text(&values),
    );
    ok(&out);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 6, "--cdf alone answers no quantile");
    for row in &rows {
        let at = num(row, "at_most");
        let truth = values.iter().filter(|&&v| v <= at).count() as f64 / n;
        let (low, high) = (num(row, "low"), num(row, "high"));
        assert!(low <= truth && truth <= high, "{truth}: {row}");
        assert_eq!(row["count"].as_u64(), Some(values.len() as u64));
        assert!(!row.has("quantile"), "{row}");
    }
    assert_eq!(num(&rows[4], "estimate"), 0.0);
    assert_eq!(num(&rows[5], "estimate"), 1.0);
}

#[test]
fn an_empty_input_answers_its_count_and_no_estimate() {
    let out = tidemark(
        &["quantile", "--json", "--quantile", "0.5", "--cdf", "3"],
        "",
    );
    ok(&out);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(row["count"].as_u64(), Some(0), "{row}");
        for absent in ["estimate", "low", "high", "rank"] {
            assert!(!row.has(absent), "{row}");
        }
    }
}

/// The exact model of `--window W --bucket B --every E` over `events` (in arrival order):
/// the rows' ticks with the sorted values of their windows and the refusals so far,
/// following the command's rule (answers at each multiple of E the ticks cross, at the tick
/// before it, and at the end at the newest tick; an event older than the ring is refused).
fn exact_windows(events: &[(u64, f64)], w: u64, b: u64, every: u64) -> Vec<(u64, Vec<f64>, u64)> {
    let buckets = w.div_ceil(b);
    let mut taken: Vec<(u64, f64)> = Vec::new();
    let mut newest: Option<u64> = None;
    let mut refused = 0;
    let mut rows = Vec::new();
    let window = |taken: &[(u64, f64)], now: u64| {
        let last = now / b;
        let first = last.saturating_sub(buckets - 1);
        let mut v: Vec<f64> = taken
            .iter()
            .filter(|(t, _)| (first..=last).contains(&(t / b)))
            .map(|&(_, v)| v)
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    for &(t, v) in events {
        if let Some(n) = newest {
            let mut m = (n / every + 1) * every;
            while m <= t {
                rows.push((m - 1, window(&taken, m - 1), refused));
                m += every;
            }
        }
        if newest.is_some_and(|n| n / b >= t / b + buckets) {
            refused += 1;
        } else {
            taken.push((t, v));
            newest = newest.max(Some(t));
        }
    }
    let now = newest.unwrap_or(0);
    rows.push((now, window(&taken, now), refused));
    rows
}

#[test]
fn windowed_answers_match_the_exact_windows() {
    // 4,000 ticks, 3 events a tick; every 7th event up to 90 ticks late; a few far too old
    // (refused). The latency level shifts at tick 2,000.
    let mut r = Rng(11);
    let mut events: Vec<(u64, f64)> = Vec::new();
    for i in 0..12_000u64 {
        let now = i / 3;
        let tick = if i % 7 == 0 {
            now.saturating_sub(r.next() % 91)
        } else {
            now
        };
        let level = if now < 2_000 { 2.0 } else { 4.0 };
        events.push((tick, (level + r.normal()).exp()));
        if i % 2_500 == 2_499 {
            events.push((now.saturating_sub(1_000), 1.0)); // older than the ring: refused
        }
    }
    let input: String = events.iter().map(|(t, v)| format!("{t} {v}\n")).collect();
    let (w, b, every) = (600u64, 60u64, 250u64);
    let expected = exact_windows(&events, w, b, every);
    let out = tidemark(
        &[
            "quantile",
            "--json",
            "--window",
            &w.to_string(),
            "--bucket",
            &b.to_string(),
            "--every",
            &every.to_string(),
            "--quantile",
            "0.5,0.9,0.99,1",
        ],
        &input,
    );
    ok(&out);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 4 * expected.len());
    assert!(expected.len() > 10);
    assert!(expected.last().unwrap().2 > 0, "some events were refused");
    for (chunk, (tick, sorted, refused)) in rows.chunks(4).zip(&expected) {
        for row in chunk {
            let at = format!("tick {tick}");
            assert_eq!(row["tick"].as_u64(), Some(*tick), "{at}: {row}");
            assert_eq!(row["refused"].as_u64(), Some(*refused), "{at}: {row}");
            check_row(row, sorted, 0.01, &at);
        }
    }
}

#[test]
fn an_empty_window_answers_its_count_and_no_estimate() {
    // The last row, a thousand ticks after the only event, is of an empty window.
    let out = tidemark(
        &[
            "quantile",
            "--json",
            "--window",
            "10",
            "--every",
            "500",
            "--quantile",
            "0.5",
        ],
        "5 1.5\n1000 2.5\n",
    );
    ok(&out);
    let rows = json_lines(&out);
    assert_eq!(rows[0]["tick"].as_u64(), Some(499));
    assert_eq!(rows[0]["count"].as_u64(), Some(0));
    assert!(!rows[0].has("estimate"));
    let last = rows.last().unwrap();
    assert_eq!(last["tick"].as_u64(), Some(1000));
    assert_eq!(num(last, "estimate"), 2.5);
}

#[test]
fn saved_sketches_are_the_core_envelope_and_merge_into_the_whole() {
    let d = dir("quantile-save");
    let p = |name: &str| d.join(name);
    let (_, values) = streams().swap_remove(1);
    let (a, b) = values.split_at(7_000);
    for (name, part) in [("a.txt", a), ("b.txt", b), ("all.txt", &values[..])] {
        std::fs::write(p(name), text(part)).unwrap();
    }
    for name in ["a", "b", "all"] {
        let out = tidemark(
            &[
                "quantile",
                "--save",
                s(&p(&format!("{name}.tdmk"))),
                s(&p(&format!("{name}.txt"))),
            ],
            "",
        );
        ok(&out);
    }
    // The file is the core's envelope of the same values, byte for byte.
    let mut core = DdSketch::new(0.01).unwrap();
    for &v in &values {
        core.insert(v).unwrap();
    }
    let saved = std::fs::read(p("all.tdmk")).unwrap();
    assert_eq!(saved, core.to_bytes());
    assert_eq!(DdSketch::from_bytes(&saved).unwrap(), core);

    // The union of the parts answers as the whole did.
    let answers = |args: &[&str]| {
        let out = tidemark(args, "");
        ok(&out);
        json_lines(&out)
    };
    let whole = answers(&["quantile", "--json", "--quantile", QS, s(&p("all.txt"))]);
    let merged = answers(&[
        "quantile",
        "--json",
        "--quantile",
        QS,
        "--merge",
        s(&p("a.tdmk")),
        s(&p("b.tdmk")),
    ]);
    assert_eq!(whole, merged);
    let mut sorted = values.clone();
    sorted.sort_by(f64::total_cmp);
    for row in &merged {
        check_row(row, &sorted, 0.01, "merged");
    }

    // The union saved, and one file merged alone: its bytes unchanged.
    ok(&tidemark(
        &[
            "quantile",
            "--merge",
            "--save",
            s(&p("one.tdmk")),
            s(&p("all.tdmk")),
        ],
        "",
    ));
    assert_eq!(std::fs::read(p("one.tdmk")).unwrap(), saved);

    // A schema sketch saves and merges too; a cubic one does not merge with it, and the
    // message names the file and both mappings.
    ok(&tidemark(
        &[
            "quantile",
            "--schema",
            "5",
            "--save",
            s(&p("s5.tdmk")),
            s(&p("a.txt")),
        ],
        "",
    ));
    let out = tidemark(
        &["quantile", "--merge", s(&p("a.tdmk")), s(&p("s5.tdmk"))],
        "",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("s5.tdmk") && err.contains("schema 5"), "{err}");
    assert!(err.contains("alpha 0.01"), "{err}");
    assert!(out.stdout.is_empty());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_saved_ring_is_the_core_envelope_and_merges_as_its_last_window() {
    let d = dir("quantile-ring");
    let p = |name: &str| d.join(name);
    // 3,000 ticks, two events a tick, a shift in level at tick 1,500.
    let mut r = Rng(5);
    let events: Vec<(u64, f64)> = (0..6_000u64)
        .map(|i| {
            let level = if i < 3_000 { 1.0 } else { 3.0 };
            (i / 2, (level + r.normal()).exp())
        })
        .collect();
    let input: String = events.iter().map(|(t, v)| format!("{t} {v}\n")).collect();
    std::fs::write(p("events.txt"), &input).unwrap();
    let windowed = json_lines(&tidemark(
        &[
            "quantile",
            "--json",
            "--window",
            "600",
            "--bucket",
            "60",
            "--quantile",
            QS,
            "--save",
            s(&p("ring.tdmk")),
            s(&p("events.txt")),
        ],
        "",
    ));
    // The file is the core ring's envelope of the same events, byte for byte.
    let mut ring = QuantileRing::new(0.01, 60, 10).unwrap();
    for &(t, v) in &events {
        ring.insert(v, t).unwrap();
    }
    let saved = std::fs::read(p("ring.tdmk")).unwrap();
    assert_eq!(saved, ring.to_bytes());

    // Merged alone, the ring answers for its last window: the windowed command's last rows.
    let merged = json_lines(&tidemark(
        &[
            "quantile",
            "--json",
            "--quantile",
            QS,
            "--merge",
            s(&p("ring.tdmk")),
        ],
        "",
    ));
    assert_eq!(merged.len(), windowed.len());
    for (m, w) in merged.iter().zip(&windowed) {
        for field in [
            "quantile", "estimate", "low", "high", "method", "rank", "count",
        ] {
            assert_eq!(m[field], w[field], "{field}: {m} against {w}");
        }
    }
    // With a sketch of the same mapping: the union of the window and the sketch's values.
    let last_window: Vec<f64> = events
        .iter()
        .filter(|(t, _)| *t >= 2_400)
        .map(|&(_, v)| v)
        .collect();
    let extra: Vec<f64> = (1..=500).map(|i| i as f64 * 0.5).collect();
    std::fs::write(p("extra.txt"), text(&extra)).unwrap();
    ok(&tidemark(
        &[
            "quantile",
            "--save",
            s(&p("extra.tdmk")),
            s(&p("extra.txt")),
        ],
        "",
    ));
    let union = json_lines(&tidemark(
        &[
            "quantile",
            "--json",
            "--quantile",
            QS,
            "--merge",
            s(&p("ring.tdmk")),
            s(&p("extra.tdmk")),
        ],
        "",
    ));
    let mut sorted: Vec<f64> = last_window.iter().chain(&extra).copied().collect();
    sorted.sort_by(f64::total_cmp);
    for row in &union {
        check_row(row, &sorted, 0.01, "ring and sketch");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_save_refuses_a_file_already_there_before_reading_and_force_replaces_it() {
    let d = dir("quantile-existing");
    let path = d.join("precious");
    std::fs::write(&path, b"what the user had").unwrap();
    let missing = d.join("never-read.txt");
    let out = tidemark(&["quantile", "--save", s(&path), s(&missing)], "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--save") && err.contains("precious") && err.contains("--force"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read(&path).unwrap(), b"what the user had");

    // The same with --merge: the union is not written over the file.
    let input = d.join("in.txt");
    std::fs::write(&input, "1\n2\n").unwrap();
    let sketch = d.join("s.tdmk");
    ok(&tidemark(
        &["quantile", "--save", s(&sketch), s(&input)],
        "",
    ));
    let out = tidemark(&["quantile", "--merge", "--save", s(&path), s(&sketch)], "");
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&path).unwrap(), b"what the user had");

    ok(&tidemark(
        &["quantile", "--save", s(&path), "--force", s(&input)],
        "",
    ));
    assert!(DdSketch::from_bytes(&std::fs::read(&path).unwrap()).is_ok());
    // Nothing else was left in the directory (no temporary file).
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["in.txt", "precious", "s.tdmk"]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn merge_refuses_what_is_not_a_quantile_sketch() {
    let d = dir("quantile-merge-refusals");
    let words = d.join("words.txt");
    std::fs::write(&words, "a\nb\n").unwrap();
    let hll = d.join("d.hll");
    ok(&tidemark(&["distinct", "--save", s(&hll), s(&words)], ""));
    let cases: [(&[&str], &str); 4] = [
        (&["quantile", "--merge", s(&hll)], "HyperLogLog"),
        (&["quantile", "--merge", s(&words)], "not a tidemark sketch"),
        (&["quantile", "--merge"], "--merge"),
        (
            &["quantile", "--merge", "--alpha", "0.02", s(&hll)],
            "--alpha",
        ),
    ];
    for (args, names) in cases {
        let out = tidemark(args, "");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(names), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_values_name_the_file_and_line() {
    let d = dir("quantile-bad-lines");
    let bad = [
        "abc", "12ms", "   ", "NaN", "nan", "inf", "-inf", "infinity", "1e400", "-1e400",
    ];
    for (i, value) in bad.iter().enumerate() {
        let file = d.join(format!("v{i}.txt"));
        std::fs::write(&file, format!("1.5\n{value}\n3\n")).unwrap();
        let out = tidemark(&["quantile", s(&file)], "");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value:?}: {err}");
        assert!(
            err.contains(&format!("{}:2:", file.display())),
            "{value:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{value:?}: {err}");
        assert!(out.stdout.is_empty(), "{value:?}");
        // The windowed form names the line the same way.
        let out = tidemark(
            &["quantile", "--window", "60"],
            &format!("1 1.5\n2 {value}\n"),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value:?}: {err}");
        assert!(err.contains("<stdin>:2:"), "{value:?}: {err}");
    }
    for (input, names) in [
        ("5\n", "expected `TICK VALUE`"),
        ("5 \n", "empty value"),
        ("x 5\n", "tick"),
        ("-1 5\n", "tick"),
    ] {
        let out = tidemark(&["quantile", "--window", "60"], input);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{input:?}: {err}");
        assert!(err.contains("<stdin>:1:") && err.contains(names), "{err}");
    }
    // A huge bad line is quoted in part.
    let long = "x".repeat(100_000);
    let out = tidemark(&["quantile"], &format!("{long}\n"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.len() < 300, "{}", err.len());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_flags_name_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["--alpha", "0"], "--alpha"),
        (&["--alpha", "1"], "--alpha"),
        (&["--alpha", "1.5"], "--alpha"),
        (&["--alpha=-0.01"], "--alpha"),
        (&["--alpha", "nan"], "--alpha"),
        (&["--alpha", "abc"], "--alpha"),
        (&["--bins", "0"], "--bins"),
        (&["--bins", "1099511627776"], "--bins"), // 2^40
        (&["--bins", "-3"], "--bins"),
        (&["--quantile", "1.5"], "--quantile"),
        (&["--quantile", "-0.1"], "--quantile"),
        (&["--quantile", "0.5,2"], "--quantile"),
        (&["--quantile", "nan"], "--quantile"),
        (&["--schema", "9"], "--schema"),
        (&["--schema", "-5"], "--schema"),
        (&["--schema", "300"], "--schema"),
        (&["--schema", "5", "--alpha", "0.01"], "--alpha"),
        (&["--cdf", "inf"], "--cdf"),
        (&["--cdf", "nan"], "--cdf"),
        (&["--every", "10"], "--every"),
        (&["--bucket", "10"], "--bucket"),
        (&["--window", "0"], "--window"),
        (&["--window", "60", "--bucket", "0"], "--bucket"),
        (&["--window", "60", "--bucket", "61"], "--bucket"),
        (&["--window", "60", "--every", "0"], "--every"),
        (&["--window", "10000000", "--bucket", "1"], "--bucket"),
        (&["--window", "60", "--merge", "x.tdmk"], "--window"),
    ];
    for (flags, names) in cases {
        let mut args = vec!["quantile"];
        args.extend_from_slice(flags);
        let out = tidemark(&args, "1\n2\n");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(names), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
