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
