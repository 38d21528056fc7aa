//! A file's lines split and parsed in a thread of their own, while the run's thread feeds the
//! engine: the run's first stage on a second core.
//!
//! The thread reads the file from where the run resumes it (after its header), with the
//! same bounded [`Lines`] a one-thread run reads with, and parses each line with a clone of
//! the run's [`Extractor`] (the header already read into it). It hands the run batches of
//! [`LINES_PER_BATCH`] lines: each line's number and end offset, and what it was — a record
//! (its time, and per metric its key, item hash and item bytes, copied back to back), a blank
//! line, or a bad line with its error. The run's thread checks each record against the engine
//! ([`super::admit::admit_parsed`]: `max_ahead` needs the latest time admitted) and feeds it,
//! in the file's order: the engine sees exactly the records, in exactly the order, of a
//! one-thread run, so every answer, alert and stored row is the same.
//!
//! A [`super::sources::FileSource`] that parses ahead hands out its lines from a
//! [`ParseAhead`]. Its position is the end of the last line it handed out (a blank line
//! counts as handed out), so a checkpoint commits the position of the records the engine
//! has, not of those the thread has parsed ahead. A bad line the run stops on is unread as
//! in a one-thread run, and dropping the [`ParseAhead`] stops the thread (and, for a file,
//! joins it; a stream's thread may be waiting in a read for its writer, and is left to end at
//! its next line).
//!
//! What the stage holds is bounded, whatever the lines: the thread holds one line of at most
//! `max_line_bytes` as it reads; a record's keys and items are checked against
//! `max_key_bytes` and `max_item_bytes` before anything of them is copied (one past its limit
//! is handed over as its time and its error, and the run's thread checks the time first, so
//! the error is the one a one-thread run gives); a batch holds at most [`LINES_PER_BATCH`]
//! lines and about [`BATCH_BYTES`] of keys, items and error messages (its last line may pass
//! that by its own, at most about a line's length: a JSON parser's error quotes the string it
//! refused); at most [`Bounds::ahead`] batches wait, with one being filled, one being read and
//! a few emptied ones kept for reuse (one that grew past twice the bound gives its room back).
//! When the run is done with the lines (the end, a bad line it stops on, a signal), the
//! thread stops at its next line.
//!
//! A regular file read to its end (not followed), a named pipe or device, and standard input
//! once its first 64 KiB are read (what a run knows the stream by: [`super::stdin`]) are
//! parsed this way. A stream's reads may wait for its writer: the thread hands over what it
//! parsed before such a read, and the run, finding nothing waiting
//! ([`ParseAhead::waits_next`]), adds what it has and sends its alerts before it waits in
//! turn. A followed file and a message source are read by the run's thread as before.

use std::io::{self, BufRead};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::admit::{check_limits, line_text, too_long};
use super::input::{self, Lines};
use super::line::input_error;
use super::line::Next;
use crate::config::Limits;
use crate::record::{Extractor, Fields, RecordError};
use crate::RunError;

/// Lines a batch holds: enough that handing one over costs little per line, few enough that
/// a batch is still in the caches when the engine reads it. Measured on the demo's flow log
/// (fan-out config, 2 cores): 4,096 cost 1.16× the CPU of one thread, 512 1.04×, 128 1.08×.
pub(super) const LINES_PER_BATCH: usize = 512;
/// Key and item bytes a batch holds before it is handed over (its last record may pass it by
/// its own keys and items, each within the input's limits).
const BATCH_BYTES: usize = 1 << 17;
/// What bounds a parse thread: the limits a record's keys and items are held to, and the
/// batches it parses ahead of the engine at most ([`Bounds::of`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    pub limits: Limits,
    pub ahead: usize,
}

impl Bounds {
    /// The bounds of a run of `config`: its limits, and as many batches ahead as a
    /// sixty-fourth of its memory budget holds at [`BATCH_BYTES`] of keys and items each,
    /// from 16 (as many as before this bound, whatever the budget) to 128 (the default 1 GiB
    /// budget's). A batch holds more than its keys and items — its records' offsets, its line
    /// ends, room kept for reuse up to twice the bound — so this is the count, not a byte
    /// bound: measured, the fan-out demo's peak with 128 was about 15 MiB above its peak with
    /// 16, and under `--max-memory 16MiB` 64 batches had raised a run's peak from 50 to as
    /// much as 81 MiB (hence the scaling). Many batches ahead cover the scheduler's slice in
    /// which this thread may not run while the engine and the committer hold both cores of a
    /// 2-core machine: with 16 the engine waited about 4 ms at a time, once every few closes,
    /// and 64 made the run 0.92× the wall time.
    pub(super) fn of(config: &crate::config::Config) -> Bounds {
        let ahead = (config.checkpoint.max_memory / 64 / BATCH_BYTES as u64).clamp(16, 128);
        Bounds {
            limits: config.input.limits,
            ahead: ahead as usize,
        }
    }
}

/// What one line was.
enum What {
    /// A record: its time and its first event in [`Batch::events`] (one per metric).
    Record { time: u64, first: usize },
    /// Empty, or spaces and tabs: skipped.
    Blank,
    /// A bad line: its error in [`Batch::errors`].
    Bad(usize),
    /// A record with a key or item past its limit (nothing of it copied): its time, which
    /// the run's thread checks first as for any record, and its error in [`Batch::errors`].
    Oversized { time: u64, error: usize },
}

struct ParsedLine {
    number: u64,
    end: u64,
    what: What,
}

/// One metric's part of a record.
struct Event {
    key: Range<usize>,
    item: u64,
    item_bytes: Range<usize>,
    item_len: usize,
}

/// Lines parsed, in the file's order.
#[derive(Default)]
struct Batch {
    lines: Vec<ParsedLine>,
    events: Vec<Event>,
    bytes: Vec<u8>,
    errors: Vec<RecordError>,
    /// Bytes held: keys and items, and the errors' messages (a JSON parser's names the
    /// string it refused, which can be as long as the line).
    held: usize,
    /// Set on the last batch: where the file's reading ends (offset, lines before it) — its
    /// end, or the start of an unterminated last line left for a later run.
    end: Option<(u64, u64)>,
}

impl Batch {
    fn clear(&mut self) {
        self.lines.clear();
        self.events.clear();
        self.bytes.clear();
        self.errors.clear();
        self.held = 0;
        self.end = None;
        // A batch that once held a long line's error gives its room back.
        if self.bytes.capacity() > 2 * BATCH_BYTES {
            self.bytes = Vec::new();
        }
        if self.errors.capacity() > LINES_PER_BATCH {
            self.errors = Vec::new();
        }
    }

    fn push_record(&mut self, rec: &impl Fields, number: u64, end: u64) {
        let first = self.events.len();
        let before = self.bytes.len();
        for m in 0..rec.metrics() {
            let at = self.bytes.len();
            self.bytes.extend_from_slice(rec.key(m));
            let key_end = self.bytes.len();
            self.bytes.extend_from_slice(rec.item_bytes(m));
            self.events.push(Event {
                key: at..key_end,
                item: rec.item(m),
                item_bytes: key_end..self.bytes.len(),
                item_len: rec.item_len(m),
            });
        }
        // Added to what the batch holds (errors' messages included), not replacing it.
        self.held += self.bytes.len() - before;
        let time = rec.time();
        self.lines.push(ParsedLine {
            number,
            end,
            what: What::Record { time, first },
        });
    }

    /// Keeps an error, returning its index.
    fn keep(&mut self, e: RecordError) -> usize {
        self.held += e.message.len();
        self.errors.push(e);
        self.errors.len() - 1
    }

    fn push_bad(&mut self, e: RecordError, number: u64, end: u64) {
        let what = What::Bad(self.keep(e));
        self.lines.push(ParsedLine { number, end, what });
    }

    fn push_oversized(&mut self, time: u64, e: RecordError, number: u64, end: u64) {
        let what = What::Oversized {
            time,
            error: self.keep(e),
        };
        self.lines.push(ParsedLine { number, end, what });
    }
}

/// A line a [`ParsedFile`] hands out.
pub(super) enum Parsed<'a> {
    /// A record, to admit.
    Record(ParsedRecord<'a>),
    /// Empty, or spaces and tabs: skipped.
    Blank,
    /// A bad line, and why.
    Bad(&'a RecordError),
    /// A record whose key or item is past its limit: its time (checked first, as for any
    /// record), and the limit's error.
    Oversized { time: u64, error: &'a RecordError },
}

/// A record of a batch, as the engine reads it.
pub(super) struct ParsedRecord<'a> {
    batch: &'a Batch,
    time: u64,
    first: usize,
    metrics: usize,
}

impl ParsedRecord<'_> {
    #[inline]
    fn event(&self, m: usize) -> &Event {
        &self.batch.events[self.first + m]
    }
}

impl Fields for ParsedRecord<'_> {
    #[inline]
    fn time(&self) -> u64 {
        self.time
    }
    #[inline]
    fn key(&self, m: usize) -> &[u8] {
        &self.batch.bytes[self.event(m).key.clone()]
    }
    #[inline]
    fn item(&self, m: usize) -> u64 {
        self.event(m).item
    }
    #[inline]
    fn item_bytes(&self, m: usize) -> &[u8] {
        &self.batch.bytes[self.event(m).item_bytes.clone()]
    }
    #[inline]
    fn item_len(&self, m: usize) -> usize {
        self.event(m).item_len
    }
    #[inline]
    fn metrics(&self) -> usize {
        self.metrics
    }
}

/// How the thread reads: what a one-thread [`super::sources::FileSource`] would decide per
/// line, and the limits a record's keys and items are held to before they are copied.
#[derive(Clone)]
pub(super) struct ParseRules {
    /// `max_line_bytes`.
    pub max_line: usize,
    /// An unterminated last line is not whole yet (`keep_open`): left for a later run.
    pub open_ended: bool,
    pub skip_bad: bool,
    /// Per metric, its name (for a limit's message).
    pub names: Vec<String>,
    pub bounds: Bounds,
}

/// The thread: parses `lines` into batches until their end, or until the run stops taking
/// them.
fn parse_thread<R: BufRead>(
    mut lines: Lines<R>,
    prepare: impl FnOnce(&mut Lines<R>) -> io::Result<()>,
    mut ex: Extractor,
    stage: Stage,
) {
    let Stage {
        rules,
        name,
        out,
        spare,
        stop,
        sent,
    } = stage;
    if let Err(e) = prepare(&mut lines) {
        let _ = out.send(Err(input_error(&name, e)));
        return;
    }
    loop {
        let mut batch = spare.try_recv().unwrap_or_default();
        batch.clear();
        while batch.lines.len() < LINES_PER_BATCH && batch.held < BATCH_BYTES && batch.end.is_none()
        {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            // A stream's next read may wait for its writer: what was parsed goes first, so
            // that the run adds it and sends its alerts before that wait.
            if lines.waits_next() && !batch.lines.is_empty() {
                break;
            }
            let start = (lines.offset, lines.line);
            let line = match lines.next_line() {
                Ok(line) => line,
                Err(e) => {
                    // What was parsed goes first: the run stops on the error after it.
                    let _ = out.send(Ok(batch));
                    let _ = out.send(Err(input_error(&name, e)));
                    return;
                }
            };
            match line {
                input::Line::End => batch.end = Some(start),
                input::Line::Text {
                    raw,
                    number,
                    end,
                    terminated,
                } => {
                    if !terminated && rules.open_ended {
                        batch.end = Some(start);
                        continue;
                    }
                    let parsed = line_text(raw).and_then(|text| {
                        // A line of spaces and tabs is an empty line too.
                        if text.bytes().all(|b| b == b' ' || b == b'\t') {
                            return Ok(None);
                        }
                        ex.parse(text).map(Some)
                    });
                    match parsed {
                        Ok(Some(rec)) => {
                            match check_limits(&rec, &rules.names, rules.bounds.limits) {
                                Ok(()) => batch.push_record(&rec, number, end),
                                Err(e) => batch.push_oversized(rec.time(), e, number, end),
                            }
                        }
                        Ok(None) => batch.lines.push(ParsedLine {
                            number,
                            end,
                            what: What::Blank,
                        }),
                        Err(e) => batch.push_bad(e, number, end),
                    }
                }
                input::Line::TooLong {
                    len,
                    number,
                    end,
                    terminated,
                } => {
                    if !terminated && rules.open_ended && rules.skip_bad {
                        // Counted once, whole, by a later run.
                        batch.end = Some(start);
                        continue;
                    }
                    batch.push_bad(too_long(len, terminated, rules.max_line), number, end);
                }
            }
        }
        let last = batch.end.is_some();
        // Counted before it is sent: a batch on its way is never taken for none.
        sent.fetch_add(1, Ordering::Release);
        if out.send(Ok(batch)).is_err() || last {
            return;
        }
    }
}

/// What the parse thread takes besides its lines: its rules, the input's name (for errors),
/// its two channels, and the flag that stops it between lines.
struct Stage {
    rules: ParseRules,
    name: String,
    out: SyncSender<Result<Batch, RunError>>,
    spare: Receiver<Batch>,
    stop: Arc<AtomicBool>,
    /// Batches handed over so far.
    sent: Arc<AtomicU64>,
}

/// A file's lines parsed ahead by a thread (see the module doc), for its
/// [`super::sources::FileSource`].
pub(super) struct ParseAhead {
    batches: Receiver<Result<Batch, RunError>>,
    spare: SyncSender<Batch>,
    thread: Option<JoinHandle<()>>,
    /// Set when the run is done with the lines: the thread stops at its next line.
    stop: Arc<AtomicBool>,
    /// Whether dropping it waits for the thread: a file's reads end; a stream's read may
    /// wait for its writer forever, and its thread is left to stop at its next line.
    join: bool,
    /// Batches the thread handed over, and those taken: equal when none is waiting.
    sent: Arc<AtomicU64>,
    taken: u64,
    /// The batch being read, and its next line.
    batch: Batch,
    next: usize,
    metrics: usize,
    /// (offset, lines) after the last line handed out, and where that line began.
    at: (u64, u64),
    last_start: (u64, u64),
    /// The last batch has been read.
    ended: bool,
}

impl ParseAhead {
    /// Parses `lines` in a thread, with `ex` (the run's extractor, the header read into it),
    /// from `at` (offset, lines before it): the thread first `prepare`s them (a file's seek
    /// there; a stream stands there already). When the system cannot start a thread the
    /// lines come back untouched, and the run reads on in its own.
    pub(super) fn start<R: BufRead + Send + 'static>(
        lines: Lines<R>,
        stream: bool,
        prepare: impl FnOnce(&mut Lines<R>) -> io::Result<()> + Send + 'static,
        at: (u64, u64),
        ex: &Extractor,
        rules: ParseRules,
        name: &str,
    ) -> Result<ParseAhead, Box<Lines<R>>> {
        let (out, batches) = sync_channel(rules.bounds.ahead);
        let (spare, spares) = sync_channel(rules.bounds.ahead + 2);
        // The lines go to the thread once it runs, so that a thread that cannot start leaves
        // them (and what a stream's buffer holds) to the caller.
        let (give, take) = sync_channel::<Lines<R>>(1);
        let ex = ex.clone();
        let metrics = ex.metrics();
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let stage = Stage {
            rules,
            name: name.to_string(),
            out,
            spare: spares,
            stop: Arc::clone(&stop),
            sent: Arc::clone(&sent),
        };
        let spawned = std::thread::Builder::new()
            .name("tidemark-parse".into())
            .spawn(move || {
                super::priority::behind_the_run();
                if let Ok(lines) = take.recv() {
                    parse_thread(lines, prepare, ex, stage);
                }
            });
        let thread = match spawned {
            Ok(thread) => thread,
            Err(_) => return Err(Box::new(lines)),
        };
        // The thread waits for nothing else: it takes the lines at once.
        if let Err(back) = give.send(lines) {
            return Err(Box::new(back.0));
        }
        Ok(ParseAhead {
            batches,
            spare,
            stop,
            join: !stream,
            sent,
            taken: 0,
            thread: Some(thread),
            batch: Batch::default(),
            next: 0,
            metrics,
            at,
            last_start: at,
            ended: false,
        })
    }

    /// [`ParseAhead::start`] for a stream (a named pipe, standard input): read on from where
    /// its lines stand, its last line a record with or without its newline, its thread not
    /// waited for when the run is done with it (it may be waiting for its writer).
    pub(super) fn stream<R: BufRead + Send + 'static>(
        lines: Lines<R>,
        ex: &Extractor,
        names: Vec<String>,
        bounds: Bounds,
        name: &str,
    ) -> Result<ParseAhead, Box<Lines<R>>> {
        let rules = ParseRules {
            max_line: lines.max_line(),
            open_ended: false,
            skip_bad: false,
            names,
            bounds,
        };
        let at = (lines.offset, lines.line);
        ParseAhead::start(lines, true, |_| Ok(()), at, ex, rules, name)
    }

    /// The next line, parsed; the end of the file's lines; or the thread's read error.
    pub(super) fn next_line(&mut self) -> Result<Next<'_>, RunError> {
        while self.next >= self.batch.lines.len() {
            if let Some(end) = self.batch.end {
                self.at = end;
                self.ended = true;
            }
            if self.ended {
                return Ok(Next::End);
            }
            let Ok(got) = self.batches.recv() else {
                return Err(RunError::Thread { name: "parse" });
            };
            self.taken += 1;
            let used = std::mem::replace(&mut self.batch, got?);
            let _ = self.spare.try_send(used);
            self.next = 0;
        }
        let line = &self.batch.lines[self.next];
        self.next += 1;
        self.last_start = self.at;
        self.at = (line.end, line.number);
        let parsed = match line.what {
            What::Record { time, first } => Parsed::Record(ParsedRecord {
                batch: &self.batch,
                time,
                first,
                metrics: self.metrics,
            }),
            What::Bad(e) => Parsed::Bad(&self.batch.errors[e]),
            What::Oversized { time, error } => Parsed::Oversized {
                time,
                error: &self.batch.errors[error],
            },
            What::Blank => Parsed::Blank,
        };
        Ok(Next::Parsed {
            number: line.number,
            end: line.end,
            line: parsed,
        })
    }

    /// Whether the next line waits for the thread (none parsed is waiting): for a stream,
    /// whose thread hands over what it has before a read that may wait, the run adds what
    /// it has and sends its alerts first.
    pub(super) fn waits_next(&self) -> bool {
        !self.ended
            && self.next >= self.batch.lines.len()
            && self.batch.end.is_none()
            && self.sent.load(Ordering::Acquire) == self.taken
    }

    /// The last line handed out was not taken (a bad line the run stops on): the position is
    /// its start.
    pub(super) fn unread_last(&mut self) {
        self.at = self.last_start;
    }

    /// (offset, lines before it) after the last line handed out.
    pub(super) fn position(&self) -> (u64, u64) {
        self.at
    }
}

impl Drop for ParseAhead {
    fn drop(&mut self) {
        // The thread stops at its next line, or at its next hand-over, which fails once the
        // channel is gone.
        self.stop.store(true, Ordering::Relaxed);
        let (_, gone) = sync_channel(0);
        drop(std::mem::replace(&mut self.batches, gone));
        // A file's thread is joined (its reads end); a stream's may be waiting in a read for
        // a writer that never writes again, and the run must not wait with it: it stops, and
        // ends, at its next line (its process's exit ends it sooner).
        match self.thread.take() {
            Some(t) if self.join => {
                let _ = t.join();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of one metric: key "k", item "i".
    struct One;

    impl Fields for One {
        fn time(&self) -> u64 {
            60_000
        }
        fn key(&self, _: usize) -> &[u8] {
            b"k"
        }
        fn item(&self, _: usize) -> u64 {
            7
        }
        fn item_bytes(&self, _: usize) -> &[u8] {
            b"i"
        }
        fn item_len(&self, _: usize) -> usize {
            1
        }
        fn metrics(&self) -> usize {
            1
        }
    }

    /// What a batch holds counts its errors' messages and its keys and items, in any order:
    /// a record after a long error does not forget the error.
    #[test]
    fn a_batch_counts_errors_and_records_together() {
        let mut b = Batch::default();
        let message = "x".repeat(1000);
        b.push_bad(RecordError { message }, 1, 10);
        b.push_record(&One, 2, 20);
        assert_eq!(b.held, 1000 + 2);
        b.push_record(&One, 3, 30);
        assert_eq!(b.held, 1000 + 4);
        b.clear();
        assert_eq!(b.held, 0);
    }
}
