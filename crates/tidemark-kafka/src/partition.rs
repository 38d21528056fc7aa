//! Names for what the consumer reads: a partition of a topic, a message, and the positions a
//! caller stores in its checkpoint.

use core::fmt;
use std::collections::BTreeMap;
use std::sync::Arc;

/// One partition of one topic: the unit that Kafka orders, assigns and offsets.
///
/// Displays as `topic[partition]`, the form every message of this crate uses.
///
/// ```
/// use tidemark_kafka::Partition;
///
/// let p = Partition::new("events", 3);
/// assert_eq!(p.to_string(), "events[3]");
/// assert!(Partition::new("events", 2) < p);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Partition {
    /// The topic's name (shared: every message of a partition points at one copy).
    pub topic: Arc<str>,
    /// The partition's number, from 0.
    pub partition: i32,
}

impl Partition {
    /// The partition `partition` of `topic`.
    pub fn new(topic: impl Into<Arc<str>>, partition: i32) -> Partition {
        Partition {
            topic: topic.into(),
            partition,
        }
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.topic, self.partition)
    }
}

/// The next offset to read, per partition: what a caller stores in its checkpoint, in the same
/// transaction as the state those messages built, and hands back to
/// [`KafkaSource::seek_to`](crate::KafkaSource::seek_to) on restart and on each assignment.
///
/// A position is the offset of the last message delivered plus one (Kafka's convention for
/// committed offsets), so a stored position is where reading resumes, never a message read
/// twice.
pub type Positions = BTreeMap<Partition, i64>;

/// One message, copied out of the client's buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Where it was read.
    pub partition: Partition,
    /// Its offset in the partition.
    pub offset: i64,
    /// The message key, if the producer set one.
    pub key: Option<Vec<u8>>,
    /// The message value (empty for a null value, a tombstone).
    pub value: Vec<u8>,
    /// The message timestamp in milliseconds since the Unix epoch, as the broker returns it
    /// (the producer's create time, or the broker's append time if the topic says so); `None`
    /// if the broker has none.
    pub timestamp: Option<i64>,
}

impl Message {
    /// The position after this message: what a checkpoint taken right after it stores.
    pub fn next_offset(&self) -> i64 {
        self.offset.saturating_add(1)
    }

    /// Where the message is, for error messages: `topic[partition] offset N`.
    pub fn location(&self) -> String {
        format!("{} offset {}", self.partition, self.offset)
    }
}
