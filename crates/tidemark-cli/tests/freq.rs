//! `tidemark freq` end to end against exact counts: point, heavy, top, range, quantile, join
//! and save; JSON fields; errors that name the line or the flag with exit code 2.

mod common;
use common::tidemark;

use std::collections::HashMap;
use std::process::Output;

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    common::ok(out);
    common::json_lines(out)
}

fn of_kind<'a>(rows: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    rows.iter().filter(|r| r["kind"] == kind).collect()
}

/// A skewed stream: item `k{i}` appears `1000 / (i + 1)` times, some as `ITEM COUNT` lines.
fn skewed() -> (String, HashMap<String, i64>) {
    let mut input = String::new();
    let mut exact = HashMap::new();
    for i in 0..200u32 {
        let n = 1000 / (i as i64 + 1);
        let item = format!("k{i}");
        if i % 2 == 0 {
            input.push_str(&format!("{item} {n}\n"));
        } else {
            for _ in 0..n {
                input.push_str(&format!("{item}\n"));
            }
        }
        exact.insert(item, n);
    }
    (input, exact)
}

#[test]
fn point_queries_bracket_the_truth_and_never_undercount() {
    let (input, exact) = skewed();
    let out = tidemark(
        &[
            "freq",
            "--epsilon",
            "0.01",
            "--json",
            "--query",
            "k0",
            "--query",
            "k7",
            "--query",
            "absent",
        ],
        &input,
    );
    let rows = json_lines(&out);
    let total: i64 = exact.values().sum();
    assert_eq!(of_kind(&rows, "total")[0]["estimate"], total as f64);
    for r in of_kind(&rows, "point") {
        let item = r["item"].as_str().unwrap();
        let truth = *exact.get(item).unwrap_or(&0) as f64;
        let (v, lo, hi) = (
            r["estimate"].as_f64().unwrap(),
            r["low"].as_f64().unwrap(),
            r["high"].as_f64().unwrap(),
        );
        assert!(v >= truth && hi == v && lo <= truth, "{r}");
        assert!(v - truth <= 0.01 * total as f64, "{r}");
    }
}

#[test]
fn heavy_hitters_and_top_k_match_exact_counts() {
    let (input, exact) = skewed();
    let total: i64 = exact.values().sum();
    let out = tidemark(&["freq", "--json", "--heavy", "0.05", "--top", "3"], &input);
    let rows = json_lines(&out);
    let heavy: Vec<&str> = of_kind(&rows, "heavy")
        .iter()
        .map(|r| r["item"].as_str().unwrap())
        .collect();
    for (item, &c) in &exact {
        if c as f64 >= 0.05 * total as f64 {
            assert!(heavy.contains(&item.as_str()), "missed {item}");
        }
    }
    let top: Vec<&str> = of_kind(&rows, "top")
        .iter()
        .map(|r| r["item"].as_str().unwrap())
        .collect();
    assert_eq!(top, ["k0", "k1", "k2"]);
}

#[test]
fn ranges_and_quantiles_over_integer_items() {
    // Item x appears x % 10 + 1 times, x in 0..500.
    let mut input = String::new();
    let mut exact = vec![0i64; 500];
    for x in 0..500u64 {
        let c = (x % 10 + 1) as i64;
        input.push_str(&format!("{x} {c}\n"));
        exact[x as usize] = c;
    }
    let out = tidemark(
        &[
            "freq",
            "--json",
            "--bits",
            "9",
            "--epsilon",
            "0.05",
            "--range",
            "10",
            "99",
            "--range",
            "0",
            "499",
            "--quantile",
            "0.5",
        ],
        &input,
    );
    let rows = json_lines(&out);
    let ranges = of_kind(&rows, "range");
    let truth: i64 = exact[10..=99].iter().sum();
    assert_eq!(ranges[0]["item"], "10..=99");
    assert!(ranges[0]["estimate"].as_f64().unwrap() >= truth as f64);
    assert!(ranges[0]["low"].as_f64().unwrap() <= truth as f64);
    assert_eq!(
        ranges[1]["estimate"].as_f64().unwrap(),
        exact.iter().sum::<i64>() as f64
    );
    let row = of_kind(&rows, "quantile")[0];
    assert_eq!(row["quantile"], 0.5);
    let q = row["value"].as_u64().unwrap() as usize;
    let half = exact.iter().sum::<i64>() as f64 / 2.0;
    let before: i64 = exact[..q].iter().sum();
    assert!((before as f64) < half, "quantile {q} is past the median");
    // The rank of the value, bracketed: the exact rank Σ_{i ≤ q} lies in [low, high].
    let rank: i64 = exact[..=q].iter().sum();
    assert!(row["low"].as_f64().unwrap() <= rank as f64);
    assert!(row["high"].as_f64().unwrap() >= rank as f64);
    assert!(row["rank"].as_f64().unwrap() >= half);
}

#[test]
fn turnstile_heavy_hitters_descend_the_layers() {
    let mut input = String::new();
    for x in 0..100u64 {
        input.push_str(&format!("{x} 10\n"));
    }
    input.push_str("42 500\n42 -100\n");
    let out = tidemark(
        &[
            "freq",
            "--json",
            "--model",
            "turnstile",
            "--bits",
            "8",
            "--heavy",
            "0.2",
        ],
        &input,
    );
    let rows = json_lines(&out);
    let heavy = of_kind(&rows, "heavy");
    assert_eq!(heavy.len(), 1);
    assert_eq!(heavy[0]["item"], "42");
    assert!(heavy[0]["estimate"].as_f64().unwrap() >= 410.0);
}

#[test]
fn saved_sketches_join() {
    let dir = std::env::temp_dir().join(format!("tidemark-freq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let saved = dir.join("a.tdmk");
    let a = "x 3\ny 2\nz 1\n";
    let out = tidemark(&["freq", "--save", saved.to_str().unwrap()], a);
    assert!(out.status.success());
    let b = "x 10\nz 5\nw 7\n";
    let rows = json_lines(&tidemark(
        &["freq", "--json", "--join", saved.to_str().unwrap()],
        b,
    ));
    let join = of_kind(&rows, "join")[0];
    let truth = 3.0 * 10.0 + 1.0 * 5.0;
    assert!(join["estimate"].as_f64().unwrap() >= truth);
    assert!(join["low"].as_f64().unwrap() <= truth);
    // A sketch of other dimensions refuses, naming the flag.
    let out = tidemark(
        &[
            "freq",
            "--epsilon",
            "0.1",
            "--join",
            saved.to_str().unwrap(),
        ],
        b,
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--join"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_lines_and_flags_exit_2_naming_them() {
    let cases: [(&[&str], &str, &str); 8] = [
        (&["freq"], "a\nb c d\n", "<stdin>:2"),
        (&["freq"], "a\nb x\n", "<stdin>:2"),
        (&["freq"], "a -1\n", "<stdin>:1"),
        (
            &["freq", "--model", "turnstile"],
            "a 1\na -2\n",
            "<stdin>:2",
        ),
        (&["freq", "--range", "0", "9"], "1\nfoo\n", "<stdin>:2"),
        (&["freq", "--epsilon", "0"], "", "--epsilon"),
        (&["freq", "--heavy", "1.5"], "", "--heavy"),
        (&["freq", "--range", "9", "0"], "", "--range"),
    ];
    for (args, input, needle) in cases {
        let out = tidemark(args, input);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let out = tidemark(&["freq", "--model", "general", "--quantile", "0.5"], "1\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--model"));
}

#[test]
fn a_bad_join_is_refused_before_any_answer_is_printed() {
    let dir = std::env::temp_dir().join(format!("tidemark-freq-join-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let saved = dir.join("a.tdmk");
    let out = tidemark(&["freq", "--save", saved.to_str().unwrap()], "x 3\n");
    assert!(out.status.success());
    let missing = dir.join("none.tdmk");
    let cases: [(Vec<&str>, &str); 2] = [
        // Other dimensions: the total row used to come first, then exit 2.
        (
            vec![
                "freq",
                "--epsilon",
                "0.1",
                "--join",
                saved.to_str().unwrap(),
            ],
            "--join",
        ),
        (
            vec!["freq", "--join", missing.to_str().unwrap()],
            "none.tdmk",
        ),
    ];
    for (args, needle) in cases {
        let out = tidemark(&args, "x 10\nz 5\n");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            out.stdout.is_empty(),
            "{args:?} printed before refusing: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
