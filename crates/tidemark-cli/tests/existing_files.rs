//! A file already where a command saves: `distinct`, `freq` and `filter build --save`, and
//! `demo --db`, refuse it (exit 2, naming the path and --force) before reading any input,
//! and replace it whole with --force. A file that appears while the input is read is not
//! replaced either.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::{dir, json_lines, lines, ok, s, tidemark};

/// Each command that saves, with its flag, writing to `path`; its input, when it reads any,
/// is `input`.
fn saves<'a>(path: &'a str, input: &'a str) -> Vec<(&'static str, Vec<&'a str>)> {
    vec![
        ("--save", vec!["distinct", "--save", path, input]),
        ("--save", vec!["freq", "--save", path, input]),
        (
            "--save",
            vec![
                "filter",
                "build",
                "--capacity",
                "100",
                "--fpr",
                "0.01",
                "--save",
                path,
                input,
            ],
        ),
        (
            "--db",
            vec!["demo", "--minutes", "6", "--no-chart", "--db", path],
        ),
    ]
}

/// The names in a directory, sorted.
fn names_in(d: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn every_save_refuses_a_file_already_there_before_reading_its_input() {
    let d = dir("existing-refused");
    let path = d.join("precious");
    std::fs::write(&path, b"what the user had").unwrap();
    // The input does not exist: the refusal must come first, naming the save.
    let missing = d.join("never-read.txt");
    for (flag, args) in saves(s(&path), s(&missing)) {
        let out = tidemark(&args, "");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {err}", args[0]);
        assert!(
            err.contains(&format!(
                "invalid {flag}: {} exists; --force replaces it",
                s(&path)
            )),
            "{}: {err}",
            args[0]
        );
        assert!(!err.contains("never-read"), "{}: {err}", args[0]);
        assert_eq!(std::fs::read(&path).unwrap(), b"what the user had");
    }
    // `filter build` points to the command that adds to a filter.
    let out = tidemark(&saves(s(&path), s(&missing))[2].1, "");
    assert!(String::from_utf8_lossy(&out.stderr).contains("tidemark filter add"));
    // A link to nothing is something there too: replacing it would lose the link.
    let link = d.join("link");
    std::os::unix::fs::symlink(d.join("nowhere"), &link).unwrap();
    let out = tidemark(&["distinct", "--save", s(&link)], "a\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(std::fs::symlink_metadata(&link).is_ok());
    assert_eq!(names_in(&d), ["link", "precious"], "nothing else written");
}

#[test]
fn force_replaces_the_file_whole_with_what_each_command_saves() {
    let d = dir("existing-forced");
    let input = d.join("items.txt");
    std::fs::write(&input, lines(0..50)).unwrap();
    for (i, (flag, mut args)) in saves("", s(&input)).into_iter().enumerate() {
        let path = d.join(format!("saved-{i}"));
        std::fs::write(&path, b"what the user had").unwrap();
        let at = args.iter().position(|a| *a == flag).unwrap() + 1;
        args[at] = s(&path);
        args.push("--force");
        ok(&tidemark(&args, ""));
        // What is there now is what the command saves, read back by its reader.
        let read = match args[0] {
            "distinct" => tidemark(&["distinct", "--merge", s(&path), "--json"], ""),
            "freq" => tidemark(&["freq", "--join", s(&path), "--json", s(&input)], ""),
            "filter" => tidemark(&["filter", "info", s(&path), "--json"], ""),
            _ => tidemark(
                &[
                    "query",
                    "--db",
                    s(&path),
                    "--metric",
                    "fanout",
                    "--window",
                    "5m",
                    "--key",
                    "10.9.0.1",
                    "--json",
                ],
                "",
            ),
        };
        ok(&read);
        let rows = json_lines(&read);
        let row = rows.last().unwrap();
        match args[0] {
            "distinct" => assert_eq!(row["estimate"], 50.0),
            // Each of the 50 keys, less any a false positive answered first (at 1%: a few).
            "filter" => assert!((45..=50).contains(&row["keys"].as_u64().unwrap()), "{row}"),
            // The join of the 50 items with themselves: 50 · 1².
            "freq" => assert_eq!(
                (&row["kind"], &row["estimate"]),
                (&"join".into(), &50.0.into())
            ),
            // The scanner's fan-out: 3,072 probes, within the sketch's bracket.
            _ => {
                let (lo, hi) = (row["low"].as_f64().unwrap(), row["high"].as_f64().unwrap());
                assert!(lo <= 3_072.0 && 3_072.0 <= hi, "{row}");
            }
        }
    }
    let mut want: Vec<String> = (0..4).map(|i| format!("saved-{i}")).collect();
    want.push("items.txt".into());
    want.sort();
    assert_eq!(names_in(&d), want, "no temporary file is left");
    // --force says what it forces: without a file to save, it is refused.
    let out = tidemark(&["distinct", "--force"], "a\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--save"));
}

#[test]
fn a_file_that_appears_while_the_input_is_read_is_not_replaced() {
    let d = dir("existing-raced");
    let path = d.join("late.tdmk");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(["distinct", "--save", s(&path)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // More than a pipe holds: once written, the command is reading, its path checked.
    stdin.write_all(lines(0..30_000).as_bytes()).unwrap();
    // Another writer takes the name.
    std::fs::write(&path, b"written meanwhile").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("exists; --force replaces it"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"written meanwhile");
    assert_eq!(names_in(&d), ["late.tdmk"], "no temporary file is left");
}
