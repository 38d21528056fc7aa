//! What the pipeline's tests share.

use tidemark_stream::config::Config;
use tidemark_stream::pipeline::{self, RunOptions};
use tidemark_stream::store::MemStore;

/// A fresh in-memory store after running `config` over `text`, read from a file in a
/// directory of its own (named after `name` and this process, removed after).
pub fn run_text(config: &str, text: &str, name: &str) -> MemStore {
    let dir = std::env::temp_dir().join(format!("tidemark-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("in.csv");
    std::fs::write(&path, text).unwrap();
    let mut store = MemStore::default();
    pipeline::run(
        &Config::from_toml(config).unwrap(),
        &mut store,
        RunOptions {
            inputs: vec![path],
            ..RunOptions::default()
        },
        &mut |_| {},
    )
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    store
}
