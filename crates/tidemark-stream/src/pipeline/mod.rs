//! The runner: reads the input, drives the [`Engine`](crate::engine::Engine), commits to a
//! [`Store`], resumes.
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
//! `max_item_bytes`; its time is at most [`MAX_TIME`](crate::time::MAX_TIME) and at most
//! `max_ahead` beyond the latest time seen. A line that breaks a rule is a bad line — the run
//! stops there, or with `skip_bad` counts and reports it — and never touches the engine: one
//! mistyped year cannot move the watermark past every stored bucket.
//!
//! # Parts
//!
//! [`run`] reads as the steps of a run: `resume` restores the committed state and fits it to
//! this run's inputs; `sources` opens each input as a `LineSource` — a file (`follow`ed or
//! not), a pipe, standard input (`stdin`) — positioned where the state says; `read` reads its
//! lines through `admit` into the engine; `checkpoint` commits what they produced with the
//! positions the sources wrote. `input` reads bounded lines, and [`state`] is the run state's
//! encoding. A message source (a Kafka topic) is supplied from outside the crate as a
//! [`MessageSource`] and read by the same loop ([`message`] has how).
//!
//! # Threads
//!
//! With [`RunOptions::threads`] of two or more, a regular file read to its end, a named
//! pipe or standard input is split and parsed by a thread of their own (`parse`); the buckets
//! the engine closes are written into an open transaction of the store by another
//! (`committer`), which commits it with the rest of each checkpoint (while the run reads on,
//! unless the engine reads keys back from the store or the source acts on a commit: then the
//! run waits for each checkpoint to land); and a close or a checkpoint of a metric with many
//! keys splits them between threads (each key's share is its own). The parse thread and the
//! committer run at a lower priority than the run's thread (`priority`), which is the
//! critical path. The engine, and the
//! order of what it is fed, are those of a one-thread run: so are the answers, alerts and
//! stored rows.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

use crate::config::Config;
use crate::engine::{Alert, Counters};
use crate::store::Store;
use crate::{EngineError, RunError};

mod admit;
mod checkpoint;
mod committer;
mod follow;
mod input;
mod line;
pub mod message;
mod parse;
mod priority;
mod read;
mod resume;
mod sources;
pub mod state;
mod stdin;

use checkpoint::CommitCtx;
use committer::Committer;
pub use follow::Follow;
use line::LineSource;
use line::Reading;
use message::MessageLines;
pub use message::{Message, MessageSource, Polled, SourceError};
use read::{Ended, Runner};
use sources::Inputs;
pub use state::{FileMark, PartitionMark, RunState};

/// Receives each malformed line skipped: `(file, line, message)`; for a message, the file
/// names its topic, partition and offset, and the line is 0.
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
    /// Read this message source instead of files (see [`message`]); `inputs` must be empty.
    pub messages: Option<Box<dyn MessageSource + 'a>>,
    /// Called after each checkpoint committed (and quiet keys spilled, when due).
    pub on_checkpoint: Option<&'a mut dyn FnMut(&Checkpointed)>,
    /// Threads the run may use: with two or more, the lines of a regular file, a named pipe or
    /// standard input are split and parsed in a thread of their own while the run's thread
    /// feeds the engine, closed buckets and checkpoints are written by a committer thread,
    /// and a close or a checkpoint of many keys splits them over up to this many threads (0
    /// and 1: one thread).
    /// The answers, alerts and stored rows are the same either way.
    pub threads: usize,
}

/// What [`RunOptions::on_checkpoint`] is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpointed {
    /// Records counted over every run on the store, as committed.
    pub records: u64,
    /// Bytes of open state the engine holds after the checkpoint (`Engine::memory`): what
    /// the memory budget bounds.
    pub open_bytes: u64,
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

impl AlertOut {
    /// `alert`, of the metric named `metric`, with its key as text.
    pub(crate) fn new(metric: &str, alert: Alert) -> AlertOut {
        AlertOut {
            metric: metric.to_string(),
            key: String::from_utf8_lossy(&alert.key).into_owned(),
            alert,
        }
    }
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
    /// Closed buckets the committer thread wrote ahead of the checkpoint that commits them
    /// (a run with more than one thread; see [`RunOptions::threads`]).
    pub written_ahead: u64,
    /// Whether this run resumed from a committed state.
    pub resumed: bool,
    /// Per metric, in the config's order: its name, its counters (cumulative like the sums
    /// above, which add them across metrics) and its keys with a live window.
    pub metrics: Vec<MetricReport>,
    /// A message source's partitions at the end: where each stands and its lag.
    pub partitions: Vec<PartitionReport>,
}

/// Where one partition of a message source stands, for a [`RunReport`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionReport {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The next offset to read, when known.
    pub position: Option<i64>,
    /// Messages between it and the partition's end, when known.
    pub lag: Option<i64>,
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

/// Runs `config` over the input into `store`, calling `on_alert` for each alert.
pub fn run(
    config: &Config,
    store: &mut (dyn Store + Send),
    opts: RunOptions<'_>,
    on_alert: &mut dyn FnMut(&AlertOut),
) -> Result<RunReport, RunError> {
    let mut opts = opts;
    let messages = opts.messages.take();
    let threads = opts.threads;
    if messages.is_some() && !opts.inputs.is_empty() {
        return Err(RunError::Input {
            file: opts.inputs[0].display().to_string(),
            message: "a run reads files or a message source, not both".to_string(),
        });
    }
    let ctx = CommitCtx::new(config);
    let names = ctx.names.clone();
    let (mut engine, mut state, resumed) = resume::restore(config, store, ctx.fingerprint)?;
    engine.set_threads(threads);
    let stdin_new = resume::prepare(&mut state, &opts)?;
    let how = Reading {
        max_line: config.input.limits.line,
        skip_bad: opts.skip_bad,
        keep_open: opts.keep_open,
        follow: opts.follow,
        stdin_new,
    };
    let mut inputs = Inputs::new(&opts, &state)?;
    std::thread::scope(|scope| {
        // With more than one thread, checkpoints may be written by a thread of their own.
        let committer = (threads > 1)
            .then(|| Committer::start(scope, config))
            .flatten();
        let mut r = Runner::new(ctx, store, committer, engine, state, opts, on_alert)?;
        r.report.resumed = resumed;
        // A new store gets its first checkpoint now, before any record: a query beside the run
        // finds a committed run (empty yet) at once, where it found none until the first
        // checkpoint's interval passed. Resuming from it is starting afresh.
        if !resumed {
            r.checkpoint(false)?;
        }
        if let Some(messages) = messages {
            let mut source = MessageLines::new(messages, config.input.limits.line);
            let columns = config.source.as_ref().map_or(&[][..], |s| &s.columns[..]);
            r.ex.declare_columns(columns).map_err(|e| RunError::Input {
                file: source.name().to_string(),
                message: e.message,
            })?;
            source.seek(&r.state.partitions)?;
            r.read(&mut source)?;
            r.done(&mut source)?;
            return r.finish(Some(&mut source));
        }
        // A followed CSV file's header is read once; a file it rotates or truncates to may repeat
        // it (skipped) or not.
        let mut have_header = false;
        while let Some(input) = inputs.next() {
            if r.stopped {
                break;
            }
            if let (Some(follow), Some(p)) = (how.follow, &input.path) {
                if !r.await_file(p, &input.name(), follow.poll)? {
                    break;
                }
            }
            let mut source = sources::open(&input, &r.state, how)?;
            if r.ex.wants_header() {
                r.header(&mut *source, how.follow.is_some() && have_header)?;
                have_header = true;
            }
            source.resume()?;
            if threads > 1 {
                source.parse_ahead(&r.ex, &names, parse::Bounds::of(config))?;
            }
            match r.read(&mut *source)? {
                Ended::Rotated => {
                    // The path's new file is next (a file rotated away before this run is done).
                    if !input.drain_only {
                        inputs.again(&input);
                    }
                    inputs.rotated();
                }
                Ended::Truncated => inputs.again(&input),
                Ended::End | Ended::Stopped => {}
            }
            r.done(&mut *source)?;
        }
        r.finish(None)
    })
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
