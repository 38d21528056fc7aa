//! Where `tidemark query`'s window ends without --at: at the end of the metric's newest open
//! bucket (the bucket of the latest event, which a run leaves open for more input), not at
//! the watermark, which trails the latest event by the allowed lateness; and `--help` says so.

mod common;
use common::{dir, json_lines, ok, s, tidemark};

#[test]
fn query_help_says_the_window_ends_at_the_newest_open_bucket() {
    let out = tidemark(&["query", "--help"], "");
    ok(&out);
    let help = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        help.contains("default: the end of the metric's newest open bucket"),
        "{help}"
    );
    assert!(!help.contains("watermark"), "{help}");
}

#[test]
fn the_default_window_ends_at_the_end_of_the_newest_open_bucket() {
    let d = dir("query-window-end");
    let log = d.join("flows.csv");
    ok(&tidemark(
        &[
            "demo",
            "--emit",
            s(&log),
            "--minutes",
            "10",
            "--users",
            "20",
        ],
        "",
    ));
    // The latest event time, in seconds: its minute's bucket is the newest, left open.
    let latest: u64 = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse::<u64>().unwrap())
        .max()
        .unwrap();
    let open_end = latest - latest % 60 + 60;
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/fanout.toml");
    let db = d.join("fanout.db");
    ok(&tidemark(
        &[
            "run",
            "--quiet",
            "--config",
            config,
            "--db",
            s(&db),
            s(&log),
        ],
        "",
    ));
    let query = |extra: &[&str]| {
        let mut args = vec![
            "query",
            "--db",
            s(&db),
            "--metric",
            "fanout",
            "--window",
            "5m",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = tidemark(&args, "");
        ok(&out);
        json_lines(&out)
    };
    let default = query(&[]);
    assert!(!default.is_empty());
    let to = tidemark_stream::time::format_rfc3339(open_end * 1000);
    for row in &default {
        assert_eq!(row["to"], to.as_str(), "{row}");
        assert_eq!(
            row["partial"], true,
            "the open bucket's answer so far: {row}"
        );
    }
    assert_eq!(query(&["--at", &open_end.to_string()]), default);
    // The watermark, 30 s of allowed lateness behind the latest event, is in an earlier
    // bucket: a window ending there is not the default.
    let watermark = (latest - 30).to_string();
    let at_watermark = query(&["--at", &watermark]);
    assert_ne!(at_watermark[0]["to"], to.as_str());
}
