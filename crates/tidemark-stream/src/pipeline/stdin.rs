//! Standard input: a stream without an identity, so it is known by its first bytes.
//!
//! An interrupted run is resumed by skipping the committed number of bytes, which presumes the
//! same stream is fed again: its first bytes (as of the last checkpoint) must be that run's,
//! or the skipped bytes would be another stream's, never counted. After a completed run,
//! standard input is new data — unless it begins with the same bytes as the stream that run
//! read to its end, which is refused as the same stream fed twice. Until that is known, no
//! record read from it is committed and no alert goes out ([`StdinHead::decided`]).
//!
//! With more than one thread, its lines are parsed ahead by a thread of their own
//! ([`super::parse`]) once its head is whole (the first 64 KiB read, or known to be cut by a
//! line too long to keep): from then on nothing the head needs passes by, and the stream's
//! position is the parse stage's.

use std::io::{self, BufReader, Stdin};

use super::input::Lines;
use super::line::{input_error, Line, LineSource, Next, Reading};
use super::parse::Bounds;
use super::parse::ParseAhead;
use super::state::{RunState, FINGERPRINT_SPAN};
use crate::record::Extractor;
use crate::RunError;

const NAME: &str = "<stdin>";

/// Standard input as a [`LineSource`]: its position is `RunState::stdin`, its head
/// `RunState::stdin_head` (at the end of its reading) and `RunState::stdin_resume` (at each
/// checkpoint).
pub(super) struct StdinSource {
    /// Its lines, until a parse thread takes them.
    lines: Option<Lines<BufReader<Stdin>>>,
    /// The lines parsed ahead by a thread, once the head is whole.
    ahead: Option<ParseAhead>,
    /// What a parse thread needs, asked for ([`LineSource::parse_ahead`]) and not started
    /// yet (until the head is whole).
    ahead_wanted: Option<(Extractor, Vec<String>, Bounds)>,
    head: StdinHead,
    /// The committed position: (offset, lines before it).
    resume_at: (u64, u64),
    /// Resuming an interrupted run: its stream's head as of its last checkpoint.
    resuming: Option<(u64, u64)>,
    /// Where the last line returned began.
    line_start: (u64, u64),
    /// Where this run leaves the stream when not where its lines stand: before a bad line the
    /// run stops on.
    end_at: Option<(u64, u64)>,
}

impl StdinSource {
    /// Standard input, to resume at the committed position.
    pub fn open(state: &RunState, how: Reading) -> StdinSource {
        let mut lines = Lines::new(BufReader::with_capacity(1 << 16, io::stdin()), how.max_line)
            .telling_waits();
        if !how.skip_bad {
            lines = lines.stop_at_too_long();
        }
        let resume_at = state.stdin;
        StdinSource {
            lines: Some(lines),
            ahead: None,
            ahead_wanted: None,
            // After a completed run, its first bytes say whether it is the stream that run
            // read to its end (then nothing may be committed from it).
            head: StdinHead::new(how.stdin_new.then_some(state.stdin_head)),
            resume_at,
            // After an interrupted run, they must be that run's stream: its position is skipped.
            resuming: (resume_at.0 > 0).then_some(state.stdin_resume),
            line_start: (0, 0),
            end_at: None,
        }
    }

    fn position(&self) -> (u64, u64) {
        let lines = match (&self.ahead, &self.lines) {
            (Some(ahead), _) => ahead.position(),
            (None, Some(lines)) => (lines.offset, lines.line),
            (None, None) => self.line_start,
        };
        self.end_at.unwrap_or(lines)
    }

    /// Hands the lines to a parse thread once one was asked for and the head is whole.
    fn start_ahead(&mut self) {
        if self.ahead_wanted.is_none() || !self.head.whole() {
            return;
        }
        let (Some(lines), Some((ex, names, bounds))) =
            (self.lines.take(), self.ahead_wanted.take())
        else {
            return;
        };
        match ParseAhead::stream(lines, &ex, names, bounds, NAME) {
            Ok(ahead) => self.ahead = Some(ahead),
            Err(lines) => self.lines = Some(*lines),
        }
    }
}

impl LineSource for StdinSource {
    fn name(&self) -> &str {
        NAME
    }

    fn header(&mut self) -> Result<Option<Line<'_>>, RunError> {
        let Some(lines) = self.lines.as_mut() else {
            return Err(RunError::Thread { name: "parse" });
        };
        let line = lines.next_line().map_err(|e| input_error(NAME, e))?;
        if let super::input::Line::Text { raw, .. } = line {
            self.head.feed(raw);
        }
        Ok(Line::of(line))
    }

    fn resume(&mut self) -> Result<(), RunError> {
        let (resume_at, resume_line) = self.resume_at;
        let Some(lines) = self.lines.as_mut() else {
            return Err(RunError::Thread { name: "parse" });
        };
        if resume_at <= lines.offset {
            return Ok(());
        }
        // It cannot seek: the committed bytes are read and discarded.
        let skip = resume_at - lines.offset;
        let head = &mut self.head;
        let got = lines
            .discard(skip, &mut |chunk| head.feed(chunk))
            .map_err(|e| input_error(NAME, e))?;
        if got != skip {
            return Err(RunError::Input {
                file: NAME.to_string(),
                message: format!(
                    "the committed position is byte {resume_at} but the input ends at byte {}: \
                     feed the same stream again, or use a new --db",
                    lines.offset
                ),
            });
        }
        lines.line = resume_line;
        if let Some(was) = self.resuming {
            self.head.same_as_interrupted(NAME, was, resume_at)?;
        }
        Ok(())
    }

    fn parse_ahead(
        &mut self,
        ex: &Extractor,
        names: &[String],
        bounds: Bounds,
    ) -> Result<(), RunError> {
        if self.lines.is_none() {
            return Ok(());
        }
        self.ahead_wanted = Some((ex.clone(), names.to_vec(), bounds));
        self.start_ahead();
        Ok(())
    }

    fn waits_next(&self) -> bool {
        match (&self.ahead, &self.lines) {
            (Some(ahead), _) => ahead.waits_next(),
            (None, Some(lines)) => lines.waits_next(),
            (None, None) => false,
        }
    }

    fn next_line(&mut self) -> Result<Next<'_>, RunError> {
        self.start_ahead();
        if self.ahead.is_some() {
            // (Checked first: the borrow checker does not let a returned borrow of the
            // field end on the other branch.)
            return self
                .ahead
                .as_mut()
                .map_or(Ok(Next::End), ParseAhead::next_line);
        }
        let Some(lines) = self.lines.as_mut() else {
            return Err(RunError::Thread { name: "parse" });
        };
        self.line_start = (lines.offset, lines.line);
        let line = lines.next_line().map_err(|e| input_error(NAME, e))?;
        match line {
            super::input::Line::Text { raw, .. } => self.head.feed(raw),
            super::input::Line::TooLong { .. } => self.head.unknown(),
            super::input::Line::End => {}
        }
        Ok(Line::of(line).map_or(Next::End, Next::Line))
    }

    fn unread_last(&mut self) {
        match &mut self.ahead {
            Some(ahead) => ahead.unread_last(),
            None => self.end_at = Some(self.line_start),
        }
    }

    fn may_commit(&mut self) -> Result<bool, RunError> {
        self.head.check(NAME)?;
        Ok(self.head.decided())
    }

    fn save_position(&mut self, state: &mut RunState) -> Result<(), RunError> {
        let at = self.position();
        state.stdin = at;
        // The stream's head so far, for a resume to check it is fed again.
        state.stdin_resume = self.head.seen_at(at.0);
        Ok(())
    }

    fn finish(&mut self, state: &mut RunState) -> Result<(), RunError> {
        let at = self.position();
        self.head.end();
        self.head.check(NAME)?;
        state.stdin_head = self.head.seen_at(at.0);
        state.stdin_resume = state.stdin_head;
        state.stdin = at;
        Ok(())
    }
}

/// The first bytes of a stream on standard input (at most 64 KiB, kept as they are, so the
/// hash of any prefix can be taken): the check against the stream the last completed run read,
/// and the head a checkpoint records for a resume to check.
pub(super) struct StdinHead {
    bytes: Vec<u8>,
    /// The last completed stream's head (length, hash), while it may still be the same.
    against: Option<(u64, u64)>,
    /// The bytes known to be the stream's first, contiguous: all kept, until a line too long
    /// to keep passes inside the span (its bytes are not all kept; those before it still are).
    known: Option<u64>,
    ended: bool,
}

impl StdinHead {
    fn new(against: Option<(u64, u64)>) -> StdinHead {
        StdinHead {
            bytes: Vec::new(),
            against: against.filter(|a| a.0 > 0),
            known: None,
            ended: false,
        }
    }

    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// Whether the head has all it will keep: the span read, or cut by a line too long to
    /// keep. No later line changes it.
    fn whole(&self) -> bool {
        self.len() >= FINGERPRINT_SPAN || self.known.is_some()
    }

    fn feed(&mut self, raw: &[u8]) {
        let take = (FINGERPRINT_SPAN - self.len()).min(raw.len() as u64) as usize;
        self.bytes.extend_from_slice(&raw[..take]);
    }

    /// A line too long to keep passed: the head is known only up to it, if it fell inside the
    /// span.
    fn unknown(&mut self) {
        if self.len() < FINGERPRINT_SPAN && self.known.is_none() {
            self.known = Some(self.len());
            self.against = None;
        }
    }

    fn end(&mut self) {
        self.ended = true;
    }

    /// The hash of the first `n` bytes (`n` at most those kept).
    fn hash_of(&self, n: u64) -> u64 {
        xxhash_rust::xxh3::xxh3_64(&self.bytes[..n as usize])
    }

    /// Whether it is known yet whether this is the last completed stream.
    fn decided(&self) -> bool {
        self.against.is_none_or(|a| self.ended || self.len() >= a.0)
    }

    /// Refuses the stream once its first bytes equal the last completed one's.
    fn check(&mut self, name: &str) -> Result<(), RunError> {
        let Some(a) = self.against else {
            return Ok(());
        };
        if !self.decided() {
            return Ok(());
        }
        self.against = None;
        if self.len() >= a.0 && self.hash_of(a.0) == a.1 {
            return Err(RunError::Input {
                file: name.to_string(),
                message: format!(
                    "it begins with the same {} bytes as the standard input the last run read \
                     to its end: counted again, every record would count twice. Use \
                     --restart to count it as new data, or a new --db",
                    a.0
                ),
            });
        }
        Ok(())
    }

    /// After skipping an interrupted run's position, refuses a stream whose first bytes are
    /// not that run's (`was`, its head as of its last checkpoint; (0, 0) when not known):
    /// the skipped bytes would be another stream's, never counted.
    fn same_as_interrupted(
        &self,
        name: &str,
        was: (u64, u64),
        skipped: u64,
    ) -> Result<(), RunError> {
        if was.0 == 0 || (self.len() >= was.0 && self.hash_of(was.0) == was.1) {
            return Ok(());
        }
        Err(RunError::Input {
            file: name.to_string(),
            message: format!(
                "it does not begin with the same {} bytes as the standard input of the \
                 interrupted run this one resumes: skipping that run's {} bytes of it would \
                 lose records never counted. Feed the same stream again to resume, or use \
                 --restart to count this as new data",
                was.0, skipped
            ),
        })
    }

    /// The head to remember for a stream read up to byte `position`: (length, hash) of its
    /// first bytes up to there (at most the span), or (0, 0) when it is not known.
    fn seen_at(&self, position: u64) -> (u64, u64) {
        let n = self.len().min(position).min(self.known.unwrap_or(u64::MAX));
        if n == 0 {
            (0, 0)
        } else {
            (n, self.hash_of(n))
        }
    }
}
