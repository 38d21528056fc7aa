//! Early alerts against exact models: an early alert fires at the event whose item takes the
//! window the next close evaluates past the limit — not at that close — and the close then
//! confirms it, or withdraws it when the closed window is not past the limit.

use tidemark::window::ExpHistogram;
use tidemark_stream::config::Config;
use tidemark_stream::engine::{Alert, AlertPhase, Engine};

/// The scanner detector: distinct ports per source over 5 one-minute buckets, exact at these
/// sizes (HyperLogLog's exact representation), alerting above 20.
fn scanner_config(early: bool) -> Config {
    Config::from_toml(&format!(
        r#"
[input]
time_field = "ts"
[[metric]]
name = "fanout"
kind = "distinct"
key = ["src"]
item = ["port"]
bucket = "1m"
window = "5m"
precision = 10
retention = "1h"
allowed_lateness = "30s"
[[metric.alert]]
above = 20
early = {early}
"#
    ))
    .unwrap()
}

/// One probe: (time ms, port).
fn probes() -> Vec<(u64, u64)> {
    // 40 ports, one a second from 10 s, each twice (a repeat adds nothing): the 21st distinct
    // port arrives at 30 s.
    (0..40u64)
        .flat_map(|p| [(10_000 + p * 1_000, p), (10_000 + p * 1_000 + 500, p)])
        .collect()
}

/// Feeds the probes of source "scan" one by one, returning after each the alerts it raised.
fn feed(e: &mut Engine, probes: &[(u64, u64)]) -> Vec<Vec<Alert>> {
    probes
        .iter()
        .map(|&(t, port)| {
            e.observe(t);
            e.add(0, t, b"scan", port);
            e.take_outputs().alerts
        })
        .collect()
}

#[test]
fn a_scanners_early_alert_fires_at_the_crossing_event_and_its_close_confirms_it() {
    let probes = probes();
    // Exact model: the first probe at which the distinct ports so far exceed 20.
    let mut seen = std::collections::BTreeSet::new();
    let crossing = probes
        .iter()
        .position(|&(_, port)| {
            seen.insert(port);
            seen.len() > 20
        })
        .unwrap();
    assert_eq!(probes[crossing].0, 30_000);

    let mut e = Engine::new(&scanner_config(true)).unwrap();
    let per_probe = feed(&mut e, &probes);
    for (i, alerts) in per_probe.iter().enumerate() {
        if i != crossing {
            assert!(alerts.is_empty(), "probe {i}: {alerts:?}");
        }
    }
    let early = &per_probe[crossing];
    assert_eq!(early.len(), 1, "{early:?}");
    let a = &early[0];
    assert_eq!(a.phase, AlertPhase::Early);
    assert_eq!(&*a.key, b"scan");
    assert_eq!(a.at, 30_000);
    // The window the close of [0, 1m) evaluates: [-4m, 1m), clamped at 0.
    assert_eq!((a.bucket, a.window_start, a.window_end), (0, 0, 60_000));
    assert_eq!(
        (a.estimate.value, a.estimate.low, a.estimate.high),
        (21.0, 21.0, 21.0)
    );

    // The close (watermark past 1 m, at 90 s): confirmed, with the whole bucket's 40 ports.
    e.observe(90_000);
    e.add(0, 90_000, b"clock", 0);
    let close = e.take_outputs().alerts;
    assert_eq!(close.len(), 1, "{close:?}");
    assert_eq!(close[0].phase, AlertPhase::Confirmed);
    assert_eq!((close[0].at, close[0].estimate.value), (90_000, 40.0));

    // The episode goes on: more ports in the next minute raise nothing, early or at close.
    let next: Vec<(u64, u64)> = (0..30u64).map(|p| (95_000 + p * 100, 100 + p)).collect();
    assert!(feed(&mut e, &next).iter().all(Vec::is_empty));
    e.observe(160_000);
    e.add(0, 160_000, b"clock", 0);
    assert!(e.take_outputs().alerts.is_empty());
    assert_eq!(e.counters(0).alerts, 1, "an early alert counts once");

    // Without early alerts the same probes raise nothing until the close, a bucket later.
    let mut e = Engine::new(&scanner_config(false)).unwrap();
    assert!(feed(&mut e, &probes).iter().all(Vec::is_empty));
    e.observe(90_000);
    e.add(0, 90_000, b"clock", 0);
    let close = e.take_outputs().alerts;
    assert_eq!(close.len(), 1, "{close:?}");
    assert_eq!((close[0].phase, close[0].at), (AlertPhase::Closed, 90_000));
}

#[test]
fn probes_of_the_next_bucket_wait_for_the_close_they_belong_to() {
    // Bucket [0, 1m) is still open (lateness 30 s) when probes of [1m, 2m) arrive: they are
    // not in the window its close evaluates, so they raise nothing early until it closed.
    let mut e = Engine::new(&scanner_config(true)).unwrap();
    let first: Vec<(u64, u64)> = (0..10u64).map(|p| (50_000 + p, p)).collect();
    assert!(feed(&mut e, &first).iter().all(Vec::is_empty));
    let second: Vec<(u64, u64)> = (0..15u64).map(|p| (61_000 + p * 1_000, 100 + p)).collect();
    let per_probe = feed(&mut e, &second);
    // Probes at 61–75 s; [0, 1m) closes at the probe at 90 s, below the limit (10 ports).
    assert!(per_probe.iter().all(Vec::is_empty), "{per_probe:?}");
    // After that close the running window is [1m, 2m)'s, which holds 10 + 15 > 20 ports.
    let later = feed(&mut e, &[(90_000, 200)]);
    assert_eq!(later[0].len(), 1, "{later:?}");
    assert_eq!(later[0][0].phase, AlertPhase::Early);
    assert_eq!(later[0][0].window_end, 120_000);
    assert_eq!(later[0][0].estimate.value, 26.0);
}

/// A count metric whose exponential histogram (ε = 1/2) merges buckets at a close.
fn count_config() -> Config {
    Config::from_toml(
        r#"
[input]
time_field = "ts"
[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "10s"
window = "30s"
epsilon = 0.5
retention = "1m"
[[metric.alert]]
above = 39
early = true
"#,
    )
    .unwrap()
}

#[test]
fn a_close_below_the_limit_withdraws_the_early_alert() {
    // Events of key "a" per 10 s bucket. Before the close of bucket 2 the window holds 19 +
    // 15 + 12 = 46 events, the histogram's oldest bucket straddling its edge; the close adds
    // bucket 2's count, which merges the oldest buckets into a larger one, and the estimate
    // (total − (size − 1)/2) falls to the limit or below.
    let per_bucket = [19u64, 15, 12, 12, 0, 12, 6, 18];
    let mut e = Engine::new(&count_config()).unwrap();
    let mut alerts = Vec::new();
    // Model: the histogram the engine keeps, fed each closed bucket at its last tick.
    let mut model = ExpHistogram::ticks(30_000, 0.5).unwrap();
    let mut closes = Vec::new();
    for (b, &n) in per_bucket.iter().enumerate() {
        let t0 = b as u64 * 10_000;
        for i in 0..n {
            e.observe(t0 + i);
            e.add(0, t0 + i, b"a", 0);
            alerts.extend(e.take_outputs().alerts.into_iter().map(|a| (a, t0 + i)));
        }
        // Another key keeps time moving; with no lateness, bucket b closes at the next one.
        e.observe(t0 + 9_999);
        e.add(0, t0 + 9_999, b"clock", 0);
        alerts.extend(e.take_outputs().alerts.into_iter().map(|a| (a, t0 + 9_999)));
        model.record_value(t0 + 9_999, n).unwrap();
        model.advance_to(t0 + 9_999).unwrap();
        closes.push(model.estimate());
    }
    e.flush();
    alerts.extend(e.take_outputs().alerts.into_iter().map(|a| (a, 0)));
    let mine: Vec<&(Alert, u64)> = alerts.iter().filter(|(a, _)| &*a.key == b"a").collect();
    let phases: Vec<(AlertPhase, u64)> = mine
        .iter()
        .map(|(a, _)| (a.phase, a.bucket / 10_000))
        .collect();
    assert_eq!(
        phases,
        [(AlertPhase::Early, 2), (AlertPhase::Withdrawn, 2)],
        "{mine:?}"
    );
    let (early, at) = mine[0];
    assert!(early.estimate.value > early.limit);
    assert!(*at < 30_000, "raised inside bucket 2, before its close");
    // The withdrawal carries the closed window's estimate: the model's, not past the limit.
    let (withdrawn, _) = mine[1];
    assert_eq!(withdrawn.estimate, closes[2]);
    assert!(withdrawn.estimate.value <= withdrawn.limit);
    // No other close of the model passes the limit: nothing else is due.
    for (b, c) in closes.iter().enumerate() {
        assert!(c.value <= 39.0, "close {b}: {c:?}");
    }
}

#[test]
fn an_early_alert_aims_at_the_metrics_next_close_whichever_key_holds_it_open() {
    // Buckets of 10 s, windows of one bucket, 30 s of lateness, alerting above 5, early.
    let config = Config::from_toml(
        r#"
[input]
time_field = "ts"
[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "10s"
window = "10s"
allowed_lateness = "30s"
retention = "10m"
[[metric.alert]]
above = 5
early = true
"#,
    )
    .unwrap();
    let mut e = Engine::new(&config).unwrap();
    let mut alerts = Vec::new();
    let event = |e: &mut Engine, alerts: &mut Vec<Alert>, t: u64, k: &[u8]| {
        e.observe(t);
        e.add(0, t, k, 0);
        alerts.extend(e.take_outputs().alerts);
    };
    for _ in 0..3 {
        event(&mut e, &mut alerts, 0, b"a");
    }
    event(&mut e, &mut alerts, 40_000, b"z"); // closes [0, 10 s)
    event(&mut e, &mut alerts, 15_000, b"b"); // [10 s, 20 s) stays open: the next close
    for _ in 0..10 {
        // Key a's ten events are in [40 s, 50 s), not in the window of that next close.
        event(&mut e, &mut alerts, 45_000, b"a");
    }
    assert!(alerts.is_empty(), "{alerts:?}");
    event(&mut e, &mut alerts, 200_000, b"z"); // closes everything up to 170 s
    let a: Vec<(AlertPhase, u64)> = alerts
        .iter()
        .filter(|x| &*x.key == b"a")
        .map(|x| (x.phase, x.bucket))
        .collect();
    // One alert, at the close of its bucket: no early alert settled by another close.
    assert_eq!(a, [(AlertPhase::Closed, 40_000)], "{alerts:?}");
    assert_eq!(e.counters(0).alerts, 1);
}
