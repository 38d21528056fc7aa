//! End to end on a generated flow log with known truth: the fan-out detector flags every
//! scanner and no health checker or user; exact windows equal the exact distinct count and
//! sketched ones hold it inside their bracket at their confidence (a binomial floor on the
//! sketched checks alone); late events land in their own bucket or are dropped or
//! merged as configured. The truth comes from an exact model (HashSets) that applies the
//! watermark rule independently of the engine.

use std::collections::{BTreeMap, HashMap, HashSet};

use tidemark_stream::engine::AlertPhase;
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

/// Runs the log through the pipeline from a file, into an in-memory store: in one thread,
/// and again with a parse thread, which must leave the same store, report and alerts.
fn run(config: &str, log: &FlowLog, tag: &str) -> (MemStore, RunReport, Vec<AlertOut>) {
    let dir = std::env::temp_dir().join(format!("tidemark-e2e-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("flows.csv");
    std::fs::write(&csv, log.to_csv()).unwrap();
    let config = tidemark_stream::config::Config::from_toml(config).unwrap();
    let run_with = |threads: usize| {
        let mut store = MemStore::default();
        let mut alerts = Vec::new();
        let report = pipeline::run(
            &config,
            &mut store,
            RunOptions {
                inputs: vec![csv.clone()],
                threads,
                ..RunOptions::default()
            },
            &mut |a| alerts.push(a.clone()),
        )
        .unwrap();
        (store, report, alerts)
    };
    let one = run_with(1);
    let two = run_with(2);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        one.0 == two.0,
        "{tag}: the stores differ with a parse thread"
    );
    // Only the count of buckets the committer thread wrote ahead of their checkpoint differs.
    let two_report = RunReport {
        written_ahead: 0,
        ..two.1.clone()
    };
    assert_eq!(
        one.1, two_report,
        "{tag}: the reports differ with a parse thread"
    );
    assert_eq!(one.2, two.2, "{tag}: the alerts differ with a parse thread");
    one
}

/// (key, bucket start ms) → flows per source.
type FlowsBy = BTreeMap<(String, u64), HashMap<String, u64>>;

/// The exact model: which flows are accepted (their bucket still open when they arrive),
/// which are too late, which are late but within the lateness.
struct Truth {
    /// (src, bucket start ms) → distinct (dst, port).
    buckets: BTreeMap<(String, u64), HashSet<(String, u16)>>,
    /// (dst, bucket start ms) → flows per src: the hammer metric's truth.
    flows_to: FlowsBy,
    /// (dst port, bucket start ms) → flows per src: the ports metric's truth.
    flows_on: FlowsBy,
    too_late: Vec<Flow>,
    late_within: u64,
}

fn truth(log: &FlowLog, merge_too_late: bool) -> Truth {
    let mut max: Option<u64> = None;
    let mut newest_bucket: Option<u64> = None;
    let mut t = Truth {
        buckets: BTreeMap::new(),
        flows_to: BTreeMap::new(),
        flows_on: BTreeMap::new(),
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
        *t.flows_to
            .entry((f.dst.clone(), start))
            .or_default()
            .entry(f.src.clone())
            .or_default() += 1;
        *t.flows_on
            .entry((f.port.to_string(), start))
            .or_default()
            .entry(f.src.clone())
            .or_default() += 1;
    }
    t
}

#[test]
fn scanners_alert_health_checker_and_users_do_not() {
    let log = FlowLog::generate(&spec());
    let (_, report, alerts) = run(FANOUT_CONFIG, &log, "alerts");
    let alerted: HashSet<&str> = alerts.iter().map(|a| a.key.as_str()).collect();
    // Each scanner alerts early, inside the bucket, and its close confirms it.
    for key in &alerted {
        let phases: Vec<(AlertPhase, u64)> = alerts
            .iter()
            .filter(|a| a.key == *key)
            .map(|a| (a.alert.phase, a.alert.bucket))
            .collect();
        assert_eq!(phases.len(), 2, "{key}: {phases:?}");
        assert_eq!(phases[0].0, AlertPhase::Early, "{key}: {phases:?}");
        assert_eq!(phases[1], (AlertPhase::Confirmed, phases[0].1), "{key}");
        let early = &alerts.iter().find(|a| a.key == *key).unwrap().alert;
        assert!(
            early.at < early.window_end,
            "{key}: raised before its bucket ended"
        );
    }
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

    // Windows of 5 buckets ending at every bucket boundary, every key. Most keys are small and
    // their windows exact (low = high): those must equal the truth. The sketched ones are
    // held to their confidence by `sketched_windows_hold_the_truth_at_their_confidence`.
    let (exact, sketched) = check_distinct_windows(&store, &model, &[WINDOW]);
    let inside = sketched.iter().filter(|(_, _, i)| *i).count();
    eprintln!(
        "windows: {exact} exact, {} sketched, {inside} sketched inside",
        sketched.len()
    );
    assert!(exact > 1_000, "most windows are exact: {exact}");
}

/// Windows of each width in `widths` ending at every bucket boundary, every key: an exact
/// answer (low = high) must equal the exact distinct count. Returns the number of exact
/// answers and, for each sketched answer, (key, the window's exact item count, inside?).
fn check_distinct_windows(
    store: &MemStore,
    model: &Truth,
    widths: &[u64],
) -> (u64, Vec<(String, usize, bool)>) {
    let first = model.buckets.keys().map(|(_, s)| *s).min().unwrap();
    let last = model.buckets.keys().map(|(_, s)| *s).max().unwrap();
    let (mut exact_answers, mut sketched) = (0u64, Vec::new());
    for &width in widths {
        let mut end = first + BUCKET;
        while end <= last + BUCKET {
            let mut exact: HashMap<&str, HashSet<&(String, u16)>> = HashMap::new();
            for ((src, start), items) in &model.buckets {
                if *start >= end.saturating_sub(width) && *start < end {
                    exact.entry(src.as_str()).or_default().extend(items.iter());
                }
            }
            let a = query::window(store, "fanout", width, Some(end), None, None).unwrap();
            assert_eq!(a.rows.len(), exact.len(), "keys in the window ending {end}");
            for row in &a.rows {
                let t = exact[row.key.as_str()].len();
                let e = row.estimate;
                if e.low == e.high {
                    assert_eq!(e.value, t as f64, "{} at {end}, width {width}", row.key);
                    exact_answers += 1;
                } else {
                    sketched.push((row.key.clone(), t, e.contains(t as f64)));
                }
            }
            end += BUCKET;
        }
    }
    (exact_answers, sketched)
}

/// The binomial floor for `n` checks each inside with probability `p`: three standard
/// deviations below the mean (a correct sketch falls below it about once in 700 runs if the
/// checks were independent).
fn binomial_floor(n: usize, p: f64) -> f64 {
    let n = n as f64;
    n * p - 3.0 * (n * p * (1.0 - p)).sqrt()
}

/// The sketched windows alone against their 95% brackets. A log with 7 scanners (fan-out
/// 3,072 each, two minutes of probes over three 1-minute buckets), every window width of 1 to
/// 5 buckets at every boundary: checks whose key and exact window are the same repeat one
/// answer (the same buckets merged), so each (key, exact count) is counted once. Checks of one
/// scanner still share registers; the floor treats them as independent, the tighter reading.
/// With ~40 distinct checks the floor is about 85%: a bracket that covers 68% (one σ instead
/// of 1.96σ) falls below it with probability above 0.99 if checks were independent.
#[test]
fn sketched_windows_hold_the_truth_at_their_confidence() {
    let spec = FlowSpec {
        minutes: 18,
        users: 40,
        scanners: 7,
        seed: 12,
        ..FlowSpec::default()
    };
    let log = FlowLog::generate(&spec);
    let model = truth(&log, false);
    let (store, _, _) = run(FANOUT_CONFIG, &log, "sketched");
    let widths: Vec<u64> = (1..=5).map(|w| w * BUCKET).collect();
    let (exact, sketched) = check_distinct_windows(&store, &model, &widths);
    let distinct: BTreeMap<(String, usize), bool> = sketched
        .into_iter()
        .map(|(key, t, inside)| ((key, t), inside))
        .collect();
    let n = distinct.len();
    let inside = distinct.values().filter(|&&i| i).count();
    let floor = binomial_floor(n, 0.95);
    eprintln!("sketched windows: {inside} of {n} distinct checks inside (floor {floor:.1}); {exact} exact");
    assert!(n >= 30, "enough sketched checks for power: {n}");
    assert!(
        inside as f64 >= floor,
        "{inside} of {n} sketched windows inside their 95% bracket (floor {floor:.1})"
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

/// Flows per (destination, source) and per (port, source) in 5 minutes: item counts at
/// ε = δ = 0.1 (exact up to 10 sources a key and bucket: each host sees few sources and stays
/// exact, ports see many and are sketched), φ = 0.2. The hammer metric alerts when the lower
/// end of a host's source count passes 500 flows.
const HAMMER: &str = r#"
[input]
format = "csv"
time_field = "ts"
time_format = "epoch_s"
[[metric]]
name = "hammer"
kind = "frequency"
key = ["dst_ip"]
item = ["src_ip"]
bucket = "1m"
window = "5m"
epsilon = 0.1
delta = 0.1
phi = 0.2
allowed_lateness = "30s"
late = "drop"
[[metric.alert]]
above = 500
on = "low"
[[metric]]
name = "ports"
kind = "frequency"
key = ["dst_port"]
item = ["src_ip"]
bucket = "1m"
window = "5m"
epsilon = 0.1
delta = 0.1
phi = 0.2
allowed_lateness = "30s"
late = "drop"
"#;

/// Windows of each width in `widths` at every boundary, every key of a frequency metric:
/// every source with at least `phi` of the key's flows is named (recall 1, deterministic),
/// each named count's upper end never under-counts, an exact named count (low = high) equals
/// the truth, the key's total is exact and its estimate bounds its heaviest source. Returns
/// the number of exact named counts and, for each sketched one, ((key, source, exact count),
/// inside its bracket?): a check repeated by several windows (same key, source and count)
/// is one entry.
fn check_frequency_windows(
    store: &MemStore,
    metric: &str,
    model: &FlowsBy,
    widths: &[u64],
    phi: f64,
) -> (u64, BTreeMap<(String, String, u64), bool>) {
    let first = model.keys().map(|(_, s)| *s).min().unwrap();
    let last = model.keys().map(|(_, s)| *s).max().unwrap();
    let mut exact_counts = 0u64;
    let mut sketched = BTreeMap::new();
    for &width in widths {
        let mut end = first + BUCKET;
        while end <= last + BUCKET {
            let mut exact: HashMap<&str, HashMap<&str, u64>> = HashMap::new();
            for ((key, start), srcs) in model {
                if *start >= end.saturating_sub(width) && *start < end {
                    let e = exact.entry(key.as_str()).or_default();
                    for (src, n) in srcs {
                        *e.entry(src.as_str()).or_default() += n;
                    }
                }
            }
            let a = query::window(store, metric, width, Some(end), None, None).unwrap();
            assert_eq!(
                a.rows.len(),
                exact.len(),
                "{metric}: keys in the window ending {end}"
            );
            for row in &a.rows {
                let truth = &exact[row.key.as_str()];
                let total: u64 = truth.values().sum();
                assert_eq!(row.events, Some(total), "{metric} {} at {end}", row.key);
                assert_eq!(a.part, Some("item"));
                let items: Vec<(String, _)> =
                    row.parts.iter().map(|(i, e)| (i.to_string(), *e)).collect();
                let named: HashMap<&str, _> = items.iter().map(|(i, e)| (i.as_str(), *e)).collect();
                for (src, &n) in truth {
                    if n as f64 >= phi * total as f64 {
                        assert!(
                            named.contains_key(src),
                            "{metric}: {src} of {} missed at {end}",
                            row.key
                        );
                    }
                }
                for (src, e) in &items {
                    let n = truth.get(src.as_str()).copied().unwrap_or(0) as f64;
                    assert!(
                        e.high >= n,
                        "{metric}: {src} of {}: {e} under-counts {n}",
                        row.key
                    );
                    if e.low == e.high {
                        assert_eq!(e.value, n, "{metric}: {src} of {} at {end}", row.key);
                        exact_counts += 1;
                    } else {
                        let check = (row.key.clone(), src.clone(), n as u64);
                        sketched.insert(check, e.contains(n));
                    }
                }
                let max = truth.values().copied().max().unwrap_or(0) as f64;
                assert!(
                    row.estimate.high >= max,
                    "{metric} {}: {} < {max}",
                    row.key,
                    row.estimate
                );
            }
            end += BUCKET;
        }
    }
    (exact_counts, sketched)
}

#[test]
fn frequency_windows_name_every_heavy_source_and_scanners_alert() {
    let log = FlowLog::generate(&spec());
    let model = truth(&log, false);
    let (store, report, alerts) = run(HAMMER, &log, "hammer");
    // Two metrics see every event: each counts the too-late ones.
    assert_eq!(report.dropped, 2 * model.too_late.len() as u64);
    assert_eq!(report.late, 2 * model.late_within);

    // Alerts: each scanner probes 1,024 ports on each of its 3 hosts in two minutes; no other
    // source sends a host 500 flows in 5 minutes (the health checker sends each target 300).
    // Alerts are per host and source: scanners overlapping on a host each raise their own.
    let mut alerted: HashSet<(String, String)> = HashSet::new();
    for a in &alerts {
        assert_eq!(a.metric, "hammer");
        let item = String::from_utf8(a.alert.item.clone().unwrap().into_vec()).unwrap();
        assert!(a.alert.estimate.low > 500.0);
        assert!(
            alerted.insert((a.key.clone(), item)),
            "one alert an episode"
        );
    }
    let mut expected = HashSet::new();
    for f in &log.flows {
        if f.src.starts_with("10.9.") {
            expected.insert((f.dst.clone(), f.src.clone()));
        }
    }
    assert_eq!(
        alerted, expected,
        "exactly the scanners on their hosts alert"
    );

    let windows = [WINDOW];
    let (exact, sketched) =
        check_frequency_windows(&store, "hammer", &model.flows_to, &windows, 0.2);
    assert!(sketched.is_empty(), "hosts see few sources: exact");
    assert!(exact > 0);
    // Ports with many sources are sketched: the sketched named counts alone (exact ones were
    // asserted equal above), over windows of 1 to 5 buckets, each distinct (port, source,
    // count) once, hold at the sketch's confidence 1 − e^−3 ≈ 95%, with three binomial
    // standard deviations of slack for their number. Windows of one port share its buckets'
    // hash functions, so the checks are not independent: the floor is the tighter reading.
    // This log gives only 15 such checks (floor 11.7: at least 12 inside), which catches a
    // bracket that misses often but has little power against a modest loss of coverage;
    // Count-Min's bracket rates are measured with power in `frequency_accuracy.rs`.
    let widths: Vec<u64> = (1..=5).map(|w| w * BUCKET).collect();
    let (exact, sketched) = check_frequency_windows(&store, "ports", &model.flows_on, &widths, 0.2);
    let n = sketched.len();
    let inside = sketched.values().filter(|&&i| i).count();
    let p = 1.0 - (-3.0f64).exp();
    let floor = binomial_floor(n, p);
    eprintln!(
        "ports: {inside} of {n} sketched named counts inside (floor {floor:.1}); {exact} exact"
    );
    assert!(n > 0, "some port counts are sketched");
    assert!(
        inside as f64 >= floor,
        "{inside} of {n} sketched named counts inside their bracket (floor {floor:.1})"
    );
}

/// The stored values of the fan-out metric: (bytes, whether the sketch is still exact).
fn stored_distinct(store: &MemStore, config: &str) -> Vec<(usize, bool)> {
    let config = tidemark_stream::config::Config::from_toml(config).unwrap();
    let (_, shape) = tidemark_stream::engine::MetricShape::for_name(&config, "fanout").unwrap();
    store
        .buckets
        .iter()
        .filter(|((t, _, _), _)| t == "fanout")
        .map(
            |((_, start, _), v)| match shape.decode(v, *start).unwrap() {
                tidemark_stream::engine::Summary::Distinct(d) => (v.len(), d.is_exact()),
                other => panic!("a distinct metric stored {other:?}"),
            },
        )
        .collect()
}

#[test]
fn an_exaloglog_fanout_alerts_as_the_hyperloglog_one_in_fewer_bytes() {
    // ExaLogLog (2, 20) at p = 7 has HyperLogLog p = 10's standard error (0.362/√128 against
    // 1.04/√1024, 3.20% against 3.25%): the same alerts, its dense buckets in 448 register
    // bytes against 768.
    let log = FlowLog::generate(&spec());
    let ell_config =
        FANOUT_CONFIG.replace("precision = 10", "precision = 7\nsketch = \"exaloglog\"");
    let (hll_store, _, hll_alerts) = run(FANOUT_CONFIG, &log, "hll");
    let (ell_store, _, ell_alerts) = run(&ell_config, &log, "ell");
    let summary = |alerts: &[AlertOut]| -> Vec<(String, AlertPhase, u64)> {
        alerts
            .iter()
            .map(|a| (a.key.clone(), a.alert.phase, a.alert.bucket))
            .collect()
    };
    assert_eq!(summary(&ell_alerts), summary(&hll_alerts));
    assert_eq!(ell_alerts.len(), 2 * spec().scanners as usize);
    for a in &ell_alerts {
        assert_eq!(a.alert.estimate.method, tidemark::Method::ExaLogLogMl);
    }
    let hll = stored_distinct(&hll_store, FANOUT_CONFIG);
    let ell = stored_distinct(&ell_store, &ell_config);
    assert_eq!(
        hll.len(),
        ell.len(),
        "one bucket per key and minute in both"
    );
    let dense = |rows: &[(usize, bool)]| -> (usize, usize) {
        rows.iter()
            .filter(|(_, exact)| !exact)
            .fold((0, 0), |(n, b), (len, _)| (n + 1, b + len))
    };
    let ((hn, hb), (en, eb)) = (dense(&hll), dense(&ell));
    assert!(
        hn > 0 && en > 0,
        "the scanners' buckets are dense: {hn} {en}"
    );
    let (h_mean, e_mean) = (hb as f64 / hn as f64, eb as f64 / en as f64);
    assert!(
        e_mean <= 0.65 * h_mean,
        "dense ExaLogLog buckets {e_mean} bytes, HyperLogLog {h_mean}"
    );
}
