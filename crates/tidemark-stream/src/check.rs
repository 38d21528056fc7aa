//! Checking a whole store: everything a run or a query would read, read once and verified.
//!
//! [`check`] reads the metadata (its seal, the config, the fingerprint, the run state and the
//! engine snapshot, restored as a resuming run would), then every stored bucket of every
//! metric and rollup against its digests, decoding each with its metric's shape (envelope
//! checksum included). It reports what it read and every problem found, rather than stopping
//! at the first. The redb file's own page checksums are verified by opening it for writing
//! ([`crate::store::RedbStore::open_existing_writable`]) before this runs.

use crate::config::Config;
use crate::engine::{Engine, MetricShape};
use crate::pipeline::RunState;
use crate::state_rows::StoreRows;
use crate::store::Store;

/// What a check found in the buckets of one stored name (a metric or a rollup).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableReport {
    /// The metric's or rollup's name.
    pub name: String,
    /// Buckets read.
    pub buckets: u64,
    /// Buckets that decoded.
    pub decoded: u64,
    /// The bytes of their stored values (keys and the file's own overhead not counted).
    pub bytes: u64,
}

/// What a check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Per stored name (metric or rollup): what was read.
    pub tables: Vec<TableReport>,
    /// Records counted by the runs that wrote the store.
    pub records: u64,
    /// Everything found wrong, each naming where.
    pub problems: Vec<String>,
}

impl CheckReport {
    /// Whether nothing was found wrong.
    pub fn is_healthy(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks every value the store holds. An empty store (nothing committed) is a problem too:
/// there is nothing a query could answer from.
pub fn check(store: &dyn Store) -> CheckReport {
    let mut r = CheckReport::default();
    let meta = match store.meta() {
        Ok(Some(m)) => m,
        Ok(None) => {
            r.problems
                .push("no committed run: the store holds no metadata".into());
            return r;
        }
        Err(e) => {
            r.problems.push(format!("metadata: {e}"));
            return r;
        }
    };
    let config = match Config::from_toml(&meta.config) {
        Ok(c) => c,
        Err(e) => {
            r.problems.push(format!("stored config: {e}"));
            return r;
        }
    };
    if config.fingerprint() != meta.fingerprint {
        r.problems.push(format!(
            "stored config: its fingerprint {:#018x} is not the stored {:#018x}",
            config.fingerprint(),
            meta.fingerprint
        ));
    }
    match RunState::from_bytes(&meta.state) {
        Err(e) => r.problems.push(format!("run state: {e}")),
        Ok(state) => {
            r.records = state.records;
            let restored = store.view().map(|view| {
                Engine::restore(&config, &state.engine, &mut StoreRows::new(&*view, &config))
            });
            match restored {
                Err(e) => r.problems.push(format!("live windows: {e}")),
                Ok(Err(e)) => r.problems.push(format!("run state: {e}")),
                Ok(Ok(_)) => {}
            }
        }
    }
    for m in &config.metrics {
        let shapes = std::iter::once((m.name.clone(), MetricShape::of(m)))
            .chain(m.rollup_name().zip(MetricShape::rollup_of(m)));
        for (name, shape) in shapes {
            let (mut read, mut good, mut value_bytes) = (0u64, 0u64, 0u64);
            let mut bad: Vec<String> = Vec::new();
            let scanned = store.scan(&name, 0, u64::MAX, &mut |key, start, bytes| {
                read += 1;
                value_bytes += bytes.len() as u64;
                match shape.decode(bytes, start) {
                    Ok(_) => good += 1,
                    Err(e) if bad.len() < 10 => bad.push(format!(
                        "{name} bucket {start} key {:?}: {e}",
                        String::from_utf8_lossy(key)
                    )),
                    Err(_) => {}
                }
            });
            if let Err(e) = scanned {
                r.problems.push(format!("{name}: {e}"));
            }
            if read > good {
                r.problems.extend(bad);
                if read - good > 10 {
                    r.problems.push(format!(
                        "{name}: {} more buckets do not decode",
                        read - good - 10
                    ));
                }
            }
            r.tables.push(TableReport {
                name,
                buckets: read,
                decoded: good,
                bytes: value_bytes,
            });
        }
    }
    r
}
