//! A window that reaches before a metric's retention horizon is refused, naming the horizon,
//! instead of answering from the buckets that are left as though they were the whole window;
//! windows inside it, and a rollup's longer ones, answer exactly.

use tidemark_stream::config::Config;
use tidemark_stream::pipeline::{self, RunOptions};
use tidemark_stream::query::{self, QueryError};
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
retention = "1h"
rollup = "1h"
rollup_retention = "1d"
"#;

const MIN: u64 = 60_000;
/// The events begin two days after the epoch, so that even the rollup's day of retention
/// has a horizon after 0.
const T0: u64 = 2 * 1440 * MIN;

#[test]
fn windows_before_the_retention_horizon_are_refused() {
    let dir = std::env::temp_dir().join(format!("tidemark-retention-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("in.csv");
    // Key k: one event a minute for three hours (minute m at T0 + m minutes), so any window
    // of whole minutes inside holds one event a minute.
    let mut text = String::from("ts,k\n");
    for m in 0..180u64 {
        text.push_str(&format!("{},k\n", (T0 + m * MIN) / 1000));
    }
    std::fs::write(&path, text).unwrap();
    let mut store = MemStore::default();
    pipeline::run(
        &Config::from_toml(CONFIG).unwrap(),
        &mut store,
        RunOptions {
            inputs: vec![path],
            ..RunOptions::default()
        },
        &mut |_| {},
    )
    .unwrap();
    let count = |metric: &str, window: u64, at: Option<u64>| {
        query::window(&store, metric, window, at, Some(b"k"), None)
            .map(|a| a.rows.first().map_or(0.0, |r| r.estimate.value))
    };
    // The run ends with all 180 minutes closed: retention keeps minutes 120..180.
    assert_eq!(count("n", 60 * MIN, None).unwrap(), 60.0);
    assert_eq!(count("n", 5 * MIN, Some(T0 + 178 * MIN)).unwrap(), 5.0);
    for (window, at) in [
        (61 * MIN, None),
        (120 * MIN, None),
        (5 * MIN, Some(T0 + 100 * MIN)),
    ] {
        match count("n", window, at) {
            Err(QueryError::BeforeRetention { horizon, .. }) => assert_eq!(horizon, T0 + 120 * MIN),
            other => panic!("window {window} at {at:?}: {other:?}"),
        }
    }
    // The rollup keeps a day of hours: three hours through it.
    assert_eq!(count("n@1h", 180 * MIN, None).unwrap(), 180.0);
    assert!(matches!(
        count("n@1h", 1440 * MIN + 180 * MIN, None),
        Err(QueryError::BeforeRetention { .. })
    ));
    let message = count("n", 120 * MIN, None).unwrap_err().to_string();
    assert!(
        message.contains("retention horizon 1970-01-03T02:00:00") && message.contains("1h"),
        "{message}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
