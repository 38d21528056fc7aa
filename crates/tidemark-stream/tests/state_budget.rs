//! A run under a tiny state budget — keys spilled to the store at checkpoints and read back on
//! their next event — leaves the same buckets and raises the same alerts as a run that held
//! every key in memory; and a budget that keys which cannot spill pass stops the run with a
//! clear error instead of growing.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark_stream::config::{Config, SketchKind};
use tidemark_stream::pipeline::{self, AlertOut, RunOptions, RunReport};
use tidemark_stream::store::MemStore;
use tidemark_stream::RunError;

/// Count, distinct (HyperLogLog, and ExaLogLog at p = 4, whose busy keys' buckets go dense and
/// are stored coded) and frequency metrics with alerts and late merges (a rollup too).
fn config(state: &str) -> Config {
    Config::from_toml(&format!(
        r#"
[input]
time_field = "ts"
time_format = "epoch_ms"
{state}
[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "10s"
window = "30s"
retention = "1h"
allowed_lateness = "5s"
late = "merge"
rollup = "1m"
[[metric.alert]]
above = 12

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
late = "merge"
[[metric.alert]]
above = 20
margin = 0

[[metric]]
name = "e"
kind = "distinct"
sketch = "exaloglog"
key = ["k"]
item = ["i"]
precision = 4
bucket = "10s"
window = "30s"
retention = "1h"
allowed_lateness = "5s"
late = "merge"
[[metric.alert]]
above = 20
margin = 0

[[metric]]
name = "f"
kind = "frequency"
key = ["k"]
item = ["i"]
bucket = "10s"
window = "20s"
retention = "1h"
late = "merge"
[[metric.alert]]
above = 6
"#
    ))
    .unwrap()
}

/// Events of 2,000 keys over ten minutes: most keys small and quiet (they spill), a few
/// busy enough to alert (they stay); one event in ten up to 20 s late.
fn log(seed: u64) -> String {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut out = String::from("ts,k,i\n");
    let mut t = 0u64;
    for _ in 0..40_000 {
        t += rng.random_range(0..30);
        let late = if rng.random_bool(0.1) {
            rng.random_range(0..20_000)
        } else {
            0
        };
        let (k, i) = if rng.random_bool(0.05) {
            (rng.random_range(0..4u32), rng.random_range(0..100u32))
        } else {
            (rng.random_range(4..2_000u32), rng.random_range(0..3u32))
        };
        out.push_str(&format!("{},k{k},i{i}\n", t.saturating_sub(late)));
    }
    out
}

fn run(
    config: &Config,
    store: &mut MemStore,
    text: &str,
) -> Result<(RunReport, Vec<String>), RunError> {
    let dir = std::env::temp_dir().join(format!(
        "tidemark-budget-{}-{}",
        std::process::id(),
        xxhash_rust::xxh3::xxh3_64(config.text().as_bytes())
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("in.csv");
    std::fs::write(&file, text).unwrap();
    let mut alerts = Vec::new();
    let r = pipeline::run(
        config,
        store,
        RunOptions {
            inputs: vec![file],
            ..RunOptions::default()
        },
        &mut |a: &AlertOut| {
            alerts.push(format!(
                "{} {} {} {:?} {}",
                a.metric, a.key, a.alert.bucket, a.alert.item, a.alert.estimate
            ))
        },
    );
    std::fs::remove_dir_all(&dir).unwrap();
    r.map(|r| (r, alerts))
}

/// One stored entry: `((table, start, key), bytes)`.
type Entry = ((String, u64, Vec<u8>), Vec<u8>);

/// The store's buckets and digests: everything but the keys' state rows (`~` tables), which
/// differ with where the runs checkpointed.
fn buckets(store: &MemStore) -> Vec<Entry> {
    store
        .buckets
        .iter()
        .filter(|((t, _, _), _)| !t.starts_with('~'))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

type Rows = [Entry];

/// Equal stores, or the first entries that differ (stores are too large to print whole).
fn assert_same(got: &Rows, want: &Rows, seed: u64) {
    let g: std::collections::BTreeMap<_, _> = got.iter().cloned().collect();
    let w: std::collections::BTreeMap<_, _> = want.iter().cloned().collect();
    let mut diff = Vec::new();
    for (k, v) in &w {
        match g.get(k) {
            None => diff.push(format!("missing {k:?}")),
            Some(x) if x != v => {
                let show = |b: &[u8]| {
                    use tidemark_stream::kinds::{BucketSummary, DistinctBucket};
                    DistinctBucket::from_bytes(b, SketchKind::HyperLogLog, 8)
                        .map(|d| format!("exact {} {}", d.is_exact(), d.estimate()))
                        .unwrap_or_default()
                };
                diff.push(format!("differs {k:?}: {} vs {}", show(x), show(v)))
            }
            _ => {}
        }
    }
    for k in g.keys().filter(|k| !w.contains_key(*k)) {
        diff.push(format!("extra {k:?}"));
    }
    assert!(
        diff.is_empty(),
        "seed {seed}: {} entries differ, first: {:?}",
        diff.len(),
        &diff[..diff.len().min(8)]
    );
}

#[test]
fn a_tiny_budget_spills_and_answers_as_an_unbounded_run() {
    for seed in 0..3 {
        let text = log(seed);
        let mut held = MemStore::default();
        let (r1, a1) = run(&config(""), &mut held, &text).unwrap();
        assert_eq!(r1.spills, 0);
        assert!(!a1.is_empty(), "seed {seed}: the log raises alerts");
        // Stored bodies are family, flags, then the payload's representation byte: 2 coded.
        let coded_exaloglogs = buckets(&held)
            .iter()
            .filter(|((table, _, _), v)| {
                use tidemark_stream::stored::{self, Stored};
                table == "e"
                    && matches!(stored::read(v), Ok(Stored::Body(b)) if b.get(2) == Some(&2))
            })
            .count();
        assert!(
            coded_exaloglogs > 0,
            "seed {seed}: no coded ExaLogLog bucket"
        );
        let mut spilled = MemStore::default();
        let tiny = "[state]\nmax_memory = \"64KiB\"\ncheckpoint_records = 5000";
        let (r2, a2) = run(&config(tiny), &mut spilled, &text).unwrap();
        assert!(r2.spills > 10, "seed {seed}: {} spills", r2.spills);
        assert_same(&buckets(&spilled), &buckets(&held), seed);
        assert_eq!(a2, a1, "seed {seed}: alerts differ");
        assert_eq!(
            (r2.records, r2.buckets, r2.late, r2.dropped, r2.merged, r2.alerts),
            (r1.records, r1.buckets, r1.late, r1.dropped, r1.merged, r1.alerts),
            "seed {seed}: counters differ"
        );
    }
}

#[test]
fn keys_that_cannot_spill_past_the_budget_stop_the_run() {
    // Every key busy enough to be near its limit: none is quiet, none can spill.
    let mut text = String::from("ts,k,i\n");
    for t in 0..20_000u64 {
        text.push_str(&format!("{t},k{},i{}\n", t % 1_000, t));
    }
    let c = config("[state]\nmax_memory = \"64KiB\"")
        .text()
        .replace("above = 12", "above = 0");
    let c = Config::from_toml(&c).unwrap();
    let err = run(&c, &mut MemStore::default(), &text).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("memory budget is exceeded") && msg.contains("max_memory"),
        "{msg}"
    );
}

#[test]
fn one_key_bigger_than_the_budget_allows_is_not_spilled_over_and_over() {
    // One frequency key of 60,000 distinct items in one bucket (exact at this ε: megabytes),
    // under a 1 MiB budget. It may spill once; read back, it is not spilled again at the next
    // check (that rewrote its whole table every 1,024 records: about sixty times here), so the
    // run ends with the budget's error, or runs with a handful of spills.
    let mut text = String::from("ts,k,i\n");
    for t in 0..60_000u64 {
        text.push_str(&format!("{t},hot,item{t}\n"));
    }
    let c = Config::from_toml(
        r#"
[input]
time_field = "ts"
time_format = "epoch_ms"
[state]
max_memory = "1MiB"
checkpoint_records = 2000
[[metric]]
name = "f"
kind = "frequency"
key = ["k"]
item = ["i"]
bucket = "1h"
window = "1h"
epsilon = 0.000001
"#,
    )
    .unwrap();
    match run(&c, &mut MemStore::default(), &text) {
        Ok((report, _)) => assert!(report.spills <= 8, "{} spills", report.spills),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("memory budget is exceeded"), "{msg}");
        }
    }
}

#[test]
fn a_lower_threshold_on_resume_alerts_on_keys_that_were_quiet() {
    // Key `a` sees 80 items in one bucket: quiet under `above = 100`, so it leaves memory with
    // no key row. The run resumes under `above = 50` (rules are not part of the store's
    // fingerprint): the close of its bucket must alert, as it would have held in memory.
    let config = |above: u32| {
        Config::from_toml(&format!(
            r#"
[input]
time_field = "ts"
time_format = "epoch_ms"
[state]
max_memory = "64KiB"
[[metric]]
name = "d"
kind = "distinct"
key = ["k"]
item = ["i"]
precision = 12
bucket = "10s"
window = "20s"
retention = "1h"
[[metric.alert]]
above = {above}
margin = 0
"#
        ))
        .unwrap()
    };
    let mut part1 = String::from("ts,k,i\n");
    for i in 0..80 {
        part1.push_str(&format!("{},a,i{i}\n", 1_000 + i));
    }
    // Many other keys, so that `a` is spilled at a checkpoint; then time moves on and `a`'s
    // bucket closes: its 80 items are a stored bucket in its window, no open row.
    for j in 0..3_000 {
        part1.push_str(&format!("{},b{j},x\n", 2_000 + j));
    }
    part1.push_str("12000,c,x\n");
    let part2 = "ts,k,i\n15000,c,x\n25000,c,y\n";
    // Both files exist side by side (a file deleted and written again could reuse its inode,
    // and the second part would read as the first one truncated).
    let dir = std::env::temp_dir().join(format!("tidemark-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = [dir.join("part1.csv"), dir.join("part2.csv")];
    std::fs::write(&files[0], &part1).unwrap();
    std::fs::write(&files[1], part2).unwrap();
    let run_part = |store: &mut MemStore, above: u32, file: &std::path::Path, keep_open: bool| {
        let mut alerts = Vec::new();
        let r = pipeline::run(
            &config(above),
            store,
            RunOptions {
                inputs: vec![file.to_path_buf()],
                keep_open,
                ..RunOptions::default()
            },
            &mut |a: &AlertOut| alerts.push(a.key.clone()),
        )
        .unwrap();
        (r, alerts)
    };
    let mut store = MemStore::default();
    let (r1, a1) = run_part(&mut store, 100, &files[0], true);
    assert!(a1.is_empty());
    assert!(r1.spills > 0, "the first part spills");
    let (_, a2) = run_part(&mut store, 50, &files[1], false);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        a2,
        ["a"],
        "the resumed run alerts on `a` under its new threshold"
    );
}
