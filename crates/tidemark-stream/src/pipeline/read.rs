//! The read loop: the lines of one [`LineSource`] admitted into the engine, with checkpoints
//! between them and while the source is idle; and the [`Runner`] that holds a run's engine,
//! state and store across its inputs, up to its last commit.
//!
//! The loop knows nothing of files, pipes or standard input (the module doc of
//! [`super::sources`] has the contract). What it keeps is the order that makes a resume count
//! every record once and a crash lose no alert: the engine's deferred events are added and
//! their alerts sent before a read that may wait; a checkpoint comes every
//! `checkpoint.records` records, or every 64 records once `checkpoint.interval` has passed,
//! or when the state passes its memory trigger (checked every 1,024 records), and while idle
//! once the interval has passed with something read, and when the source asks for one
//! ([`Next::Checkpoint`]); the source writes its position into the state just before each,
//! and hears of it after ([`LineSource::checkpointed`]); a bad line the run stops on is
//! committed up to its start. A source that bounds the time that closes buckets (a message
//! source's watermark) gives its bound to the engine before its first record, every 256
//! records and whenever it is idle.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::admit::{admit, admit_parsed, check_time, line_text, too_long, Admitted, Rules};
use super::checkpoint::{spill, CommitCtx, Interval};
use super::committer::{AwayView, Committer, Part, SendStore};
use super::follow;
use super::line::{Line, LineSource, Next, Pause, Waited};
use super::parse::Parsed;
use super::state::RunState;
use super::{engine_error, AlertOut, Checkpointed, MetricReport, RunOptions, RunReport};
use crate::engine::Engine;
use crate::record::Extractor;
use crate::state_rows::StoreRows;
use crate::store::ReadTxn;
use crate::RunError;

/// Why the reading of a source ended.
pub(super) enum Ended {
    /// Its lines are done for this run.
    End,
    /// The run was told to stop.
    Stopped,
    /// A followed file rotated away and read to its end: the path's new file is next.
    Rotated,
    /// A followed file truncated: it is read again from its start.
    Truncated,
}

/// A run in progress: what the read loop feeds and commits, across its inputs.
pub(super) struct Runner<'r, 'o, 's> {
    ctx: CommitCtx<'r>,
    /// The store: `None` while the committer holds it.
    store: Option<SendStore<'r>>,
    /// The committer thread, for a run with more than one thread.
    committer: Option<Committer<'s, 'r>>,
    /// The committer holds the store with a transaction open, for the closed buckets before
    /// the next checkpoint.
    open: bool,
    /// A checkpoint sent to the committer that has not landed yet, and what to tell
    /// `on_checkpoint` once it has.
    landing: Option<Checkpointed>,
    /// A read view of the last checkpoint: keys spilled are read back through it.
    view: Box<dyn ReadTxn>,
    engine: Engine,
    /// The run state, committed with every checkpoint.
    pub state: RunState,
    pub report: RunReport,
    /// The record parser (it holds a CSV input's columns, from its header).
    pub ex: Extractor,
    interval: Interval,
    /// The memory past which a checkpoint spills quiet keys.
    spill_at: u64,
    opts: RunOptions<'o>,
    on_alert: &'r mut dyn FnMut(&AlertOut),
    /// The run was told to stop: what was read is committed, with the position after it.
    pub stopped: bool,
    /// Bytes of the inputs already done, and of all, for progress.
    bytes_before: u64,
    total_bytes: u64,
}

impl<'r: 's, 'o, 's> Runner<'r, 'o, 's> {
    /// A run of `ctx`'s config into `store`, from the restored `engine` and `state`; with a
    /// `committer`, checkpoints may be written while the run reads on.
    pub fn new(
        ctx: CommitCtx<'r>,
        store: SendStore<'r>,
        committer: Option<Committer<'s, 'r>>,
        engine: Engine,
        state: RunState,
        opts: RunOptions<'o>,
        on_alert: &'r mut dyn FnMut(&AlertOut),
    ) -> Result<Runner<'r, 'o, 's>, RunError> {
        let config = ctx.config;
        let view = store.view().map_err(RunError::Store)?;
        let total_bytes = opts
            .inputs
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok().map(|m| m.len()))
            .sum();
        Ok(Runner {
            view,
            engine,
            state,
            report: RunReport::default(),
            ex: Extractor::new(config),
            interval: Interval::new(Duration::from_millis(config.checkpoint.interval)),
            spill_at: config.checkpoint.max_memory / 3,
            opts,
            on_alert,
            stopped: false,
            bytes_before: 0,
            total_bytes,
            ctx,
            store: Some(store),
            committer,
            open: false,
            landing: None,
        })
    }

    /// Waits for the checkpoint sent to the committer, if one is there, to land:
    /// `on_checkpoint` hears of it, and the store is back if the committer handed it back.
    fn land(&mut self) -> Result<(), RunError> {
        let Some(c) = self.landing.take() else {
            return Ok(());
        };
        self.wait_committer()?;
        self.tell_checkpointed(c);
        Ok(())
    }

    /// Waits for the committer's last checkpoint; takes the store back if it came with it,
    /// the view then reading what it wrote.
    fn wait_committer(&mut self) -> Result<(), RunError> {
        let committer = self.committer.as_mut().ok_or_else(no_committer)?;
        if let Some(store) = committer.wait()? {
            self.view = store.view().map_err(RunError::Store)?;
            self.store = Some(store);
        }
        Ok(())
    }

    /// Hands the store to the committer, which opens a transaction for the closed buckets
    /// before the next checkpoint (the checkpoint before it landed first).
    fn open_in_committer(&mut self) -> Result<(), RunError> {
        if self.open {
            return Ok(());
        }
        self.land()?;
        let (Some(store), Some(committer)) = (self.store.take(), &mut self.committer) else {
            return Err(no_committer());
        };
        committer.open(store)?;
        self.open = true;
        // An engine that reads nothing back lets its view go with the store: a view kept
        // open would hold every page the committer's commits free. One that reads keys back
        // keeps the last checkpoint's, and its checkpoints are waited for (a new view each).
        if !self.engine.reads_store() {
            self.view = Box::new(AwayView);
        }
        Ok(())
    }

    /// Sends the checkpoint, taken from the engine now, into the committer's open
    /// transaction; with `keep`, the committer keeps the store for the next one. Its closed
    /// buckets go first, on their own: the committer writes them while the run's thread
    /// takes the keys' state rows.
    fn send_checkpoint(&mut self, keep: bool) -> Result<(), RunError> {
        if self.engine.ahead_count() > 0 {
            self.send_ahead()?;
        }
        let pending = self.ctx.take(
            &mut self.engine,
            &*self.view,
            &mut self.state,
            &mut *self.on_alert,
        )?;
        let committer = self.committer.as_mut().ok_or_else(no_committer)?;
        committer.send(Part::Checkpoint {
            pending: Box::new(pending),
            keep,
        })?;
        self.open = keep;
        Ok(())
    }

    /// Sends the buckets closed so far (and their starts' promotions) into the committer's
    /// open transaction (opening one first): written while the run reads on, committed with
    /// the next checkpoint; returns how many buckets.
    fn send_ahead(&mut self) -> Result<usize, RunError> {
        self.open_in_committer()?;
        let ahead = self.engine.take_ahead();
        let buckets = ahead.closed.len();
        let committer = self.committer.as_mut().ok_or_else(no_committer)?;
        committer.send(Part::Closed(ahead))?;
        Ok(buckets)
    }

    /// Commits everything fed so far, the store back in the run's thread afterwards: in the
    /// committer's transaction if one is open (the buckets written ahead are in it), or in
    /// the run's thread (the checkpoint in the committer, if one is there, landed first).
    fn commit_now(&mut self) -> Result<(), RunError> {
        self.commit_now_and(|_| ())
    }

    /// [`Runner::commit_now`], and `meanwhile` in the run's thread once the commit is taken
    /// from the engine (while the committer writes it, if it is the committer's): what it
    /// returns.
    fn commit_now_and<T>(&mut self, meanwhile: impl FnOnce(&mut Self) -> T) -> Result<T, RunError> {
        self.land()?;
        if self.open {
            self.send_checkpoint(false)?;
            let done = meanwhile(self);
            self.wait_committer()?;
            return Ok(done);
        }
        let store = self.store.as_deref_mut().ok_or_else(no_committer)?;
        self.ctx.commit(
            store,
            &*self.view,
            &mut self.engine,
            &mut self.state,
            &mut *self.on_alert,
        )?;
        // The view reads what the commit wrote (spilled keys are read back through it).
        self.view = store.view().map_err(RunError::Store)?;
        Ok(meanwhile(self))
    }

    /// Whether closed buckets may be written while the run reads on: there is a committer.
    fn writes_ahead(&self) -> bool {
        self.committer.is_some()
    }

    /// Whether the next checkpoint may be written while the run reads on: buckets may be,
    /// the engine never reads the store (one that does reads keys back from the last
    /// checkpoint, which must have landed: see [`super::committer`]), and the source does
    /// nothing on a commit.
    fn commits_async(&self, source: &dyn LineSource) -> bool {
        self.writes_ahead() && !self.engine.reads_store() && source.commits_async()
    }

    /// A checkpoint sent to the committer (the one before it landed first); the run reads
    /// on while it is written.
    fn checkpoint_async(&mut self) -> Result<(), RunError> {
        self.land()?;
        self.open_in_committer()?;
        self.send_checkpoint(true)?;
        self.landing = Some(Checkpointed {
            records: self.state.records,
            open_bytes: self.engine.memory() as u64,
        });
        self.report.commits += 1;
        self.interval.restart();
        Ok(())
    }

    /// Whether the run has been told to stop (then it is `stopped`).
    fn stop_now(&mut self) -> bool {
        if self.opts.stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            self.stopped = true;
        }
        self.stopped
    }

    /// Commits everything up to the records fed, with the state as it stands; with `spill`,
    /// the least recently active quiet keys then leave memory.
    pub fn checkpoint(&mut self, spill_keys: bool) -> Result<(), RunError> {
        self.commit_now()?;
        if spill_keys {
            self.spill_at = spill(&mut self.engine, self.ctx.config.checkpoint.max_memory)?;
            self.report.spills += 1;
        }
        self.report.commits += 1;
        self.interval.restart();
        self.tell_checkpointed(Checkpointed {
            records: self.state.records,
            open_bytes: self.engine.memory() as u64,
        });
        Ok(())
    }

    /// Tells the caller's `on_checkpoint` of a commit that landed.
    fn tell_checkpointed(&mut self, c: Checkpointed) {
        if let Some(f) = self.opts.on_checkpoint.as_mut() {
            f(&c);
        }
    }

    fn progress(&mut self, at: u64) {
        if let Some(p) = self.opts.progress.as_mut() {
            p(at, self.total_bytes);
        }
    }

    /// Waits until the followed path `p` names a file with a whole first line — between a
    /// rotation's rename and the new file, not created yet, or a new file without its first
    /// whole line (a CSV header written in two parts) — checkpointing what was read. False
    /// when told to stop first.
    pub fn await_file(&mut self, p: &Path, name: &str, poll: Duration) -> Result<bool, RunError> {
        while !follow::follow_ready(p, name)? {
            if self.stop_now() {
                return Ok(false);
            }
            if self.interval.idle_due() {
                self.checkpoint(false)?;
            }
            std::thread::sleep(poll);
        }
        Ok(true)
    }

    /// Reads a CSV input's header. A followed file's new start (`reopened`) may repeat the
    /// header (skipped) or not (then its first line is data, read again).
    pub fn header(&mut self, source: &mut dyn LineSource, reopened: bool) -> Result<(), RunError> {
        let name = source.name().to_string();
        let bad = |message: String| RunError::BadLine {
            file: name.clone(),
            line: 1,
            message,
        };
        let max = self.ctx.config.input.limits.line;
        let first_is_data = match source.header()? {
            None => false,
            Some(Line::TooLong { len, .. }) => {
                return Err(bad(format!(
                    "header: longer than max_line_bytes = {max} ({len} bytes read of it)"
                )))
            }
            Some(Line::Text { raw, .. } | Line::Message { raw, .. }) => {
                let text = line_text(raw).map_err(|e| bad(e.message))?;
                if reopened {
                    self.ex.header(text).is_err()
                } else {
                    self.ex
                        .header(text)
                        .map_err(|e| bad(format!("header: {e}")))?;
                    false
                }
            }
        };
        if first_is_data {
            source.unread_header()?;
        }
        Ok(())
    }

    /// Reads `source` (its header read and its position resumed) until its lines are done for
    /// this run, the run is told to stop, or a followed file rotates or is truncated. A bad
    /// line stops the run, committed up to the line, unless bad lines are skipped.
    pub fn read(&mut self, source: &mut dyn LineSource) -> Result<Ended, RunError> {
        let config = self.ctx.config;
        let limits = config.input.limits;
        // The metrics' names, owned here so that the rules can be built once, not per line.
        let names = self.ctx.names.clone();
        let rules = Rules {
            names: &names,
            limits,
            max_ahead: config.input.max_ahead,
        };
        self.bound_time(source)?;
        loop {
            if self.report.records_this_run % 64 == 0 && self.stop_now() {
                return Ok(Ended::Stopped);
            }
            // Before a read that may wait for input, the deferred events are added and their
            // alerts go out: none waits on a line that has not come.
            if source.waits_next() {
                self.drain_and_emit(source)?;
            }
            let (number, end, admitted) = match source.next_line()? {
                Next::End => return Ok(Ended::End),
                Next::Checkpoint => {
                    self.drain_and_emit(source)?;
                    self.checkpoint_source(source)?;
                    continue;
                }
                Next::Idle => match self.idle(source)? {
                    Some(ended) => return Ok(ended),
                    None => continue,
                },
                Next::Line(Line::TooLong {
                    len,
                    whole,
                    number,
                    end,
                }) => (
                    number,
                    end,
                    Admitted::Bad(too_long(len, whole, limits.line)),
                ),
                Next::Line(Line::Text { raw, number, end }) => {
                    let mut rows = StoreRows::with(&*self.view, &self.ctx.tables);
                    let admitted = admit(raw, &mut self.ex, &mut self.engine, &rules, &mut rows)
                        .map_err(engine_error)?;
                    (number, end, admitted)
                }
                Next::Parsed { number, end, line } => {
                    let admitted = match line {
                        Parsed::Record(rec) => {
                            let mut rows = StoreRows::with(&*self.view, &self.ctx.tables);
                            admit_parsed(&rec, &mut self.engine, &rules, &mut rows)
                                .map_err(engine_error)?
                        }
                        Parsed::Blank => Admitted::Blank,
                        Parsed::Bad(e) => Admitted::Bad(e.clone()),
                        // The time's rules come first, as for a record parsed here.
                        Parsed::Oversized { time, error } => {
                            let e = check_time(time, &self.engine, &rules).err();
                            Admitted::Bad(e.unwrap_or_else(|| error.clone()))
                        }
                    };
                    (number, end, admitted)
                }
                Next::Line(Line::Message {
                    raw,
                    key,
                    timestamp,
                    number,
                }) => {
                    self.ex.set_message(key, timestamp);
                    let mut rows = StoreRows::with(&*self.view, &self.ctx.tables);
                    let admitted = admit(raw, &mut self.ex, &mut self.engine, &rules, &mut rows)
                        .map_err(engine_error)?;
                    (number, number, admitted)
                }
            };
            match admitted {
                Admitted::Blank => {}
                Admitted::Fed(time) => self.fed(source, end, time)?,
                Admitted::Bad(e) if self.opts.skip_bad => {
                    self.state.bad_lines += 1;
                    if let Some(f) = self.opts.on_bad.as_mut() {
                        let (at, line) = source.bad_at(number);
                        f(&at, line, &e.message);
                    }
                }
                Admitted::Bad(e) => {
                    // An orderly stop: what came before the line is checkpointed, so a run
                    // after the line is mended (or with skip_bad) goes on from it.
                    source.unread_last();
                    source.finish(&mut self.state)?;
                    self.commit_now()?;
                    source.checkpointed(&self.state);
                    return Err(source.bad(number, e.message));
                }
            }
        }
    }

    /// Adds the engine's deferred events and sends their alerts, as after a record: once the
    /// source may commit (standard input known to be new; one known to be the last completed
    /// stream is refused first — a blank or skipped line may be what made it known).
    fn drain_and_emit(&mut self, source: &mut dyn LineSource) -> Result<(), RunError> {
        self.ctx.drain(&mut self.engine, &*self.view)?;
        let decided = source.may_commit()?;
        if self.engine.has_alerts() && decided {
            self.ctx
                .emit(self.engine.take_alerts(), &mut *self.on_alert);
        }
        Ok(())
    }

    /// Gives the source's bound on the time that closes buckets, if it has one, to the
    /// engine.
    fn bound_time(&mut self, source: &mut dyn LineSource) -> Result<(), RunError> {
        if let Some(bound) = source.time_bound() {
            self.engine
                .bound_time(bound, &mut StoreRows::with(&*self.view, &self.ctx.tables))
                .map_err(engine_error)?;
        }
        Ok(())
    }

    /// A checkpoint with the source's position, which then hears of it.
    fn checkpoint_source(&mut self, source: &mut dyn LineSource) -> Result<(), RunError> {
        source.save_position(&mut self.state)?;
        self.checkpoint(false)?;
        source.checkpointed(&self.state);
        Ok(())
    }

    /// A record was fed (its line ending at `end`, its event time `time`): counted, its
    /// alerts sent, and a checkpoint if one is due.
    fn fed(&mut self, source: &mut dyn LineSource, end: u64, time: u64) -> Result<(), RunError> {
        self.state.records += 1;
        self.report.records_this_run += 1;
        source.observed(time);
        if self.report.records_this_run % 256 == 0 {
            self.bound_time(source)?;
        }
        let decided = source.may_commit()?;
        // Alerts go out as they are raised (once the stream is known to be new); a crash
        // before the next checkpoint raises them again on resume (at least once).
        if self.engine.has_alerts() && decided {
            self.ctx
                .emit(self.engine.take_alerts(), &mut *self.on_alert);
        }
        self.interval.since += 1;
        // Past the budget's trigger, a checkpoint makes every key clean, and the least
        // recently active quiet ones leave memory.
        // (Every 1,024 records of the run, not of the checkpoint interval: checkpoints
        // closer together must not skip the check.)
        let over = self.report.records_this_run % 1024 == 0 && {
            // Counted with every record fed added.
            self.ctx.drain(&mut self.engine, &*self.view)?;
            self.engine.memory() as u64 > self.spill_at
        };
        let since = self.interval.since;
        let commits_async = !over && self.commits_async(&*source);
        // Whole closes only (a close's buckets are taken at once): a metric's part is written
        // after its part before in the store's order. Whatever the source does on a commit,
        // buckets may be written ahead: only a checkpoint commits them.
        if !over && self.writes_ahead() && self.engine.ahead_count() >= STREAM_AT {
            self.report.written_ahead += self.send_ahead()? as u64;
        }
        if decided
            && (over
                || since >= self.ctx.config.checkpoint.records
                || (since % 64 == 0 && self.interval.elapsed()))
        {
            source.save_position(&mut self.state)?;
            if commits_async {
                self.checkpoint_async()?;
            } else {
                self.checkpoint(over)?;
            }
            source.checkpointed(&self.state);
            self.progress(self.bytes_before + end);
        }
        Ok(())
    }

    /// At [`Next::Idle`]: what was read is added and its alerts sent, then the source says
    /// whether to read on, wait (checkpointing as often as while reading) or move on. `None`:
    /// read on.
    fn idle(&mut self, source: &mut dyn LineSource) -> Result<Option<Ended>, RunError> {
        // All read so far is added, and its alerts go out, before any wait (a file is read
        // without waiting until its end).
        self.drain_and_emit(source)?;
        self.bound_time(source)?;
        match source.idle()? {
            Pause::ReadOn => return Ok(None),
            Pause::Rotated => return Ok(Some(Ended::Rotated)),
            Pause::Wait => {}
        }
        if self.stop_now() {
            return Ok(Some(Ended::Stopped));
        }
        if self.interval.idle_due() {
            self.checkpoint_source(source)?;
        }
        match source.wait()? {
            Waited::ReadOn => Ok(None),
            Waited::Truncated => {
                // Read again from its start, from a checkpoint that says so.
                source.save_position(&mut self.state)?;
                self.checkpoint(false)?;
                Ok(Some(Ended::Truncated))
            }
        }
    }

    /// The reading of `source` ended: where this run leaves it goes into the state (the next
    /// checkpoint commits it), and its bytes count as done.
    pub fn done(&mut self, source: &mut dyn LineSource) -> Result<(), RunError> {
        source.finish(&mut self.state)?;
        let partitions = source.partitions();
        if !partitions.is_empty() {
            self.report.partitions = partitions;
        }
        self.bytes_before += source.size();
        self.progress(self.bytes_before);
        Ok(())
    }

    /// The run's last commit, after its inputs: the end of the input closes every bucket,
    /// unless they are kept open or the run was stopped.
    pub fn finish(mut self, source: Option<&mut dyn LineSource>) -> Result<RunReport, RunError> {
        // A run stopped by a signal has more input to come: standard input is resumed, not
        // taken as a new stream, and the buckets stay open.
        self.state.completed = !self.stopped;
        if !self.opts.keep_open && !self.stopped {
            self.ctx.drain(&mut self.engine, &*self.view)?;
            self.engine.flush();
        }
        // The engine is done with once its last commit is taken: what the report needs of it
        // is counted, and its memory (the run's largest) is freed while the committer
        // writes that commit rather than after.
        let (metrics, open_bytes) = self.commit_now_and(|r| {
            let counted = (r.engine_report(), r.engine.memory() as u64);
            // The config built the run's engine, so it builds an empty one; were it refused,
            // the engine would only be freed later, with the runner.
            if let Ok(empty) = Engine::new(r.ctx.config) {
                r.engine = empty;
            }
            counted
        })?;
        if let Some(source) = source {
            source.checkpointed(&self.state);
        }
        self.tell_checkpointed(Checkpointed {
            records: self.state.records,
            open_bytes,
        });
        let mut report = self.report;
        report.commits += 1;
        report.records = self.state.records;
        report.bad_lines = self.state.bad_lines;
        for m in metrics {
            let c = &m.counters;
            report.late += c.late;
            report.dropped += c.dropped;
            report.merged += c.merged;
            report.buckets += c.buckets;
            report.alerts += c.alerts;
            report.live_keys += m.live_keys;
            report.metrics.push(m);
        }
        Ok(report)
    }

    /// Each metric's counters and live keys, as the run's report gives them.
    fn engine_report(&self) -> Vec<MetricReport> {
        let engine = &self.engine;
        (0..engine.metric_count())
            .map(|m| MetricReport {
                name: self.ctx.config.metrics[m].name.clone(),
                counters: engine.counters(m),
                live_keys: engine.live_keys(m) as u64,
            })
            .collect()
    }
}

/// The run's store is with a committer it does not have, or that has stopped.
fn no_committer() -> RunError {
    RunError::Thread { name: "committer" }
}

/// Closed buckets past which a run with a committer sends them into its open transaction:
/// enough that a part is worth a message, few enough that the buckets of a checkpoint are not
/// all held until it.
const STREAM_AT: usize = 4096;

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::config::Config;
    use crate::store::MemStore;

    /// A source with no file behind it, as a message consumer is: no header, polls that come
    /// back empty, and a position (the messages read) of its own.
    struct Script {
        /// Each message's value, or `None` for a poll that finds nothing.
        polls: VecDeque<Option<&'static str>>,
        read: u64,
        waits: u64,
        /// At each save: (messages read, records counted in the state).
        saved: Vec<(u64, u64)>,
    }

    impl LineSource for Script {
        fn name(&self) -> &str {
            "script"
        }
        fn header(&mut self) -> Result<Option<Line<'_>>, RunError> {
            Ok(None)
        }
        fn resume(&mut self) -> Result<(), RunError> {
            Ok(())
        }
        fn waits_next(&self) -> bool {
            false
        }
        fn next_line(&mut self) -> Result<Next<'_>, RunError> {
            Ok(match self.polls.pop_front() {
                Some(Some(value)) => {
                    self.read += 1;
                    Next::Line(Line::Text {
                        raw: value.as_bytes(),
                        number: self.read,
                        end: self.read,
                    })
                }
                Some(None) => Next::Idle,
                None => Next::End,
            })
        }
        fn unread_last(&mut self) {}
        fn wait(&mut self) -> Result<Waited, RunError> {
            self.waits += 1;
            Ok(Waited::ReadOn)
        }
        fn save_position(&mut self, state: &mut RunState) -> Result<(), RunError> {
            self.saved.push((self.read, state.records));
            Ok(())
        }
    }

    /// The read loop drives a source that is not a file: each checkpoint takes the position
    /// the source saved just before it, which accounts for exactly the records counted.
    #[test]
    fn a_source_without_a_file_saves_its_position_before_each_checkpoint() {
        let config = Config::from_toml(
            r#"
[input]
format = "jsonl"
time_field = "ts"
time_format = "epoch_ms"
[state]
checkpoint_records = 2
[[metric]]
name = "c"
kind = "count"
key = ["k"]
bucket = "1m"
window = "3m"
"#,
        )
        .unwrap();
        let mut store = MemStore::default();
        let ctx = CommitCtx::new(&config);
        let engine = Engine::new(&config).unwrap();
        let mut on_alert = |_: &AlertOut| {};
        let mut r = Runner::new(
            ctx,
            &mut store,
            None,
            engine,
            RunState::default(),
            RunOptions::default(),
            &mut on_alert,
        )
        .unwrap();
        let mut source = Script {
            polls: VecDeque::from([
                Some(r#"{"ts": 60000, "k": "a"}"#),
                None,
                Some(r#"{"ts": 61000, "k": "a"}"#),
                Some(""),
                Some(r#"{"ts": 62000, "k": "b"}"#),
                None,
                Some(r#"{"ts": 63000, "k": "b"}"#),
            ]),
            read: 0,
            waits: 0,
            saved: Vec::new(),
        };
        assert!(matches!(r.read(&mut source).unwrap(), Ended::End));
        r.done(&mut source).unwrap();
        let report = r.finish(None).unwrap();
        assert_eq!(report.records, 4);
        assert_eq!(source.waits, 2, "an empty poll is a wait, then reads on");
        // Saved at the second record and the fourth (the blank line is read, not counted),
        // then where the reading ended.
        assert_eq!(source.saved, [(2, 2), (5, 4), (5, 4)]);
    }
}
