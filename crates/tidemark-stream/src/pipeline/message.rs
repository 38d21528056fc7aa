//! A message source: records that come as messages at `(topic, partition, offset)` — a Kafka
//! consumer's — read by the same loop as files, with their positions committed in the same
//! checkpoint as the state they produced.
//!
//! This crate knows no Kafka client (the Python package depends on it, and needs none): a
//! client is supplied from outside as a [`MessageSource`] (`tidemark-kafka` has one on
//! rdkafka), speaking only of topics, partitions, offsets, values, keys and timestamps. The
//! run reads it through `MessageLines`, one more of its line sources:
//!
//! - **Records.** Each message's value is one record in the input's format: a JSON object, or
//!   a CSV line whose fields are the source's declared `columns` (there is no header). The
//!   fields `@key` and `@timestamp` name the message's key and timestamp
//!   ([`crate::record`]); `time_field = "@timestamp"` takes the event time from the message.
//!   A bad message is a bad record named by topic, partition and offset
//!   ([`RunError::BadMessage`]): the run stops on it (committed up to it, so a run after it
//!   is mended resumes there) or, with `skip_bad`, counts and skips it.
//! - **Exactly once.** The source keeps, per partition, the offset after the last message it
//!   returned, and writes them into the run state ([`RunState::partitions`]) for each
//!   checkpoint, so they commit with the buckets they account for. At start the run hands the
//!   committed positions to [`MessageSource::seek`]: each partition is read from its
//!   committed offset (one the state does not know starts where the source's own policy
//!   says). When the source is about to lose partitions (a consumer group's rebalance) it
//!   returns [`Polled::Checkpoint`], and the run checkpoints before it polls again; after
//!   every checkpoint the source hears of the committed positions
//!   ([`MessageSource::committed`]) and may write them as the broker's group offsets — for
//!   monitoring, never to resume from.
//! - **Event time.** Partitions are read interleaved, each in its own order: the time that
//!   closes buckets is bounded by the source's watermark ([`MessageSource::watermark`], the
//!   minimum over its partitions of their latest event time, which the run reports per record
//!   through [`MessageSource::observe_time`]), so a partition read ahead does not make
//!   another's events late (see [`crate::engine::Engine::bound_time`]). Until the watermark
//!   is known no bucket closes.
//! - **Running.** A poll that finds nothing returns [`Polled::Idle`]: the run adds what it
//!   read, checks its stop flag (SIGTERM) and checkpoints if due, then polls again;
//!   [`Polled::End`] ends the run (the end offsets seen at start, for a backfill).

use super::line::{Line, LineSource, Next};
use super::state::{PartitionMark, RunState, MAX_PARTITIONS};
use super::PartitionReport;
use crate::RunError;

/// An error of a message source (its client's, with its own `source()` chain).
pub type SourceError = Box<dyn std::error::Error + Send + Sync>;

/// One message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// Its topic.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its value: one record.
    pub value: &'a [u8],
    /// Its key.
    pub key: Option<&'a [u8]>,
    /// Its timestamp, ms since the epoch.
    pub timestamp: Option<i64>,
}

/// What a [`MessageSource::poll`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polled<'a> {
    /// The next message.
    Message(Message<'a>),
    /// Nothing arrived within the source's wait; more may come.
    Idle,
    /// Checkpoint before the next poll: the source is about to give partitions away.
    Checkpoint,
    /// Nothing more for this run.
    End,
}

/// A source of messages, supplied from outside the crate (see the module doc).
pub trait MessageSource {
    /// Its name in messages (`kafka events`).
    fn name(&self) -> &str;

    /// Reads each partition of `positions` from its offset there (the committed state's),
    /// now or whenever the partition is assigned later. Called once, before the first poll.
    fn seek(&mut self, positions: &[PartitionMark]) -> Result<(), SourceError>;

    /// The next message, or why there is none (waiting a short while for one).
    fn poll(&mut self) -> Result<Polled<'_>, SourceError>;

    /// The event time of the last message returned, once it was counted.
    fn observe_time(&mut self, time: u64);

    /// The time every partition has reached (the minimum over them of their latest event
    /// time, idle ones aside); `None` while not known.
    fn watermark(&mut self) -> Option<u64>;

    /// `positions` (every partition's the store holds) were just committed with the state.
    fn committed(&mut self, positions: &[PartitionMark]) {
        let _ = positions;
    }

    /// Where the partitions read stand: their next offsets and lag.
    fn partitions(&self) -> Vec<PartitionReport> {
        Vec::new()
    }
}

/// A [`MessageSource`] as the read loop sees it.
pub(super) struct MessageLines<'s> {
    inner: Box<dyn MessageSource + 's>,
    name: String,
    /// Messages read.
    read: u64,
    /// The next offset per partition, in order: after the last message returned.
    marks: Vec<PartitionMark>,
    /// The last message returned: its partition's index in `marks`, and its offset.
    last: Option<(usize, i64)>,
    max_line: usize,
}

impl<'s> MessageLines<'s> {
    /// Reads `inner`, its `max_line` the longest value taken.
    pub fn new(inner: Box<dyn MessageSource + 's>, max_line: usize) -> MessageLines<'s> {
        MessageLines {
            name: inner.name().to_string(),
            inner,
            read: 0,
            marks: Vec::new(),
            last: None,
            max_line,
        }
    }

    /// Hands the committed positions to the source, before its first poll.
    pub fn seek(&mut self, positions: &[PartitionMark]) -> Result<(), RunError> {
        self.inner
            .seek(positions)
            .map_err(|source| RunError::Source {
                name: self.name.clone(),
                source,
            })
    }
}

/// The index in `marks` (in order) of a partition, added if new (`last`'s index kept right).
fn mark_index(
    marks: &mut Vec<PartitionMark>,
    last: &mut Option<(usize, i64)>,
    topic: &str,
    partition: i32,
) -> usize {
    let found =
        marks.binary_search_by(|m| (m.topic.as_str(), m.partition).cmp(&(topic, partition)));
    match found {
        Ok(i) => i,
        Err(i) => {
            marks.insert(
                i,
                PartitionMark {
                    topic: topic.to_string(),
                    partition,
                    offset: 0,
                },
            );
            if let Some((j, _)) = last {
                if *j >= i {
                    *j += 1;
                }
            }
            i
        }
    }
}

/// A message as a line: its value, or too long.
fn line_of(m: Message<'_>, number: u64, max_line: usize) -> Next<'_> {
    let len = m.value.len();
    if len > max_line {
        return Next::Line(Line::TooLong {
            len: len as u64,
            whole: true,
            number,
            end: number,
        });
    }
    Next::Line(Line::Message {
        raw: m.value,
        key: m.key,
        timestamp: m.timestamp,
        number,
    })
}

impl LineSource for MessageLines<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn header(&mut self) -> Result<Option<Line<'_>>, RunError> {
        Ok(None)
    }

    fn resume(&mut self) -> Result<(), RunError> {
        Ok(())
    }

    fn waits_next(&self) -> bool {
        // A poll that would wait returns Idle first: the run adds what it read then.
        false
    }

    fn next_line(&mut self) -> Result<Next<'_>, RunError> {
        let polled = match self.inner.poll() {
            Ok(p) => p,
            Err(source) => {
                return Err(RunError::Source {
                    name: self.name.clone(),
                    source,
                })
            }
        };
        let m = match polled {
            Polled::Idle => return Ok(Next::Idle),
            Polled::End => return Ok(Next::End),
            Polled::Checkpoint => return Ok(Next::Checkpoint),
            Polled::Message(m) => m,
        };
        // What the run state could not keep (and the store would refuse to reopen) is refused
        // here, before anything of it is counted or committed.
        if let Some(why) = PartitionMark::refusal(m.topic, m.partition, m.offset) {
            return Err(RunError::Source {
                name: self.name.clone(),
                source: format!(
                    "a message at topic {} partition {} offset {} has {why}",
                    m.topic, m.partition, m.offset
                )
                .into(),
            });
        }
        let new = self
            .marks
            .binary_search_by(|k| (k.topic.as_str(), k.partition).cmp(&(m.topic, m.partition)))
            .is_err();
        if new && self.marks.len() >= MAX_PARTITIONS {
            return Err(RunError::Source {
                name: self.name.clone(),
                source: format!(
                    "a message at topic {} partition {} offset {}: more than {MAX_PARTITIONS} \
                     partitions",
                    m.topic, m.partition, m.offset
                )
                .into(),
            });
        }
        let i = mark_index(&mut self.marks, &mut self.last, m.topic, m.partition);
        self.marks[i].offset = m.offset.saturating_add(1);
        self.last = Some((i, m.offset));
        self.read += 1;
        Ok(line_of(m, self.read, self.max_line))
    }

    fn unread_last(&mut self) {
        if let Some((i, offset)) = self.last {
            self.marks[i].offset = offset;
        }
    }

    fn save_position(&mut self, state: &mut RunState) -> Result<(), RunError> {
        state
            .set_partitions(&self.marks)
            .map_err(|why| RunError::Source {
                name: self.name.clone(),
                source: why.into(),
            })
    }

    fn bad(&self, _number: u64, message: String) -> RunError {
        match self.last {
            Some((i, offset)) => RunError::BadMessage {
                topic: self.marks[i].topic.clone(),
                partition: self.marks[i].partition,
                offset,
                message,
            },
            None => RunError::Input {
                file: self.name.clone(),
                message,
            },
        }
    }

    fn bad_at(&self, number: u64) -> (String, u64) {
        match self.last {
            Some((i, offset)) => (
                format!(
                    "topic {} partition {} offset {offset}",
                    self.marks[i].topic, self.marks[i].partition
                ),
                0,
            ),
            None => (self.name.clone(), number),
        }
    }

    fn observed(&mut self, time: u64) {
        self.inner.observe_time(time);
    }

    fn time_bound(&mut self) -> Option<u64> {
        Some(self.inner.watermark().unwrap_or(0))
    }

    fn checkpointed(&mut self, state: &RunState) {
        self.inner.committed(&state.partitions);
    }

    fn partitions(&self) -> Vec<PartitionReport> {
        self.inner.partitions()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::rc::Rc;

    use super::*;
    use crate::config::Config;
    use crate::pipeline::{run, Checkpointed, RunOptions};
    use crate::store::{MemStore, Store};

    /// One scripted poll: a message `(partition, offset, value, key)` of topic `t`, or a
    /// signal.
    enum Step {
        Msg(i32, i64, &'static str, &'static str),
        Idle,
        Checkpoint,
    }

    /// What the source was told.
    #[derive(Default)]
    struct Heard {
        sought: Vec<PartitionMark>,
        committed: Vec<Vec<PartitionMark>>,
    }

    /// A message source of two partitions, each with its own event times: its watermark is
    /// the minimum of their latest times once both have one.
    struct Script {
        steps: VecDeque<Step>,
        value: Vec<u8>,
        key: Vec<u8>,
        last: i32,
        times: [Option<u64>; 2],
        heard: Rc<RefCell<Heard>>,
    }

    impl MessageSource for Script {
        fn name(&self) -> &str {
            "script"
        }
        fn seek(&mut self, positions: &[PartitionMark]) -> Result<(), SourceError> {
            self.heard.borrow_mut().sought = positions.to_vec();
            Ok(())
        }
        fn poll(&mut self) -> Result<Polled<'_>, SourceError> {
            Ok(match self.steps.pop_front() {
                None => Polled::End,
                Some(Step::Idle) => Polled::Idle,
                Some(Step::Checkpoint) => Polled::Checkpoint,
                Some(Step::Msg(partition, offset, value, key)) => {
                    self.value = value.as_bytes().to_vec();
                    self.key = key.as_bytes().to_vec();
                    self.last = partition;
                    Polled::Message(Message {
                        topic: "t",
                        partition,
                        offset,
                        value: &self.value,
                        key: Some(&self.key),
                        timestamp: Some(60_000 * offset),
                    })
                }
            })
        }
        fn observe_time(&mut self, time: u64) {
            let t = &mut self.times[self.last as usize];
            *t = Some(t.map_or(time, |old| old.max(time)));
        }
        fn watermark(&mut self) -> Option<u64> {
            Some(self.times[0]?.min(self.times[1]?))
        }
        fn committed(&mut self, positions: &[PartitionMark]) {
            self.heard.borrow_mut().committed.push(positions.to_vec());
        }
    }

    const CONFIG: &str = r#"
[input]
format = "csv"
time_field = "@timestamp"
[[metric]]
name = "c"
kind = "count"
key = ["@key", "k"]
bucket = "1m"
window = "1m"
[source]
kind = "kafka"
columns = ["k"]
"#;

    fn script(steps: Vec<Step>, heard: &Rc<RefCell<Heard>>) -> Box<Script> {
        Box::new(Script {
            steps: steps.into(),
            value: Vec::new(),
            key: Vec::new(),
            last: 0,
            times: [None; 2],
            heard: Rc::clone(heard),
        })
    }

    fn mark(partition: i32, offset: i64) -> PartitionMark {
        PartitionMark {
            topic: "t".into(),
            partition,
            offset,
        }
    }

    /// Partition 0 read far ahead of partition 1 (no lateness allowed): partition 1's events
    /// are not late, since buckets close at the minimum over the partitions. The positions
    /// commit with each checkpoint (one asked for by the source), the source hears of them
    /// after, and the next run seeks to them; a bad message stops the run named by topic,
    /// partition and offset, committed up to it.
    #[test]
    fn positions_commit_with_the_state_and_the_slowest_partition_holds_the_buckets_open() {
        let config = Config::from_toml(CONFIG).unwrap();
        let mut store = MemStore::default();
        let heard = Rc::new(RefCell::new(Heard::default()));
        let steps = vec![
            Step::Msg(0, 1, "a", "x"),
            Step::Msg(0, 5, "a", "x"),
            Step::Msg(0, 9, "a", "x"),
            Step::Checkpoint,
            Step::Msg(1, 2, "b", "y"),
            Step::Idle,
            Step::Msg(1, 3, "b", "y"),
        ];
        let mut checkpoints = Vec::new();
        let mut on_checkpoint = |c: &Checkpointed| checkpoints.push(*c);
        let report = run(
            &config,
            &mut store,
            RunOptions {
                messages: Some(script(steps, &heard)),
                on_checkpoint: Some(&mut on_checkpoint),
                ..RunOptions::default()
            },
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(report.records, 5);
        // Told of every commit, in order: the new store's first (empty), the one the source
        // asked for after three records (key "a" open), and the last.
        assert_eq!(checkpoints.len() as u64, report.commits, "{checkpoints:?}");
        let records: Vec<u64> = checkpoints.iter().map(|c| c.records).collect();
        assert_eq!(records.first(), Some(&0));
        assert!(records.contains(&3), "{records:?}");
        assert_eq!(records.last(), Some(&5));
        assert!(records.windows(2).all(|w| w[0] <= w[1]), "{records:?}");
        assert_eq!(checkpoints[0].open_bytes, 0);
        assert!(checkpoints
            .iter()
            .any(|c| c.records == 3 && c.open_bytes > 0));
        // Without the bound, partition 1's events would be too late (dropped).
        assert_eq!(report.metrics[0].counters.dropped, 0);
        assert_eq!(report.metrics[0].counters.late, 2);
        let state = RunState::from_bytes(&store.meta().unwrap().unwrap().state).unwrap();
        assert_eq!(state.partitions, [mark(0, 10), mark(1, 4)]);
        {
            let heard = heard.borrow();
            assert!(heard.sought.is_empty());
            assert!(
                heard.committed.contains(&vec![mark(0, 10)]),
                "the checkpoint the source asked for: {:?}",
                heard.committed
            );
            assert_eq!(heard.committed.last(), Some(&state.partitions));
        }

        let heard = Rc::new(RefCell::new(Heard::default()));
        let steps = vec![Step::Msg(1, 4, "c", "y"), Step::Msg(1, 5, "c,d", "y")];
        let err = run(
            &config,
            &mut store,
            RunOptions {
                messages: Some(script(steps, &heard)),
                ..RunOptions::default()
            },
            &mut |_| {},
        )
        .unwrap_err();
        assert_eq!(heard.borrow().sought, [mark(0, 10), mark(1, 4)]);
        assert!(
            matches!(&err, RunError::BadMessage { topic, partition: 1, offset: 5, .. } if topic == "t"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("topic t partition 1 offset 5: "),
            "{err}"
        );
        let state = RunState::from_bytes(&store.meta().unwrap().unwrap().state).unwrap();
        assert_eq!(state.records, 6);
        assert_eq!(state.partitions, [mark(0, 10), mark(1, 5)]);
    }

    /// A source reporting a negative offset is refused where the message arrives, named by
    /// source, topic, partition and offset; nothing of it is committed, and the store reopens
    /// for the next run.
    #[test]
    fn a_negative_offset_is_refused_and_the_store_still_reopens() {
        let config = Config::from_toml(CONFIG).unwrap();
        let mut store = MemStore::default();
        let heard = Rc::new(RefCell::new(Heard::default()));
        let steps = vec![
            Step::Msg(0, 1, "a", "x"),
            Step::Checkpoint,
            Step::Msg(0, -5, "a", "x"),
        ];
        let err = run(
            &config,
            &mut store,
            RunOptions {
                messages: Some(script(steps, &heard)),
                ..RunOptions::default()
            },
            &mut |_| {},
        )
        .unwrap_err();
        assert!(
            matches!(&err, RunError::Source { name, .. } if name == "script"),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with("script: ")
                && text.contains("topic t partition 0 offset -5")
                && text.contains("negative offset"),
            "{text}"
        );
        if let Some(meta) = store.meta().unwrap() {
            let state = RunState::from_bytes(&meta.state).unwrap();
            assert!(state.partitions.iter().all(|m| m.offset >= 0), "{state:?}");
        }

        let heard = Rc::new(RefCell::new(Heard::default()));
        let report = run(
            &config,
            &mut store,
            RunOptions {
                messages: Some(script(vec![Step::Msg(0, 2, "b", "y")], &heard)),
                ..RunOptions::default()
            },
            &mut |_| {},
        )
        .unwrap();
        assert!(report.records >= 1);
        let state = RunState::from_bytes(&store.meta().unwrap().unwrap().state).unwrap();
        assert_eq!(state.partitions, [mark(0, 3)]);
    }
}
