//! [`KafkaMessages`]: a [`KafkaSource`] as the pipeline's message source, so that
//! `tidemark run` reads a topic with the same loop, checkpoints and exactly-once resume as a
//! file.
//!
//! The pipeline owns the positions: it hands the committed ones to
//! [`MessageSource::seek`] (they go to [`KafkaSource::seek_to`], and so win over the group's
//! committed offsets whenever a partition is assigned); a revocation ([`Event::Revoked`])
//! becomes [`Polled::Checkpoint`], so the run commits before the partitions go; after every
//! checkpoint the committed positions are written as the group's offsets
//! ([`KafkaSource::commit`]), for monitoring only; the records' event times feed the
//! source's [`crate::PartitionClock`], whose watermark bounds when buckets close. Notices
//! (a broker lost, a commit refused) go to the caller's `on_notice` and reading goes on.

use std::time::Duration;

use tidemark_stream::pipeline::{
    Message as StreamMessage, MessageSource, PartitionMark, PartitionReport, Polled, SourceError,
};

use crate::{Event, KafkaSource, Message, Notice, Partition, Positions};

/// How long one poll waits for a message before the run hears it is idle (and checks its
/// stop flag).
pub const POLL_WAIT: Duration = Duration::from_millis(200);

/// What [`KafkaMessages::on_committed`] calls.
type OnCommitted<'n> = Box<dyn FnMut(&[PartitionReport]) + 'n>;

/// A [`KafkaSource`] read by the pipeline (see the module doc).
pub struct KafkaMessages<'n> {
    source: KafkaSource,
    name: String,
    /// The last message returned (its bytes are lent to the run).
    current: Option<Message>,
    on_notice: Box<dyn FnMut(&Notice) + 'n>,
    /// Told each partition's standing after every checkpoint (for a live server's lag).
    on_committed: Option<OnCommitted<'n>>,
}

impl<'n> KafkaMessages<'n> {
    /// Reads `source`; its notices go to `on_notice`.
    pub fn new(source: KafkaSource, on_notice: impl FnMut(&Notice) + 'n) -> KafkaMessages<'n> {
        let name = format!("kafka {}", source.config().topics.join(","));
        KafkaMessages {
            source,
            name,
            current: None,
            on_notice: Box::new(on_notice),
            on_committed: None,
        }
    }

    /// Calls `f` after every checkpoint with each assigned partition's position and lag (as
    /// [`MessageSource::partitions`] reports them).
    pub fn on_committed(mut self, f: impl FnMut(&[PartitionReport]) + 'n) -> Self {
        self.on_committed = Some(Box::new(f));
        self
    }

    /// The consumer.
    pub fn source(&self) -> &KafkaSource {
        &self.source
    }
}

fn positions_of(marks: &[PartitionMark]) -> Positions {
    marks
        .iter()
        .map(|m| (Partition::new(m.topic.as_str(), m.partition), m.offset))
        .collect()
}

impl MessageSource for KafkaMessages<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn seek(&mut self, positions: &[PartitionMark]) -> Result<(), SourceError> {
        self.source.seek_to(&positions_of(positions))?;
        Ok(())
    }

    fn poll(&mut self) -> Result<Polled<'_>, SourceError> {
        loop {
            match self.source.poll(POLL_WAIT)? {
                Event::Message(m) => {
                    let m = self.current.insert(m);
                    return Ok(Polled::Message(StreamMessage {
                        topic: &m.partition.topic,
                        partition: m.partition.partition,
                        offset: m.offset,
                        value: &m.value,
                        key: m.key.as_deref(),
                        timestamp: m.timestamp,
                    }));
                }
                Event::Idle => return Ok(Polled::Idle),
                Event::Revoked(_) => return Ok(Polled::Checkpoint),
                Event::End => return Ok(Polled::End),
                Event::Notice(notice) => {
                    (self.on_notice)(&notice);
                    return Ok(Polled::Idle);
                }
                // Assigned partitions start at the positions given to `seek`.
                _ => {}
            }
        }
    }

    fn observe_time(&mut self, time: u64) {
        if let Some(m) = &self.current {
            self.source.observe_time(&m.partition, time);
        }
    }

    fn watermark(&mut self) -> Option<u64> {
        self.source.watermark()
    }

    fn committed(&mut self, positions: &[PartitionMark]) {
        if let Some(notice) = self.source.commit(&positions_of(positions)) {
            (self.on_notice)(&notice);
        }
        if self.on_committed.is_some() {
            let reports = self.partitions();
            if let Some(f) = &mut self.on_committed {
                f(&reports);
            }
        }
    }

    fn partitions(&self) -> Vec<PartitionReport> {
        self.source
            .lag()
            .into_iter()
            .map(|lag| PartitionReport {
                topic: lag.partition.topic.to_string(),
                partition: lag.partition.partition,
                position: lag.position,
                lag: lag.messages(),
            })
            .collect()
    }
}
