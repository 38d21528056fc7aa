//! The seam between the read loop ([`super::run`]) and its inputs: a [`LineSource`], what it
//! returns ([`Next`], [`Line`]), how the run reads ([`Reading`]), and an opened file
//! ([`OpenFile`]). The sources themselves are in [`super::sources`], [`super::follow`],
//! [`super::stdin`] and [`super::message`].
//!
//! The read loop knows an input only as a [`LineSource`]. It asks for the next line
//! ([`LineSource::next_line`]), and gets a [`Line`], [`Next::Idle`] (none yet; more may come)
//! or [`Next::End`]; before a read that may wait ([`LineSource::waits_next`]) it adds the
//! engine's deferred events and sends their alerts; before each checkpoint it has the source
//! write where it stands into the run state ([`LineSource::save_position`]), so the position
//! commits in the same transaction as the buckets it accounts for — what makes a resume count
//! every record once.
//!
//! A message source uses the parts of the seam a file does not: [`Line::Message`] carries a
//! message's key and timestamp beside its value and names it by topic, partition and offset
//! in a bad record's error ([`LineSource::bad`]); [`Next::Checkpoint`] asks the run to
//! checkpoint now (partitions are being taken away, and must be committed before they go);
//! [`LineSource::observed`] tells the source each record's event time and
//! [`LineSource::time_bound`] bounds the time that closes buckets by its watermark (see
//! [`crate::engine::Engine::bound_time`]); [`LineSource::checkpointed`] follows each commit
//! of its positions (to write the broker's group offsets, for monitoring).

use std::fs::File;
use std::io;

use super::input;
use super::state::{FileMark, RunState};
use super::Follow;
use crate::RunError;

/// What a source has next.
pub(super) enum Next<'a> {
    /// A line.
    Line(Line<'a>),
    /// No line yet, more may come (a followed file at its end): the run adds what it read,
    /// asks [`LineSource::idle`] what the source found, and waits ([`LineSource::wait`]).
    Idle,
    /// No more lines: the input is done for this run.
    End,
    /// Checkpoint now, the positions the source saves included, then read on (a message
    /// source whose partitions are being taken away).
    Checkpoint,
    /// A line parsed already (by a parse thread, see [`super::parse`]): its 1-based number,
    /// the input's offset just after it, and what it was.
    Parsed {
        number: u64,
        end: u64,
        line: super::parse::Parsed<'a>,
    },
}

/// One line of an input.
pub(super) enum Line<'a> {
    /// A line's bytes (its newline included, if it had one).
    Text {
        /// The bytes.
        raw: &'a [u8],
        /// Its 1-based number.
        number: u64,
        /// The input's offset just after it (for progress).
        end: u64,
    },
    /// A message's value: one record, with the message's key and timestamp.
    Message {
        /// The value's bytes.
        raw: &'a [u8],
        /// The message's key.
        key: Option<&'a [u8]>,
        /// The message's timestamp, ms.
        timestamp: Option<i64>,
        /// Its 1-based number among the messages read.
        number: u64,
    },
    /// A line longer than `max_line_bytes`: skipped, never held.
    TooLong {
        /// Its length, bytes (read so far, unless `whole`).
        len: u64,
        /// Whether it ended with its newline, so `len` is its whole length.
        whole: bool,
        /// Its 1-based number.
        number: u64,
        /// The input's offset just after it.
        end: u64,
    },
}

impl<'a> Line<'a> {
    /// A line read from [`Lines`], or `None` at their end.
    pub(super) fn of(line: input::Line<'a>) -> Option<Line<'a>> {
        match line {
            input::Line::Text {
                raw, number, end, ..
            } => Some(Line::Text { raw, number, end }),
            input::Line::TooLong {
                len,
                number,
                end,
                terminated,
            } => Some(Line::TooLong {
                len,
                whole: terminated,
                number,
                end,
            }),
            input::Line::End => None,
        }
    }
}

/// What a source found when idle, once the run has added what it read.
pub(super) enum Pause {
    /// Nothing to read yet: the run may checkpoint, then calls [`LineSource::wait`].
    Wait,
    /// Read on at once (a rotated file's last line, which no newline will complete now).
    ReadOn,
    /// The input was rotated away and read to its end: the path's new file is next.
    Rotated,
}

/// What a source found after waiting.
pub(super) enum Waited {
    /// Read on.
    ReadOn,
    /// The input was truncated: it is read again from its start, and its position is that
    /// start now (for the checkpoint that says so).
    Truncated,
}

/// One input as the read loop sees it: its lines, the position to commit for them, and what to
/// do while none has come. See the module doc for the contract and a message source's part.
pub(super) trait LineSource {
    /// The input's name in messages: the path as given, or `<stdin>`.
    fn name(&self) -> &str;

    /// The first line as it stands (whole or not), for a CSV header: read before
    /// [`LineSource::resume`]. `None`: there is none.
    fn header(&mut self) -> Result<Option<Line<'_>>, RunError>;

    /// Reads the line [`LineSource::header`] returned again, as the first record (a followed
    /// file's new start that repeats no header).
    fn unread_header(&mut self) -> Result<(), RunError> {
        Err(RunError::Input {
            file: self.name().to_string(),
            message: "a stream cannot seek".to_string(),
        })
    }

    /// Moves past what earlier runs committed (after the header).
    fn resume(&mut self) -> Result<(), RunError>;

    /// Parses the lines from here on ahead, in a thread of their own, with `ex` (the run's
    /// extractor), holding each metric's (named in `names`) keys and items to `bounds`: a
    /// regular file read to its end, a named pipe and standard input do (see
    /// [`super::parse`]); a followed file and a message source read on in the run's thread.
    fn parse_ahead(
        &mut self,
        _ex: &crate::record::Extractor,
        _names: &[String],
        _bounds: super::parse::Bounds,
    ) -> Result<(), RunError> {
        Ok(())
    }

    /// Whether the next [`LineSource::next_line`] may wait for input: the run first adds the
    /// engine's deferred events and sends their alerts, so none waits on a line not yet come.
    fn waits_next(&self) -> bool;

    /// The next line, or why there is none.
    fn next_line(&mut self) -> Result<Next<'_>, RunError>;

    /// Takes the last line back: where the input stands is its start again (a bad line the run
    /// stops on, read again after it is mended).
    fn unread_last(&mut self);

    /// Whether the records read so far may be committed and their alerts sent; fails once the
    /// input is known to be data already counted (standard input, see
    /// [`super::stdin::StdinHead`]).
    fn may_commit(&mut self) -> Result<bool, RunError> {
        Ok(true)
    }

    /// After [`Next::Idle`], what the source found (once the run has added what it read).
    fn idle(&mut self) -> Result<Pause, RunError> {
        Ok(Pause::Wait)
    }

    /// Waits for more (after the run checked its stop flag and checkpointed if due).
    fn wait(&mut self) -> Result<Waited, RunError> {
        Ok(Waited::ReadOn)
    }

    /// Writes where the input stands into the run state, for a checkpoint.
    fn save_position(&mut self, state: &mut RunState) -> Result<(), RunError>;

    /// Writes where this run leaves the input into the run state: its reading has ended (its
    /// end, a stop, a bad line).
    fn finish(&mut self, state: &mut RunState) -> Result<(), RunError> {
        self.save_position(state)
    }

    /// Its size when opened, bytes, for progress (0 when not known).
    fn size(&self) -> u64 {
        0
    }

    /// The error for the bad record numbered `number` (the last returned) when the run stops
    /// on it.
    fn bad(&self, number: u64, message: String) -> RunError {
        RunError::BadLine {
            file: self.name().to_string(),
            line: number,
            message,
        }
    }

    /// Where the bad record numbered `number` (the last returned) is, as a skipped one is
    /// reported: a file and a line, or a place and 0 (a message: its topic, partition and
    /// offset).
    fn bad_at(&self, number: u64) -> (String, u64) {
        (self.name().to_string(), number)
    }

    /// The event time of the record just fed from the last line returned.
    fn observed(&mut self, _time: u64) {}

    /// An outside bound on the time that closes buckets (the source's watermark), for a
    /// source of several streams read interleaved; `None` for one ordered stream.
    fn time_bound(&mut self) -> Option<u64> {
        None
    }

    /// The positions this source saved into `state` were just committed.
    fn checkpointed(&mut self, _state: &RunState) {}

    /// Whether the run may read on while a checkpoint of this source's position is written
    /// (by a committer thread): the source does nothing on a commit
    /// ([`LineSource::checkpointed`]), and reads ahead in a thread of its own.
    fn commits_async(&self) -> bool {
        false
    }

    /// Where the source's partitions stand, for the run's report.
    fn partitions(&self) -> Vec<super::PartitionReport> {
        Vec::new()
    }
}

/// How the run reads its inputs.
#[derive(Clone, Copy)]
pub(super) struct Reading {
    /// `max_line_bytes`.
    pub max_line: usize,
    /// Bad lines are counted and skipped (else the run stops on one, so a too-long line need
    /// not be scanned to its end).
    pub skip_bad: bool,
    /// More will be appended to the files: an unterminated last line waits for the next run.
    pub keep_open: bool,
    /// Following the one file.
    pub follow: Option<Follow>,
    /// Standard input must not be the stream the last run read to its end (that run completed,
    /// and this one does not restart).
    pub stdin_new: bool,
}

/// One input file, opened and identified.
pub(super) struct OpenFile {
    pub file: File,
    /// A second handle, for fingerprints.
    pub probe: File,
    pub dev: u64,
    pub ino: u64,
    /// Its canonical path.
    pub path: String,
    /// Its size when opened.
    pub size: u64,
}

impl OpenFile {
    /// The mark of its first `offset` bytes (`line` lines), fingerprinted.
    pub fn mark(&mut self, offset: u64, line: u64) -> Result<FileMark, RunError> {
        let (head, tail) =
            input::fingerprint(&mut self.probe, offset).map_err(|e| RunError::Input {
                file: self.path.clone(),
                message: format!("reading it back for its fingerprint: {e}"),
            })?;
        Ok(FileMark {
            dev: self.dev,
            ino: self.ino,
            path: self.path.clone(),
            offset,
            line,
            head,
            tail,
            used: 0,
        })
    }
}

pub(super) const DIRECTORY: &str = "a directory, not a file of records (name the files in it)";

/// An input's I/O error, naming it.
pub(super) fn input_error(name: &str, e: io::Error) -> RunError {
    RunError::Input {
        file: name.to_string(),
        message: e.to_string(),
    }
}
