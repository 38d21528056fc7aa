//! `tidemark-lab bench-report`: run the divan suites and write their figures as ratios.
//!
//! A developer's command, run from the repository: for each suite it runs
//! `cargo bench -p tidemark-bench --bench <suite> -- --sample-count N`, reads divan's tree of
//! medians, and for every measurement of a peer finds tidemark's measurement of the same case
//! — the sibling named `tidemark` (or `Tidemark<T>` beside `Peer<T>`), with the same arguments
//! — and reports `peer / tidemark` (above 1: tidemark is faster). It writes the tables between
//! the markers `<!-- bench-report:begin -->` and `<!-- bench-report:end -->` at the end of
//! `BENCHMARKS.md` (the hand-written sections above them are left alone), with the command and
//! a machine line, and draws one chart of ratios per suite into `docs/benchmarks/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use tidemark_cli::out;

use anyhow::Context;

use crate::chart::{self, Chart};
use tidemark_cli::error::UsageError;
use tidemark_cli::output::Record;

const BEGIN: &str = "<!-- bench-report:begin -->";
const END: &str = "<!-- bench-report:end -->";

/// Arguments of `tidemark-lab bench-report`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Suites to run (default: every file in benches/benches/).
    #[arg(long = "suite", value_name = "NAME")]
    pub suites: Vec<String>,
    /// Samples per measurement, passed to divan.
    #[arg(long, default_value_t = 20)]
    pub sample_count: u32,
    /// The repository (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// Read divan's output from FILE instead of running the suite (one suite; for tests and
    /// for re-rendering a saved run).
    #[arg(long, value_name = "FILE")]
    pub from: Option<PathBuf>,
    /// Print the report instead of writing BENCHMARKS.md and the charts.
    #[arg(long)]
    pub dry_run: bool,
}

/// One measured leaf: its path in divan's tree and its median in nanoseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Measure {
    /// Names from the suite's top group down to the leaf.
    pub path: Vec<String>,
    /// The median, in ns.
    pub median_ns: f64,
}

fn nanos(value: &str, unit: &str) -> Option<f64> {
    let v: f64 = value.parse().ok()?;
    let scale = match unit {
        "ps" => 1e-3,
        "ns" => 1.0,
        "µs" | "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    Some(v * scale)
}

/// Reads divan's tree output: each `├─ name` / `╰─ name` line at depth `d` (three columns of
/// prefix a level) names a node; a node whose median column holds a time is a measurement.
pub fn parse(text: &str) -> Vec<Measure> {
    let mut stack: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let chars: Vec<char> = line.chars().collect();
        let Some(pos) = chars
            .windows(2)
            .position(|w| (w[0] == '├' || w[0] == '╰') && w[1] == '─')
        else {
            continue;
        };
        let depth = pos / 3;
        let rest: String = chars[pos + 2..].iter().collect();
        let mut cols = rest.split('│');
        let first = cols.next().unwrap_or("");
        // The name ends where the `fastest` column starts: at a run of two spaces.
        let name = first
            .trim_start()
            .split("  ")
            .next()
            .unwrap_or("")
            .trim()
            .to_string();
        stack.truncate(depth);
        stack.push(name);
        let median = cols.nth(1).map(str::trim).unwrap_or("");
        let mut parts = median.split_whitespace();
        if let (Some(v), Some(u)) = (parts.next(), parts.next()) {
            if let Some(ns) = nanos(v, u) {
                out.push(Measure {
                    path: stack.clone(),
                    median_ns: ns,
                });
            }
        }
    }
    out
}

/// tidemark's measurement of the same case as `m`, if `m` is a peer's.
pub fn baseline<'a>(m: &Measure, all: &'a [Measure]) -> Option<&'a Measure> {
    for i in (0..m.path.len()).rev() {
        let c = &m.path[i];
        if c.to_lowercase().starts_with("tidemark") {
            return None; // ours
        }
        let suffix = c.find('<').map_or("", |k| &c[k..]);
        // `count_min_sketch_conservative` pairs with `tidemark_conservative` where that
        // exists: the same variant of the same operation.
        let variants = c
            .match_indices('_')
            .map(|(k, _)| format!("tidemark{}", &c[k..]));
        let names = variants.chain([
            format!("Tidemark{suffix}"),
            format!("tidemark{suffix}"),
            "tidemark".to_string(),
        ]);
        for name in names {
            let mut p = m.path.clone();
            p[i] = name;
            if let Some(b) = all.iter().find(|x| x.path == p) {
                return Some(b);
            }
        }
    }
    None
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.2} ns")
    }
}

/// The markdown table of one suite, and one chart record per peer measurement.
fn report(suite: &str, measures: &[Measure]) -> (String, Vec<Record>) {
    let mut md = format!("### {suite}\n\n| case | measurement | median | tidemark | ratio |\n| ---: | --- | ---: | ---: | ---: |\n");
    let mut records = Vec::new();
    for m in measures {
        let b = baseline(m, measures);
        let (case, ours, ratio) = match b {
            Some(b) => (
                (records.len() + 1).to_string(),
                fmt_ns(b.median_ns),
                format!("{:.2}×", m.median_ns / b.median_ns),
            ),
            None => (String::new(), String::new(), String::new()),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            case,
            m.path.join(" / "),
            fmt_ns(m.median_ns),
            ours,
            ratio
        ));
        if let Some(b) = b {
            let peer = m
                .path
                .iter()
                .find(|c| baseline_component(c, &b.path))
                .cloned()
                .unwrap_or_default();
            records.push(
                Record::new()
                    .field("case", records.len() as u64 + 1)
                    .field("peer", peer)
                    .field("ratio", m.median_ns / b.median_ns),
            );
        }
    }
    (md, records)
}

/// Whether `c` is the component of a peer path that differs from tidemark's path.
fn baseline_component(c: &str, ours: &[String]) -> bool {
    !ours.iter().any(|o| o == c)
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{cores} cores of {cpu}")
}

fn run_suite(repo: &Path, suite: &str, samples: u32) -> anyhow::Result<String> {
    eprintln!("running suite {suite} …");
    let out = Command::new("cargo")
        .current_dir(repo)
        .args(["bench", "-p", "tidemark-bench", "--bench", suite, "--"])
        .args(["--sample-count", &samples.to_string()])
        .output()
        .context("running cargo bench")?;
    if !out.status.success() {
        anyhow::bail!(
            "cargo bench --bench {suite} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `tidemark-lab bench-report`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut suites = args.suites.clone();
    if suites.is_empty() {
        let dir = args.repo.join("benches/benches");
        let entries = std::fs::read_dir(&dir).map_err(|e| UsageError::file(dir.display(), e))?;
        for e in entries.flatten() {
            if let Some(stem) = e.path().file_stem().and_then(|s| s.to_str()) {
                suites.push(stem.to_string());
            }
        }
        suites.sort();
    }
    if args.from.is_some() && suites.len() != 1 {
        return Err(UsageError::flag(
            "--from",
            "give exactly one --suite with --from",
        ));
    }
    let mut md = format!(
        "{BEGIN}\n\n## Latest full run (generated)\n\nCommand: `cargo run --release -p tidemark-lab -- bench-report --sample-count {}`. Machine: {}. Ratio = the peer's median / tidemark's median for the same case (above 1: tidemark is faster).\n\n",
        args.sample_count,
        machine()
    );
    for suite in &suites {
        let text = match &args.from {
            Some(f) => std::fs::read_to_string(f).map_err(|e| UsageError::file(f.display(), e))?,
            None => run_suite(&args.repo, suite, args.sample_count)?,
        };
        let measures = parse(&text);
        let (table, records) = report(suite, &measures);
        md.push_str(&table);
        md.push('\n');
        if !args.dry_run && !records.is_empty() {
            let dir = args.repo.join("docs/benchmarks");
            std::fs::create_dir_all(&dir).map_err(|e| UsageError::file(dir.display(), e))?;
            let chart = Chart {
                suffix: "",
                title: "Peer time over tidemark's, per case (above 1: tidemark is faster)",
                x: "case",
                ys: &["ratio"],
                group: Some("peer"),
                band: None,
                log_x: false,
                log_y: true,
                y_label: "peer / tidemark",
                only: &[],
                points_only: true,
            };
            chart::render(&chart, &records, &dir.join(suite))?;
        }
    }
    md.push_str(END);
    md.push('\n');
    if args.dry_run {
        out!("{md}");
        return Ok(());
    }
    let path = args.repo.join("BENCHMARKS.md");
    let old = std::fs::read_to_string(&path).map_err(|e| UsageError::file(path.display(), e))?;
    let kept = match (old.find(BEGIN), old.find(END)) {
        (Some(b), Some(e)) if e > b => {
            format!("{}{}", &old[..b], &old[e + END.len()..].trim_start())
        }
        _ => format!("{}\n", old.trim_end()),
    };
    std::fs::write(&path, format!("{}\n{md}", kept.trim_end()))
        .map_err(|e| UsageError::file(path.display(), e))?;
    eprintln!("wrote {} and docs/benchmarks/*.svg", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
Timer precision: 17 ns
window                          fastest       │ slowest       │ median        │ mean          │ samples │ iters
├─ estimate                                   │               │               │               │         │
│  ╰─ tidemark                  24.87 ns      │ 47.87 ns      │ 26.37 ns      │ 27.32 ns      │ 20      │ 20
╰─ push                                       │               │               │               │         │
   ├─ sketch_oxide                            │               │               │               │         │
   │  ├─ W=1000 d=0.5           45.89 ms      │ 56.59 ms      │ 47.69 ms      │ 48.02 ms      │ 20      │ 20
   │  │                         2.179 Mitem/s │ 1.766 Mitem/s │ 2.096 Mitem/s │ 2.082 Mitem/s │         │
   │  ╰─ W=1000 d=1             1.5 s         │ 1.6 s         │ 1.55 s        │ 1.6 s         │ 20      │ 20
   ╰─ tidemark                                │               │               │               │         │
      ├─ W=1000 d=0.5           836.5 µs      │ 888 µs        │ 848.7 µs      │ 857.7 µs      │ 20      │ 20
      ╰─ W=1000 d=1             699.9 µs      │ 750.7 µs      │ 705 µs        │ 711.6 µs      │ 20      │ 20
";

    #[test]
    fn parses_divans_tree_and_pairs_peers_with_tidemark() {
        let m = parse(SAMPLE);
        let paths: Vec<String> = m.iter().map(|x| x.path.join("/")).collect();
        assert_eq!(
            paths,
            [
                "estimate/tidemark",
                "push/sketch_oxide/W=1000 d=0.5",
                "push/sketch_oxide/W=1000 d=1",
                "push/tidemark/W=1000 d=0.5",
                "push/tidemark/W=1000 d=1",
            ]
        );
        assert_eq!(m[1].median_ns, 47.69e6);
        assert_eq!(m[2].median_ns, 1.55e9);
        let b = baseline(&m[1], &m).unwrap();
        assert_eq!(b.path.join("/"), "push/tidemark/W=1000 d=0.5");
        assert!((m[1].median_ns / b.median_ns - 47.69e6 / 848.7e3).abs() < 1e-9);
        assert!(baseline(&m[3], &m).is_none());
        let variant = |name: &str| Measure {
            path: vec!["update".into(), name.into()],
            median_ns: 1.0,
        };
        let all = vec![
            variant("tidemark"),
            variant("tidemark_conservative"),
            variant("count_min_sketch_conservative"),
        ];
        assert_eq!(
            baseline(&all[2], &all).unwrap().path[1],
            "tidemark_conservative"
        );
        assert!(baseline(&m[0], &m).is_none());
    }

    #[test]
    fn type_parameters_pair_with_tidemarks_of_the_same_type() {
        let all = vec![
            Measure {
                path: vec!["insert".into(), "Tidemark<u64>".into(), "100".into()],
                median_ns: 2.0,
            },
            Measure {
                path: vec!["insert".into(), "Tidemark<Str16>".into(), "100".into()],
                median_ns: 3.0,
            },
            Measure {
                path: vec!["insert".into(), "Lockless<Str16>".into(), "100".into()],
                median_ns: 6.0,
            },
        ];
        assert_eq!(baseline(&all[2], &all).unwrap().median_ns, 3.0);
    }
}
