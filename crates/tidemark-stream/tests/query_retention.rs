//! A window that reaches before a metric's retention horizon answers from the horizon on and
//! says so (its `from`, `clipped`), instead of answering from the buckets that are left as
//! though they were the whole window; one wholly before it is refused, naming the horizon.

mod common;

use tidemark_stream::query::{self, QueryError};

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
fn windows_before_the_retention_horizon_are_cut_there_or_refused() {
    // Key k: one event a minute for three hours (minute m at T0 + m minutes), so any window
    // of whole minutes inside holds one event a minute.
    let mut text = String::from("ts,k\n");
    for m in 0..180u64 {
        text.push_str(&format!("{},k\n", (T0 + m * MIN) / 1000));
    }
    let store = common::run_text(CONFIG, &text, "retention");
    let answer = |metric: &str, window: u64, at: Option<u64>| {
        query::window(&store, metric, window, at, Some(b"k"), None).map(|a| {
            let value = a.rows.first().map_or(0.0, |r| r.estimate.value);
            (value, a.from, a.clipped)
        })
    };
    // The run ends with all 180 minutes closed: retention keeps minutes 120..180.
    let end = T0 + 180 * MIN;
    assert_eq!(
        answer("n", 60 * MIN, None).unwrap(),
        (60.0, end - 60 * MIN, false)
    );
    assert_eq!(
        answer("n", 5 * MIN, Some(T0 + 178 * MIN)).unwrap(),
        (5.0, T0 + 173 * MIN, false)
    );
    // Reaching before the horizon: the answer starts there and says so, never counting the
    // buckets deleted (or about to be) as though the window held them whole.
    for window in [61 * MIN, 120 * MIN, 36_525 * 1440 * MIN] {
        assert_eq!(
            answer("n", window, None).unwrap(),
            (60.0, T0 + 120 * MIN, true)
        );
    }
    // Wholly before it: refused, naming the horizon and the rollup.
    match answer("n", 5 * MIN, Some(T0 + 100 * MIN)) {
        Err(QueryError::BeforeRetention {
            horizon, rollup, ..
        }) => assert_eq!((horizon, rollup.as_deref()), (T0 + 120 * MIN, Some("n@1h"))),
        other => panic!("{other:?}"),
    }
    let message = answer("n", 5 * MIN, Some(T0 + 100 * MIN))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("retention horizon 1970-01-03T02:00:00") && message.contains("n@1h"),
        "{message}"
    );
    // The rollup keeps a day of hours: three hours through it, whole; a longer window is cut
    // to the day (nothing was ever there, so the count is the same).
    assert_eq!(answer("n@1h", 180 * MIN, None).unwrap(), (180.0, T0, false));
    assert_eq!(
        answer("n@1h", 1440 * MIN + 180 * MIN, None).unwrap(),
        (180.0, end - 1440 * MIN, true)
    );
}
