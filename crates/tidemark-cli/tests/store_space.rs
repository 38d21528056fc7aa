//! The bytes a store takes on disk: a run gives back the pages its commits freed, and `check`
//! says how much of the file is in use.

mod common;

use common::{dir, ok, s, tidemark};

const CONFIG: &str = r#"
[input]
time_field = "ts"
[state]
checkpoint_records = 20000
[[metric]]
name = "pages"
kind = "distinct"
key = ["user"]
item = ["page"]
bucket = "1m"
window = "5m"
precision = 8
retention = "5m"
"#;

/// Users in the log: every minute has each of them.
const USERS: u64 = 3000;
/// Minutes of the log, of which the retention keeps the last 5.
const MINUTES: u64 = 20;

/// 6,000 events a minute, each user twice (7 steps through the users, coprime with 3,000),
/// over 20 minutes: the checkpoints delete the buckets that fall out of the retention, so
/// that the pages they held are freed while the store grows.
fn log() -> String {
    let mut s = String::from("ts,user,page\n");
    for m in 0..MINUTES {
        for i in 0..2 * USERS {
            let t = 1_700_000_000 + m * 60 + i / 100;
            s.push_str(&format!(
                "{t},u{},p{}\n",
                (i * 7 + m) % USERS,
                (m * 600 + i) % 53
            ));
        }
    }
    s
}

fn space(db: &std::path::Path) -> (u64, u64) {
    let out = tidemark(&["check", "--db", s(db), "--json"], "");
    ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = |f: &str| v[f].as_u64().unwrap_or_else(|| panic!("{f} in {v}"));
    assert_eq!(
        v["tables"][0]["buckets"].as_u64(),
        Some(5 * USERS),
        "the last 5 minutes of every user: {v}"
    );
    (n("file_bytes"), n("in_use_bytes"))
}

#[test]
fn a_run_leaves_its_store_compact_and_check_says_how_much_is_in_use() {
    let d = dir("store-space");
    let config = d.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let input = d.join("log.csv");
    std::fs::write(&input, log()).unwrap();
    let db = d.join("s.db");
    let run = || {
        let args = [
            "run",
            "--quiet",
            "--config",
            s(&config),
            "--db",
            s(&db),
            s(&input),
        ];
        ok(&tidemark(&args, ""));
    };
    run();
    let (file, in_use) = space(&db);
    assert!(in_use > 0 && in_use <= file, "{in_use} of {file}");
    // Compacted when the free space reached an eighth of the pages in use: below it now.
    assert!(
        (file - in_use) * 8 < in_use,
        "{file} bytes, {in_use} in use: not compacted"
    );
    // The second run over the same file changes nothing, and leaves it as compact.
    run();
    let (again, in_use_again) = space(&db);
    assert!(
        (again - in_use_again) * 8 < in_use_again,
        "{again}, {in_use_again}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
