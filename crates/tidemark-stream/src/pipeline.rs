//! The runner: reads the input, drives the [`Engine`], commits to a [`Store`], resumes.
//!
//! # Exactly-once state over a crash
//!
//! The engine holds open buckets in memory; the store holds closed ones. Whenever a record
//! makes buckets close (or a late event must be merged), the runner commits in one
//! transaction: the closed buckets, the late merges, the retention deletes, and the state
//! that goes with them — the input position just after that record, the counters and the
//! engine's snapshot (its open buckets, count histograms and alert streaks). A crash loses
//! only what came after the last commit, and a restart restores that snapshot and reads on
//! from that position, so every record is counted once: the store ends as an uninterrupted
//! run's. Alerts are written before their commit, so a crash between the two repeats them
//! (at least once), never loses them.
//!
//! Files are resumed at the committed byte offset (a CSV file's header is read again first);
//! standard input by skipping the committed number of bytes, which presumes the same stream
//! is fed again. Which it is, the state tells: it records a fingerprint of the input list and
//! whether the run completed. Another list of files is new input, read from its start; the
//! same list is resumed where it stopped (after a completed run, that reads only lines
//! appended to the last file since); standard input after a completed run is new data.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::PathBuf;

use tidemark::codec::{Reader, Writer};
use tidemark::DecodeError;

use crate::config::Config;
use crate::engine::{Alert, Engine, MetricShape, Outputs};
use crate::record::Extractor;
use crate::store::{Batch, BucketRef, Meta, RollupRef, Store};
use crate::RunError;

/// Where the input was when state was committed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// Index of the file in the input list (0 for stdin).
    pub file: u64,
    /// Byte offset of the next unread line in that file.
    pub offset: u64,
    /// Lines read from that file so far (the next line's number is this plus one).
    pub line: u64,
}

/// The state committed with each batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunState {
    /// A fingerprint of the input list (file names as given, or standard input): a run over
    /// another list starts its input from the beginning.
    pub inputs: u64,
    /// Whether the run that committed this state reached the end of its input. A completed
    /// run over standard input is followed by new data, read from its start; an interrupted
    /// one is resumed.
    pub completed: bool,
    /// The input position.
    pub position: Position,
    /// Records counted so far.
    pub records: u64,
    /// Malformed lines skipped so far (`--skip-bad`).
    pub bad_lines: u64,
    /// The engine's snapshot.
    pub engine: Vec<u8>,
}

const STATE_VERSION: u8 = 2;

impl RunState {
    /// Encodes the state.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(STATE_VERSION)
            .u64(self.inputs)
            .u8(self.completed as u8)
            .u64(self.position.file)
            .u64(self.position.offset)
            .u64(self.position.line)
            .u64(self.records)
            .u64(self.bad_lines)
            .u64(self.engine.len() as u64)
            .raw(&self.engine);
        w.into_bytes()
    }

    /// Decodes a state, checking every field.
    pub fn from_bytes(bytes: &[u8]) -> Result<RunState, DecodeError> {
        let mut r = Reader::new(bytes);
        let off = r.offset();
        let v = r.u8("state version")?;
        if v != STATE_VERSION {
            return Err(Reader::invalid("state version", off, "2", v as u64));
        }
        let inputs = r.u64("inputs")?;
        let off = r.offset();
        let completed = match r.u8("completed")? {
            0 => false,
            1 => true,
            other => return Err(Reader::invalid("completed", off, "0 or 1", other as u64)),
        };
        let position = Position {
            file: r.u64("file")?,
            offset: r.u64("offset")?,
            line: r.u64("line")?,
        };
        let records = r.u64("records")?;
        let bad_lines = r.u64("bad lines")?;
        let n = r.count("engine snapshot", 1, u64::MAX)?;
        let engine = r.bytes(n as u64, "engine snapshot")?.to_vec();
        r.finish()?;
        Ok(RunState {
            inputs,
            completed,
            position,
            records,
            bad_lines,
            engine,
        })
    }
}

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
    /// Called with (bytes read, total bytes of the files) as the input is read.
    pub progress: Option<&'a mut dyn FnMut(u64, u64)>,
    /// Called for each malformed line skipped: (file, line, message).
    pub on_bad: Option<&'a mut BadLineFn<'a>>,
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
    /// Whether this run resumed from a committed state.
    pub resumed: bool,
}

/// Runs `config_text` over the input into `store`, calling `on_alert` for each alert.
pub fn run(
    config_text: &str,
    store: &mut dyn Store,
    mut opts: RunOptions<'_>,
    on_alert: &mut dyn FnMut(&AlertOut),
) -> Result<RunReport, RunError> {
    let config = Config::from_toml(config_text).map_err(RunError::Config)?;
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
            let mut scan_err = None;
            let engine = Engine::restore(&config, &state.engine, &mut |m, from, to, f| {
                if let Err(e) = store.scan(&config.metrics[m].name, from, to, f) {
                    scan_err = Some(e);
                }
            })
            .map_err(RunError::Engine)?;
            if let Some(e) = scan_err {
                return Err(RunError::Store(e));
            }
            engine
        }
        None => Engine::new(&config).map_err(RunError::Engine)?,
    };
    let inputs_id = {
        let mut names = String::new();
        for p in &opts.inputs {
            names.push_str(&p.display().to_string());
            names.push('\0');
        }
        if opts.inputs.is_empty() {
            names.push_str("<stdin>");
        }
        xxhash_rust::xxh3::xxh3_64(names.as_bytes())
    };
    if state.inputs != inputs_id || (opts.inputs.is_empty() && state.completed) {
        // New input: read it from its start. (The same files again resume where the last
        // run stopped, which reads only what was appended since.)
        state.position = Position::default();
    }
    state.inputs = inputs_id;
    state.completed = false;
    let mut ex = Extractor::new(&config);
    let names: Vec<String> = config.metrics.iter().map(|m| m.name.clone()).collect();
    let rollup_names: Vec<String> = config
        .metrics
        .iter()
        .map(|m| m.rollup_name().unwrap_or_default())
        .collect();

    let total_bytes: u64 = opts
        .inputs
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| m.len()))
        .sum();
    let mut bytes_before = 0u64; // bytes of the files already finished
    let inputs: Vec<Option<PathBuf>> = if opts.inputs.is_empty() {
        vec![None]
    } else {
        opts.inputs.iter().cloned().map(Some).collect()
    };
    let mut buf = Vec::with_capacity(256);
    let mut commit_ctx = CommitCtx {
        config: &config,
        config_text,
        fingerprint,
        names: &names,
        rollup_names: &rollup_names,
    };
    for (fi, input) in inputs.iter().enumerate() {
        let fi = fi as u64;
        let name = input
            .as_ref()
            .map_or("<stdin>".to_string(), |p| p.display().to_string());
        let size = input
            .as_ref()
            .and_then(|p| std::fs::metadata(p).ok())
            .map_or(0, |m| m.len());
        if fi < state.position.file {
            bytes_before += size;
            continue;
        }
        let resume = fi == state.position.file;
        let mut reader: Box<dyn BufRead> = match input {
            Some(p) => Box::new(BufReader::with_capacity(
                1 << 16,
                File::open(p).map_err(|e| RunError::Input {
                    file: name.clone(),
                    message: e.to_string(),
                })?,
            )),
            None => Box::new(BufReader::with_capacity(1 << 16, io::stdin().lock())),
        };
        let io_err = |e: io::Error| RunError::Input {
            file: name.clone(),
            message: e.to_string(),
        };
        let mut offset = 0u64;
        let mut line_no = 0u64;
        if ex.wants_header() {
            buf.clear();
            let n = reader.read_until(b'\n', &mut buf).map_err(io_err)?;
            offset += n as u64;
            line_no += 1;
            let line = line_text(&buf).map_err(|m| RunError::BadLine {
                file: name.clone(),
                line: 1,
                message: m,
            })?;
            if n > 0 {
                ex.header(line).map_err(|e| RunError::BadLine {
                    file: name.clone(),
                    line: 1,
                    message: format!("header: {e}"),
                })?;
            }
        }
        if resume && state.position.offset > offset {
            // Skip the committed prefix (read once, sequentially; a boxed reader cannot seek).
            let skip = state.position.offset - offset;
            let copied =
                io::copy(&mut (&mut reader).take(skip), &mut io::sink()).map_err(io_err)?;
            if copied != skip {
                return Err(RunError::Input {
                    file: name.clone(),
                    message: format!(
                        "the committed position is byte {} but the input ends at byte {}",
                        state.position.offset,
                        offset + copied
                    ),
                });
            }
            offset = state.position.offset;
            line_no = state.position.line;
        }
        buf.clear();
        loop {
            // Lines are parsed in place in the reader's buffer; only a line that straddles
            // two buffer fills is copied.
            let avail = reader.fill_buf().map_err(io_err)?;
            let (used, in_place) = if avail.is_empty() {
                if buf.is_empty() {
                    break;
                }
                (0, false) // a last line without a newline
            } else if let Some(i) = memchr::memchr(b'\n', avail) {
                if buf.is_empty() {
                    (i + 1, true)
                } else {
                    buf.extend_from_slice(&avail[..=i]);
                    (i + 1, false)
                }
            } else {
                buf.extend_from_slice(avail);
                let n = avail.len();
                reader.consume(n);
                continue;
            };
            let raw: &[u8] = if in_place { &avail[..used] } else { &buf };
            offset += raw.len() as u64;
            line_no += 1;
            'line: {
                let parsed = line_text(raw).and_then(|line| {
                    if line.is_empty() {
                        return Ok(false);
                    }
                    ex.parse(line).map(|()| true).map_err(|e| e.message)
                });
                match parsed {
                    Ok(false) => break 'line,
                    Ok(true) => {}
                    Err(message) => {
                        if opts.skip_bad {
                            state.bad_lines += 1;
                            if let Some(f) = opts.on_bad.as_mut() {
                                f(&name, line_no, &message);
                            }
                            break 'line;
                        }
                        return Err(RunError::BadLine {
                            file: name.clone(),
                            line: line_no,
                            message,
                        });
                    }
                }
                state.records += 1;
                report.records_this_run += 1;
                engine.observe(ex.time);
                for m in 0..names.len() {
                    engine.add_item(m, ex.time, &ex.keys[m], ex.items[m], &ex.item_bytes[m]);
                }
                if engine.needs_commit() {
                    state.position = Position {
                        file: fi,
                        offset,
                        line: line_no,
                    };
                    commit_ctx.commit(store, &mut engine, &mut state, on_alert)?;
                    report.commits += 1;
                    if let Some(p) = opts.progress.as_mut() {
                        p(bytes_before + offset, total_bytes);
                    }
                }
            }
            reader.consume(used);
            if !in_place {
                buf.clear();
            }
        }
        bytes_before += size;
        // The next file from its start; after the last one, stay at its end, so a later
        // run over the same files reads only what was appended.
        state.position = if fi + 1 < inputs.len() as u64 {
            Position {
                file: fi + 1,
                offset: 0,
                line: 0,
            }
        } else {
            Position {
                file: fi,
                offset,
                line: line_no,
            }
        };
        if let Some(p) = opts.progress.as_mut() {
            p(bytes_before, total_bytes);
        }
    }
    state.completed = true;
    if !opts.keep_open {
        engine.flush();
    }
    commit_ctx.commit(store, &mut engine, &mut state, on_alert)?;
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
    }
    Ok(report)
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
}

impl CommitCtx<'_> {
    fn commit(
        &mut self,
        store: &mut dyn Store,
        engine: &mut Engine,
        state: &mut RunState,
        on_alert: &mut dyn FnMut(&AlertOut),
    ) -> Result<(), RunError> {
        let out: Outputs = engine.take_outputs();
        for a in &out.alerts {
            on_alert(&AlertOut {
                metric: self.names[a.metric].clone(),
                key: String::from_utf8_lossy(&a.key).into_owned(),
                alert: a.clone(),
            });
        }
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
        let roll = |metric: &str, period: u64, parts: &[(u64, Vec<u8>)]| {
            let (i, _) = config
                .metric(metric)
                .ok_or_else(|| format!("no metric {metric:?}"))?;
            let m = &config.metrics[i];
            let into = MetricShape::rollup_of(m).ok_or("no rollup")?;
            Ok(MetricShape::of(m).roll(&into, period, parts)?.to_bytes())
        };
        let merge = |metric: &str, start: u64, old: &[u8], add: &[u8]| {
            let (_, shape) = MetricShape::for_name(config, metric)
                .ok_or_else(|| format!("no metric {metric:?}"))?;
            let shape = &shape;
            let mut a = shape.decode(old, start).map_err(|e| e.to_string())?;
            let b = shape.decode(add, start).map_err(|e| e.to_string())?;
            a.merge(&b).map_err(|e| e.to_string())?;
            Ok(a.to_bytes())
        };
        store
            .commit(&Batch {
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
