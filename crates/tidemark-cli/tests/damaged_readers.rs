//! A reader that cannot verify the file's pages — a `query` while a `run` writes the store, or
//! on a read-only copy — still refuses damage it can see instead of answering from it: a lost
//! table is not an empty store, and a lost format key does not switch verification off.
//! (Found by an adversarial review: both answered "no keys", exit 0.)

mod common;

use std::path::{Path, PathBuf};

use common::{ok, tidemark};
use tidemark_stream::query;
use tidemark_stream::store::{RedbStore, StoreError};

const CONFIG: &str = r#"
[input]
time_field = "ts"
[[metric]]
name = "hits"
kind = "count"
key = ["user"]
bucket = "1m"
window = "5m"
# A century, so that a century's window may be asked (a window reaching before the
# retention is refused).
retention = "36525d"
"#;

fn store(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let config = dir.join("c.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut text = String::from("ts,user\n");
    for i in 0..600u64 {
        text.push_str(&format!("{},u{}\n", 1_700_000_000 + i, i % 7));
    }
    let f = dir.join("f.csv");
    std::fs::write(&f, text).unwrap();
    let db = dir.join("good.db");
    ok(&tidemark(
        &[
            "run",
            "--config",
            config.to_str().unwrap(),
            "--db",
            db.to_str().unwrap(),
            f.to_str().unwrap(),
        ],
        "",
    ));
    db
}

/// The bytes of `good` with the first occurrence of `from` replaced by `to`.
fn altered(good: &Path, out: &Path, from: &[u8], to: &[u8]) {
    let mut bytes = std::fs::read(good).unwrap();
    let at = bytes
        .windows(from.len())
        .position(|w| w == from)
        .expect("the pattern is in the file");
    bytes[at..at + to.len()].copy_from_slice(to);
    std::fs::write(out, bytes).unwrap();
}

fn read_only_answer(db: &Path) -> Result<usize, String> {
    let s = RedbStore::open_existing(db).map_err(|e| e.to_string())?;
    query::window(&s, "hits", 300_000, None, None, None)
        .map(|a| a.rows.len())
        .map_err(|e| e.to_string())
}

#[test]
fn a_reader_refuses_a_lost_table_and_a_lost_format_key() {
    let dir = std::env::temp_dir().join(format!("tidemark-readers-{}", std::process::id()));
    let good = store(&dir);
    assert_eq!(read_only_answer(&good), Ok(7));

    // The table directory's name of the rows table, one byte changed.
    let lost = dir.join("lost-table.db");
    altered(&good, &lost, b"rows", b"rowz");
    let e = read_only_answer(&lost).unwrap_err();
    assert!(e.contains("damaged"), "{e}");

    // The format key renamed: the seal is still there, so verification must stay on.
    let unformatted = dir.join("no-format.db");
    altered(&good, &unformatted, b"format", b"formau");
    let e = read_only_answer(&unformatted).unwrap_err();
    assert!(e.contains("damaged"), "{e}");

    // A writer's open (which `query` uses when no run holds the file) verifies every page.
    for db in [&lost, &unformatted] {
        match RedbStore::open_existing_writable(db) {
            Err(StoreError::Damaged { .. }) => {}
            Err(e) => panic!("{}: {e}", db.display()),
            Ok(_) => panic!("{}: opened", db.display()),
        }
        let o = tidemark(
            &[
                "query",
                "--db",
                db.to_str().unwrap(),
                "--metric",
                "hits",
                "--window",
                "5m",
            ],
            "",
        );
        assert_eq!(o.status.code(), Some(2));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_century_window_reads_only_the_starts_that_exist() {
    let dir = std::env::temp_dir().join(format!("tidemark-century-{}", std::process::id()));
    let good = store(&dir);
    // 52 million one-minute starts in the window, 10 of them stored: one cursor per stored
    // start (this once allocated a cursor per start: 2.4 GB, or an abort).
    for extra in [&["--top", "1"][..], &[][..]] {
        let mut args = vec![
            "query",
            "--db",
            good.to_str().unwrap(),
            "--metric",
            "hits",
            "--window",
            "36525d",
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = tidemark(&args, "");
        ok(&o);
        let total: f64 = common::json_lines(&o)
            .iter()
            .map(|v| v["estimate"].as_f64().unwrap())
            .sum();
        if extra.is_empty() {
            assert_eq!(total, 600.0);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
