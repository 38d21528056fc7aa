//! A store written before the store's digests and the run state's file identities (state
//! version 2) still resumes: the same file, grown, is read on from where that run stopped,
//! and the store answers as one run over the whole file by this version does.

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

#[test]
fn a_version_2_store_resumes_and_answers_as_a_fresh_run() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let config = root.join("examples/fanout.toml");
    let config = config.to_str().unwrap();
    let d = std::env::temp_dir().join(format!("tidemark-compat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    // The log the old store was written from (the generator is seeded), grown past the
    // 3,000 flows it had read.
    ok(&tidemark_in(
        &d,
        &[
            "demo",
            "--users",
            "50",
            "--minutes",
            "10",
            "--emit",
            "x.csv",
        ],
    ));
    std::fs::copy(
        root.join("testdata/stores/fanout-state-v2.db"),
        d.join("old.db"),
    )
    .unwrap();
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
