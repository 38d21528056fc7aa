//! The alert duty on a real Redis cluster: a run's rules evaluated once on its parts merged,
//! each key's events spread over three partitions by arrival. The lines equal one process's
//! (a distinct metric, whose merged windows are one process's to the bit) and an exact model's
//! (a count metric: its exact window counts), every line at least once through a holder that
//! dies between handing a close's lines out and storing its state, and a second worker holds
//! off while the duty is held.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{redis_available, start_cluster, TempDir};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark_cluster::{AlertDuty, MergedStore, PartitionStore, Server};
use tidemark_stream::config::Config;
use tidemark_stream::engine::AlertPhase;
use tidemark_stream::pipeline::{self, AlertOut, RunOptions};
use tidemark_stream::store::{MemStore, Store};

const CONFIG: &str = r#"
[input]
time_field = "ts"
time_format = "epoch_ms"
[state]
checkpoint = "1h"
checkpoint_records = 1000

[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "10s"
window = "30s"
retention = "1h"
allowed_lateness = "5s"
[[metric.alert]]
above = 12
consecutive = 2

[[metric]]
name = "d"
kind = "distinct"
key = ["k"]
item = ["i"]
precision = 8
bucket = "10s"
window = "30s"
retention = "1h"
allowed_lateness = "5s"
[[metric.alert]]
above = 20
margin = 0
"#;

const WIDTH: u64 = 10_000;
const WINDOW: u64 = 30_000;

/// `(time, key, item)`: 14,000 events over about seven minutes, by time; one in ten to one of
/// four hot keys with a hundred items (near both limits), the rest to 600 quiet keys.
fn events() -> Vec<(u64, u32, u32)> {
    let mut rng = Pcg64::seed_from_u64(41);
    let mut t = 0u64;
    (0..14_000)
        .map(|_| {
            t += rng.random_range(0..60);
            let (k, i) = if rng.random_bool(0.1) {
                (rng.random_range(0..4u32), rng.random_range(0..100u32))
            } else {
                (rng.random_range(4..600u32), rng.random_range(0..3u32))
            };
            (t, k, i)
        })
        .collect()
}

fn write_csv(dir: &Path, name: &str, events: &[(u64, u32, u32)]) -> PathBuf {
    let mut out = String::from("ts,k,i\n");
    for (t, k, i) in events {
        out.push_str(&format!("{t},k{k},i{i}\n"));
    }
    let path = dir.join(name);
    std::fs::write(&path, out).unwrap();
    path
}

fn run(
    config: &Config,
    store: &mut (dyn Store + Send),
    file: &Path,
    keep_open: bool,
) -> Vec<AlertOut> {
    let mut alerts = Vec::new();
    pipeline::run(
        config,
        store,
        RunOptions {
            inputs: vec![file.to_path_buf()],
            keep_open,
            threads: 1,
            ..RunOptions::default()
        },
        &mut |a: &AlertOut| alerts.push(a.clone()),
    )
    .unwrap();
    alerts
}

/// An alert line's identity (what `tidemark run`'s `id` hashes) and its estimate's bits.
type Line = (String, String, Option<Vec<u8>>, &'static str, u64, u64, u64);

fn line(a: &AlertOut) -> Line {
    (
        a.metric.clone(),
        a.key.clone(),
        a.alert.item.as_ref().map(|i| i.to_vec()),
        a.alert.phase.name(),
        a.alert.window_start,
        a.alert.window_end,
        a.alert.estimate.value.to_bits(),
    )
}

/// The count metric's lines by an exact model: at each bucket end where some key has a bucket
/// ending (a close), each key's exact count in the window; a streak of closes above 12 fires
/// at its second; the streak ends at a close at or below 12.
fn count_model(events: &[(u64, u32, u32)], through: u64) -> BTreeSet<Line> {
    let mut buckets: BTreeMap<u32, BTreeMap<u64, u64>> = BTreeMap::new();
    let mut starts = BTreeSet::new();
    for &(t, k, _) in events {
        let s = t - t % WIDTH;
        *buckets.entry(k).or_default().entry(s).or_default() += 1;
        starts.insert(s);
    }
    let mut out = BTreeSet::new();
    for (k, b) in &buckets {
        let mut streak = 0;
        for &s in &starts {
            let end = s + WIDTH;
            if end > through {
                break;
            }
            let count: u64 = b
                .range(end.saturating_sub(WINDOW)..end)
                .map(|(_, c)| c)
                .sum();
            if count > 12 {
                streak += 1;
                if streak == 2 {
                    out.insert((
                        "n".to_string(),
                        format!("k{k}"),
                        None,
                        AlertPhase::Closed.name(),
                        end.saturating_sub(WINDOW),
                        end,
                        (count as f64).to_bits(),
                    ));
                }
            } else {
                streak = 0;
            }
        }
    }
    out
}

#[test]
fn the_alert_duty_raises_one_process_lines_at_least_once_through_a_holder_that_dies() {
    if !redis_available("the_alert_duty_raises_one_process_lines_at_least_once") {
        return;
    }
    let dir = TempDir::new("alerts");
    let config = Config::from_toml(CONFIG).unwrap();
    let events = events();

    // One process over every event: the distinct metric's lines, to the bit.
    let mut one = MemStore::default();
    let all = write_csv(&dir.0, "all.csv", &events);
    let one_lines = run(&config, &mut one, &all, false);

    let nodes = start_cluster(&dir);
    let seeds: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let redis = Server::connect(&format!("redis://{}", seeds.join(","))).unwrap();
    // Each key's events over three partitions, by arrival.
    let part = |p: usize| -> Vec<(u64, u32, u32)> {
        events
            .iter()
            .enumerate()
            .filter(|(i, _)| i % 3 == p)
            .map(|(_, e)| *e)
            .collect()
    };
    for p in 0..2 {
        let mut store = PartitionStore::claim(&redis, &format!("flows:{p}")).unwrap();
        let file = write_csv(&dir.0, &format!("p{p}.csv"), &part(p));
        run(&config, &mut store, &file, false);
    }
    let third = part(2);
    let half = third.len() / 2;
    // The third partition's part is committed with no event yet (a worker that has just
    // started it): it holds every close back, as its buckets may come before the others'.
    let mut store = PartitionStore::claim(&redis, "flows:2").unwrap();
    let file = write_csv(&dir.0, "p2.csv", &third[..0]);
    run(&config, &mut store, &file, true);
    let mut early = AlertDuty::new(&redis, &config, "early");
    let r = early.round(&mut |a: &AlertOut| panic!("{a:?}")).unwrap();
    assert!(r.held && r.closes == 0, "{r:?}");
    early.release().unwrap();
    let mut store = PartitionStore::claim(&redis, "flows:2").unwrap();
    let file = write_csv(&dir.0, "p2.csv", &third[..half]);
    run(&config, &mut store, &file, true);

    // The first holder dies at the first line of the second close that raises any: the
    // first close's state is stored, the second's is not.
    let mut handed: Vec<AlertOut> = Vec::new();
    let mut first = AlertDuty::new(&redis, &config, "first").with_lease(Duration::from_millis(400));
    let died = catch_unwind(AssertUnwindSafe(|| {
        first.round(&mut |a: &AlertOut| {
            let end = handed.first().map(|h| h.alert.window_end);
            handed.push(a.clone());
            if end.is_some_and(|e| e != a.alert.window_end) {
                panic!("the holder dies mid-close");
            }
        })
    }));
    assert!(died.is_err(), "the holder died: {} lines", handed.len());
    let dying = handed.last().unwrap().clone();

    // Its lease still runs: a second worker holds off.
    let mut second =
        AlertDuty::new(&redis, &config, "second").with_lease(Duration::from_millis(400));
    let mut lines: Vec<AlertOut> = handed.clone();
    let r = second
        .round(&mut |a: &AlertOut| lines.push(a.clone()))
        .unwrap();
    assert!(!r.held && r.closes == 0 && r.lines == 0, "{r:?}");

    // Once it lapses, the second takes the duty and raises the dying close's lines again.
    std::thread::sleep(Duration::from_millis(600));
    let mut again: Vec<AlertOut> = Vec::new();
    let r = second
        .round(&mut |a: &AlertOut| again.push(a.clone()))
        .unwrap();
    assert!(r.held && r.closes > 0, "{r:?}");
    assert!(
        again.iter().any(|a| line(a) == line(&dying)),
        "the line handed out before the holder died comes again"
    );
    assert!(
        !again.iter().any(|a| line(a) == line(&handed[0])),
        "a close whose state was stored is not raised again"
    );
    lines.extend(again);

    // The partition's second half; the second worker ends, evaluating what is left.
    let rest = write_csv(&dir.0, "p2.csv", &third);
    let mut next = PartitionStore::claim(&redis, "flows:2").unwrap();
    run(&config, &mut next, &rest, false);
    let r = second
        .finish(
            &mut |a: &AlertOut| lines.push(a.clone()),
            Duration::from_secs(5),
        )
        .unwrap();
    assert!(r.held && r.closes > 0, "{r:?}");

    // Every line of the closes every part has closed, once or more; nothing else.
    let closed = MergedStore::open(&redis)
        .unwrap()
        .closed_until()
        .unwrap()
        .unwrap();
    let got: BTreeSet<Line> = lines.iter().map(line).collect();
    let mut want: BTreeSet<Line> = one_lines
        .iter()
        .filter(|a| a.metric == "d" && a.alert.window_end <= closed[1])
        .map(line)
        .collect();
    let distinct = want.len();
    let counted = count_model(&events, closed[0]);
    let counts = counted.len();
    want.extend(counted);
    assert!(
        distinct >= 5 && counts >= 5,
        "{distinct} distinct lines, {counts} count lines"
    );
    assert!(
        lines.len() > got.len(),
        "a line came twice (the dying close's): {} lines, {} distinct",
        lines.len(),
        got.len()
    );
    let missing: Vec<_> = want.difference(&got).take(5).collect();
    let extra: Vec<_> = got.difference(&want).take(5).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?} ({} wanted)",
        want.len()
    );
}
