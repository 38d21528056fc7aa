//! The memory budget bounds the whole process, not the keys' state alone: a run under a
//! budget far below its state peaks at most at the budget, the store's page cache (a quarter
//! of the budget, at least 4 MiB) and a documented constant of about 40 MiB (README, "What
//! the budget bounds").

mod common;

use std::process::Command;

use common::{dir, s};

#[test]
fn a_small_budget_bounds_the_peak_with_the_cache_and_a_constant() {
    let d = dir("memory-budget");
    let log = d.join("flows.csv");
    let emit = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args([
            "demo",
            "--users",
            "5000",
            "--minutes",
            "10",
            "--emit",
            s(&log),
        ])
        .output()
        .unwrap();
    assert!(emit.status.success());
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/fanout.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .args(["run", "--config", config, "--db", s(&d.join("m.db"))])
        .args(["--max-memory", "16MiB", "--json", s(&log)])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let summary: serde_json::Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|v: &serde_json::Value| v["summary"] == "run")
        .expect("a summary line");
    // The state is larger than the budget: the run spilled.
    assert!(summary["spills"].as_u64() > Some(0), "{summary}");
    // The process's own high-water mark, read as it ends (Linux).
    let Some(peak) = summary["peak_rss_bytes"].as_u64() else {
        panic!("no peak memory in {summary}")
    };
    let mib = 1 << 20;
    let bound = 16 * mib + 4 * mib + 48 * mib;
    assert!(
        peak <= bound,
        "peak {} MiB, past 16 MiB + 4 MiB of cache + 48 MiB",
        peak / mib
    );
    std::fs::remove_dir_all(&d).unwrap();
}
