//! The pipeline's health as a store's last checkpoint records it: what `/api/v1/metrics` and
//! `/metrics` report beside the estimates. Below both [`crate::api`] and [`crate::prom`].

use tidemark_stream::config::Config;
use tidemark_stream::engine::{Counters, Engine, NoRows};
use tidemark_stream::pipeline::RunState;

use crate::error::ApiError;

/// A file's identity (device and inode): a store replaced at the same path is opened anew.
pub type FileId = (u64, u64);

pub fn file_id(m: &std::fs::Metadata) -> FileId {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        (m.dev(), m.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        (0, 0)
    }
}

/// The pipeline's health as the store's last checkpoint records it.
pub struct Health {
    /// Records counted over every run.
    pub records: u64,
    /// Malformed lines skipped over every run.
    pub bad_lines: u64,
    /// Whether the last run read its input to the end.
    pub completed: bool,
    /// The largest event time seen, ms.
    pub max_time: Option<u64>,
    /// Per metric, in config order.
    pub metrics: Vec<MetricHealth>,
    /// The input file read last, and where the last checkpoint left it (`None` for standard
    /// input and message sources).
    pub input: Option<InputMark>,
    /// The memory budget of the stored config (`[state] max_memory`; a run's `--max-memory`
    /// flag is not stored: `run --serve` reports its own, and the bytes it holds).
    pub budget: u64,
    /// A message source's partitions as the checkpoint left them: (topic, partition, next
    /// offset).
    pub partitions: Vec<(String, i32, i64)>,
}

/// Where the last checkpoint left the input file read last.
pub struct InputMark {
    /// Its path, as the run read it.
    pub path: String,
    /// Its identity (device, inode), to tell it from a file put at the path since.
    pub file: (u64, u64),
    /// The offset of the next unread line.
    pub offset: u64,
}

impl InputMark {
    /// Bytes of the input not read as of the checkpoint: the file's size now less the
    /// offset, or the whole of a new file at the path (`None`: no file there).
    pub fn lag(&self) -> Option<u64> {
        let m = std::fs::metadata(&self.path).ok()?;
        Some(if file_id(&m) == self.file {
            m.len().saturating_sub(self.offset)
        } else {
            m.len()
        })
    }
}

/// One metric's health.
pub struct MetricHealth {
    /// The engine's counters: events, late, dropped, merged, buckets closed, alerts.
    pub counters: Counters,
    /// Keys held in memory by the writer at its checkpoint.
    pub live_keys: u64,
    /// Buckets starting before this are closed (ms).
    pub watermark: Option<u64>,
}

impl Health {
    /// The health a run state (a store's metadata) records, read with its config.
    pub fn of_state(config: &Config, state: &[u8]) -> Result<Health, ApiError> {
        let damaged = |e: &dyn std::fmt::Display| {
            ApiError::unavailable(format!("the store's run state is damaged: {e}"))
        };
        let state = RunState::from_bytes(state).map_err(|e| damaged(&e))?;
        let engine =
            Engine::restore(config, &state.engine, &mut NoRows).map_err(|e| damaged(&e))?;
        let metrics = (0..engine.metric_count())
            .map(|i| MetricHealth {
                counters: engine.counters(i),
                live_keys: engine.live_keys(i) as u64,
                watermark: engine.closed_until(i),
            })
            .collect();
        Ok(Health {
            budget: config.checkpoint.max_memory,
            partitions: state
                .partitions
                .iter()
                .map(|p| (p.topic.clone(), p.partition, p.offset))
                .collect(),
            records: state.records,
            bad_lines: state.bad_lines,
            completed: state.completed,
            max_time: engine.max_time(),
            metrics,
            input: state
                .files
                .iter()
                .max_by_key(|f| f.used)
                .map(|f| InputMark {
                    path: f.path.clone(),
                    file: (f.dev, f.ino),
                    offset: f.offset,
                }),
        })
    }
}
