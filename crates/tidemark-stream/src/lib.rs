//! tidemark's keyed event-time pipeline: bucketed sketches per key, watermarks, late data,
//! alerts, and an embedded store.
//!
//! The rule this crate is built on: *store sketches, not numbers* — two stored HyperLogLogs
//! (Flajolet, Fusy, Gandouet, Meunier, AofA 2007) merge into the sketch of their union, two
//! stored distinct counts do not. Per metric, per key and per bucket of event time, the
//! [`engine`] keeps a summary; when the watermark passes a bucket's end the summary's bytes go
//! to the [`store`], and any window or rollup is answered later by merging stored buckets
//! ([`query`]).
//!
//! - [`config`]: the TOML config (metrics, fields, widths, lateness, alert rules).
//! - [`record`]: CSV or JSON Lines records to event time, key bytes and item hashes.
//! - [`engine`]: the pure operator — events in; closed buckets, late merges, alerts out.
//! - [`summary`]: the [`summary::BucketSummary`] trait and the metric kinds behind it.
//! - [`store`]: the [`store::Store`] trait, the redb file and an in-memory store.
//! - [`stored`]: a bucket's bytes at rest (the envelope without what the metric implies).
//! - [`check`]: verifying every value a store holds.
//! - [`pipeline`]: the runner that reads input, drives the engine, commits, and resumes after
//!   a crash without counting anything twice.
//!
//! # Late data
//!
//! The watermark is the largest event time seen minus the metric's `allowed_lateness`. An
//! event later than the newest bucket but inside the lateness lands in its own bucket, which
//! is still open. An event for a bucket that has closed is handled by the `late` policy:
//!
//! - `drop`: dropped and counted.
//! - `merge`: its summary is merged into the stored bucket by read-merge-write, in the same
//!   transaction as the next commit. For `distinct` this is safe to retry: the merge is a
//!   register-wise maximum, idempotent, so a replay after a crash that merges the same event
//!   twice changes nothing. For `count` and `frequency` the merge adds (event counts, Count-Min
//!   counters), which is not idempotent: the runner commits each late merge atomically with the
//!   input position, so its own replays never repeat one, but a second writer or an external
//!   retry of the same events would count them twice.
//!
//! Never is a late event added to the current bucket: that would move it into the wrong
//! window.
//!
//! ```
//! use tidemark_stream::config::Config;
//! use tidemark_stream::engine::Engine;
//!
//! let config = Config::from_toml(r#"
//! [input]
//! time_field = "ts"
//! [[metric]]
//! name = "requests"
//! kind = "count"
//! key = ["user"]
//! bucket = "1m"
//! window = "2m"
//! allowed_lateness = "30s"
//! [[metric.alert]]
//! above = 3
//! on = "high"
//! "#).unwrap();
//! let mut e = Engine::new(&config).unwrap();
//! for t in [0u64, 10_000, 20_000, 30_000, 70_000] {
//!     e.observe(t);
//!     e.add(0, t, b"alice", 0);
//! }
//! // Watermark 40 s: nothing closed yet. An event at 95 s moves it to 65 s: bucket [0, 60 s)
//! // closes with 4 events, above the limit of 3.
//! assert!(!e.needs_commit());
//! e.observe(95_000);
//! let out = e.take_outputs();
//! assert_eq!(out.closed.len(), 1);
//! assert_eq!(out.alerts.len(), 1);
//! assert_eq!(out.alerts[0].estimate.high, 4.0);
//! // 50 s is now too late: dropped and counted, never added to the current bucket.
//! e.add(0, 50_000, b"alice", 0);
//! assert_eq!(e.counters(0).dropped, 1);
//! ```

pub mod check;
pub mod config;
pub mod engine;
pub mod flowgen;
mod json;
pub mod pipeline;
pub mod query;
pub mod record;
pub mod store;
pub mod stored;
pub mod summary;
pub mod time;

use core::fmt;

use tidemark::DecodeError;

/// The engine cannot be built or restored.
#[derive(Debug)]
#[non_exhaustive]
pub enum EngineError {
    /// A snapshot that does not decode.
    Snapshot(DecodeError),
    /// A key's state rows, read back from the store, are damaged or inconsistent.
    State {
        /// The metric.
        metric: String,
        /// The key (lossy UTF-8).
        key: String,
        /// What is wrong.
        what: String,
    },
    /// The store failed while a key was read back.
    Store(store::StoreError),
    /// The state held in memory passed its budget with nothing left to spill: keys whose
    /// windows are near a rule's limit, or streaks running, must stay in memory.
    Budget {
        /// Bytes held.
        held: u64,
        /// The budget.
        budget: u64,
        /// Keys held.
        keys: u64,
    },
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Snapshot(e) => write!(f, "engine snapshot: {e}"),
            EngineError::State { metric, key, what } => write!(
                f,
                "the store is damaged: state of key {key:?} of metric {metric}: {what}"
            ),
            EngineError::Store(e) => e.fmt(f),
            EngineError::Budget { held, budget, keys } => write!(
                f,
                "the state's memory budget is exceeded: {keys} keys hold {held} bytes against \
                 max_memory = {budget}, and none can spill (their windows are near an alert \
                 limit, their streaks are running, or each is a large key read back since \
                 the last spill and busy: spilling it would rewrite it every few records): \
                 raise [state] max_memory or --max-memory"
            ),
        }
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EngineError::Snapshot(e) => Some(e),
            EngineError::Store(e) => Some(e),
            _ => None,
        }
    }
}

/// A run that stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// The config is invalid.
    Config(config::ConfigError),
    /// The store was written under another config.
    ConfigMismatch {
        /// The stored fingerprint.
        stored: u64,
        /// The given config's.
        given: u64,
    },
    /// An input cannot be read.
    Input {
        /// The file (`<stdin>`).
        file: String,
        /// Why.
        message: String,
    },
    /// A file already read whose consumed bytes changed: resuming it would skip or repeat
    /// lines.
    InputChanged {
        /// The file.
        file: String,
        /// What changed.
        what: String,
    },
    /// A malformed line (without `skip_bad`).
    BadLine {
        /// The file (`<stdin>`).
        file: String,
        /// 1-based line number.
        line: u64,
        /// What was wrong.
        message: String,
    },
    /// The store failed.
    Store(store::StoreError),
    /// The engine cannot be built or restored.
    Engine(EngineError),
    /// The stored run state does not decode.
    State(DecodeError),
}

impl RunError {
    /// Whether the error is the user's input or arguments (exit code 2) rather than an
    /// internal or storage failure.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            RunError::Config(_)
                | RunError::ConfigMismatch { .. }
                | RunError::Input { .. }
                | RunError::InputChanged { .. }
                | RunError::BadLine { .. }
        ) || matches!(self, RunError::Store(e) if e.is_damaged())
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Config(e) => e.fmt(f),
            RunError::ConfigMismatch { stored, given } => write!(
                f,
                "the store was written under another config (fingerprint {stored:#018x}, this \
                 config's is {given:#018x}): use a new --db or the original config"
            ),
            RunError::Input { file, message } => write!(f, "{file}: {message}"),
            RunError::InputChanged { file, what } => write!(
                f,
                "{file} was read before, but {what}: resuming it would skip or repeat lines. \
                 Use a new --db, or --restart to read it from its start as new data"
            ),
            RunError::BadLine {
                file,
                line,
                message,
            } => write!(f, "{file}:{line}: {message}"),
            RunError::Store(e) => e.fmt(f),
            RunError::Engine(e) => e.fmt(f),
            RunError::State(e) => write!(f, "stored run state: {e}"),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Config(e) => Some(e),
            RunError::Store(e) => Some(e),
            RunError::Engine(e) => Some(e),
            RunError::State(e) => Some(e),
            _ => None,
        }
    }
}
