//! Following a file (`--follow`, as `tail -F`): waiting for the path to name a file, reading
//! what is appended, noticing a rotation (the path names another file, or none) and a
//! truncation, draining a rotated file until it has stayed idle for `rotate_wait`, and finding
//! the files the path was rotated away from while no run followed it.
//!
//! The read loop sees none of this: a followed [`super::sources::FileSource`] returns
//! [`super::line::Next::Idle`] at its end, and its [`Following`] says what it found there
//! ([`Pause`]) and after a wait ([`Waited`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::input;
use super::line::{input_error, OpenFile, Pause, Waited, DIRECTORY};
use super::state::{FileMark, RunState};
use crate::RunError;

/// Following a file: at its end the run waits for more instead of finishing. It reads lines
/// as they are appended (a last line without its newline waits for it), notices a rotation
/// (the path names another file, or none: the old one is read to its end and kept open until
/// it has been idle for `rotate_wait`, as `tail -F` and Fluent Bit's `Rotate_Wait` keep it,
/// so that a writer still holding it loses nothing; then the new one is read from its start,
/// so that its lines never move the watermark past the old one's) and a truncation (the file
/// is shorter than what was read: read again from its start), checkpoints while idle as while
/// reading, and ends only when `stop` is set.
#[derive(Clone, Copy, Debug)]
pub struct Follow {
    /// How long to wait at the end of the file before looking again.
    pub poll: Duration,
    /// How long a rotated file must stay idle before it is done.
    pub rotate_wait: Duration,
}

impl Follow {
    /// The default grace a rotated file has to stay idle: 5 s (Fluent Bit's `Rotate_Wait`).
    pub const ROTATE_WAIT: Duration = Duration::from_secs(5);
}

/// Where the following of one open file stands.
pub(super) struct Following {
    /// The path followed (or, for a file rotated away before this run, its own path).
    path: PathBuf,
    how: Follow,
    /// The path was rotated: the open file is read to its end, then the path's new file.
    draining: bool,
    /// Draining: the rotated file's length at the last look and since when it has had it, and
    /// whether it has stopped growing, so that its unterminated last line (if any) is read as a
    /// whole line.
    drained_len: Option<u64>,
    idle_since: Instant,
    drained: bool,
    /// The file's mark where it was last found idle, to tell a rewrite.
    idle_mark: Option<FileMark>,
}

impl Following {
    /// Following the file `path` names; `drain_only` for a file rotated away before this run,
    /// read to its end as after a rotation.
    pub fn new(path: PathBuf, how: Follow, drain_only: bool) -> Following {
        Following {
            path,
            how,
            draining: drain_only,
            drained_len: None,
            idle_since: Instant::now(),
            drained: false,
            idle_mark: None,
        }
    }

    /// At the end of what the file `f` has for now (read up to `at`, (offset, lines)), once
    /// all read is added and its alerts sent.
    pub fn idle(
        &mut self,
        f: &mut OpenFile,
        at: (u64, u64),
        name: &str,
    ) -> Result<Pause, RunError> {
        if self.draining {
            // Rotated and read to its end. A writer may still hold it (between a rename and
            // its reopen, or for as long as it keeps its handle), so it is done only once it
            // has stayed `rotate_wait` without growing; then its last line counts even without
            // a newline, since nothing will complete it, and the path's new file is next.
            // Meanwhile it is checkpointed as a file being followed is.
            let len = f.file.metadata().map_err(|e| input_error(name, e))?.len();
            if self.drained_len != Some(len) || self.idle_since.elapsed() < self.how.rotate_wait {
                if self.drained_len != Some(len) {
                    self.drained_len = Some(len);
                    self.idle_since = Instant::now();
                }
                return Ok(Pause::Wait);
            }
            if at.0 < len && !self.drained {
                self.drained = true;
                return Ok(Pause::ReadOn);
            }
            return Ok(Pause::Rotated);
        }
        // What was read, fingerprinted as soon as it is read to its end: a rewrite during the
        // wait shows against it (see `rewritten`).
        if self.idle_mark.as_ref().is_none_or(|m| m.offset != at.0) {
            self.idle_mark = Some(f.mark(at.0, at.1)?);
        }
        Ok(Pause::Wait)
    }

    /// Waits a poll, then looks at the path before reading on (the file read up to `read`).
    pub fn wait(&mut self, f: &mut OpenFile, read: u64) -> Result<Waited, RunError> {
        std::thread::sleep(self.how.poll);
        let (false, Some(mark)) = (self.draining, &self.idle_mark) else {
            return Ok(Waited::ReadOn);
        };
        let mut seen = look(&self.path, f, read);
        if matches!(seen, Followed::Same) && rewritten(f, mark)? {
            seen = Followed::Truncated;
        }
        Ok(match seen {
            Followed::Same => Waited::ReadOn,
            Followed::Rotated => {
                // Once more to the end: lines written before the rotation.
                self.draining = true;
                Waited::ReadOn
            }
            // Read again from its start, from a checkpoint that says so.
            Followed::Truncated => Waited::Truncated,
        })
    }
}

/// What the followed path holds at the end of its open file.
enum Followed {
    /// The same file, no shorter than what was read: wait for more.
    Same,
    /// Another file (or none): the open one was rotated away.
    Rotated,
    /// The same file, shorter than what was read.
    Truncated,
}

/// Looks at the followed path: is it still the open file, and is it whole?
fn look(path: &Path, f: &OpenFile, read: u64) -> Followed {
    match std::fs::metadata(path) {
        Ok(meta) if input::identity(&meta, path) == (f.dev, f.ino) => {
            if meta.len() < read {
                Followed::Truncated
            } else {
                Followed::Same
            }
        }
        // Renamed away and not yet replaced, or replaced: either way the open file is done
        // once read to its end.
        _ => Followed::Rotated,
    }
}

/// Whether a followed file's bytes already read (`read`, their mark when they were read to
/// their end) changed since: truncated and then, within one poll, written past what was read,
/// it is no shorter than what was read, yet holds other bytes.
fn rewritten(f: &mut OpenFile, read: &FileMark) -> Result<bool, RunError> {
    let len = f
        .file
        .metadata()
        .map_err(|e| input_error(&f.path, e))?
        .len();
    Ok(input::changed(read, &mut f.probe, len)
        .map_err(|e| input_error(&f.path, e))?
        .is_some())
}

/// The files a followed path named before, now elsewhere in its directory (rotated away while
/// no run followed it), longer than their marks or written within `grace` (a writer may
/// still hold them), oldest first: their marks are the path's (by its canonical name) newer
/// than the mark of the file the path names now, if any. Each is read to its end and kept
/// until idle for `grace`, as a file rotated while followed is.
pub(super) fn rotated_away(state: &RunState, path: &Path, grace: Duration) -> Vec<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (Ok(canonical_dir), Some(file_name)) = (std::fs::canonicalize(dir), path.file_name())
    else {
        return Vec::new();
    };
    let canonical = canonical_dir.join(file_name).display().to_string();
    let now = std::fs::metadata(path)
        .ok()
        .map(|m| input::identity(&m, path));
    let since = state
        .files
        .iter()
        .filter(|f| now == Some((f.dev, f.ino)))
        .map(|f| f.used)
        .max()
        .unwrap_or(0);
    let mut marks: Vec<&FileMark> = state
        .files
        .iter()
        .filter(|f| f.path == canonical && f.used > since && now != Some((f.dev, f.ino)))
        .collect();
    if marks.is_empty() {
        return Vec::new();
    }
    marks.sort_by_key(|f| f.used);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<(u64, PathBuf)> = Vec::new();
    for e in entries.flatten() {
        let p = e.path();
        let Ok(meta) = std::fs::metadata(&p) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        let id = input::identity(&meta, &p);
        if let Some(m) = marks.iter().find(|m| (m.dev, m.ino) == id) {
            let recent = meta
                .modified()
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age < grace);
            if meta.len() > m.offset || recent {
                found.push((m.used, p));
            }
        }
    }
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// Whether a followed path names a file with a whole first line yet; a directory, a pipe or a
/// device is refused at once (one never becomes a log; the other blocks a look).
pub(super) fn follow_ready(p: &Path, name: &str) -> Result<bool, RunError> {
    let refuse = |message: &str| {
        Err(RunError::Input {
            file: name.to_string(),
            message: message.to_string(),
        })
    };
    match std::fs::metadata(p) {
        Ok(meta) if meta.is_dir() => refuse(DIRECTORY),
        Ok(meta) if !meta.is_file() => refuse(
            "--follow follows a file that grows; this is a pipe or a device: read it without \
             --follow",
        ),
        _ => Ok(input::has_whole_line(p)),
    }
}
