//! `tidemark demo`: the store it keeps with --db, the log it writes with --emit (the README's
//! pipeline commands, in order, on it), and its chart's y-axis label and error bars.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::{dir, json_lines, ok, s, tidemark};

/// `tidemark args…` run in `d`, standard input empty.
fn tidemark_in(d: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tidemark"))
        .current_dir(d)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the binary runs")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The scanner's fan-out (3,072 ports probed) lies in the bracket of a JSON query row.
fn brackets_the_scanner(row: &serde_json::Value) {
    assert_eq!(row["key"], "10.9.0.1", "{row}");
    let (lo, hi) = (row["low"].as_f64().unwrap(), row["high"].as_f64().unwrap());
    assert!(lo <= 3_072.0 && 3_072.0 <= hi, "{row}");
}

#[test]
fn demo_db_keeps_a_store_that_query_and_check_read() {
    let d = dir("demo-db");
    let out = tidemark_in(
        &d,
        &["demo", "--minutes", "10", "--no-chart", "--db", "kept.db"],
    );
    ok(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("store kept: kept.db"),
        "the demo says where its store is"
    );
    let query = tidemark_in(
        &d,
        &[
            "query",
            "--db",
            "kept.db",
            "--metric",
            "fanout",
            "--window",
            "5m",
            "--key",
            "10.9.0.1",
            "--at",
            "2023-11-14T22:20:00Z",
            "--json",
        ],
    );
    ok(&query);
    brackets_the_scanner(&json_lines(&query)[0]);
    let check = tidemark_in(&d, &["check", "--db", "kept.db", "--json"]);
    ok(&check);
    assert_eq!(json_lines(&check)[0]["healthy"], true);
    // Only the store (and nothing temporary) is left beside it.
    let names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["kept.db"]);
    // --emit writes only the log: no store to keep.
    let out = tidemark_in(&d, &["demo", "--emit", "f.csv", "--db", "other.db"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_readme_pipeline_runs_in_order_on_the_demo_log() {
    let d = dir("demo-readme");
    let fanout = repo().join("examples/fanout.toml");
    let hammer = repo().join("examples/hammer.toml");
    let (fanout, hammer) = (s(&fanout), s(&hammer));
    // The README's pipeline block, in order (less `--follow`, which waits for a signal).
    let run = |args: &[&str]| {
        let out = tidemark_in(&d, args);
        ok(&out);
        out
    };
    run(&["demo", "--db", "demo.db"]);
    let top = run(&[
        "query", "--db", "demo.db", "--metric", "fanout", "--top", "10", "--window", "5m", "--json",
    ]);
    assert_eq!(json_lines(&top).len(), 10);
    run(&["demo", "--emit", "flows.csv"]);
    run(&["run", "--config", fanout, "--db", "fanout.db", "flows.csv"]);
    run(&["run", "--config", fanout, "--db", "fanout.db", "--close"]);
    let top = run(&[
        "query",
        "--db",
        "fanout.db",
        "--metric",
        "fanout",
        "--top",
        "10",
        "--window",
        "5m",
        "--json",
    ]);
    assert_eq!(json_lines(&top).len(), 10);
    let scanner = run(&[
        "query",
        "--db",
        "fanout.db",
        "--metric",
        "fanout",
        "--key",
        "10.9.0.1",
        "--window",
        "5m",
        "--at",
        "2023-11-14T22:20:00Z",
        "--json",
    ]);
    brackets_the_scanner(&json_lines(&scanner)[0]);
    run(&["check", "--db", "fanout.db"]);
    run(&["run", "--config", hammer, "--db", "hammer.db", "flows.csv"]);
    let hosts = run(&[
        "query",
        "--db",
        "hammer.db",
        "--metric",
        "hammer",
        "--top",
        "5",
        "--items",
        "3",
        "--window",
        "5m",
        "--json",
    ]);
    assert!(!json_lines(&hosts).is_empty());
}

/// Attribute `name` of an SVG element's text, as a number.
fn attr(element: &str, name: &str) -> f64 {
    let at = element
        .find(&format!(" {name}=\""))
        .unwrap_or_else(|| panic!("no {name} in {element}"));
    let rest = &element[at + name.len() + 3..];
    rest[..rest.find('"').unwrap()].parse().unwrap()
}

#[test]
fn the_chart_labels_its_y_axis_and_draws_error_bars_that_show() {
    let d = dir("demo-chart");
    let out = tidemark_in(&d, &["demo", "--minutes", "10", "--chart", "fanout.svg"]);
    ok(&out);
    let svg = std::fs::read_to_string(d.join("fanout.svg")).unwrap();
    // The y axis: its quantity and unit, written along it.
    let label = svg
        .lines()
        .find(|l| l.contains(r#"class="y-label""#))
        .expect("a y-axis label");
    assert!(label.contains("rotate(-90)"), "{label}");
    assert!(
        label.contains(">fan-out: distinct (dst_ip, dst_port) in 5 minutes (log scale)</text>"),
        "{label}"
    );
    // Error bars: one for each point of the scanner's line with a bracket, capped, the caps
    // wider than the line they cross; and a shaded band along them.
    let bars: Vec<&str> = svg
        .lines()
        .filter(|l| l.contains(r#"class="error-bar""#))
        .collect();
    assert!(bars.len() >= 5, "{} error bars", bars.len());
    for bar in &bars {
        assert!(attr(bar, "stroke-width") >= 1.5, "{bar}");
        // `d="Mx0,yH x1 Mx,yV y' Mx0,y'H x1"`: caps of x1 − x0 pixels, a bar of |y' − y|.
        let d = &bar[bar.find(" d=\"M").unwrap() + 5..];
        let nums: Vec<f64> = d[..d.find('"').unwrap()]
            .split(['M', 'H', 'V', ','])
            .filter(|t| !t.is_empty())
            .map(|t| t.parse().unwrap())
            .collect();
        let (x0, hi, x1, lo) = (nums[0], nums[1], nums[2], nums[5]);
        assert!(x1 - x0 >= 8.0, "caps of {} px: {bar}", x1 - x0);
        // HyperLogLog p = 10 at 95%: about ±6.4%, 0.055 of a decade in all, at 127 px a
        // decade: about 7 px, past the 2-px line on both sides.
        assert!(lo - hi > 4.0, "a bar of {} px: {bar}", lo - hi);
    }
    let bands = svg
        .lines()
        .filter(|l| l.contains(r#"class="error-band""#) && l.contains("fill-opacity"))
        .count();
    assert!(bands >= 1, "a shaded band");
    assert!(svg.contains(">95% bracket</text>"), "the legend names them");
}

#[test]
fn the_log_flags_say_what_they_need() {
    // --latency adds a column to a log written out; alone it is refused, naming itself.
    let out = tidemark(&["demo", "--latency", "--minutes", "1"], "");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--latency"));
    // --topic needs --brokers, and writes the log instead of a store.
    for args in [
        &["demo", "--topic", "flows"][..],
        &["demo", "--brokers", "b:9092"][..],
        &[
            "demo",
            "--topic",
            "flows",
            "--brokers",
            "b:9092",
            "--db",
            "x.db",
        ][..],
    ] {
        let out = tidemark(args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
}
