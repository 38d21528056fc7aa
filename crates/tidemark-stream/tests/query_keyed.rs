//! A query for one key reads only that key's entries, and answers exactly what the scan of
//! every key answers for it: on a store of every kind (a rollup, late events merged, buckets
//! left open, keys spilled), for every key, at several windows and times, through a fresh
//! handle and through one that remembers the starts it verified. And damage to what a keyed
//! read reads — an entry altered, moved, lost, a digest lost — is found, before and after the
//! start was verified, never answered from.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark_stream::config::Config;
use tidemark_stream::pipeline::{self, RunOptions};
use tidemark_stream::query::{self, QueryError};
use tidemark_stream::store::{RedbStore, Store, StoreError};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const CONFIG: &str = r#"
[input]
time_field = "ts"

[state]
max_memory = "256KiB"
checkpoint_records = 5000

[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "1m"
window = "5m"
rollup = "5m"
late = "merge"
allowed_lateness = "10s"

[[metric]]
name = "d"
kind = "distinct"
key = ["k"]
item = ["i"]
bucket = "1m"
window = "5m"
precision = 8

[[metric]]
name = "f"
kind = "frequency"
key = ["k"]
item = ["i"]
bucket = "1m"
window = "5m"
late = "merge"

[[metric]]
name = "q"
kind = "quantile"
key = ["k"]
value = "v"
bucket = "1m"
window = "5m"
quantiles = [0.5, 0.99]
"#;

const T0: u64 = 1_700_000_040; // epoch seconds, on a minute
const MINUTES: u64 = 22;

/// 400 keys over 22 minutes, each active in some minutes only; one event in fifty arrives
/// late (behind the lateness: merged into its stored bucket).
fn records() -> String {
    let mut rng = Pcg64::seed_from_u64(11);
    let mut text = String::from("ts,k,i,v\n");
    for s in 0..MINUTES * 60 {
        for _ in 0..rng.random_range(5..40) {
            let k = rng.random_range(0..400u32);
            if (s / 60 + u64::from(k)) % 3 == 0 {
                continue;
            }
            let late = if rng.random_bool(0.02) { 75 } else { 0 };
            let t = T0 + s.saturating_sub(late);
            let i = rng.random_range(0..(k % 50 + 2));
            let v: f64 = rng.random_range(0.5..(f64::from(k) + 2.0));
            text.push_str(&format!("{t},key{k:03},item{i},{v:.3}\n"));
        }
    }
    text
}

/// A store file of the records, its last buckets left open.
fn store(dir: &std::path::Path) -> Result<std::path::PathBuf, Box<dyn std::error::Error>> {
    let input = dir.join("in.csv");
    std::fs::write(&input, records())?;
    let db = dir.join("s.db");
    let mut store = RedbStore::open(&db)?;
    pipeline::run(
        &Config::from_toml(CONFIG)?,
        &mut store,
        RunOptions {
            inputs: vec![input],
            keep_open: true,
            ..RunOptions::default()
        },
        &mut |_| {},
    )?;
    Ok(db)
}

fn temp_dir(name: &str) -> Result<std::path::PathBuf, std::io::Error> {
    let dir = std::env::temp_dir().join(format!("tidemark-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[test]
fn a_keyed_answer_is_the_full_scans_row_for_every_key() -> TestResult {
    let dir = temp_dir("keyed")?;
    let db = store(&dir)?;
    let fresh = RedbStore::open_existing(&db)?;
    let remembering = RedbStore::open_existing(&db)?.remember_verified(1 << 20);
    let end = (T0 + MINUTES * 60) * 1000;
    let mut compared = 0;
    let mut open_rows = 0;
    for metric in ["n", "n@5m", "d", "f", "q"] {
        for window in [60_000, 300_000, 900_000] {
            if metric == "n@5m" && window % 300_000 != 0 {
                continue;
            }
            for at in [None, Some(end - 240_000), Some(end - 600_000)] {
                let all = match query::window(&fresh, metric, window, at, None, None) {
                    Ok(a) => a,
                    // A rollup's window may be before anything rolled: both ways refuse it.
                    Err(QueryError::BeforeRetention { .. }) => continue,
                    Err(e) => return Err(e.into()),
                };
                assert!(!all.rows.is_empty(), "{metric} {window} {at:?}");
                let keys = all
                    .rows
                    .iter()
                    .map(|r| r.key.clone())
                    .chain(["nokey".to_string(), "key999".to_string()]);
                for key in keys {
                    for store in [&fresh, &remembering] {
                        let one =
                            query::window(store, metric, window, at, Some(key.as_bytes()), None)?;
                        assert_eq!((one.from, one.to), (all.from, all.to));
                        assert_eq!(one.rows.len(), 1);
                        match all.rows.iter().find(|r| r.key == key) {
                            Some(row) => assert_eq!(&one.rows[0], row, "{metric} {key}"),
                            None => assert_eq!(one.rows[0].estimate.value, 0.0),
                        }
                        open_rows += usize::from(one.rows[0].partial);
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 10_000, "{compared}");
    assert!(open_rows > 0, "no answer came from an open bucket");
    assert!(remembering
        .verified_starts()
        .is_some_and(|v| v.starts() > 0));
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The first key of metric `n`'s newest closed start, and that start.
fn a_closed_entry(store: &RedbStore) -> Result<(u64, Vec<u8>, Vec<u8>), StoreError> {
    let mut last = None;
    store.scan("n", 0, u64::MAX, &mut |k, s, v| {
        if last
            .as_ref()
            .is_none_or(|(ls, _, _): &(u64, Vec<u8>, Vec<u8>)| *ls != s)
        {
            last = Some((s, k.to_vec(), v.to_vec()));
        }
    })?;
    last.ok_or_else(|| StoreError::Damaged {
        what: "no entry".into(),
    })
}

fn damaged(r: Result<query::Answer, QueryError>) -> bool {
    matches!(r, Err(QueryError::Store(e)) if e.is_damaged())
}

#[test]
fn damage_to_what_a_keyed_read_reads_is_found_before_and_after_verifying() -> TestResult {
    let dir = temp_dir("keyed-damage")?;
    let db = store(&dir)?;
    let (start, key, value) = a_closed_entry(&RedbStore::open_existing(&db)?)?;
    let to = start + 60_000;
    // Another key of the same start, and one of another start.
    let other_key = {
        let mut o = None;
        RedbStore::open_existing(&db)?.scan("n", start, to, &mut |k, _, v| {
            if k != key.as_slice() && o.is_none() {
                o = Some((k.to_vec(), v.to_vec()));
            }
        })?;
        o.ok_or("one key alone")?
    };
    let ask = |s: &RedbStore, k: &[u8]| query::window(s, "n", 60_000, Some(to), Some(k), None);
    let pristine = db.with_extension("pristine");
    std::fs::copy(&db, &pristine)?;
    type Damage<'a> =
        Box<dyn Fn(&mut dyn tidemark_stream::store::Txn) -> Result<(), StoreError> + 'a>;
    let damages: Vec<(&str, Damage)> = vec![
        (
            "altered",
            Box::new(|t| {
                let mut v = value.clone();
                let last = v.len() - 1;
                v[last] ^= 1;
                t.put("n", start, &key, &v).map(|_| ())
            }),
        ),
        (
            "another key's entry moved here",
            Box::new(|t| t.put("n", start, &key, &other_key.1).map(|_| ())),
        ),
        ("lost", Box::new(|t| t.remove("n", start, &key).map(|_| ()))),
        (
            "its digest lost",
            Box::new(|t| t.remove("#n", start, b"").map(|_| ())),
        ),
    ];
    for (what, damage) in &damages {
        for verified_first in [false, true] {
            std::fs::copy(&pristine, &db)?;
            let reader = RedbStore::open_existing(&db)?.remember_verified(1 << 20);
            if verified_first {
                let before = ask(&reader, &key)?;
                assert_eq!(before.rows[0].buckets, 1, "{what}");
            }
            {
                let mut writer = RedbStore::open_existing_writable(&db)?;
                writer.write(&mut |t| damage(t))?;
            }
            assert!(
                damaged(ask(&reader, &key)),
                "{what} (verified first: {verified_first}): answered from"
            );
            // A fresh handle (a `tidemark query`) finds it too.
            assert!(
                damaged(ask(&RedbStore::open_existing(&db)?, &key)),
                "{what}"
            );
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
