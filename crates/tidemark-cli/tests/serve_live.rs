//! The server with real clients around it: `tidemark run --follow --serve` answers while it
//! writes (its own counts and the input lag on `/metrics`, the JSON API as `query` answers),
//! and a real Prometheus (Debian's `prometheus`) scrapes `tidemark serve` every second, its
//! HTTP API giving back each series as `tidemark query --json` gives the estimate and bounds.
//! Without `prometheus` installed the second test is SKIPPED loudly, unless
//! TIDEMARK_REQUIRE_PROMETHEUS=1 makes it a failure.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{dir, json_lines, ok, s, tidemark};
use serde_json::Value;
use tidemark_stream::flowgen::{FlowLog, FlowSpec};

const CONFIG: &str = r#"
[input]
format = "csv"
time_field = "ts"
time_format = "epoch_s"

[state]
checkpoint = "1s"

[[metric]]
name = "flows"
kind = "count"
key = ["src_ip"]
bucket = "1m"
window = "5m"
retention = "1d"
allowed_lateness = "30s"

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
"#;

/// A directory with the config and 12 minutes of generated flows.
fn inputs(tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    let d = dir(tag);
    let log = FlowLog::generate(&FlowSpec {
        minutes: 12,
        ..FlowSpec::default()
    });
    let csv = d.join("flows.csv");
    std::fs::write(&csv, log.to_csv()).unwrap();
    let config = d.join("two.toml");
    std::fs::write(&config, CONFIG).unwrap();
    (d, config, csv)
}

/// A child process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `tidemark` with `args`, and reads the address it serves on from standard error.
fn start_serving(args: &[&str]) -> (Running, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "no address printed");
        if let Some(rest) = line.split("http://").nth(1) {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    // Standard error is drained, so that nothing the process writes there blocks it.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (Running(child), addr)
}

/// GET `path` of `addr`: (status, body).
fn get(addr: &str, path: &str) -> (u16, String) {
    get_as(addr, path, None)
}

/// GET `path` of `addr` with a bearer `token`: (status, body).
fn get_as(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut st = TcpStream::connect(addr).unwrap();
    st.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        st,
        "GET {path} HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    st.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        if chunked {
            dechunk(body)
        } else {
            body.to_string()
        },
    )
}

/// A chunked body's bytes (Prometheus's Go server sends its answers so).
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = &rest[n + 2..];
    }
    out
}

/// A sample's value in exposition text.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Waits up to `secs` for `f` to give something.
fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed().as_secs() < secs,
            "waited {secs} s for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `tidemark query --json` lines.
fn query(db: &Path, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["query", "--json", "--db", s(db)];
    all.extend_from_slice(args);
    let out = tidemark(&all, "");
    ok(&out);
    json_lines(&out)
}

#[test]
fn run_serve_answers_while_the_run_writes() {
    let (d, config, csv) = inputs("serve-run");
    let db = d.join("live.db");
    let token_file = d.join("token");
    std::fs::write(&token_file, "run-s3cret\n").unwrap();
    let (_run, addr) = start_serving(&[
        "run",
        "--config",
        s(&config),
        "--db",
        s(&db),
        "--follow",
        "--skip-bad",
        "--serve",
        "127.0.0.1:0",
        "--serve-token-file",
        s(&token_file),
        "--serve-top",
        "2",
        s(&csv),
    ]);
    // Every request carries the token; without it, 401 on every path.
    let get = |addr: &str, path: &str| get_as(addr, path, Some("run-s3cret"));
    for path in ["/metrics", "/api/v1/metrics", "/"] {
        assert_eq!(get_as(&addr, path, None).0, 401, "{path}");
        assert_eq!(get_as(&addr, path, Some("run-s3cre")).0, 401, "{path}");
    }
    let records = std::fs::read_to_string(&csv).unwrap().lines().count() as f64 - 1.0;
    // Every line read and checkpointed (`checkpoint = "1s"`, also while idle).
    let text = wait_for(60, "the run's checkpoint of the whole file", || {
        let (status, text) = get(&addr, "/metrics");
        (status == 200 && sample(&text, "tidemark_records_total") == Some(records)).then_some(text)
    });
    assert_eq!(
        sample(&text, "tidemark_input_lag_bytes"),
        Some(0.0),
        "{text}"
    );
    assert_eq!(sample(&text, "tidemark_run_bad_lines_total"), Some(0.0));
    assert!(sample(&text, "tidemark_run_start_timestamp_seconds").is_some_and(|t| t > 0.0));
    // The budget: the config's default (1 GiB), as the run holds it and as the store's
    // config says; the open state is the keys the checkpoint holds, within it.
    assert_eq!(
        sample(&text, "tidemark_run_memory_budget_bytes"),
        Some(1073741824.0)
    );
    assert_eq!(
        sample(&text, "tidemark_memory_budget_bytes"),
        Some(1073741824.0)
    );
    let open = sample(&text, "tidemark_run_open_state_bytes").unwrap();
    assert!(open > 0.0 && open < 1073741824.0, "{open}");
    // --serve-top 2: two keys, three series each.
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("tidemark_flows_estimate{"))
            .count(),
        6,
        "{text}"
    );
    // A malformed line and a record appended: the line skipped and counted by the run, the
    // record counted, and the input lag back to 0 once checkpointed.
    let last = std::fs::read_to_string(&csv)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_string();
    std::fs::OpenOptions::new()
        .append(true)
        .open(&csv)
        .unwrap()
        .write_all(format!("not,a,flow\n{last}\n").as_bytes())
        .unwrap();
    wait_for(30, "the bad line counted", || {
        let (_, text) = get(&addr, "/metrics");
        (sample(&text, "tidemark_run_bad_lines_total") == Some(1.0)
            && sample(&text, "tidemark_records_total") == Some(records + 1.0)
            && sample(&text, "tidemark_input_lag_bytes") == Some(0.0))
        .then_some(())
    });
    // The JSON API answers as `query` does, beside the writer.
    let top = query(&db, &["--metric", "flows", "--window", "5m", "--top", "3"]);
    assert!(!top.is_empty());
    for row in &top {
        let key = row["key"].as_str().unwrap();
        let (status, body) = get(
            &addr,
            &format!("/api/v1/query?metric=flows&window=5m&key={key}"),
        );
        assert_eq!(status, 200, "{body}");
        let api: Value = serde_json::from_str(&body).unwrap();
        let cli = query(&db, &["--metric", "flows", "--window", "5m", "--key", key]);
        for field in ["estimate", "low", "high", "buckets"] {
            assert_eq!(api["rows"][0][field], cli[0][field], "{key} {field}");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A program on the PATH.
fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// A port free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Prometheus's instant query: the value of each result, by its labels.
fn prometheus_values(addr: &str, promql: &str) -> Vec<(Value, f64)> {
    let enc: String = promql
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (status, body) = get(addr, &format!("/api/v1/query?query={enc}"));
    if status != 200 {
        return Vec::new();
    }
    let v: Value = serde_json::from_str(&body).unwrap();
    v["data"]["result"]
        .as_array()
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    let value = r["value"][1].as_str().unwrap().parse().unwrap();
                    (r["metric"].clone(), value)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn prometheus_scrapes_and_answers_as_query_does() {
    let Some(prometheus) = which("prometheus") else {
        if std::env::var("TIDEMARK_REQUIRE_PROMETHEUS").as_deref() == Ok("1") {
            panic!("TIDEMARK_REQUIRE_PROMETHEUS=1 but prometheus is not installed (Debian: prometheus)");
        }
        eprintln!(
            "\n*** SKIPPED: a real Prometheus scrape: prometheus is not installed \
             (apt-get install prometheus); TIDEMARK_REQUIRE_PROMETHEUS=1 makes this a failure ***\n"
        );
        return;
    };
    let (d, config, csv) = inputs("serve-prometheus");
    let db = d.join("s.db");
    ok(&tidemark(
        &["run", "--config", s(&config), "--db", s(&db), s(&csv)],
        "",
    ));
    let (_serve, addr) = start_serving(&["serve", "--db", s(&db), "--listen", "127.0.0.1:0"]);
    let prom_config = d.join("prometheus.yml");
    std::fs::write(
        &prom_config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: \
             tidemark\n    static_configs:\n      - targets: ['{addr}']\n"
        ),
    )
    .unwrap();
    let prom_addr = format!("127.0.0.1:{}", free_port());
    let _prom = Running(
        Command::new(prometheus)
            .arg(format!("--config.file={}", s(&prom_config)))
            .arg(format!("--storage.tsdb.path={}", s(&d.join("data"))))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The scrape succeeded (`up` is 1) and the samples are in.
    wait_for(90, "Prometheus's first scrape of tidemark serve", || {
        let up = TcpStream::connect(&prom_addr)
            .is_ok()
            .then(|| prometheus_values(&prom_addr, "up"))?;
        let scraped = up.iter().any(|(_, v)| *v == 1.0)
            && !prometheus_values(&prom_addr, "tidemark_flows_estimate").is_empty();
        scraped.then_some(())
    });
    for (metric, family) in [
        ("flows", "tidemark_flows_estimate"),
        ("fan-out", "tidemark_fan_out_estimate"),
    ] {
        let top = query(&db, &["--metric", metric, "--window", "5m", "--top", "5"]);
        assert!(!top.is_empty(), "{metric}");
        for row in &top {
            let key = row["key"].as_str().unwrap();
            for (bound, field) in [("estimate", "estimate"), ("low", "low"), ("high", "high")] {
                let got = prometheus_values(
                    &prom_addr,
                    &format!("{family}{{key=\"{key}\",bound=\"{bound}\"}}"),
                );
                assert_eq!(got.len(), 1, "{family} {key} {bound}: {got:?}");
                assert_eq!(got[0].0["job"], "tidemark");
                let want = row[field].as_f64().unwrap();
                assert!(
                    (got[0].1 - want).abs() <= 1e-9 * want.abs().max(1.0),
                    "{family} {key} {bound}: Prometheus {} against query {want}",
                    got[0].1
                );
            }
        }
    }
    let records = prometheus_values(&prom_addr, "tidemark_records_total");
    let lines = std::fs::read_to_string(&csv).unwrap().lines().count() as f64 - 1.0;
    assert_eq!(records.first().map(|r| r.1), Some(lines));
    let _ = std::fs::remove_dir_all(&d);
}
