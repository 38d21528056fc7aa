//! `tidemark serve` over real TCP on a store the pipeline built from a generated flow log,
//! with a metric of each kind (count, distinct, frequency, quantile): every JSON endpoint
//! gives the rows `tidemark query --json` prints (same estimate and bracket), bad
//! parameters get 400 naming them, an unknown metric 404; `/metrics` holds each top key's
//! estimate and bounds and passes `promtool check metrics` (when promtool is installed);
//! the command's own flags fail cleanly.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{dir, get, json_lines, ok, s, serve, tidemark};
use serde_json::Value;
use tidemark_stream::flowgen::{FlowLog, FlowSpec};

const CONFIG: &str = r#"
[input]
format = "csv"
time_field = "ts"
time_format = "epoch_s"

[[metric]]
name = "flows"
kind = "count"
key = ["src_ip"]
bucket = "1m"
window = "5m"
retention = "1d"
allowed_lateness = "30s"
[[metric.alert]]
above = 100

[[metric]]
name = "fan-out"
kind = "distinct"
key = ["src_ip"]
item = ["dst_ip", "dst_port"]
bucket = "1m"
window = "5m"
precision = 10
retention = "1d"
allowed_lateness = "30s"

[[metric]]
name = "ports"
kind = "frequency"
key = ["src_ip"]
item = ["dst_port"]
bucket = "1m"
window = "5m"
retention = "1d"
allowed_lateness = "30s"

[[metric]]
name = "latency"
kind = "quantile"
key = ["dst_ip"]
value = "latency_ms"
bucket = "1m"
window = "5m"
quantiles = [0.5, 0.99]
allowed_lateness = "30s"
[[metric.alert]]
quantile = 0.99
above = 250
on = "low"
"#;

/// A store of the four metrics over 12 minutes of generated flows, and its alert lines.
fn store(tag: &str) -> (PathBuf, PathBuf) {
    store_of(tag, CONFIG)
}

/// A store of `config`'s metrics over 12 minutes of generated flows, and its alert lines.
fn store_of(tag: &str, config_text: &str) -> (PathBuf, PathBuf) {
    let d = dir(tag);
    let log = FlowLog::generate(&FlowSpec {
        minutes: 12,
        ..FlowSpec::default()
    });
    let csv = d.join("flows.csv");
    std::fs::write(&csv, log.to_csv_with_latency()).unwrap();
    let config = d.join("all.toml");
    std::fs::write(&config, config_text).unwrap();
    let db = d.join("all.db");
    let out = tidemark(
        &["run", "--config", s(&config), "--db", s(&db), s(&csv)],
        "",
    );
    ok(&out);
    let alerts = d.join("alerts.jsonl");
    std::fs::write(&alerts, &out.stdout).unwrap();
    (db, alerts)
}

fn get_json(addr: &str, path: &str) -> Value {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// `tidemark query --json` lines.
fn query(db: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["query", "--json", "--db", s(db)];
    all.extend_from_slice(args);
    let out = tidemark(&all, "");
    ok(&out);
    json_lines(&out)
}

/// Rows with the same fields and values (numbers compared as numbers).
fn same_rows(api: &[Value], cli: &[Value], what: &str) {
    assert_eq!(api.len(), cli.len(), "{what}: {api:?} against {cli:?}");
    assert!(!cli.is_empty(), "{what}: no rows to compare");
    for (a, c) in api.iter().zip(cli) {
        let (a, c) = (a.as_object().unwrap(), c.as_object().unwrap());
        let mut names: Vec<&String> = a.keys().collect();
        let mut want: Vec<&String> = c.keys().collect();
        names.sort();
        want.sort();
        assert_eq!(names, want, "{what}");
        for (k, v) in c {
            match (v.as_f64(), a[k].as_f64()) {
                (Some(x), Some(y)) => assert_eq!(x, y, "{what}: {k}"),
                _ => assert_eq!(&a[k], v, "{what}: {k}"),
            }
        }
    }
}

fn enc(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn every_endpoint_answers_as_query_does() {
    let (db, alerts) = store("serve-api");
    let srv = serve(&["--db", s(&db), "--alerts", s(&alerts), "--top", "20"]);
    let a = srv.addr.as_str();

    // The configured metrics.
    let m = get_json(a, "/api/v1/metrics");
    let names: Vec<&str> = m["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["metric"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["flows", "fan-out", "ports", "latency"]);
    assert_eq!(m["metrics"][0]["alerts"][0]["threshold"], 100.0);
    assert_eq!(m["metrics"][3]["alerts"][0]["quantile"], 0.99);
    assert_eq!(m["metrics"][1]["window_s"], 300.0);

    for metric in ["flows", "fan-out", "ports", "latency"] {
        // Top keys, then each of a few keys alone, at the default end and at an earlier one.
        let top = query(&db, &["--metric", metric, "--window", "5m", "--top", "5"]);
        let api = get_json(a, &format!("/api/v1/top?metric={metric}&n=5&window=5m"));
        same_rows(
            api["rows"].as_array().unwrap(),
            &top,
            &format!("top {metric}"),
        );
        let mut keys: Vec<String> = top
            .iter()
            .map(|r| r["key"].as_str().unwrap().to_string())
            .collect();
        keys.dedup();
        keys.push("no-such-key".to_string());
        for key in keys.iter().take(3).chain(keys.last()) {
            let cli = query(&db, &["--metric", metric, "--window", "5m", "--key", key]);
            let api = get_json(
                a,
                &format!("/api/v1/query?metric={metric}&key={}&window=5m", enc(key)),
            );
            same_rows(
                api["rows"].as_array().unwrap(),
                &cli,
                &format!("{metric} {key}"),
            );
            let at = "2023-11-14T22:20:00Z";
            let cli = query(
                &db,
                &[
                    "--metric", metric, "--window", "3m", "--key", key, "--at", at,
                ],
            );
            let api = get_json(
                a,
                &format!(
                    "/api/v1/query?metric={metric}&key={}&window=3m&at={}",
                    enc(key),
                    enc(at)
                ),
            );
            same_rows(
                api["rows"].as_array().unwrap(),
                &cli,
                &format!("{metric} {key} at"),
            );
        }
        // A series: each point is the window query ending there.
        let key = &keys[0];
        let series = get_json(
            a,
            &format!(
                "/api/v1/series?metric={metric}&key={}&window=2m&step=2m&from=2023-11-14T22:16:00Z&to=2023-11-14T22:24:00Z",
                enc(key)
            ),
        );
        let points = series["points"].as_array().unwrap();
        assert_eq!(points.len(), 5, "{series}");
        for p in points {
            let to = p["to"].as_str().unwrap();
            let cli = query(
                &db,
                &[
                    "--metric", metric, "--window", "2m", "--key", key, "--at", to,
                ],
            );
            same_rows(
                p["rows"].as_array().unwrap(),
                &cli,
                &format!("{metric} series {to}"),
            );
        }
    }

    // Labelled answers: quantiles asked, items kept.
    let cli = query(
        &db,
        &[
            "--metric",
            "latency",
            "--window",
            "5m",
            "--top",
            "3",
            "--quantile",
            "0.9,0.999",
        ],
    );
    let api = get_json(
        a,
        "/api/v1/top?metric=latency&window=5m&n=3&quantile=0.9&quantile=0.999",
    );
    same_rows(api["rows"].as_array().unwrap(), &cli, "latency quantiles");
    let cli = query(
        &db,
        &[
            "--metric", "ports", "--window", "5m", "--top", "4", "--items", "2",
        ],
    );
    let api = get_json(a, "/api/v1/top?metric=ports&window=5m&n=4&items=2");
    same_rows(api["rows"].as_array().unwrap(), &cli, "ports items");

    // Alerts from the run's own lines.
    let all = get_json(a, "/api/v1/alerts?n=1000");
    let lines = std::fs::read_to_string(&alerts).unwrap().lines().count();
    assert_eq!(all["alerts"].as_array().unwrap().len(), lines.min(1000));
    assert!(lines > 0, "the log has alerts to serve");
    let later = get_json(
        a,
        "/api/v1/alerts?since=2023-11-14T22:18:00Z&metric=latency",
    );
    for x in later["alerts"].as_array().unwrap() {
        assert_eq!(x["metric"], "latency");
        assert!(x["at"].as_str().unwrap() >= "2023-11-14T22:18:00Z");
    }
}

#[test]
fn bad_parameters_are_named_and_unknown_metrics_are_404() {
    let (db, _) = store("serve-bad");
    let srv = serve(&["--db", s(&db)]);
    let a = srv.addr.as_str();
    for (path, status, parameter) in [
        ("/api/v1/query?metric=nope&key=x", 404, "metric"),
        ("/api/v1/top?metric=nope", 404, "metric"),
        ("/api/v1/query?key=x", 400, "metric"),
        ("/api/v1/query?metric=flows", 400, "key"),
        ("/api/v1/query?metric=flows&key=x&window=90s", 400, "window"),
        ("/api/v1/query?metric=flows&key=x&window=5", 400, "window"),
        ("/api/v1/query?metric=flows&key=x&window=2d", 400, "window"),
        ("/api/v1/query?metric=flows&key=x&at=noon", 400, "at"),
        (
            "/api/v1/query?metric=flows&key=x&at=2000-01-01T00:00:00Z",
            400,
            "at",
        ),
        (
            "/api/v1/query?metric=flows&key=x&quantile=0.5",
            400,
            "quantile",
        ),
        (
            "/api/v1/query?metric=latency&key=x&quantile=1.5",
            400,
            "quantile",
        ),
        (
            "/api/v1/query?metric=latency&key=x&quantile=0",
            400,
            "quantile",
        ),
        ("/api/v1/query?metric=flows&key=x&items=2", 400, "items"),
        ("/api/v1/query?metric=flows&key=x&key=y", 400, "key"),
        ("/api/v1/query?metric=flows&key=x&colour=red", 400, "colour"),
        ("/api/v1/top?metric=flows&n=0", 400, "n"),
        ("/api/v1/top?metric=flows&n=1001", 400, "n"),
        ("/api/v1/top?metric=flows&n=ten", 400, "n"),
        ("/api/v1/top?metric=ports&items=0", 400, "items"),
        (
            "/api/v1/series?metric=flows&key=x&step=1m&from=0",
            400,
            "step",
        ),
        ("/api/v1/series?metric=flows&key=x&step=90s", 400, "step"),
        // 1,440 points of a day's window of 1-minute buckets: 2,073,600 bucket merges.
        (
            "/api/v1/series?metric=flows&key=x&window=1d&step=1m&from=2023-11-13T22:25:00Z&to=2023-11-14T22:24:00Z",
            400,
            "step",
        ),
        (
            "/api/v1/series?metric=flows&key=x&from=2023-11-14T22:20:00Z&to=2023-11-14T22:10:00Z",
            400,
            "from",
        ),
        ("/api/v1/alerts?since=soon", 400, "since"),
    ] {
        let (got, body) = get(a, path);
        assert_eq!(got, status, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["parameter"], parameter, "{path}: {body}");
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()));
    }
}

#[test]
fn prometheus_gets_each_top_key_with_its_bounds() {
    let (db, _) = store("serve-prom");
    let srv = serve(&["--db", s(&db), "--top", "7"]);
    let (status, text) = get(&srv.addr, "/metrics");
    assert_eq!(status, 200, "{text}");
    // Each family declared once, with HELP and TYPE.
    for family in [
        "tidemark_flows_estimate",
        "tidemark_fan_out_estimate",
        "tidemark_ports_estimate",
        "tidemark_latency_estimate",
        "tidemark_records_total",
        "tidemark_events_total",
        "tidemark_watermark_timestamp_seconds",
        "tidemark_last_checkpoint_age_seconds",
    ] {
        assert_eq!(
            text.matches(&format!("# TYPE {family} ")).count(),
            1,
            "{family}"
        );
        assert!(text.contains(&format!("# HELP {family} ")), "{family}");
    }
    // The top 7 keys of the current window, three series each; the values are query's.
    let top = query(&db, &["--metric", "flows", "--window", "5m", "--top", "7"]);
    for row in &top {
        for (bound, field) in [("estimate", "estimate"), ("low", "low"), ("high", "high")] {
            let line = format!(
                "tidemark_flows_estimate{{key=\"{}\",bound=\"{bound}\"}} ",
                row["key"].as_str().unwrap()
            );
            let v: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix(&line))
                .unwrap_or_else(|| panic!("no {line}"))
                .parse()
                .unwrap();
            assert_eq!(v, row[field].as_f64().unwrap(), "{line}");
        }
    }
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("tidemark_flows_estimate{"))
            .count(),
        3 * top.len()
    );
    // A quantile metric: a series per configured quantile.
    assert!(text.contains(",q=\"0.99\",bound=\"high\"}"));

    promtool_check(&text);
}

/// `promtool check metrics` on `text`, when promtool is installed (said loudly when it is
/// not; `TIDEMARK_REQUIRE_PROMTOOL=1` makes that a failure).
fn promtool_check(text: &str) {
    promtool_check_but(text, &[]);
}

/// [`promtool_check`], tolerating lint problems (exit 3, never a parse error's 1) whose every
/// line ends with one of `lints`.
fn promtool_check_but(text: &str, lints: &[&str]) {
    match which("promtool") {
        Some(promtool) => {
            let mut child = Command::new(promtool)
                .args(["check", "metrics"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
            let tolerated = out.status.code() == Some(3)
                && said
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .all(|l| lints.iter().any(|x| l.ends_with(x)));
            assert!(
                out.status.success() || tolerated,
                "promtool check metrics: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        None if std::env::var("TIDEMARK_REQUIRE_PROMTOOL").as_deref() == Ok("1") => {
            panic!("TIDEMARK_REQUIRE_PROMTOOL=1 but promtool is not installed (Debian: prometheus)")
        }
        None => eprintln!(
            "\n*** SKIPPED: promtool check metrics: promtool is not installed \
             (apt-get install prometheus); TIDEMARK_REQUIRE_PROMTOOL=1 makes this a failure ***\n"
        ),
    }
}

/// A program on the PATH.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

#[test]
fn bad_flags_fail_cleanly() {
    let d = dir("serve-flags");
    let db = d.join("absent.db");
    let out = tidemark(&["serve", "--db", s(&db), "--listen", "127.0.0.1:0"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such store"));

    let (db, _) = store("serve-flags-db");
    for listen in ["localhost", "127.0.0.1", "127.0.0.1:99999", "300.0.0.1:80"] {
        let out = tidemark(&["serve", "--db", s(&db), "--listen", listen], "");
        assert_eq!(out.status.code(), Some(2), "{listen}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("invalid --listen"),
            "{listen}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let token = d.join("no-token-here");
    let out = tidemark(
        &[
            "serve",
            "--db",
            s(&db),
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            s(&token),
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("invalid --token-file") && err.contains("no-token-here"),
        "{err}"
    );
    let out = tidemark(
        &[
            "serve",
            "--db",
            s(&db),
            "--listen",
            "127.0.0.1:0",
            "--top",
            "0",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    // A port in use.
    let srv = serve(&["--db", s(&db)]);
    let out = tidemark(&["serve", "--db", s(&db), "--listen", &srv.addr], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen"));
}

#[test]
fn metric_names_that_sanitize_alike_get_families_of_their_own() {
    // `a.b` and `a_b` both sanitize to `a_b`, and `a_b_2` is taken by the first metric.
    let mut config = CONFIG[..CONFIG.find("[[metric]]").unwrap()].to_string();
    for name in ["a_b_2", "a.b", "a_b"] {
        config.push_str(&format!(
            "\n[[metric]]\nname = \"{name}\"\nkind = \"count\"\nkey = [\"src_ip\"]\n\
             bucket = \"1m\"\nwindow = \"5m\"\nretention = \"1d\"\n"
        ));
    }
    let (db, _) = store_of("serve-prom-names", &config);
    let srv = serve(&["--db", s(&db), "--top", "3"]);
    let (status, text) = get(&srv.addr, "/metrics");
    assert_eq!(status, 200, "{text}");
    for (family, metric) in [
        ("tidemark_a_b_2_estimate", "a_b_2"),
        ("tidemark_a_b_estimate", "a.b"),
        ("tidemark_a_b_3_estimate", "a_b"),
    ] {
        assert_eq!(
            text.matches(&format!("# TYPE {family} gauge\n")).count(),
            1,
            "{family}: {text}"
        );
        assert!(
            text.contains(&format!("# HELP {family} count metric {metric}:")),
            "{family} is {metric}'s"
        );
        assert!(
            text.contains(&format!("\n{family}{{key=")),
            "{family} has samples"
        );
    }
    // promtool's lint takes the `b` of these names for an abbreviated unit (bytes): that
    // alone is tolerated; a family declared twice is a parse error (exit 1), never tolerated.
    promtool_check_but(
        &text,
        &["metric names should not contain abbreviated units"],
    );
}
