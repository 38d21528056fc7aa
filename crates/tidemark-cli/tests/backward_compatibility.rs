//! Stores written by earlier versions still answer and resume:
//! - one written before the store's digests and the run state's file identities (state
//!   version 2): the same file, grown, is read on from where that run stopped, and the store
//!   answers as one run over the whole file by this version does;
//! - one of every metric kind written before bucket values took their stored form (every value
//!   an envelope): it answers as the version that wrote it did, and, resumed on more input,
//!   as one run over all of it by this version does, while the values it adds are short;
//! - one whose count keys' rows hold their histograms in the fixed payload (key row version
//!   1): resumed on the rest of its log, it answers as one run over the whole log does.

mod common;

use std::process::{Command, Output};

use common::ok;

fn tidemark_in(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The committed store `testdata/stores/<name>`, copied into `d` as `old.db`.
fn old_store(root: &std::path::Path, name: &str, d: &std::path::Path) {
    std::fs::copy(root.join("testdata/stores").join(name), d.join("old.db")).unwrap();
}

/// A fresh directory for one test, and the seeded demo log of `users` and `minutes` in it.
fn dir_with_log(tag: &str, users: &str, minutes: &str, log: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tidemark-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    ok(&tidemark_in(
        &d,
        &[
            "demo",
            "--users",
            users,
            "--minutes",
            minutes,
            "--emit",
            log,
        ],
    ));
    d
}

#[test]
fn a_version_2_store_resumes_and_answers_as_a_fresh_run() {
    let root = repo_root();
    let config = root.join("examples/fanout.toml");
    let config = config.to_str().unwrap();
    // The log the old store was written from (the generator is seeded), grown past the
    // 3,000 flows it had read.
    let d = dir_with_log("compat", "50", "10", "x.csv");
    old_store(&root, "fanout-state-v2.db", &d);
    let o = tidemark_in(
        &d,
        &[
            "run", "--config", config, "--db", "old.db", "--quiet", "x.csv",
        ],
    );
    ok(&o);
    ok(&tidemark_in(
        &d,
        &[
            "run", "--config", config, "--db", "new.db", "--quiet", "x.csv",
        ],
    ));
    for db in ["old.db", "new.db"] {
        ok(&tidemark_in(&d, &["check", "--db", db]));
    }
    let answer = |db: &str, at: &str| {
        let o = tidemark_in(
            &d,
            &[
                "query", "--db", db, "--metric", "fanout", "--window", "5m", "--at", at, "--json",
            ],
        );
        ok(&o);
        o.stdout
    };
    // A window inside the part the old version read, one across, and one after it.
    for at in [
        "2023-11-14T22:16:00Z",
        "2023-11-14T22:18:00Z",
        "2023-11-14T22:23:00Z",
    ] {
        let (a, b) = (answer("old.db", at), answer("new.db", at));
        assert!(!b.is_empty());
        assert_eq!(a, b, "window ending {at}");
    }
    let records = |db: &str| {
        let o = tidemark_in(&d, &["check", "--db", db, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["records"].as_u64().unwrap()
    };
    assert_eq!(records("old.db"), 10_909);
    assert_eq!(records("new.db"), 10_909);
    std::fs::remove_dir_all(&d).unwrap();
}

/// The queries recorded beside `all-kinds-format-2.db`, each with the answer of the version
/// that wrote it.
fn recorded_answers(root: &std::path::Path) -> Vec<(Vec<String>, String)> {
    let text =
        std::fs::read_to_string(root.join("testdata/stores/all-kinds-format-2.answers.jsonl"))
            .unwrap();
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let args = v["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect();
            (args, v["stdout"].as_str().unwrap().to_string())
        })
        .collect()
}

#[test]
fn a_store_of_envelopes_answers_as_before_and_resumes_as_a_fresh_run() {
    let root = repo_root();
    let config = root.join("testdata/stores/all-kinds.toml");
    let config = config.to_str().unwrap();
    let d = dir_with_log("compat3", "10", "70", "full.csv");
    // The 24,608 flows the old store read, and the rest under the same header.
    let full = std::fs::read_to_string(d.join("full.csv")).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    assert_eq!(
        lines.len(),
        27_512,
        "the seeded log changed: the fixture needs remaking"
    );
    let read = lines[..24_609].join("\n") + "\n";
    let rest = format!("{}\n{}\n", lines[0], lines[24_609..].join("\n"));
    std::fs::write(d.join("x.csv"), read).unwrap();
    std::fs::write(d.join("rest.csv"), rest).unwrap();
    old_store(&root, "all-kinds-format-2.db", &d);
    let answer = |db: &str, args: &[String]| {
        let mut all = vec!["query", "--db", db, "--json"];
        all.extend(args.iter().map(String::as_str));
        let o = tidemark_in(&d, &all);
        ok(&o);
        String::from_utf8(o.stdout).unwrap()
    };
    let recorded = recorded_answers(&root);
    assert!(recorded.len() >= 15);
    for (args, then) in &recorded {
        assert!(!then.is_empty(), "{args:?}");
        assert_eq!(&answer("old.db", args), then, "{args:?}");
    }
    ok(&tidemark_in(
        &d,
        &[
            "run",
            "--config",
            config,
            "--db",
            "old.db",
            "--keep-open",
            "--quiet",
            "rest.csv",
        ],
    ));
    ok(&tidemark_in(
        &d,
        &[
            "run",
            "--config",
            config,
            "--db",
            "new.db",
            "--keep-open",
            "--quiet",
            "x.csv",
            "rest.csv",
        ],
    ));
    let check = |db: &str| {
        let o = tidemark_in(&d, &["check", "--db", db, "--json"]);
        ok(&o);
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let (old, new) = (check("old.db"), check("new.db"));
    assert_eq!(old["records"].as_u64(), Some(27_511));
    assert_eq!(new["records"].as_u64(), Some(27_511));
    let later: Vec<Vec<String>> = ["1700004200", "1700004500"]
        .iter()
        .flat_map(|at| {
            [("flows", "10m"), ("fanout", "5m"), ("ports", "5m")].map(|(m, w)| {
                ["--metric", m, "--window", w, "--at", at]
                    .map(String::from)
                    .to_vec()
            })
        })
        .collect();
    for args in recorded.iter().map(|(a, _)| a).chain(&later) {
        let (a, b) = (answer("old.db", args), answer("new.db", args));
        assert!(!b.is_empty(), "{args:?}");
        assert_eq!(a, b, "{args:?}");
    }
    // The fresh store's values are in their stored form: an exact count bucket is a tag, a
    // count of at most three bytes and a checksum (its envelope took 86 bytes), a distinct
    // bucket its hashes and about 6 bytes (the envelope added 62).
    let per_bucket = |report: &serde_json::Value, name: &str| {
        let t = report["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap();
        t["value_bytes"].as_f64().unwrap() / t["buckets"].as_f64().unwrap()
    };
    assert!(per_bucket(&new, "flows") <= 8.0, "{new}");
    assert!(
        per_bucket(&old, "flows") > 20.0,
        "the old buckets are still envelopes: {old}"
    );
    assert!(
        per_bucket(&new, "fanout") < per_bucket(&old, "fanout") - 20.0,
        "{new} {old}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}

/// The demo log of 50 users and 10 minutes as JSON Lines for `examples/requests.toml`: the
/// first 6,000 flows and the rest (`testdata/stores/README.md`).
fn requests_parts(d: &std::path::Path) -> (String, String) {
    let csv = std::fs::read_to_string(d.join("full.csv")).unwrap();
    let lines: Vec<String> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let ms = f[0].parse::<u64>().unwrap() * 1000;
            format!(
                "{{\"time\":\"{}\",\"user\":\"{}\",\"path\":\"/{}/{}\"}}\n",
                tidemark_stream::time::format_rfc3339(ms),
                f[1],
                f[2],
                f[3]
            )
        })
        .collect();
    (lines[..6000].concat(), lines[6000..].concat())
}

#[test]
fn count_key_rows_of_version_1_resume_as_one_run_over_the_whole_log() {
    let root = repo_root();
    let config = root.join("examples/requests.toml");
    let config = config.to_str().unwrap();
    let d = dir_with_log("compat-keyrows", "50", "10", "full.csv");
    let (part1, part2) = requests_parts(&d);
    std::fs::write(d.join("part1.jsonl"), part1).unwrap();
    std::fs::write(d.join("part2.jsonl"), part2).unwrap();
    old_store(&root, "count-keyrows-v1.db", &d);
    let resumed = tidemark_in(
        &d,
        &[
            "run",
            "--config",
            config,
            "--db",
            "old.db",
            "--close",
            "part2.jsonl",
        ],
    );
    ok(&resumed);
    let whole = tidemark_in(
        &d,
        &[
            "run",
            "--config",
            config,
            "--db",
            "new.db",
            "--close",
            "part1.jsonl",
            "part2.jsonl",
        ],
    );
    ok(&whole);
    for db in ["old.db", "new.db"] {
        ok(&tidemark_in(&d, &["check", "--db", db]));
    }
    let answer = |db: &str, metric: &str, window: &str, at: &str| {
        let o = tidemark_in(
            &d,
            &[
                "query", "--db", db, "--metric", metric, "--window", window, "--at", at, "--json",
            ],
        );
        ok(&o);
        o.stdout
    };
    // Windows inside the part the old version read, across, and after it.
    for at in [
        "2023-11-14T22:16:00Z",
        "2023-11-14T22:19:00Z",
        "2023-11-14T22:23:00Z",
    ] {
        for (metric, window) in [("requests", "10m"), ("pages", "1h")] {
            let (a, b) = (
                answer("old.db", metric, window, at),
                answer("new.db", metric, window, at),
            );
            assert!(!b.is_empty());
            assert_eq!(a, b, "{metric} over {window} ending {at}");
        }
    }
    // The alerts the resumed run raised are the whole run's after the cut (requests.toml
    // alerts past 1,000 requests in 10 minutes: the health checker's).
    let whole_alerts = String::from_utf8(whole.stdout).unwrap();
    let resumed_alerts = String::from_utf8(resumed.stdout).unwrap();
    assert!(
        !resumed_alerts.is_empty() && whole_alerts.ends_with(&resumed_alerts),
        "resumed: {resumed_alerts}\nwhole: {whole_alerts}"
    );
    std::fs::remove_dir_all(&d).unwrap();
}
