//! `tidemark run` / `query` / `demo` end to end: crash and resume (SIGKILL), malformed lines,
//! config errors, queries.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::{dir, json_lines, ok, s, tidemark};

use tidemark_stream::config::Config;
use tidemark_stream::engine::{Engine, NoRows};
use tidemark_stream::flowgen::{FlowLog, FlowSpec, FANOUT_CONFIG};
use tidemark_stream::pipeline::RunState;
use tidemark_stream::store::{RedbStore, Store};

/// Every bucket of every metric, and the committed state.
type Dump = (Vec<(String, Vec<u8>, u64, Vec<u8>)>, RunState);

fn dump(db: &Path) -> Dump {
    let store = RedbStore::open_existing(db).unwrap();
    let meta = store.meta().unwrap().expect("a committed run");
    let mut rows = Vec::new();
    // The metrics of the configs used here (a store without one scans nothing).
    for m in ["fanout", "ports"] {
        store
            .scan(m, 0, u64::MAX, &mut |k, start, b| {
                rows.push((m.to_string(), k.to_vec(), start, b.to_vec()))
            })
            .unwrap();
    }
    let mut state = RunState::from_bytes(&meta.state).unwrap();
    // The engine's snapshot names the keys that were not quiet and where open rows were
    // written, which depend on where the run checkpointed: compare what it counted.
    let config = Config::from_toml(&meta.config).unwrap();
    let engine = Engine::restore(&config, &state.engine, &mut NoRows).unwrap();
    state.engine = (0..engine.metric_count())
        .map(|m| format!("{:?} {:?};", engine.counters(m), engine.closed_until(m)))
        .collect::<String>()
        .into_bytes();
    (rows, state)
}

/// The fan-out and ports metrics, checkpointing every 4,000 records (kills land between
/// checkpoints and during them), written in `d`.
fn kill_config(d: &Path) -> PathBuf {
    let config = d.join("fanout.toml");
    std::fs::write(
        &config,
        format!("{FANOUT_CONFIG}{PORTS_METRIC}\n[state]\ncheckpoint_records = 4000\n"),
    )
    .unwrap();
    config
}

/// Runs `args` on `file` killing it (SIGKILL) after growing delays until one run finishes;
/// returns how many kills landed.
fn run_killed_until_done(args: &[&str], file: &Path) -> usize {
    let mut kills = 0;
    for attempt in 0..60 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
            .args(args)
            .arg(file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(40 + 15 * attempt));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            child.wait().unwrap();
            kills += 1;
        } else {
            break;
        }
    }
    let mut all: Vec<&str> = args.to_vec();
    all.push(file.to_str().unwrap());
    let out = tidemark(&all, "");
    assert!(
        out.status.success(),
        "the resume after {kills} kills failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    kills
}

#[test]
fn sigkill_while_spilling_then_resume_equals_an_unbounded_run() {
    // A 6 MiB state budget (the keys of `ports`, whose limit is 2 events, cannot spill and
    // hold up to about 2 MiB, their tables' slots counted): checkpoints spill fan-out keys, later events read them back;
    // kills land between checkpoints, during checkpoints and during spills.
    let d = dir("run-spill-kill");
    let config = kill_config(&d);
    let file = d.join("flows.csv");
    std::fs::write(&file, big_log()).unwrap();
    let whole = d.join("whole.db");
    let out = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&whole),
            "--quiet",
            "--threads",
            "1",
            s(&file),
        ],
        "",
    );
    ok(&out);
    let expected = dump(&whole);
    // The runs below parse in a thread of their own: the same buckets and counters.
    let spilled = d.join("spilled.db");
    let args = [
        "run",
        "--config",
        s(&config),
        "--db",
        s(&spilled),
        "--quiet",
        "--max-memory",
        "6MiB",
        "--threads",
        "2",
    ];
    // Too small for the keys that cannot spill: a clear refusal, exit 2, not "damaged".
    let tiny = d.join("tiny.db");
    let out = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&tiny),
            "--quiet",
            "--max-memory",
            "64KiB",
            s(&file),
        ],
        "",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("memory budget is exceeded") && !err.contains("damaged"),
        "{err}"
    );
    // Uninterrupted, the budget makes it spill.
    let once = d.join("once.db");
    let out = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&once),
            "--max-memory",
            "6MiB",
            "--threads",
            "2",
            s(&file),
        ],
        "",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("spills of quiet keys"),
        "{err}"
    );
    assert!(
        dump(&once).0 == expected.0,
        "stored buckets differ when spilling"
    );
    let kills = run_killed_until_done(&args, &file);
    eprintln!("spilling run: {kills} kills before it finished");
    assert!(kills >= 1, "at least one kill landed mid-run");
    let got = dump(&spilled);
    assert!(
        got.0 == expected.0,
        "stored buckets differ after {kills} kills"
    );
    assert_eq!(got.1.records, expected.1.records);
    assert_eq!(got.1.engine, expected.1.engine, "counters differ");
    std::fs::remove_dir_all(&d).unwrap();
}

fn big_log() -> String {
    FlowLog::generate(&FlowSpec {
        minutes: 20,
        users: 1_500,
        scanners: 2,
        seed: 3,
        ..FlowSpec::default()
    })
    .to_csv()
}

/// A frequency metric beside the fan-out detector: sources per destination port, sketched for
/// the busy ports, with per-item alert streaks in the snapshot (each scanner sends each port
/// it probes 3 flows, one a host: above 2 at two closes in a row).
const PORTS_METRIC: &str = r#"
[[metric]]
name = "ports"
kind = "frequency"
key = ["dst_port"]
item = ["src_ip"]
bucket = "1m"
window = "5m"
epsilon = 0.05
delta = 0.05
phi = 0.1
allowed_lateness = "30s"
late = "merge"
[[metric.alert]]
above = 2
on = "high"
consecutive = 2
"#;

#[test]
fn sigkill_mid_stream_then_resume_equals_an_uninterrupted_run() {
    let d = dir("run-kill");
    let config = kill_config(&d);
    let csv = big_log();

    // The uninterrupted run, from stdin.
    let whole = d.join("whole.db");
    let out = tidemark(
        &["run", "--config", s(&config), "--db", s(&whole), "--quiet"],
        &csv,
    );
    ok(&out);
    let expected = dump(&whole);
    let alerts_whole = String::from_utf8(out.stdout).unwrap();
    let fanout_alerts = alerts_whole.matches("\"metric\":\"fanout\"").count();
    assert!(fanout_alerts >= 2, "both scanners alert");
    assert!(
        alerts_whole.contains("\"metric\":\"ports\"")
            && alerts_whole.contains("\"item\":\"10.9.0."),
        "scanned ports alert, naming the scanner"
    );
    assert!(
        expected.0.iter().any(|r| r.0 == "ports"),
        "ports buckets stored"
    );

    // Feed 40% of the stream, wait until it is consumed, SIGKILL, then resume with the whole
    // stream again (stdin is resumed by skipping the committed bytes).
    let killed = d.join("killed.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(["run", "--config", s(&config), "--db", s(&killed), "--quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let cut = csv.len() * 2 / 5;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&csv.as_bytes()[..cut]).unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(1_500));
    child.kill().unwrap(); // SIGKILL on Unix
    let status = child.wait().unwrap();
    assert!(!status.success(), "killed, not finished");
    drop(stdin);
    let (rows_at_kill, state_at_kill) = dump(&killed);
    assert!(
        !rows_at_kill.is_empty(),
        "some buckets committed before the kill"
    );
    assert!(
        state_at_kill.stdin.0 > 0 && state_at_kill.stdin.0 <= cut as u64,
        "committed mid-stream: {:?}",
        state_at_kill.stdin
    );
    assert!(rows_at_kill.len() < expected.0.len());

    let out = tidemark(
        &["run", "--config", s(&config), "--db", s(&killed), "--quiet"],
        &csv,
    );
    ok(&out);
    let got = dump(&killed);
    assert_eq!(
        got.1, expected.1,
        "state (position, counters, engine) differs"
    );
    assert_eq!(got.0.len(), expected.0.len());
    assert!(got.0 == expected.0, "stored buckets differ");

    // The same with a file input, parsed in a thread of its own, killed after a moment, as
    // many times as it takes.
    let file = d.join("flows.csv");
    std::fs::write(&file, &csv).unwrap();
    let from_file = d.join("file.db");
    let args = [
        "run",
        "--config",
        s(&config),
        "--db",
        s(&from_file),
        "--quiet",
        "--threads",
        "2",
    ];
    let kills = run_killed_until_done(&args, &file);
    eprintln!("file input: {kills} kills before the run finished");
    assert!(kills >= 1, "at least one kill landed mid-run");
    let got = dump(&from_file);
    assert!(
        got.0 == expected.0,
        "stored buckets differ after {kills} kills"
    );
    assert_eq!(got.1.records, expected.1.records);
    assert_eq!(got.1.engine, expected.1.engine);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn sigkill_while_buckets_are_written_ahead_then_resume_equals_an_uninterrupted_run() {
    // Checkpoints every 150 ms of wall time only: between two, a two-thread run's committer
    // writes many closes' buckets into its open transaction. Kills land while it does: what
    // it wrote ahead rolls back with the transaction, and the resume counts it once.
    let d = dir("run-kill-ahead");
    let config = d.join("ahead.toml");
    std::fs::write(
        &config,
        format!(
            "{FANOUT_CONFIG}{PORTS_METRIC}\n[state]\ncheckpoint = \"150ms\"\n\
             checkpoint_records = 100000000\n"
        ),
    )
    .unwrap();
    let file = d.join("flows.csv");
    std::fs::write(&file, big_log()).unwrap();
    let run = |db: &Path, threads: &str| {
        let args = ["run", "--config", s(&config), "--db", s(db), "--json"];
        let out = tidemark(&[&args[..], &["--threads", threads, s(&file)]].concat(), "");
        ok(&out);
        let lines = json_lines(&out);
        let summary = lines.last().unwrap().clone();
        assert_eq!(summary["summary"], "run");
        summary
    };
    let whole = d.join("whole.db");
    let one = run(&whole, "1");
    assert_eq!(one["written_ahead"], 0, "one thread writes at checkpoints");
    let expected = dump(&whole);
    let two_db = d.join("two.db");
    let two = run(&two_db, "2");
    let ahead = two["written_ahead"].as_u64().unwrap();
    let buckets: u64 = two["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["buckets"].as_u64().unwrap())
        .sum();
    assert!(
        ahead > buckets / 2,
        "most buckets written ahead: {ahead} of {buckets}"
    );
    let two = dump(&two_db);
    assert!(two.0 == expected.0, "two threads store other buckets");
    assert_eq!(
        two.1.engine, expected.1.engine,
        "two threads count otherwise"
    );

    let killed = d.join("killed.db");
    let args = [
        "run",
        "--config",
        s(&config),
        "--db",
        s(&killed),
        "--quiet",
        "--threads",
        "2",
    ];
    let kills = run_killed_until_done(&args, &file);
    eprintln!("written ahead: {kills} kills before the run finished");
    assert!(kills >= 1, "at least one kill landed mid-run");
    let got = dump(&killed);
    assert!(
        got.0 == expected.0,
        "stored buckets differ after {kills} kills"
    );
    assert_eq!(got.1.records, expected.1.records);
    assert_eq!(got.1.engine, expected.1.engine, "counters differ");

    // Under a 24 MiB budget the run spills quiet keys and reads them back from the store while
    // the committer writes the buckets ahead (the promotions of spilled keys' open rows with
    // them); every resume after a kill reads its keys back the same way.
    let spilling = d.join("spilling.db");
    let budget = ["--max-memory", "24MiB"];
    let out = tidemark(
        &[
            &[
                "run",
                "--config",
                s(&config),
                "--db",
                s(&spilling),
                "--json",
            ][..],
            &budget,
            &["--threads", "2", s(&file)],
        ]
        .concat(),
        "",
    );
    ok(&out);
    let summary = json_lines(&out).last().unwrap().clone();
    assert!(summary["spills"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["written_ahead"].as_u64().unwrap() > 0, "{summary}");
    let got = dump(&spilling);
    assert!(got.0 == expected.0, "a spilling run stores other buckets");
    assert_eq!(
        got.1.engine, expected.1.engine,
        "a spilling run counts otherwise"
    );
    let killed = d.join("killed-spilling.db");
    let args = [
        &["run", "--config", s(&config), "--db", s(&killed), "--quiet"][..],
        &budget,
        &["--threads", "2"],
    ]
    .concat();
    let kills = run_killed_until_done(&args, &file);
    eprintln!("spilling and written ahead: {kills} kills before the run finished");
    let got = dump(&killed);
    assert!(
        got.0 == expected.0,
        "stored buckets differ after {kills} kills, spilling"
    );
    assert_eq!(got.1.records, expected.1.records);
    assert_eq!(got.1.engine, expected.1.engine, "counters differ, spilling");
    std::fs::remove_dir_all(&d).unwrap();
}

const COUNT_CONFIG: &str = r#"
[input]
time_field = "ts"
[[metric]]
name = "fanout"
kind = "count"
key = ["user"]
bucket = "10s"
window = "30s"
[[metric.alert]]
above = 25
on = "high"
"#;

#[test]
fn a_malformed_line_stops_the_run_or_is_skipped_and_nothing_committed_is_lost() {
    let d = dir("run-bad");
    let config = d.join("c.toml");
    std::fs::write(&config, COUNT_CONFIG).unwrap();
    let mut good = String::from("ts,user\n");
    for t in 0..300u64 {
        good.push_str(&format!("{t},u{}\n", t % 3));
    }
    let lines: Vec<&str> = good.lines().collect();
    // Line 201 (1-based, the header is line 1) becomes malformed.
    let mut bad = lines.clone();
    bad[200] = "200,u2,extra";
    let bad_text = bad.join("\n") + "\n";
    let file = d.join("in.csv");
    std::fs::write(&file, &bad_text).unwrap();
    let db = d.join("t.db");
    let out = tidemark(
        &["run", "--config", s(&config), "--db", s(&db), s(&file)],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in.csv:201"), "{err}");
    // What was committed before the bad line stays.
    let (rows, state) = dump(&db);
    assert!(!rows.is_empty());
    assert!(state.records > 0 && state.records < 200);

    // With --skip-bad the same store resumes, skips the line, and ends as a clean run of
    // the file without it.
    let out = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&db),
            "--skip-bad",
            s(&file),
        ],
        "",
    );
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in.csv:201"), "{err}");
    assert!(err.contains("1 bad lines"), "{err}");
    let mut without = lines.clone();
    without.remove(200);
    let clean = d.join("clean.csv");
    std::fs::write(&clean, without.join("\n") + "\n").unwrap();
    let clean_db = d.join("clean.db");
    let out = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&clean_db),
            s(&clean),
        ],
        "",
    );
    assert!(out.status.success());
    let (a, sa) = dump(&db);
    let (b, sb) = dump(&clean_db);
    assert!(a == b, "buckets differ from a clean run's");
    assert_eq!(sa.records, sb.records);
    assert_eq!(sa.bad_lines, 1);

    // Every count window holds the truth: 10 events per user-bucket... queried back.
    let out = tidemark(
        &[
            "query",
            "--db",
            s(&db),
            "--metric",
            "fanout",
            "--window",
            "30s",
            "--at",
            "100",
            "--json",
        ],
        "",
    );
    ok(&out);
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Window [70 s, 100 s): 30 events, 10 per user, exact.
    assert_eq!(rows.len(), 3);
    for r in &rows {
        assert_eq!(r["estimate"].as_f64(), Some(10.0));
        assert_eq!(r["low"].as_f64(), Some(10.0));
        assert_eq!(r["method"].as_str(), Some("exact"));
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn config_errors_name_the_key_and_create_no_store() {
    let d = dir("run-config");
    let config = d.join("c.toml");
    let db = d.join("t.db");
    for (text, key) in [
        (
            COUNT_CONFIG.replace("\"10s\"", "\"10 seconds\""),
            "metric[0].bucket",
        ),
        (
            COUNT_CONFIG.replace("\"30s\"", "\"25s\""),
            "metric[0].window",
        ),
        (
            COUNT_CONFIG.replace("kind = \"count\"", "kind = \"sum\""),
            "metric[0].kind",
        ),
        (COUNT_CONFIG.replace("above = 25", "above = \"x\""), "above"),
    ] {
        std::fs::write(&config, &text).unwrap();
        let out = tidemark(&["run", "--config", s(&config), "--db", s(&db)], "");
        assert_eq!(out.status.code(), Some(2), "{key}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{key}: {err}");
        assert!(!db.exists(), "a bad config created the store");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn query_top_and_flag_errors() {
    let d = dir("run-query");
    let config = d.join("fanout.toml");
    std::fs::write(&config, FANOUT_CONFIG).unwrap();
    let db = d.join("t.db");
    let csv = FlowLog::generate(&FlowSpec {
        minutes: 8,
        users: 50,
        scanners: 1,
        ..FlowSpec::default()
    })
    .to_csv();
    let out = tidemark(&["run", "--config", s(&config), "--db", s(&db)], &csv);
    ok(&out);
    let alert: serde_json::Value = serde_json::from_str(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    for f in [
        "metric",
        "key",
        "phase",
        "at",
        "from",
        "to",
        "estimate",
        "low",
        "high",
        "confidence",
        "method",
        "threshold",
        "limit",
    ] {
        assert!(alert.get(f).is_some(), "alert lacks {f}: {alert}");
    }
    assert_eq!(alert["key"].as_str(), Some(FlowLog::scanner(0).as_str()));
    // The scanner probes minutes 2–4: the 5-minute window to minute 5 holds all 3,072.
    let at = (FlowLog::START + 300).to_string();
    // The top two sources over the 5 minutes to `at`, with `more` flags.
    let top_two = |at: &str, more: &[&str]| {
        let base = [
            "query",
            "--db",
            s(&db),
            "--metric",
            "fanout",
            "--top",
            "2",
            "--window",
            "5m",
            "--at",
            at,
        ];
        tidemark(&[&base[..], more].concat(), "")
    };
    let out = top_two(&at, &["--json"]);
    ok(&out);
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["key"].as_str(), Some(FlowLog::scanner(0).as_str()));
    // --items is for a frequency metric's heavy items; fanout is a distinct metric (refused
    // by its kind, also over a window without rows: one after the data).
    for at in [at.as_str(), "2100-01-01T00:00:00Z"] {
        let out = top_two(at, &["--items", "1"]);
        assert_eq!(out.status.code(), Some(2), "{at}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--items") && err.contains("frequency"),
            "{at}: {err}"
        );
    }
    let (low, high) = (
        rows[0]["low"].as_f64().unwrap(),
        rows[0]["high"].as_f64().unwrap(),
    );
    assert!(low <= 3072.0 && 3072.0 <= high, "[{low}, {high}]");
    // Users touch at most 12 destinations.
    assert!(rows[1]["estimate"].as_f64().unwrap() <= 12.0);
    let out = tidemark(
        &[
            "query",
            "--db",
            s(&db),
            "--metric",
            "fanout",
            "--key",
            FlowLog::HEALTH,
            "--window",
            "5m",
            "--json",
        ],
        "",
    );
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(row["estimate"].as_f64(), Some(4.0));
    assert_eq!(row["buckets"].as_u64(), Some(5));

    for (args, flag) in [
        (vec!["--window", "7s"], "--window"),
        (vec!["--window", "five"], "--window"),
        (vec!["--window", "5m", "--at", "noon"], "--at"),
    ] {
        let mut full = vec!["query", "--db", s(&db), "--metric", "fanout"];
        full.extend(args);
        let out = tidemark(&full, "");
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains(flag));
    }
    let out = tidemark(
        &[
            "query",
            "--db",
            s(&db),
            "--metric",
            "nope",
            "--window",
            "5m",
        ],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("fanout"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn demo_flags_the_scanner_not_the_health_checker() {
    let out = tidemark(&["demo", "--minutes", "12", "--json"], "");
    ok(&out);
    let rows: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The scanner's early alert, then its close's confirmation.
    let lines: Vec<(&str, &str)> = rows
        .iter()
        .filter_map(|r| Some((r["key"].as_str()?, r["phase"].as_str()?)))
        .collect();
    let scanner = FlowLog::scanner(0);
    assert_eq!(
        lines,
        [(scanner.as_str(), "early"), (scanner.as_str(), "confirmed")]
    );
    let summary = rows.last().unwrap();
    assert_eq!(summary["summary"], "run");
    let fanout = &summary["metrics"][0];
    assert_eq!(fanout["metric"], "fanout");
    assert_eq!(fanout["alerts"].as_u64(), Some(1));
    assert!(fanout["dropped"].as_u64().unwrap() > 0);
    assert!(fanout["late"].as_u64().unwrap() > 0);
    assert_eq!(
        summary["records"],
        fanout["events"].as_u64().unwrap() + fanout["dropped"].as_u64().unwrap()
    );
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_examples_run_and_a_store_refuses_another_config() {
    let d = dir("run-examples");
    // examples/requests.toml: JSON Lines, RFC 3339 times, a count and a distinct metric.
    let requests = repo_root().join("examples/requests.toml");
    let mut jsonl = String::new();
    for i in 0..1_200u64 {
        let s = i / 4;
        jsonl.push_str(&format!(
            "{{\"time\": \"2024-01-01T00:{:02}:{:02}Z\", \"user\": \"u{}\", \"path\": \"/p{}\"}}\n",
            s / 60,
            s % 60,
            i % 2,
            i % 7
        ));
    }
    // Past the 2-minute lateness: merged into its stored bucket.
    jsonl.push_str("{\"time\": \"2024-01-01T00:00:10Z\", \"user\": \"u0\", \"path\": \"/late\"}\n");
    let db = d.join("r.db");
    let out = tidemark(&["run", "--config", s(&requests), "--db", s(&db)], &jsonl);
    ok(&out);
    // One per metric, each on its metric's line of the summary.
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches(" 1 merged late").count(), 2, "{err}");
    let out = tidemark(
        &[
            "query",
            "--db",
            s(&db),
            "--metric",
            "requests",
            "--key",
            "u0",
            "--window",
            "1m",
            "--at",
            "2024-01-01T00:01:00Z",
            "--json",
        ],
        "",
    );
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Minute 0 holds 240 events, 120 of u0, plus the merged late one.
    assert_eq!(row["estimate"].as_f64(), Some(121.0));
    let out = tidemark(
        &[
            "query",
            "--db",
            s(&db),
            "--metric",
            "pages",
            "--key",
            "u1",
            "--window",
            "1h",
            "--json",
        ],
        "",
    );
    let row: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // u1 is every odd i: paths i % 7 over odd i cover all 7.
    assert_eq!(row["estimate"].as_f64(), Some(7.0));

    // The same store under the fan-out config: refused, exit 2, nothing changed.
    let fanout = repo_root().join("examples/fanout.toml");
    let out = tidemark(
        &["run", "--config", s(&fanout), "--db", s(&db)],
        "ts,src_ip,dst_ip,dst_port\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("another config"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_hammer_example_names_each_scanner_and_query_lists_heavy_items() {
    let d = dir("run-hammer");
    let hammer = repo_root().join("examples/hammer.toml");
    let log = FlowLog::generate(&FlowSpec {
        minutes: 12,
        users: 300,
        scanners: 2,
        seed: 5,
        ..FlowSpec::default()
    });
    let db = d.join("h.db");
    let out = tidemark(
        &["run", "--config", s(&hammer), "--db", s(&db)],
        &log.to_csv(),
    );
    ok(&out);
    // One alert per (host, scanner): 2 scanners × 3 hosts, each naming its source.
    let alerts = json_lines(&out);
    assert_eq!(alerts.len(), 6, "{alerts:?}");
    for a in &alerts {
        assert!(a["item"].as_str().unwrap().starts_with("10.9.0."), "{a}");
        assert!(a["low"].as_f64().unwrap() > 500.0);
    }
    // The health checker's targets: one heavy source each, exact (few sources a host).
    let out = tidemark(
        &[
            "query",
            "--db",
            s(&db),
            "--metric",
            "hammer",
            "--key",
            "10.1.0.1",
            "--window",
            "5m",
            "--json",
        ],
        "",
    );
    ok(&out);
    let rows = json_lines(&out);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["item"], "10.0.0.2");
    assert_eq!(rows[0]["estimate"].as_f64(), rows[0]["events"].as_f64());
    assert_eq!(rows[0]["method"], "exact");
    let query_top = |extra: &[&str]| {
        let mut a = vec![
            "query",
            "--db",
            s(&db),
            "--metric",
            "hammer",
            "--top",
            "3",
            "--window",
            "5m",
            "--at",
            "1700000420",
            "--json",
        ];
        a.extend_from_slice(extra);
        tidemark(&a, "")
    };
    // --top ranks hosts by their heaviest source: the scanned hosts come first while the
    // probes are in the window.
    let out = query_top(&[]);
    ok(&out);
    let rows = json_lines(&out);
    assert!(rows.len() >= 3, "{rows:?}");
    for r in &rows {
        assert!(r["key"].as_str().unwrap().starts_with("192.168.7."), "{r}");
    }
    // --items 1: the top three hosts, one line each, naming each host's heaviest source (the
    // first of its lines above: items come largest first).
    let out = query_top(&["--items", "1"]);
    ok(&out);
    let one = json_lines(&out);
    assert_eq!(one.len(), 3, "{one:?}");
    for r in &one {
        let first = rows.iter().find(|x| x["key"] == r["key"]).unwrap();
        assert_eq!(r, first);
    }
    assert_eq!(query_top(&["--items", "0"]).status.code(), Some(2));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn demo_writes_its_chart() {
    let d = dir("run-chart");
    let svg = d.join("fanout.svg");
    let out = tidemark(&["demo", "--minutes", "8", "--chart", s(&svg)], "");
    ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("ALERT 10.9.0.1"), "{text}");
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"));
    // One line per source drawn (scanner, health checker, two users), the threshold named.
    assert_eq!(chart.matches("<polyline").count(), 4);
    assert!(chart.contains(">10.9.0.1<") && chart.contains(">10.0.0.2<"));
    assert!(chart.contains("threshold 500"));
    let out = tidemark(&["demo", "--minutes", "8", "--no-chart"], "");
    assert!(out.status.success());
    // A day of minutes: by the run's end its first minutes are past the metric's one-day
    // retention; the chart starts where the store still holds them.
    let out = tidemark(
        &[
            "demo",
            "--minutes",
            "1440",
            "--users",
            "20",
            "--chart",
            s(&svg),
        ],
        "",
    );
    ok(&out);
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.trim_end().ends_with("</svg>"));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn new_input_after_a_completed_run_is_counted_and_the_same_input_is_not() {
    let d = dir("run-again");
    let config = d.join("c.toml");
    std::fs::write(&config, COUNT_CONFIG).unwrap();
    let db = d.join("t.db");
    let lines = |from: u64, to: u64| -> String {
        (from..to).map(|t| format!("{t},u{}\n", t % 3)).collect()
    };
    let records = |db: &Path| dump(db).1.records;
    let a = d.join("a.csv");
    std::fs::write(&a, format!("ts,user\n{}", lines(0, 100))).unwrap();
    let run = |args: &[&str], stdin: &str| {
        let mut full = vec!["run", "--config", s(&config), "--db", s(&db), "--quiet"];
        full.extend_from_slice(args);
        let out = tidemark(&full, stdin);
        ok(&out);
    };
    run(&["--keep-open", s(&a)], "");
    assert_eq!(records(&db), 100);
    // The same file again: nothing new.
    run(&["--keep-open", s(&a)], "");
    assert_eq!(records(&db), 100);
    // Lines appended to it: only those are read.
    std::fs::write(&a, format!("ts,user\n{}", lines(0, 150))).unwrap();
    run(&["--keep-open", s(&a)], "");
    assert_eq!(records(&db), 150);
    // Another file: read from its start.
    let b = d.join("b.csv");
    std::fs::write(&b, format!("ts,user\n{}", lines(150, 200))).unwrap();
    run(&["--keep-open", s(&b)], "");
    assert_eq!(records(&db), 200);
    // Standard input after a completed run is new data, each time.
    run(&["--keep-open"], &format!("ts,user\n{}", lines(200, 230)));
    // (The last closes every bucket: a final answer.)
    run(&["--close"], &format!("ts,user\n{}", lines(230, 260)));
    assert_eq!(records(&db), 260);
    // Every record once: the 10 s buckets hold 10 events each, 26 buckets, none dropped.
    let (rows, _) = dump(&db);
    assert_eq!(rows.len(), 26 * 3);
    let out = tidemark(
        &[
            "query",
            "--db",
            s(&db),
            "--metric",
            "fanout",
            "--window",
            "30s",
            "--at",
            "260",
            "--json",
        ],
        "",
    );
    let total: f64 = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["estimate"]
                .as_f64()
                .unwrap()
        })
        .sum();
    assert_eq!(total, 30.0);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_same_standard_input_again_is_refused_before_any_alert() {
    // A stream the last completed run read to its end is refused once its first bytes are
    // known to be that stream's; its alerts must not go out before that, also when what
    // decides it is a blank or skipped bad line (after which the runner adds its deferred
    // records, before reading on).
    let d = dir("run-same-stdin");
    // Counted twice, the 21 records would pass the limit of 30 and alert early.
    let config = d.join("count.toml");
    std::fs::write(
        &config,
        "[input]\nformat = \"csv\"\ntime_field = \"ts\"\n\
         [[metric]]\nname = \"n\"\nkind = \"count\"\nkey = [\"src\"]\nbucket = \"1m\"\n\
         window = \"5m\"\n[[metric.alert]]\nabove = 30\nearly = true\n",
    )
    .unwrap();
    let csv = scan_flows(21);
    for (end, extra) in [("\n", &[][..]), ("not,a,record\n", &["--skip-bad"][..])] {
        let db = d.join(format!("s{}.db", extra.len()));
        let stream = format!("{csv}{end}");
        let mut args = vec!["run", "--config", s(&config), "--db", s(&db), "--keep-open"];
        args.extend_from_slice(extra);
        let first = tidemark(&args, &stream);
        ok(&first);
        assert!(first.stdout.is_empty(), "21 records, under the limit");
        let again = tidemark(&args, &stream);
        assert!(!again.status.success(), "the same stream again is refused");
        let err = String::from_utf8_lossy(&again.stderr);
        assert!(err.contains("begins with the same"), "{err}");
        assert!(
            again.stdout.is_empty(),
            "no alert before the refusal ({end:?}): {}",
            String::from_utf8_lossy(&again.stdout)
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

/// A CSV log of `n` flows of source `scan`, each to a new destination, one a second from
/// 12:00:00 (epoch 1_700_000_400, a whole minute): the 21st is the crossing flow at 12:00:20.
fn scan_flows(n: u64) -> String {
    let mut csv = String::from("ts,src,dst\n");
    for i in 0..n {
        csv.push_str(&format!("{},scan,d{i}\n", 1_700_000_400 + i));
    }
    csv
}

/// Distinct destinations per source over 5 one-minute buckets, alerting above 20, early;
/// `extra` goes into the metric.
fn scan_config(d: &Path, extra: &str) -> PathBuf {
    let config = d.join("scan.toml");
    std::fs::write(
        &config,
        format!(
            "[input]\nformat = \"csv\"\ntime_field = \"ts\"\n\
             [[metric]]\nname = \"fanout\"\nkind = \"distinct\"\nkey = [\"src\"]\n\
             item = [\"dst\"]\nbucket = \"1m\"\nwindow = \"5m\"\n{extra}\
             [[metric.alert]]\nabove = 20\nearly = true\n"
        ),
    )
    .unwrap();
    config
}

#[test]
fn an_early_alert_from_a_pipe_goes_out_before_more_input_comes() {
    // The runner adds records to the engine in batches; a batch is added before any read
    // that may wait, so an early alert from standard input or a named pipe goes out at its
    // flow, not when more input (or its end) comes.
    let d = dir("run-early-pipe");
    let config = scan_config(&d, "");
    // 21 destinations in one minute: the 21st crosses; fewer records than a batch holds.
    let csv = scan_flows(21);
    for via in ["standard input", "a named pipe"] {
        let db = d.join(format!("{}.db", via.len()));
        let fifo = d.join("flows.fifo");
        let mut args = vec!["run", "--config", s(&config), "--db", s(&db)];
        if via == "a named pipe" {
            let made = Command::new("mkfifo").arg(&fifo).status();
            if !made.is_ok_and(|m| m.success()) {
                eprintln!("SKIPPED: the named-pipe case needs mkfifo");
                continue;
            }
            args.push(s(&fifo));
        }
        // Its messages, for a failure to show.
        let log = d.join("stderr.txt");
        let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut input: Box<dyn Write> = if via == "a named pipe" {
            drop(stdin);
            // Opening for writing waits for the run to open it for reading.
            Box::new(common::open_pipe_for(&mut child, &fifo))
        } else {
            Box::new(stdin)
        };
        input.write_all(csv.as_bytes()).unwrap();
        input.flush().unwrap();
        // The input stays open: the alert must not wait for it.
        let line = rx.recv_timeout(Duration::from_secs(30));
        drop(input);
        let status = child.wait().unwrap();
        reader.join().unwrap();
        let line = line.unwrap_or_else(|e| {
            let stderr = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("{via}: no early alert while it was still open ({e}); stderr: {stderr}")
        });
        let alert: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(alert["phase"], "early", "{via}: {line}");
        assert_eq!(alert["key"], "scan");
        assert_eq!(alert["at"], "2023-11-14T22:20:20Z");
        assert!(status.success(), "{via}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn run_prints_an_early_alert_at_the_crossing_flow_and_its_close_settles_it() {
    let d = dir("run-early");
    let config = scan_config(&d, "allowed_lateness = \"30s\"\n");
    // A scanner probes a new destination every second from 12:00:00 (epoch 1_700_000_400 is
    // a whole minute); the 21st, the crossing flow, is at 12:00:20.
    let t0 = 1_700_000_400u64;
    let mut csv = scan_flows(40);
    // A quiet source's flow at 12:01:31 closes the first bucket.
    csv.push_str(&format!("{},quiet,x\n", t0 + 91));
    let db = d.join("s.db");
    let out = tidemark(&["run", "--config", s(&config), "--db", s(&db)], &csv);
    ok(&out);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let early = &lines[0];
    assert_eq!(early["phase"], "early");
    assert_eq!(early["key"], "scan");
    assert_eq!(early["at"], "2023-11-14T22:20:20Z");
    assert_eq!(early["estimate"], 21.0);
    assert_eq!(
        (early["from"].as_str(), early["to"].as_str()),
        (Some("2023-11-14T22:16:00Z"), Some("2023-11-14T22:21:00Z"))
    );
    let close = &lines[1];
    assert_eq!(close["phase"], "confirmed");
    assert_eq!(close["at"], "2023-11-14T22:21:31Z");
    assert_eq!(close["estimate"], 40.0);
    assert_eq!(close["to"], early["to"]);

    // A count whose histogram's close merges buckets (see the engine's test): the close
    // withdraws the early alert.
    let config = d.join("count.toml");
    std::fs::write(
        &config,
        "[input]\nformat = \"csv\"\ntime_field = \"ts\"\n\
         [[metric]]\nname = \"n\"\nkind = \"count\"\nkey = [\"k\"]\nbucket = \"10s\"\n\
         window = \"30s\"\nepsilon = 0.5\n\
         [[metric.alert]]\nabove = 39\nearly = true\n",
    )
    .unwrap();
    let mut csv = String::from("ts,k\n");
    for (b, n) in [19u64, 15, 12, 12, 0, 12, 6, 18].into_iter().enumerate() {
        let t = t0 + 10 * b as u64;
        for _ in 0..n {
            csv.push_str(&format!("{t},a\n"));
        }
        csv.push_str(&format!("{},clock\n", t + 9));
    }
    let db = d.join("c.db");
    let out = tidemark(&["run", "--config", s(&config), "--db", s(&db)], &csv);
    ok(&out);
    let lines = json_lines(&out);
    let phases: Vec<(&str, &str)> = lines
        .iter()
        .map(|l| (l["key"].as_str().unwrap(), l["phase"].as_str().unwrap()))
        .collect();
    assert_eq!(phases, [("a", "early"), ("a", "withdrawn")], "{lines:?}");
    assert!(lines[0]["estimate"].as_f64() > lines[0]["limit"].as_f64());
    assert!(lines[1]["estimate"].as_f64() <= lines[1]["limit"].as_f64());
    std::fs::remove_dir_all(&d).unwrap();
}
