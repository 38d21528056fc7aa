//! Output: a human table by default, JSON lines with `--json`, the same field names in both.

use std::io::Write;

use serde_json::{Map, Value};

/// One answer: named fields in a fixed order.
#[derive(Clone, Debug, Default)]
pub struct Record {
    fields: Vec<(&'static str, Value)>,
}

impl Record {
    /// An empty record.
    pub fn new() -> Self {
        Record::default()
    }

    /// Adds a field.
    pub fn field(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.fields.push((name, value.into()));
        self
    }

    /// Adds an estimate's `estimate`, `low` and `high`.
    pub fn estimate(self, e: &tidemark::Estimate) -> Self {
        self.field("estimate", e.value)
            .field("low", e.low)
            .field("high", e.high)
    }
}

/// Prints records as a table (header once) or as JSON lines.
pub struct Output {
    json: bool,
    header_done: bool,
    widths: Vec<usize>,
}

impl Output {
    /// A printer in the chosen style.
    pub fn new(json: bool) -> Self {
        Output {
            json,
            header_done: false,
            widths: Vec::new(),
        }
    }

    /// Prints one record.
    pub fn emit(&mut self, record: &Record) -> anyhow::Result<()> {
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        if self.json {
            let map: Map<String, Value> = record
                .fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            writeln!(out, "{}", Value::Object(map))?;
            return Ok(());
        }
        let cells: Vec<String> = record.fields.iter().map(|(_, v)| human(v)).collect();
        if !self.header_done {
            self.widths = record
                .fields
                .iter()
                .zip(&cells)
                .map(|((k, _), c)| k.len().max(c.len()).max(8))
                .collect();
            let header: Vec<String> = record
                .fields
                .iter()
                .zip(&self.widths)
                .map(|((k, _), w)| format!("{k:>w$}"))
                .collect();
            writeln!(out, "{}", header.join("  ").trim_start())?;
            self.header_done = true;
        }
        let row: Vec<String> = cells
            .iter()
            .zip(self.widths.iter().chain(std::iter::repeat(&8)))
            .map(|(c, w)| format!("{c:>w$}"))
            .collect();
        writeln!(out, "{}", row.join("  ").trim_start())?;
        Ok(())
    }
}

fn human(v: &Value) -> String {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => {
                if f.fract() == 0.0 && f.abs() < 1e15 {
                    format!("{f:.0}")
                } else if f.abs() < 1.0 {
                    format!("{f:.4}")
                } else {
                    format!("{f:.2}")
                }
            }
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}
