//! The counts of the run serving its own store (`tidemark run --serve`) that the store does
//! not record: kept in atomics the run adds to as it goes, and `/metrics` reads at a scrape.
//! A slow client cannot hold the pipeline up: the counts are atomics, and the one list (a
//! message source's lag) is replaced by the run only when no scrape is reading it (`try_lock`;
//! a busy list waits for the next checkpoint). (What the run commits — records, input
//! positions and so the input lag, per-metric counters — `/metrics` reads from the store's
//! last checkpoint, as `tidemark serve` does.)

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::prom::{escape, header, single};

/// A running pipeline's own counts, shared with the server it runs.
#[derive(Debug)]
pub struct RunHealth {
    /// When the run started, ms since the epoch.
    started_ms: u64,
    /// Malformed lines this run skipped.
    bad_lines: AtomicU64,
    /// Alert lines this run printed.
    alerts: AtomicU64,
    /// The run's memory budget (its `--max-memory` included); 0 until told.
    budget: AtomicU64,
    /// Bytes of open state the run held after its last checkpoint.
    open_bytes: AtomicU64,
    /// A message source's partitions at the last checkpoint: (topic, partition, lag).
    lag: Mutex<Vec<(String, i32, i64)>>,
}

impl Default for RunHealth {
    fn default() -> RunHealth {
        RunHealth::new()
    }
}

impl RunHealth {
    /// A run starting now.
    pub fn new() -> RunHealth {
        RunHealth {
            started_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            bad_lines: AtomicU64::new(0),
            alerts: AtomicU64::new(0),
            budget: AtomicU64::new(0),
            open_bytes: AtomicU64::new(0),
            lag: Mutex::new(Vec::new()),
        }
    }

    /// The run's memory budget, bytes.
    pub fn set_budget(&self, bytes: u64) {
        self.budget.store(bytes, Ordering::Relaxed);
    }

    /// Bytes of open state held after a checkpoint.
    pub fn set_open_bytes(&self, bytes: u64) {
        self.open_bytes.store(bytes, Ordering::Relaxed);
    }

    /// A message source's lag per partition after a checkpoint: (topic, partition, messages
    /// between its position and its end). Skipped when a scrape is reading the last one.
    pub fn set_lag(&self, lag: Vec<(String, i32, i64)>) {
        if let Ok(mut held) = self.lag.try_lock() {
            *held = lag;
        }
    }

    /// A malformed line skipped.
    pub fn bad_line(&self) {
        self.bad_lines.fetch_add(1, Ordering::Relaxed);
    }

    /// An alert line printed.
    pub fn alert(&self) {
        self.alerts.fetch_add(1, Ordering::Relaxed);
    }

    /// The families, appended to `out`.
    pub(crate) fn families(&self, out: &mut String) {
        single(
            out,
            "tidemark_run_bad_lines_total",
            "counter",
            "Malformed lines the serving run skipped (the store's count is as of its last \
             checkpoint, over every run).",
            self.bad_lines.load(Ordering::Relaxed) as f64,
        );
        single(
            out,
            "tidemark_run_alert_lines_total",
            "counter",
            "Alert lines the serving run printed.",
            self.alerts.load(Ordering::Relaxed) as f64,
        );
        single(
            out,
            "tidemark_run_start_timestamp_seconds",
            "gauge",
            "When the serving run started, seconds since the epoch.",
            self.started_ms as f64 / 1000.0,
        );
        let budget = self.budget.load(Ordering::Relaxed);
        if budget > 0 {
            single(
                out,
                "tidemark_run_memory_budget_bytes",
                "gauge",
                "The serving run's memory budget, its --max-memory flag included.",
                budget as f64,
            );
        }
        single(
            out,
            "tidemark_run_open_state_bytes",
            "gauge",
            "Bytes of open state (keys' windows, open buckets, outputs waiting) the serving run \
             held after its last checkpoint: what its memory budget bounds.",
            self.open_bytes.load(Ordering::Relaxed) as f64,
        );
        let lag = match self.lag.lock() {
            Ok(held) => held.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        if !lag.is_empty() {
            header(
                out,
                "tidemark_run_kafka_lag_messages",
                "gauge",
                "Per partition, messages between the serving run's position at its last \
                 checkpoint and the partition's end (the client's latest statistics).",
            );
            for (topic, partition, messages) in lag {
                let _ = writeln!(
                    out,
                    "tidemark_run_kafka_lag_messages{{topic=\"{}\",partition=\"{partition}\"}} {messages}",
                    escape(&topic)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_what_the_run_added() {
        let h = RunHealth::new();
        h.bad_line();
        h.bad_line();
        h.alert();
        h.set_budget(1 << 20);
        h.set_open_bytes(4096);
        h.set_lag(vec![("flows".into(), 3, 42), ("a\"b".into(), 0, 0)]);
        let mut out = String::new();
        h.families(&mut out);
        assert!(out.contains("\ntidemark_run_bad_lines_total 2\n"), "{out}");
        assert!(
            out.contains("\ntidemark_run_alert_lines_total 1\n"),
            "{out}"
        );
        assert!(
            out.contains("\ntidemark_run_open_state_bytes 4096\n"),
            "{out}"
        );
        assert!(
            out.contains("\ntidemark_run_memory_budget_bytes 1048576\n"),
            "{out}"
        );
        assert!(
            out.contains("\ntidemark_run_kafka_lag_messages{topic=\"flows\",partition=\"3\"} 42\n"),
            "{out}"
        );
        assert!(
            out.contains("{topic=\"a\\\"b\",partition=\"0\"} 0\n"),
            "{out}"
        );
    }
}
