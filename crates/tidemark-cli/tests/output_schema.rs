//! Every JSON line every command prints, against the one schema of docs/output.md: each field
//! is defined there, with the type it has; no field is null; an estimating row carries its
//! whole bracket; `item` is a string; a window is `from` and `to`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{ok, tidemark};
use serde_json::Value;
use tidemark_stream::flowgen::{FlowLog, FlowSpec};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The schema: field → type, from every table of docs/output.md (`| \`name\` | type | …`).
fn schema() -> BTreeMap<String, String> {
    let doc = std::fs::read_to_string(repo().join("docs/output.md")).unwrap();
    let mut fields = BTreeMap::new();
    for line in doc.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, name, ty, ..] = cells[..] else {
            continue;
        };
        let Some(name) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) else {
            continue;
        };
        let old = fields.insert(name.to_string(), ty.to_string());
        assert!(
            old.is_none_or(|o| o == ty),
            "docs/output.md gives {name} two types"
        );
    }
    assert!(fields.len() > 100, "{} fields read", fields.len());
    fields
}

fn is_rfc3339_utc(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// Checks one JSON object against the schema; `at` names the command for messages.
fn check(obj: &Value, schema: &BTreeMap<String, String>, at: &str) {
    let Value::Object(map) = obj else {
        panic!("{at}: a line that is not an object: {obj}")
    };
    for (k, v) in map {
        let ty = schema
            .get(k)
            .unwrap_or_else(|| panic!("{at}: field {k:?} is not in docs/output.md: {obj}"));
        let fits = match ty.as_str() {
            "string" => v.is_string(),
            "time" => v.as_str().is_some_and(is_rfc3339_utc),
            "integer" => v.is_u64() || v.is_i64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "array" => v.is_array(),
            other => panic!("docs/output.md: unknown type {other:?} of {k}"),
        };
        assert!(fits, "{at}: {k} is {v}, not a {ty}: {obj}");
        if let Value::Array(items) = v {
            for item in items.iter().filter(|i| i.is_object()) {
                check(item, schema, at);
            }
        }
    }
    let has = |k: &str| map.contains_key(k);
    if has("estimate") || has("rank") {
        for k in ["low", "high", "confidence", "method"] {
            assert!(has(k), "{at}: an estimating row without {k}: {obj}");
        }
    }
    if has("low") || has("high") {
        assert!(
            has("estimate") || has("rank"),
            "{at}: a bracket of nothing: {obj}"
        );
    }
    assert_eq!(has("from"), has("to"), "{at}: half a window: {obj}");
}

/// Runs `tidemark args…` and checks every line it prints; returns how many.
fn lines_of(args: &[&str], stdin: &str, schema: &BTreeMap<String, String>) -> usize {
    let out = tidemark(args, stdin);
    ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let at = args.join(" ");
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{at}: not a JSON line ({e}): {line}"));
        check(&v, schema, &at);
        n += 1;
    }
    assert!(n > 0, "{at}: printed no line");
    n
}

#[test]
fn every_json_line_of_every_command_fits_the_one_schema() {
    let schema = schema();
    let d = std::env::temp_dir().join(format!("tidemark-schema-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    let words: String = (0..3_000).map(|i| format!("k{}\n", i % 50)).collect();
    let ints: String = (0..500).map(|i| format!("{}\n", i % 97)).collect();
    let ticks: String = (0..2_000)
        .map(|i| format!("{} u{}\n", i / 3, i % 90))
        .collect();
    let ones: String = (0..100).map(|i| format!("{}\n", i % 2)).collect();
    std::fs::write(p("words"), &words).unwrap();
    std::fs::write(p("ints"), &ints).unwrap();
    let mut printed = 0;
    let mut run = |args: &[&str], stdin: &str| printed += lines_of(args, stdin, &schema);

    run(&["count", "--window", "50", "--json"], &ones);
    let times: String = (0..100).map(|i| format!("{}\n", i * 2)).collect();
    run(
        &[
            "count",
            "--window",
            "50",
            "--time",
            "--every",
            "10",
            "--interpolate",
            "--json",
        ],
        &times,
    );
    run(&["distinct", "--json", "--save", &p("d.tdmk")], &words);
    run(
        &["distinct", "--merge", "--json", &p("d.tdmk"), &p("d.tdmk")],
        "",
    );
    run(
        &["distinct", "--window", "100", "--every", "200", "--json"],
        &ticks,
    );
    run(
        &["distinct", "--window", "100", "--sliding", "--json"],
        &ticks,
    );
    run(
        &[
            "freq",
            "--json",
            "--query",
            "k1",
            "--heavy",
            "0.05",
            "--top",
            "3",
            "--save",
            &p("f.tdmk"),
        ],
        &words,
    );
    run(&["freq", "--json", "--join", &p("f.tdmk")], &words);
    run(
        &[
            "freq",
            "--json",
            "--model",
            "cash",
            "--range",
            "1",
            "50",
            "--quantile",
            "0.5",
            "--query",
            "7",
            "--top",
            "2",
            "--heavy",
            "0.05",
        ],
        &ints,
    );
    run(
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
        &ints,
    );
    let values: String = (1..=3_000)
        .map(|i| format!("{}\n", (i * 37 % 1_000) as f64 * 0.25 + 0.1))
        .collect();
    let tick_values: String = (0..2_000)
        .map(|i| format!("{} {}\n", i / 3, (i % 97) as f64 + 0.5))
        .collect();
    run(
        &[
            "quantile",
            "--json",
            "--cdf",
            "10,100",
            "--save",
            &p("q.tdmk"),
        ],
        &values,
    );
    run(
        &["quantile", "--json", "--merge", &p("q.tdmk"), &p("q.tdmk")],
        "",
    );
    run(
        &[
            "quantile",
            "--json",
            "--schema",
            "5",
            "--bins",
            "16",
            "--quantile",
            "0,0.5,1",
        ],
        &values,
    );
    run(
        &[
            "quantile",
            "--json",
            "--window",
            "100",
            "--every",
            "200",
            "--cdf",
            "50",
            "--save",
            &p("qr.tdmk"),
        ],
        &tick_values,
    );
    run(
        &["quantile", "--json", "--merge", &p("qr.tdmk"), &p("q.tdmk")],
        "",
    );
    run(&["quantile", "--json", "--cdf", "1"], "");
    for extra in [&[][..], &["--stacked"][..]] {
        let mut args = vec![
            "filter",
            "build",
            "--capacity",
            "1000",
            "--fpr",
            "0.01",
            "--json",
        ];
        args.extend_from_slice(extra);
        let f = p(&format!("f{}.qf", extra.len()));
        args.extend_from_slice(&["--save", &f]);
        run(&args, &words);
        run(&["filter", "add", "--json", &f], "k1\nnew-key\n");
        run(&["filter", "info", "--json", &f], "");
        run(&["filter", "query", "--json", &f], "k1\nnot-there\n");
        run(&["filter", "query", "--count", "--json", &f], &words);
    }

    // The pipeline: alerts (early and confirmed), its summary, queries of every kind, check.
    let log = FlowLog::generate(&FlowSpec {
        minutes: 12,
        users: 300,
        scanners: 2,
        seed: 5,
        ..FlowSpec::default()
    });
    let csv = log.to_csv();
    for (config, metric) in [("fanout", "fanout"), ("hammer", "hammer")] {
        let toml = repo().join(format!("examples/{config}.toml"));
        let db = p(&format!("{config}.db"));
        let args = [
            "run",
            "--config",
            toml.to_str().unwrap(),
            "--db",
            &db,
            "--json",
        ];
        run(&args, &csv);
        let query = |extra: &[&str]| -> Vec<String> {
            [
                "query", "--db", &db, "--metric", metric, "--window", "5m", "--json",
            ]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
        };
        let key = FlowLog::scanner(0);
        let extra: &[&str] = if config == "hammer" {
            &["--items", "2"]
        } else {
            &["--key", &key]
        };
        for args in [query(&["--top", "3"]), query(extra)] {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&args, "");
        }
        run(&["check", "--db", &db, "--json"], "");
    }
    run(&["demo", "--minutes", "8", "--json"], "");
    assert!(printed > 500, "{printed} lines checked");
    std::fs::remove_dir_all(&d).unwrap();
}
