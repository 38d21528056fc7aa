//! The JSON of answers, in the field names of `docs/output.md`: a window answer's rows, one
//! per line `tidemark query --json` would print (a frequency metric's heavy items and a
//! quantile metric's quantiles each a row), and a metric's configuration.

use serde_json::{json, Map, Value};
use tidemark::Estimate;
use tidemark_stream::config::{LatePolicy, MetricConfig};
use tidemark_stream::query::{Answer, Label};
use tidemark_stream::time::format_rfc3339;

use crate::ask::WindowAsk;
use crate::health::MetricHealth;

/// A window answer: its window and its rows.
pub fn answer_json(w: &WindowAsk, a: &Answer) -> Value {
    json!({
        "metric": w.metric.name,
        "kind": a.kind,
        "from": format_rfc3339(a.from),
        "to": format_rfc3339(a.to),
        "clipped": a.clipped,
        "rows": rows(w, a),
    })
}

/// The rows `tidemark query --json` prints for `a`: one per key, or per labelled answer of a
/// key that has them.
pub fn rows(w: &WindowAsk, a: &Answer) -> Vec<Value> {
    let mut out = Vec::new();
    for row in &a.rows {
        let line = |label: Option<(&str, &Label)>, e: &Estimate| {
            let mut o = Map::new();
            o.insert("metric".into(), w.metric.name.clone().into());
            o.insert("key".into(), row.key.clone().into());
            match label {
                Some((field, Label::Text(t))) => o.insert(field.into(), t.clone().into()),
                Some((field, Label::Number(x))) => o.insert(field.into(), json!(x)),
                None => None,
            };
            o.insert("from".into(), format_rfc3339(a.from).into());
            o.insert("to".into(), format_rfc3339(a.to).into());
            estimate_fields(&mut o, e);
            if let Some(events) = row.events {
                o.insert("events".into(), events.into());
            }
            o.insert("buckets".into(), row.buckets.into());
            o.insert("partial".into(), row.partial.into());
            Value::Object(o)
        };
        match a.part {
            Some(field) if !row.parts.is_empty() => {
                let keep = w.items.unwrap_or(usize::MAX).min(row.parts.len());
                for (label, e) in &row.parts[..keep] {
                    out.push(line(Some((field, label)), e));
                }
            }
            _ => out.push(line(None, &row.estimate)),
        }
    }
    out
}

/// `estimate`, `low`, `high`, `confidence` and `method`.
fn estimate_fields(o: &mut Map<String, Value>, e: &Estimate) {
    o.insert("estimate".into(), json!(e.value));
    o.insert("low".into(), json!(e.low));
    o.insert("high".into(), json!(e.high));
    o.insert("confidence".into(), json!(e.confidence()));
    o.insert("method".into(), e.method.to_string().into());
}

/// A metric's configuration for `/api/v1/metrics`.
pub fn metric_json(m: &MetricConfig, tables: Option<&Vec<String>>, h: &MetricHealth) -> Value {
    let secs = |ms: u64| json!(ms as f64 / 1000.0);
    let mut o = Map::new();
    o.insert("metric".into(), m.name.clone().into());
    o.insert("kind".into(), m.kind.name().into());
    if let Some(part) = m.kind.part() {
        o.insert("part".into(), part.into());
    }
    o.insert("key".into(), json!(m.key));
    if !m.item.is_empty() {
        o.insert("item".into(), json!(m.item));
    }
    if let Some(v) = &m.value {
        o.insert("value".into(), v.clone().into());
    }
    o.insert("bucket_s".into(), secs(m.bucket));
    o.insert("window_s".into(), secs(m.window));
    o.insert("retention_s".into(), secs(m.retention));
    if let (Some(w), Some(name)) = (m.rollup, m.rollup_name()) {
        o.insert(
            "rollup".into(),
            json!({"metric": name, "bucket_s": secs(w), "retention_s": secs(m.rollup_retention)}),
        );
    }
    o.insert("allowed_lateness_s".into(), secs(m.allowed_lateness));
    o.insert(
        "late".into(),
        match m.late {
            LatePolicy::Drop => "drop",
            LatePolicy::Merge => "merge",
        }
        .into(),
    );
    let alerts: Vec<Value> = m
        .alerts
        .iter()
        .map(|a| {
            let mut r = Map::new();
            r.insert("threshold".into(), json!(a.above));
            // In standard errors of the estimate (0 for exact and guaranteed answers).
            r.insert("margin".into(), json!(a.margin));
            r.insert("consecutive".into(), a.consecutive.into());
            r.insert("early".into(), a.early.into());
            if let Some(q) = a.quantile {
                r.insert("quantile".into(), json!(q));
            }
            Value::Object(r)
        })
        .collect();
    o.insert("alerts".into(), alerts.into());
    if let Some(t) = tables {
        o.insert("tables".into(), json!(t));
    }
    if let Some(wm) = h.watermark {
        o.insert("watermark".into(), format_rfc3339(wm).into());
    }
    o.insert("live_keys".into(), h.live_keys.into());
    Value::Object(o)
}
