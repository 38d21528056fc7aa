//! From one input line to what the engine needs: the event time, and per metric the key's
//! bytes and the item's hash.
//!
//! CSV: the first line of each file names the fields; fields are split on commas, and a field
//! in double quotes may hold commas and doubled quotes (`"a,""b"""`). The hot path — no quote
//! in the line — copies nothing but the key bytes into a buffer that is reused.
//! JSON Lines: one object per line; a field may be a string, a number or a boolean.
//!
//! Messages (a Kafka topic's): each message's value is one record, and a CSV value has no
//! header line: its fields are the source's declared `columns`
//! ([`Extractor::declare_columns`]). Two more fields name the message itself, ahead of any
//! field of the record of the same name: [`KEY_FIELD`] (`@key`), its key as text (empty when
//! it has none; a key that is not UTF-8 is a bad record if a metric reads it), and
//! [`TIMESTAMP_FIELD`] (`@timestamp`), its timestamp, milliseconds since the epoch whatever
//! the `time_format` (a message without one is a bad record if it is the time field).
//!
//! A metric over values (a quantile metric's `value` field) reads its field as a finite
//! number instead of an item: its text parsed as a 64-bit float (surrounding spaces
//! ignored), passed to the engine as the float's bits. Text, an empty field, NaN, ±inf or a
//! number past the float's range (`1e400`) is a bad line naming the field.
//!
//! A key of several fields is their values joined by `,`, a value holding `,` or `"` written
//! in double quotes with its quotes doubled, as in CSV (`"a,b",c`), so that no two different
//! tuples of values join to one key. An item of several fields is their values joined by the
//! byte 0x1f (a value's own 0x1e and 0x1f bytes each preceded by 0x1e, for the same reason),
//! then hashed with tidemark's item hash. A key or item of one field is its value as it is,
//! and so is a field without those bytes, as before this rule (2026-12-02). A key of several
//! fields one of which holds `,` or `"`, or an item holding 0x1e or 0x1f, is spelled (or
//! hashed) otherwise than before it: a store written earlier keeps such a key's old rows under
//! the old spelling, and counts such an item once more if it comes again.

use core::fmt;

use crate::json::Field;
use tidemark::ItemHasher;

use crate::config::{Config, Format, KEY_FIELD, TIMESTAMP_FIELD};
use crate::kinds::Input;
use crate::time::TimeReader;

/// A line that is not a valid record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RecordError {}

fn err(message: impl Into<String>) -> RecordError {
    RecordError {
        message: message.into(),
    }
}

/// A CSV column index naming a message's key or timestamp rather than a column.
const KEY_COLUMN: usize = usize::MAX;
const TIMESTAMP_COLUMN: usize = usize::MAX - 1;

#[derive(Clone)]
struct Columns {
    time: usize,
    keys: Vec<Vec<usize>>,
    items: Vec<Vec<usize>>,
    count: usize,
}

/// One parsed record: its event time and, per metric, its key and item.
#[derive(Clone, Copy)]
pub struct Record<'a> {
    ex: &'a Extractor,
}

impl Record<'_> {
    /// Event time, ms since the epoch.
    #[inline]
    pub fn time(&self) -> u64 {
        self.ex.time
    }

    /// Metric `m`'s key: its fields' values joined by `,` (see the module's docs).
    #[inline]
    pub fn key(&self, m: usize) -> &[u8] {
        &self.ex.keys[m]
    }

    /// Metric `m`'s item hash (0 for a count metric; a value's bits for a metric over values).
    #[inline]
    pub fn item(&self, m: usize) -> u64 {
        self.ex.items[m]
    }

    /// Metric `m`'s item bytes: kept only for frequency metrics (which name their heavy
    /// items), empty for the others.
    #[inline]
    pub fn item_bytes(&self, m: usize) -> &[u8] {
        &self.ex.item_bytes[m]
    }

    /// Metric `m`'s item length, bytes (its fields joined; 0 for a count metric).
    #[inline]
    pub fn item_len(&self, m: usize) -> usize {
        self.ex.item_lens[m]
    }

    /// The number of metrics.
    pub fn metrics(&self) -> usize {
        self.ex.keys.len()
    }
}

/// What the engine reads of a record, parsed here or in a parse thread (the pipeline's
/// parsed batches): its time and, per metric, its key and item.
pub(crate) trait Fields {
    /// Event time, ms since the epoch.
    fn time(&self) -> u64;
    /// Metric `m`'s key.
    fn key(&self, m: usize) -> &[u8];
    /// Metric `m`'s item hash.
    fn item(&self, m: usize) -> u64;
    /// Metric `m`'s item bytes (frequency metrics only; else empty).
    fn item_bytes(&self, m: usize) -> &[u8];
    /// Metric `m`'s item length, bytes.
    fn item_len(&self, m: usize) -> usize;
    /// The number of metrics.
    fn metrics(&self) -> usize;
}

impl Fields for Record<'_> {
    #[inline]
    fn time(&self) -> u64 {
        Record::time(self)
    }
    #[inline]
    fn key(&self, m: usize) -> &[u8] {
        Record::key(self, m)
    }
    #[inline]
    fn item(&self, m: usize) -> u64 {
        Record::item(self, m)
    }
    #[inline]
    fn item_bytes(&self, m: usize) -> &[u8] {
        Record::item_bytes(self, m)
    }
    #[inline]
    fn item_len(&self, m: usize) -> usize {
        Record::item_len(self, m)
    }
    #[inline]
    fn metrics(&self) -> usize {
        Record::metrics(self)
    }
}

/// Parses lines into event time, keys and item hashes, reusing its buffers. (A clone parses
/// as the original does: a parse thread gets one once the header is read.)
#[derive(Clone)]
pub struct Extractor {
    format: Format,
    time_reader: TimeReader,
    time_field: String,
    key_fields: Vec<Vec<String>>,
    item_fields: Vec<Vec<String>>,
    columns: Option<Columns>,
    hasher: ItemHasher,
    ranges: Vec<(usize, usize)>,
    unquoted: String,
    item_buf: Vec<u8>,
    time: u64,
    keys: Vec<Vec<u8>>,
    items: Vec<u64>,
    item_bytes: Vec<Vec<u8>>,
    /// Per metric, whether its item bytes are kept.
    named: Vec<bool>,
    /// Per metric, whether its "item" is a numeric value (its one field parsed).
    valued: Vec<bool>,
    /// The last record's item length per metric, bytes (its fields joined).
    item_lens: Vec<usize>,
    /// JSON Lines: the fields read (the time field first), and per metric the indices of its
    /// key and item fields among them.
    json_wanted: Vec<String>,
    json_keys: Vec<Vec<usize>>,
    json_items: Vec<Vec<usize>>,
    /// A reusable buffer of the fields found (emptied after each line).
    json_found: Vec<Option<Field<'static>>>,
    /// Records are messages: `@key` and `@timestamp` name the message's (see the module doc).
    messages: bool,
    /// The current message's key, when UTF-8 (else `msg_key_bad`).
    msg_key: String,
    msg_key_bad: bool,
    /// The current message's timestamp, ms.
    msg_time: Option<i64>,
    /// Some metric's key or item reads `@key` (a key that is not UTF-8 is then bad), or
    /// `@timestamp` (then kept as text too).
    reads_key: bool,
    reads_timestamp: bool,
    msg_time_text: String,
}

impl Extractor {
    /// An extractor for the config's input and metrics.
    pub fn new(config: &Config) -> Extractor {
        let n = config.metrics.len();
        let mut json_wanted = vec![config.input.time_field.clone()];
        let mut index = |f: &String| match json_wanted.iter().position(|w| w == f) {
            Some(i) => i,
            None => {
                json_wanted.push(f.clone());
                json_wanted.len() - 1
            }
        };
        let json_keys: Vec<Vec<usize>> = config
            .metrics
            .iter()
            .map(|m| m.key.iter().map(&mut index).collect())
            .collect();
        // A metric over values reads its value field where another reads its item.
        let item_fields: Vec<Vec<String>> = config
            .metrics
            .iter()
            .map(|m| m.value.iter().chain(&m.item).cloned().collect())
            .collect();
        let json_items: Vec<Vec<usize>> = item_fields
            .iter()
            .map(|fields| fields.iter().map(&mut index).collect())
            .collect();
        Extractor {
            format: config.input.format,
            time_reader: TimeReader::new(config.input.time_format),
            time_field: config.input.time_field.clone(),
            key_fields: config.metrics.iter().map(|m| m.key.clone()).collect(),
            item_fields,
            columns: None,
            hasher: ItemHasher::default(),
            ranges: Vec::new(),
            unquoted: String::new(),
            item_buf: Vec::new(),
            time: 0,
            keys: vec![Vec::new(); n],
            items: vec![0; n],
            item_bytes: vec![Vec::new(); n],
            item_lens: vec![0; n],
            json_wanted,
            json_keys,
            json_items,
            json_found: Vec::new(),
            messages: false,
            msg_key: String::new(),
            msg_key_bad: false,
            msg_time: None,
            reads_key: false,
            reads_timestamp: false,
            msg_time_text: String::new(),
            named: config
                .metrics
                .iter()
                .map(|m| m.kind.input() == Input::Items { named: true })
                .collect(),
            valued: config
                .metrics
                .iter()
                .map(|m| m.kind.input() == Input::Value)
                .collect(),
        }
    }

    /// The number of metrics a record has keys and items of.
    pub(crate) fn metrics(&self) -> usize {
        self.keys.len()
    }

    /// Whether each file starts with a header line.
    pub fn wants_header(&self) -> bool {
        self.format == Format::Csv
    }

    /// Reads records from messages: `@key` and `@timestamp` name the message's key and
    /// timestamp ([`Extractor::set_message`]), and a CSV record's fields are `columns` (there
    /// is no header line), each configured field among them or one of those two.
    pub fn declare_columns(&mut self, columns: &[String]) -> Result<(), RecordError> {
        self.messages = true;
        let reads = |name: &str| {
            self.key_fields
                .iter()
                .chain(&self.item_fields)
                .flatten()
                .any(|f| f == name)
        };
        self.reads_key = reads(KEY_FIELD);
        self.reads_timestamp = reads(TIMESTAMP_FIELD);
        if self.format == Format::Csv {
            let names: Vec<&str> = columns.iter().map(|c| c.trim()).collect();
            self.set_columns(&names, "the source's columns")?;
        }
        Ok(())
    }

    /// The message whose value the next [`Extractor::parse`] reads: its key and timestamp.
    pub fn set_message(&mut self, key: Option<&[u8]>, timestamp: Option<i64>) {
        self.msg_key.clear();
        self.msg_key_bad = false;
        match std::str::from_utf8(key.unwrap_or_default()) {
            Ok(text) => self.msg_key.push_str(text),
            Err(_) => self.msg_key_bad = true,
        }
        self.msg_time = timestamp;
        if self.reads_timestamp {
            self.msg_time_text.clear();
            if let Some(t) = timestamp {
                use std::fmt::Write;
                // Writing to a String cannot fail.
                let _ = write!(self.msg_time_text, "{t}");
            }
        }
    }

    /// The current message's timestamp as the event time.
    fn message_time(&self) -> Result<u64, RecordError> {
        match self.msg_time {
            Some(t) if t >= 0 => Ok(t as u64),
            Some(t) => Err(err(format!(
                "field {TIMESTAMP_FIELD:?}: the message timestamp {t} is before 1970"
            ))),
            None => Err(err(format!(
                "field {TIMESTAMP_FIELD:?}: the message has no timestamp"
            ))),
        }
    }

    /// Reads a CSV header: every configured field must be named in it.
    pub fn header(&mut self, line: &str) -> Result<(), RecordError> {
        // A byte-order mark (spreadsheets write one) is not part of the first name.
        let line = line.strip_prefix('\u{feff}').unwrap_or(line);
        if line.trim().is_empty() {
            // Said as it is: the field lookup below would say the header lacks the time
            // field and has "" (a blank line before the header is a careless user's slip).
            return Err(err(format!(
                "the first line is blank, where the header naming the fields (such as {:?}) \
                 must be",
                self.time_field
            )));
        }
        let base = self.split(line)?;
        let unquoted = std::mem::take(&mut self.unquoted);
        let names: Vec<&str> = self
            .ranges
            .iter()
            .map(|&(a, b)| base_str(line, &unquoted, base)[a..b].trim())
            .collect();
        let set = self.set_columns(&names, "the header");
        drop(names);
        self.unquoted = unquoted;
        set
    }

    /// The CSV columns named `names` (by `what`: the header or the source's columns).
    fn set_columns(&mut self, names: &[&str], what: &str) -> Result<(), RecordError> {
        // Each name's column, in one pass (a header may have a great many).
        let mut column: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::with_capacity(names.len());
        for (j, n) in names.iter().enumerate() {
            if let Some(i) = column.insert(n, j) {
                return Err(err(format!(
                    "{what} names field {n:?} twice (columns {} and {}): which one a \
                     metric reads would be a guess",
                    i + 1,
                    j + 1
                )));
            }
        }
        let messages = self.messages;
        let find = |f: &str| -> Result<usize, RecordError> {
            match f {
                KEY_FIELD if messages => return Ok(KEY_COLUMN),
                TIMESTAMP_FIELD if messages => return Ok(TIMESTAMP_COLUMN),
                _ => {}
            }
            column.get(f).copied().ok_or_else(|| {
                const SHOWN: usize = 20;
                let mut has = names[..names.len().min(SHOWN)].join(",");
                if names.len() > SHOWN {
                    has.push_str(&format!(",… ({} fields)", names.len()));
                }
                err(format!("{what} has no field {f:?} (it has {has})"))
            })
        };
        let time = find(&self.time_field)?;
        let mut keys = Vec::new();
        let mut items = Vec::new();
        for (k, i) in self.key_fields.iter().zip(&self.item_fields) {
            keys.push(k.iter().map(|f| find(f)).collect::<Result<Vec<_>, _>>()?);
            items.push(i.iter().map(|f| find(f)).collect::<Result<Vec<_>, _>>()?);
        }
        self.columns = Some(Columns {
            time,
            keys,
            items,
            count: names.len(),
        });
        Ok(())
    }

    /// Splits a CSV line into `self.ranges`; returns whether ranges index the unquoted copy.
    #[inline]
    fn split(&mut self, line: &str) -> Result<bool, RecordError> {
        self.ranges.clear();
        // One vectorised pass for commas and quotes: a line without quotes (nearly every
        // one) is split in place, and a quote sends the line to the unquoting path.
        let bytes = line.as_bytes();
        let mut start = 0;
        let mut base = 0;
        // Eight bytes a step: the bits of commas and quotes, then each in turn (a line
        // of a few short fields has a handful). The last word is padded with zeros, which
        // match neither.
        while base < bytes.len() {
            let w = match bytes.get(base..base + 8) {
                Some(word) => u64::from_le_bytes(word.try_into().unwrap_or_default()),
                None => {
                    let mut tail = [0u8; 8];
                    let rest = &bytes[base..];
                    tail[..rest.len()].copy_from_slice(rest);
                    u64::from_le_bytes(tail)
                }
            };
            let mut hits = bytes_equal(w, b',') | bytes_equal(w, b'"');
            while hits != 0 {
                let i = base + (hits.trailing_zeros() / 8) as usize;
                hits &= hits - 1;
                if bytes[i] == b'"' {
                    return self.split_quoted(line);
                }
                self.ranges.push((start, i));
                start = i + 1;
            }
            base += 8;
        }
        self.ranges.push((start, bytes.len()));
        Ok(false)
    }

    /// [`Self::split`] for a line with quotes: fields go unquoted into `self.unquoted`.
    fn split_quoted(&mut self, line: &str) -> Result<bool, RecordError> {
        self.ranges.clear();
        self.unquoted.clear();
        let mut chars = line.chars().peekable();
        loop {
            let start = self.unquoted.len();
            if chars.peek() == Some(&'"') {
                chars.next();
                loop {
                    match chars.next() {
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            self.unquoted.push('"');
                        }
                        Some('"') => break,
                        Some(c) => self.unquoted.push(c),
                        None => return Err(err("a quoted field is not closed")),
                    }
                }
                self.ranges.push((start, self.unquoted.len()));
                match chars.next() {
                    None => return Ok(true),
                    Some(',') => {}
                    Some(c) => {
                        return Err(err(format!(
                            "unexpected {c:?} after a closing quote (expected , or the line end)"
                        )))
                    }
                }
            } else {
                loop {
                    match chars.next() {
                        None => {
                            self.ranges.push((start, self.unquoted.len()));
                            return Ok(true);
                        }
                        Some(',') => break,
                        Some('"') => {
                            return Err(err("a quote inside an unquoted field"));
                        }
                        Some(c) => self.unquoted.push(c),
                    }
                }
                self.ranges.push((start, self.unquoted.len()));
            }
        }
    }

    /// Parses one record: its time, and per metric its key and item, borrowed from buffers
    /// the extractor reuses for the next line.
    #[inline]
    pub fn parse(&mut self, line: &str) -> Result<Record<'_>, RecordError> {
        match self.format {
            Format::Csv => self.parse_csv(line)?,
            // A byte-order mark (an editor's, at a file's start) is never part of a JSON line.
            Format::JsonLines => self.parse_json(line.strip_prefix('\u{feff}').unwrap_or(line))?,
        }
        Ok(Record { ex: self })
    }

    #[inline]
    fn parse_csv(&mut self, line: &str) -> Result<(), RecordError> {
        let quoted = self.split(line)?;
        let cols = self
            .columns
            .as_ref()
            .ok_or_else(|| err("no header line before the records"))?;
        if self.ranges.len() != cols.count {
            let names = if self.messages {
                "the source's columns name"
            } else {
                "the header names"
            };
            return Err(err(format!(
                "{} fields, but {names} {}",
                self.ranges.len(),
                cols.count
            )));
        }
        let text = base_str(line, &self.unquoted, quoted);
        if self.msg_key_bad && self.reads_key {
            return Err(err(format!(
                "field {KEY_FIELD:?}: the message key is not UTF-8"
            )));
        }
        let key_text = self.msg_key.as_str();
        let time_text = self.msg_time_text.as_str();
        let field = |i: usize| -> &str {
            if i == KEY_COLUMN {
                return key_text;
            }
            if i == TIMESTAMP_COLUMN {
                return time_text;
            }
            let (a, b) = self.ranges[i];
            &text[a..b]
        };
        self.time = if cols.time == TIMESTAMP_COLUMN {
            self.message_time()?
        } else {
            self.time_reader
                .read(field(cols.time))
                .map_err(|e| err(format!("field {:?}: {e}", self.time_field)))?
        };
        for m in 0..cols.keys.len() {
            let key = &mut self.keys[m];
            key.clear();
            let several = cols.keys[m].len() > 1;
            for (j, &c) in cols.keys[m].iter().enumerate() {
                push_key_field(key, field(c).as_bytes(), j > 0, several);
            }
            let items = &cols.items[m];
            self.items[m] = match items.len() {
                0 => {
                    self.item_lens[m] = 0;
                    0
                }
                1 if self.valued[m] => {
                    self.item_lens[m] = 0;
                    read_value(field(items[0]), &self.item_fields[m][0])?.to_bits()
                }
                1 => {
                    let bytes = field(items[0]).as_bytes();
                    self.item_lens[m] = bytes.len();
                    if self.named[m] {
                        self.item_bytes[m].clear();
                        self.item_bytes[m].extend_from_slice(bytes);
                    }
                    self.hasher.hash(bytes)
                }
                _ => {
                    self.item_buf.clear();
                    for (j, &c) in items.iter().enumerate() {
                        push_item_field(&mut self.item_buf, field(c).as_bytes(), j > 0, true);
                    }
                    self.item_lens[m] = self.item_buf.len();
                    if self.named[m] {
                        self.item_bytes[m].clear();
                        self.item_bytes[m].extend_from_slice(&self.item_buf);
                    }
                    self.hasher.hash(&self.item_buf)
                }
            };
        }
        Ok(())
    }

    fn parse_json(&mut self, line: &str) -> Result<(), RecordError> {
        let mut found = std::mem::take(&mut self.json_found);
        let r = self.parse_json_into(line, &mut found);
        // Keep the buffer's allocation, not its borrows of `line`.
        found.clear();
        self.json_found = found.into_iter().map(|_| None).collect();
        r
    }

    fn parse_json_into<'a>(
        &mut self,
        line: &'a str,
        found: &mut Vec<Option<Field<'a>>>,
    ) -> Result<(), RecordError> {
        crate::json::fields(line, &self.json_wanted, found)
            .map_err(|e| err(format!("not a JSON object: {e}")))?;
        let messages = self.messages;
        let msg_key = if self.msg_key_bad {
            Err(err(format!(
                "field {KEY_FIELD:?}: the message key is not UTF-8"
            )))
        } else {
            Ok(self.msg_key.as_str())
        };
        let msg_time_text = self.msg_time_text.as_str();
        let get = |i: usize| -> Result<&str, RecordError> {
            let f = &self.json_wanted[i];
            match f.as_str() {
                KEY_FIELD if messages => return msg_key.clone(),
                TIMESTAMP_FIELD if messages => return Ok(msg_time_text),
                _ => {}
            }
            match &found[i] {
                Some(Field::Text(t)) => Ok(t),
                Some(Field::Other(what)) => Err(err(format!(
                    "field {f:?} is {what}, expected a string, number or boolean"
                ))),
                None => Err(err(format!("no field {f:?}"))),
            }
        };
        self.time = if messages && self.time_field == TIMESTAMP_FIELD {
            self.message_time()?
        } else {
            let t = get(0)?;
            self.time_reader
                .read(t)
                .map_err(|e| err(format!("field {:?}: {e}", self.time_field)))?
        };
        for m in 0..self.key_fields.len() {
            let key = &mut self.keys[m];
            key.clear();
            let several = self.json_keys[m].len() > 1;
            for (j, &i) in self.json_keys[m].iter().enumerate() {
                push_key_field(key, get(i)?.as_bytes(), j > 0, several);
            }
            self.item_buf.clear();
            let several = self.json_items[m].len() > 1;
            for (j, &i) in self.json_items[m].iter().enumerate() {
                push_item_field(&mut self.item_buf, get(i)?.as_bytes(), j > 0, several);
            }
            if self.valued[m] {
                let text = get(self.json_items[m][0])?;
                self.item_lens[m] = 0;
                self.items[m] = read_value(text, &self.item_fields[m][0])?.to_bits();
                continue;
            }
            self.item_lens[m] = self.item_buf.len();
            self.items[m] = if self.item_fields[m].is_empty() {
                0
            } else {
                self.hasher.hash(&self.item_buf)
            };
            if self.named[m] {
                self.item_bytes[m].clear();
                self.item_bytes[m].extend_from_slice(&self.item_buf);
            }
        }
        Ok(())
    }
}

/// A value field's number: finite, within the 64-bit float's range.
fn read_value(text: &str, field: &str) -> Result<f64, RecordError> {
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let shown = || {
        let mut s: String = t.chars().take(40).collect();
        if s.len() < t.len() {
            s.push('…');
        }
        s
    };
    if t.is_empty() {
        return Err(err(format!("field {field:?} is empty, expected a number")));
    }
    // Rust's parser also reads "inf", "NaN" and "infinity": none is a value.
    match t.parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        Ok(x) if x.is_nan() => Err(err(format!(
            "field {field:?} is {:?}, not a number (NaN has no place in a quantile)",
            shown()
        ))),
        Ok(_) => Err(err(format!(
            "field {field:?} is {:?}: infinite, or past the 64-bit float's range (±1.8e308)",
            shown()
        ))),
        Err(_) => Err(err(format!(
            "field {field:?} is {:?}, expected a number",
            shown()
        ))),
    }
}

/// Appends one value of a key of `several` fields, after a `,` unless it is the first. A value
/// of a key of several fields that holds `,` or `"` goes in double quotes with its quotes
/// doubled, as a CSV field does: `("a,b", "c")` is `"a,b",c` and `("a", "b,c")` is
/// `a,"b,c"`, where plain joining made both `a,b,c`.
fn push_key_field(key: &mut Vec<u8>, value: &[u8], after_first: bool, several: bool) {
    if after_first {
        key.push(b',');
    }
    if !several || !value.iter().any(|&b| b == b',' || b == b'"') {
        key.extend_from_slice(value);
        return;
    }
    key.push(b'"');
    for &b in value {
        if b == b'"' {
            key.push(b'"');
        }
        key.push(b);
    }
    key.push(b'"');
}

/// The separator between an item's fields, and the byte that escapes it (and itself) inside a
/// value: two control characters no text field is expected to hold, so a plain item's bytes
/// are its values and 0x1f between them.
const ITEM_SEPARATOR: u8 = 0x1f;
const ITEM_ESCAPE: u8 = 0x1e;

/// Appends one value of an item of `several` fields, after the separator unless it is the
/// first; in an item of several fields a value's own separator and escape bytes are each
/// preceded by the escape, so
/// `("p\x1fq", "r")` and `("p", "q\x1fr")` stay two items.
fn push_item_field(item: &mut Vec<u8>, value: &[u8], after_first: bool, several: bool) {
    if after_first {
        item.push(ITEM_SEPARATOR);
    }
    if !several
        || !value
            .iter()
            .any(|&b| b == ITEM_SEPARATOR || b == ITEM_ESCAPE)
    {
        item.extend_from_slice(value);
        return;
    }
    for &b in value {
        if b == ITEM_SEPARATOR || b == ITEM_ESCAPE {
            item.push(ITEM_ESCAPE);
        }
        item.push(b);
    }
}

/// The high bit of each byte of `w` equal to `c`, and no other bit: a byte is equal when
/// its XOR with `c` is zero, and a zero byte is the one whose low seven bits, plus 0x7F, do
/// not carry into bit 7 while its own bit 7 is clear (no borrow crosses bytes, so no byte
/// after a match is marked by it).
#[inline]
fn bytes_equal(w: u64, c: u8) -> u64 {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    let x = w ^ (u64::from(c) * 0x0101_0101_0101_0101);
    !(((x & LOW7).wrapping_add(LOW7)) | x | LOW7)
}

#[inline]
fn base_str<'a>(line: &'a str, unquoted: &'a str, quoted: bool) -> &'a str {
    if quoted {
        unquoted
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(format: &str) -> Config {
        Config::from_toml(&format!(
            r#"
[input]
format = "{format}"
time_field = "ts"
[[metric]]
name = "fan"
kind = "count"
key = ["src", "zone"]
bucket = "1m"
window = "5m"
[[metric]]
name = "d"
kind = "count"
key = ["dst"]
bucket = "1m"
window = "5m"
"#
        ))
        .unwrap()
    }

    /// A byte-order mark before the header is not part of its first name; a header of many
    /// names, the time field missing, is named in a bounded message; a blank one is said to
    /// be blank.
    #[test]
    fn headers_with_a_byte_order_mark_or_many_names() {
        let mut x = Extractor::new(&config("csv"));
        x.header("\u{feff}ts,src,zone,dst").unwrap();
        let r = x.parse("1700000000,a,b,c").unwrap();
        assert_eq!((r.time(), r.key(1)), (1_700_000_000_000, &b"c"[..]));
        let mut x = Extractor::new(&config("csv"));
        let names: Vec<String> = (0..100_000).map(|i| format!("f{i}")).collect();
        let e = x.header(&names.join(",")).unwrap_err().message;
        assert!(
            e.contains("no field \"ts\"") && e.contains("(100000 fields)"),
            "{e}"
        );
        assert!(e.len() < 300, "{e}");
        let mut x = Extractor::new(&config("csv"));
        let e = x.header("ts,src,zone,dst,src").unwrap_err().message;
        assert!(e.contains("\"src\" twice (columns 2 and 5)"), "{e}");
        // A blank first line is said to be blank, not a header without fields.
        for blank in ["", " \t", "\u{feff}"] {
            let e = x.header(blank).unwrap_err().message;
            assert!(
                e.contains("the first line is blank") && e.contains("\"ts\""),
                "{e}"
            );
        }
    }

    proptest::proptest! {
        /// The word-at-a-time split against a byte-by-byte model: the same fields for a line
        /// without quotes (commas at every position of a word, multi-byte characters, short
        /// and long lines). A line with a quote must take the unquoting path (unchanged, and
        /// tested on its own in `csv_fields_quotes_and_errors`): the same fields, or an error
        /// where it errs.
        #[test]
        fn split_finds_the_fields_a_byte_loop_finds(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![",", "\"", "a", "7", "é", "∑", " ", ",,", "\"\""]),
                0..48,
            ),
        ) {
            let line: String = parts.concat();
            let mut x = Extractor::new(&config("csv"));
            let got = x.split(&line).map(|q| (q, x.ranges.clone(), x.unquoted.clone()));
            if line.contains('"') {
                let mut y = Extractor::new(&config("csv"));
                let want = y.split_quoted(&line).map(|q| (q, y.ranges.clone(), y.unquoted.clone()));
                proptest::prop_assert_eq!(got.is_ok(), want.is_ok());
                if let (Ok(g), Ok(w)) = (got, want) {
                    proptest::prop_assert_eq!(g, w);
                }
            } else {
                let mut want = Vec::new();
                let mut start = 0;
                for (i, b) in line.bytes().enumerate() {
                    if b == b',' {
                        want.push((start, i));
                        start = i + 1;
                    }
                }
                want.push((start, line.len()));
                proptest::prop_assert_eq!(got.ok(), Some((false, want, String::new())));
            }
        }
    }

    #[test]
    fn bytes_equal_marks_exactly_the_equal_bytes() {
        // Every pair of neighbouring bytes, at every position: a borrow or carry from one
        // byte must not mark the next.
        for c in [b',', b'"', 0u8, 0x80, 0xFF] {
            for (v, u) in (0..=255u8).flat_map(|v| (0..=255u8).map(move |u| (v, u))) {
                for at in 0..7 {
                    let mut word = [c ^ 0x55; 8];
                    word[at] = v;
                    word[at + 1] = u;
                    let got = bytes_equal(u64::from_le_bytes(word), c);
                    let want = word
                        .iter()
                        .enumerate()
                        .filter(|(_, &b)| b == c)
                        .fold(0u64, |m, (i, _)| m | 0x80 << (8 * i));
                    assert_eq!(got, want, "c {c:#x} v {v:#x} at {at}");
                }
            }
        }
    }

    #[test]
    fn csv_fields_quotes_and_errors() {
        let mut x = Extractor::new(&config("csv"));
        assert!(x.parse("1,a,b,c").is_err(), "records before a header");
        x.header("ts,src,dst,zone").unwrap();
        let r = x.parse("61,10.0.0.1,10.0.0.2,eu").unwrap();
        assert_eq!(r.time(), 61_000);
        assert_eq!(r.key(0), b"10.0.0.1,eu");
        assert_eq!(r.key(1), b"10.0.0.2");
        x.parse("62,\"a,\"\"b\"\"\",x,\"\"").unwrap();
        // `a,"b"` and an empty zone: the first value in quotes (see the joining test).
        assert_eq!(x.keys[0], b"\"a,\"\"b\"\"\",");
        assert_eq!(x.keys[1], b"x");
        for bad in [
            "62,a,b",
            "62,a,b,c,d",
            "x,a,b,c",
            "62,\"a,b,c",
            "62,a\"b,c,d",
        ] {
            assert!(x.parse(bad).is_err(), "{bad:?} accepted");
        }
        let mut y = Extractor::new(&config("csv"));
        let e = y.header("time,src,dst,zone").unwrap_err();
        assert!(e.message.contains("\"ts\""), "{e}");
    }

    #[test]
    fn json_fields() {
        let mut x = Extractor::new(&config("jsonl"));
        x.parse(r#"{"ts": 61.5, "src": "s", "zone": 3, "dst": true}"#)
            .unwrap();
        assert_eq!(x.time, 61_500);
        assert_eq!(x.keys[0], b"s,3");
        assert_eq!(x.keys[1], b"true");
        for bad in [
            "[1]",
            "{",
            r#"{"ts": 1, "src": "s", "zone": 3}"#,
            r#"{"ts": 1, "src": null, "zone": 3, "dst": 1}"#,
            r#"{"ts": "soon", "src": "s", "zone": 3, "dst": 1}"#,
        ] {
            assert!(x.parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn items_hash_the_joined_fields() {
        let c = Config::from_toml(
            r#"
[input]
time_field = "ts"
[[metric]]
name = "x"
kind = "frequency"
key = ["k"]
item = ["a", "b"]
bucket = "1m"
window = "1m"
"#,
        )
        .unwrap();
        let mut x = Extractor::new(&c);
        x.header("ts,k,a,b").unwrap();
        x.parse("1,k,p,q").unwrap();
        let h = ItemHasher::default();
        assert_eq!(x.items[0], h.hash(b"p\x1fq"));
        x.parse("1,k,\"p\",q").unwrap();
        assert_eq!(x.items[0], h.hash(b"p\x1fq"));
    }

    /// Values holding the separators: two different tuples never join to one key or item,
    /// while a key or item of plain values joins as it always did.
    #[test]
    fn fields_holding_the_separators_stay_apart() {
        let mut x = Extractor::new(&config("csv"));
        x.header("ts,src,zone,dst").unwrap();
        let mut key = |line: &str| x.parse(line).unwrap().key(0).to_vec();
        assert_eq!(key("1,a,b,c"), b"a,b");
        assert_eq!(key(r#"1,"a,b",c,d"#), br#""a,b",c"#);
        assert_eq!(key(r#"1,a,"b,c",d"#), br#"a,"b,c""#);
        assert_eq!(key(r#"1,"x""y",z,d"#), br#""x""y",z"#);
        // A key of one field is its value as it is.
        assert_eq!(x.parse(r#"1,a,b,"c,d""#).unwrap().key(1), b"c,d");

        let mut j = Extractor::new(&config("jsonl"));
        let mut key = |line: &str| j.parse(line).unwrap().key(0).to_vec();
        let left = key(r#"{"ts": 1, "src": "a,b", "zone": "c", "dst": 1}"#);
        let right = key(r#"{"ts": 1, "src": "a", "zone": "b,c", "dst": 1}"#);
        assert_eq!(
            (&left[..], &right[..]),
            (&br#""a,b",c"#[..], &br#"a,"b,c""#[..])
        );

        let c = Config::from_toml(
            "[input]\nformat = \"jsonl\"\ntime_field = \"ts\"\n[[metric]]\nname = \"x\"\n\
             kind = \"frequency\"\nkey = [\"k\"]\nitem = [\"a\", \"b\"]\nbucket = \"1m\"\n\
             window = \"1m\"\n",
        )
        .unwrap();
        let mut j = Extractor::new(&c);
        let h = ItemHasher::default();
        // `a` and `b` are JSON string bodies (`\u001f` for the byte 0x1f).
        let mut item = |a: &str, b: &str| {
            let line = format!(r#"{{"ts": 1, "k": "k", "a": "{a}", "b": "{b}"}}"#);
            let r = j.parse(&line).unwrap();
            (r.item(0), r.item_bytes(0).to_vec())
        };
        assert_eq!(item("p", "q"), (h.hash(b"p\x1fq"), b"p\x1fq".to_vec()));
        let left = item(r"p\u001fq", "r");
        let right = item("p", r"q\u001fr");
        assert_ne!(left.0, right.0);
        assert_eq!(left.1, b"p\x1e\x1fq\x1fr");
        assert_eq!(right.1, b"p\x1fq\x1e\x1fr");
    }

    proptest::proptest! {
        /// Joining is one-to-one: two tuples of values (from an alphabet of the separators,
        /// the escapes and a letter) join to the same key, or item, only when they are equal.
        #[test]
        fn joining_is_one_to_one(
            a in proptest::collection::vec(proptest::collection::vec(
                proptest::sample::select(vec![b'a', b',', b'"', 0x1e, 0x1f]), 0..4), 2..4),
            b in proptest::collection::vec(proptest::collection::vec(
                proptest::sample::select(vec![b'a', b',', b'"', 0x1e, 0x1f]), 0..4), 2..4),
        ) {
            let join = |t: &[Vec<u8>]| {
                let (mut key, mut item) = (Vec::new(), Vec::new());
                for (j, v) in t.iter().enumerate() {
                    push_key_field(&mut key, v, j > 0, true);
                    push_item_field(&mut item, v, j > 0, true);
                }
                (key, item)
            };
            let ((ka, ia), (kb, ib)) = (join(&a), join(&b));
            proptest::prop_assert_eq!(ka == kb, a == b);
            proptest::prop_assert_eq!(ia == ib, a == b);
        }
    }
}
