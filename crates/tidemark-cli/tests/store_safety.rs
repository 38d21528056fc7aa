//! A pipeline's store against the input a careless or hostile user sends: far-future and
//! overflowing times, the same file under another path, a file replaced under its name, huge
//! lines and keys, and a store damaged on disk. Each must end in a clear error or the right
//! answer: never a panic, never a store that cannot be read again, never a count of zero
//! where there were thousands.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{dir, ok, s, tidemark};

const CONFIG: &str = r#"
[input]
time_field = "ts"
[[metric]]
name = "hits"
kind = "count"
key = ["user"]
bucket = "1m"
window = "5m"
allowed_lateness = "10s"
[[metric]]
name = "pages"
kind = "distinct"
key = ["user"]
item = ["page"]
bucket = "1m"
window = "5m"
precision = 8
"#;

/// `n` events a minute for `minutes` minutes from 2023-11-14T22:13:20Z, users u0..u4.
fn log(minutes: u64, n: u64) -> String {
    let mut s = String::from("ts,user,page\n");
    for m in 0..minutes {
        for i in 0..n {
            let t = 1_700_000_000 + m * 60 + i * 60 / n;
            s.push_str(&format!("{t},u{},p{}\n", i % 5, (m * n + i) % 37));
        }
    }
    s
}

fn query(db: &Path, metric: &str, extra: &[&str]) -> Output {
    let mut args = vec!["query", "--db", s(db), "--metric", metric, "--window", "5m"];
    args.extend_from_slice(extra);
    args.push("--json");
    tidemark(&args, "")
}

/// `tidemark run --quiet` of `config` into `db` with `extra` flags, `input` on stdin.
fn run_quiet(config: &Path, db: &Path, extra: &[&str], input: &str) -> Output {
    let mut args = vec!["run", "--config", s(config), "--db", s(db), "--quiet"];
    args.extend_from_slice(extra);
    tidemark(&args, input)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn records(db: &Path) -> u64 {
    let o = tidemark(&["check", "--db", s(db), "--json"], "");
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["records"].as_u64().unwrap()
}

#[test]
fn a_time_past_year_9999_or_far_ahead_is_a_bad_line_and_the_store_stays_usable() {
    let d = dir("safety-time");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    // A far-future time once reported: 9,223,372,036,854,720 s once bricked the store.
    let z = d.join("z.csv");
    std::fs::write(
        &z,
        "ts,user,page\n1700000000,a,b\n9223372036854720,a,b\n1700000001,a,c\n",
    )
    .unwrap();
    let db = d.join("z.db");
    let o = tidemark(&["run", "--config", s(&config), "--db", s(&db), s(&z)], "");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("z.csv:3") && stderr(&o).contains("9999"));
    // Skipped, the store is written and stays readable and resumable.
    let o = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&db),
            "--skip-bad",
            s(&z),
        ],
        "",
    );
    ok(&o);
    ok(&query(&db, "hits", &[]));
    ok(&tidemark(
        &["run", "--config", s(&config), "--db", s(&db), s(&z)],
        "",
    ));

    // One event dated 2100 among ordinary ones: refused, never moving the watermark, so
    // nothing is expired and nothing after it is dropped as late.
    let clean = log(10, 20);
    let mut text = clean.clone();
    let cut = text.len() / 2;
    let cut = cut + text[cut..].find('\n').unwrap() + 1;
    text.insert_str(cut, "4102444800,u0,p0\n");
    let x = d.join("x.csv");
    std::fs::write(&x, &clean).unwrap();
    let reference = d.join("x.db");
    ok(&tidemark(
        &["run", "--config", s(&config), "--db", s(&reference), s(&x)],
        "",
    ));
    let y = d.join("y.csv");
    std::fs::write(&y, &text).unwrap();
    let db = d.join("y.db");
    let o = tidemark(&["run", "--config", s(&config), "--db", s(&db), s(&y)], "");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("max_ahead"), "{}", stderr(&o));
    let o = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&db),
            "--skip-bad",
            s(&y),
        ],
        "",
    );
    ok(&o);
    assert!(
        stderr(&o).contains("1 bad lines") && stderr(&o).contains("0 dropped"),
        "{}",
        stderr(&o)
    );
    assert_eq!(records(&db), 200);
    // Every ordinary event is in the store: the same answers as the log without the bad line.
    for metric in ["hits", "pages"] {
        let got = query(&db, metric, &[]);
        ok(&got);
        assert_eq!(
            got.stdout,
            query(&reference, metric, &[]).stdout,
            "{metric}"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_same_file_under_another_path_resumes_and_a_replaced_file_is_refused() {
    let d = dir("safety-identity");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let text = log(6, 10);
    std::fs::write(d.join("access.csv"), &text).unwrap();
    let db = d.join("t.db");
    let run_in = |args: &[&str]| -> Output {
        let mut full = vec!["run", "--config", "c.toml", "--db", "t.db", "--keep-open"];
        full.extend_from_slice(args);
        Command::new(env!("CARGO_BIN_EXE_tidemark"))
            .args(&full)
            .current_dir(&d)
            .output()
            .unwrap()
    };
    ok(&run_in(&["access.csv"]));
    assert_eq!(records(&db), 60);
    // The same file by other spellings, and by a hard link: nothing is counted twice.
    ok(&run_in(&["./access.csv"]));
    ok(&run_in(&[s(&d.join("access.csv"))]));
    std::fs::hard_link(d.join("access.csv"), d.join("link.csv")).unwrap();
    ok(&run_in(&["link.csv", "access.csv"]));
    assert_eq!(records(&db), 60);
    // Appended lines are read, once.
    let more = log(8, 10);
    std::fs::write(d.join("access.csv"), &more).unwrap();
    ok(&run_in(&["./access.csv"]));
    assert_eq!(records(&db), 80);
    // Replaced by other, longer content under the same name (same inode, rewritten): refused.
    let other = log(9, 11).replace("u1,", "v1,");
    std::fs::write(d.join("access.csv"), &other).unwrap();
    let o = run_in(&["access.csv"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("read before") && stderr(&o).contains("--restart"),
        "{}",
        stderr(&o)
    );
    assert_eq!(records(&db), 80, "nothing counted from the refused file");
    // Truncated: refused too.
    std::fs::write(d.join("access.csv"), &more[..more.len() / 2]).unwrap();
    let o = run_in(&["access.csv"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("shorter"), "{}", stderr(&o));
    // --restart reads it as new data.
    std::fs::write(d.join("access.csv"), &other).unwrap();
    ok(&run_in(&["--restart", "access.csv"]));
    assert_eq!(records(&db), 80 + 99);
    // --restart reads a file from its start once, however often and by whatever path the
    // run names it.
    ok(&run_in(&[
        "--restart",
        "access.csv",
        "./access.csv",
        "link.csv",
    ]));
    assert_eq!(records(&db), 80 + 99 + 99);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn long_lines_keys_and_items_are_bad_lines_held_within_the_limit() {
    let d = dir("safety-sizes");
    let config = d.join("c.toml");
    std::fs::write(
        &config,
        CONFIG.replace(
            "time_field = \"ts\"",
            "time_field = \"ts\"\nmax_line_bytes = 4096\nmax_key_bytes = 64",
        ),
    )
    .unwrap();
    let big_key = "k".repeat(100);
    let huge_line = format!("1700000001,u1,{}\n", "p".repeat(20 << 20)); // 20 MiB
    let text = format!(
        "ts,user,page\n1700000000,u0,p0\n{huge_line}1700000002,{big_key},p1\n1700000003,u2,p2\n"
    );
    let f = d.join("f.csv");
    std::fs::write(&f, &text).unwrap();
    let db = d.join("t.db");
    let o = tidemark(&["run", "--config", s(&config), "--db", s(&db), s(&f)], "");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("f.csv:3") && stderr(&o).contains("max_line_bytes = 4096"),
        "{}",
        stderr(&o)
    );
    // The run stops on it without reading it to its end.
    assert!(
        stderr(&o).contains("the line is longer than max_line_bytes = 4096"),
        "{}",
        stderr(&o)
    );
    let o = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&db),
            "--skip-bad",
            s(&f),
        ],
        "",
    );
    ok(&o);
    assert!(stderr(&o).contains("f.csv:4") && stderr(&o).contains("max_key_bytes = 64"));
    // Skipped, it is read to its end: its whole length, not the last buffer's part of it.
    let len = huge_line.len() - 1;
    assert!(
        stderr(&o).contains(&format!("f.csv:3: the line is {len} bytes")),
        "{}",
        stderr(&o)
    );
    assert_eq!(records(&db), 2);
    // The store holds the two good records only: a few KiB, not the 20 MiB line.
    assert!(std::fs::metadata(&db).unwrap().len() < 4 << 20);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_metric_name_that_could_collide_with_a_rollup_is_refused() {
    let d = dir("safety-names");
    let config = d.join("c.toml");
    for bad in ["hits@1h", "a/b", "a b", ""] {
        std::fs::write(&config, CONFIG.replace("\"hits\"", &format!("{bad:?}"))).unwrap();
        let o = tidemark(
            &["run", "--config", s(&config), "--db", s(&d.join("x.db"))],
            "",
        );
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains("metric[0].name"), "{}", stderr(&o));
        assert!(
            !d.join("x.db").exists(),
            "no store created for a bad config"
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_header_naming_a_field_twice_is_refused_at_line_1() {
    let d = dir("safety-header");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let f = d.join("f.csv");
    std::fs::write(&f, "ts,user,page,user\n1700000000,a,b,c\n").unwrap();
    let o = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&d.join("t.db")),
            s(&f),
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("f.csv:1") && stderr(&o).contains("\"user\" twice"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_named_pipe_is_read_as_a_stream_and_a_directory_is_refused() {
    let d = dir("safety-pipe");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let db = d.join("t.db");
    let o = tidemark(&["run", "--config", s(&config), "--db", s(&db), s(&d)], "");
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("directory"), "{}", stderr(&o));
    let fifo = d.join("p.csv");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let text = log(3, 10);
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, text).unwrap())
    };
    ok(&tidemark(
        &["run", "--config", s(&config), "--db", s(&db), s(&fifo)],
        "",
    ));
    writer.join().unwrap();
    assert_eq!(records(&db), 30);
    std::fs::remove_dir_all(&d).unwrap();
}

/// A small deterministic generator (the test must not depend on the run's clock).
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[test]
fn a_damaged_store_is_refused_never_a_panic_or_a_wrong_answer() {
    let d = dir("safety-damage");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let f = d.join("f.csv");
    std::fs::write(&f, log(30, 40)).unwrap();
    let db = d.join("good.db");
    ok(&tidemark(
        &["run", "--config", s(&config), "--db", s(&db), s(&f)],
        "",
    ));
    let good = std::fs::read(&db).unwrap();
    let at = ["--at", "2023-11-14T22:40:00Z"];
    let want_hits = query(&db, "hits", &at);
    let want_pages = query(&db, "pages", &at);
    ok(&want_hits);
    ok(&want_pages);

    let mut rng = SplitMix(11);
    let (mut refused, mut correct) = (0, 0);
    let damaged = d.join("damaged.db");
    for case in 0..150 {
        let mut bytes = good.clone();
        let what = match case % 3 {
            0 => {
                let i = (rng.next() % bytes.len() as u64) as usize;
                bytes[i] ^= 1 << (rng.next() % 8);
                format!("bit flip at {i}")
            }
            1 => {
                let page = (rng.next() % (bytes.len() as u64 / 4096)) as usize * 4096;
                bytes[page..page + 4096].fill(0);
                format!("zeroed page at {page}")
            }
            _ => {
                let n = (rng.next() % bytes.len() as u64) as usize;
                bytes.truncate(n);
                format!("truncated to {n}")
            }
        };
        std::fs::write(&damaged, &bytes).unwrap();
        for (metric, want) in [("hits", &want_hits), ("pages", &want_pages)] {
            let o = query(&damaged, metric, &at);
            match o.status.code() {
                Some(0) => {
                    assert_eq!(o.stdout, want.stdout, "{what}: {metric} answered wrong");
                    correct += 1;
                }
                Some(2) => {
                    let e = stderr(&o);
                    assert!(
                        e.contains("damaged") || e.contains("cannot open"),
                        "{what}: {e}"
                    );
                    // A panic inside the store's library is contained, and says nothing.
                    assert!(!e.contains("panicked"), "{what}: {e}");
                    refused += 1;
                }
                other => panic!("{what}: query exited {other:?}: {}", stderr(&o)),
            }
        }
        // A writer's open verifies every page: `check` and `run` refuse or succeed.
        std::fs::write(&damaged, &bytes).unwrap();
        let o = tidemark(&["check", "--db", s(&damaged)], "");
        assert!(
            matches!(o.status.code(), Some(0 | 2)),
            "{what}: check exited {:?}: {}",
            o.status.code(),
            stderr(&o)
        );
        // Its next step is a restore, not itself again.
        assert!(
            !stderr(&o).contains("run `tidemark check"),
            "{what}: {}",
            stderr(&o)
        );
        if case % 5 == 0 {
            std::fs::write(&damaged, &bytes).unwrap();
            let o = tidemark(
                &["run", "--config", s(&config), "--db", s(&damaged), s(&f)],
                "",
            );
            assert!(
                matches!(o.status.code(), Some(0 | 2)),
                "{what}: run exited {:?}: {}",
                o.status.code(),
                stderr(&o)
            );
        }
    }
    eprintln!("damaged stores: {refused} queries refused, {correct} answered correctly");
    assert!(refused > 0 && correct > 0);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn query_reads_a_store_while_run_writes_it() {
    use std::io::Write;
    let d = dir("safety-concurrent");
    let config = d.join("c.toml");
    std::fs::write(
        &config,
        format!("{CONFIG}\n[state]\ncheckpoint_records = 50\n"),
    )
    .unwrap();
    let db = d.join("t.db");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(["run", "--config", s(&config), "--db", s(&db), "--quiet"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let text = log(20, 30);
    let (head, tail) = text.split_at(text.len() / 2);
    stdin.write_all(head.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // Wait until the run has committed something, asking as a reader would.
    let mut answered = None;
    for _ in 0..200 {
        std::thread::sleep(std::time::Duration::from_millis(25));
        let o = query(&db, "hits", &["--top", "3"]);
        if o.status.success() && !o.stdout.is_empty() {
            answered = Some(o);
            break;
        }
    }
    let o = answered.expect("a query answered while the run was writing");
    assert_eq!(common::json_lines(&o).len(), 3);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run was still writing"
    );
    ok(&tidemark(&["check", "--db", s(&db)], ""));
    stdin.write_all(tail.as_bytes()).unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert_eq!(records(&db), 600);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn the_same_stdin_after_a_completed_run_is_refused_not_counted_twice() {
    // A run killed after its last commit looks interrupted to whoever started it; feeding the
    // same stream again must not count it twice.
    let d = dir("safety-stdin-again");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let db = d.join("t.db");
    let text = log(3, 10);
    let run = |extra: &[&str], input: &str| run_quiet(&config, &db, extra, input);
    ok(&run(&[], &text));
    let o = run(&[], &text);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--restart"), "{}", stderr(&o));
    assert_eq!(records(&db), 30);
    ok(&run(&["--restart"], &text));
    assert_eq!(records(&db), 60);
    // A stream that begins as the completed one did (the same log, grown) is refused too:
    // its first part was counted. Other data is new data.
    let o = run(&[], &log(4, 10));
    assert_eq!(o.status.code(), Some(2));
    ok(&run(&[], &log(4, 10).replace(",u0,", ",w0,")));
    assert_eq!(records(&db), 100);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_interrupted_stdin_run_resumes_only_from_the_same_stream() {
    // A run on standard input stops at a bad line; the next run skips what it committed.
    // Another stream fed then would lose its first bytes uncounted: refused. The same
    // stream, mended, resumes and counts every record once.
    let d = dir("safety-stdin-interrupted");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let db = d.join("t.db");
    let run = |extra: &[&str], input: &str| run_quiet(&config, &db, extra, input);
    let good = log(3, 10);
    let broken = format!("{}BAD\n{}", log(2, 10), &log(3, 10)[log(2, 10).len()..]);
    let o = run(&[], &broken);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(records(&db), 20);
    let other = log(3, 10).replace(",u0,", ",w0,");
    let o = run(&[], &other);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("interrupted run") && stderr(&o).contains("--restart"),
        "{}",
        stderr(&o)
    );
    assert_eq!(records(&db), 20);
    ok(&run(&[], &good));
    assert_eq!(records(&db), 30);
    // u0: two events a minute for three minutes, all inside ten minutes ending at 22:20.
    let window = ["query", "--db", s(&db), "--metric", "hits", "--key", "u0"];
    let o = tidemark(
        &[
            &window[..],
            &["--window", "10m", "--at", "1700000400", "--json"],
        ]
        .concat(),
        "",
    );
    ok(&o);
    assert_eq!(common::json_lines(&o)[0]["estimate"], 6.0);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_interrupted_stdin_run_stopped_by_a_too_long_line_still_knows_its_stream() {
    // The run stops at a line longer than max_line_bytes, inside the stream's first 64 KiB:
    // the bytes before it are still the stream's head, and another stream is refused.
    let d = dir("safety-stdin-too-long");
    let config = d.join("c.toml");
    std::fs::write(
        &config,
        CONFIG.replace(
            "time_field = \"ts\"",
            "time_field = \"ts\"\nmax_line_bytes = 200",
        ),
    )
    .unwrap();
    let db = d.join("t.db");
    let run = |extra: &[&str], input: &str| run_quiet(&config, &db, extra, input);
    let (head, tail) = (log(2, 10), &log(3, 10)[log(2, 10).len()..]);
    let long = format!("1700000130,u0,{}\n", "p".repeat(300));
    let stream = format!("{head}{long}{tail}");
    let o = run(&[], &stream);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(records(&db), 20);
    let o = run(&[], &stream.replace(",u0,", ",w0,"));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("interrupted run"), "{}", stderr(&o));
    // The same stream, skipping the long line, resumes: ten more records.
    ok(&run(&["--skip-bad"], &stream));
    assert_eq!(records(&db), 30);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_byte_order_mark_before_a_json_line_and_lines_of_blanks_are_not_bad_lines() {
    let d = dir("safety-bom-blanks");
    let config = d.join("c.toml");
    std::fs::write(
        &config,
        CONFIG.replace(
            "time_field = \"ts\"",
            "format = \"jsonl\"\ntime_field = \"ts\"",
        ),
    )
    .unwrap();
    let input = d.join("in.jsonl");
    let line = |t: u64| format!("{{\"ts\": {t}, \"user\": \"u0\", \"page\": \"p\"}}\n");
    std::fs::write(
        &input,
        format!(
            "\u{feff}{}  \n\t \n{}",
            line(1_700_000_000),
            line(1_700_000_001)
        ),
    )
    .unwrap();
    let db = d.join("t.db");
    let args = [
        "run",
        "--config",
        s(&config),
        "--db",
        s(&db),
        "--quiet",
        s(&input),
    ];
    ok(&tidemark(&args, ""));
    assert_eq!(records(&db), 2);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_late_event_reaches_the_live_window_of_a_bucket_the_key_had_no_event_in() {
    // Key a: events in the buckets of 0 s and 60 s, then (late, 2 minutes on) one in the
    // bucket of 120 s that a had no event in. The window then holds 3 distinct items: the
    // alert above 2 must fire in the uninterrupted run, as it does after a resume (a restored
    // engine rebuilds its rings from the store).
    let d = dir("safety-late-ring");
    let config = d.join("c.toml");
    std::fs::write(
        &config,
        r#"
[input]
time_field = "ts"
[[metric]]
name = "d"
kind = "distinct"
key = ["user"]
item = ["item"]
bucket = "1m"
window = "10m"
allowed_lateness = "1s"
late = "merge"
[[metric.alert]]
above = 2
margin = 0.0
"#,
    )
    .unwrap();
    let f = d.join("f.csv");
    std::fs::write(
        &f,
        "ts,user,item\n0,a,x1\n61,b,y\n70,a,x2\n125,b,y\n185,b,y\n130,a,x3\n245,b,y\n305,b,y\n",
    )
    .unwrap();
    let o = tidemark(
        &[
            "run",
            "--config",
            s(&config),
            "--db",
            s(&d.join("t.db")),
            s(&f),
        ],
        "",
    );
    ok(&o);
    let alerts = String::from_utf8_lossy(&o.stdout);
    assert!(alerts.contains("\"key\":\"a\""), "{alerts}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_unterminated_last_line_is_left_for_later_or_refuses_a_grown_file() {
    let d = dir("safety-unterminated");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let f = d.join("f.csv");
    let run = |extra: &[&str], db: &str| {
        let mut args = vec!["run", "--config", s(&config), "--db", db, "--quiet"];
        args.extend_from_slice(extra);
        args.push(s(&f));
        tidemark(&args, "")
    };
    let db = d.join("t.db");
    // More will come (the default): the partial last line is not read yet.
    std::fs::write(&f, "ts,user,page\n1700000000,a,p\n1700000001,b").unwrap();
    ok(&run(&[], s(&db)));
    assert_eq!(records(&db), 1);
    let mut text = std::fs::read_to_string(&f).unwrap();
    text.push_str("c,p\n1700000002,c,p\n");
    std::fs::write(&f, &text).unwrap();
    ok(&run(&[], s(&db)));
    assert_eq!(records(&db), 3);
    let o = tidemark(
        &[
            "query",
            "--db",
            s(&db),
            "--metric",
            "hits",
            "--key",
            "bc",
            "--window",
            "5m",
            "--json",
        ],
        "",
    );
    ok(&o);
    assert_eq!(common::json_lines(&o)[0]["estimate"], 1.0);
    // The input's end (--close): the partial line is a record; a file grown after that is
    // refused rather than resumed in the middle of a line.
    let db2 = d.join("t2.db");
    std::fs::write(&f, "ts,user,page\n1700000000,a,p\n1700000001,b,p").unwrap();
    ok(&run(&["--close"], s(&db2)));
    assert_eq!(records(&db2), 2);
    std::fs::write(&f, "ts,user,page\n1700000000,a,p\n1700000001,b,p5\n").unwrap();
    let o = run(&[], s(&db2));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("without a newline"), "{}", stderr(&o));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_late_event_for_a_bucket_past_retention_is_dropped_not_merged() {
    let d = dir("safety-retention");
    let config = d.join("c.toml");
    std::fs::write(
        &config,
        r#"
[input]
time_field = "ts"
[[metric]]
name = "c"
kind = "count"
key = ["user"]
bucket = "1m"
window = "2m"
retention = "5m"
allowed_lateness = "1s"
late = "merge"
"#,
    )
    .unwrap();
    let f = d.join("f.csv");
    let mut text = String::from("ts,user\n");
    for t in 60..110 {
        text.push_str(&format!("{t},a\n"));
    }
    for t in (120..1200).step_by(30) {
        text.push_str(&format!("{t},b\n"));
    }
    text.push_str("70,a\n"); // 18 minutes late: its bucket was deleted 13 minutes ago
    std::fs::write(&f, text).unwrap();
    let db = d.join("t.db");
    let o = tidemark(&["run", "--config", s(&config), "--db", s(&db), s(&f)], "");
    ok(&o);
    assert!(stderr(&o).contains("1 dropped"), "{}", stderr(&o));
    let o = tidemark(
        &[
            "query",
            "--db",
            s(&db),
            "--metric",
            "c",
            "--key",
            "a",
            "--window",
            "1m",
            "--at",
            "120",
            "--json",
        ],
        "",
    );
    // Its window is past the retention: refused, not answered from what is left (the late
    // event was dropped, above, not merged into a bucket of its own).
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("retention horizon"), "{}", stderr(&o));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn max_line_bytes_counts_the_line_without_its_newline() {
    let d = dir("safety-line-limit");
    let config = d.join("c.toml");
    std::fs::write(
        &config,
        CONFIG.replace(
            "time_field = \"ts\"",
            "time_field = \"ts\"\nmax_line_bytes = 20",
        ),
    )
    .unwrap();
    // "1700000000,u,ppppppp" is 20 bytes.
    let at = |pad: usize| format!("1700000000,u,{}", "p".repeat(pad));
    assert_eq!(at(7).len(), 20);
    for (line, ending, good) in [
        (at(7), "\n", true),
        (at(7), "\r\n", true),
        (at(7), "", true),
        (at(8), "\n", false),
        (at(8), "\r\n", false),
        (at(8), "", false),
    ] {
        let f = d.join("f.csv");
        std::fs::write(&f, format!("ts,user,page\n{line}{ending}")).unwrap();
        let db = d.join(format!("t{}.db", line.len() * 10 + ending.len()));
        let o = tidemark(&["run", "--config", s(&config), "--db", s(&db), s(&f)], "");
        assert_eq!(
            o.status.success(),
            good,
            "{line:?}{ending:?}: {}",
            stderr(&o)
        );
        if !good {
            assert!(stderr(&o).contains("21 bytes"), "{}", stderr(&o));
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}
