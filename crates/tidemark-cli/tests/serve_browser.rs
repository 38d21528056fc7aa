//! The dashboard in a real browser: headless Chromium (Debian's `chromium`), driven through
//! `chromedriver` over the W3C WebDriver protocol (what Selenium speaks, spoken here directly
//! over HTTP), loads the page `tidemark run --follow --serve` serves, and the test checks that
//! each of the top keys has its line and its shaded bracket, that the alert threshold is drawn,
//! that the key search narrows the chart to the key asked, and that a new checkpoint of the
//! running pipeline reaches the page without a reload. Without chromium and chromedriver it is
//! SKIPPED loudly, unless TIDEMARK_REQUIRE_CHROMIUM=1 makes it a failure. With
//! TIDEMARK_DASHBOARD_SCREENSHOT=FILE it saves a screenshot of the page (PNG) there.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{dir, json_lines, s, tidemark};
use serde_json::{json, Value};
use tidemark_stream::flowgen::{FlowLog, FlowSpec};

const CONFIG: &str = r#"
[input]
format = "csv"
time_field = "ts"
time_format = "epoch_s"

[state]
checkpoint = "1s"

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
[[metric.alert]]
above = 200
"#;

/// A child process, killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
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

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One HTTP request: (status, body). The body is read by its length (chromedriver keeps a
/// connection open after its answer), chunked, or to the end.
fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    let st = TcpStream::connect(addr).unwrap();
    st.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        &st,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut r = BufReader::new(st);
    let mut status_line = String::new();
    r.read_line(&mut status_line).unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let (mut length, mut chunked) = (None, false);
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        let h = h.trim_end().to_ascii_lowercase();
        if h.is_empty() {
            break;
        }
        if let Some(v) = h.strip_prefix("content-length:") {
            length = v.trim().parse::<usize>().ok();
        }
        chunked |= h == "transfer-encoding: chunked";
    }
    let mut out = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            r.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = length {
        out.resize(n, 0);
        r.read_exact(&mut out).unwrap();
    } else {
        r.read_to_end(&mut out).unwrap();
    }
    (status, String::from_utf8(out).unwrap())
}

/// A WebDriver session of a headless Chromium.
struct Browser {
    driver: String,
    session: String,
    _chromedriver: Running,
}

impl Browser {
    fn start(chromedriver: &Path) -> Browser {
        let driver = format!("127.0.0.1:{}", free_port());
        let port = driver.rsplit(':').next().unwrap().to_string();
        let child = Running(
            Command::new(chromedriver)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_for(30, "chromedriver", || TcpStream::connect(&driver).ok());
        let (status, body) = http(
            &driver,
            "POST",
            "/session",
            Some(
                &json!({"capabilities": {"alwaysMatch": {"goog:chromeOptions": {"args": [
                    "--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                    "--disable-gpu", "--window-size=1280,720"
                ]}}}}),
            ),
        );
        assert_eq!(status, 200, "a new session: {body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        Browser {
            driver,
            session: v["value"]["sessionId"].as_str().unwrap().to_string(),
            _chromedriver: child,
        }
    }

    fn call(&self, method: &str, what: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{what}", self.session);
        let (status, text) = http(&self.driver, method, &path, body.as_ref());
        assert_eq!(status, 200, "{method} {what}: {text}");
        serde_json::from_str::<Value>(&text).unwrap()["value"].take()
    }

    /// Runs `script` (a function body) in the page; its return value.
    fn js(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let path = format!("/session/{}", self.session);
        let _ = http(&self.driver, "DELETE", &path, None);
    }
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
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// What the fan-out chart shows: the keys of its lines, of its bands, its thresholds, the
/// status line.
const DRAWN: &str = r#"
const svg = document.querySelector('svg.chart[data-metric="fan-out"]');
if (!svg) return null;
const keys = (sel) => [...svg.querySelectorAll(sel)].map((e) => e.getAttribute('data-key'));
return {
  lines: keys('path.line'),
  bands: keys('path.band'),
  thresholds: svg.querySelectorAll('line.threshold').length,
  status: document.getElementById('status').textContent,
  updated: document.body.dataset.updated || '',
};
"#;

#[test]
fn the_dashboard_draws_searches_and_follows_the_run_in_a_real_browser() {
    let (Some(chromium), Some(chromedriver)) = (which("chromium"), which("chromedriver")) else {
        if std::env::var("TIDEMARK_REQUIRE_CHROMIUM").as_deref() == Ok("1") {
            panic!(
                "TIDEMARK_REQUIRE_CHROMIUM=1 but chromium or chromedriver is not installed \
                 (Debian: chromium chromium-driver)"
            );
        }
        eprintln!(
            "\n*** SKIPPED: the dashboard in a real browser: chromium and chromedriver are not \
             installed (apt-get install chromium chromium-driver); TIDEMARK_REQUIRE_CHROMIUM=1 \
             makes this a failure ***\n"
        );
        return;
    };
    let _ = chromium;
    let d = dir("serve-browser");
    let log = FlowLog::generate(&FlowSpec {
        minutes: 12,
        ..FlowSpec::default()
    });
    let csv_text = log.to_csv();
    let (head, tail) = csv_text.split_at(csv_text.len() * 3 / 4);
    let (head, tail) = match tail.split_once('\n') {
        Some((rest_of_line, after)) => (format!("{head}{rest_of_line}\n"), after.to_string()),
        None => (csv_text.clone(), String::new()),
    };
    let csv = d.join("flows.csv");
    std::fs::write(&csv, &head).unwrap();
    let config = d.join("fanout.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let db = d.join("live.db");
    let mut run = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(["run", "--config", s(&config), "--db", s(&db), "--follow"])
        .args(["--serve", "127.0.0.1:0", s(&csv)])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(run.stderr.take().unwrap());
    let _run = Running(run);
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let head_records = head.lines().count() as u64 - 1;
    wait_for(60, "the run's first checkpoint of the file", || {
        let (_, text) = http(&addr, "GET", "/metrics", None);
        text.contains(&format!("\ntidemark_records_total {head_records}\n"))
            .then_some(())
    });

    let browser = Browser::start(&chromedriver);
    let start = Instant::now();
    browser.call(
        "POST",
        "/url",
        Some(json!({"url": format!("http://{addr}/")})),
    );
    let first = wait_for(30, "the first chart", || {
        let v = browser.js(DRAWN);
        (v["lines"].as_array().is_some_and(|l| !l.is_empty())).then_some(v)
    });
    eprintln!(
        "the dashboard's first chart drawn {:.0} ms after navigation began",
        start.elapsed().as_secs_f64() * 1e3
    );
    // A line and a band for each of the top keys (5 at most), and the threshold.
    let top = json_lines(&tidemark(
        &[
            "query",
            "--json",
            "--db",
            s(&db),
            "--metric",
            "fan-out",
            "--window",
            "5m",
            "--top",
            "5",
        ],
        "",
    ));
    let want: Vec<&str> = top.iter().map(|r| r["key"].as_str().unwrap()).collect();
    let lines: Vec<&str> = first["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    assert_eq!(lines, want, "the lines are the top keys");
    assert_eq!(first["bands"], first["lines"], "a bracket for each line");
    assert_eq!(first["thresholds"], 1, "the alert threshold");

    // The key search narrows the chart to the keys holding the text typed.
    let key = want[want.len() - 1];
    browser.js(&format!(
        "const s = document.getElementById('search'); s.value = {key:?}; \
         s.dispatchEvent(new Event('input'));"
    ));
    let narrowed = wait_for(30, "the search to narrow the chart", || {
        let v = browser.js(DRAWN);
        let lines: Vec<String> = v["lines"]
            .as_array()?
            .iter()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect();
        (v["lines"] != first["lines"] && lines.iter().all(|k| k.contains(key)))
            .then_some((lines, v))
    });
    assert!(narrowed.0.iter().any(|k| k == key), "{narrowed:?}");
    assert_eq!(narrowed.1["bands"], narrowed.1["lines"]);
    browser.js(
        "const s = document.getElementById('search'); s.value = ''; \
         s.dispatchEvent(new Event('input'));",
    );

    // The rest of the log appended: the run checkpoints it, and the page, polling, shows the
    // new record count without a reload.
    let before = browser.js(DRAWN)["status"].as_str().unwrap().to_string();
    assert!(
        before.starts_with(&format!("{head_records} records")),
        "{before}"
    );
    std::fs::OpenOptions::new()
        .append(true)
        .open(&csv)
        .unwrap()
        .write_all(tail.as_bytes())
        .unwrap();
    let all = csv_text.lines().count() as u64 - 1;
    wait_for(60, "the new checkpoint on the page", || {
        let v = browser.js(DRAWN);
        v["status"]
            .as_str()
            .is_some_and(|s| s.starts_with(&format!("{all} records")))
            .then_some(())
    });
    // The screenshot: the scanning laptop's fan-out, searched for, against the threshold.
    if let Ok(path) = std::env::var("TIDEMARK_DASHBOARD_SCREENSHOT") {
        browser.js(
            "const s = document.getElementById('search'); s.value = '10.9.0.1'; \
             s.dispatchEvent(new Event('input'));",
        );
        wait_for(30, "the scanner's chart", || {
            (browser.js(DRAWN)["lines"] == json!(["10.9.0.1"])).then_some(())
        });
        let png = browser.call("GET", "/screenshot", None);
        std::fs::write(&path, decode_base64(png.as_str().unwrap())).unwrap();
    }
    drop(browser);
    let _ = std::fs::remove_dir_all(&d);
}

/// Standard base64 (a WebDriver screenshot) to bytes.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for v in text.bytes().filter_map(value) {
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}
