//! The crate's errors: a config that cannot be used, an engine that cannot be built or
//! restored, a run that stopped, a query that cannot be answered. Each names what was wrong
//! and where; those caused by another error return it from `source()`.

use core::fmt;

use tidemark::DecodeError;

use crate::store::StoreError;

/// A config that cannot be used: the key and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The TOML does not parse, or a key has the wrong type or is unknown.
    Syntax {
        /// The parser's message (it names the line, column and key).
        message: String,
    },
    /// A key's value is outside its domain.
    Invalid {
        /// The key, as a path (`metric[1].window`).
        key: String,
        /// What it must be.
        expected: String,
        /// What it was.
        got: String,
    },
}

impl ConfigError {
    /// The key, what it must be, and what it was.
    pub(crate) fn invalid(
        key: String,
        expected: impl Into<String>,
        got: impl fmt::Display,
    ) -> ConfigError {
        ConfigError::Invalid {
            key,
            expected: expected.into(),
            got: got.to_string(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Syntax { message } => write!(f, "config: {}", message.trim_end()),
            ConfigError::Invalid { key, expected, got } => {
                write!(f, "config key `{key}`: expected {expected}, got {got}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// A size (`max_memory`, `--max-memory`) that [`crate::config::parse_size`] refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SizeError {
    /// A unit other than B, KiB, MiB, GiB, TiB, KB, MB, GB or TB.
    UnknownUnit {
        /// The size as given.
        text: String,
        /// The unit found.
        unit: String,
    },
    /// No number before the unit.
    NotANumber {
        /// The size as given.
        text: String,
    },
    /// Negative, or 2^63 bytes or more.
    OutOfRange {
        /// The size as given.
        text: String,
    },
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeError::UnknownUnit { text, unit } => write!(
                f,
                "unknown unit {unit:?} in {text:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)"
            ),
            SizeError::NotANumber { text } => write!(
                f,
                "{text:?} is not a size (a number of bytes, or e.g. \"512MiB\")"
            ),
            SizeError::OutOfRange { text } => {
                write!(f, "{text:?} is out of range (0 to 2^63 - 1 bytes)")
            }
        }
    }
}

impl std::error::Error for SizeError {}

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
    Store(StoreError),
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
    Config(ConfigError),
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
    /// A malformed message of a message source (without `skip_bad`).
    BadMessage {
        /// Its topic.
        topic: String,
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
        /// What was wrong.
        message: String,
    },
    /// A message source failed (a broker's fatal error).
    Source {
        /// The source, for messages.
        name: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The store failed.
    Store(StoreError),
    /// The engine cannot be built or restored.
    Engine(EngineError),
    /// The stored run state does not decode.
    State(DecodeError),
    /// One of the run's own threads (parsing, committing) stopped without a word: a bug.
    /// What it had not committed is not in the store; a run after it reads on from the last
    /// checkpoint.
    Thread {
        /// The thread's part of the run.
        name: &'static str,
    },
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
                | RunError::BadMessage { .. }
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
            RunError::BadMessage {
                topic,
                partition,
                offset,
                message,
            } => write!(
                f,
                "topic {topic} partition {partition} offset {offset}: {message}"
            ),
            RunError::Source { name, source } => write!(f, "{name}: {source}"),
            RunError::Store(e) => e.fmt(f),
            RunError::Engine(e) => e.fmt(f),
            RunError::State(e) => write!(f, "stored run state: {e}"),
            RunError::Thread { name } => write!(
                f,
                "the run's {name} thread stopped unexpectedly (a bug: please report it); the \
                 store holds the last checkpoint, and a run after this one reads on from it"
            ),
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
            RunError::Source { source, .. } => Some(&**source),
            _ => None,
        }
    }
}
/// A query that cannot be answered.
#[derive(Debug)]
#[non_exhaustive]
pub enum QueryError {
    /// The store holds no committed run.
    Empty,
    /// No metric of that name.
    NoMetric {
        /// The name asked for.
        name: String,
        /// The metrics the store has.
        have: Vec<String>,
    },
    /// The window is not a positive multiple of the metric's bucket width.
    BadWindow {
        /// The window asked for, ms.
        window: u64,
        /// The bucket width, ms.
        bucket: u64,
    },
    /// The store failed.
    Store(StoreError),
    /// The whole window lies before the metric's retention horizon: its buckets are deleted
    /// once the run passes them, so no answer for it can be trusted.
    BeforeRetention {
        /// The metric asked for.
        metric: String,
        /// The window's end, ms.
        to: u64,
        /// The earliest bucket start the store is sure to hold, ms.
        horizon: u64,
        /// The metric's retention, ms.
        retention: u64,
        /// The metric's rollup, which keeps its periods longer (none for a rollup).
        rollup: Option<String>,
    },
    /// The stored config or state does not parse.
    Corrupt {
        /// What failed.
        message: String,
    },
    /// The quantiles asked of a row: none, more than a row answers, or one outside (0, 1].
    BadQuantiles {
        /// How many were asked.
        count: usize,
        /// The most a row answers.
        most: usize,
        /// The first outside (0, 1], if any.
        outside: Option<f64>,
    },
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueryError::Empty => write!(
                f,
                "the store holds no committed run (a run commits its first checkpoint as it \
                 starts: is this the store a run wrote?)"
            ),
            QueryError::NoMetric { name, have } => {
                write!(
                    f,
                    "no metric {name:?} in the store (it has {})",
                    have.join(", ")
                )
            }
            QueryError::BadWindow { window, bucket } => write!(
                f,
                "window {} is not a positive multiple of the bucket width {}",
                crate::time::format_duration(*window),
                crate::time::format_duration(*bucket)
            ),
            QueryError::BeforeRetention {
                metric,
                to,
                horizon,
                retention,
                rollup,
            } => {
                let time = crate::time::format_rfc3339;
                write!(
                    f,
                    "the window ending at {} lies before {metric}'s retention horizon {} (its \
                     retention is {}): buckets before it are deleted as the run passes them; \
                     ask for a window ending after {}",
                    time(*to),
                    time(*horizon),
                    crate::time::format_duration(*retention),
                    time(*horizon),
                )?;
                match rollup {
                    Some(r) => write!(f, ", or the rollup {r}, kept longer"),
                    None => Ok(()),
                }
            }
            QueryError::Store(e) => e.fmt(f),
            QueryError::Corrupt { message } => write!(f, "stored state: {message}"),
            QueryError::BadQuantiles {
                count,
                most,
                outside,
            } => match outside {
                Some(q) => write!(f, "quantile {q} is not in (0, 1] (0.99 is the p99)"),
                None => write!(f, "{count} quantiles asked: a row answers 1 to {most}"),
            },
        }
    }
}

impl std::error::Error for QueryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            QueryError::Store(e) => Some(e),
            _ => None,
        }
    }
}
