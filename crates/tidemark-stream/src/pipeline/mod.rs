//! The runner: reads the input, drives the [`Engine`], commits to a [`Store`], resumes.
//!
//! # Exactly-once state over a crash
//!
//! The engine holds open buckets in memory; the store holds closed ones. At each checkpoint
//! (every `state.checkpoint` of wall time or `state.checkpoint_records` records, and at the
//! end of the input) the runner commits in one transaction everything since the last: the
//! closed buckets, the late merges (gathered per bucket and key), the rollups, the retention
//! deletes, and the state that goes with them — the input position just after the last
//! record, the counters and the engine's snapshot (its open buckets, count histograms and
//! alert streaks). A crash loses only what came after the last checkpoint, and a restart
//! restores that snapshot and reads on from that position, so every record is counted once:
//! the store ends as an uninterrupted run's. Alerts are written as they are raised, before
//! their checkpoint, so a crash between the two repeats them (at least once), never loses
//! them.
//!
//! Files are known by identity, not by name ([`state`] has the rules): a file already read
//! is resumed at its committed offset (a CSV file's header is read again first), under any
//! path that names it, after checking that its consumed bytes are still the ones read; a
//! file not seen before is read from its start; a file whose consumed bytes changed is
//! refused ([`RunError::InputChanged`]) unless the run is told to `restart` it. Standard
//! input is resumed by skipping the committed number of bytes, which presumes the same stream
//! is fed again; after a completed run it is new data.
//!
//! # What a record must be
//!
//! Each line is at most `max_line_bytes`, each metric's key `max_key_bytes` and item
//! `max_item_bytes`; its time is at most [`MAX_TIME`] and at most `max_ahead` beyond the
//! latest time seen. A line that breaks a rule is a bad line — the run stops there, or with
//! `skip_bad` counts and reports it — and never touches the engine: one mistyped year cannot
//! move the watermark past every stored bucket.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::engine::{Alert, Counters, Engine, MetricShape, Outputs, StateTable};
use crate::record::{Extractor, Record};
use crate::store::{
    Batch, BucketRef, Meta, PromoteRef, ReadTxn, RollupRef, StateRef, Store, StoreRows, SweepRef,
    TableNames,
};
use crate::time::MAX_TIME;
use crate::{EngineError, RunError};

mod input;
pub mod state;

use input::{Line, Lines};
use state::FINGERPRINT_SPAN;
pub use state::{FileMark, RunState};

/// Receives each malformed line skipped: `(file, line, message)`.
pub type BadLineFn<'a> = dyn FnMut(&str, u64, &str) + 'a;

/// How to run.
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Input files, in order; empty for standard input.
    pub inputs: Vec<PathBuf>,
    /// Count and report malformed lines instead of stopping.
    pub skip_bad: bool,
    /// Leave the last buckets open at the end of the input (more will come in a later run);
    /// otherwise the end of the input closes every bucket.
    pub keep_open: bool,
    /// Read the given files from their start as new data, even those read before (whose
    /// consumed bytes may have changed).
    pub restart: bool,
    /// Called with (bytes read, total bytes of the files) as the input is read.
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
    /// Called for each malformed line skipped: (file, line, message).
    pub on_bad: Option<&'a mut BadLineFn<'a>>,
    /// Follow the one input file as it grows (`tail -F`), until `stop`: see [`Follow`].
    pub follow: Option<Follow>,
    /// Set (by a signal handler) to stop the run in an orderly way: what was read is
    /// committed, with the position after it, and the run returns.
    pub stop: Option<&'a AtomicBool>,
}

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
fn look(path: &std::path::Path, f: &OpenFile, read: u64) -> Followed {
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
    let io_err = |e: io::Error| RunError::Input {
        file: f.path.clone(),
        message: e.to_string(),
    };
    let len = f.file.metadata().map_err(io_err)?.len();
    Ok(input::changed(read, &mut f.probe, len)
        .map_err(io_err)?
        .is_some())
}

/// An alert as printed: the metric's name and the key as text.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertOut {
    /// Metric name.
    pub metric: String,
    /// Key (lossy UTF-8).
    pub key: String,
    /// The engine's alert.
    pub alert: Alert,
}

/// What a run did (cumulative over resumes, except `records_this_run` and `resumed`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunReport {
    /// Records counted, over every run on this store.
    pub records: u64,
    /// Records read by this run.
    pub records_this_run: u64,
    /// Malformed lines skipped.
    pub bad_lines: u64,
    /// Events late but within the lateness (landed in their own bucket), all metrics.
    pub late: u64,
    /// Too-late events dropped.
    pub dropped: u64,
    /// Too-late events merged into the stored bucket.
    pub merged: u64,
    /// (key, bucket) summaries closed and stored.
    pub buckets: u64,
    /// Alerts raised.
    pub alerts: u64,
    /// Keys with a live window at the end.
    pub live_keys: u64,
    /// Commits made by this run.
    pub commits: u64,
    /// Times the state passed its memory trigger and quiet keys were spilled to the store.
    pub spills: u64,
    /// Whether this run resumed from a committed state.
    pub resumed: bool,
    /// Per metric, in the config's order: its name, its counters (cumulative like the sums
    /// above, which add them across metrics) and its keys with a live window.
    pub metrics: Vec<MetricReport>,
}

/// One metric's part of a [`RunReport`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricReport {
    /// The metric's name.
    pub name: String,
    /// Its counters.
    pub counters: Counters,
    /// Its keys with a live window at the end.
    pub live_keys: u64,
}

/// The fingerprint a version-2 state kept of its input list: the names as spelled.
fn legacy_inputs_id(inputs: &[PathBuf]) -> u64 {
    let mut names = String::new();
    for p in inputs {
        names.push_str(&p.display().to_string());
        names.push('\0');
    }
    if inputs.is_empty() {
        names.push_str("<stdin>");
    }
    xxhash_rust::xxh3::xxh3_64(names.as_bytes())
}

/// One input file, opened and identified.
struct OpenFile {
    file: File,
    /// A second handle, for fingerprints.
    probe: File,
    dev: u64,
    ino: u64,
    path: String,
    size: u64,
}

/// The files a followed path named before, now elsewhere in its directory (rotated away while
/// no run followed it), longer than their marks or written within `grace` (a writer may
/// still hold them), oldest first: their marks are the path's (by its canonical name) newer
/// than the mark of the file the path names now, if any. Each is read to its end and kept
/// until idle for `grace`, as a file rotated while followed is.
fn rotated_away(state: &RunState, path: &std::path::Path, grace: Duration) -> Vec<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
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
fn follow_ready(p: &std::path::Path, name: &str) -> Result<bool, RunError> {
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

const DIRECTORY: &str = "a directory, not a file of records (name the files in it)";

fn open_input(p: &std::path::Path) -> Result<Source, RunError> {
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
        // A pipe (`<(zcat log.gz)`) or a device: a stream without an identity.
        return Ok(Source::Stream(file));
    }
    let probe = File::open(p).map_err(|e| input_err(e.to_string()))?;
    let meta = file.metadata().map_err(|e| input_err(e.to_string()))?;
    let (dev, ino) = input::identity(&meta, p);
    let path = std::fs::canonicalize(p)
        .map(|c| c.display().to_string())
        .unwrap_or_else(|_| name.clone());
    Ok(Source::File(OpenFile {
        file,
        probe,
        dev,
        ino,
        path,
        size: meta.len(),
    }))
}

/// Where records come from.
enum Source {
    /// Standard input: resumed by skipping the committed bytes in an interrupted run.
    Stdin,
    /// A regular file, known by identity and resumed at its committed offset.
    File(OpenFile),
    /// A named pipe or device: read from its start as new data each run (it has no identity
    /// to resume by).
    Stream(File),
}

impl OpenFile {
    fn mark(&mut self, offset: u64, line: u64) -> Result<FileMark, RunError> {
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

/// Converts a version-2 state's position (an index into the list of names as spelled) into
/// file marks, if this run names the same list.
fn convert_legacy(state: &mut RunState, inputs: &[PathBuf]) -> Result<(), RunError> {
    let Some(lp) = state.legacy.take() else {
        return Ok(());
    };
    if lp.inputs != legacy_inputs_id(inputs) {
        return Ok(()); // another list: version 2 read it from its start, and so do we
    }
    if inputs.is_empty() {
        if !state.completed {
            state.stdin = (lp.offset, lp.line);
        }
        return Ok(());
    }
    for (i, p) in inputs.iter().enumerate() {
        let i = i as u64;
        if i > lp.file {
            break;
        }
        let Source::File(mut f) = open_input(p)? else {
            continue;
        };
        let (offset, line) = if i < lp.file {
            // Version 2 skipped a finished file whole.
            (f.size, 0)
        } else {
            (lp.offset.min(f.size), lp.line)
        };
        let mark = f.mark(offset, line)?;
        state.set_file(mark);
    }
    Ok(())
}

/// Runs `config` over the input into `store`, calling `on_alert` for each alert.
pub fn run(
    config: &Config,
    store: &mut dyn Store,
    mut opts: RunOptions<'_>,
    on_alert: &mut dyn FnMut(&AlertOut),
) -> Result<RunReport, RunError> {
    let fingerprint = config.fingerprint();
    let mut state = RunState::default();
    let mut report = RunReport::default();
    let mut engine = match store.meta().map_err(RunError::Store)? {
        Some(meta) => {
            if meta.fingerprint != fingerprint {
                return Err(RunError::ConfigMismatch {
                    stored: meta.fingerprint,
                    given: fingerprint,
                });
            }
            state = RunState::from_bytes(&meta.state).map_err(RunError::State)?;
            report.resumed = true;
            let view = store.view().map_err(RunError::Store)?;
            Engine::restore(config, &state.engine, &mut StoreRows::new(&*view, config))
                .map_err(engine_error)?
        }
        None => Engine::new(config).map_err(RunError::Engine)?,
    };
    convert_legacy(&mut state, &opts.inputs)?;
    // `restart` reads the named files from their start: their marks are forgotten once, here,
    // so that a file named twice (or by another path, or found again by --follow) counts once.
    if opts.restart {
        for p in &opts.inputs {
            if let Ok(meta) = std::fs::metadata(p) {
                let (dev, ino) = input::identity(&meta, p);
                state.forget_file(dev, ino);
            }
        }
    }
    // Whether the last run completed decides how standard input is read (below).
    let completed_before = state.completed;
    if opts.inputs.is_empty() && (state.completed || opts.restart) {
        state.stdin = (0, 0); // new data on standard input
    }
    state.completed = false;
    let mut ex = Extractor::new(config);
    let names: Vec<String> = config.metrics.iter().map(|m| m.name.clone()).collect();
    let rollup_names: Vec<String> = config
        .metrics
        .iter()
        .map(|m| m.rollup_name().unwrap_or_default())
        .collect();
    let limits = config.input.limits;
    let tables = TableNames::of(config);
    let budget = config.checkpoint.max_memory;
    // Keys spilled are read back through one read view of the last checkpoint.
    let mut view = store.view().map_err(RunError::Store)?;
    let mut spill_at = budget / 3;
    let checkpoint = config.checkpoint;
    let mut interval = Interval::new(Duration::from_millis(checkpoint.interval));
    let max_ahead = config.input.max_ahead;

    let total_bytes: u64 = opts
        .inputs
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| m.len()))
        .sum();
    let mut bytes_before = 0u64; // bytes of the files already finished
    let mut inputs: VecDeque<Option<PathBuf>> = if opts.inputs.is_empty() {
        VecDeque::from([None])
    } else {
        opts.inputs.iter().cloned().map(Some).collect()
    };
    let follow = opts.follow;
    if follow.is_some() && opts.inputs.len() != 1 {
        return Err(RunError::Input {
            file: "<stdin>".to_string(),
            message: "--follow follows one named file".to_string(),
        });
    }
    // Following: files the path was rotated away from while no run followed it, with lines
    // after their marks, are read to their end first, oldest first.
    let rotated_away = match (follow, opts.inputs.first()) {
        (Some(f), Some(p)) if !opts.restart => rotated_away(&state, p, f.rotate_wait),
        _ => Vec::new(),
    };
    for p in rotated_away.iter().rev() {
        inputs.push_front(Some(p.clone()));
    }
    let stop = opts.stop;
    let stopping = || stop.is_some_and(|s| s.load(Ordering::Relaxed));
    let mut stopped = false;
    // A followed CSV file's header is read once; a file it rotates or truncates to may repeat
    // it (skipped) or not.
    let mut have_header = false;
    let mut commit_ctx = CommitCtx {
        config,
        config_text: config.text(),
        fingerprint,
        names: &names,
        rollup_names: &rollup_names,
        tables: &tables,
    };
    // A new store gets its first checkpoint now, before any record: a query beside the run
    // finds a committed run (empty yet) at once, where it found none until the first
    // checkpoint's interval passed. Resuming from it is starting afresh.
    if !report.resumed {
        view = commit_ctx.checkpoint(store, &*view, &mut engine, &mut state, on_alert)?;
        report.commits += 1;
        interval.restart();
    }
    // Following: the next input is the path's new file after a rotation.
    let mut rotated_in = false;
    while let Some(input) = inputs.pop_front() {
        if stopped {
            break;
        }
        let after_rotation = std::mem::take(&mut rotated_in);
        let name = input
            .as_ref()
            .map_or("<stdin>".to_string(), |p| p.display().to_string());
        let io_err = |e: io::Error| RunError::Input {
            file: name.clone(),
            message: e.to_string(),
        };
        // Where to start, and the reader.
        if let (Some(follow), Some(p)) = (follow, &input) {
            // A followed path between a rotation's rename and the new file, or not created
            // yet, or a new file without its first whole line (a CSV header written in two
            // parts): wait for it, checkpointing what was read.
            while !follow_ready(p, &name)? {
                if stopping() {
                    stopped = true;
                    break;
                }
                if interval.idle_due() {
                    view =
                        commit_ctx.checkpoint(store, &*view, &mut engine, &mut state, on_alert)?;
                    report.commits += 1;
                    interval.restart();
                }
                std::thread::sleep(follow.poll);
            }
            if stopped {
                break;
            }
        }
        let mut source = match &input {
            Some(p) => open_input(p)?,
            None => Source::Stdin,
        };
        let (resume_at, resume_line) = match &mut source {
            Source::Stdin => state.stdin,
            Source::Stream(_) => (0, 0),
            Source::File(f) => match state.file(f.dev, f.ino).cloned() {
                Some(mark) => match input::changed(&mark, &mut f.probe, f.size).map_err(io_err)? {
                    None => (mark.offset, mark.line),
                    // The path's new file after a rotation, on the inode of a file read
                    // before: that file was deleted and its inode reused (logrotate's
                    // routine), so the mark is stale and this is a new file.
                    Some(_) if after_rotation => (0, 0),
                    Some(what) => {
                        return Err(RunError::InputChanged {
                            file: name.clone(),
                            what,
                        })
                    }
                },
                None => (0, 0),
            },
        };
        let size = match &source {
            Source::File(f) => f.size,
            _ => 0,
        };
        let buffered = |r| BufReader::with_capacity(1 << 16, r);
        let mut lines: Lines<Box<dyn ReadSeek>> = match &source {
            Source::File(f) => Lines::new(
                Box::new(buffered(f.file.try_clone().map_err(io_err)?)),
                limits.line,
            ),
            // Reads that may wait: the engine's deferred events are added before them.
            Source::Stream(f) => Lines::<Box<dyn ReadSeek>>::new(
                Box::new(NoSeek(buffered(f.try_clone().map_err(io_err)?))),
                limits.line,
            )
            .telling_waits(),
            Source::Stdin => Lines::<Box<dyn ReadSeek>>::new(
                Box::new(NoSeek(BufReader::with_capacity(1 << 16, io::stdin()))),
                limits.line,
            )
            .telling_waits(),
        };
        if !opts.skip_bad {
            // The run stops at a too-long line: no need to find its end.
            lines = lines.stop_at_too_long();
        }
        // Standard input after a completed run: its first bytes say whether it is the stream
        // that run read to its end (then nothing may be committed from it).
        // After an interrupted run, they must be that run's stream: its position is skipped.
        let mut head = match source {
            Source::Stdin => Some(StdinHead::new(
                (completed_before && !opts.restart).then_some(state.stdin_head),
            )),
            _ => None,
        };
        let resuming_stdin = (head.is_some() && resume_at > 0).then_some(state.stdin_resume);
        if ex.wants_header() {
            let reopened = follow.is_some() && have_header;
            let header = match lines.next_line().map_err(io_err)? {
                Line::End => None,
                Line::TooLong { len, .. } => {
                    return Err(RunError::BadLine {
                        file: name.clone(),
                        line: 1,
                        message: format!(
                            "header: longer than max_line_bytes = {} ({len} bytes read of it)",
                            limits.line
                        ),
                    })
                }
                Line::Text { raw, .. } => {
                    if let Some(h) = &mut head {
                        h.feed(raw);
                    }
                    Some(line_text(raw).map_err(|m| RunError::BadLine {
                        file: name.clone(),
                        line: 1,
                        message: m,
                    })?)
                }
            };
            match header {
                // A followed file's new start without the header: its first line is data.
                Some(h) if reopened && ex.header(h).is_err() => {
                    lines.seek_to(0, 0).map_err(io_err)?
                }
                Some(_) if reopened => {}
                Some(h) => ex.header(h).map_err(|e| RunError::BadLine {
                    file: name.clone(),
                    line: 1,
                    message: format!("header: {e}"),
                })?,
                None => {}
            }
            have_header = true;
        }
        if resume_at > lines.offset {
            match &source {
                Source::File(_) => lines.seek_to(resume_at, resume_line).map_err(io_err)?,
                _ => {
                    let skip = resume_at - lines.offset;
                    let got = lines
                        .discard(skip, &mut |chunk| {
                            if let Some(h) = &mut head {
                                h.feed(chunk);
                            }
                        })
                        .map_err(io_err)?;
                    if got != skip {
                        return Err(RunError::Input {
                            file: name.clone(),
                            message: format!(
                                "the committed position is byte {resume_at} but the input \
                                 ends at byte {}: feed the same stream again, or use a new \
                                 --db",
                                lines.offset
                            ),
                        });
                    }
                    lines.line = resume_line;
                    if let (Some(h), Some(was)) = (&head, resuming_stdin) {
                        h.same_as_interrupted(&name, was, resume_at)?;
                    }
                }
            }
        }
        let mut unfinished = None;
        let mut fatal = None;
        // Following: the path was rotated, so the open file is read to its end, then the
        // new one.
        // A file rotated away before this run is read to its end, as after a rotation.
        let drain_only = input.as_ref().is_some_and(|p| rotated_away.contains(p));
        let mut draining = drain_only;
        // Draining: the rotated file's length at the last look and since when it has had it,
        // and whether it has stopped growing, so that its unterminated last line (if any) is
        // read as a whole line.
        let mut drained_len = None;
        let mut idle_since = std::time::Instant::now();
        let mut drained = false;
        // Following: the file's mark where it was last found idle, to tell a rewrite.
        let mut idle_mark = None;
        loop {
            if report.records_this_run % 64 == 0 && stopping() {
                stopped = true;
                break;
            }
            // Before a read that may wait for input, the deferred events are added and their
            // alerts go out: none waits on a line that has not come.
            if lines.waits_next() {
                commit_ctx.drain_and_emit(&mut engine, &*view, &mut head, &name, on_alert)?;
            }
            let line_start = (lines.offset, lines.line);
            let next = match lines.next_line().map_err(io_err)? {
                Line::End => None,
                l @ (Line::Text {
                    terminated: false, ..
                }
                | Line::TooLong {
                    terminated: false, ..
                }) if (opts.keep_open || follow.is_some())
                    && !drained
                    && matches!(source, Source::File(_))
                    && (opts.skip_bad || matches!(l, Line::Text { .. })) =>
                {
                    // The unterminated last line of a file that more will be appended to is
                    // not a whole line yet: the next run (or a followed file's next look)
                    // reads it, whole. One already past max_line_bytes is bad whatever
                    // follows: without skip_bad the run stops on it now, as on any bad line;
                    // counted as a bad line it waits too, so that it is counted once, whole,
                    // and the committed position never falls inside it.
                    if follow.is_none() {
                        unfinished = Some(line_start);
                        break;
                    }
                    // Followed, it is read again at the next look: a short line from its
                    // start, a too-long one (which may grow without bound) from where its
                    // scan stopped.
                    if matches!(l, Line::TooLong { .. }) {
                        lines.hold_too_long(line_start.0, line_start.1);
                    } else {
                        lines.seek_to(line_start.0, line_start.1).map_err(io_err)?;
                    }
                    None
                }
                Line::TooLong {
                    len,
                    number,
                    end,
                    terminated,
                } => {
                    if let Some(h) = &mut head {
                        h.unknown();
                    }
                    // Without its newline it was either the input's end or, for a run that
                    // stops on it, not read further.
                    let message = if terminated {
                        format!(
                            "the line is {len} bytes, longer than max_line_bytes = {}",
                            limits.line
                        )
                    } else {
                        format!(
                            "the line is longer than max_line_bytes = {} ({len} bytes read of \
                             it)",
                            limits.line
                        )
                    };
                    Some((number, end, Err(message)))
                }
                Line::Text {
                    raw, number, end, ..
                } => {
                    if let Some(h) = &mut head {
                        h.feed(raw);
                    }
                    let parsed = match line_text(raw) {
                        Ok("") => continue,
                        // A line of spaces and tabs is an empty line too (an editor's
                        // leftover).
                        Ok(line) if line.starts_with([' ', '\t']) && is_blank(line) => continue,
                        Ok(line) => ex.parse(line).map_err(|e| e.message).and_then(|rec| {
                            check_record(&rec, &engine, &names, limits, max_ahead)?;
                            // A key read back from a damaged or failing store stops the run:
                            // not a bad line.
                            if let Err(e) =
                                feed(&mut engine, &rec, &mut StoreRows::with(&*view, &tables))
                            {
                                fatal = Some(e);
                            }
                            Ok(())
                        }),
                        Err(m) => Err(m),
                    };
                    Some((number, end, parsed))
                }
            };
            let Some((number, end, parsed)) = next else {
                // The end of the input, or of a followed file for now.
                let (Some(follow), Source::File(f), Some(path)) = (follow, &mut source, &input)
                else {
                    break;
                };
                // All read so far is added, and its alerts go out, before any wait (a file is
                // read without waiting until its end).
                commit_ctx.drain_and_emit(&mut engine, &*view, &mut head, &name, on_alert)?;
                if draining {
                    // Rotated and read to its end. A writer may still hold it (between a
                    // rename and its reopen, or for as long as it keeps its handle), so it is
                    // done only once it has stayed `rotate_wait` without growing; then its
                    // last line counts even without a newline, since nothing will complete
                    // it, and the path's new file is next. Meanwhile it is checkpointed as a
                    // file being followed is.
                    let len = f.file.metadata().map_err(io_err)?.len();
                    if drained_len != Some(len) || idle_since.elapsed() < follow.rotate_wait {
                        if drained_len != Some(len) {
                            drained_len = Some(len);
                            idle_since = std::time::Instant::now();
                        }
                        if stopping() {
                            stopped = true;
                            break;
                        }
                        if interval.idle_due() {
                            set_position(&mut state, &mut source, lines.offset, lines.line)?;
                            view = commit_ctx.checkpoint(
                                store,
                                &*view,
                                &mut engine,
                                &mut state,
                                on_alert,
                            )?;
                            report.commits += 1;
                            interval.restart();
                        }
                        std::thread::sleep(follow.poll);
                        continue;
                    }
                    if lines.offset < len && !drained {
                        drained = true;
                        continue;
                    }
                    if !drain_only {
                        inputs.push_front(input.clone());
                    }
                    rotated_in = true;
                    break;
                }
                // What was read, fingerprinted as soon as it is read to its end: a rewrite
                // during the wait shows against it (see `rewritten`).
                if idle_mark
                    .as_ref()
                    .is_none_or(|m: &FileMark| m.offset != lines.offset)
                {
                    idle_mark = Some(f.mark(lines.offset, lines.line)?);
                }
                if stopping() {
                    stopped = true;
                    break;
                }
                // Idle: what was read is committed as often as while reading.
                if interval.idle_due() {
                    set_position(&mut state, &mut source, lines.offset, lines.line)?;
                    view =
                        commit_ctx.checkpoint(store, &*view, &mut engine, &mut state, on_alert)?;
                    report.commits += 1;
                    interval.restart();
                }
                std::thread::sleep(follow.poll);
                // Then a look before reading on.
                let (Source::File(f), Some(read)) = (&mut source, &idle_mark) else {
                    break;
                };
                let mut seen = look(path, f, lines.offset);
                if matches!(seen, Followed::Same) && rewritten(f, read)? {
                    seen = Followed::Truncated;
                }
                match seen {
                    Followed::Same => {}
                    Followed::Rotated => {
                        // Once more to the end: lines written before the rotation.
                        draining = true;
                    }
                    Followed::Truncated => {
                        // Read again from its start, from a checkpoint that says so.
                        set_position(&mut state, &mut source, 0, 0)?;
                        view = commit_ctx.checkpoint(
                            store,
                            &*view,
                            &mut engine,
                            &mut state,
                            on_alert,
                        )?;
                        report.commits += 1;
                        interval.restart();
                        inputs.push_front(input.clone());
                        unfinished = Some((0, 0));
                        break;
                    }
                }
                continue;
            };
            if let Some(e) = fatal.take() {
                return Err(engine_error(e));
            }
            if let Err(message) = parsed {
                if opts.skip_bad {
                    state.bad_lines += 1;
                    if let Some(f) = opts.on_bad.as_mut() {
                        f(&name, number, &message);
                    }
                    continue;
                }
                // An orderly stop: what came before the line is checkpointed, so a run after
                // the line is mended (or with skip_bad) goes on from it.
                if let Some(h) = &mut head {
                    h.end();
                    h.check(&name)?;
                    state.stdin_head = h.seen_at(line_start.0);
                    state.stdin_resume = state.stdin_head;
                }
                set_position(&mut state, &mut source, line_start.0, line_start.1)?;
                commit_ctx.commit(store, &*view, &mut engine, &mut state, on_alert)?;
                return Err(RunError::BadLine {
                    file: name.clone(),
                    line: number,
                    message,
                });
            }
            state.records += 1;
            report.records_this_run += 1;
            if let Some(h) = &mut head {
                h.check(&name)?;
            }
            let undecided = head.as_ref().is_some_and(|h| !h.decided());
            // Alerts go out as they are raised (once the stream is known to be new); a crash
            // before the next checkpoint raises them again on resume (at least once).
            if engine.has_alerts() && !undecided {
                commit_ctx.emit(engine.take_alerts(), on_alert);
            }
            interval.since += 1;
            // Past the budget's trigger, a checkpoint makes every key clean, and the least
            // recently active quiet ones leave memory.
            // (Every 1,024 records of the run, not of the checkpoint interval: checkpoints
            // closer together must not skip the check.)
            let over = report.records_this_run % 1024 == 0 && {
                // Counted with every record fed added.
                commit_ctx.drain(&mut engine, &*view)?;
                engine.memory() as u64 > spill_at
            };
            if !undecided
                && (over
                    || interval.since >= checkpoint.records
                    || (interval.since % 64 == 0 && interval.elapsed()))
            {
                set_position(&mut state, &mut source, end, number)?;
                if let Some(h) = &head {
                    // The stream's head so far, for a resume to check it is fed again.
                    state.stdin_resume = h.seen_at(end);
                }
                view = commit_ctx.checkpoint(store, &*view, &mut engine, &mut state, on_alert)?;
                if over {
                    spill_at = spill(&mut engine, budget)?;
                    report.spills += 1;
                }
                report.commits += 1;
                interval.restart();
                if let Some(p) = opts.progress.as_mut() {
                    p(bytes_before + end, total_bytes);
                }
            }
        }
        let (offset, line) = unfinished.unwrap_or((lines.offset, lines.line));
        if let Some(h) = &mut head {
            h.end();
            h.check(&name)?;
            state.stdin_head = h.seen_at(offset);
            state.stdin_resume = state.stdin_head;
        }
        set_position(&mut state, &mut source, offset, line)?;
        bytes_before += size;
        if let Some(p) = opts.progress.as_mut() {
            p(bytes_before, total_bytes);
        }
    }
    // A run stopped by a signal has more input to come: standard input is resumed, not taken
    // as a new stream, and the buckets stay open.
    state.completed = !stopped;
    if !opts.keep_open && !stopped {
        commit_ctx.drain(&mut engine, &*view)?;
        engine.flush();
    }
    commit_ctx.commit(store, &*view, &mut engine, &mut state, on_alert)?;
    report.commits += 1;
    report.records = state.records;
    report.bad_lines = state.bad_lines;
    for m in 0..engine.metric_count() {
        let c = engine.counters(m);
        report.late += c.late;
        report.dropped += c.dropped;
        report.merged += c.merged;
        report.buckets += c.buckets;
        report.alerts += c.alerts;
        report.live_keys += engine.live_keys(m) as u64;
        report.metrics.push(MetricReport {
            name: config.metrics[m].name.clone(),
            counters: c,
            live_keys: engine.live_keys(m) as u64,
        });
    }
    Ok(report)
}

/// The first bytes of a stream on standard input (at most 64 KiB, kept as they are, so the
/// hash of any prefix can be taken): the check against the stream the last completed run read,
/// and the head a checkpoint records for a resume to check.
struct StdinHead {
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

/// Records where the current input stands.
fn set_position(
    state: &mut RunState,
    source: &mut Source,
    offset: u64,
    line: u64,
) -> Result<(), RunError> {
    match source {
        Source::Stdin => state.stdin = (offset, line),
        Source::Stream(_) => {}
        Source::File(f) => {
            let mark = f.mark(offset, line)?;
            state.set_file(mark);
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
    rec: &Record<'_>,
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

/// Spills the engine's quiet keys down to a sixth of the budget (right after a checkpoint);
/// returns the memory past which the next spill starts, or fails when the keys that cannot
/// spill pass half the budget. The budget is the process's, not the keys' alone: a bucket
/// close encodes every key's closed bucket, a checkpoint every changed key's rows, and the
/// allocator keeps what they freed — measured, about as much again as the keys, so the keys
/// are held to a third.
fn spill(engine: &mut Engine, budget: u64) -> Result<u64, RunError> {
    engine.spill((budget / 6) as usize).map_err(engine_error)?;
    let held = engine.memory() as u64;
    if held > budget / 2 {
        let keys = (0..engine.metric_count())
            .map(|m| engine.live_keys(m) as u64)
            .sum();
        return Err(RunError::Engine(EngineError::Budget { held, budget, keys }));
    }
    // Keys that could not spill stay: wait for a twelfth of the budget more before the next
    // spill, rather than spilling at every check.
    Ok((budget / 3).max(held + budget / 12))
}

/// An engine error as the run reports it: a store that failed stays a store error (its
/// damage is the user's to check).
fn engine_error(e: EngineError) -> RunError {
    match e {
        EngineError::Store(e) => RunError::Store(e),
        EngineError::State { metric, key, what } => {
            RunError::Store(crate::store::StoreError::damaged(format!(
                "state of key {key:?} of metric {metric}: {what}"
            )))
        }
        e => RunError::Engine(e),
    }
}

/// The rules a parsed record must keep before it reaches the engine: its time within
/// [`MAX_TIME`] and `max_ahead` of the latest time seen, its keys and items within their
/// limits.
fn check_record(
    rec: &Record<'_>,
    engine: &Engine,
    names: &[String],
    limits: crate::config::Limits,
    max_ahead: u64,
) -> Result<(), String> {
    let time = rec.time();
    if time > MAX_TIME {
        return Err(format!("time {time} ms is after the year 9999"));
    }
    if let Some(latest) = engine.max_time() {
        if time > latest.saturating_add(max_ahead) {
            return Err(format!(
                "time {} is {} ahead of the latest time seen ({}), more than max_ahead = {}: \
                 a mistyped date would move the watermark past every bucket (raise \
                 input.max_ahead if the data really jumps)",
                crate::time::format_rfc3339(time),
                crate::time::format_span(time - latest),
                crate::time::format_rfc3339(latest),
                crate::time::format_duration(max_ahead),
            ));
        }
    }
    for (m, name) in names.iter().enumerate() {
        if rec.key(m).len() > limits.key {
            return Err(format!(
                "metric {name}: the key is {} bytes, longer than max_key_bytes = {}",
                rec.key(m).len(),
                limits.key
            ));
        }
        if rec.item_len(m) > limits.item {
            return Err(format!(
                "metric {name}: the item is {} bytes, longer than max_item_bytes = {}",
                rec.item_len(m),
                limits.item
            ));
        }
    }
    Ok(())
}

/// A line source that can seek (files) or not (standard input, which never is asked to).
trait ReadSeek: io::BufRead + io::Seek {}
impl<T: io::BufRead + io::Seek> ReadSeek for T {}

/// A stream (standard input, a pipe) as a [`ReadSeek`] whose seek fails: the runner
/// discards bytes instead.
struct NoSeek<R>(BufReader<R>);

impl<R: io::Read> io::Read for NoSeek<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl<R: io::Read> io::BufRead for NoSeek<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.0.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.0.consume(n)
    }
}

impl<R> io::Seek for NoSeek<R> {
    fn seek(&mut self, _: io::SeekFrom) -> io::Result<u64> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a stream cannot seek",
        ))
    }
}

/// A line of spaces and tabs only (or nothing): skipped like an empty line.
fn is_blank(line: &str) -> bool {
    line.bytes().all(|b| b == b' ' || b == b'\t')
}

fn line_text(buf: &[u8]) -> Result<&str, String> {
    let mut b = buf;
    if let Some(r) = b.strip_suffix(b"\n") {
        b = r;
    }
    if let Some(r) = b.strip_suffix(b"\r") {
        b = r;
    }
    std::str::from_utf8(b).map_err(|e| format!("not UTF-8: {e}"))
}

struct CommitCtx<'a> {
    config: &'a Config,
    config_text: &'a str,
    fingerprint: u64,
    names: &'a [String],
    rollup_names: &'a [String],
    /// Per metric: its tables' names.
    tables: &'a TableNames,
}

/// The checkpoint interval: records since the last checkpoint, and when it was.
struct Interval {
    since: u64,
    last: Instant,
    every: Duration,
}

impl Interval {
    fn new(every: Duration) -> Interval {
        Interval {
            since: 0,
            last: Instant::now(),
            every,
        }
    }

    /// Whether the wall-clock interval has passed since the last checkpoint.
    fn elapsed(&self) -> bool {
        self.last.elapsed() >= self.every
    }

    /// Whether a run waiting for input has something to commit, and the interval passed.
    fn idle_due(&self) -> bool {
        self.since > 0 && self.elapsed()
    }

    fn restart(&mut self) {
        self.since = 0;
        self.last = Instant::now();
    }
}

impl CommitCtx<'_> {
    /// [`CommitCtx::commit`], then a read view of what it committed (keys spilled are read
    /// back through it until the next checkpoint).
    fn checkpoint(
        &mut self,
        store: &mut dyn Store,
        view: &dyn ReadTxn,
        engine: &mut Engine,
        state: &mut RunState,
        on_alert: &mut dyn FnMut(&AlertOut),
    ) -> Result<Box<dyn ReadTxn>, RunError> {
        self.commit(store, view, engine, state, on_alert)?;
        store.view().map_err(RunError::Store)
    }

    /// Adds the engine's deferred records (keys spilled read back through `view`, the last
    /// checkpoint's).
    fn drain(&self, engine: &mut Engine, view: &dyn ReadTxn) -> Result<(), RunError> {
        engine
            .drain(&mut StoreRows::with(view, self.tables))
            .map_err(engine_error)
    }

    /// [`CommitCtx::drain`], then the alerts go out, as after a record: once standard
    /// input's stream is known to be new (a stream known to be the last completed one is
    /// refused first — a blank or skipped line may be what made it known).
    fn drain_and_emit(
        &self,
        engine: &mut Engine,
        view: &dyn ReadTxn,
        head: &mut Option<StdinHead>,
        name: &str,
        on_alert: &mut dyn FnMut(&AlertOut),
    ) -> Result<(), RunError> {
        self.drain(engine, view)?;
        if let Some(h) = head {
            h.check(name)?;
        }
        if engine.has_alerts() && head.as_ref().is_none_or(|h| h.decided()) {
            self.emit(engine.take_alerts(), on_alert);
        }
        Ok(())
    }

    fn emit(&self, alerts: Vec<Alert>, on_alert: &mut dyn FnMut(&AlertOut)) {
        for alert in alerts {
            on_alert(&AlertOut {
                metric: self.names[alert.metric].clone(),
                key: String::from_utf8_lossy(&alert.key).into_owned(),
                alert,
            });
        }
    }

    /// Commits everything up to the records fed: the engine's deferred events are added
    /// first (keys spilled read back through `view`, the last checkpoint's).
    fn commit(
        &mut self,
        store: &mut dyn Store,
        view: &dyn ReadTxn,
        engine: &mut Engine,
        state: &mut RunState,
        on_alert: &mut dyn FnMut(&AlertOut),
    ) -> Result<(), RunError> {
        self.drain(engine, view)?;
        let mut out: Outputs = engine.take_outputs();
        self.emit(std::mem::take(&mut out.alerts), on_alert);
        state.engine = engine.snapshot();
        let meta = Meta {
            config: self.config_text.to_string(),
            fingerprint: self.fingerprint,
            state: state.to_bytes(),
        };
        fn bref<'b>(
            names: &'b [String],
            rollup_names: &'b [String],
            b: &'b crate::engine::ClosedBucket,
        ) -> BucketRef<'b> {
            BucketRef {
                metric: if b.rollup {
                    &rollup_names[b.metric]
                } else {
                    &names[b.metric]
                },
                key: &b.key,
                start: b.start,
                bytes: &b.bytes,
            }
        }
        let names = self.names;
        let rollup_names = self.rollup_names;
        let puts: Vec<BucketRef<'_>> = out
            .closed
            .iter()
            .map(|b| bref(names, rollup_names, b))
            .collect();
        let merges: Vec<BucketRef<'_>> = out
            .late_merges
            .iter()
            .map(|b| bref(names, rollup_names, b))
            .collect();
        let mut expire: Vec<(&str, u64)> = out
            .expire_before
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.map(|before| (self.names[i].as_str(), before)))
            .collect();
        expire.extend(
            out.expire_rollups_before
                .iter()
                .enumerate()
                .filter_map(|(i, e)| e.map(|before| (self.rollup_names[i].as_str(), before))),
        );
        let config = self.config;
        let rollups: Vec<RollupRef<'_>> = out
            .rollups
            .iter()
            .map(|r| RollupRef {
                metric: &self.names[r.metric],
                into: &self.rollup_names[r.metric],
                from: r.from,
                to: r.to,
                width: config.metrics[r.metric]
                    .rollup
                    .expect("only rolled-up metrics roll"),
            })
            .collect();
        // Each metric's shape and its rollup's, built once for the commit: a shape builds and
        // encodes its metric's empty summary (a whole Count-Min for a frequency metric).
        let shapes: Vec<(MetricShape, Option<MetricShape>)> = config
            .metrics
            .iter()
            .map(|m| (MetricShape::of(m), MetricShape::rollup_of(m)))
            .collect();
        let shape_of = |name: &str| match MetricShape::metric_of(config, name)? {
            (i, false) => Some(&shapes[i].0),
            (i, true) => shapes[i].1.as_ref(),
        };
        let roll = |metric: &str, period: u64, parts: &[(u64, Vec<u8>)]| {
            let (i, _) = config
                .metric(metric)
                .ok_or_else(|| format!("no metric {metric:?}"))?;
            let (own, rolled) = &shapes[i];
            let into = rolled.as_ref().ok_or("no rollup")?;
            Ok(own
                .roll(into, period, parts)
                .map_err(|e| e.to_string())?
                .to_stored())
        };
        let merge = |metric: &str, start: u64, old: Option<&[u8]>, add: &[u8]| {
            let shape = shape_of(metric).ok_or_else(|| format!("no metric {metric:?}"))?;
            let mut a = match old {
                Some(old) => shape.decode(old, start).map_err(|e| e.to_string())?,
                None => shape.empty(start),
            };
            let b = shape.decode(add, start).map_err(|e| e.to_string())?;
            a.merge(&b).map_err(|e| e.to_string())?;
            Ok(a.to_stored())
        };
        let t = self.tables;
        let promote: Vec<PromoteRef<'_>> = out
            .promote
            .iter()
            .map(|&(m, start)| PromoteRef {
                from: t.name(m, StateTable::Open),
                into: &names[m],
                start,
            })
            .collect();
        let sweep: Vec<SweepRef<'_>> = out
            .sweep_before
            .iter()
            .enumerate()
            .filter_map(|(m, b)| {
                b.map(|before| SweepRef {
                    index: t.name(m, StateTable::Expiry),
                    rows: t.name(m, StateTable::Key),
                    before,
                })
            })
            .collect();
        let rows: Vec<StateRef<'_>> = out
            .state
            .iter()
            .map(|r| StateRef {
                table: t.name(r.metric, r.table),
                start: r.start,
                key: &r.key,
                bytes: r.bytes.as_deref(),
            })
            .collect();
        let open_before: Vec<(&str, u64)> = out
            .open_before
            .iter()
            .enumerate()
            .filter_map(|(m, b)| b.map(|before| (t.name(m, StateTable::Open), before)))
            .collect();
        store
            .commit(&Batch {
                promote,
                sweep,
                open_before,
                state: rows,
                puts,
                merges,
                merge: &merge,
                rollups,
                roll: &roll,
                expire,
                meta: &meta,
            })
            .map_err(RunError::Store)
    }
}
