//! What a new user meets first: a metric over the whole stream (no key fields), a query beside
//! a run that has just started, and a mistyped far-future date read back as a span a person
//! reads.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tidemark_stream::config::Config;
use tidemark_stream::pipeline::{self, Follow, RunOptions};
use tidemark_stream::query;
use tidemark_stream::store::{MemStore, RedbStore, Store};
use tidemark_stream::RunError;

/// A temporary directory of its own, removed on drop.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("tidemark-first-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_metric_without_key_fields_counts_the_whole_stream_as_one_key() {
    let config = r#"
[input]
time_field = "ts"
[[metric]]
name = "users"
kind = "distinct"
key = []
item = ["user"]
bucket = "1m"
window = "1h"
precision = 12
[[metric]]
name = "events"
kind = "count"
key = []
bucket = "1m"
window = "1h"
"#;
    // 600 events over ten minutes from 37 users (exact at this size).
    let mut text = String::from("ts,user,host\n");
    for i in 0..600u64 {
        text.push_str(&format!("{},u{},h{}\n", 1_700_000_000 + i, i % 37, i % 5));
    }
    let store = common::run_text(config, &text, "nokey");
    let users = query::window(&store, "users", 3_600_000, None, None, None).unwrap();
    assert_eq!(users.rows.len(), 1, "one key: the whole stream");
    assert_eq!(users.rows[0].key, "");
    assert_eq!(users.rows[0].estimate.value, 37.0);
    let events = query::window(&store, "events", 3_600_000, None, Some(b""), None).unwrap();
    assert_eq!(events.rows.len(), 1);
    assert_eq!(events.rows[0].estimate.value, 600.0);
    // A key field that is named but empty is still refused.
    let bad = config.replace("key = []\nitem", "key = [\"\"]\nitem");
    let e = Config::from_toml(&bad).unwrap_err().to_string();
    assert!(e.contains("metric[0].key") || e.contains("key"), "{e}");
}

#[test]
fn a_query_beside_a_run_that_has_just_started_finds_a_committed_run() {
    let d = Dir::new("started");
    let log = d.0.join("live.csv");
    std::fs::write(&log, "ts,src,dst\n").unwrap();
    let db = d.0.join("s.db");
    let config = Config::from_toml(
        r#"
[input]
time_field = "ts"
[[metric]]
name = "fanout"
kind = "distinct"
key = ["src"]
item = ["dst"]
bucket = "1m"
window = "5m"
[state]
checkpoint = "1h"
"#,
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let run = {
        let (db, log, stop, config) = (db.clone(), log.clone(), Arc::clone(&stop), config.clone());
        std::thread::spawn(move || {
            let mut store = RedbStore::open(&db).unwrap();
            pipeline::run(
                &config,
                &mut store,
                RunOptions {
                    inputs: vec![log],
                    follow: Some(Follow {
                        poll: Duration::from_millis(20),
                        rotate_wait: Follow::ROTATE_WAIT,
                    }),
                    stop: Some(&stop),
                    ..RunOptions::default()
                },
                &mut |_| {},
            )
            .map(|r| r.records)
        })
    };
    // No record yet, and the checkpoint interval is an hour: the store still answers, at
    // once, with an empty run.
    let started = Instant::now();
    let answer = loop {
        if let Ok(store) = RedbStore::open_existing(&db) {
            if let Ok(a) = query::window(&store, "fanout", 300_000, None, None, None) {
                break a;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no committed run to query"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(answer.rows.is_empty());
    stop.store(true, Ordering::Relaxed);
    assert_eq!(run.join().unwrap().unwrap(), 0);
}

#[test]
fn a_far_future_time_is_refused_with_a_span_a_person_reads() {
    let config = Config::from_toml(
        r#"
[input]
time_field = "ts"
[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "1m"
window = "5m"
"#,
    )
    .unwrap();
    let d = Dir::new("ahead");
    let path = d.0.join("in.csv");
    // The second record is 2041 where 2023 was meant.
    std::fs::write(&path, "ts,k\n1700000000,a\n2267993599,a\n").unwrap();
    let mut store = MemStore::default();
    let e = pipeline::run(
        &config,
        &mut store,
        RunOptions {
            inputs: vec![path],
            ..RunOptions::default()
        },
        &mut |_| {},
    )
    .unwrap_err();
    let RunError::BadLine { line, message, .. } = &e else {
        panic!("{e}")
    };
    assert_eq!(*line, 3);
    assert!(message.contains("is 18 years ahead"), "{message}");
    assert!(!message.contains("ms ahead"), "{message}");
    // What came before the line was committed.
    assert!(store.meta().unwrap().is_some());
}
