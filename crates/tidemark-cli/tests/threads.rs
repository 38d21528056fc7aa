//! `tidemark run --threads 2` against `--threads 1` on every example config (the Kafka one
//! aside: a topic is read in one thread): the same alerts, the same summary, the same stored
//! rows and run state, with late, blank, malformed and too-long lines in the input; the same
//! from a named pipe, whose early alert goes out before its writer writes more. The kill
//! tests of `run.rs` hold resumes with a parse thread equal to a one-thread run.

mod common;

use std::path::{Path, PathBuf};

use common::{dir, s, tidemark};
use tidemark_stream::config::Config;
use tidemark_stream::flowgen::{FlowLog, FlowSpec};
use tidemark_stream::pipeline::RunState;
use tidemark_stream::store::{RedbStore, Store};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

/// Every stored bucket as (table, key, start, bytes), and the run state.
type Dump = (Vec<(String, Vec<u8>, u64, Vec<u8>)>, RunState);

/// Every bucket of every metric of the store's config, its rollups', and the run state.
fn dump(db: &Path) -> Dump {
    let store = RedbStore::open_existing(db).unwrap();
    let meta = store.meta().unwrap().expect("a committed run");
    let config = Config::from_toml(&meta.config).unwrap();
    let mut rows = Vec::new();
    for m in &config.metrics {
        for table in std::iter::once(m.name.clone()).chain(m.rollup_name()) {
            store
                .scan(&table, 0, u64::MAX, &mut |k, start, b| {
                    rows.push((table.clone(), k.to_vec(), start, b.to_vec()))
                })
                .unwrap();
        }
    }
    (rows, RunState::from_bytes(&meta.state).unwrap())
}

/// One run as the tests compare it: what it printed, what its summary counted (its timing
/// aside), and what it stored.
struct Ran {
    alerts: String,
    counted: Vec<String>,
    dump: Dump,
}

/// `tidemark run --config config --db db --threads threads` with `args` after them (the
/// input last, or none for standard input) and `stdin`; the run must succeed.
fn run_with(config: &Path, db: &Path, threads: &str, args: &[&str], stdin: &str) -> Ran {
    let mut all = vec![
        "run",
        "--config",
        s(config),
        "--db",
        s(db),
        "--threads",
        threads,
    ];
    all.extend_from_slice(args);
    let out = tidemark(&all, stdin);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{}: {stderr}", config.display());
    // The summary's timing varies; what it counted must not.
    let counted = stderr
        .lines()
        .filter(|l| !l.contains(" s ") && !l.contains("/s"))
        .map(str::to_string)
        .collect();
    Ran {
        alerts: String::from_utf8_lossy(&out.stdout).to_string(),
        counted,
        dump: dump(db),
    }
}

/// A one-thread run and a two-thread run printed, counted and stored the same rows.
fn assert_same_rows(one: &Ran, two: &Ran, name: &str) {
    assert_eq!(one.alerts, two.alerts, "{name}: alerts differ");
    assert_eq!(one.counted, two.counted, "{name}: the summaries differ");
    assert!(one.dump.0 == two.dump.0, "{name}: stored rows differ");
}

/// Runs `config` over `input` (a file in `d`) with one thread and with two; both must
/// print, say and store the same. Returns the rows stored.
fn same_with_two_threads(d: &Path, config: &Path, input: &str, extra: &[&str]) -> usize {
    let file = d.join("input");
    std::fs::write(&file, input).unwrap();
    let stem = config.file_stem().unwrap().to_string_lossy();
    let mut args = extra.to_vec();
    args.push(s(&file));
    let [one, two] = ["1", "2"].map(|threads| {
        let db = d.join(format!("{stem}-{}-t{threads}.db", extra.len()));
        run_with(config, &db, threads, &args, "")
    });
    let name = config.display().to_string();
    assert_same_rows(&one, &two, &name);
    assert_eq!(one.dump.1, two.dump.1, "{name}: run states differ");
    one.dump.0.len()
}

/// The demo's flow log with a too-late line, a blank line, a malformed line and a line past
/// `max_line_bytes` (1 MiB) in it.
fn flows(latency: bool) -> String {
    let log = FlowLog::generate(&FlowSpec {
        minutes: 14,
        users: 400,
        scanners: 2,
        seed: 3,
        ..FlowSpec::default()
    });
    let csv = if latency {
        log.to_csv_with_latency()
    } else {
        log.to_csv()
    };
    let mut lines: Vec<String> = csv.lines().map(str::to_string).collect();
    let n = lines.len();
    let columns = lines[0].matches(',').count();
    let late = lines[1].clone();
    lines.insert(n / 2, late);
    lines.insert(n / 3, String::new());
    lines.insert(n / 4, "not,a,record".into());
    lines.insert(n / 5, "x".repeat(1_100_000));
    lines.insert(n / 6, format!("1{}", ",x".repeat(columns + 1)));
    // A key past max_key_bytes (4 KiB), and one with a time ten years ahead too: the time
    // is what a run names first.
    let fields: Vec<String> = lines[n / 2].split(',').map(str::to_string).collect();
    let with = |time: u64, key: &str| {
        let mut f = fields.clone();
        f[0] = time.to_string();
        f[1] = key.to_string();
        f.join(",")
    };
    let now: u64 = fields[0].parse().unwrap();
    lines.insert(n / 7, with(now, &"k".repeat(5000)));
    lines.insert(n / 8, with(now + 315_360_000, &"k".repeat(5000)));
    lines.join("\n") + "\n"
}

#[test]
fn every_example_stores_and_alerts_the_same_with_a_parse_thread() {
    let d = dir("threads-examples");
    let bad = ["--skip-bad", "--close"];
    for (config, input) in [
        ("fanout.toml", flows(false)),
        ("fanout-exaloglog.toml", flows(false)),
        ("hammer.toml", flows(false)),
        ("latency.toml", flows(true)),
    ] {
        let rows = same_with_two_threads(&d, &example(config), &input, &bad);
        assert!(rows > 1000, "{config}: {rows} rows stored");
    }
    // Checkpoints every 5,000 records: written by the committer thread while the run reads on.
    let text = std::fs::read_to_string(example("fanout.toml")).unwrap();
    let often = d.join("often.toml");
    std::fs::write(
        &often,
        text.replace("[input]", "[state]\ncheckpoint_records = 5000\n\n[input]"),
    )
    .unwrap();
    same_with_two_threads(&d, &often, &flows(false), &bad);
    let mut jsonl = String::new();
    for i in 0..60_000u64 {
        let sec = i / 40;
        jsonl.push_str(&format!(
            "{{\"time\": \"2024-01-01T{:02}:{:02}:{:02}Z\", \"user\": \"u{}\", \"path\": \"/p{}\"}}\n",
            sec / 3600,
            sec / 60 % 60,
            sec % 60,
            i % 97,
            i % 13
        ));
        if i == 30_000 {
            // Past the 2-minute lateness: merged into its stored bucket.
            jsonl.push_str(
                "{\"time\": \"2024-01-01T00:00:10Z\", \"user\": \"u0\", \"path\": \"/late\"}\n",
            );
            jsonl.push_str("{\"time\": 12}\n\n");
            // Not an object: the parser's error quotes the whole string.
            for _ in 0..40 {
                jsonl.push_str(&format!("\"{}\"\n", "A".repeat(900_000)));
            }
        }
    }
    let rows = same_with_two_threads(&d, &example("requests.toml"), &jsonl, &bad);
    assert!(rows > 1000, "requests.toml: {rows} rows stored");
    // Without --close, the unterminated last line waits for the next run in both.
    let open_ended = jsonl.trim_end().to_string();
    same_with_two_threads(&d, &example("requests.toml"), &open_ended, &["--skip-bad"]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_bad_line_stops_a_two_thread_run_where_it_stops_one_thread() {
    let d = dir("threads-bad-line");
    let config = example("fanout.toml");
    let input = flows(false);
    let file = d.join("flows.csv");
    std::fs::write(&file, &input).unwrap();
    let mut said = Vec::new();
    for threads in ["1", "2"] {
        let db = d.join(format!("t{threads}.db"));
        let out = tidemark(
            &[
                "run",
                "--config",
                s(&config),
                "--db",
                s(&db),
                "--threads",
                threads,
                s(&file),
            ],
            "",
        );
        assert!(!out.status.success());
        let (_, state) = dump(&db);
        said.push((String::from_utf8_lossy(&out.stderr).to_string(), state));
    }
    // The first bad line has a key past its limit and a time ten years ahead: the time is
    // named, by both.
    assert!(
        said[0].0.contains("flows.csv:") && said[0].0.contains("ahead of the latest time"),
        "{}",
        said[0].0
    );
    assert_eq!(said[0].0, said[1].0, "the errors differ");
    assert_eq!(said[0].1, said[1].1, "committed up to a different place");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_bad_line_after_buckets_written_ahead_commits_them_up_to_the_line() {
    // 2,000 sources over 10 minutes, a malformed line at 80%: a two-thread run has written
    // about 16,000 buckets ahead into its open transaction when it meets the line, then
    // commits what came before the line and stops, as one thread does. Skipping bad lines,
    // both runs then read on to the same store.
    let d = dir("threads-bad-line-ahead");
    let config = example("fanout.toml");
    let log = FlowLog::generate(&FlowSpec {
        minutes: 10,
        users: 2_000,
        scanners: 2,
        seed: 5,
        ..FlowSpec::default()
    })
    .to_csv();
    let mut lines: Vec<&str> = log.lines().collect();
    let at = lines.len() * 4 / 5;
    lines.insert(at, "not,a,record");
    let file = d.join("flows.csv");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let mut stopped = Vec::new();
    for threads in ["1", "2"] {
        let db = d.join(format!("t{threads}.db"));
        let args = [
            "run",
            "--config",
            s(&config),
            "--db",
            s(&db),
            "--threads",
            threads,
        ];
        let out = tidemark(&[&args[..], &[s(&file)]].concat(), "");
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            !out.status.success() && err.contains(&format!("flows.csv:{}", at + 1)),
            "{err}"
        );
        stopped.push(dump(&db));
        let out = tidemark(&[&args[..], &["--skip-bad", s(&file)]].concat(), "");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stopped.push(dump(&db));
    }
    assert!(
        stopped[0].0.len() > 10_000,
        "buckets committed before the line"
    );
    assert_eq!(
        stopped[0].1.records as usize,
        at - 1,
        "every record before the line"
    );
    assert!(
        stopped[0].0 == stopped[2].0,
        "stored rows differ at the bad line"
    );
    assert_eq!(
        stopped[0].1, stopped[2].1,
        "committed up to a different place"
    );
    assert!(stopped[1].0 == stopped[3].0, "stored rows differ after it");
    assert_eq!(stopped[1].1, stopped[3].1, "the run states differ after it");
    std::fs::remove_dir_all(&d).unwrap();
}

/// `tidemark run --threads 2` of `config` into `db` reading the named pipe `pipe`, started,
/// its standard output to `stdout` and its standard error piped.
fn spawn_on_pipe(
    config: &Path,
    db: &Path,
    pipe: &Path,
    stdout: std::process::Stdio,
) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args([
            "run",
            "--config",
            s(config),
            "--db",
            s(db),
            "--threads",
            "2",
            s(pipe),
        ])
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Makes a named pipe at `p`.
fn fifo(p: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", p.display());
}

/// A named pipe (`<(zcat log.gz)`) is parsed in a thread of its own too: the same alerts,
/// summary and stored rows as one thread reading it.
#[test]
fn a_named_pipe_stores_and_alerts_the_same_with_a_parse_thread() {
    let d = dir("threads-pipe");
    let config = example("fanout.toml");
    let input = flows(false);
    // One pipe for both runs: its name is in the messages.
    let pipe = d.join("flows.pipe");
    fifo(&pipe);
    let [one, two] = ["1", "2"].map(|threads| {
        let writer = {
            let (pipe, input) = (pipe.clone(), input.clone());
            std::thread::spawn(move || std::fs::write(pipe, input))
        };
        let db = d.join(format!("pipe-t{threads}.db"));
        let ran = run_with(&config, &db, threads, &["--skip-bad", s(&pipe)], "");
        writer.join().unwrap().unwrap();
        ran
    });
    assert!(!one.alerts.is_empty(), "the scanners alert");
    assert_same_rows(&one, &two, "a named pipe");
    std::fs::remove_dir_all(&d).unwrap();
}

/// With a parse thread, a pipe's early alert goes out while the writer has not written the
/// rest: the thread hands over what it parsed before a read that may wait, and the run adds
/// it and sends its alerts before it waits.
#[test]
fn a_pipes_early_alert_goes_out_before_the_writer_writes_more() {
    use std::io::{BufRead, BufReader, Write};
    let d = dir("threads-pipe-early");
    let config = d.join("scan.toml");
    std::fs::write(
        &config,
        "[input]\nformat = \"csv\"\ntime_field = \"ts\"\n\
         [[metric]]\nname = \"fanout\"\nkind = \"distinct\"\nkey = [\"src\"]\nitem = [\"dst\"]\n\
         bucket = \"1m\"\nwindow = \"5m\"\n\
         [[metric.alert]]\nabove = 20\nearly = true\n",
    )
    .unwrap();
    let pipe = d.join("flows.pipe");
    fifo(&pipe);
    let db = d.join("s.db");
    let mut child = spawn_on_pipe(&config, &db, &pipe, std::process::Stdio::piped());
    let mut writer = common::open_pipe_for(&mut child, &pipe);
    // 25 distinct destinations in the first half minute: past 20, an early alert (fewer
    // than the 32 events the engine adds at a time: only the add before a wait raises it).
    let mut first = String::from("ts,src,dst\n");
    for i in 0..25u64 {
        first.push_str(&format!("{},scan,d{i}\n", 1_700_000_400 + i / 2));
    }
    writer.write_all(first.as_bytes()).unwrap();
    writer.flush().unwrap();
    // The alert comes while the pipe stays open with nothing more in it.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let alert = rx.recv_timeout(std::time::Duration::from_secs(20));
    let Ok(alert) = alert else {
        let _ = child.kill();
        panic!("no early alert while the writer waited");
    };
    assert!(alert.contains("\"phase\":\"early\""), "{alert}");
    writer
        .write_all(format!("{},quiet,x\n", 1_700_000_400 + 200).as_bytes())
        .unwrap();
    drop(writer);
    let status = child.wait().unwrap();
    assert!(status.success());
    std::fs::remove_dir_all(&d).unwrap();
}

/// Standard input is parsed in a thread of its own once its first 64 KiB (what knows it from
/// the stream a completed run read) are read: the same alerts, summary, rows and run state.
#[test]
fn standard_input_stores_and_alerts_the_same_with_a_parse_thread() {
    let d = dir("threads-stdin");
    let config = example("fanout.toml");
    let input = flows(false);
    let [one, two] = ["1", "2"].map(|threads| {
        let db = d.join(format!("stdin-t{threads}.db"));
        run_with(&config, &db, threads, &["--skip-bad"], &input)
    });
    assert!(!one.alerts.is_empty(), "the scanners alert");
    assert_same_rows(&one, &two, "standard input");
    assert_eq!(one.dump.1, two.dump.1, "run states differ");
    // The same stream again after a completed run is refused by both, from its first bytes.
    let db = d.join("stdin-t2.db");
    let again = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&db),
            "--threads",
            "2",
        ],
        &input,
    );
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("same"));
    std::fs::remove_dir_all(&d).unwrap();
}

/// A bad line on a pipe whose writer stays open stops a two-thread run at once, as it stops
/// one thread: the parse thread, waiting in a read for more, is not waited for.
#[test]
fn a_bad_line_on_a_pipe_left_open_stops_the_run_at_once() {
    use std::io::Write;
    let d = dir("threads-pipe-bad");
    let config = example("fanout.toml");
    let pipe = d.join("flows.pipe");
    fifo(&pipe);
    let db = d.join("b.db");
    let mut child = spawn_on_pipe(&config, &db, &pipe, std::process::Stdio::null());
    let mut writer = common::open_pipe_for(&mut child, &pipe);
    writer
        .write_all(b"ts,src_ip,dst_ip,dst_port\n1700000000,10.0.0.1,10.1.0.1,443\nnot a record\n")
        .unwrap();
    writer.flush().unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            panic!("the run waited for the pipe's writer after its bad line");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    drop(writer);
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("flows.pipe:3"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}
