//! The pipeline's TOML config, and its validation into [`Config`]. Every error names the key
//! (`metric[0].bucket`) and what was expected.
//!
//! Every key, with its default and its domain ([`REFERENCE`], printed by `tidemark config`):
#![doc = concat!("\n```toml\n", include_str!("reference.toml"), "```")]

use serde::Deserialize;

use crate::error::SizeError;
use crate::kinds::{Input, KindKeys, KIND_NAMES};
use crate::rule::AlertRule;
use crate::time::{format_duration, parse_duration, TimeFormat};

mod alert;

pub use crate::error::ConfigError;
pub use crate::kinds::{Kind, SketchKind};

/// Every config key with its default and domain, as a commented config that is itself valid.
pub const REFERENCE: &str = include_str!("reference.toml");

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    input: RawInput,
    state: Option<RawState>,
    source: Option<RawSource>,
    #[serde(default)]
    metric: Vec<RawMetric>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawInput {
    format: Option<String>,
    time_field: String,
    time_format: Option<String>,
    max_ahead: Option<String>,
    max_line_bytes: Option<i64>,
    max_key_bytes: Option<i64>,
    max_item_bytes: Option<i64>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawSource {
    kind: String,
    brokers: Option<String>,
    topic: Option<toml::Value>,
    group: Option<String>,
    #[serde(default)]
    properties: toml::Table,
    columns: Option<Vec<String>>,
    idle_timeout: Option<String>,
    connect_timeout: Option<String>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawState {
    checkpoint: Option<String>,
    checkpoint_records: Option<i64>,
    max_memory: Option<toml::Value>,
}

/// A `[[metric]]` table as written: the keys every metric has, and the rest (its kind's
/// keys, read by the kind; a key no kind reads is refused).
#[derive(Deserialize, Debug)]
struct RawMetric {
    name: String,
    kind: String,
    key: Vec<String>,
    #[serde(default)]
    item: Vec<String>,
    value: Option<String>,
    bucket: String,
    window: String,
    retention: Option<String>,
    rollup: Option<String>,
    rollup_retention: Option<String>,
    allowed_lateness: Option<String>,
    late: Option<String>,
    #[serde(default)]
    alert: Vec<alert::RawAlert>,
    #[serde(flatten)]
    rest: toml::Table,
}

/// The input's record format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated values; the first line of each file names the fields.
    Csv,
    /// One JSON object per line.
    JsonLines,
}

/// A `[source]` table: records read from a Kafka topic instead of files, as plain data (the
/// client lives outside this crate; `tidemark run` connects it). The brokers, topics and group
/// may be left to `run`'s flags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceConfig {
    /// The brokers, `host:port[,host:port…]`.
    pub brokers: Option<String>,
    /// The topics (one or more).
    pub topics: Vec<String>,
    /// The consumer group.
    pub group: Option<String>,
    /// Client properties passed through to the client as they are (librdkafka's names:
    /// `security.protocol`, `sasl.mechanism`, …), in file order.
    pub properties: Vec<(String, String)>,
    /// A CSV record's fields, in order (a message has no header line); empty for JSON.
    pub columns: Vec<String>,
    /// How long a partition may stay without messages before the watermark leaves it out,
    /// ms (`None`: the client's default, 10 s).
    pub idle_timeout: Option<u64>,
    /// How long to wait for a broker to answer at start, ms (`None`: the client's default,
    /// 30 s).
    pub connect_timeout: Option<u64>,
}

/// Where the time, key and item fields are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputConfig {
    /// CSV or JSON Lines.
    pub format: Format,
    /// The time field's name.
    pub time_field: String,
    /// How the time field is written.
    pub time_format: TimeFormat,
    /// How far ahead of the latest event time seen a record may be, ms: a record further
    /// ahead is a bad line and never moves the watermark (one mistyped year would otherwise
    /// expire every stored bucket and drop every later event as late).
    pub max_ahead: u64,
    /// Limits on what one line may hold, bytes.
    pub limits: Limits,
}

/// The largest line, key and item a record may have, bytes: anything longer is a bad line,
/// so no input line can make the pipeline hold more than this per record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A whole line, its newline excluded (default 1 MiB, at most 64 MiB).
    pub line: usize,
    /// A metric's key, its fields joined (default 4 KiB, at most 64 KiB).
    pub key: usize,
    /// A metric's item, its fields joined (default 4 KiB, at most 64 KiB: a frequency
    /// metric's stored item names are at most that long).
    pub item: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            line: 1 << 20,
            key: 4096,
            item: 4096,
        }
    }
}

/// When the pipeline checkpoints: its closed buckets, late merges, retention deletes, input
/// position and engine state are committed together, atomically, at most `interval` of wall
/// time and at most `records` records apart (and at the end of the input). A crash loses
/// only what came after the last checkpoint, and the next run reads it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointConfig {
    /// Wall-clock interval, ms (default 5 s).
    pub interval: u64,
    /// Records (default 10,000,000). Every checkpoint writes the state rows of every key
    /// changed since the last (of `examples/requests.toml`'s two metrics over 20,000 busy
    /// keys: a third of a second of CPU); at about a million records a second, the wall-clock
    /// interval is the bound that acts, and this one only where records come faster.
    pub records: u64,
    /// The memory budget of the keys' state, bytes (default 1 GiB), counting the copies bucket
    /// closes and checkpoints make of it: past ⅓ of it a checkpoint spills the least recently
    /// active quiet keys to the store, down to ⅙ (see [`crate::engine::spill`]); a run whose
    /// keys that cannot spill pass ½ of it stops.
    pub max_memory: u64,
}

/// The field that names a message's key (a message source's records).
pub const KEY_FIELD: &str = "@key";
/// The field that names a message's timestamp (ms since the epoch).
pub const TIMESTAMP_FIELD: &str = "@timestamp";

/// The default state budget: 1 GiB.
pub const DEFAULT_MAX_MEMORY: u64 = 1 << 30;

/// The smallest state budget accepted (64 KiB: a test's, to force spilling).
pub const MIN_MAX_MEMORY: u64 = 1 << 16;

/// Parses a size: an integer of bytes, or a number with `KiB`, `MiB`, `GiB`, `TiB` (powers of
/// 1024) or `KB`, `MB`, `GB`, `TB` (powers of 1000), e.g. `"512MiB"`, `"1.5GiB"`.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit_bytes: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "TiB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        u => {
            return Err(SizeError::UnknownUnit {
                text: text.to_string(),
                unit: u.to_string(),
            })
        }
    };
    let n: f64 = num.parse().map_err(|_| SizeError::NotANumber {
        text: text.to_string(),
    })?;
    let bytes = n * unit_bytes as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes >= 2f64.powi(63) {
        return Err(SizeError::OutOfRange {
            text: text.to_string(),
        });
    }
    Ok(bytes as u64)
}

impl Default for CheckpointConfig {
    fn default() -> CheckpointConfig {
        CheckpointConfig {
            interval: 5_000,
            records: 10_000_000,
            max_memory: DEFAULT_MAX_MEMORY,
        }
    }
}

/// The default `max_ahead`: one hour.
pub const DEFAULT_MAX_AHEAD: u64 = 3_600_000;

/// Whether a metric name is 1 to 64 ASCII letters, digits, `_`, `-` or `.`: rollups are
/// stored as `name@width`, so `@` (and anything a shell or a file name would mangle) is out.
pub fn valid_metric_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// What happens to an event for a bucket that has already closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatePolicy {
    /// Drop it and count it.
    Drop,
    /// Read the stored bucket, merge the event in, write it back.
    Merge,
}

/// One validated metric.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricConfig {
    /// Its name.
    pub name: String,
    /// What it summarises.
    pub kind: Kind,
    /// Key fields.
    pub key: Vec<String>,
    /// Item fields (empty for a kind that takes none).
    pub item: Vec<String>,
    /// The numeric value field, for a kind over values.
    pub value: Option<String>,
    /// Bucket width, ms.
    pub bucket: u64,
    /// Window, ms: a multiple of `bucket`.
    pub window: u64,
    /// Retention, ms, at least `window`.
    pub retention: u64,
    /// Rollup width, ms: a multiple of `bucket`, larger than it; complete periods of buckets
    /// are merged into one bucket of this width, stored under [`MetricConfig::rollup_name`].
    pub rollup: Option<u64>,
    /// How long rollup buckets are kept, ms.
    pub rollup_retention: u64,
    /// Allowed lateness, ms.
    pub allowed_lateness: u64,
    /// Late policy.
    pub late: LatePolicy,
    /// Alert rules.
    pub alerts: Vec<AlertRule>,
}

impl MetricConfig {
    /// The name rollup buckets are stored under: `name@width` (`fanout@1h`).
    pub fn rollup_name(&self) -> Option<String> {
        self.rollup
            .map(|w| format!("{}@{}", self.name, format_duration(w)))
    }
}

/// A validated config.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The input.
    pub input: InputConfig,
    /// The metrics, in file order.
    pub metrics: Vec<MetricConfig>,
    /// When state is committed.
    pub checkpoint: CheckpointConfig,
    /// A message source to read instead of files (`[source]`), if any.
    pub source: Option<SourceConfig>,
    /// The TOML it was parsed from (the store keeps it, so queries need only the file).
    text: String,
}

fn duration(key: String, text: &str) -> Result<u64, ConfigError> {
    match parse_duration(text) {
        Some(ms) if ms > 0 => Ok(ms),
        _ => Err(ConfigError::invalid(
            key,
            "a positive duration of at most 100 years with a unit: ms, s, m, h or d \
             (\"30s\", \"5m\")",
            format!("{text:?}"),
        )),
    }
}

/// Metric `m`'s kind, from its `kind` and the keys of its own; a key no kind reads, or one
/// another kind reads, is refused by name.
fn metric_kind(m: &RawMetric, at: &dyn Fn(&str) -> String) -> Result<Kind, ConfigError> {
    for key in m.rest.keys() {
        if Kind::kinds_reading(key).is_empty() {
            return Err(ConfigError::invalid(
                at(key),
                "a key of a [[metric]] table (this one is unknown: see `tidemark config`)",
                key,
            ));
        }
    }
    // The kind's own keys first (a bad value of its own is the first thing to fix), then
    // the keys another kind reads.
    let keys = KindKeys::new(&m.rest, at);
    let kind = Kind::parse(&m.kind, &keys).unwrap_or_else(|| {
        let names: Vec<String> = KIND_NAMES.iter().map(|n| format!("{n:?}")).collect();
        Err(ConfigError::invalid(
            at("kind"),
            names.join(", "),
            format!("{:?}", m.kind),
        ))
    })?;
    for key in m.rest.keys() {
        let readers = Kind::kinds_reading(key);
        if !readers.split(" or ").any(|k| k == kind.name()) {
            return Err(ConfigError::invalid(
                at(key),
                format!("no {key} for a {} metric ({readers} only)", kind.name()),
                key,
            ));
        }
    }
    Ok(kind)
}

/// Refuses `item` and `value` fields a kind does not take, and requires those it does.
fn check_input(m: &RawMetric, kind: &Kind, at: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
    let name = kind.name();
    let takes_items = matches!(kind.input(), Input::Items { .. });
    if takes_items && (m.item.is_empty() || m.item.iter().any(String::is_empty)) {
        return Err(ConfigError::invalid(
            at("item"),
            format!("a non-empty list of field names for a {name} metric"),
            format!("{:?}", m.item),
        ));
    }
    if !takes_items && !m.item.is_empty() {
        let why = match kind.input() {
            Input::Value => "it reads its `value` field",
            _ => "it counts events",
        };
        return Err(ConfigError::invalid(
            at("item"),
            format!("no item fields for a {name} metric ({why})"),
            format!("{:?}", m.item),
        ));
    }
    match (kind.input(), m.value.as_deref()) {
        (Input::Value, None | Some("")) => Err(ConfigError::invalid(
            at("value"),
            format!("the name of the numeric field a {name} metric summarises"),
            format!("{:?}", m.value.as_deref().unwrap_or("")),
        )),
        (Input::Value, Some(_)) | (_, None) => Ok(()),
        (_, Some(v)) => Err(ConfigError::invalid(
            at("value"),
            format!("no value field for a {name} metric (it reads none)"),
            format!("{v:?}"),
        )),
    }
}

/// Validates a `[source]` table: a Kafka source, its topics one or a list, its properties
/// passed through as text, and for CSV its columns, which must name every field read (the time
/// field and the metrics' fields, except the message's own `@key` and `@timestamp`).
fn source_config(
    raw: RawSource,
    format: Format,
    time_field: &str,
    metrics: &[MetricConfig],
) -> Result<SourceConfig, ConfigError> {
    if raw.kind != "kafka" {
        return Err(ConfigError::invalid(
            "source.kind".into(),
            "\"kafka\"",
            format!("{:?}", raw.kind),
        ));
    }
    let topics = match raw.topic {
        None => Vec::new(),
        Some(toml::Value::String(t)) => vec![t],
        Some(toml::Value::Array(list)) => list
            .into_iter()
            .map(|v| match v {
                toml::Value::String(t) => Ok(t),
                other => Err(ConfigError::invalid(
                    "source.topic".into(),
                    "a topic name or a list of them",
                    other.type_str(),
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(ConfigError::invalid(
                "source.topic".into(),
                "a topic name or a list of them",
                other.type_str(),
            ))
        }
    };
    if topics.iter().any(|t| t.trim().is_empty()) {
        return Err(ConfigError::invalid(
            "source.topic".into(),
            "topic names, none empty",
            format!("{topics:?}"),
        ));
    }
    let mut properties = Vec::new();
    for (key, value) in raw.properties {
        let text = match value {
            toml::Value::String(t) => t,
            toml::Value::Integer(n) => n.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => {
                return Err(ConfigError::invalid(
                    format!("source.properties.{key}"),
                    "a string, an integer or a boolean",
                    other.type_str(),
                ))
            }
        };
        properties.push((key, text));
    }
    let columns = raw.columns.unwrap_or_default();
    match format {
        Format::Csv => {
            if columns.is_empty() || columns.iter().any(|c| c.trim().is_empty()) {
                return Err(ConfigError::invalid(
                    "source.columns".into(),
                    "the names of a CSV message's fields, in order (a message has no header \
                     line)",
                    format!("{columns:?}"),
                ));
            }
            let fields = metrics
                .iter()
                .flat_map(|m| m.key.iter().chain(&m.item).chain(&m.value))
                .map(String::as_str)
                .chain([time_field]);
            for f in fields {
                if f != KEY_FIELD && f != TIMESTAMP_FIELD && !columns.iter().any(|c| c.trim() == f)
                {
                    return Err(ConfigError::invalid(
                        "source.columns".into(),
                        format!("a list naming field {f:?} (or read it from @key or @timestamp)"),
                        format!("{columns:?}"),
                    ));
                }
            }
        }
        Format::JsonLines if !columns.is_empty() => {
            return Err(ConfigError::invalid(
                "source.columns".into(),
                "no columns for JSON messages (their fields are named)",
                format!("{columns:?}"),
            ))
        }
        Format::JsonLines => {}
    }
    let idle_timeout = match raw.idle_timeout.as_deref() {
        None => None,
        Some(t) => Some(duration("source.idle_timeout".into(), t)?),
    };
    let connect_timeout = match raw.connect_timeout.as_deref() {
        None => None,
        Some(t) => Some(duration("source.connect_timeout".into(), t)?),
    };
    Ok(SourceConfig {
        connect_timeout,
        brokers: raw.brokers,
        topics,
        group: raw.group,
        properties,
        columns,
        idle_timeout,
    })
}

impl Config {
    /// Parses and validates a TOML config.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            message: e.to_string(),
        })?;
        let format = match raw.input.format.as_deref().unwrap_or("csv") {
            "csv" => Format::Csv,
            "jsonl" => Format::JsonLines,
            other => {
                return Err(ConfigError::invalid(
                    "input.format".into(),
                    "\"csv\" or \"jsonl\"",
                    format!("{other:?}"),
                ))
            }
        };
        let tf = raw.input.time_format.as_deref().unwrap_or("epoch_s");
        let time_format = TimeFormat::from_name(tf).ok_or_else(|| {
            ConfigError::invalid(
                "input.time_format".into(),
                "\"epoch_s\", \"epoch_ms\" or \"rfc3339\"",
                format!("{tf:?}"),
            )
        })?;
        if raw.input.time_field.is_empty() {
            return Err(ConfigError::invalid(
                "input.time_field".into(),
                "a field name",
                "\"\"",
            ));
        }
        let max_ahead = match raw.input.max_ahead.as_deref() {
            None => DEFAULT_MAX_AHEAD,
            Some(t) => duration("input.max_ahead".into(), t)?,
        };
        let limit = |key: &str, v: Option<i64>, default: usize, max: usize| match v {
            None => Ok(default),
            Some(n) if n >= 1 && n as u64 <= max as u64 => Ok(n as usize),
            Some(n) => Err(ConfigError::invalid(
                format!("input.{key}"),
                format!("an integer in 1..={max}"),
                n,
            )),
        };
        let d = Limits::default();
        let limits = Limits {
            line: limit("max_line_bytes", raw.input.max_line_bytes, d.line, 64 << 20)?,
            key: limit("max_key_bytes", raw.input.max_key_bytes, d.key, 1 << 16)?,
            item: limit("max_item_bytes", raw.input.max_item_bytes, d.item, 1 << 16)?,
        };
        let mut checkpoint = CheckpointConfig::default();
        if let Some(st) = &raw.state {
            if let Some(t) = &st.checkpoint {
                checkpoint.interval = duration("state.checkpoint".into(), t)?;
            }
            if let Some(n) = st.checkpoint_records {
                if !(1..=1_000_000_000).contains(&n) {
                    return Err(ConfigError::invalid(
                        "state.checkpoint_records".into(),
                        "an integer in 1..=1000000000",
                        n,
                    ));
                }
                checkpoint.records = n as u64;
            }
            if let Some(v) = &st.max_memory {
                let field = || "state.max_memory".to_string();
                let n = match v {
                    toml::Value::Integer(n) if *n >= 0 => *n as u64,
                    toml::Value::String(t) => parse_size(t)
                        .map_err(|e| ConfigError::invalid(field(), "a size such as \"1GiB\"", e))?,
                    other => {
                        return Err(ConfigError::invalid(
                            field(),
                            "a size such as \"1GiB\" or an integer of bytes",
                            other.type_str(),
                        ))
                    }
                };
                if n < MIN_MAX_MEMORY {
                    return Err(ConfigError::invalid(field(), "at least 64KiB", n));
                }
                checkpoint.max_memory = n;
            }
        }
        if raw.metric.is_empty() {
            return Err(ConfigError::invalid(
                "metric".into(),
                "at least one [[metric]] table",
                "none",
            ));
        }
        let mut metrics = Vec::new();
        for (i, m) in raw.metric.into_iter().enumerate() {
            let at = |k: &str| format!("metric[{i}].{k}");
            if !valid_metric_name(&m.name) {
                return Err(ConfigError::invalid(
                    at("name"),
                    "1 to 64 of the characters A-Z a-z 0-9 _ - . (a rollup is stored as \
                     name@width)",
                    format!("{:?}", m.name),
                ));
            }
            if metrics.iter().any(|x: &MetricConfig| x.name == m.name) {
                return Err(ConfigError::invalid(
                    at("name"),
                    "a name no other metric has",
                    format!("{:?}", m.name),
                ));
            }
            let kind = metric_kind(&m, &at)?;
            // `key = []`: the whole stream is one key, the empty one ("distinct users per
            // hour overall").
            if m.key.iter().any(String::is_empty) {
                return Err(ConfigError::invalid(
                    at("key"),
                    "a list of field names (none: the whole stream as one key)",
                    format!("{:?}", m.key),
                ));
            }
            check_input(&m, &kind, &at)?;
            let bucket = duration(at("bucket"), &m.bucket)?;
            let window = duration(at("window"), &m.window)?;
            if window % bucket != 0 {
                return Err(ConfigError::invalid(
                    at("window"),
                    format!("a multiple of the bucket width {}", format_duration(bucket)),
                    format!("{:?}", m.window),
                ));
            }
            let rollup = match &m.rollup {
                None => None,
                Some(r) => {
                    let w = duration(at("rollup"), r)?;
                    if w <= bucket || w % bucket != 0 {
                        return Err(ConfigError::invalid(
                            at("rollup"),
                            format!(
                                "a multiple of the bucket width {} larger than it",
                                format_duration(bucket)
                            ),
                            format!("{r:?}"),
                        ));
                    }
                    Some(w)
                }
            };
            // A rollup period's buckets are rolled up when the period ends: they must still be
            // stored then, so the retention covers a period (by default too).
            let retention = match &m.retention {
                Some(r) => duration(at("retention"), r)?,
                None => window.max(86_400_000).max(rollup.unwrap_or(0)),
            };
            if retention < window {
                return Err(ConfigError::invalid(
                    at("retention"),
                    format!("at least the window {}", format_duration(window)),
                    format!("{:?}", m.retention.clone().unwrap_or_default()),
                ));
            }
            if let Some(r) = rollup.filter(|&r| retention < r) {
                return Err(ConfigError::invalid(
                    at("retention"),
                    format!(
                        "at least the rollup {} (a period's buckets are rolled up at its end)",
                        format_duration(r)
                    ),
                    format!("{:?}", m.retention.clone().unwrap_or_default()),
                ));
            }
            let rollup_retention = match &m.rollup_retention {
                Some(r) => duration(at("rollup_retention"), r)?,
                None => 30 * 86_400_000,
            };
            let allowed_lateness = match m.allowed_lateness.as_deref() {
                None | Some("0") | Some("0s") | Some("0ms") => 0,
                Some(l) => duration(at("allowed_lateness"), l)?,
            };
            let late = match m.late.as_deref().unwrap_or("drop") {
                "drop" => LatePolicy::Drop,
                "merge" => LatePolicy::Merge,
                other => {
                    return Err(ConfigError::invalid(
                        at("late"),
                        "\"drop\" or \"merge\"",
                        format!("{other:?}"),
                    ))
                }
            };
            let alerts = alert::parse(i, &kind, &m.alert)?;
            metrics.push(MetricConfig {
                name: m.name,
                kind,
                key: m.key,
                item: m.item,
                value: m.value,
                bucket,
                window,
                retention,
                rollup,
                rollup_retention,
                allowed_lateness,
                late,
                alerts,
            });
        }
        let source = match raw.source {
            None => None,
            Some(raw_source) => Some(source_config(
                raw_source,
                format,
                &raw.input.time_field,
                &metrics,
            )?),
        };
        Ok(Config {
            input: InputConfig {
                format,
                time_field: raw.input.time_field,
                time_format,
                max_ahead,
                limits,
            },
            metrics,
            checkpoint,
            source,
            text: text.to_string(),
        })
    }

    /// A fingerprint of everything that shapes stored state (metrics, kinds, widths,
    /// parameters, fields): a store written under one fingerprint refuses another config.
    pub fn fingerprint(&self) -> u64 {
        let mut s = format!(
            "{:?}|{:?}|{:?}",
            self.input.format, self.input.time_field, self.input.time_format
        );
        for m in &self.metrics {
            s.push_str(&format!(
                "|{}:{}:{:?}:{:?}:{}:{}:{}:{}:{:?}:{:?}:{}",
                m.name,
                m.kind.fingerprint(),
                m.key,
                m.item,
                m.bucket,
                m.window,
                m.retention,
                m.allowed_lateness,
                m.late,
                m.rollup,
                m.rollup_retention
            ));
            // Only a kind over values has one: older configs' fingerprints stay as they were.
            if let Some(v) = &m.value {
                s.push_str(&format!(":value={v:?}"));
            }
        }
        xxhash_rust::xxh3::xxh3_64(s.as_bytes())
    }

    /// The TOML text the config was parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The metric called `name`, with its index.
    pub fn metric(&self, name: &str) -> Option<(usize, &MetricConfig)> {
        self.metrics
            .iter()
            .enumerate()
            .find(|(_, m)| m.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::AlertOn;

    const GOOD: &str = r#"
[input]
time_field = "ts"

[[metric]]
name = "fanout"
kind = "distinct"
key = ["src"]
item = ["dst", "port"]
bucket = "1m"
window = "5m"
precision = 10
allowed_lateness = "30s"
late = "merge"

[[metric.alert]]
above = 500
margin = 3
consecutive = 2
"#;

    #[test]
    fn a_good_config_validates() {
        let c = Config::from_toml(GOOD).unwrap();
        assert_eq!(c.input.format, Format::Csv);
        assert_eq!(c.input.time_format, TimeFormat::EpochSeconds);
        let m = &c.metrics[0];
        assert_eq!(
            m.kind,
            Kind::Distinct(crate::kinds::DistinctParams {
                precision: 10,
                sketch: SketchKind::HyperLogLog
            })
        );
        assert_eq!(
            (m.bucket, m.window, m.allowed_lateness),
            (60_000, 300_000, 30_000)
        );
        assert_eq!(m.late, LatePolicy::Merge);
        assert_eq!(m.alerts[0].consecutive, 2);
        assert_eq!(m.alerts[0].on, AlertOn::Value);
    }

    #[test]
    fn a_distinct_metric_may_keep_an_exaloglog() {
        let c =
            Config::from_toml(&GOOD.replace("precision = 10", "sketch = \"exaloglog\"")).unwrap();
        assert_eq!(
            c.metrics[0].kind,
            Kind::Distinct(crate::kinds::DistinctParams {
                precision: 9,
                sketch: SketchKind::ExaLogLog
            })
        );
        let hll = Config::from_toml(&GOOD.replace("precision = 10", "precision = 9")).unwrap();
        assert_ne!(c.fingerprint(), hll.fingerprint());
        let e = err_of(&GOOD.replace("precision = 10", "sketch = \"cpc\""));
        assert!(
            e.contains("metric[0].sketch") && e.contains("exaloglog"),
            "{e}"
        );
        // ExaLogLog's error at p = 7 is HyperLogLog's at p = 10, within 3%.
        let (ell, hll) = (
            SketchKind::ExaLogLog.rse(7),
            SketchKind::HyperLogLog.rse(10),
        );
        assert!((ell / hll - 1.0).abs() < 0.03, "{ell} {hll}");
    }

    fn err_of(text: &str) -> String {
        Config::from_toml(text).unwrap_err().to_string()
    }

    #[test]
    fn each_bad_value_names_its_key() {
        for (from, to, key) in [
            (
                "bucket = \"1m\"",
                "bucket = \"1 minute\"",
                "metric[0].bucket",
            ),
            ("window = \"5m\"", "window = \"90s\"", "metric[0].window"),
            ("precision = 10", "precision = 30", "metric[0].precision"),
            ("kind = \"distinct\"", "kind = \"sum\"", "metric[0].kind"),
            ("late = \"merge\"", "late = \"keep\"", "metric[0].late"),
            (
                "consecutive = 2",
                "consecutive = 0",
                "metric[0].alert[0].consecutive",
            ),
            ("margin = 3", "margin = -1", "metric[0].alert[0].margin"),
            ("item = [\"dst\", \"port\"]", "item = []", "metric[0].item"),
            ("precision = 10", "phi = 0.1", "metric[0].phi"),
            ("precision = 10", "epsilon = 0.1", "metric[0].epsilon"),
            (
                "kind = \"distinct\"",
                "kind = \"frequency\"",
                "metric[0].precision",
            ),
            (
                "kind = \"distinct\"\nkey",
                "kind = \"frequency\"\nphi = 0.01\nkey",
                "metric[0].phi",
            ),
            (
                "time_field = \"ts\"",
                "time_field = \"ts\"\ntime_format = \"unix\"",
                "input.time_format",
            ),
            // Names: `@` is the rollups', and the store's keys are no place for `/` or NUL.
            (
                "name = \"fanout\"",
                "name = \"requests@1h\"",
                "metric[0].name",
            ),
            ("name = \"fanout\"", "name = \"a/b\"", "metric[0].name"),
            (
                "name = \"fanout\"",
                "name = \"a\\u0000b\"",
                "metric[0].name",
            ),
            ("name = \"fanout\"", "name = \"\"", "metric[0].name"),
            (
                "time_field = \"ts\"",
                "time_field = \"ts\"\nmax_ahead = \"soon\"",
                "input.max_ahead",
            ),
            (
                "time_field = \"ts\"",
                "time_field = \"ts\"\nmax_line_bytes = 0",
                "input.max_line_bytes",
            ),
            (
                "time_field = \"ts\"",
                "time_field = \"ts\"\nmax_key_bytes = 65537",
                "input.max_key_bytes",
            ),
            ("window = \"5m\"", "window = \"36600d\"", "metric[0].window"),
        ] {
            let text = GOOD.replace(from, to);
            assert_ne!(text, GOOD);
            let e = err_of(&text);
            assert!(e.contains(&format!("`{key}`")), "{to}: {e}");
            assert!(e.contains("expected"), "{e}");
        }
    }

    #[test]
    fn frequency_defaults_and_limits() {
        let text = GOOD
            .replace("kind = \"distinct\"", "kind = \"frequency\"")
            .replace("precision = 10", "epsilon = 0.02");
        let c = Config::from_toml(&text).unwrap();
        assert_eq!(
            c.metrics[0].kind,
            Kind::Frequency(crate::kinds::FrequencyParams {
                epsilon: 0.02,
                delta: 0.01,
                phi: 0.05
            })
        );
        // A count metric's ε: within (0, 1) and no finer than its histogram takes.
        let count = |e: &str| {
            format!(
                "[input]\ntime_field = \"ts\"\n[[metric]]\nname = \"c\"\nkind = \"count\"\n\
                 key = [\"k\"]\nbucket = \"1m\"\nwindow = \"5m\"\nepsilon = {e}\n"
            )
        };
        for bad in ["0.0", "1.0", "5e-7", "1e-300", "-0.5"] {
            let e = err_of(&count(bad));
            assert!(e.contains("`metric[0].epsilon`"), "{bad}: {e}");
        }
        Config::from_toml(&count("0.000001")).expect("ε = 10^-6 is the finest a count takes");
        Config::from_toml(&count("0.5")).expect("ε = 0.5 is a count's ε");
        for (bad, key) in [
            ("epsilon = 0.0000001", "epsilon"),
            ("epsilon = 0.02\ndelta = 1.0", "delta"),
            ("epsilon = 0.02\nphi = 0.02", "phi"),
            ("epsilon = 0.02\nphi = 1.5", "phi"),
        ] {
            let e = err_of(&text.replace("epsilon = 0.02", bad));
            assert!(e.contains(&format!("`metric[0].{key}`")), "{bad}: {e}");
        }
        // Early alerts are for count and distinct metrics.
        let e = err_of(&format!("{text}early = true\n"));
        assert!(e.contains("`metric[0].alert[0].early`"), "{e}");
        let early = Config::from_toml(&format!("{GOOD}early = true\n"))
            .expect("early = true is valid on a distinct metric");
        assert!(early.metrics[0].alerts[0].early);
    }

    #[test]
    fn type_errors_and_unknown_keys_name_the_key() {
        let e = err_of(&GOOD.replace("precision = 10", "precision = \"ten\""));
        assert!(e.contains("precision"), "{e}");
        let e = err_of(&GOOD.replace("precision = 10", "precison = 10"));
        assert!(e.contains("precison"), "{e}");
        let e = err_of("[input]\n");
        assert!(e.contains("time_field"), "{e}");
    }

    #[test]
    fn the_reference_is_a_valid_config_naming_every_key() {
        // Valid: keys are refused when unknown, so the reference documents no key that is not
        // read; and it names each key the parser reads (commented where another kind's).
        let c = Config::from_toml(REFERENCE).expect("the printed reference is a valid config");
        assert_eq!(c.metrics.len(), 1);
        for key in [
            "format",
            "time_field",
            "time_format",
            "max_ahead",
            "max_line_bytes",
            "max_key_bytes",
            "max_item_bytes",
            "checkpoint",
            "checkpoint_records",
            "max_memory",
            "brokers",
            "topic",
            "group",
            "columns",
            "idle_timeout",
            "connect_timeout",
            "name",
            "kind",
            "key",
            "item",
            "bucket",
            "window",
            "precision",
            "epsilon",
            "delta",
            "phi",
            "value",
            "alpha",
            "schema",
            "bin_limit",
            "quantiles",
            "quantile",
            "retention",
            "rollup",
            "rollup_retention",
            "allowed_lateness",
            "late",
            "above",
            "margin",
            "consecutive",
            "on",
        ] {
            assert!(
                REFERENCE.lines().any(|l| l
                    .trim_start_matches(['#', ' '])
                    .starts_with(&format!("{key} ="))),
                "the reference does not document {key}"
            );
        }
    }

    #[test]
    fn fingerprint_follows_the_shape_not_the_alerts() {
        let a = Config::from_toml(GOOD).unwrap();
        let b = Config::from_toml(&GOOD.replace("above = 500", "above = 600")).unwrap();
        let c = Config::from_toml(&GOOD.replace("precision = 10", "precision = 11")).unwrap();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
    }

    const LATENCY: &str = r#"
[input]
time_field = "ts"

[[metric]]
name = "latency"
kind = "quantile"
key = ["endpoint"]
value = "ms"
bucket = "1m"
window = "5m"

[[metric.alert]]
quantile = 0.99
above = 250
on = "low"
"#;

    #[test]
    fn a_quantile_metric_reads_a_value_and_its_rules_name_a_quantile() {
        let c = Config::from_toml(LATENCY).unwrap();
        let m = &c.metrics[0];
        let Kind::Quantile(q) = m.kind else {
            panic!("a quantile metric: {:?}", m.kind)
        };
        assert_eq!(q.quantiles(), [0.5, 0.9, 0.99]);
        assert_eq!(q.bin_limit, 4096);
        assert_eq!(q.mapping.alpha(), 0.01);
        assert_eq!(m.value.as_deref(), Some("ms"));
        assert_eq!(m.alerts[0].quantile, Some(0.99));
        let schema = Config::from_toml(&LATENCY.replace(
            "value = ",
            "schema = 5
value = ",
        ))
        .expect("a schema instead of alpha");
        let Kind::Quantile(s) = schema.metrics[0].kind else {
            panic!(
                "a quantile metric with a schema: {:?}",
                schema.metrics[0].kind
            )
        };
        assert!(
            (s.mapping.alpha() - 0.0108).abs() < 1e-4,
            "{}",
            s.mapping.alpha()
        );
        assert_ne!(c.fingerprint(), schema.fingerprint());
        // The quantiles a row lists change nothing stored; the value field does.
        let listed = Config::from_toml(&LATENCY.replace(
            "value = ",
            "quantiles = [0.999]
value = ",
        ))
        .unwrap();
        assert_eq!(c.fingerprint(), listed.fingerprint());
        let other =
            Config::from_toml(&LATENCY.replace("value = \"ms\"", "value = \"us\"")).unwrap();
        assert_ne!(c.fingerprint(), other.fingerprint());
        for (from, to, key) in [
            ("value = \"ms\"", "value = \"ms\"\nalpha = 0", "metric[0].alpha"),
            ("value = \"ms\"", "value = \"ms\"\nalpha = 1.0", "metric[0].alpha"),
            ("value = \"ms\"", "value = \"ms\"\nalpha = -0.01", "metric[0].alpha"),
            ("value = \"ms\"", "value = \"ms\"\nalpha = \"1%\"", "metric[0].alpha"),
            ("value = \"ms\"", "value = \"ms\"\nschema = 9", "metric[0].schema"),
            ("value = \"ms\"", "value = \"ms\"\nschema = 300", "metric[0].schema"),
            ("value = \"ms\"", "value = \"ms\"\nschema = 5\nalpha = 0.01", "metric[0].schema"),
            ("value = \"ms\"", "value = \"ms\"\nbin_limit = 0", "metric[0].bin_limit"),
            ("value = \"ms\"", "value = \"ms\"\nbin_limit = 1099511627776", "metric[0].bin_limit"),
            ("value = \"ms\"", "value = \"ms\"\nquantiles = []", "metric[0].quantiles"),
            ("value = \"ms\"", "value = \"ms\"\nquantiles = [0.5, 1.5]", "metric[0].quantiles[1]"),
            ("value = \"ms\"", "value = \"ms\"\nquantiles = [0.5, \"p99\"]", "metric[0].quantiles[1]"),
            ("value = \"ms\"", "value = \"ms\"\nquantiles = [0.0]", "metric[0].quantiles[0]"),
            ("value = \"ms\"", "value = \"ms\"\nquantiles = [0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.91,0.92,0.93,0.94,0.95,0.96,0.97,0.98]", "metric[0].quantiles"),
            ("value = \"ms\"", "value = \"\"", "metric[0].value"),
            ("value = \"ms\"\n", "", "metric[0].value"),
            ("value = \"ms\"", "value = \"ms\"\nitem = [\"user\"]", "metric[0].item"),
            ("value = \"ms\"", "value = \"ms\"\nprecision = 10", "metric[0].precision"),
            ("quantile = 0.99\n", "", "metric[0].alert[0].quantile"),
            ("quantile = 0.99", "quantile = 99", "metric[0].alert[0].quantile"),
            ("quantile = 0.99", "quantile = 0.99\nearly = true", "metric[0].alert[0].early"),
        ] {
            let text = LATENCY.replace(from, to);
            assert_ne!(text, LATENCY);
            let e = err_of(&text);
            assert!(e.contains(&format!("`{key}`")), "{to}: {e}");
        }
        // Other kinds take no value field, and their rules no quantile.
        let e = err_of(&GOOD.replace("item = ", "value = \"ms\"\nitem = "));
        assert!(e.contains("`metric[0].value`"), "{e}");
        let e = err_of(&format!("{GOOD}quantile = 0.5\n"));
        assert!(e.contains("`metric[0].alert[0].quantile`"), "{e}");
    }

    /// Stores are matched to their config by fingerprint: each kind's text is the one stores
    /// were written under (the `Debug` text of the kinds before they had folders), so the
    /// stores of earlier versions still open.
    #[test]
    fn the_kinds_fingerprint_as_they_always_have() {
        let kind = |kind: &str, extra: &str, item: &str| {
            let text = format!(
                "[input]\ntime_field = \"t\"\n[[metric]]\nname = \"m\"\nkind = \"{kind}\"\n\
                 key = [\"k\"]\n{item}bucket = \"1m\"\nwindow = \"5m\"\n{extra}"
            );
            Config::from_toml(&text).unwrap().metrics[0]
                .kind
                .fingerprint()
        };
        assert_eq!(kind("count", "", ""), "Count { epsilon: 0.1 }");
        assert_eq!(
            kind("distinct", "precision = 10\n", "item = [\"i\"]\n"),
            "Distinct { precision: 10 }"
        );
        assert_eq!(
            kind("distinct", "sketch = \"exaloglog\"\n", "item = [\"i\"]\n"),
            "Distinct { precision: 9, sketch: ExaLogLog }"
        );
        assert_eq!(
            kind("frequency", "", "item = [\"i\"]\n"),
            "Frequency { epsilon: 0.01, delta: 0.01, phi: 0.05 }"
        );
    }
}
