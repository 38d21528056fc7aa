//! The health of the run serving its own store (`tidemark run --serve`): what the run knows
//! and the store does not record, kept in atomics the run stores into at each checkpoint and
//! at each bad line, and `/metrics` reads at a scrape. Nothing here is locked: a slow client
//! cannot hold the pipeline up.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A running pipeline's own health, shared with the server it runs.
#[derive(Debug)]
pub struct RunHealth {
    /// The one file the run reads: its size now, less the bytes read, is the input lag.
    input: Option<PathBuf>,
    /// When the run started, ms since the epoch.
    started_ms: u64,
    /// Bytes of the inputs read as of the last checkpoint.
    read: AtomicU64,
    /// Bytes of the inputs, as each was when opened.
    total: AtomicU64,
    /// Checkpoints seen.
    checkpoints: AtomicU64,
    /// When the last was seen, ms since the epoch (0: none yet).
    checkpoint_ms: AtomicU64,
    /// Malformed lines skipped by this run.
    bad_lines: AtomicU64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl RunHealth {
    /// A run that reads the one file `input` (`None`: several files, whose lag is their sizes
    /// as opened less what was read; standard input or a message source, whose lag is not
    /// known here).
    pub fn new(input: Option<PathBuf>) -> RunHealth {
        RunHealth {
            input,
            started_ms: now_ms(),
            read: AtomicU64::new(0),
            total: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            checkpoint_ms: AtomicU64::new(0),
            bad_lines: AtomicU64::new(0),
        }
    }

    /// The run's progress: `read` bytes of the inputs done (of `total`, the inputs' sizes as
    /// opened), which the pipeline reports after each checkpoint and at each input's end.
    pub fn progress(&self, read: u64, total: u64) {
        self.read.store(read, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        self.checkpoints.fetch_add(1, Ordering::Relaxed);
        self.checkpoint_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// A malformed line skipped.
    pub fn bad_line(&self) {
        self.bad_lines.fetch_add(1, Ordering::Relaxed);
    }

    /// The families, appended to `out`.
    pub(crate) fn families(&self, out: &mut String) {
        let read = self.read.load(Ordering::Relaxed);
        single(
            out,
            "tidemark_run_input_read_bytes",
            "gauge",
            "Bytes of the run's input read, as of its last checkpoint.",
            read as f64,
        );
        let size = match &self.input {
            Some(p) => std::fs::metadata(p).ok().map(|m| m.len()),
            None => Some(self.total.load(Ordering::Relaxed)).filter(|&t| t > 0),
        };
        if let Some(size) = size {
            single(
                out,
                "tidemark_run_input_lag_bytes",
                "gauge",
                "Bytes of the input not read yet as of the run's last checkpoint: the file's \
                 size now (of several files, their sizes as opened) less the bytes read.",
                size.saturating_sub(read) as f64,
            );
        }
        single(
            out,
            "tidemark_run_bad_lines_total",
            "counter",
            "Malformed lines this run skipped.",
            self.bad_lines.load(Ordering::Relaxed) as f64,
        );
        single(
            out,
            "tidemark_run_checkpoints_total",
            "counter",
            "Checkpoints this run made (and input ends it reached).",
            self.checkpoints.load(Ordering::Relaxed) as f64,
        );
        single(
            out,
            "tidemark_run_start_timestamp_seconds",
            "gauge",
            "When this run started, seconds since the epoch.",
            self.started_ms as f64 / 1000.0,
        );
        let at = self.checkpoint_ms.load(Ordering::Relaxed);
        if at > 0 {
            single(
                out,
                "tidemark_run_checkpoint_age_seconds",
                "gauge",
                "Seconds since this run's last checkpoint.",
                now_ms().saturating_sub(at) as f64 / 1000.0,
            );
        }
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
    fn lag_is_the_files_size_less_the_checkpointed_offset() -> std::io::Result<()> {
        let dir = std::env::temp_dir().join(format!("tidemark-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let f = dir.join("in.csv");
        std::fs::write(&f, vec![b'x'; 1000])?;
        let h = RunHealth::new(Some(f.clone()));
        h.progress(600, 1000);
        h.bad_line();
        std::fs::write(&f, vec![b'x'; 1500])?;
        let mut out = String::new();
        h.families(&mut out);
        assert!(out.contains("\ntidemark_run_input_lag_bytes 900\n"), "{out}");
        assert!(out.contains("\ntidemark_run_bad_lines_total 1\n"), "{out}");
        assert!(out.contains("\ntidemark_run_checkpoints_total 1\n"), "{out}");
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
