//! The counts of the run serving its own store (`tidemark run --serve`) that the store does
//! not record: kept in atomics the run adds to as it goes, and `/metrics` reads at a scrape.
//! Nothing here is locked: a slow client cannot hold the pipeline up. (What the run commits —
//! records, input positions and so the input lag, per-metric counters — `/metrics` reads from
//! the store's last checkpoint, as `tidemark serve` does.)

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A running pipeline's own counts, shared with the server it runs.
#[derive(Debug)]
pub struct RunHealth {
    /// When the run started, ms since the epoch.
    started_ms: u64,
    /// Malformed lines this run skipped.
    bad_lines: AtomicU64,
    /// Alert lines this run printed.
    alerts: AtomicU64,
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
    }
}

fn single(out: &mut String, name: &str, kind: &str, help: &str, v: f64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    let _ = writeln!(out, "{name} {v}");
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
        let mut out = String::new();
        h.families(&mut out);
        assert!(out.contains("\ntidemark_run_bad_lines_total 2\n"), "{out}");
        assert!(
            out.contains("\ntidemark_run_alert_lines_total 1\n"),
            "{out}"
        );
    }
}
