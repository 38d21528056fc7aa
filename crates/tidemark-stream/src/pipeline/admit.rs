//! Admission: a line read becomes a record fed to the engine, a blank line skipped, or a bad
//! line that never touches the engine.
//!
//! A line must be UTF-8; its record must parse, its time be at most [`MAX_TIME`] and at most
//! `max_ahead` beyond the latest time seen, and each metric's key and item be within
//! `max_key_bytes` and `max_item_bytes`. A line longer than `max_line_bytes` was never held
//! ([`too_long`]). One mistyped year cannot move the watermark past every stored bucket.

use crate::config::Limits;
use crate::engine::Engine;
use crate::record::{Extractor, Fields, RecordError};
use crate::state_rows::StoreRows;
use crate::time::MAX_TIME;
use crate::EngineError;

/// What became of a line.
pub(super) enum Admitted {
    /// Empty, or spaces and tabs only: skipped.
    Blank,
    /// A record, fed to the engine: its event time.
    Fed(u64),
    /// A bad line: why.
    Bad(RecordError),
}

/// The rules a record keeps, past its parse.
pub(super) struct Rules<'a> {
    /// Per metric: its name, for messages.
    pub names: &'a [String],
    pub limits: Limits,
    pub max_ahead: u64,
}

/// Admits the line `raw` (its newline included, if it had one): parsed by `ex`, checked, and
/// fed to `engine` (spilled keys read back through `rows`). Fails only when the engine does (a
/// key read back from a damaged or failing store stops the run: not a bad line).
pub(super) fn admit(
    raw: &[u8],
    ex: &mut Extractor,
    engine: &mut Engine,
    rules: &Rules<'_>,
    rows: &mut StoreRows<'_>,
) -> Result<Admitted, EngineError> {
    let line = match line_text(raw) {
        Ok(line) => line,
        Err(e) => return Ok(Admitted::Bad(e)),
    };
    // A line of spaces and tabs is an empty line too (an editor's leftover).
    if line.is_empty() || (line.starts_with([' ', '\t']) && is_blank(line)) {
        return Ok(Admitted::Blank);
    }
    let rec = match ex.parse(line) {
        Ok(rec) => rec,
        Err(e) => return Ok(Admitted::Bad(e)),
    };
    if let Err(e) = check_record(&rec, engine, rules) {
        return Ok(Admitted::Bad(e));
    }
    fed(&rec, engine, rows)
}

/// Admits a record a parse thread parsed, which held its keys and items to their limits: its
/// time checked, and fed to `engine`.
#[inline]
pub(super) fn admit_parsed(
    rec: &impl Fields,
    engine: &mut Engine,
    rules: &Rules<'_>,
    rows: &mut StoreRows<'_>,
) -> Result<Admitted, EngineError> {
    if let Err(e) = check_time(rec.time(), engine, rules) {
        return Ok(Admitted::Bad(e));
    }
    fed(rec, engine, rows)
}

/// Feeds a record checked to `engine`.
#[inline]
fn fed(
    rec: &impl Fields,
    engine: &mut Engine,
    rows: &mut StoreRows<'_>,
) -> Result<Admitted, EngineError> {
    let time = rec.time();
    feed(engine, rec, rows)?;
    Ok(Admitted::Fed(time))
}

/// Why a line longer than `max_line_bytes` (`max`) is bad: `len` bytes of it were read, the
/// whole line when it ended with its newline (`whole`); else it was the input's end or, for a
/// run that stops on it, not read further.
pub(super) fn too_long(len: u64, whole: bool, max: usize) -> RecordError {
    let message = if whole {
        format!("the line is {len} bytes, longer than max_line_bytes = {max}")
    } else {
        format!("the line is longer than max_line_bytes = {max} ({len} bytes read of it)")
    };
    RecordError { message }
}

/// A line of spaces and tabs only (or nothing): skipped like an empty line.
fn is_blank(line: &str) -> bool {
    line.bytes().all(|b| b == b' ' || b == b'\t')
}

/// A line's text: its bytes without the newline and a carriage return before it, as UTF-8.
pub(super) fn line_text(buf: &[u8]) -> Result<&str, RecordError> {
    let mut b = buf;
    if let Some(r) = b.strip_suffix(b"\n") {
        b = r;
    }
    if let Some(r) = b.strip_suffix(b"\r") {
        b = r;
    }
    std::str::from_utf8(b).map_err(|e| RecordError {
        message: format!("not UTF-8: {e}"),
    })
}

/// The rules a parsed record must keep before it reaches the engine: its time within
/// [`MAX_TIME`] and `max_ahead` of the latest time seen, its keys and items within their
/// limits.
fn check_record(rec: &impl Fields, engine: &Engine, rules: &Rules<'_>) -> Result<(), RecordError> {
    check_time(rec.time(), engine, rules)?;
    check_limits(rec, rules.names, rules.limits)
}

/// A record's time: at most [`MAX_TIME`], and at most `max_ahead` beyond the latest time the
/// engine has seen.
pub(super) fn check_time(time: u64, engine: &Engine, rules: &Rules<'_>) -> Result<(), RecordError> {
    let bad = |message: String| Err(RecordError { message });
    if time > MAX_TIME {
        return bad(format!("time {time} ms is after the year 9999"));
    }
    if let Some(latest) = engine.max_time() {
        if time > latest.saturating_add(rules.max_ahead) {
            return bad(format!(
                "time {} is {} ahead of the latest time seen ({}), more than max_ahead = {}: \
                 a mistyped date would move the watermark past every bucket (raise \
                 input.max_ahead if the data really jumps)",
                crate::time::format_rfc3339(time),
                crate::time::format_span(time - latest),
                crate::time::format_rfc3339(latest),
                crate::time::format_duration(rules.max_ahead),
            ));
        }
    }
    Ok(())
}

/// A record's keys and items within `max_key_bytes` and `max_item_bytes` (per metric,
/// `names` giving each metric's name for the message). A parse thread checks them before it
/// copies anything; the time is checked first all the same ([`check_time`]).
pub(super) fn check_limits(
    rec: &impl Fields,
    names: &[String],
    limits: Limits,
) -> Result<(), RecordError> {
    let bad = |message: String| Err(RecordError { message });
    for (m, name) in names.iter().enumerate() {
        if rec.key(m).len() > limits.key {
            return bad(format!(
                "metric {name}: the key is {} bytes, longer than max_key_bytes = {}",
                rec.key(m).len(),
                limits.key
            ));
        }
        if rec.item_len(m) > limits.item {
            return bad(format!(
                "metric {name}: the item is {} bytes, longer than max_item_bytes = {}",
                rec.item_len(m),
                limits.item
            ));
        }
    }
    Ok(())
}

/// One record into the engine: its time, then its key and item for every metric. The
/// engine defers the adds and makes them a batch at a time (see `engine::batch`): a commit
/// adds what is left, and so do the budget's count, a read of a pipe or standard input that
/// may wait, and the end of what a followed file has for now.
#[inline]
fn feed(
    engine: &mut Engine,
    rec: &impl Fields,
    rows: &mut StoreRows<'_>,
) -> Result<(), EngineError> {
    let t = rec.time();
    engine.observe_from(t, rows)?;
    let mut full = false;
    for m in 0..rec.metrics() {
        full |= engine.defer(m, t, rec.key(m), rec.item(m), rec.item_bytes(m));
    }
    if full {
        engine.drain(rows)?;
    }
    Ok(())
}
