//! Helpers shared by the lab's integration tests: run the binary, read its output.
#![allow(dead_code)] // each test file uses its own subset

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs `tidemark-lab args…`.
pub fn lab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tidemark-lab"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Asserts the command succeeded, showing its stderr if not.
pub fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Each stdout line, parsed as JSON.
pub fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect()
}

/// A fresh directory for one test: `<temp>/tidemark-lab-<tag>-<pid>`, emptied first.
pub fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tidemark-lab-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The repository's root.
pub fn repo() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
