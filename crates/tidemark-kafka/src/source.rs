//! The consumer: [`KafkaSource`] and the [`Event`]s its [`poll`](KafkaSource::poll) returns.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use rdkafka::config::FromClientConfigAndContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, RebalanceProtocol};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message as _;
use rdkafka::{Offset, TopicPartitionList};

use crate::context::{Context, Rebalanced};
use crate::{Config, Error, Message, Notice, Partition, PartitionClock, Positions};

/// What [`KafkaSource::poll`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The next message of an assigned partition.
    Message(Message),
    /// Nothing arrived within the timeout.
    Idle,
    /// The group gave these partitions to this consumer. They are read from the next `poll`
    /// on, each from the caller's stored position (given to
    /// [`seek_to`](KafkaSource::seek_to) before that poll, here or earlier), else the group's
    /// committed offset, else per `auto.offset.reset`. A caller whose positions live in a
    /// store shared with other consumers reads them for these partitions and hands them to
    /// `seek_to` now.
    Assigned(Vec<Partition>),
    /// The group takes these partitions away at the next `poll`. No message of them is
    /// delivered after this event: the caller checkpoints them now (state and positions, then
    /// [`commit`](KafkaSource::commit)), and the next consumer starts where that checkpoint
    /// says.
    Revoked(Vec<Partition>),
    /// Under [`Config::until_end`]: every assigned partition is read to the end it had when
    /// the source first saw it. Every later poll returns `End` too.
    End,
    /// Something for the caller to report; reading goes on.
    Notice(Notice),
}

/// Where one assigned partition stands.
#[derive(Clone, Copy, Debug, Default)]
struct Lane {
    /// The next offset to deliver, when known: after a delivered message, or the caller's
    /// position the partition was assigned at.
    next: Option<i64>,
    /// Under `until_end`: the end offset, frozen the first time it is seen.
    end: Option<i64>,
    /// Read to `end`.
    finished: bool,
    /// A message was delivered since the partition was assigned.
    delivered: bool,
    /// An end-of-partition event with this lane's number came (since the assignment or the
    /// last seek) that could not be told apart from another topic's: the client's statistics,
    /// which name the topic, settle it.
    eof_seen: bool,
}

/// One assigned partition's lag, as [`KafkaSource::lag`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lag {
    /// The partition.
    pub partition: Partition,
    /// The next offset to deliver, when known.
    pub position: Option<i64>,
    /// The partition's high watermark at the client's last fetch, when known.
    pub high_watermark: Option<i64>,
}

impl Lag {
    /// Messages between the position and the high watermark, when both are known.
    pub fn messages(&self) -> Option<i64> {
        match (self.position, self.high_watermark) {
            (Some(p), Some(h)) => Some(h.saturating_sub(p).max(0)),
            _ => None,
        }
    }
}

/// A rebalance returned to the caller and carried out at the next poll.
#[derive(Debug)]
enum Deferred {
    Assign(Vec<Partition>),
    Revoke(Vec<Partition>),
}

/// A synchronous Kafka consumer whose positions the caller owns (see the [crate docs](crate)).
pub struct KafkaSource {
    consumer: BaseConsumer<Context>,
    config: Config,
    /// The caller's stored positions: given to `seek_to`, and those it committed.
    stored: Positions,
    lanes: BTreeMap<Partition, Lane>,
    deferred: VecDeque<Deferred>,
    ready: VecDeque<Event>,
    clock: PartitionClock,
    ended: bool,
    /// The partition number of an end-of-partition event not yet booked.
    eof: Option<i32>,
    /// A recent reading of the clock, for the partitions' activity: read when a poll waits
    /// and every [`CLOCK_EVERY`] messages, not at each (a reading was a tenth of a run's CPU).
    now: Instant,
    /// Messages delivered since `now` was read.
    since_now: u32,
    /// The topics' partitions, as the brokers listed them at connect.
    partitions: Vec<Partition>,
}

/// How many messages may share one reading of the clock (at a million a second, a
/// millisecond's worth: nothing beside an idle timeout of seconds).
const CLOCK_EVERY: u32 = 1024;

/// The pause before the `n`th metadata retry (from 0): 250 ms doubling to 5 s.
fn backoff(n: u32) -> Duration {
    Duration::from_millis(250u64.saturating_mul(1u64 << n.min(5))).min(Duration::from_secs(5))
}

impl KafkaSource {
    /// Connects to the brokers, checks that every topic exists, and joins the consumer group.
    ///
    /// While no broker answers it retries with backoff (250 ms doubling to 5 s) until
    /// [`Config::connect_timeout`], then fails with [`Error::Unreachable`] naming the brokers.
    /// A topic the brokers do not have is [`Error::TopicMissing`]. Partitions are assigned
    /// later, during [`poll`](KafkaSource::poll).
    pub fn connect(config: Config) -> Result<KafkaSource, Error> {
        KafkaSource::connect_with(config, |_| {})
    }

    /// As [`connect`](KafkaSource::connect), telling `on_notice` of each failed attempt
    /// ([`Notice::Waiting`]), for the caller to say on stderr that it waits.
    pub fn connect_with(
        config: Config,
        mut on_notice: impl FnMut(&Notice),
    ) -> Result<KafkaSource, Error> {
        let client = config.client_config()?;
        let context = Context::new(
            config
                .effective("isolation.level")
                .is_none_or(|v| v.eq_ignore_ascii_case("read_committed")),
        );
        let consumer = BaseConsumer::from_config_and_context(&client, context).map_err(
            |error| match error {
                KafkaError::ClientConfig(_, reason, key, value) => {
                    Error::Property { key, value, reason }
                }
                source => Error::Client {
                    during: "creating the consumer",
                    source,
                },
            },
        )?;

        let started = Instant::now();
        let mut attempts = 0u32;
        let metadata = loop {
            attempts += 1;
            let left = config.connect_timeout.saturating_sub(started.elapsed());
            // Each attempt waits 1 s, then 2 s, then 4 s (never past the timeout), so that
            // the caller hears of a missing broker early.
            let wait = Duration::from_secs(1u64 << (attempts - 1).min(2))
                .min(config.request_timeout)
                .min(left)
                .max(Duration::from_millis(100));
            match consumer.fetch_metadata(None, wait) {
                Ok(metadata) if !metadata.brokers().is_empty() => break metadata,
                Ok(_) => {}
                Err(source) => {
                    let waited = started.elapsed();
                    if waited >= config.connect_timeout {
                        return Err(Error::Unreachable {
                            brokers: config.brokers.clone(),
                            waited,
                            attempts,
                            source,
                        });
                    }
                    let retry_in =
                        backoff(attempts - 1).min(config.connect_timeout.saturating_sub(waited));
                    on_notice(&Notice::Waiting {
                        brokers: config.brokers.clone(),
                        attempt: attempts,
                        waited,
                        retry_in,
                        cause: source.to_string(),
                    });
                    std::thread::sleep(retry_in);
                }
            }
        };
        let mut partitions = Vec::new();
        for topic in &config.topics {
            let found = metadata
                .topics()
                .iter()
                .find(|t| t.name() == topic.as_str())
                .filter(|t| t.error().is_none() && !t.partitions().is_empty());
            let Some(t) = found else {
                return Err(Error::TopicMissing {
                    topic: topic.clone(),
                    brokers: config.brokers.clone(),
                });
            };
            partitions.extend(
                t.partitions()
                    .iter()
                    .map(|p| Partition::new(t.name(), p.id())),
            );
        }
        // A topic named twice is listed once.
        partitions.sort();
        partitions.dedup();
        let topics: Vec<&str> = config.topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topics)
            .map_err(|source| Error::Client {
                during: "subscribing to the topics",
                source,
            })?;
        let clock = PartitionClock::new(config.idle_timeout);
        Ok(KafkaSource {
            consumer,
            config,
            stored: Positions::new(),
            lanes: BTreeMap::new(),
            deferred: VecDeque::new(),
            ready: VecDeque::new(),
            clock,
            ended: false,
            eof: None,
            now: Instant::now(),
            since_now: 0,
            partitions,
        })
    }

    /// Hands the source the caller's stored positions (from its checkpoint). They take
    /// precedence over the group's committed offsets whenever a partition is assigned, now or
    /// at a later rebalance. A partition assigned already is moved there at once.
    pub fn seek_to(&mut self, positions: &Positions) -> Result<(), Error> {
        for (partition, &offset) in positions {
            if offset < 0 {
                return Err(Error::BadPosition {
                    partition: partition.clone(),
                    offset,
                });
            }
        }
        for (partition, &offset) in positions {
            self.stored.insert(partition.clone(), offset);
            // A partition read to its end was paused: moved back, it is read again.
            let paused = self
                .lanes
                .get(partition)
                .is_some_and(|l| l.finished && l.next != Some(offset));
            if paused {
                let mut list = TopicPartitionList::new();
                list.add_partition(&partition.topic, partition.partition);
                self.resume(&list, "resuming a partition moved back from its end")?;
            }
            if let Some(lane) = self.lanes.get_mut(partition) {
                if lane.next != Some(offset) {
                    self.consumer
                        .seek(
                            &partition.topic,
                            partition.partition,
                            Offset::Offset(offset),
                            self.config.request_timeout,
                        )
                        .map_err(|source| Error::Client {
                            during: "seeking to a stored position",
                            source,
                        })?;
                    lane.next = Some(offset);
                    lane.finished = false;
                    lane.eof_seen = false;
                    self.ended = false;
                }
            }
        }
        Ok(())
    }

    /// Waits up to `timeout` for the next [`Event`].
    ///
    /// The client's faults that it retries by itself come back as [`Event::Notice`]; only a
    /// fatal client error, or a partition that `auto.offset.reset = error` cannot start, is an
    /// `Err`.
    pub fn poll(&mut self, timeout: Duration) -> Result<Event, Error> {
        // What the caller was told at the last poll takes effect now: it has acted on it.
        self.apply_deferred()?;
        // Set once the client had nothing at once: from then on the poll waits, in slices,
        // until this deadline. A message ready at once is taken without reading the clock.
        let mut deadline: Option<Instant> = None;
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(event);
            }
            if let Some(number) = self.eof.take() {
                self.on_eof(number);
            }
            // The callbacks' records, when they say there are any (what is taken leaves the
            // mark set, for the rest).
            if self.consumer.context().take_pending() {
                let context = self.consumer.context();
                if let Some(rebalance) = context.next_rebalance() {
                    context.mark_pending();
                    self.on_rebalance(rebalance);
                    continue;
                }
                if let Some(notice) = context.next_notice() {
                    context.mark_pending();
                    return Ok(Event::Notice(notice));
                }
                if let Some(detail) = context.take_no_start() {
                    context.mark_pending();
                    return Err(Error::NoStartPosition { detail });
                }
            }
            // Whether every partition is read to its end can change only when the client has
            // nothing ready (or a message reached an end: then `on_message` says so).
            let waiting = deadline.is_some() || self.since_now == 0;
            if self.config.until_end && waiting && self.check_end() {
                return Ok(Event::End);
            }
            let slice = match deadline {
                None => Duration::ZERO,
                Some(deadline) => {
                    let now = self.tick();
                    if now >= deadline {
                        return Ok(Event::Idle);
                    }
                    // Short slices, so that rebalances and notices recorded by the callbacks
                    // are returned promptly and `End` is seen within a statistics interval.
                    (deadline - now).min(Duration::from_millis(100))
                }
            };
            let polled = match self.consumer.poll(slice) {
                None => {
                    if deadline.is_none() {
                        deadline = Some(self.tick() + timeout);
                    }
                    continue;
                }
                Some(Ok(message)) => Ok(Message {
                    partition: self.partition_named(message.topic(), message.partition()),
                    offset: message.offset(),
                    key: message.key().map(<[u8]>::to_vec),
                    value: message.payload().map(<[u8]>::to_vec).unwrap_or_default(),
                    timestamp: message.timestamp().to_millis(),
                }),
                Some(Err(error)) => Err(error),
            };
            match polled {
                Ok(message) => {
                    if let Some(message) = self.on_message(message)? {
                        return Ok(Event::Message(message));
                    }
                }
                Err(KafkaError::PartitionEOF(number)) => self.eof = Some(number),
                Err(KafkaError::MessageConsumptionFatal(code)) => {
                    return Err(Error::Client {
                        during: "reading messages",
                        source: KafkaError::MessageConsumptionFatal(code),
                    })
                }
                Err(KafkaError::MessageConsumption(RDKafkaErrorCode::AutoOffsetReset)) => {
                    let detail = self
                        .consumer
                        .context()
                        .take_no_start()
                        .unwrap_or_else(|| RDKafkaErrorCode::AutoOffsetReset.to_string());
                    return Err(Error::NoStartPosition { detail });
                }
                // Others were recorded as notices by the context, with librdkafka's reason.
                Err(_) => {}
            }
            // Something other than a message to return: from now on the poll is bounded by
            // its timeout.
            if deadline.is_none() {
                deadline = Some(self.tick() + timeout);
            }
        }
    }

    /// Writes `positions` as the group's committed offsets, for monitoring and as the start
    /// of a partition for which no caller has a stored position. Call it after the checkpoint
    /// that stored them: a commit ahead of the checkpoint would make a consumer without the
    /// checkpoint skip messages. Only partitions assigned to this consumer are committed.
    ///
    /// The commit is sent without waiting for the broker: a refusal comes back as an
    /// [`Event::Notice`] at a later poll, and a commit that cannot be sent at all as the
    /// returned notice. Either way the checkpoint is unaffected and the next commit carries
    /// newer positions.
    #[must_use = "a failed commit returns a notice to report"]
    pub fn commit(&mut self, positions: &Positions) -> Option<Notice> {
        let mut list = TopicPartitionList::new();
        for (partition, &offset) in positions {
            if offset < 0 {
                continue;
            }
            self.stored.insert(partition.clone(), offset);
            if self.lanes.contains_key(partition) {
                if let Err(error) = list.add_partition_offset(
                    &partition.topic,
                    partition.partition,
                    Offset::Offset(offset),
                ) {
                    return Some(Notice::CommitFailed {
                        message: error.to_string(),
                    });
                }
            }
        }
        if list.count() == 0 {
            return None;
        }
        // Asynchronous: the broker may be away, and the pipeline must not wait for a
        // monitoring write (its outcome comes back as a notice at a later poll).
        match self.consumer.commit(&list, CommitMode::Async) {
            Ok(()) => None,
            Err(error) => Some(Notice::CommitFailed {
                message: error.to_string(),
            }),
        }
    }

    /// The partitions assigned to this consumer now.
    pub fn assignment(&self) -> impl Iterator<Item = &Partition> {
        self.lanes.keys()
    }

    /// Where each assigned partition is: the next offset to deliver, when known.
    pub fn positions(&self) -> Positions {
        self.lanes
            .iter()
            .filter_map(|(p, lane)| self.position_of(p, lane).map(|o| (p.clone(), o)))
            .collect()
    }

    /// Each assigned partition's lag: its high watermark at the client's last fetch (from the
    /// client's statistics, refreshed every `statistics.interval.ms`) minus the next offset to
    /// deliver.
    pub fn lag(&self) -> Vec<Lag> {
        self.lanes
            .iter()
            .map(|(partition, lane)| Lag {
                partition: partition.clone(),
                position: self.position_of(partition, lane),
                high_watermark: self.consumer.context().seen(partition).end,
            })
            .collect()
    }

    /// Reports the event time the caller read from a message of `partition` to the source's
    /// [`PartitionClock`].
    pub fn observe_time(&mut self, partition: &Partition, time: u64) {
        self.clock.record(partition, Some(time), self.now);
    }

    /// The watermark over the assigned partitions as of now (see [`PartitionClock`]).
    pub fn watermark(&mut self) -> Option<u64> {
        self.clock.watermark(Instant::now())
    }

    /// The source's clock: per-partition event time and idleness.
    pub fn clock(&self) -> &PartitionClock {
        &self.clock
    }

    /// The topics' partitions, as the brokers listed them when the source connected.
    pub fn topic_partitions(&self) -> &[Partition] {
        &self.partitions
    }

    /// The config the source runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Reads the clock.
    fn tick(&mut self) -> Instant {
        self.now = Instant::now();
        self.since_now = 0;
        self.now
    }

    /// The partition `number` of `topic`: an assigned one's own name shared, not allocated
    /// again for each message.
    fn partition_named(&self, topic: &str, number: i32) -> Partition {
        self.lanes
            .keys()
            .find(|p| p.partition == number && &*p.topic == topic)
            .cloned()
            .unwrap_or_else(|| Partition::new(topic, number))
    }

    fn position_of(&self, partition: &Partition, lane: &Lane) -> Option<i64> {
        lane.next
            .or_else(|| self.consumer.context().seen(partition).app)
    }

    /// An end-of-partition event: the client delivered everything of a partition numbered
    /// `number` up to its current end (which is at or past the end frozen at start), control
    /// records included. rdkafka names only the number, not the topic. When one assigned
    /// partition has that number, the event is its own and finishes it, whether or not it
    /// delivered messages (a transaction's commit marker takes the last offset, so the last
    /// message's next offset stays below the end). When several have it, the event finishes
    /// each unfinished one whose position has reached its end, or that has no message fetched
    /// and an end of 0; the others are settled by the client's statistics, whose end signal
    /// names the topic (see `check_end`).
    fn on_eof(&mut self, number: i32) {
        if !self.config.until_end {
            return;
        }
        let same: Vec<Partition> = self
            .lanes
            .keys()
            .filter(|p| p.partition == number)
            .cloned()
            .collect();
        let positions = self.consumer.position().ok();
        let mut to_finish = Vec::new();
        for partition in &same {
            let Some(lane) = self.lanes.get_mut(partition) else {
                continue;
            };
            if lane.finished {
                continue;
            }
            if same.len() == 1 {
                to_finish.push(partition.clone());
                continue;
            }
            lane.eof_seen = true;
            let seen = self.consumer.context().seen(partition);
            let client = positions.as_ref().and_then(|list| {
                match list
                    .find_partition(&partition.topic, partition.partition)?
                    .offset()
                {
                    Offset::Offset(at) if at >= 0 => Some(at),
                    _ => None,
                }
            });
            // The statistics' position only once this assignment delivered: one from before
            // a seek could be ahead of it.
            let app = seen.app.filter(|_| lane.delivered);
            let position = [lane.next, client, app].into_iter().flatten().max();
            let end = lane.end.or(seen.end);
            let reached = position.is_some_and(|at| end.is_some_and(|end| at >= end));
            // No message fetched, of a partition known to have none to read: one whose end
            // is not known yet, or that may have messages not fetched yet, is left to the
            // statistics rather than risk finishing it unread.
            let nothing_fetched = !lane.delivered && position.is_none() && end == Some(0);
            if reached || nothing_fetched {
                to_finish.push(partition.clone());
            }
        }
        for partition in &to_finish {
            if let Some(lane) = self.lanes.get_mut(partition) {
                lane.finished = true;
            }
            self.clock.finish(partition);
            // A pause failing only lets later messages be fetched, to be dropped at arrival.
            drop(self.pause(partition));
        }
    }

    fn on_rebalance(&mut self, rebalance: Rebalanced) {
        match rebalance {
            Rebalanced::Assign(partitions) => {
                self.ready.push_back(Event::Assigned(partitions.clone()));
                self.deferred.push_back(Deferred::Assign(partitions));
            }
            Rebalanced::Revoke { partitions, lost } => {
                if lost {
                    self.ready.push_back(Event::Notice(Notice::Broker {
                        message: "the consumer group's session expired: its partitions were \
                                  already given to other members"
                            .into(),
                    }));
                }
                self.ready.push_back(Event::Revoked(partitions.clone()));
                self.deferred.push_back(Deferred::Revoke(partitions));
            }
        }
    }

    fn apply_deferred(&mut self) -> Result<(), Error> {
        // Asking for the protocol is a round trip to librdkafka's main thread: only when there
        // is a rebalance to carry out, never once a poll (it was most of a run's CPU).
        if self.deferred.is_empty() {
            return Ok(());
        }
        let cooperative = matches!(
            self.consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        while let Some(deferred) = self.deferred.pop_front() {
            match deferred {
                Deferred::Assign(partitions) => {
                    let mut list = TopicPartitionList::new();
                    let now = Instant::now();
                    for p in &partitions {
                        let stored = self.stored.get(p).copied();
                        let offset = stored.map_or(Offset::Stored, Offset::Offset);
                        list.add_partition_offset(&p.topic, p.partition, offset)
                            .map_err(|source| Error::Client {
                                during: "assigning partitions",
                                source,
                            })?;
                        self.lanes.insert(
                            p.clone(),
                            Lane {
                                next: stored,
                                ..Lane::default()
                            },
                        );
                        self.clock.assign(p.clone(), now);
                    }
                    self.ended = false;
                    // librdkafka keeps an application's pause through unassign and assign: a
                    // partition read to its end and paused under an earlier assignment, given
                    // back at a position before that end (its run stopped short of it), would
                    // never be fetched again and `until_end` never reached.
                    self.resume(&list, "resuming the partitions assigned")?;
                    let done = if cooperative {
                        self.consumer.incremental_assign(&list)
                    } else {
                        self.consumer.assign(&list)
                    };
                    done.map_err(|source| Error::Client {
                        during: "assigning partitions",
                        source,
                    })?;
                }
                Deferred::Revoke(partitions) => {
                    let done = if cooperative {
                        let mut list = TopicPartitionList::new();
                        for p in &partitions {
                            list.add_partition(&p.topic, p.partition);
                        }
                        self.consumer.incremental_unassign(&list)
                    } else {
                        self.consumer.unassign()
                    };
                    for p in &partitions {
                        self.lanes.remove(p);
                        self.clock.revoke(p);
                    }
                    if !cooperative {
                        for p in std::mem::take(&mut self.lanes).into_keys() {
                            self.clock.revoke(&p);
                        }
                    }
                    done.map_err(|source| Error::Client {
                        during: "giving partitions back",
                        source,
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Books a message; `None` when it lies past its partition's end under `until_end`, or
    /// belongs to a partition no longer assigned.
    fn on_message(&mut self, message: Message) -> Result<Option<Message>, Error> {
        let until_end = self.config.until_end;
        let Some(lane) = self.lanes.get_mut(&message.partition) else {
            return Ok(None);
        };
        // The client never delivers a message twice, nor one before a seek's position: a
        // message below the next position is the client's reset after the broker lost what
        // the position counted.
        if let Some(expected) = lane.next.filter(|&next| message.offset < next) {
            return Err(Error::Rewound {
                partition: message.partition,
                expected,
                offset: message.offset,
            });
        }
        if until_end {
            if lane.end.is_none() {
                lane.end = self.consumer.context().seen(&message.partition).end;
            }
            if lane.finished || lane.end.is_some_and(|end| message.offset >= end) {
                // Past the end seen at start.
                if !lane.finished {
                    lane.finished = true;
                    self.clock.finish(&message.partition);
                }
                self.pause(&message.partition)?;
                return Ok(None);
            }
        }
        lane.next = Some(message.next_offset());
        lane.delivered = true;
        self.since_now += 1;
        if self.since_now >= CLOCK_EVERY {
            self.now = Instant::now();
            self.since_now = 0;
        }
        self.clock.record(&message.partition, None, self.now);
        if until_end && lane.end.is_some_and(|end| message.next_offset() >= end) {
            lane.finished = true;
            self.clock.finish(&message.partition);
            self.pause(&message.partition)?;
        }
        Ok(Some(message))
    }

    fn resume(&self, list: &TopicPartitionList, during: &'static str) -> Result<(), Error> {
        self.consumer
            .resume(list)
            .map_err(|source| Error::Client { during, source })
    }

    fn pause(&self, partition: &Partition) -> Result<(), Error> {
        let mut list = TopicPartitionList::new();
        list.add_partition(&partition.topic, partition.partition);
        self.consumer.pause(&list).map_err(|source| Error::Client {
            during: "pausing a partition read to its end",
            source,
        })
    }

    /// Under `until_end`: learns the end offsets the statistics brought, marks partitions read
    /// to them, and tells whether every assigned partition is.
    fn check_end(&mut self) -> bool {
        if self.ended {
            return true;
        }
        if self.lanes.is_empty() || !self.deferred.is_empty() {
            return false;
        }
        let mut to_pause = Vec::new();
        for (partition, lane) in &mut self.lanes {
            if lane.finished {
                continue;
            }
            let seen = self.consumer.context().seen(partition);
            if lane.end.is_none() {
                lane.end = seen.end;
            }
            let Some(end) = lane.end else { continue };
            // The client's position counts control records (a transaction's commit marker)
            // that no delivered message does; an end-of-partition event that could not be
            // told apart is settled by the statistics' per-partition end signal.
            let position = lane.next.max(seen.app.filter(|_| lane.delivered));
            let eof = lane.eof_seen && seen.eof.is_some_and(|at| at >= end);
            if position.is_some_and(|at| at >= end) || eof {
                lane.finished = true;
                self.clock.finish(partition);
                to_pause.push(partition.clone());
            }
        }
        for partition in &to_pause {
            // A pause failing only lets later messages be fetched, to be dropped at arrival.
            drop(self.pause(partition));
        }
        self.ended = self.lanes.values().all(|lane| lane.finished);
        self.ended
    }
}

impl Drop for KafkaSource {
    fn drop(&mut self) {
        // Leaving the group: rebalances from now on are carried out by the context, and a
        // revocation the caller was told of is completed.
        self.consumer.context().close();
        if !self.deferred.is_empty() {
            self.deferred.clear();
            if let Err(error) = self.consumer.unassign() {
                self.consumer.context().notice(Notice::Broker {
                    message: format!("giving partitions back while closing: {error}"),
                });
            }
        }
    }
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("config", &self.config)
            .field("assignment", &self.lanes.keys().collect::<Vec<_>>())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}
