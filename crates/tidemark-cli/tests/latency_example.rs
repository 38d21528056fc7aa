//! `examples/latency.toml` on the demo log with latencies: the rule on the p99 fires on the
//! destinations the generator gave an incident, and each alert's bracket holds the exact p99
//! of its window (the events the run kept: those not past the allowed lateness), as does
//! `tidemark query --quantile`.

mod common;

use std::collections::BTreeMap;

use common::{json_lines, ok, tidemark};
use tidemark_stream::flowgen::{Flow, FlowLog, FlowSpec};
use tidemark_stream::time::parse_rfc3339;

#[test]
fn the_latency_example_alerts_on_the_incidents_alone() {
    let dir = std::env::temp_dir().join(format!("tidemark-latency-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = FlowLog::generate(&FlowSpec {
        minutes: 20,
        ..FlowSpec::default()
    });
    let csv = dir.join("flows.csv");
    std::fs::write(&csv, log.to_csv_with_latency()).unwrap();
    let db = dir.join("latency.db");
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/latency.toml");
    let out = tidemark(
        &[
            "run",
            "--config",
            config,
            "--db",
            db.to_str().unwrap(),
            csv.to_str().unwrap(),
        ],
        "",
    );
    ok(&out);
    // The events the run keeps: in arrival order, an event whose bucket the watermark (the
    // latest time seen, less 30 s) has passed is dropped.
    let mut kept: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    let mut latest = 0u64;
    for f in &log.flows {
        latest = latest.max(f.ts);
        let bucket_end = (f.ts / 60 + 1) * 60;
        if bucket_end + 30 <= latest {
            continue;
        }
        kept.entry(f.dst.clone())
            .or_default()
            .push((f.ts * 1000, f.latency_ms()));
    }
    let p99 = |key: &str, from: u64, to: u64| {
        let mut v: Vec<f64> = kept[key]
            .iter()
            .filter(|(t, _)| (from..to).contains(t))
            .map(|&(_, x)| x)
            .collect();
        v.sort_by(f64::total_cmp);
        v[tidemark::quantile::nearest_rank(0.99, v.len() as u64) as usize - 1]
    };
    let alerts = json_lines(&out);
    assert!(!alerts.is_empty(), "the incidents raise alerts");
    for a in &alerts {
        let key = a["key"].as_str().unwrap();
        assert!(Flow::has_incident(key), "{key} has no incident: {a}");
        let from = parse_rfc3339(a["from"].as_str().unwrap()).unwrap();
        let to = parse_rfc3339(a["to"].as_str().unwrap()).unwrap();
        let x = p99(key, from, to);
        let (low, high) = (a["low"].as_f64().unwrap(), a["high"].as_f64().unwrap());
        assert!(
            low <= x && x <= high,
            "{key}: [{low}, {high}] misses the p99 {x}"
        );
        assert!(low > 250.0, "{key}: fired below the threshold: {a}");
        // The store answers the same window with the same bracket.
        let q = tidemark(
            &[
                "query",
                "--db",
                db.to_str().unwrap(),
                "--metric",
                "latency",
                "--key",
                key,
                "--window",
                "5m",
                "--at",
                a["to"].as_str().unwrap(),
                "--quantile",
                "0.99",
                "--json",
            ],
            "",
        );
        ok(&q);
        let rows = json_lines(&q);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0]["quantile"], 0.99);
        assert_eq!(a["quantile"], 0.99);
        assert_eq!(
            (rows[0]["low"].as_f64(), rows[0]["high"].as_f64()),
            (Some(low), Some(high))
        );
    }
    // --quantile is refused for another kind's metric, and outside (0, 1].
    let q = |extra: &[&str]| {
        let mut args = vec![
            "query",
            "--db",
            db.to_str().unwrap(),
            "--metric",
            "latency",
            "--window",
            "5m",
        ];
        args.extend_from_slice(extra);
        tidemark(&args, "")
    };
    for bad in ["0", "1.5", "-0.5", "NaN"] {
        let out = q(&[&format!("--quantile={bad}")]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--quantile"),
            "{bad}"
        );
    }
    let out = q(&["--items", "3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("quantile metric"));
    std::fs::remove_dir_all(&dir).unwrap();
}
