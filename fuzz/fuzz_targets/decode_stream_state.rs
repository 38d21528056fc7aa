//! Any bytes given to the pipeline's state decoders (the run state committed with each batch
//! and the engine snapshot inside it): an error or a state, never a panic. A snapshot that
//! restores must snapshot again to the same bytes.
//!
//! Snapshots are restored under two configs: the built-in fan-out config (one distinct
//! metric) and one with a count, a distinct and a frequency metric, so every metric kind's
//! state decoder is reached. Besides the raw input, a valid snapshot of the second config
//! (an engine fed a few hundred events) is edited as the input says and restored.
//!
//! The input is also read as a stored bucket value by each of the mixed config's metrics
//! (its stored form, or an envelope): one that decodes stores again to bytes that decode to
//! the same answer.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tidemark::ItemHasher;
use tidemark_stream::config::Config;
use tidemark_stream::engine::{Engine, MetricShape, NoRows};
use tidemark_stream::flowgen::FANOUT_CONFIG;
use tidemark_stream::pipeline::RunState;

const MIXED: &str = r#"
[input]
time_field = "ts"
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

fn configs() -> &'static [Config; 2] {
    static C: OnceLock<[Config; 2]> = OnceLock::new();
    C.get_or_init(|| {
        [
            Config::from_toml(FANOUT_CONFIG).expect("the built-in config is valid"),
            Config::from_toml(MIXED).expect("the mixed config is valid"),
        ]
    })
}

/// A snapshot of the mixed config's engine with open buckets in every metric.
fn sample() -> &'static [u8] {
    static S: OnceLock<Vec<u8>> = OnceLock::new();
    S.get_or_init(|| {
        let mut e = Engine::new(&configs()[1]).unwrap();
        let h = ItemHasher::default();
        for i in 0..300u64 {
            let t = i * 97;
            let key = [b'k', (i % 5) as u8];
            let item = format!("item{}", i % 13);
            e.observe(t);
            e.add(0, t, &key, 0);
            e.add(1, t, &key, h.hash(item.as_bytes()));
            e.add_item(2, t, &key, h.hash(item.as_bytes()), item.as_bytes());
        }
        e.snapshot()
    })
}

fn restore(config: &Config, data: &[u8]) {
    // With no rows to read back, a restored engine holds no keys; from the second round on
    // (an older version converted, the keys' bookkeeping settled) a snapshot is a fixed point.
    if let Ok(e) = Engine::restore(config, data, &mut NoRows) {
        let again = e.snapshot();
        let e2 = Engine::restore(config, &again, &mut NoRows).expect("re-snapshot restores");
        let third = e2.snapshot();
        let e3 = Engine::restore(config, &third, &mut NoRows).expect("re-snapshot restores");
        assert_eq!(e3.snapshot(), third);
    }
}

fuzz_target!(|data: &[u8]| {
    for m in &configs()[1].metrics {
        let shape = MetricShape::of(m);
        if let Ok(s) = shape.decode(data, 0) {
            let back = shape.decode(&s.to_stored(), 0).expect("a stored form decodes");
            assert_eq!(back.estimate(), s.estimate());
        }
    }
    if let Ok(s) = RunState::from_bytes(data) {
        let again = RunState::from_bytes(&s.to_bytes()).expect("an encoded state decodes");
        // A version 2 state's position is converted by a run, never written back: the state
        // encodes as version 3 without it.
        let expected = RunState {
            legacy: None,
            ..s
        };
        assert_eq!(again, expected);
    }
    for config in configs() {
        restore(config, data);
    }
    // The valid snapshot, edited: 3 bytes an edit (offset lo, offset hi, XOR), the first
    // byte's low bits a cut off the end.
    let mut snap = sample().to_vec();
    if let Some((&ctl, edits)) = data.split_first() {
        for e in edits.chunks_exact(3) {
            let i = u16::from_le_bytes([e[0], e[1]]) as usize % snap.len();
            snap[i] ^= e[2];
        }
        snap.truncate(snap.len().saturating_sub(ctl as usize % 8));
        restore(&configs()[1], &snap);
    }
});
