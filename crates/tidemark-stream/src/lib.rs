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
//! - [`kinds`]: the metric kinds (count, distinct, frequency), each in a folder of its own
//!   behind [`kinds::MetricKind`] and [`kinds::BucketSummary`].
//! - [`rule`]: a metric's alert rule, which the config reads, each kind checks and the engine
//!   evaluates.
//! - [`store`]: the [`store::Store`] trait, the redb file and an in-memory store.
//! - [`state_rows`]: the engine's spilled state read back from a store's view.
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
mod error;
pub mod flowgen;
mod json;
pub mod kinds;
pub mod merged_alerts;
pub mod pipeline;
pub mod query;
pub mod record;
pub mod rule;
pub mod state_rows;
pub mod store;
pub mod stored;
pub mod time;

pub use error::{ConfigError, EngineError, QueryError, RunError, SizeError};
