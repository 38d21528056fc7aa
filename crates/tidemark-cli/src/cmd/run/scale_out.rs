//! `tidemark run --store redis://…` reading a Kafka topic: one worker of a consumer group,
//! each partition the group gives it run as a pipeline of its own, into that partition's part
//! of the store in Redis (docs/scale-out.md).
//!
//! The worker's thread owns the consumer. When the group assigns it a partition it claims the
//! partition's part (`<topic>:<partition>`; a worker that held it before can no longer write
//! it), reads from the part the offset its state accounts for, moves the consumer there, and
//! starts the partition's run in a thread of its own, fed the partition's messages through a
//! bounded channel ([`PartFeed`]). A partition's checkpoint is its part's one atomic commit,
//! state and offset together: exactly once per partition, whatever the order of kills and
//! rebalances. When the group takes a partition away, its run commits what it counted and
//! ends before the worker polls again (the next owner starts at that offset; messages the
//! run had not taken are read again there). The group's committed offsets follow each
//! partition's commit, for monitoring only; a worker never acknowledges an offset its part
//! does not hold.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tidemark_cluster::{PartitionStore, Server};
use tidemark_kafka::{Event, KafkaSource, Message, Partition, Positions};
use tidemark_stream::config::Config;
use tidemark_stream::pipeline::{
    self, AlertOut, Message as StreamMessage, MessageSource, PartitionMark, Polled, RunOptions,
    RunReport, RunState, SourceError,
};
use tidemark_stream::store::Store;
use tidemark_stream::RunError;

use super::{alert_json, Args};

/// Messages waiting for a partition's run: the worker waits past them.
const QUEUED: usize = 4_096;

/// How long a poll waits before the worker checks its runs and its stop flag.
const POLL_WAIT: Duration = Duration::from_millis(200);

/// What the worker hands a partition's run.
enum Item {
    Message(Message),
    /// The partition is read to the end it had at start (`--until-end`).
    End,
}

/// A partition's messages as its run's source.
struct PartFeed {
    name: String,
    items: Receiver<Item>,
    /// The last message returned (lent to the run).
    current: Option<Message>,
    /// The partition's latest event time: its own watermark.
    latest: Option<u64>,
    /// The positions each commit landed with, for the group's offsets.
    acks: mpsc::Sender<PartitionMark>,
}

impl MessageSource for PartFeed {
    fn name(&self) -> &str {
        &self.name
    }

    /// The worker moved the consumer to the part's position before the run started.
    fn seek(&mut self, _: &[PartitionMark]) -> Result<(), SourceError> {
        Ok(())
    }

    fn poll(&mut self) -> Result<Polled<'_>, SourceError> {
        match self.items.recv_timeout(POLL_WAIT) {
            Ok(Item::Message(m)) => {
                let m = self.current.insert(m);
                Ok(Polled::Message(StreamMessage {
                    topic: &m.partition.topic,
                    partition: m.partition.partition,
                    offset: m.offset,
                    value: &m.value,
                    key: m.key.as_deref(),
                    timestamp: m.timestamp,
                }))
            }
            Ok(Item::End) => Ok(Polled::End),
            // The worker stops a run by its flag, then drops the channel: idle, the run sees
            // the flag.
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => Ok(Polled::Idle),
        }
    }

    fn observe_time(&mut self, time: u64) {
        self.latest = Some(self.latest.map_or(time, |t| t.max(time)));
    }

    fn watermark(&mut self) -> Option<u64> {
        self.latest
    }

    fn committed(&mut self, positions: &[PartitionMark]) {
        for p in positions {
            let _ = self.acks.send(p.clone());
        }
    }
}

/// A partition's run.
struct PartRun {
    items: SyncSender<Item>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<RunReport, RunError>>,
}

/// What a worker did.
#[derive(Default)]
pub struct Worked {
    /// Partitions run (a partition given back and assigned again counts twice).
    pub runs: u64,
    /// Records counted, over its runs.
    pub records: u64,
}

/// Reads the topic as one worker of the group until SIGINT or SIGTERM (`stop`), or the end
/// with `--until-end`; every run's error is the worker's.
pub fn work(
    config: &Config,
    args: &Args,
    server: &Server,
    mut source: KafkaSource,
    stop: &AtomicBool,
) -> anyhow::Result<Worked> {
    let config = Arc::new(config.clone());
    let (acks, acked) = mpsc::channel::<PartitionMark>();
    let mut runs: BTreeMap<Partition, PartRun> = BTreeMap::new();
    let mut worked = Worked::default();
    let result = (|| -> anyhow::Result<()> {
        loop {
            commit_acks(&mut source, &acked);
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            match source.poll(POLL_WAIT)? {
                Event::Message(m) => {
                    let Some(run) = runs.get(&m.partition) else {
                        continue;
                    };
                    if run.items.send(Item::Message(m)).is_err() {
                        // The run ended: its error, joined below.
                        check_runs(&mut runs, &mut worked)?;
                    }
                }
                Event::Assigned(parts) => {
                    for p in parts {
                        let run = start(&config, args, server, &mut source, &p, acks.clone())?;
                        worked.runs += 1;
                        runs.insert(p, run);
                    }
                }
                Event::Revoked(parts) => {
                    for p in parts {
                        if let Some(run) = runs.remove(&p) {
                            worked.records += finish(run, false)?.records_this_run;
                        }
                    }
                    commit_acks(&mut source, &acked);
                }
                Event::End => {
                    for (_, run) in std::mem::take(&mut runs) {
                        worked.records += finish(run, true)?.records_this_run;
                    }
                    commit_acks(&mut source, &acked);
                    return Ok(());
                }
                Event::Notice(n) => eprintln!("tidemark: {n}"),
                Event::Idle => check_runs(&mut runs, &mut worked)?,
                _ => {}
            }
        }
    })();
    // Stopped, or failed: every run commits what it counted and ends.
    for (_, run) in std::mem::take(&mut runs) {
        match finish(run, false) {
            Ok(r) => worked.records += r.records_this_run,
            Err(e) if result.is_ok() => return Err(e),
            Err(e) => eprintln!("tidemark: {e}"),
        }
    }
    commit_acks(&mut source, &acked);
    result.map(|()| worked)
}

/// Claims partition `p`'s part, moves the consumer to the offset it holds, and starts its run.
fn start(
    config: &Arc<Config>,
    args: &Args,
    server: &Server,
    source: &mut KafkaSource,
    p: &Partition,
    acks: mpsc::Sender<PartitionMark>,
) -> anyhow::Result<PartRun> {
    let name = format!("{}:{}", p.topic, p.partition);
    let mut store = PartitionStore::claim(server, &name)
        .map_err(|e| anyhow::anyhow!("tidemark run: part {name}: {e}"))?;
    let held = store
        .meta()
        .map_err(|e| anyhow::anyhow!("tidemark run: part {name}: {e}"))?;
    if let Some(meta) = held {
        let state = RunState::from_bytes(&meta.state)
            .map_err(|e| anyhow::anyhow!("tidemark run: part {name}: its run state: {e}"))?;
        let mine: Positions = state
            .partitions
            .iter()
            .filter(|m| *m.topic == *p.topic && m.partition == p.partition)
            .map(|m| (p.clone(), m.offset))
            .collect();
        source.seek_to(&mine)?;
    }
    let (items, rx) = mpsc::sync_channel(QUEUED);
    let stop = Arc::new(AtomicBool::new(false));
    let feed = PartFeed {
        name: format!("kafka {name}"),
        items: rx,
        current: None,
        latest: None,
        acks,
    };
    let (config, flag) = (Arc::clone(config), Arc::clone(&stop));
    let (skip_bad, keep_open) = (args.skip_bad, !args.close);
    let thread = std::thread::Builder::new()
        .name(format!("tidemark-{name}"))
        .spawn(move || {
            let stdout = std::io::stdout();
            pipeline::run(
                &config,
                &mut store,
                RunOptions {
                    skip_bad,
                    keep_open,
                    stop: Some(&flag),
                    messages: Some(Box::new(feed)),
                    threads: 1,
                    ..RunOptions::default()
                },
                &mut |a: &AlertOut| {
                    let _ = writeln!(stdout.lock(), "{}", alert_json(a));
                },
            )
        })?;
    Ok(PartRun {
        items,
        stop,
        thread,
    })
}

/// Ends a run: at the partition's end (`at_end`) or stopped, its last checkpoint committed.
fn finish(run: PartRun, at_end: bool) -> anyhow::Result<RunReport> {
    if at_end {
        let _ = run.items.send(Item::End);
    } else {
        run.stop.store(true, Ordering::Relaxed);
    }
    drop(run.items);
    match run.thread.join() {
        Ok(r) => Ok(r?),
        Err(_) => Err(anyhow::anyhow!("tidemark run: a partition's run panicked")),
    }
}

/// Joins the runs that ended (an error, or a panic): the worker's error.
fn check_runs(runs: &mut BTreeMap<Partition, PartRun>, worked: &mut Worked) -> anyhow::Result<()> {
    let ended: Vec<Partition> = runs
        .iter()
        .filter(|(_, r)| r.thread.is_finished())
        .map(|(p, _)| p.clone())
        .collect();
    for p in ended {
        if let Some(run) = runs.remove(&p) {
            let report = finish(run, false)
                .map_err(|e| e.context(format!("tidemark run: partition {p}")))?;
            worked.records += report.records_this_run;
        }
    }
    Ok(())
}

/// Writes the offsets the parts committed as the group's (for monitoring).
fn commit_acks(source: &mut KafkaSource, acked: &Receiver<PartitionMark>) {
    let mut positions = Positions::new();
    while let Ok(m) = acked.try_recv() {
        positions.insert(Partition::new(m.topic.as_str(), m.partition), m.offset);
    }
    if !positions.is_empty() {
        if let Some(notice) = source.commit(&positions) {
            eprintln!("tidemark: {notice}");
        }
    }
}
