//! Raw input lines through the whole pipeline: parsing, the engine, a store commit, and a
//! resume over the same file with more lines appended. Whatever the bytes, a run with
//! `skip_bad` succeeds, the store it leaves resumes, and every metric answers a query.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidemark_stream::pipeline::{self, RunOptions};
use tidemark_stream::query;
use tidemark_stream::store::MemStore;

const CONFIG: &str = include_str!("../../testdata/pipeline/arbitrary-records.toml");

fn run(store: &mut MemStore, path: &std::path::Path) {
    pipeline::run(
        &tidemark_stream::config::Config::from_toml(CONFIG).expect("a valid config"),
        store,
        RunOptions {
            inputs: vec![path.to_path_buf()],
            skip_bad: true,
            keep_open: true,
            ..RunOptions::default()
        },
        &mut |_| {},
    )
    .expect("a run with skip_bad succeeds on any input");
}

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("tidemark-fuzz-lines-{}.csv", std::process::id()));
    let cut = data.iter().position(|&b| b == 0xff).unwrap_or(data.len());
    let mut bytes = b"ts,k,i\n".to_vec();
    bytes.extend_from_slice(&data[..cut]);
    std::fs::write(&path, &bytes).unwrap();
    let mut store = MemStore::default();
    run(&mut store, &path);
    bytes.extend_from_slice(&data[cut..]);
    std::fs::write(&path, &bytes).unwrap();
    run(&mut store, &path);
    for (metric, window) in [("c", 180_000), ("c@10m", 600_000), ("d", 180_000), ("f", 120_000)] {
        query::window(&store, metric, window, None, None, Some(3)).expect("every metric answers");
    }
});
