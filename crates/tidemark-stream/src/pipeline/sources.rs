//! Where the lines of an input come from: opening the run's inputs, and the file and pipe
//! sources (the seam they implement is [`super::line`]):
//!
//! - [`FileSource`]: a regular file, known by identity and resumed at its committed offset
//!   ([`super::resume`]); an unterminated last line of a file that will grow (`keep_open`,
//!   `--follow`) is not a line yet. Followed, it waits at its end and notices rotation and
//!   truncation ([`super::follow`]).
//! - [`PipeSource`]: a named pipe or a device, read from its start as new data every run.
//! - [`super::stdin::StdinSource`]: standard input, resumed by skipping the committed bytes,
//!   and refused when it repeats the stream the last completed run read.
//! - [`super::message::MessageLines`]: a message source (a Kafka consumer, supplied from
//!   outside the crate as a [`super::MessageSource`]), each message one record, its position
//!   a [`super::state::PartitionMark`] per partition.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use super::follow::{self, Following};
use super::input::{self, Lines};
use super::line::{
    input_error, Line, LineSource, Next, OpenFile, Pause, Reading, Waited, DIRECTORY,
};
use super::parse::Bounds;
use super::parse::{ParseAhead, ParseRules};
use super::state::RunState;
use super::stdin::StdinSource;
use super::{resume, RunOptions};
use crate::record::Extractor;
use crate::RunError;

/// One input to read.
#[derive(Clone, Debug)]
pub(super) struct Input {
    /// The path; `None` for standard input.
    pub path: Option<PathBuf>,
    /// A file the followed path was rotated away from before this run: read to its end, then
    /// done.
    pub drain_only: bool,
    /// The followed path's new file after a rotation: a mark on its inode is a deleted file's.
    pub after_rotation: bool,
}

impl Input {
    /// Its name in messages.
    pub fn name(&self) -> String {
        self.path
            .as_ref()
            .map_or("<stdin>".to_string(), |p| p.display().to_string())
    }
}

/// The inputs to read, in order: the files named (standard input if none) and, when following,
/// first the files the path was rotated away from while no run followed it.
pub(super) struct Inputs {
    queue: VecDeque<Input>,
    /// The input just done was a rotated file: the next is the path's new file.
    rotated_in: bool,
}

impl Inputs {
    /// This run's inputs, by its options and the restored state.
    pub fn new(opts: &RunOptions<'_>, state: &RunState) -> Result<Inputs, RunError> {
        let input = |path: Option<PathBuf>, drain_only| Input {
            path,
            drain_only,
            after_rotation: false,
        };
        let mut queue: VecDeque<Input> = if opts.inputs.is_empty() {
            VecDeque::from([input(None, false)])
        } else {
            opts.inputs
                .iter()
                .map(|p| input(Some(p.clone()), false))
                .collect()
        };
        if opts.follow.is_some() && opts.inputs.len() != 1 {
            return Err(RunError::Input {
                file: "<stdin>".to_string(),
                message: "--follow follows one named file".to_string(),
            });
        }
        // Following: files the path was rotated away from while no run followed it, with lines
        // after their marks, are read to their end first, oldest first.
        let rotated_away = match (opts.follow, opts.inputs.first()) {
            (Some(f), Some(p)) if !opts.restart => follow::rotated_away(state, p, f.rotate_wait),
            _ => Vec::new(),
        };
        for i in &mut queue {
            i.drain_only = i.path.as_ref().is_some_and(|p| rotated_away.contains(p));
        }
        for p in rotated_away.iter().rev() {
            queue.push_front(input(Some(p.clone()), true));
        }
        Ok(Inputs {
            queue,
            rotated_in: false,
        })
    }

    /// The next input.
    pub fn next(&mut self) -> Option<Input> {
        let mut input = self.queue.pop_front()?;
        input.after_rotation = std::mem::take(&mut self.rotated_in);
        Some(input)
    }

    /// Reads `input` again, next (a followed path after a rotation or a truncation).
    pub fn again(&mut self, input: &Input) {
        self.queue.push_front(input.clone());
    }

    /// The input just done was rotated away: the next is the path's new file.
    pub fn rotated(&mut self) {
        self.rotated_in = true;
    }
}

/// Opens `input` as a source, positioned (once its header is read, see
/// [`LineSource::resume`]) where the committed state says.
pub(super) fn open(
    input: &Input,
    state: &RunState,
    how: Reading,
) -> Result<Box<dyn LineSource>, RunError> {
    let Some(p) = &input.path else {
        return Ok(Box::new(StdinSource::open(state, how)));
    };
    Ok(match open_path(p)? {
        Opened::File(f) => Box::new(FileSource::open(f, input, state, how)?),
        Opened::Pipe(f) => Box::new(PipeSource::new(f, input.name(), how)),
    })
}

/// What a path names.
pub(super) enum Opened {
    /// A regular file.
    File(OpenFile),
    /// A named pipe (`<(zcat log.gz)`) or a device: a stream without an identity.
    Pipe(File),
}

/// Opens a path: a regular file with its identity, or a stream.
pub(super) fn open_path(p: &Path) -> Result<Opened, RunError> {
    let name = p.display().to_string();
    let input_err = |message: String| RunError::Input {
        file: name.clone(),
        message,
    };
    // Look before opening: a directory cannot be read as lines.
    let meta = std::fs::metadata(p).map_err(|e| input_err(e.to_string()))?;
    if meta.is_dir() {
        return Err(input_err(DIRECTORY.into()));
    }
    let file = File::open(p).map_err(|e| input_err(e.to_string()))?;
    if !meta.is_file() {
        return Ok(Opened::Pipe(file));
    }
    let probe = File::open(p).map_err(|e| input_err(e.to_string()))?;
    let meta = file.metadata().map_err(|e| input_err(e.to_string()))?;
    let (dev, ino) = input::identity(&meta, p);
    let path = std::fs::canonicalize(p)
        .map(|c| c.display().to_string())
        .unwrap_or_else(|_| name.clone());
    Ok(Opened::File(OpenFile {
        file,
        probe,
        dev,
        ino,
        path,
        size: meta.len(),
    }))
}

/// The lines of a reader, bounded by `how`: a stream's tell when its next read may wait.
fn lines_of<R: io::Read>(reader: R, how: Reading, stream: bool) -> Lines<BufReader<R>> {
    let mut lines = Lines::new(BufReader::with_capacity(1 << 16, reader), how.max_line);
    if stream {
        // Reads that may wait: the engine's deferred events are added before them.
        lines = lines.telling_waits();
    }
    if !how.skip_bad {
        // The run stops at a too-long line: no need to find its end.
        lines = lines.stop_at_too_long();
    }
    lines
}

/// A regular file: resumed at its committed offset, its position a [`FileMark`].
pub(super) struct FileSource {
    name: String,
    file: OpenFile,
    lines: Lines<BufReader<File>>,
    /// The committed position: (offset, lines before it).
    resume_at: (u64, u64),
    /// Where the last line returned began.
    line_start: (u64, u64),
    /// Where this run leaves the file when not where its lines stand: before a line not taken
    /// (a bad line the run stops on; an unterminated last line, read whole by the next run),
    /// or its start (truncated while followed).
    end_at: Option<(u64, u64)>,
    /// An unterminated last line is not whole yet: more will be appended (`keep_open`, or
    /// followed until a rotated file is done).
    open_ended: bool,
    skip_bad: bool,
    /// A followed file's unterminated last line, to be read again at the next look (whether
    /// it was too long): handed back to the lines at the next call.
    taken_back: Option<bool>,
    /// Following it (`--follow`).
    follow: Option<Following>,
    /// Its lines parsed ahead by a thread, once [`LineSource::parse_ahead`] started one.
    ahead: Option<ParseAhead>,
}

impl FileSource {
    fn open(
        mut file: OpenFile,
        input: &Input,
        state: &RunState,
        how: Reading,
    ) -> Result<FileSource, RunError> {
        let name = input.name();
        let resume_at = resume::file_start(&mut file, &name, state, input.after_rotation)?;
        let reader = file.file.try_clone().map_err(|e| input_error(&name, e))?;
        let follow = match (how.follow, &input.path) {
            (Some(f), Some(p)) => Some(Following::new(p.clone(), f, input.drain_only)),
            _ => None,
        };
        Ok(FileSource {
            lines: lines_of(reader, how, false),
            file,
            resume_at,
            line_start: (0, 0),
            end_at: None,
            open_ended: how.keep_open || follow.is_some(),
            skip_bad: how.skip_bad,
            taken_back: None,
            follow,
            name,
            ahead: None,
        })
    }

    /// Hands a line taken back to the lines: read again from its start, or, too long, from
    /// where its scan stopped (it may grow without bound; its bytes are not read twice).
    fn settle(&mut self) -> Result<(), RunError> {
        if let Some(too_long) = self.taken_back.take() {
            let (offset, line) = self.line_start;
            if too_long {
                self.lines.hold_too_long(offset, line);
            } else {
                self.lines
                    .seek_to(offset, line)
                    .map_err(|e| input_error(&self.name, e))?;
            }
        }
        Ok(())
    }

    fn position(&self) -> (u64, u64) {
        let lines = match &self.ahead {
            Some(ahead) => ahead.position(),
            None => (self.lines.offset, self.lines.line),
        };
        self.end_at.unwrap_or(lines)
    }
}

impl LineSource for FileSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn header(&mut self) -> Result<Option<Line<'_>>, RunError> {
        let line = self
            .lines
            .next_line()
            .map_err(|e| input_error(&self.name, e))?;
        Ok(Line::of(line))
    }

    fn unread_header(&mut self) -> Result<(), RunError> {
        self.lines
            .seek_to(0, 0)
            .map_err(|e| input_error(&self.name, e))
    }

    fn resume(&mut self) -> Result<(), RunError> {
        let (offset, line) = self.resume_at;
        if offset > self.lines.offset {
            self.lines
                .seek_to(offset, line)
                .map_err(|e| input_error(&self.name, e))?;
        }
        Ok(())
    }

    fn waits_next(&self) -> bool {
        false
    }

    fn parse_ahead(
        &mut self,
        ex: &Extractor,
        names: &[String],
        bounds: Bounds,
    ) -> Result<(), RunError> {
        if self.follow.is_some() || self.ahead.is_some() {
            return Ok(());
        }
        self.settle()?;
        let at = (self.lines.offset, self.lines.line);
        let reader = self
            .file
            .file
            .try_clone()
            .map_err(|e| input_error(&self.name, e))?;
        let how = Reading {
            max_line: self.lines.max_line(),
            skip_bad: self.skip_bad,
            keep_open: self.open_ended,
            follow: None,
            stdin_new: false,
        };
        let lines = lines_of(reader, how, false);
        let rules = ParseRules {
            max_line: self.lines.max_line(),
            open_ended: self.open_ended,
            skip_bad: self.skip_bad,
            names: names.to_vec(),
            bounds,
        };
        // A thread that cannot start leaves the file to this source's own lines, which
        // stand where they stood.
        let seek = move |lines: &mut Lines<BufReader<File>>| lines.seek_to(at.0, at.1);
        self.ahead = ParseAhead::start(lines, false, seek, at, ex, rules, &self.name).ok();
        Ok(())
    }

    fn commits_async(&self) -> bool {
        self.ahead.is_some()
    }

    fn next_line(&mut self) -> Result<Next<'_>, RunError> {
        if self.ahead.is_some() {
            // (Checked first: the borrow checker does not let a returned borrow of the
            // field end on the other branch.)
            return self
                .ahead
                .as_mut()
                .map_or(Ok(Next::End), ParseAhead::next_line);
        }
        self.settle()?;
        self.line_start = (self.lines.offset, self.lines.line);
        let line = self
            .lines
            .next_line()
            .map_err(|e| input_error(&self.name, e))?;
        let whole = match line {
            input::Line::Text { terminated, .. } => terminated || !self.open_ended,
            input::Line::TooLong { terminated, .. } => {
                terminated || !self.open_ended || !self.skip_bad
            }
            input::Line::End => true,
        };
        if !whole {
            // The unterminated last line of a file that more will be appended to is not a
            // whole line yet: the next run (or a followed file's next look) reads it, whole.
            // One already past max_line_bytes is bad whatever follows: without skip_bad the
            // run stops on it now, as on any bad line; counted as a bad line it waits too, so
            // that it is counted once, whole, and the committed position never falls inside
            // it.
            if self.follow.is_none() {
                self.end_at = Some(self.line_start);
                return Ok(Next::End);
            }
            self.taken_back = Some(matches!(line, input::Line::TooLong { .. }));
            return Ok(Next::Idle);
        }
        Ok(match Line::of(line) {
            Some(line) => Next::Line(line),
            // The end of a followed file is the end of what it has for now.
            None if self.follow.is_some() => Next::Idle,
            None => Next::End,
        })
    }

    fn unread_last(&mut self) {
        match &mut self.ahead {
            Some(ahead) => ahead.unread_last(),
            None => self.end_at = Some(self.line_start),
        }
    }

    fn idle(&mut self) -> Result<Pause, RunError> {
        self.settle()?;
        let at = (self.lines.offset, self.lines.line);
        let Some(follow) = &mut self.follow else {
            return Ok(Pause::Wait);
        };
        let pause = follow.idle(&mut self.file, at, &self.name)?;
        if matches!(pause, Pause::ReadOn) {
            // Rotated and idle: its last line counts even without a newline.
            self.open_ended = false;
        }
        Ok(pause)
    }

    fn wait(&mut self) -> Result<Waited, RunError> {
        self.settle()?;
        let Some(follow) = &mut self.follow else {
            return Ok(Waited::ReadOn);
        };
        let waited = follow.wait(&mut self.file, self.lines.offset)?;
        if matches!(waited, Waited::Truncated) {
            self.end_at = Some((0, 0));
        }
        Ok(waited)
    }

    fn save_position(&mut self, state: &mut RunState) -> Result<(), RunError> {
        self.settle()?;
        let (offset, line) = self.position();
        let mark = self.file.mark(offset, line)?;
        state.set_file(mark);
        Ok(())
    }

    fn size(&self) -> u64 {
        self.file.size
    }
}

/// A named pipe or a device: read from its start as new data each run (it has no identity to
/// resume by), its position never stored.
pub(super) struct PipeSource {
    name: String,
    /// Its lines, until a parse thread takes them.
    lines: Option<Lines<BufReader<File>>>,
    ahead: Option<ParseAhead>,
}

impl PipeSource {
    fn new(pipe: File, name: String, how: Reading) -> PipeSource {
        PipeSource {
            name,
            lines: Some(lines_of(pipe, how, true)),
            ahead: None,
        }
    }

    /// Its next line, read here (no parse thread took the lines).
    fn read_line(&mut self) -> Result<Option<Line<'_>>, RunError> {
        let Some(lines) = self.lines.as_mut() else {
            return Err(RunError::Thread { name: "parse" });
        };
        let line = lines.next_line().map_err(|e| input_error(&self.name, e))?;
        Ok(Line::of(line))
    }
}

impl LineSource for PipeSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn header(&mut self) -> Result<Option<Line<'_>>, RunError> {
        self.read_line()
    }

    fn resume(&mut self) -> Result<(), RunError> {
        Ok(())
    }

    fn parse_ahead(
        &mut self,
        ex: &Extractor,
        names: &[String],
        bounds: Bounds,
    ) -> Result<(), RunError> {
        let Some(lines) = self.lines.take() else {
            return Ok(());
        };
        match ParseAhead::stream(lines, ex, names.to_vec(), bounds, &self.name) {
            Ok(ahead) => self.ahead = Some(ahead),
            Err(lines) => self.lines = Some(*lines),
        }
        Ok(())
    }

    fn commits_async(&self) -> bool {
        self.ahead.is_some()
    }

    fn waits_next(&self) -> bool {
        match (&self.ahead, &self.lines) {
            (Some(ahead), _) => ahead.waits_next(),
            (None, Some(lines)) => lines.waits_next(),
            (None, None) => false,
        }
    }

    fn next_line(&mut self) -> Result<Next<'_>, RunError> {
        if self.ahead.is_some() {
            // (Checked first: the borrow checker does not let a returned borrow of the
            // field end on the other branch.)
            return self
                .ahead
                .as_mut()
                .map_or(Ok(Next::End), ParseAhead::next_line);
        }
        Ok(self.read_line()?.map_or(Next::End, Next::Line))
    }

    fn unread_last(&mut self) {}

    fn save_position(&mut self, _: &mut RunState) -> Result<(), RunError> {
        Ok(())
    }
}
