//! Output: a human table by default, JSON lines with `--json`, the same field names in both.

use std::cell::RefCell;
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

    /// A field's value, if the record has it.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }

    /// Adds an estimate's `estimate`, `low` and `high`.
    pub fn estimate(self, e: &tidemark::Estimate) -> Self {
        self.field("estimate", e.value)
            .field("low", e.low)
            .field("high", e.high)
    }
}

thread_local! {
    /// Records emitted on this thread while recording (`reproduce --out`), in order.
    static RECORDED: RefCell<Option<Vec<Record>>> = const { RefCell::new(None) };
}

/// Starts keeping a copy of every record emitted on this thread.
pub fn start_recording() {
    RECORDED.with(|r| *r.borrow_mut() = Some(Vec::new()));
}

/// Stops recording and returns what was emitted since [`start_recording`].
pub fn take_recorded() -> Vec<Record> {
    RECORDED.with(|r| r.borrow_mut().take().unwrap_or_default())
}

/// Writes records as CSV: the union of their fields as the header, in order of first
/// appearance, and an empty cell where a record lacks a field.
pub fn write_csv(records: &[Record], path: &std::path::Path) -> std::io::Result<()> {
    let mut header: Vec<&'static str> = Vec::new();
    for r in records {
        for (k, _) in &r.fields {
            if !header.contains(k) {
                header.push(k);
            }
        }
    }
    let cell = |v: Option<&Value>| -> String {
        match v {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) if s.contains([',', '"', '\n']) => {
                format!("\"{}\"", s.replace('"', "\"\""))
            }
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        }
    };
    let mut out = String::new();
    out.push_str(&header.join(","));
    out.push('\n');
    for r in records {
        let row: Vec<String> = header.iter().map(|k| cell(r.get(k))).collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    std::fs::write(path, out)
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
        RECORDED.with(|r| {
            if let Some(v) = r.borrow_mut().as_mut() {
                v.push(record.clone());
            }
        });
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
