//! An engine whose closes and checkpoints split many keys between threads produces exactly
//! what one thread does: the closed buckets, alerts, state rows and snapshot, in order.

use tidemark_stream::config::Config;
use tidemark_stream::engine::{Alert, ClosedBucket, Engine, StateRow};

/// A distinct metric with an early rule and a count metric with a rule, over 1-second
/// buckets and 3-second windows.
const CONFIG: &str = r#"
[input]
format = "csv"
time_field = "t"
time_format = "epoch_ms"

[[metric]]
name = "fan"
kind = "distinct"
key = ["k"]
item = ["i"]
bucket = "1s"
window = "3s"
precision = 10
retention = "1h"
allowed_lateness = "200ms"
[[metric.alert]]
above = 40
early = true

[[metric]]
name = "n"
kind = "count"
key = ["k"]
bucket = "1s"
window = "3s"
retention = "1h"
allowed_lateness = "200ms"
[[metric.alert]]
above = 60
"#;

/// Everything an engine handed out over a run, checkpoint by checkpoint, and its snapshots.
type Run = Vec<(Vec<ClosedBucket>, Vec<Alert>, Vec<StateRow>, Vec<u8>)>;

/// 30,000 keys over 6 seconds (a few busy ones past the limits), a checkpoint every 1.5 s
/// and at the end; the closes see more than 20,000 keys held, enough to split.
fn run(threads: usize) -> Run {
    let config = Config::from_toml(CONFIG).unwrap();
    let mut e = Engine::new(&config).unwrap();
    e.set_threads(threads);
    let mut taken = Run::new();
    let mut take = |e: &mut Engine| {
        let out = e.take_outputs();
        taken.push((out.closed, out.alerts, out.state, e.snapshot()));
    };
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for t in 0..6_000u64 {
        e.observe(t);
        for _ in 0..20 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Keys 0..30,000; keys below 40 take a tenth of the events (they cross the limits).
            let k = if x % 10 == 0 { x % 40 } else { x % 30_000 };
            let key = format!("k{k}");
            e.add(0, t, key.as_bytes(), x >> 20);
            e.add(1, t, key.as_bytes(), 0);
        }
        if t % 1_500 == 0 {
            take(&mut e);
        }
    }
    assert!(e.live_keys(0) > 20_000, "{} keys", e.live_keys(0));
    e.flush();
    take(&mut e);
    taken
}

#[test]
fn closes_and_checkpoints_split_between_threads_equal_one_thread() {
    let one = run(1);
    let alerts: usize = one.iter().map(|c| c.1.len()).sum();
    assert!(alerts > 0, "some keys alert");
    for threads in [2, 3, 4] {
        let many = run(threads);
        assert_eq!(many.len(), one.len());
        for (n, (a, b)) in one.iter().zip(&many).enumerate() {
            assert!(
                a.0 == b.0,
                "checkpoint {n}: closed buckets differ ({threads} threads)"
            );
            assert!(
                a.1 == b.1,
                "checkpoint {n}: alerts differ ({threads} threads)"
            );
            assert!(
                a.2 == b.2,
                "checkpoint {n}: state rows differ ({threads} threads)"
            );
            assert!(
                a.3 == b.3,
                "checkpoint {n}: snapshots differ ({threads} threads)"
            );
        }
    }
}
