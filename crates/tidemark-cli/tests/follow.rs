//! `run --follow` against an uninterrupted run over the same lines: appended lines (one
//! written in two parts), a rotation with lines still written to the old file, a truncation,
//! and a stop by SIGTERM; and a log split in two parts run one after the other.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{dir, ok, s, tidemark};
use tidemark_stream::config::Config;
use tidemark_stream::engine::{Engine, NoRows, StateTable};
use tidemark_stream::pipeline::RunState;
use tidemark_stream::store::{RedbStore, Store};

const CONFIG: &str = r#"
[input]
format = "csv"
time_field = "ts"

[[metric]]
name = "fanout"
kind = "distinct"
key = ["src"]
item = ["dst"]
bucket = "10s"
window = "30s"
allowed_lateness = "5s"

[[metric]]
name = "hits"
kind = "count"
key = ["dst"]
bucket = "10s"
window = "30s"

[state]
checkpoint = "100ms"
"#;

const HEADER: &str = "ts,src,dst\n";

/// Record `i`: twenty a second, seven sources, thirteen destinations.
fn line(i: u64) -> String {
    format!("{},s{},d{}\n", 1_700_000_000 + i / 20, i % 7, i % 13)
}

fn lines(from: u64, to: u64) -> String {
    (from..to).map(line).collect()
}

/// A store's buckets (table, key, start, bytes), closed and open, of both metrics; what its
/// engine counted; and its records.
type Dump = (Vec<(String, Vec<u8>, u64, Vec<u8>)>, String, u64);

fn dump(db: &Path) -> Dump {
    let store = RedbStore::open_existing(db).unwrap();
    let meta = store.meta().unwrap().expect("a committed run");
    let mut rows = Vec::new();
    for m in ["fanout", "hits"] {
        for table in [m.to_string(), StateTable::Open.name(m)] {
            store
                .read(&mut |r| {
                    r.scan(&table, 0, u64::MAX, &mut |k, start, b| {
                        rows.push((table.clone(), k.to_vec(), start, b.to_vec()))
                    })
                })
                .unwrap();
        }
    }
    let state = RunState::from_bytes(&meta.state).unwrap();
    let config = Config::from_toml(&meta.config).unwrap();
    let engine = Engine::restore(&config, &state.engine, &mut NoRows).unwrap();
    let counted = (0..engine.metric_count())
        .map(|m| format!("{:?} {:?};", engine.counters(m), engine.closed_until(m)))
        .collect();
    (rows, counted, state.records)
}

/// Records the store has committed, or 0 while it has none.
fn records(db: &Path) -> u64 {
    let Ok(store) = RedbStore::open_existing(db) else {
        return 0;
    };
    match store.meta() {
        Ok(Some(meta)) => RunState::from_bytes(&meta.state).map_or(0, |s| s.records),
        _ => 0,
    }
}

fn wait_for(db: &Path, n: u64) {
    let started = Instant::now();
    while records(db) < n {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the follower committed {} of {n} records",
            records(db)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(records(db), n, "no record counted twice");
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

/// Starts `tidemark run --follow` on `log`.
fn follow(config: &Path, db: &Path, log: &Path) -> Child {
    follow_with(config, db, log, &[])
}

fn follow_with(config: &Path, db: &Path, log: &Path, more: &[&str]) -> Child {
    // A rotated file is kept for 1 s of silence unless the test says otherwise (the default,
    // 5 s, would only make the tests slower).
    let wait: &[&str] = if more.contains(&"--rotate-wait") {
        &[]
    } else {
        &["--rotate-wait", "1s"]
    };
    Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args([
            "run",
            "--follow",
            "--quiet",
            "--config",
            s(config),
            "--db",
            s(db),
        ])
        .args(wait)
        .args(more)
        .arg(log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Stops a follower with SIGTERM: it must exit cleanly, having committed.
fn stop(child: Child) {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = common::wait_within(
        child,
        "a follower stopped by SIGTERM",
        common::COMMAND_LIMIT,
    );
    assert!(
        out.status.success(),
        "SIGTERM stops the follower in order: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The store of one run over records `0..n`, in order, in `dir`, dumped.
fn one_run(config: &Path, dir: &Path, n: u64) -> Dump {
    let all = dir.join("all.csv");
    std::fs::write(&all, format!("{HEADER}{}", lines(0, n))).unwrap();
    let db = dir.join("one.db");
    let args = [
        "run",
        "--quiet",
        "--config",
        s(config),
        "--db",
        s(&db),
        s(&all),
    ];
    ok(&tidemark(&args, ""));
    dump(&db)
}

/// Asserts the followed store `db` equals one run over records `0..n`; its dump.
fn equals_one_run(config: &Path, d: &Path, db: &Path, n: u64) -> Dump {
    let (followed, one) = (dump(db), one_run(config, d, n));
    assert_eq!(followed.1, one.1, "counters differ");
    assert_eq!(followed.0, one.0, "buckets differ");
    followed
}

/// Waits for the follower to commit records `0..n`, stops it, checks its store against one run
/// over them, and removes the directory.
fn finish(child: Child, d: &Path, config: &Path, db: &Path, n: u64) {
    wait_for(db, n);
    stop(child);
    equals_one_run(config, d, db, n);
    std::fs::remove_dir_all(d).unwrap();
}

/// A directory `name` with `config`, a log of records `0..n` and a follower started on it
/// (with `more` arguments), once it has committed them: the directory, the config's, the
/// log's and the store's paths, and the follower.
fn following(
    name: &str,
    config: &str,
    n: u64,
    more: &[&str],
) -> (PathBuf, PathBuf, PathBuf, PathBuf, Child) {
    let d = dir(name);
    let config_path = d.join("c.toml");
    std::fs::write(&config_path, config).unwrap();
    let log = d.join("log.csv");
    let db = d.join("f.db");
    std::fs::write(&log, format!("{HEADER}{}", lines(0, n))).unwrap();
    let child = follow_with(&config_path, &db, &log, more);
    wait_for(&db, n);
    (d, config_path, log, db, child)
}

#[test]
fn a_followed_log_appended_rotated_truncated_and_stopped_equals_one_run() {
    let (d, config, log, db, child) = following("follow-rotate", CONFIG, 300, &[]);

    // Appended, the last line in two writes: it is read once, whole.
    let half = line(499);
    append(&log, &lines(300, 499));
    append(&log, &half[..8]);
    std::thread::sleep(Duration::from_millis(400));
    append(&log, &half[8..]);
    wait_for(&db, 500);

    // Rotated: renamed away, written once more, and a new file (with its header) in place.
    let old = d.join("log.csv.1");
    std::fs::rename(&log, &old).unwrap();
    append(&old, &lines(500, 520));
    std::fs::write(&log, format!("{HEADER}{}", lines(520, 700))).unwrap();
    wait_for(&db, 700);

    // Truncated (copytruncate): emptied, then written on without a header.
    std::fs::write(&log, "").unwrap();
    append(&log, &lines(700, 800));
    wait_for(&db, 800);

    stop(child);
    // One run over the same lines, in the same order.
    let followed = equals_one_run(&config, &d, &db, 800);
    assert_eq!(followed.2, 800);
    assert!(
        followed.0.iter().any(|r| r.0.starts_with('~')),
        "the last buckets are still open"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// A rotated file whose last line never got its newline (its writer stopped mid-line, or wrote
/// the last bytes just before the rename): the line counts once, as in a run over the file, and
/// lines written to the old file after the rename still count.
#[test]
fn a_rotated_file_s_unterminated_last_line_counts_once() {
    let (d, config, log, db, child) = following("follow-rotate-tail", CONFIG, 300, &[]);
    // Record 349 without its newline: the follower sees it and waits for the rest.
    let last = line(349);
    append(&log, &lines(300, 349));
    append(&log, last.trim_end());
    wait_for(&db, 349);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        records(&db),
        349,
        "an unterminated line waits while the file may grow"
    );
    let old = d.join("log.csv.1");
    std::fs::rename(&log, &old).unwrap();
    std::fs::write(&log, format!("{HEADER}{}", lines(350, 400))).unwrap();
    finish(child, &d, &config, &db, 400);
}

/// A followed line past max_line_bytes written in parts, with --skip-bad: one bad line, counted
/// once its newline comes, and the lines around it counted.
#[test]
fn a_too_long_line_written_in_parts_is_one_bad_line() {
    let config = CONFIG.replace(
        "time_field = \"ts\"",
        "time_field = \"ts\"\nmax_line_bytes = 100",
    );
    let (d, config, log, db, child) = following("follow-long", &config, 100, &["--skip-bad"]);
    for _ in 0..3 {
        append(&log, &"x".repeat(5_000));
        std::thread::sleep(Duration::from_millis(300));
    }
    append(&log, &format!("\n{}", lines(100, 150)));
    wait_for(&db, 150);
    stop(child);
    let store = RedbStore::open_existing(&db).unwrap();
    let state = RunState::from_bytes(&store.meta().unwrap().unwrap().state).unwrap();
    assert_eq!((state.records, state.bad_lines), (150, 1));
    drop(store);
    equals_one_run(&config, &d, &db, 150);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A rotation that brings to the path a file on an inode read before, with other bytes (what
/// logrotate's deleted file and a reused inode look like): a new file, read from its start,
/// where the run stopped before with "rewritten or replaced".
#[test]
fn a_rotated_in_file_on_an_inode_read_before_is_a_new_file() {
    let (d, config, log, db, child) = following("follow-reused", CONFIG, 100, &[]);
    let (old, older) = (d.join("log.csv.1"), d.join("log.csv.2"));
    std::fs::rename(&log, &old).unwrap();
    std::fs::write(&log, format!("{HEADER}{}", lines(100, 150))).unwrap();
    wait_for(&db, 150);
    // The first file's inode, its bytes rewritten in place (what a new file on a reused
    // inode is to its old mark), rotated in.
    std::fs::write(&old, format!("{HEADER}{}", lines(150, 200))).unwrap();
    std::fs::rename(&log, &older).unwrap();
    std::fs::rename(&old, &log).unwrap();
    finish(child, &d, &config, &db, 200);
}

/// Truncated and written again past what was read within one poll (copytruncate and a busy
/// writer): no shorter than what was read, yet rewritten, so read again from its start.
#[test]
fn a_truncation_followed_at_once_by_more_bytes_than_were_read_is_seen() {
    let (d, config, log, db, child) = following("follow-regrown", CONFIG, 50, &[]);
    std::fs::write(&log, format!("{HEADER}{}", lines(50, 250))).unwrap();
    finish(child, &d, &config, &db, 250);
}

/// The log written on and rotated while no follower ran (stopped, or killed): the next
/// follower reads the rotated file's lines after its mark, then the path's new file, where the
/// lines written between the stop and the rotation were lost.
#[test]
fn a_rotation_while_no_follower_runs_loses_nothing() {
    let (d, config, log, db, child) = following("follow-down", CONFIG, 100, &[]);
    stop(child);
    append(&log, &lines(100, 150));
    std::fs::rename(&log, d.join("log.csv.1")).unwrap();
    std::fs::write(&log, format!("{HEADER}{}", lines(150, 200))).unwrap();
    let child = follow(&config, &db, &log);
    wait_for(&db, 200);
    // Rotated again while it runs: as before.
    std::fs::rename(&log, d.join("log.csv.2")).unwrap();
    std::fs::write(&log, format!("{HEADER}{}", lines(200, 250))).unwrap();
    wait_for(&db, 250);
    stop(child);
    // A follower started again finds nothing left behind: nothing is counted twice.
    let child = follow(&config, &db, &log);
    std::thread::sleep(Duration::from_millis(600));
    stop(child);
    assert_eq!(records(&db), 250);
    equals_one_run(&config, &d, &db, 250);
    std::fs::remove_dir_all(&d).unwrap();
}

/// --follow on a directory or a named pipe fails at once, naming it, where a directory was
/// waited for forever (it never has a whole first line) and a pipe blocked the look.
#[test]
fn following_a_directory_or_a_pipe_is_refused_at_once() {
    let d = dir("follow-kinds");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let fifo = d.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (path, says) in [(d.join("sub"), "a directory"), (fifo, "a pipe or a device")] {
        if !path.exists() {
            std::fs::create_dir(&path).unwrap();
        }
        let mut child = follow_with(&config, &d.join("f.db"), &path, &[]);
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > Duration::from_secs(20) {
                child.kill().unwrap();
                panic!("--follow {} still waits", path.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_log_split_in_two_parts_equals_one_run() {
    let d = dir("follow-split");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    // The parts meet inside a bucket, and the second holds events of the first's last
    // buckets (within the lateness): nothing is dropped for being split.
    let mut first = lines(0, 1_000);
    let mut second = String::new();
    for i in 1_000..2_000 {
        // Every ninth event of the second part is 3 s late.
        let ts = 1_700_000_000 + i / 20 - if i % 9 == 0 { 3 } else { 0 };
        second.push_str(&format!("{ts},s{},d{}\n", i % 7, i % 13));
    }
    let (a, b) = (d.join("a.csv"), d.join("b.csv"));
    std::fs::write(&a, format!("{HEADER}{first}")).unwrap();
    std::fs::write(&b, format!("{HEADER}{second}")).unwrap();
    let split = d.join("split.db");
    for part in [&a, &b] {
        let args = [
            "run",
            "--quiet",
            "--config",
            s(&config),
            "--db",
            s(&split),
            s(part),
        ];
        ok(&tidemark(&args, ""));
    }
    first.push_str(&second);
    let all = d.join("all.csv");
    std::fs::write(&all, format!("{HEADER}{first}")).unwrap();
    let one = d.join("one.db");
    let args = [
        "run",
        "--quiet",
        "--config",
        s(&config),
        "--db",
        s(&one),
        s(&all),
    ];
    ok(&tidemark(&args, ""));
    let (parts, whole) = (dump(&split), dump(&one));
    assert_eq!(parts.2, 2_000);
    assert_eq!(parts.1, whole.1, "counters differ");
    assert!(parts.1.contains("dropped: 0"), "{}", parts.1);
    assert_eq!(parts.0, whole.0, "buckets differ");
    // A query sees the open buckets, marked partial; after --close the same window, whole.
    let query = |db: &Path| {
        let args = [
            "query",
            "--db",
            s(db),
            "--metric",
            "fanout",
            "--window",
            "30s",
        ];
        let out = tidemark(&[&args[..], &["--at", "1700000100", "--json"]].concat(), "");
        ok(&out);
        common::json_lines(&out)
    };
    let open = query(&split);
    assert!(
        !open.is_empty() && open.iter().all(|r| r["partial"] == true),
        "{open:?}"
    );
    // --close then closes every bucket: the same as one run closed.
    for db in [&split, &one] {
        let args = [
            "run",
            "--quiet",
            "--close",
            "--config",
            s(&config),
            "--db",
            s(db),
        ];
        ok(&tidemark(&args, ""));
    }
    let (parts, whole) = (dump(&split), dump(&one));
    assert!(
        !parts.0.iter().any(|r| r.0.starts_with('~')),
        "every bucket closed"
    );
    assert_eq!(parts.0, whole.0);
    let closed = query(&split);
    assert!(closed.iter().all(|r| r["partial"] == false), "{closed:?}");
    let estimates = |rows: &[serde_json::Value]| -> Vec<(String, f64)> {
        rows.iter()
            .map(|r| (r["key"].to_string(), r["estimate"].as_f64().unwrap()))
            .collect()
    };
    assert_eq!(
        estimates(&open),
        estimates(&closed),
        "no event came after the parts"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_followed_path_missing_for_a_while_and_a_header_written_in_parts_lose_nothing() {
    let d = dir("follow-gap");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let log = d.join("log.csv");
    let db = d.join("f.db");
    // --follow takes one file, and says so before creating a store.
    let two = [
        "run",
        "--follow",
        "--config",
        s(&config),
        "--db",
        s(&db),
        "a",
        "b",
    ];
    let out = tidemark(&two, "");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--follow"));
    assert!(!db.exists());

    // Started before the file exists; the file's header arrives in two writes.
    let child = follow(&config, &db, &log);
    std::thread::sleep(Duration::from_millis(300));
    append(&log, "ts,sr");
    std::thread::sleep(Duration::from_millis(300));
    append(&log, &format!("c,dst\n{}", lines(0, 100)));
    wait_for(&db, 100);
    // Rotated away, written once more, and no new file for a while.
    let old = d.join("log.csv.1");
    std::fs::rename(&log, &old).unwrap();
    append(&old, &lines(100, 120));
    std::thread::sleep(Duration::from_millis(600));
    wait_for(&db, 120);
    // Then an empty file, whose header and lines come later.
    std::fs::write(&log, "").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    append(&log, &format!("{HEADER}{}", lines(120, 200)));
    wait_for(&db, 200);
    stop(child);
    let (followed, one) = (dump(&db), one_run(&config, &d, 200));
    assert_eq!((followed.1, followed.2), (one.1, one.2));
    assert_eq!(followed.0, one.0);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A rotated file written again after a second of silence, its path missing meanwhile (a
/// writer that keeps its handle across the rename and logs in bursts): its lines are read
/// within the grace the rotated file is kept for, before the path's new file's lines move the
/// watermark, so the store equals one run over the lines in the order they were written.
#[test]
fn a_rotated_file_idle_for_a_second_then_written_again_loses_nothing() {
    let (d, config, log, db, child) =
        following("follow-rotate-wait", CONFIG, 200, &["--rotate-wait", "3s"]);
    let old = d.join("log.csv.1");
    std::fs::rename(&log, &old).unwrap();
    std::thread::sleep(Duration::from_millis(1_200));
    append(&old, &lines(200, 300));
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(&log, format!("{HEADER}{}", lines(300, 400))).unwrap();
    finish(child, &d, &config, &db, 400);
}

/// The same while no follower runs: stopped, the log rotated and the new file written, then
/// the next follower started and the old file written again (its writer still held it): the
/// old file's lines are read, within the grace a recently written rotated file is kept for,
/// before the new file's, as one run over the lines in the order they were written.
#[test]
fn a_rotation_while_stopped_reads_the_files_in_the_order_they_were_written() {
    let (d, config, log, db, child) =
        following("follow-down-order", CONFIG, 200, &["--rotate-wait", "3s"]);
    stop(child);
    let old = d.join("log.csv.1");
    std::fs::rename(&log, &old).unwrap();
    std::fs::write(&log, format!("{HEADER}{}", lines(300, 400))).unwrap();
    let child = follow_with(&config, &db, &log, &["--rotate-wait", "3s"]);
    std::thread::sleep(Duration::from_millis(500));
    append(&old, &lines(200, 300));
    finish(child, &d, &config, &db, 400);
}
