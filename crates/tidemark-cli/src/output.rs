//! Output: a human table by default, JSON lines with `--json`, the same field names in both
//! (each field's name, type and meaning: docs/output.md); and, for the lab's `reproduce --out`,
//! the records a command printed, kept to be written as CSV and drawn.

use std::cell::RefCell;
use std::io::Write;

use serde_json::{Map, Value};

/// `println!` to standard output that returns the write's error instead of panicking: a
/// reader that has gone (`tidemark check | head -1`) ends the command quietly (see
/// `error::report`), where `println!` would panic. Use in a function returning a `Result`.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

/// `print!` with the write's error returned, as [`outln`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)?
    }};
}

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

    /// Adds a field if there is a value: an absent field, never `null`, says "none".
    pub fn field_opt(self, name: &'static str, value: Option<impl Into<Value>>) -> Self {
        match value {
            Some(v) => self.field(name, v),
            None => self,
        }
    }

    /// A field's value, if the record has it.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| *k == name).map(|(_, v)| v)
    }

    /// Adds an estimate's `estimate`, `low`, `high`, `confidence` (1 for a guaranteed
    /// bracket) and `method`: every row that estimates carries all five (docs/output.md).
    pub fn estimate(self, e: &tidemark::Estimate) -> Self {
        self.field("estimate", e.value)
            .field("low", e.low)
            .field("high", e.high)
            .field("confidence", e.confidence())
            .field("method", e.method.to_string())
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

/// Table rows held before the columns are laid out: their widths and number formats are those
/// of the first rows, so a long key later on is the rare row that overflows, and the output
/// streams after that (bounded memory for `--every` over any input).
const LAYOUT_ROWS: usize = 1024;

/// Prints records as JSON lines, or as a table: columns as wide as their widest cell, strings
/// left-aligned, numbers right-aligned with one number of decimals per column, `-` for a field
/// a row lacks.
pub struct Output {
    json: bool,
    held: Vec<Record>,
    layout: Option<Layout>,
}

/// The columns of a table: names, widths, and per column whether it is numeric and how many
/// decimals its fractional numbers get.
struct Layout {
    names: Vec<&'static str>,
    widths: Vec<usize>,
    numeric: Vec<bool>,
    decimals: Vec<usize>,
}

impl Output {
    /// A printer in the chosen style.
    pub fn new(json: bool) -> Self {
        Output {
            json,
            held: Vec::new(),
            layout: None,
        }
    }

    /// Prints one record (a table row may wait for the first rows to lay out the columns).
    pub fn emit(&mut self, record: &Record) -> anyhow::Result<()> {
        RECORDED.with(|r| {
            if let Some(v) = r.borrow_mut().as_mut() {
                v.push(record.clone());
            }
        });
        if self.json {
            let map: Map<String, Value> = record
                .fields
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect();
            writeln!(std::io::stdout().lock(), "{}", Value::Object(map))?;
            return Ok(());
        }
        match &self.layout {
            Some(layout) => {
                writeln!(std::io::stdout().lock(), "{}", layout.row(record))?;
            }
            None => {
                self.held.push(record.clone());
                if self.held.len() >= LAYOUT_ROWS {
                    self.finish()?;
                }
            }
        }
        Ok(())
    }

    /// Prints the rows held (a table's first rows, laid out); called at the end of a command,
    /// and by `drop` if it was not.
    pub fn finish(&mut self) -> anyhow::Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let held = std::mem::take(&mut self.held);
        let layout = Layout::of(&held);
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        writeln!(out, "{}", layout.header())?;
        for r in &held {
            writeln!(out, "{}", layout.row(r))?;
        }
        self.layout = Some(layout);
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // A closed standard output has no reader left to tell.
        let _ = self.finish();
    }
}

impl Layout {
    fn of(rows: &[Record]) -> Layout {
        let mut names: Vec<&'static str> = Vec::new();
        for r in rows {
            for (k, _) in &r.fields {
                if !names.contains(k) {
                    names.push(k);
                }
            }
        }
        let mut numeric = Vec::new();
        let mut decimals = Vec::new();
        for name in &names {
            let cells = || rows.iter().filter_map(|r| r.get(name));
            numeric.push(cells().all(|v| v.is_number() || v.is_null()));
            let fractional = |v: &Value| v.as_f64().filter(|f| v.is_f64() && f.fract() != 0.0);
            decimals.push(
                cells()
                    .filter_map(fractional)
                    .map(decimals_for)
                    .max()
                    .unwrap_or(0),
            );
        }
        let mut layout = Layout {
            widths: names.iter().map(|n| n.len()).collect(),
            names,
            numeric,
            decimals,
        };
        for r in rows {
            for (i, c) in layout.cells(r).iter().enumerate() {
                layout.widths[i] = layout.widths[i].max(c.chars().count());
            }
        }
        layout
    }

    /// A row's cells, one per column (and any field the layout lacks after them).
    fn cells(&self, r: &Record) -> Vec<String> {
        let mut cells: Vec<String> = self
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| match r.get(n) {
                None => "-".to_string(),
                Some(v) => self.cell(i, v),
            })
            .collect();
        for (k, v) in &r.fields {
            if !self.names.contains(k) {
                cells.push(format!("{k}={}", plain(v)));
            }
        }
        cells
    }

    fn cell(&self, i: usize, v: &Value) -> String {
        match v {
            Value::Number(n) if n.is_f64() => {
                let f = n.as_f64().unwrap_or(f64::NAN);
                // A row past the laid-out ones keeps its fraction (1.5 is never "2").
                let d = if f.fract() != 0.0 {
                    self.decimals[i].max(decimals_for(f))
                } else {
                    self.decimals[i]
                };
                format!("{f:.d$}")
            }
            other => plain(other),
        }
    }

    fn header(&self) -> String {
        let cols: Vec<String> = self
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| self.pad(i, n))
            .collect();
        cols.join("  ").trim_end().to_string()
    }

    fn row(&self, r: &Record) -> String {
        let cols: Vec<String> = self
            .cells(r)
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i < self.names.len() {
                    self.pad(i, c)
                } else {
                    c.clone()
                }
            })
            .collect();
        cols.join("  ").trim_end().to_string()
    }

    /// A cell padded with spaces to its column's width: numbers on the right, text on the
    /// left. Padded by hand, not with `{:>w$}`: the formatter takes widths below 65,536
    /// only, and a key or item may be longer (a 65,536-byte key is a valid one).
    fn pad(&self, i: usize, c: &str) -> String {
        let fill = self.widths[i].saturating_sub(c.chars().count());
        let mut out = String::with_capacity(c.len() + fill);
        if self.numeric[i] {
            out.extend(std::iter::repeat_n(' ', fill));
            out.push_str(c);
        } else {
            out.push_str(c);
            out.extend(std::iter::repeat_n(' ', fill));
        }
        out
    }
}

/// Decimals that show a fractional number: 2 from 1 up, and below 1 at least 4 and two
/// significant digits (a failure rate of 0.00005 is not 0.0000), at most 8.
fn decimals_for(f: f64) -> usize {
    if f.abs() >= 1.0 {
        return 2;
    }
    let leading_zeros = (-f.abs().log10()).ceil();
    if leading_zeros.is_finite() {
        (leading_zeros as usize + 1).clamp(4, 8)
    } else {
        4
    }
}

/// A value's text as it stands (strings unquoted, absent as `-`).
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[Record]) -> Vec<String> {
        let layout = Layout::of(rows);
        std::iter::once(layout.header())
            .chain(rows.iter().map(|r| layout.row(r)))
            .collect()
    }

    #[test]
    fn columns_are_as_wide_as_their_widest_cell_and_numbers_share_their_decimals() {
        let rows = [
            Record::new()
                .field("key", "a")
                .field("estimate", 1.0)
                .field("confidence", 1.0)
                .field("n", 3u64),
            Record::new()
                .field("key", "a-much-longer-key")
                .field("estimate", 1002.5)
                .field("confidence", 0.9933)
                .field("n", 12345u64),
            Record::new().field("key", "b").field("n", 7u64),
        ];
        let t = table(&rows);
        assert_eq!(
            t,
            [
                "key                estimate  confidence      n",
                "a                      1.00      1.0000      3",
                "a-much-longer-key   1002.50      0.9933  12345",
                "b                         -           -      7",
            ]
        );
        // Every line's columns start where the header's do.
        let at = |s: &str, w: &str| s.find(w).unwrap() + w.len();
        assert_eq!(at(&t[0], "estimate"), at(&t[2], "1002.50"));
    }

    #[test]
    fn a_row_after_the_laid_out_ones_keeps_its_fraction() {
        let whole = |x: f64| Record::new().field("estimate", x);
        let layout = Layout::of(&[whole(1.0), whole(2.0)]);
        assert_eq!(layout.row(&whole(3.0)), "       3");
        assert_eq!(layout.row(&whole(2001.5)), " 2001.50");
    }

    #[test]
    fn cells_wider_than_the_formatter_takes_are_padded_whole() {
        // 65,536 characters is past the formatter's widest width: the cell prints whole and
        // the columns after it start where its width says.
        let long = "x".repeat(70_000);
        let rows = [
            Record::new().field("key", long.as_str()).field("n", 1u64),
            Record::new().field("key", "a").field("n", 22u64),
        ];
        let t = table(&rows);
        assert_eq!(t[0], format!("key{}   n", " ".repeat(70_000 - 3)));
        assert_eq!(t[1], format!("{long}   1"));
        assert_eq!(t[2], format!("a{}  22", " ".repeat(70_000 - 1)));
    }

    #[test]
    fn small_fractions_keep_two_significant_digits() {
        assert_eq!(decimals_for(0.5), 4);
        assert_eq!(decimals_for(0.00005), 6);
        assert_eq!(decimals_for(1e-12), 8);
        assert_eq!(decimals_for(12.5), 2);
    }
}
