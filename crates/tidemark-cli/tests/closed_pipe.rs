//! A reader that has gone (`tidemark … | head -1`) ends a command quietly with status 0; no
//! command panics on the closed pipe.

use std::process::Command;

/// Runs `tidemark args…` with standard output into a pipe whose reader exited 0.2 s before
/// (so every write fails with a broken pipe); returns tidemark's exit status and stderr.
fn into_closed_pipe(args: &[&str]) -> (i32, String) {
    let bin = env!("CARGO_BIN_EXE_tidemark");
    let script = r#"(sleep 0.2; "$0" "$@"; echo "status $?" >&2) | true"#;
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(bin)
        .args(args)
        .output()
        .expect("sh runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let status = err
        .lines()
        .find_map(|l| l.strip_prefix("status "))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(-1);
    (status, err)
}

#[test]
fn commands_end_quietly_when_their_reader_has_gone() {
    let dir = std::env::temp_dir().join(format!("tidemark-closed-pipe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("c.toml");
    std::fs::write(
        &config,
        "[input]\nformat = \"csv\"\ntime_field = \"t\"\n\n[[metric]]\nname = \"n\"\nkind = \"count\"\nkey = [\"k\"]\nbucket = \"1m\"\nwindow = \"5m\"\n",
    )
    .unwrap();
    let log = dir.join("log.csv");
    std::fs::write(&log, "t,k\n1700000000,a\n1700000060,b\n").unwrap();
    let db = dir.join("s.db");
    let (db_s, config_s, log_s) = (
        db.to_str().unwrap(),
        config.to_str().unwrap(),
        log.to_str().unwrap(),
    );
    for args in [
        &["config"][..],
        &["config", "--check", config_s],
        &["run", "--json", "--config", config_s, "--db", db_s, log_s],
        &["check", "--db", db_s],
        &["check", "--json", "--db", db_s],
        &[
            "query", "--db", db_s, "--metric", "n", "--key", "a", "--window", "5m",
        ],
    ] {
        let (status, err) = into_closed_pipe(args);
        assert_eq!(status, 0, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
