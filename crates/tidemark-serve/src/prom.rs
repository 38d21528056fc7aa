//! `GET /metrics`: the Prometheus text exposition format (version 0.0.4), written by hand.
//!
//! The format is a few lines per family — `# HELP`, `# TYPE`, then `name{label="value"} number`
//! — and every value here is read from the store at the scrape, so no registry of live
//! metric objects is needed (which is what `prometheus-client` offers).
//!
//! For each metric of the config, the current window (the metric's `window`, ending where
//! `tidemark query` ends it by default) for its top keys by estimate (`--top`, default 100,
//! so the series count is bounded), as one gauge family per metric with the bracket as a
//! `bound` label:
//!
//! ```text
//! # TYPE tidemark_fanout_estimate gauge
//! tidemark_fanout_estimate{key="10.0.0.7",bound="estimate"} 412
//! tidemark_fanout_estimate{key="10.0.0.7",bound="low"} 388.2
//! tidemark_fanout_estimate{key="10.0.0.7",bound="high"} 436.9
//! ```
//!
//! A quantile metric has a series per quantile of its config, under a `q` label (`quantile`
//! is reserved for Prometheus summaries, and `promtool check metrics` refuses it on a
//! gauge). Then the
//! pipeline's health as its last checkpoint recorded it: records and bad lines, per metric
//! events, late, dropped and merged events, buckets closed, alerts, keys held, watermark;
//! the largest event time; the input lag (bytes of the input file past the checkpoint's
//! offset); the store file's size and modification time (each checkpoint writes it: the time
//! of the last one) and that time's age; and inside `tidemark run --serve`, the run's own
//! counts ([`crate::RunHealth`]).
//!
//! Names follow Prometheus's conventions: `tidemark_` first, counters end in `_total`, times
//! are seconds since the epoch (`_timestamp_seconds`), sizes bytes. Metric names may hold
//! `-` and `.`, which a Prometheus name cannot: both become `_`, and a name that would then
//! repeat an earlier metric's gets `_2` (or `_3`, …: the first unused) after the sanitized
//! name, in config order ([`family_names`]). Label values are escaped as the
//! format asks (`\\`, `\"`, `\n`).

use std::fmt::Write as _;

use tidemark_stream::config::Config;
use tidemark_stream::query::{self, Label, QueryError};
use tidemark_stream::store::Store;

use crate::error::ApiError;
use crate::health::{Health, MetricHealth};

/// The exposition text for a scrape.
pub fn exposition(
    store: &dyn Store,
    config: &Config,
    health: &Health,
    file: Option<&std::fs::Metadata>,
    top: usize,
) -> Result<String, ApiError> {
    let mut out = estimates(store, config, top)?;
    health_families(&mut out, config, health, file);
    Ok(out)
}

/// The estimate families: each metric's current window for its `top` keys. What a scrape
/// costs (a scan of each metric's window); the server keeps it until the next checkpoint.
pub fn estimates(store: &dyn Store, config: &Config, top: usize) -> Result<String, ApiError> {
    let mut out = String::with_capacity(64 * 1024);
    for (m, family) in config.metrics.iter().zip(family_names(config)) {
        let answer = match query::window(store, &m.name, m.window, None, None, Some(top)) {
            Ok(a) => Some(a),
            // Nothing stored in the retention yet: the family is declared without samples.
            Err(QueryError::BeforeRetention { .. }) => None,
            Err(e @ (QueryError::Empty | QueryError::Store(_) | QueryError::Corrupt { .. })) => {
                return Err(ApiError::unavailable(format!(
                    "the store cannot be read: {e}"
                )))
            }
            Err(e) => return Err(ApiError::status(500, e.to_string())),
        };
        let window = tidemark_stream::time::format_duration(m.window);
        header(
            &mut out,
            &family,
            "gauge",
            &format!(
                "{} metric {}: each top key's estimate over the last {window}, with its \
                 bracket's low and high ends (label bound)",
                m.kind.name(),
                m.name,
            ),
        );
        let Some(answer) = answer else { continue };
        for row in &answer.rows {
            let key = escape(&row.key);
            let series: Vec<(Option<&Label>, &tidemark::Estimate)> =
                if m.kind.part() == Some("quantile") && !row.parts.is_empty() {
                    row.parts.iter().map(|(l, e)| (Some(l), e)).collect()
                } else {
                    vec![(None, &row.estimate)]
                };
            for (label, e) in series {
                let q = match label {
                    Some(l) => format!(",q=\"{}\"", escape(&l.to_string())),
                    None => String::new(),
                };
                for (bound, v) in [("estimate", e.value), ("low", e.low), ("high", e.high)] {
                    let _ = writeln!(
                        out,
                        "{family}{{key=\"{key}\"{q},bound=\"{bound}\"}} {}",
                        number(v)
                    );
                }
            }
        }
    }
    Ok(out)
}

/// Each metric's estimate family name, in config order: `tidemark_NAME_estimate` with the
/// name sanitized, and when that is taken by an earlier metric's (`a.b` and `a_b` both
/// sanitize to `a_b`), `tidemark_NAME_2_estimate`, `_3`, … — the first not taken.
pub fn family_names(config: &Config) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(config.metrics.len());
    for m in &config.metrics {
        let base = sanitize(&m.name);
        let mut family = format!("tidemark_{base}_estimate");
        let mut n = 2u64;
        while names.contains(&family) {
            family = format!("tidemark_{base}_{n}_estimate");
            n += 1;
        }
        names.push(family);
    }
    names
}

/// The health families.
pub fn health_families(
    out: &mut String,
    config: &Config,
    health: &Health,
    file: Option<&std::fs::Metadata>,
) {
    single(
        out,
        "tidemark_records_total",
        "counter",
        "Records counted over every run on the store, as of its last checkpoint.",
        health.records as f64,
    );
    single(
        out,
        "tidemark_bad_lines_total",
        "counter",
        "Malformed lines skipped over every run on the store, as of its last checkpoint.",
        health.bad_lines as f64,
    );
    single(
        out,
        "tidemark_input_completed",
        "gauge",
        "1 when the last run read its input to the end, 0 while one is under way or was \
         interrupted.",
        if health.completed { 1.0 } else { 0.0 },
    );
    if let Some(t) = health.max_time {
        single(
            out,
            "tidemark_event_time_max_timestamp_seconds",
            "gauge",
            "The largest event time the pipeline has seen, seconds since the epoch.",
            t as f64 / 1000.0,
        );
    }
    type Field = fn(&MetricHealth) -> Option<f64>;
    let per_metric: [(&str, &str, &str, Field); 8] = [
        (
            "tidemark_events_total",
            "counter",
            "Events added to the metric.",
            |h| Some(h.counters.events as f64),
        ),
        (
            "tidemark_late_events_total",
            "counter",
            "Events late within the allowed lateness, landed in their own open bucket.",
            |h| Some(h.counters.late as f64),
        ),
        (
            "tidemark_dropped_events_total",
            "counter",
            "Events past the allowed lateness, dropped.",
            |h| Some(h.counters.dropped as f64),
        ),
        (
            "tidemark_merged_events_total",
            "counter",
            "Events past the allowed lateness, merged into their stored bucket.",
            |h| Some(h.counters.merged as f64),
        ),
        (
            "tidemark_buckets_closed_total",
            "counter",
            "Buckets closed and stored.",
            |h| Some(h.counters.buckets as f64),
        ),
        (
            "tidemark_alerts_total",
            "counter",
            "Alerts raised (an early alert and its confirmation count once).",
            |h| Some(h.counters.alerts as f64),
        ),
        (
            "tidemark_live_keys",
            "gauge",
            "Keys the writer held in memory at its last checkpoint.",
            |h| Some(h.live_keys as f64),
        ),
        (
            "tidemark_watermark_timestamp_seconds",
            "gauge",
            "The metric's watermark: buckets starting before it are closed, seconds since \
             the epoch.",
            |h| h.watermark.map(|t| t as f64 / 1000.0),
        ),
    ];
    for (name, kind, help, field) in per_metric {
        header(out, name, kind, help);
        for (m, h) in config.metrics.iter().zip(&health.metrics) {
            if let Some(v) = field(h) {
                let _ = writeln!(
                    out,
                    "{name}{{metric=\"{}\"}} {}",
                    escape(&m.name),
                    number(v)
                );
            }
        }
    }
    single(
        out,
        "tidemark_memory_budget_bytes",
        "gauge",
        "The memory budget of the store's config ([state] max_memory): quiet keys spill to \
         the store past a third of it, and a run stops past it.",
        health.budget as f64,
    );
    if !health.partitions.is_empty() {
        header(
            out,
            "tidemark_kafka_stored_offset",
            "gauge",
            "Per partition, the next offset the store's last checkpoint holds: where a run \
             resumes (the broker's committed offset follows it).",
        );
        for (topic, partition, offset) in &health.partitions {
            let _ = writeln!(
                out,
                "tidemark_kafka_stored_offset{{topic=\"{}\",partition=\"{partition}\"}} {offset}",
                escape(topic)
            );
        }
    }
    if let Some(lag) = health.input.as_ref().and_then(|i| i.lag()) {
        single(
            out,
            "tidemark_input_lag_bytes",
            "gauge",
            "Bytes of the input file the last checkpoint had not read: its size now less the \
             checkpoint's offset in it (a new file at its path counts whole).",
            lag as f64,
        );
    }
    if let Some(meta) = file {
        single(
            out,
            "tidemark_store_size_bytes",
            "gauge",
            "The store file's size.",
            meta.len() as f64,
        );
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        if let Some(m) = modified {
            single(
                out,
                "tidemark_last_checkpoint_timestamp_seconds",
                "gauge",
                "When the store file was last written (each checkpoint writes it), seconds \
                 since the epoch.",
                m.as_secs_f64(),
            );
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            single(
                out,
                "tidemark_last_checkpoint_age_seconds",
                "gauge",
                "Seconds since the store file was last written.",
                now.saturating_sub(m).as_secs_f64(),
            );
        }
    }
}

/// A family's HELP and TYPE lines.
pub(crate) fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A family of one sample without labels.
pub(crate) fn single(out: &mut String, name: &str, kind: &str, help: &str, v: f64) {
    header(out, name, kind, help);
    let _ = writeln!(out, "{name} {}", number(v));
}

/// A metric name's characters allowed in a Prometheus name (`[a-zA-Z0-9_]`).
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// A label value escaped: backslash, double quote and line feed.
pub fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// HELP text escaped: backslash and line feed.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value as the format spells it (`NaN`, `+Inf`, `-Inf` or a decimal).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_and_numbers_are_spelled_as_the_format_asks() {
        assert_eq!(escape(r#"a\b"c"#), r#"a\\b\"c"#);
        assert_eq!(escape("x\ny"), "x\\ny");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(number(f64::NEG_INFINITY), "-Inf");
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(sanitize("fan-out.v2"), "fan_out_v2");
    }

    #[test]
    fn family_names_are_unique_in_config_order() {
        let metric = |name: &str| {
            format!(
                "[[metric]]\nname = \"{name}\"\nkind = \"count\"\nkey = [\"k\"]\n\
                 bucket = \"1m\"\nwindow = \"5m\"\n"
            )
        };
        let text = format!(
            "[input]\nformat = \"csv\"\ntime_field = \"ts\"\n{}{}{}{}",
            metric("a_b_2"),
            metric("a.b"),
            metric("a_b"),
            metric("a-b")
        );
        let config = Config::from_toml(&text).unwrap();
        assert_eq!(
            family_names(&config),
            [
                "tidemark_a_b_2_estimate",
                "tidemark_a_b_estimate",
                "tidemark_a_b_3_estimate",
                "tidemark_a_b_4_estimate"
            ]
        );
    }
}
