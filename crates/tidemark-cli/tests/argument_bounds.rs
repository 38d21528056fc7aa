//! Hostile or careless arguments and inputs across subcommands: each is refused before any
//! output with exit 2 and a message naming what was wrong, or bounded; none panics.

mod common;
use common::{temp, tidemark};

fn refused(args: &[&str], stdin: &str, names: &str) {
    let out = tidemark(args, stdin);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(names), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    // Refused before any answer is printed.
    assert!(
        out.stdout.is_empty(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn integer_queries_are_checked_before_the_input() {
    refused(
        &["freq", "--range", "0", "9", "--query", "abc"],
        "1\n",
        "--query",
    );
    refused(
        &["freq", "--range", "0", "9", "--query", "99999999999"],
        "1\n",
        "below 2^32",
    );
}

#[test]
fn a_huge_top_is_bounded_by_what_there_is() {
    for stdin in ["", "1\n2\n2\n"] {
        let out = tidemark(
            &["freq", "--range", "0", "1", "--top", "18446744073709551615"],
            stdin,
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn demo_sizes_are_bounded() {
    for (flag, value) in [
        ("--minutes", "0"),
        ("--minutes", "1441"),
        ("--users", "64001"),
        ("--scanners", "255"),
    ] {
        refused(&["demo", flag, value, "--no-chart"], "", flag);
    }
}

#[test]
fn a_line_without_end_is_refused_at_the_limit() {
    let long = temp("no-line-break.txt");
    std::fs::write(&long, vec![b'x'; (1 << 20) + 1]).unwrap();
    let out = tidemark(&["distinct", long.to_str().unwrap()], "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no-line-break.txt:1") && err.contains("longer than 1048576"),
        "{err}"
    );
    // A line of exactly the limit (with its break) is read.
    let mut at = vec![b'y'; 1 << 20];
    at.push(b'\n');
    std::fs::write(&long, at).unwrap();
    let out = tidemark(&["distinct", "--json", long.to_str().unwrap()], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn configs_must_be_small_regular_files() {
    refused(&["config", "--check", "/dev/null"], "", "not a config file");
    let dir = temp("a-config-dir");
    std::fs::create_dir_all(&dir).unwrap();
    refused(
        &["config", "--check", dir.to_str().unwrap()],
        "",
        "not a config file",
    );
    let big = temp("big.toml");
    std::fs::write(&big, vec![b'#'; (1 << 20) + 1]).unwrap();
    refused(
        &["config", "--check", big.to_str().unwrap()],
        "",
        "longer than 1048576",
    );
    refused(
        &[
            "run",
            "--config",
            big.to_str().unwrap(),
            "--db",
            temp("never.db").to_str().unwrap(),
        ],
        "",
        "longer than 1048576",
    );
    assert!(
        !temp("never.db").exists(),
        "a refused config creates no store"
    );
}

#[test]
fn saves_replace_their_file_whole() {
    let dir = common::dir("save-whole");
    let file = dir.join("s.tdmk");
    let s = file.to_str().unwrap();
    // A first save, then a second over it: the file holds the second, nothing else is left.
    for range in [0..10u64, 0..500] {
        common::ok(&tidemark(
            &["distinct", "--save", s],
            common::lines(range).as_bytes(),
        ));
    }
    let out = tidemark(&["distinct", "--merge", s, "--json"], "");
    common::ok(&out);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["estimate"].as_f64(), Some(500.0));
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["s.tdmk"], "no temporary file is left");
    // Through a symbolic link: the target is replaced, the link stays.
    let link = dir.join("link.tdmk");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    common::ok(&tidemark(
        &["distinct", "--save", link.to_str().unwrap()],
        common::lines(0..7).as_bytes(),
    ));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let out = tidemark(&["distinct", "--merge", s, "--json"], "");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["estimate"].as_f64(), Some(7.0));
}

#[test]
fn a_save_to_a_fifo_or_a_directory_is_refused_before_reading() {
    let dir = common::dir("save-fifo");
    let fifo = dir.join("f");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        // Opening a FIFO without a reader for writing would block: it is refused instead.
        refused(
            &["distinct", "--save", fifo.to_str().unwrap()],
            "a\n",
            "--save",
        );
    }
    refused(
        &["distinct", "--save", dir.to_str().unwrap()],
        "a\n",
        "a directory",
    );
}
