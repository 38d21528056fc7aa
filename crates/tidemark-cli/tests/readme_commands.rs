//! Every `tidemark` command the README shows runs as written, in the order written, in a
//! fresh directory holding the repository's `examples/` and stand-ins for the inputs a user
//! brings (named as the README names them). What runs until a signal (`--follow`) is left
//! out; the one `redis-cli` line is stood in for by the Redis value it would save.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::dir;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The README's shell code blocks' lines, comments cut off.
fn readme_lines() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in text.lines() {
        if let Some(fence) = line.strip_prefix("```") {
            in_sh = !in_sh && fence.trim() == "sh";
            continue;
        }
        if in_sh {
            let code = line.split(" #").next().unwrap_or("").trim();
            if !code.is_empty() && !code.starts_with('#') {
                out.push(code.to_string());
            }
        }
    }
    out
}

/// Inputs the README's examples read, as a user would have them.
fn stand_ins(d: &Path) {
    let write = |name: &str, text: String| std::fs::write(d.join(name), text).unwrap();
    write(
        "bits.txt",
        (0..5_000)
            .map(|i| format!("{}\n", (i * 7 % 3 == 0) as u8))
            .collect(),
    );
    write(
        "ticks.txt",
        (0..5_000).map(|i| format!("{}\n", i / 3)).collect(),
    );
    write(
        "users-day1.txt",
        (0..3_000).map(|i| format!("user{}\n", i % 2_000)).collect(),
    );
    write(
        "users-day2.txt",
        (0..3_000)
            .map(|i| format!("user{}\n", 1_000 + i % 2_000))
            .collect(),
    );
    write(
        "events.txt",
        (0..20_000)
            .map(|i| format!("{} item{}\n", i / 4, i % 900))
            .collect(),
    );
    // Latencies in milliseconds, one a line: a fast mode and a slow tail.
    write(
        "latencies.txt",
        (0..5_000u64)
            .map(|i| {
                let fast = 1.0 + (i * 7_919 % 1_000) as f64 / 250.0;
                let ms = if i % 20 == 0 { fast * 40.0 } else { fast };
                format!("{ms}\n")
            })
            .collect(),
    );
    let mut items: String = (0..10_000).map(|i| format!("{}\n", i % 300)).collect();
    items.push_str(&"alice\n".repeat(500));
    write("items.txt", items);
    write(
        "keys.txt",
        (0..2_000).map(|i| format!("key{i}\n")).collect(),
    );
    write(
        "new-keys.txt",
        (1_500..2_500).map(|i| format!("key{i}\n")).collect(),
    );
    let examples = d.join("examples");
    std::fs::create_dir_all(&examples).unwrap();
    for e in std::fs::read_dir(repo().join("examples"))
        .unwrap()
        .flatten()
    {
        std::fs::copy(e.path(), examples.join(e.file_name())).unwrap();
    }
}

#[test]
fn every_tidemark_command_in_the_readme_runs_as_written() {
    let d = dir("readme-commands");
    stand_ins(&d);
    let mut ran = 0;
    for line in readme_lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first() {
            Some(&"tidemark") if !words.contains(&"--follow") => {}
            Some(&"redis-cli") => {
                // `redis-cli --raw GET visitors > redis-value.hyll`: a Redis HyperLogLog's
                // bytes and the newline redis-cli adds. Saved in Redis mode, day1's sketch is
                // such a value.
                let mut value = std::fs::read(d.join("day1.hyll")).unwrap();
                value.push(b'\n');
                std::fs::write(d.join("redis-value.hyll"), value).unwrap();
                continue;
            }
            _ => continue,
        }
        // `more.csv`: more of the flow log, after `flows.csv`'s end.
        if words.contains(&"more.csv") {
            let flows = std::fs::read_to_string(d.join("flows.csv")).unwrap();
            let last: u64 = flows
                .lines()
                .last()
                .and_then(|l| l.split(',').next())
                .and_then(|t| t.parse().ok())
                .unwrap_or(1_700_000_000);
            let more: String = (0..200)
                .map(|i| {
                    format!(
                        "{},10.2.0.{},10.1.0.1,{}\n",
                        last + 1 + i / 10,
                        i % 50,
                        80 + i
                    )
                })
                .collect();
            std::fs::write(
                d.join("more.csv"),
                format!("ts,src_ip,dst_ip,dst_port\n{more}"),
            )
            .unwrap();
        }
        let out = Command::new(env!("CARGO_BIN_EXE_tidemark"))
            .args(&words[1..])
            .current_dir(&d)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "`{line}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 25, "only {ran} commands found in the README");
    std::fs::remove_dir_all(&d).unwrap();
}
