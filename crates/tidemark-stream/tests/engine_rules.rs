//! The engine's rules, each against an exact model: watermark and lateness, late policies,
//! alert streaks, retention, and snapshot/restore resuming exactly where it stopped.

mod common;

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::{Estimate, ItemHasher};
use tidemark_stream::config::Config;
use tidemark_stream::engine::Summary;
use tidemark_stream::engine::{Engine, NoRows, Outputs, StateTable};
use tidemark_stream::pipeline::RunState;
use tidemark_stream::state_rows::StoreRows;
use tidemark_stream::store::{MemStore, Store};
use tidemark_stream::stored::{self, Stored};

fn count_config(late: &str, alert: &str) -> Config {
    Config::from_toml(&format!(
        r#"
[input]
time_field = "ts"
[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "10s"
window = "30s"
retention = "1m"
allowed_lateness = "15s"
late = "{late}"
{alert}
"#
    ))
    .unwrap()
}

/// A count bucket's events, from its stored form (a count, never an envelope).
fn stored_count(bytes: &[u8]) -> u64 {
    match stored::read(bytes).unwrap() {
        Stored::Count(n) => n,
        _ => panic!("a count bucket is stored as its count"),
    }
}

fn counts(out: &Outputs) -> BTreeMap<(Vec<u8>, u64), u64> {
    out.closed
        .iter()
        .map(|b| ((b.key.to_vec(), b.start), stored_count(&b.bytes)))
        .collect()
}

fn feed(e: &mut Engine, events: &[(u64, &str)]) {
    for &(t, k) in events {
        e.observe(t);
        e.add(0, t, k.as_bytes(), 0);
    }
}

#[test]
fn late_events_within_the_lateness_land_in_their_own_bucket() {
    let mut e = Engine::new(&count_config("drop", "")).unwrap();
    // Buckets of 10 s, lateness 15 s. The event at 5 s arrives after 18 s: the watermark is
    // 3 s, bucket [0, 10) is open, so it lands there, not in [10, 20).
    feed(
        &mut e,
        &[(1_000, "a"), (12_000, "a"), (18_000, "a"), (5_000, "a")],
    );
    assert_eq!(e.counters(0).late, 1);
    assert!(!e.needs_commit());
    // 26 s: watermark 11 s closes [0, 10) holding 1 s and the late 5 s.
    feed(&mut e, &[(26_000, "a")]);
    let out = e.take_outputs();
    assert_eq!(counts(&out), BTreeMap::from([((b"a".to_vec(), 0), 2)]));
    // 9 s is now too late: dropped and counted, not added to any open bucket.
    feed(&mut e, &[(9_000, "a")]);
    assert_eq!(e.counters(0).dropped, 1);
    e.flush();
    let out = e.take_outputs();
    assert_eq!(
        counts(&out),
        BTreeMap::from([((b"a".to_vec(), 10_000), 2), ((b"a".to_vec(), 20_000), 1)])
    );
    assert!(out.late_merges.is_empty());
}

#[test]
fn too_late_events_under_merge_go_to_their_stored_bucket_only() {
    let mut e = Engine::new(&count_config("merge", "")).unwrap();
    feed(&mut e, &[(1_000, "a"), (40_000, "a")]);
    let first = e.take_outputs();
    assert_eq!(counts(&first).len(), 1);
    feed(&mut e, &[(2_000, "a"), (3_000, "b")]);
    assert_eq!(e.counters(0).merged, 2);
    let out = e.take_outputs();
    assert!(
        out.closed.is_empty(),
        "nothing closes, nothing joins an open bucket"
    );
    let merges: Vec<(Vec<u8>, u64, u64)> = out
        .late_merges
        .iter()
        .map(|b| (b.key.to_vec(), b.start, stored_count(&b.bytes)))
        .collect();
    assert_eq!(
        merges,
        [(b"a".to_vec(), 0, 1), (b"b".to_vec(), 0, 1)],
        "each late event is handed out for its own bucket"
    );
    e.flush();
    // The open bucket [40, 50) holds only the 40 s event.
    assert_eq!(
        counts(&e.take_outputs()),
        BTreeMap::from([((b"a".to_vec(), 40_000), 1)])
    );
}

#[test]
fn alerts_need_consecutive_closes_and_fire_once_per_episode() {
    let rule = "[[metric.alert]]\nabove = 4\nconsecutive = 2\non = \"high\"";
    let mut e = Engine::new(&count_config("drop", rule)).unwrap();
    let mut alerts = Vec::new();
    // Per 10 s bucket, events of key "a": 5, 0, 0, 0, 6, 6, 6, 0, 0, 0. The 30 s window is
    // above 4 at closes 0–2 (5 in it), 4–8; streaks of 2 fire at closes 1 and 5.
    let per_bucket = [5u64, 0, 0, 0, 6, 6, 6, 0, 0, 0];
    let mut exact_window: Vec<u64> = Vec::new();
    for (b, &n) in per_bucket.iter().enumerate() {
        let t0 = b as u64 * 10_000;
        for i in 0..n {
            e.observe(t0 + i);
            e.add(0, t0 + i, b"a", 0);
        }
        // Another key keeps time moving even in empty buckets.
        e.observe(t0 + 9_000);
        e.add(0, t0 + 9_000, b"clock", 0);
        exact_window.push(n);
        alerts.extend(e.take_outputs().alerts);
    }
    e.flush();
    alerts.extend(e.take_outputs().alerts);
    let fired: Vec<u64> = alerts
        .iter()
        .filter(|a| &*a.key == b"a")
        .map(|a| a.bucket / 10_000)
        .collect();
    // Exact model: window of 3 buckets ending at bucket b, streak counting.
    let mut streak = 0;
    let mut expect = Vec::new();
    for b in 0..per_bucket.len() {
        let w: u64 = per_bucket[b.saturating_sub(2)..=b].iter().sum();
        if w > 4 {
            streak += 1;
            if streak == 2 {
                expect.push(b as u64);
            }
        } else {
            streak = 0;
        }
    }
    assert_eq!(fired, expect);
    assert_eq!(expect, [1, 5]);
    for a in &alerts {
        assert!(a.estimate.high > 4.0);
    }
}

#[test]
fn retention_deletes_buckets_older_than_it() {
    let mut csv = String::from("ts,k\n");
    for t in 0..600u64 {
        csv.push_str(&format!("{t},x\n"));
    }
    let text = r#"
[input]
time_field = "ts"
[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "10s"
window = "30s"
retention = "1m"
"#;
    let mut store = common::run_text(text, &csv, "engine-retention");
    // The metric's buckets (the store also keeps the keys' state rows, `~` tables).
    store.buckets.retain(|(n, _, _), _| n == "n");
    let starts: Vec<u64> = store.buckets.keys().map(|(_, s, _)| *s).collect();
    // The last close is of [590, 600): buckets starting before 600 − 60 = 540 s are gone.
    assert_eq!(
        starts,
        [540_000, 550_000, 560_000, 570_000, 580_000, 590_000]
    );
    for b in store.buckets.values() {
        assert!(!b.is_empty());
    }
}

const DISTINCT: &str = r#"
[input]
time_field = "ts"
[[metric]]
name = "d"
kind = "distinct"
key = ["k"]
item = ["i"]
bucket = "10s"
window = "40s"
precision = 8
allowed_lateness = "12s"
late = "merge"
[[metric.alert]]
above = 20
margin = 1
consecutive = 2
[[metric.alert]]
above = 16
consecutive = 2
early = true
[[metric]]
name = "c"
kind = "count"
key = ["k"]
bucket = "5s"
window = "20s"
rollup = "1m"
allowed_lateness = "3s"
late = "drop"
[[metric.alert]]
above = 12
on = "high"
[[metric.alert]]
above = 10
early = true
[[metric]]
name = "f"
kind = "frequency"
key = ["k"]
item = ["i"]
bucket = "10s"
window = "30s"
epsilon = 0.1
delta = 0.1
phi = 0.15
allowed_lateness = "5s"
late = "merge"
[[metric.alert]]
above = 6
on = "high"
"#;

/// Metric `f`'s item for an event: key 0 spreads over many items (its buckets pass the exact
/// table's 10 items and become sketches), the other keys repeat their own.
fn frequency_item(k: u8, item: u64) -> Vec<u8> {
    if k == 0 {
        format!("wide{item}").into_bytes()
    } else {
        format!("item{}", item % 4).into_bytes()
    }
}

/// Drives the engine like the runner does, applying outputs to a store model; at the chosen
/// points, snapshots and restores (the store keeps the closed buckets).
fn drive(events: &[(u64, u8, u64)], cuts: &[usize]) -> (MemStore, Vec<String>, Vec<String>) {
    drive_spilling(events, cuts, &[])
}

/// [`drive`], and at the events of `spills`, a checkpoint after which every quiet key leaves
/// memory (a budget of 0 bytes).
fn drive_spilling(
    events: &[(u64, u8, u64)],
    cuts: &[usize],
    spills: &[usize],
) -> (MemStore, Vec<String>, Vec<String>) {
    drive_with(events, cuts, spills, None)
}

/// [`drive_spilling`], with the adds deferred (as the runner makes them) when `drains` is
/// given: a batch is added when full, before a time that closes a bucket, before outputs
/// are taken, and at the events of `drains`.
fn drive_with(
    events: &[(u64, u8, u64)],
    cuts: &[usize],
    spills: &[usize],
    drains: Option<&[usize]>,
) -> (MemStore, Vec<String>, Vec<String>) {
    let config = Config::from_toml(DISTINCT).unwrap();
    let mut e = Engine::new(&config).unwrap();
    let mut store = MemStore::default();
    let mut alerts = Vec::new();
    let names = ["d", "c", "f"];
    let apply = |e: &mut Engine, store: &mut MemStore, alerts: &mut Vec<String>| {
        let out = e.take_outputs();
        for a in &out.alerts {
            alerts.push(format!(
                "{}:{:?}:{}:{}:{:?}:{:?}:{}",
                a.metric, a.key, a.bucket, a.estimate.value, a.item, a.phase, a.at
            ));
        }
        // Open rows of keys spilled or restored when their bucket closed move into the
        // metric first; the closed buckets of keys in memory overwrite them.
        for &(m, start) in &out.promote {
            let from = StateTable::Open.name(names[m]);
            let moved: Vec<_> = store
                .buckets
                .iter()
                .filter(|((n, s, _), _)| *n == from && *s == start)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for ((_, s, k), v) in moved {
                store.buckets.remove(&(from.clone(), s, k.clone()));
                store.buckets.insert((names[m].into(), s, k), v);
            }
        }
        for (m, before) in out.open_before.iter().enumerate() {
            if let Some(before) = before {
                let t = StateTable::Open.name(names[m]);
                store
                    .buckets
                    .retain(|(n, s, _), _| !(*n == t && s < before));
            }
        }
        for r in &out.state {
            let k = (r.table.name(names[r.metric]), r.start, r.key.to_vec());
            match &r.bytes {
                Some(v) => store.buckets.insert(k, v.clone()),
                None => store.buckets.remove(&k),
            };
        }
        for b in &out.closed {
            store.buckets.insert(
                (names[b.metric].into(), b.start, b.key.to_vec()),
                b.bytes.clone(),
            );
        }
        for r in &out.rollups {
            // Rollups are checked against their model in rollup_exact_model.rs; here only
            // that an interrupted engine asks for the same ones.
            alerts.push(format!("rollup {} {}..{}", r.metric, r.from, r.to));
        }
        for b in &out.late_merges {
            if b.rollup {
                alerts.push(format!("late rollup {} {:?} {}", b.metric, b.key, b.start));
                continue;
            }
            let k = (names[b.metric].to_string(), b.start, b.key.to_vec());
            let shape = e.shape(b.metric);
            let add = shape.decode(&b.bytes, b.start).unwrap();
            let merged = match store.buckets.get(&k) {
                Some(old) => {
                    let mut s = shape.decode(old, b.start).unwrap();
                    s.merge(&add).unwrap();
                    s.to_stored()
                }
                None => b.bytes.clone(),
            };
            store.buckets.insert(k, merged);
        }
        for (m, before) in out.expire_before.iter().enumerate() {
            if let Some(before) = before {
                store
                    .buckets
                    .retain(|(n, s, _), _| !(n == names[m] && s < before));
            }
        }
    };
    let drain = |e: &mut Engine, store: &MemStore| {
        let view = store.view().unwrap();
        e.drain(&mut StoreRows::new(&*view, &config)).unwrap();
    };
    for (i, &(t, k, item)) in events.iter().enumerate() {
        if drains.is_some_and(|d| d.contains(&i)) || cuts.contains(&i) || spills.contains(&i) {
            drain(&mut e, &store);
        }
        if cuts.contains(&i) {
            apply(&mut e, &mut store, &mut alerts);
            let snap = e.snapshot();
            let st = store.clone();
            let view = st.view().unwrap();
            e = Engine::restore(&config, &snap, &mut StoreRows::new(&*view, &config)).unwrap();
        }
        if spills.contains(&i) {
            apply(&mut e, &mut store, &mut alerts);
            e.spill(0).unwrap();
        }
        let key = [b'k', k];
        // A restored engine reads its keys back from the store's state rows.
        let view = store.view().unwrap();
        let mut rows = StoreRows::new(&*view, &config);
        let named = frequency_item(k, item);
        let h = ItemHasher::default().hash(&named);
        if drains.is_some() {
            e.observe_from(t, &mut rows).unwrap();
            let mut full = e.defer(0, t, &key, item, &[]);
            full |= e.defer(1, t, &key, 0, &[]);
            full |= e.defer(2, t, &key, h, &named);
            if full {
                e.drain(&mut rows).unwrap();
            }
            drop(view);
        } else {
            e.observe(t);
            e.add_item_from(0, t, &key, item, &[], &mut rows).unwrap();
            e.add_item_from(1, t, &key, 0, &[], &mut rows).unwrap();
            e.add_item_from(2, t, &key, h, &named, &mut rows).unwrap();
            drop(view);
            if e.needs_commit() {
                apply(&mut e, &mut store, &mut alerts);
            }
        }
    }
    drain(&mut e, &store);
    e.flush();
    apply(&mut e, &mut store, &mut alerts);
    // What the engine counted; the state rows differ with where it checkpointed.
    let counted = (0..3)
        .map(|m| format!("{:?} until {:?}", e.counters(m), e.closed_until(m)))
        .collect();
    store.buckets.retain(|(n, _, _), _| !n.starts_with('~'));
    (store, alerts, counted)
}

fn events(seed: u64, n: usize) -> Vec<(u64, u8, u64)> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut t = 0u64;
    (0..n)
        .map(|_| {
            t += rng.random_range(0..400);
            // Some events arrive up to 20 s late: within and past each lateness.
            let late = if rng.random_bool(0.1) {
                rng.random_range(0..20_000)
            } else {
                0
            };
            let k = rng.random_range(0..6u8);
            // Key 0 has a wide item range, so its windows cross the alert threshold.
            let item = if k == 0 {
                rng.random_range(0..10_000)
            } else {
                rng.random_range(0..20)
            };
            (t.saturating_sub(late), k, item)
        })
        .collect()
}

#[test]
fn snapshot_and_restore_resume_exactly() {
    for seed in 0..6 {
        let ev = events(seed, 3_000);
        let (store, alerts, snap) = drive(&ev, &[]);
        assert!(!alerts.is_empty(), "seed {seed}: the stream raises alerts");
        for m in 0..3 {
            assert!(
                alerts.iter().any(|a| a.starts_with(&format!("{m}:"))),
                "seed {seed}: metric {m} raises alerts"
            );
        }
        for m in 0..2 {
            assert!(
                alerts
                    .iter()
                    .any(|a| a.starts_with(&format!("{m}:")) && a.contains(":Early:")),
                "seed {seed}: metric {m} raises early alerts"
            );
        }
        let cuts: Vec<usize> = (0..8).map(|i| 1 + i * 371 + seed as usize * 13).collect();
        let (store2, alerts2, snap2) = drive(&ev, &cuts);
        assert_eq!(store2, store, "seed {seed}: stores differ");
        assert_eq!(alerts2, alerts, "seed {seed}: alerts differ");
        assert_eq!(snap2, snap, "seed {seed}: final counters differ");
    }
}

#[test]
fn spilled_keys_answer_as_if_held() {
    // Every 50th event, a checkpoint and a spill of every quiet key: keys leave memory with
    // open buckets (closed later by the store's promotion), come back on their next event
    // (rings rebuilt from the store, histograms given what closed meanwhile), late merges
    // land on keys read back. Stores, alerts and counters equal a run that held everything.
    let mut spilled_some = false;
    for seed in 0..6 {
        let ev = events(seed, 3_000);
        let (store, alerts, counted) = drive(&ev, &[]);
        let spills: Vec<usize> = (1..60).map(|i| i * 50 + seed as usize).collect();
        let (store2, alerts2, counted2) = drive_spilling(&ev, &[], &spills);
        assert_eq!(store2, store, "seed {seed}: stores differ");
        assert_eq!(alerts2, alerts, "seed {seed}: alerts differ");
        assert_eq!(counted2, counted, "seed {seed}: counters differ");
        // And spilling with restores in between.
        let cuts: Vec<usize> = (0..5).map(|i| 7 + i * 577 + seed as usize).collect();
        let (store3, alerts3, counted3) = drive_spilling(&ev, &cuts, &spills);
        assert_eq!(store3, store, "seed {seed}: stores differ (restored)");
        assert_eq!(alerts3, alerts, "seed {seed}: alerts differ (restored)");
        assert_eq!(counted3, counted, "seed {seed}: counters differ (restored)");
        spilled_some = true;
    }
    assert!(spilled_some);
}

/// Alerts in the order raised, then the rollups asked for, in order. The model records a
/// rollup line when it applies outputs, and a deferring run applies them at other points,
/// so where rollup lines fall among the alerts differs; the order of each does not.
fn rollups_last(lines: Vec<String>) -> Vec<String> {
    let (rollups, alerts): (Vec<_>, Vec<_>) =
        lines.into_iter().partition(|l| l.starts_with("rollup"));
    alerts.into_iter().chain(rollups).collect()
}

#[test]
fn deferred_adds_change_nothing() {
    // The runner defers its adds and makes them in batches (engine::batch): the same
    // stores, alerts and counters as adding each event at once — with keys new within a
    // batch, keys read back after a spill, late events, restores — wherever a batch ends.
    for seed in 0..6 {
        let ev = events(seed, 3_000);
        let (store, alerts, counted) = drive(&ev, &[]);
        let alerts = rollups_last(alerts);
        let drains: Vec<usize> = (1..200).map(|i| i * 13 + i * i % 7).collect();
        for (d, at) in [
            ("full batches only", &[][..]),
            ("drained often", &drains[..]),
        ] {
            let (store2, alerts2, counted2) = drive_with(&ev, &[], &[], Some(at));
            assert_eq!(store2, store, "seed {seed}, {d}: stores differ");
            assert_eq!(
                rollups_last(alerts2),
                alerts,
                "seed {seed}, {d}: alerts differ"
            );
            assert_eq!(counted2, counted, "seed {seed}, {d}: counters differ");
        }
        let spills: Vec<usize> = (1..60).map(|i| i * 50 + seed as usize).collect();
        let cuts: Vec<usize> = (0..5).map(|i| 7 + i * 577 + seed as usize).collect();
        let (store3, alerts3, counted3) = drive_with(&ev, &cuts, &spills, Some(&drains));
        assert_eq!(
            store3, store,
            "seed {seed}: stores differ (spilled, restored)"
        );
        assert_eq!(
            rollups_last(alerts3),
            alerts,
            "seed {seed}: alerts differ (spilled, restored)"
        );
        assert_eq!(
            counted3, counted,
            "seed {seed}: counters differ (spilled, restored)"
        );
    }
}

#[test]
fn distinct_windows_of_small_keys_are_exact() {
    // Keys 1..5 have at most 20 items: every stored bucket answers exactly.
    let ev = events(42, 3_000);
    let (store, _, _) = drive(&ev, &[]);
    let config = Config::from_toml(DISTINCT).unwrap();
    let e = Engine::new(&config).unwrap();
    let mut exact: HashMap<(Vec<u8>, u64), std::collections::HashSet<u64>> = HashMap::new();
    // Model: with `merge`, every event ends in its own bucket, late or not.
    for &(t, k, item) in &ev {
        exact
            .entry((vec![b'k', k], t / 10_000 * 10_000))
            .or_default()
            .insert(item);
    }
    let mut checked = 0;
    for ((name, start, key), bytes) in &store.buckets {
        if name != "d" || key[1] == 0 {
            continue;
        }
        let s = e.shape(0).decode(bytes, *start).unwrap();
        assert_eq!(
            s.estimate().value,
            exact[&(key.clone(), *start)].len() as f64
        );
        checked += 1;
    }
    assert!(checked > 50);
}

#[test]
fn frequency_buckets_hold_their_items_under_merge() {
    // With `merge`, every event ends in its own bucket, late or not: the stored item counts
    // of each (key, bucket) against an exact model. Exact tables are exact; sketches never
    // under-count and name every item reaching φ = 0.1 of the bucket.
    let ev = events(5, 4_000);
    let (store, alerts, _) = drive(&ev, &[]);
    let config = Config::from_toml(DISTINCT).unwrap();
    let e = Engine::new(&config).unwrap();
    let mut exact: HashMap<(Vec<u8>, u64), HashMap<Vec<u8>, u64>> = HashMap::new();
    for &(t, k, item) in &ev {
        *exact
            .entry((vec![b'k', k], t / 10_000 * 10_000))
            .or_default()
            .entry(frequency_item(k, item))
            .or_default() += 1;
    }
    let (mut exact_buckets, mut sketched) = (0, 0);
    let mut stored = 0;
    for ((name, start, key), bytes) in &store.buckets {
        if name != "f" {
            continue;
        }
        stored += 1;
        let truth = &exact[&(key.clone(), *start)];
        let total: u64 = truth.values().sum();
        let Summary::Frequency(f) = e.shape(2).decode(bytes, *start).unwrap() else {
            panic!("a frequency bucket");
        };
        assert_eq!(f.counts().total(), total);
        let heavy: HashMap<Vec<u8>, Estimate> = f.counts().heavy_hitters().into_iter().collect();
        for (item, &n) in truth {
            let p = f.counts().point(item);
            assert!(p.high >= n as f64);
            if f.counts().is_exact() {
                assert_eq!(p, Estimate::exact(n as f64));
            }
            if n as f64 >= 0.15 * total as f64 {
                assert!(heavy.contains_key(item), "{item:?} of {key:?} at {start}");
            }
        }
        if f.counts().is_exact() {
            exact_buckets += 1;
        } else {
            sketched += 1;
        }
    }
    assert_eq!(stored, exact.len(), "one stored bucket per key and bucket");
    assert!(
        exact_buckets > 50 && sketched > 20,
        "{exact_buckets} exact, {sketched} sketched"
    );
    // Alerts of `f` name their item: above 6 in 30 s only repeated items of keys 1..5 can be.
    let f_alerts: Vec<&String> = alerts.iter().filter(|a| a.starts_with("2:")).collect();
    assert!(!f_alerts.is_empty());
    for a in f_alerts {
        assert!(a.contains("Some("), "{a}");
    }
}

#[test]
fn frequency_alerts_name_each_item_and_bound_the_unnamed_ones() {
    let config = |on: &str| {
        Config::from_toml(&format!(
            r#"
[input]
time_field = "ts"
[[metric]]
name = "f"
kind = "frequency"
key = ["k"]
item = ["i"]
bucket = "10s"
window = "10s"
epsilon = 0.1
delta = 0.1
phi = 0.2
[[metric.alert]]
above = 50
on = "{on}"
"#
        ))
        .unwrap()
    };
    let h = |b: &[u8]| ItemHasher::default().hash(b);
    for on in ["high", "low"] {
        let mut e = Engine::new(&config(on)).unwrap();
        // Key "a": 400 distinct items once each (a sketch naming none: φN = 80 bounds them);
        // key "b": two items 60 times each (exact, both above 50).
        for i in 0..400u32 {
            let item = format!("x{i}");
            e.observe(1_000);
            e.add_item(0, 1_000, b"a", h(item.as_bytes()), item.as_bytes());
        }
        for _ in 0..60 {
            for item in [&b"p"[..], b"q"] {
                e.add_item(0, 2_000, b"b", h(item), item);
            }
        }
        e.observe(20_000);
        let alerts: Vec<(Vec<u8>, Option<Vec<u8>>)> = e
            .take_outputs()
            .alerts
            .into_iter()
            .map(|a| (a.key.to_vec(), a.item.map(|i| i.to_vec())))
            .collect();
        let mut expected = vec![
            (b"b".to_vec(), Some(b"p".to_vec())),
            (b"b".to_vec(), Some(b"q".to_vec())),
        ];
        if on == "high" {
            // No item named, but one of them may be above: said, without a name.
            expected.insert(0, (b"a".to_vec(), None));
        }
        assert_eq!(alerts, expected, "on = {on}");
    }
}

proptest! {
    #[test]
    fn state_decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = RunState::from_bytes(&bytes);
        let config = Config::from_toml(DISTINCT).unwrap();
        let _ = Engine::restore(&config, &bytes, &mut NoRows);
    }

    #[test]
    fn mutated_snapshots_never_panic(pos in 0usize..10_000, val in any::<u8>(), cut in 0usize..10_000) {
        let ev = events(1, 200);
        let config = Config::from_toml(DISTINCT).unwrap();
        let mut e = Engine::new(&config).unwrap();
        for &(t, k, item) in &ev {
            e.observe(t);
            e.add(0, t, &[b'k', k], item);
            e.add(1, t, &[b'k', k], 0);
            let named = frequency_item(k, item);
            e.add_item(2, t, &[b'k', k], ItemHasher::default().hash(&named), &named);
        }
        let mut snap = e.snapshot();
        let n = snap.len();
        snap[pos % n] = val;
        let _ = Engine::restore(&config, &snap, &mut NoRows);
        let _ = Engine::restore(&config, &snap[..cut % n], &mut NoRows);
    }
}
