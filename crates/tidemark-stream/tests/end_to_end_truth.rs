//! End to end on a generated flow log with known truth: the fan-out detector flags every
//! scanner and no health checker or user; stored windows hold the exact distinct count inside
//! their bracket at ≥ 95% of checks; late events land in their own bucket or are dropped or
//! merged as configured. The truth comes from an exact model (HashSets) that applies the
//! watermark rule independently of the engine.

use std::collections::{BTreeMap, HashMap, HashSet};

use tidemark_stream::flowgen::{Flow, FlowLog, FlowSpec, FANOUT_CONFIG};
use tidemark_stream::pipeline::{self, AlertOut, RunOptions, RunReport};
use tidemark_stream::query;
use tidemark_stream::store::MemStore;

const BUCKET: u64 = 60_000;
const WINDOW: u64 = 300_000;
const LATENESS: u64 = 30_000;

fn spec() -> FlowSpec {
    FlowSpec {
        minutes: 16,
        users: 150,
        scanners: 3,
        seed: 11,
        ..FlowSpec::default()
    }
}

/// Runs the log through the pipeline from a file, into an in-memory store.
fn run(config: &str, log: &FlowLog, tag: &str) -> (MemStore, RunReport, Vec<AlertOut>) {
    let dir = std::env::temp_dir().join(format!("tidemark-e2e-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("flows.csv");
    std::fs::write(&csv, log.to_csv()).unwrap();
    let mut store = MemStore::default();
    let mut alerts = Vec::new();
    let report = pipeline::run(
        config,
        &mut store,
        RunOptions {
            inputs: vec![csv],
            ..RunOptions::default()
        },
        &mut |a| alerts.push(a.clone()),
    )
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (store, report, alerts)
}

/// The exact model: which flows are accepted (their bucket still open when they arrive),
/// which are too late, which are late but within the lateness.
struct Truth {
    /// (src, bucket start ms) → distinct (dst, port).
    buckets: BTreeMap<(String, u64), HashSet<(String, u16)>>,
    too_late: Vec<Flow>,
    late_within: u64,
}

fn truth(log: &FlowLog, merge_too_late: bool) -> Truth {
    let mut max: Option<u64> = None;
    let mut newest_bucket: Option<u64> = None;
    let mut t = Truth {
        buckets: BTreeMap::new(),
        too_late: Vec::new(),
        late_within: 0,
    };
    // `closed` = start of the first bucket not yet closed, fixed at the first event.
    let mut closed: Option<u64> = None;
    for f in &log.flows {
        let ms = f.ts * 1000;
        if max.is_none_or(|m| ms > m) {
            max = Some(ms);
            let wm = ms.saturating_sub(LATENESS);
            let c = wm / BUCKET * BUCKET;
            closed = Some(closed.map_or(c, |old: u64| old.max(c)));
        }
        let start = ms / BUCKET * BUCKET;
        let accepted = start >= closed.unwrap();
        if !accepted {
            t.too_late.push(f.clone());
            if !merge_too_late {
                continue;
            }
        } else {
            if newest_bucket.is_some_and(|n| start < n) {
                t.late_within += 1;
            }
            newest_bucket = Some(newest_bucket.map_or(start, |n| n.max(start)));
        }
        t.buckets
            .entry((f.src.clone(), start))
            .or_default()
            .insert((f.dst.clone(), f.port));
    }
    t
}

#[test]
fn scanners_alert_health_checker_and_users_do_not() {
    let log = FlowLog::generate(&spec());
    let (_, report, alerts) = run(FANOUT_CONFIG, &log, "alerts");
    let alerted: HashSet<&str> = alerts.iter().map(|a| a.key.as_str()).collect();
    for n in 0..spec().scanners {
        assert!(
            alerted.contains(FlowLog::scanner(n).as_str()),
            "scanner {n} not alerted: {alerted:?}"
        );
    }
    assert!(!alerted.contains(FlowLog::HEALTH), "health checker alerted");
    assert_eq!(
        alerted.len(),
        spec().scanners as usize,
        "only scanners alert: {alerted:?}"
    );
    // One alert per scanner: it stays above the limit while its probes are in the window.
    assert_eq!(report.alerts, spec().scanners as u64);
    for a in &alerts {
        assert!(a.alert.estimate.value > a.alert.limit);
        assert_eq!(a.alert.threshold, 500.0);
    }
}

#[test]
fn windows_hold_the_truth_and_late_events_follow_the_drop_policy() {
    let log = FlowLog::generate(&spec());
    let model = truth(&log, false);
    let (store, report, _) = run(FANOUT_CONFIG, &log, "drop");
    assert_eq!(report.records, log.flows.len() as u64);
    assert_eq!(report.dropped, model.too_late.len() as u64);
    assert!(report.dropped > 0, "the log has too-late events");
    assert_eq!(report.late, model.late_within);
    assert!(
        report.late > 0,
        "the log has late events within the lateness"
    );

    // Every stored bucket: small keys are exact (the HyperLogLog's exact form), so late
    // events within the lateness must be in their own bucket, and too-late ones nowhere.
    let mut stored = 0;
    for ((src, start), items) in &model.buckets {
        let a = query::window(
            &store,
            "fanout",
            BUCKET,
            Some(start + BUCKET),
            Some(src.as_bytes()),
            None,
        )
        .unwrap();
        let e = a.rows[0].estimate;
        if items.len() <= 100 {
            assert_eq!(e.value, items.len() as f64, "{src} at {start}");
        }
        stored += 1;
    }
    assert_eq!(report.buckets, stored);

    // Windows of 5 buckets ending at every bucket boundary, every key: the bracket holds the
    // exact distinct count at ≥ 95% of checks (the brackets are 95% intervals; exact answers
    // always hold). Keys whose window is exact are counted too.
    let first = model.buckets.keys().map(|(_, s)| *s).min().unwrap();
    let last = model.buckets.keys().map(|(_, s)| *s).max().unwrap();
    let (mut checks, mut inside, mut sketched) = (0u64, 0u64, 0u64);
    let mut end = first + BUCKET;
    while end <= last + BUCKET {
        let mut exact: HashMap<&str, HashSet<&(String, u16)>> = HashMap::new();
        for ((src, start), items) in &model.buckets {
            if *start >= end.saturating_sub(WINDOW) && *start < end {
                exact.entry(src.as_str()).or_default().extend(items.iter());
            }
        }
        let a = query::window(&store, "fanout", WINDOW, Some(end), None, None).unwrap();
        assert_eq!(a.rows.len(), exact.len(), "keys in the window ending {end}");
        for row in &a.rows {
            let t = exact[row.key.as_str()].len() as f64;
            checks += 1;
            if row.estimate.low < row.estimate.high {
                sketched += 1;
            }
            if row.estimate.contains(t) {
                inside += 1;
            }
        }
        end += BUCKET;
    }
    eprintln!("windows: {inside} of {checks} inside, {sketched} sketched");
    assert!(
        sketched > 10,
        "some windows are sketched, not exact: {sketched}"
    );
    assert!(
        inside as f64 >= 0.95 * checks as f64,
        "{inside} of {checks} windows inside their bracket"
    );
}

#[test]
fn too_late_events_merge_into_their_stored_bucket_under_merge() {
    let log = FlowLog::generate(&spec());
    let model = truth(&log, true);
    let config = FANOUT_CONFIG.replace("late = \"drop\"", "late = \"merge\"");
    let (store, report, _) = run(&config, &log, "merge");
    assert_eq!(report.dropped, 0);
    assert_eq!(report.merged, model.too_late.len() as u64);
    assert!(report.merged > 0);
    // The buckets of too-late events hold them: exact for small keys.
    for f in &model.too_late {
        let start = f.ts * 1000 / BUCKET * BUCKET;
        let items = &model.buckets[&(f.src.clone(), start)];
        let a = query::window(
            &store,
            "fanout",
            BUCKET,
            Some(start + BUCKET),
            Some(f.src.as_bytes()),
            None,
        )
        .unwrap();
        assert_eq!(a.rows[0].estimate.value, items.len() as f64, "{f:?}");
    }
}
