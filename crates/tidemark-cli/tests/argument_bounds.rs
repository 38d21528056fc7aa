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
    // A first save, then a second over it (--force: a save never replaces a file without
    // it): the file holds the second, nothing else is left.
    for range in [0..10u64, 0..500] {
        common::ok(&tidemark(
            &["distinct", "--save", s, "--force"],
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
        &["distinct", "--save", link.to_str().unwrap(), "--force"],
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

/// `tidemark run` with `args`, killed and failed if it has not ended within 20 s.
fn run_within(args: &[&str]) -> std::process::Output {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_within(
        child,
        &format!("{args:?}"),
        std::time::Duration::from_secs(20),
    )
}

/// An input whose line never ends (`/dev/zero`) stops the run at max_line_bytes, as a bad line,
/// where it was scanned for a newline forever; in a CSV header and in a JSON Lines record.
#[test]
fn an_endless_line_stops_the_run_at_the_limit() {
    let dir = common::dir("endless-line");
    for (format, says) in [
        ("csv", "header: longer than"),
        ("jsonl", ":1: the line is longer"),
    ] {
        let config = dir.join(format!("{format}.toml"));
        std::fs::write(
            &config,
            format!(
                "[input]\nformat = \"{format}\"\ntime_field = \"ts\"\n[[metric]]\nname = \"c\"\n\
                 kind = \"count\"\nkey = [\"k\"]\nbucket = \"1m\"\nwindow = \"5m\"\n"
            ),
        )
        .unwrap();
        let db = dir.join(format!("{format}.db"));
        let out = run_within(&[
            "run",
            "--config",
            common::s(&config),
            "--db",
            common::s(&db),
            "/dev/zero",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains(says) && err.contains("max_line_bytes"),
            "{err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A run reading a named pipe whose writer is idle ends on the first SIGTERM (the default
/// action: a flag would not be seen by a blocked read), where it lived until the writer closed.
#[test]
fn a_run_blocked_on_a_named_pipe_ends_on_sigterm() {
    use std::os::unix::process::ExitStatusExt;
    let dir = common::dir("fifo-term");
    let fifo = dir.join("f");
    if !std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("no mkfifo: skipped");
        return;
    }
    let config = dir.join("c.toml");
    std::fs::write(
        &config,
        "[input]\ntime_field = \"ts\"\n[[metric]]\nname = \"c\"\nkind = \"count\"\n\
         key = [\"k\"]\nbucket = \"1m\"\nwindow = \"5m\"\n",
    )
    .unwrap();
    // A writer that sends a header and a record, then holds the pipe open.
    let mut writer = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec 3>\"$0\"; printf 'ts,k\\n1700000000,a\\n' >&3; exec sleep 30")
        .arg(&fifo)
        .spawn()
        .unwrap();
    let db = dir.join("f.db");
    let mut run = std::process::Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(["run", "--quiet", "--config", common::s(&config), "--db"])
        .arg(&db)
        .arg(&fifo)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &run.id().to_string()])
        .status()
        .unwrap()
        .success());
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = run.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > std::time::Duration::from_secs(10) {
            run.kill().unwrap();
            let _ = writer.kill();
            panic!("the run outlived SIGTERM by 10 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let _ = writer.kill();
    let _ = writer.wait();
    assert_eq!(status.signal(), Some(15), "{status:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_labs_commands_are_not_the_products_and_help_says_where_they_are() {
    // The plates and the benchmark report live in `tidemark-lab`, with their charts and font.
    refused(&["reproduce", "histogram-twenty"], "", "'reproduce'");
    refused(&["bench-report"], "", "'bench-report'");
    let out = tidemark(&["--help"], "");
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("`tidemark-lab`"));
}
