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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tidemark_cluster::{AlertDuty, PartitionStore, Server};
use tidemark_kafka::{Event, KafkaSource, Message, Partition, Positions};
use tidemark_stream::config::Config;
use tidemark_stream::pipeline::{
    self, AlertOut, Message as StreamMessage, MessageSource, PartitionMark, Polled, RunOptions,
    RunReport, RunState, SourceError,
};
use tidemark_stream::store::{Store, StoreError};
use tidemark_stream::RunError;

use super::{finish_duty, print_alert, Args, DUTY_WAIT};

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

/// What a worker's loop holds besides its runs.
struct Ctx<'a> {
    config: Arc<Config>,
    args: &'a Args,
    server: &'a Server,
    source: KafkaSource,
    /// The positions each run's commits landed with (to the group's offsets).
    acks: mpsc::Sender<PartitionMark>,
    acked: Receiver<PartitionMark>,
    worked: Worked,
}

/// Reads the topic as one worker of the group until SIGINT or SIGTERM (`stop`), or the end
/// with `--until-end`; a run's error is the worker's (but see [`check_runs`]).
pub fn work(
    config: &Config,
    args: &Args,
    server: &Server,
    source: KafkaSource,
    stop: &AtomicBool,
) -> anyhow::Result<Worked> {
    let (acks, acked) = mpsc::channel::<PartitionMark>();
    let mut ctx = Ctx {
        config: Arc::new(sharing_budget(config, source.topic_partitions().len())),
        args,
        server,
        source,
        acks,
        acked,
        worked: Worked::default(),
    };
    // Every partition is a part from the start: the merged alerts wait for each.
    let names: Vec<String> = ctx
        .source
        .topic_partitions()
        .iter()
        .map(|p| format!("{}:{}", p.topic, p.partition))
        .collect();
    PartitionStore::list(server, &names)
        .map_err(|e| anyhow::anyhow!("tidemark run: listing the topic's partitions: {e}"))?;
    let duty = args.merged_alerts().then(|| Duty::start(server, config));
    let mut runs: BTreeMap<Partition, PartRun> = BTreeMap::new();
    let mut result = ctx.read(&mut runs, stop);
    // Stopped, or failed: every run commits what it counted and ends; the first error is the
    // worker's.
    for (p, run) in std::mem::take(&mut runs) {
        if let Err(e) = ctx.ended(&p, finish(run, false), true) {
            if result.is_ok() {
                result = Err(e);
            } else {
                eprintln!("tidemark: {e:#}");
            }
        }
    }
    ctx.commit_acks();
    if let Some(duty) = duty {
        // Read to the end, the worker waits for the duty to evaluate what its last commits
        // closed; stopped, it gives the duty up after one more round.
        duty.end(if stop.load(Ordering::Relaxed) {
            Duration::ZERO
        } else {
            DUTY_WAIT
        });
    }
    result.map(|()| ctx.worked)
}

/// `config` for one partition's run of a worker that may be given all `partitions` of the
/// topic: each run's engine gets an equal share of the memory budget (at least the least
/// budget a run takes), so that the worker's runs together stay within it whatever the group
/// gives the worker.
fn sharing_budget(config: &Config, partitions: usize) -> Config {
    let mut shared = config.clone();
    let share = config.checkpoint.max_memory / partitions.max(1) as u64;
    shared.checkpoint.max_memory = share.max(tidemark_stream::config::MIN_MAX_MEMORY);
    shared
}

/// How often a worker asks for the alert duty, and evaluates while it holds it.
const DUTY_ROUND: Duration = Duration::from_secs(1);

/// The worker's thread for the alert duty (`--alerts merged`, docs/scale-out.md): a round
/// every [`DUTY_ROUND`], the lines on standard output.
struct Duty {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<AlertDuty>,
}

impl Duty {
    fn start(server: &Server, config: &Config) -> Duty {
        let holder = format!("worker {}", std::process::id());
        let mut duty = AlertDuty::new(server, config, &holder);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut said = String::new();
            while !flag.load(Ordering::Relaxed) {
                if let Err(e) = duty.round(&mut print_alert) {
                    // Said once until it changes: a server away is retried every round.
                    let e = e.to_string();
                    if e != said {
                        eprintln!("tidemark: the merged alerts: {e}");
                        said = e;
                    }
                }
                let mut slept = Duration::ZERO;
                while slept < DUTY_ROUND && !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(POLL_WAIT / 4);
                    slept += POLL_WAIT / 4;
                }
            }
            duty
        });
        Duty { stop, thread }
    }

    /// Stops the rounds, then the last ones (for up to `wait` while another worker holds
    /// the duty), and gives the duty up.
    fn end(self, wait: Duration) {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.join() {
            Ok(mut duty) => finish_duty(&mut duty, wait),
            Err(_) => eprintln!("tidemark: the merged alerts' thread panicked"),
        }
    }
}

impl Ctx<'_> {
    fn read(
        &mut self,
        runs: &mut BTreeMap<Partition, PartRun>,
        stop: &AtomicBool,
    ) -> anyhow::Result<()> {
        loop {
            self.commit_acks();
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            match self.source.poll(POLL_WAIT)? {
                Event::Message(m) => {
                    let Some(run) = runs.get(&m.partition) else {
                        continue;
                    };
                    // A run that ended drops the message: a run started again reads from
                    // its part's offset.
                    if run.items.send(Item::Message(m)).is_err() {
                        check_runs(self, runs)?;
                    }
                }
                Event::Assigned(parts) => {
                    for p in parts {
                        let run = self.start(&p)?;
                        runs.insert(p, run);
                    }
                }
                Event::Revoked(parts) => {
                    for p in parts {
                        if let Some(run) = runs.remove(&p) {
                            self.ended(&p, finish(run, false), true)?;
                        }
                    }
                    self.commit_acks();
                }
                Event::End => {
                    let mut first = Ok(());
                    for (p, run) in std::mem::take(runs) {
                        if let Err(e) = self.ended(&p, finish(run, true), false) {
                            first = first.and(Err(e));
                        }
                    }
                    self.commit_acks();
                    return first;
                }
                Event::Notice(n) => eprintln!("tidemark: {n}"),
                Event::Idle => check_runs(self, runs)?,
                _ => {}
            }
        }
    }

    /// A run that ended: its records counted. A run fenced out by another worker's claim ends
    /// quietly (the partition is the other's), as does one that lost commits in a failover
    /// as its partition went away (`revoked`: the next owner reads from what the part holds);
    /// any other error is the worker's.
    fn ended(
        &mut self,
        p: &Partition,
        result: Result<RunReport, Ended>,
        revoked: bool,
    ) -> anyhow::Result<()> {
        match result {
            Ok(report) => {
                self.worked.records += report.records_this_run;
                Ok(())
            }
            Err(Ended::Run(RunError::Store(e @ StoreError::Fenced { .. }))) => {
                eprintln!(
                    "tidemark: partition {p}: {e}; this worker stops reading it (the group \
                     moves it)"
                );
                Ok(())
            }
            Err(Ended::Run(RunError::Store(e @ StoreError::Behind { .. }))) if revoked => {
                eprintln!("tidemark: partition {p}: {e}");
                Ok(())
            }
            Err(e) => Err(anyhow::Error::new(e).context(format!("partition {p}"))),
        }
    }

    /// Claims partition `p`'s part, moves the consumer to the offset it holds (the
    /// partition's start when it holds none: a part lost in a failover is counted again from
    /// the beginning, not from where the group last was), and starts its run.
    fn start(&mut self, p: &Partition) -> anyhow::Result<PartRun> {
        let name = format!("{}:{}", p.topic, p.partition);
        let mut store = PartitionStore::claim(self.server, &name)
            .map_err(|e| anyhow::anyhow!("tidemark run: part {name}: {e}"))?;
        if self.args.publish {
            store = store
                .publishing()
                .map_err(|e| anyhow::anyhow!("tidemark run: part {name}: --publish: {e}"))?;
        }
        let held = store
            .meta()
            .map_err(|e| anyhow::anyhow!("tidemark run: part {name}: {e}"))?;
        let mut offset = 0;
        if let Some(meta) = held {
            let state = RunState::from_bytes(&meta.state)
                .map_err(|e| anyhow::anyhow!("tidemark run: part {name}: its run state: {e}"))?;
            if let Some(m) = state
                .partitions
                .iter()
                .find(|m| *m.topic == *p.topic && m.partition == p.partition)
            {
                offset = m.offset;
            }
        }
        self.source
            .seek_to(&Positions::from([(p.clone(), offset)]))?;
        let (items, rx) = mpsc::sync_channel(QUEUED);
        let stop = Arc::new(AtomicBool::new(false));
        let feed = PartFeed {
            name: format!("kafka {name}"),
            items: rx,
            current: None,
            latest: None,
            acks: self.acks.clone(),
        };
        let (config, flag) = (Arc::clone(&self.config), Arc::clone(&stop));
        let (skip_bad, keep_open) = (self.args.skip_bad, !self.args.close);
        // Under the alert duty the partition's own engine keeps quiet.
        let own_alerts = !self.args.merged_alerts();
        let thread = std::thread::Builder::new()
            .name(format!("tidemark-{name}"))
            .spawn(move || {
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
                        if own_alerts {
                            print_alert(a);
                        }
                    },
                )
            })?;
        self.worked.runs += 1;
        Ok(PartRun {
            items,
            stop,
            thread,
        })
    }

    /// Writes the offsets the parts committed as the group's (for monitoring).
    fn commit_acks(&mut self) {
        let mut positions = Positions::new();
        while let Ok(m) = self.acked.try_recv() {
            positions.insert(Partition::new(m.topic.as_str(), m.partition), m.offset);
        }
        if !positions.is_empty() {
            if let Some(notice) = self.source.commit(&positions) {
                eprintln!("tidemark: {notice}");
            }
        }
    }
}

/// Ends a run: at the partition's end (`at_end`) or stopped, its last checkpoint committed.
fn finish(run: PartRun, at_end: bool) -> Result<RunReport, Ended> {
    if at_end {
        let _ = run.items.send(Item::End);
    } else {
        run.stop.store(true, Ordering::Relaxed);
    }
    join(run)
}

/// Why a partition's run ended without its report.
#[derive(Debug)]
enum Ended {
    Run(RunError),
    Panicked,
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Run(e) => write!(f, "{e}"),
            Ended::Panicked => write!(f, "its run panicked"),
        }
    }
}

impl std::error::Error for Ended {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Ended::Run(e) => Some(e),
            Ended::Panicked => None,
        }
    }
}

/// Waits for a run's end (its channel closed first, so that a run waiting for messages sees
/// its flag or its end).
fn join(run: PartRun) -> Result<RunReport, Ended> {
    drop(run.items);
    match run.thread.join() {
        Ok(r) => r.map_err(Ended::Run),
        Err(_) => Err(Ended::Panicked),
    }
}

/// Joins the runs that ended. A run whose part lost its last commits in a failover
/// ([`StoreError::Behind`]) starts again from what the part holds; see [`Ctx::ended`] for the
/// rest.
fn check_runs(ctx: &mut Ctx<'_>, runs: &mut BTreeMap<Partition, PartRun>) -> anyhow::Result<()> {
    let ended: Vec<Partition> = runs
        .iter()
        .filter(|(_, r)| r.thread.is_finished())
        .map(|(p, _)| p.clone())
        .collect();
    for p in ended {
        let Some(run) = runs.remove(&p) else {
            continue;
        };
        match join(run) {
            Err(Ended::Run(RunError::Store(e @ StoreError::Behind { .. }))) => {
                eprintln!("tidemark: partition {p}: {e}");
                let run = ctx.start(&p)?;
                runs.insert(p, run);
            }
            result => ctx.ended(&p, result, false)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_partition_run_gets_an_equal_share_of_the_budget() {
        let mut config = Config::from_toml(
            "[input]\ntime_field = \"ts\"\n[[metric]]\nname = \"n\"\nkind = \"count\"\nkey = \
             [\"k\"]\nbucket = \"1m\"\nwindow = \"1m\"\n",
        )
        .unwrap();
        config.checkpoint.max_memory = 1 << 30;
        assert_eq!(sharing_budget(&config, 8).checkpoint.max_memory, 1 << 27);
        assert_eq!(sharing_budget(&config, 0).checkpoint.max_memory, 1 << 30);
        let least = tidemark_stream::config::MIN_MAX_MEMORY;
        assert_eq!(
            sharing_budget(&config, 1_000_000).checkpoint.max_memory,
            least
        );
        // Eight runs of a worker holding every partition stay within the budget.
        assert!(8 * sharing_budget(&config, 8).checkpoint.max_memory <= 1 << 30);
    }
}
