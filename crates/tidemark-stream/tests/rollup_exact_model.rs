//! Rollups against an exact model: every complete period's rollup bucket holds exactly what
//! its buckets held (counts add, distinct sets unite), late events merged after the period
//! was rolled up reach the rollup too, the incomplete last period is not rolled, and a query
//! through the rollup equals the same window through the buckets.

use std::collections::{BTreeMap, HashSet};

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark_stream::pipeline::{self, RunOptions, RunReport};
use tidemark_stream::query;
use tidemark_stream::store::MemStore;

const CONFIG: &str = r#"
[input]
time_field = "ts"
[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "1m"
window = "5m"
rollup = "10m"
allowed_lateness = "30s"
late = "merge"
[[metric]]
name = "d"
kind = "distinct"
key = ["k"]
item = ["i"]
bucket = "1m"
window = "5m"
precision = 12
rollup = "10m"
allowed_lateness = "30s"
late = "merge"
"#;

const PERIOD: u64 = 600_000;

/// (arrival-ordered) events: time s, key, item.
fn events() -> Vec<(u64, u8, u32)> {
    let mut rng = Pcg64::seed_from_u64(5);
    let mut ev: Vec<(u64, u64, u8, u32)> = Vec::new();
    for t in 0..65 * 60u64 {
        for _ in 0..rng.random_range(0..3) {
            let late = match rng.random_range(0..100) {
                0 => 300, // past the lateness, often after its period rolled up
                1..=3 => 20,
                _ => 0,
            };
            ev.push((t + late, t, rng.random_range(0..4), rng.random_range(0..40)));
        }
    }
    ev.sort_by_key(|e| e.0);
    ev.into_iter().map(|(_, t, k, i)| (t, k, i)).collect()
}

fn run(config: &str, ev: &[(u64, u8, u32)]) -> (MemStore, RunReport) {
    // One directory a run: the tests run at once.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tidemark-rollup-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("in.csv");
    let mut csv = String::from("ts,k,i\n");
    for (t, k, i) in ev {
        csv.push_str(&format!("{t},k{k},{i}\n"));
    }
    std::fs::write(&file, csv).unwrap();
    let mut store = MemStore::default();
    let report = pipeline::run(
        &tidemark_stream::config::Config::from_toml(config).unwrap(),
        &mut store,
        RunOptions {
            inputs: vec![file],
            ..RunOptions::default()
        },
        &mut |_| {},
    )
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (store, report)
}

#[test]
fn rollups_hold_their_periods_exactly() {
    check(CONFIG, true);
}

/// The shortest retention a rollup takes: its period. Each period's buckets are still stored
/// when it ends and is rolled up (a shorter retention deleted them first, and is refused).
#[test]
fn rollups_hold_their_periods_exactly_with_a_retention_of_one_period() {
    let config = CONFIG.replace("rollup = \"10m\"", "rollup = \"10m\"\nretention = \"10m\"");
    assert_eq!(config.matches("retention").count(), 2);
    check(&config, false);
    let shorter = CONFIG.replace("rollup = \"10m\"", "rollup = \"10m\"\nretention = \"9m\"");
    let e = tidemark_stream::config::Config::from_toml(&shorter).unwrap_err();
    assert!(e.to_string().contains("`metric[0].retention`"), "{e}");
    // A rollup longer than the default retention (a day) keeps its period by default.
    let long = CONFIG.replace("rollup = \"10m\"", "rollup = \"2d\"");
    let c = tidemark_stream::config::Config::from_toml(&long).unwrap();
    assert_eq!(c.metrics[0].retention, 2 * 86_400_000);
}

/// Checks the rollups of a run of `config` against the model; `retained`: the buckets are
/// kept past the windows compared (the default day's retention).
fn check(config: &str, retained: bool) {
    let ev = events();
    let (store, report) = run(config, &ev);
    assert!(report.merged > 0, "the stream has too-late events");
    // Model: with `merge`, every event ends in its own period.
    let mut counts: BTreeMap<(String, u64), u64> = BTreeMap::new();
    let mut sets: BTreeMap<(String, u64), HashSet<u32>> = BTreeMap::new();
    for &(t, k, i) in &ev {
        let p = t * 1000 / PERIOD * PERIOD;
        *counts.entry((format!("k{k}"), p)).or_default() += 1;
        sets.entry((format!("k{k}"), p)).or_default().insert(i);
    }
    let last = ev.iter().map(|e| e.0).max().unwrap() * 1000;
    let complete = last / PERIOD * PERIOD; // periods before this are complete
    let mut checked = 0;
    for ((key, p), n) in &counts {
        let at = Some(p + PERIOD);
        let c = query::window(&store, "n@10m", PERIOD, at, Some(key.as_bytes()), None).unwrap();
        let d = query::window(&store, "d@10m", PERIOD, at, Some(key.as_bytes()), None).unwrap();
        if *p < complete {
            assert_eq!(c.rows[0].estimate.value, *n as f64, "{key} count at {p}");
            assert_eq!(c.rows[0].buckets, 1);
            let want = sets[&(key.clone(), *p)].len() as f64;
            assert_eq!(d.rows[0].estimate.value, want, "{key} distinct at {p}");
            checked += 1;
        } else {
            // The last period is incomplete: not rolled up.
            assert_eq!(c.rows[0].buckets, 0, "{key} at {p} rolled up early");
        }
    }
    assert!(checked >= 6 * 4, "{checked}");
    // A window through the rollup equals the same window through the buckets.
    for end in [PERIOD * 3, PERIOD * 6].into_iter().filter(|_| retained) {
        let a = query::window(&store, "n@10m", 3 * PERIOD, Some(end), None, None).unwrap();
        let b = query::window(&store, "n", 3 * PERIOD, Some(end), None, None).unwrap();
        let av: Vec<(String, f64)> = a
            .rows
            .iter()
            .map(|r| (r.key.clone(), r.estimate.value))
            .collect();
        let bv: Vec<(String, f64)> = b
            .rows
            .iter()
            .map(|r| (r.key.clone(), r.estimate.value))
            .collect();
        assert_eq!(av, bv);
    }
    // Rollup names are metrics for queries; a window not a multiple of the rollup is refused.
    assert!(query::window(&store, "n@10m", 60_000, None, None, None).is_err());
}
