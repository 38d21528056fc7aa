//! What can stop the consumer ([`Error`]), and what it reports while it goes on ([`Notice`]).

use core::fmt;
use std::time::Duration;

use rdkafka::error::KafkaError;

use crate::Partition;

/// Why the consumer cannot start or go on. Each variant carries its evidence; those caused by
/// the client return its error from `source()`.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The config lacks something the consumer needs.
    Config {
        /// The field (`brokers`, `topics`, `group`).
        field: &'static str,
        /// What it must be.
        expected: &'static str,
    },
    /// A client property that librdkafka refuses, or one this crate sets itself.
    Property {
        /// The property name.
        key: String,
        /// The value given.
        value: String,
        /// Why it cannot be used.
        reason: String,
    },
    /// No broker answered within the connect timeout.
    Unreachable {
        /// The bootstrap brokers tried.
        brokers: String,
        /// How long the consumer tried.
        waited: Duration,
        /// How many metadata requests it made.
        attempts: u32,
        /// The last request's error.
        source: KafkaError,
    },
    /// A topic the brokers do not have.
    TopicMissing {
        /// The topic.
        topic: String,
        /// The brokers asked.
        brokers: String,
    },
    /// A position handed to [`KafkaSource::seek_to`](crate::KafkaSource::seek_to) that no
    /// partition can have.
    BadPosition {
        /// The partition.
        partition: Partition,
        /// The offset given.
        offset: i64,
    },
    /// `auto.offset.reset = error` and a partition with neither a stored nor a committed
    /// position.
    NoStartPosition {
        /// The client's description, naming the partition.
        detail: String,
    },
    /// The client failed: a fatal consumer error, or an operation it refused.
    Client {
        /// What the consumer was doing.
        during: &'static str,
        /// The client's error.
        source: KafkaError,
    },
    /// A partition delivered a message below the position it was read to: the broker lost the
    /// messages the position counted (a topic deleted and created again, an unclean leader
    /// election) and the client reset the position (`auto.offset.reset`). Reading on would
    /// count messages twice, so the consumer stops.
    Rewound {
        /// The partition.
        partition: Partition,
        /// The offset it was to deliver next.
        expected: i64,
        /// The offset it delivered.
        offset: i64,
    },
    /// Messages [`produce`](crate::produce) sent that the broker did not acknowledge.
    Undelivered {
        /// How many.
        failed: u64,
        /// Of how many sent.
        sent: u64,
        /// The first failure's reason.
        first: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config { field, expected } => {
                write!(f, "kafka source: `{field}` must be {expected}")
            }
            Error::Property { key, value, reason } => {
                write!(f, "kafka property `{key}` = `{value}`: {reason}")
            }
            Error::Unreachable {
                brokers,
                waited,
                attempts,
                source,
            } => write!(
                f,
                "no Kafka broker answered at {brokers} after {attempts} attempts in {:.1} s \
                 (last error: {source}); check the address and that the broker is up",
                waited.as_secs_f64()
            ),
            Error::TopicMissing { topic, brokers } => {
                write!(
                    f,
                    "topic `{topic}` does not exist on the brokers at {brokers}"
                )
            }
            Error::BadPosition { partition, offset } => write!(
                f,
                "position {offset} for {partition}: a position is an offset, never negative"
            ),
            Error::NoStartPosition { detail } => write!(
                f,
                "a partition has no stored or committed position and auto.offset.reset is \
                 `error` ({detail})"
            ),
            Error::Client { during, source } => write!(f, "kafka client, {during}: {source}"),
            Error::Rewound {
                partition,
                expected,
                offset,
            } => write!(
                f,
                "{partition} went back from offset {expected} to {offset}: the broker no longer \
                 has the messages the stored position counted (a topic deleted and created \
                 again, or data lost with a broker), and reading on would count messages twice; \
                 the store keeps its last checkpoint: run again once the topic holds them, or \
                 read the topic into a new store"
            ),
            Error::Undelivered {
                failed,
                sent,
                first,
            } => write!(
                f,
                "{failed} of {sent} messages were not acknowledged by the broker (the first: \
                 {first})"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Unreachable { source, .. } | Error::Client { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Something the caller should say while the consumer goes on (a line on stderr, a counter):
/// the client retries by itself.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Notice {
    /// While connecting: no broker answered yet; the next attempt follows after a pause.
    Waiting {
        /// The bootstrap brokers.
        brokers: String,
        /// Attempts so far.
        attempt: u32,
        /// Time spent so far.
        waited: Duration,
        /// Pause before the next attempt.
        retry_in: Duration,
        /// The last error.
        cause: String,
    },
    /// The client lost a broker, or a topic is momentarily unavailable; it reconnects and
    /// retries by itself, and reading resumes at the position reached.
    Broker {
        /// librdkafka's description.
        message: String,
    },
    /// A commit of checkpointed positions to the broker failed. It is for monitoring only: the
    /// checkpoint holds the positions that count, and the next commit carries newer ones.
    CommitFailed {
        /// The client's error.
        message: String,
    },
    /// The client moved a partition's position because the broker no longer holds the offset
    /// it was at (`auto.offset.reset` after "offset out of range"): forward, the messages in
    /// between were deleted (retention) before this run read them and are not counted; back,
    /// the source stops with [`Error::Rewound`](crate::Error::Rewound) at the first message.
    PositionReset {
        /// librdkafka's description: the partition, both offsets and the broker's reason.
        message: String,
    },
    /// The start positions of newly assigned partitions could not be read from the broker
    /// yet; the assignment is retried at the next poll.
    AssignRetry {
        /// The partitions waiting.
        partitions: Vec<Partition>,
        /// The client's error.
        message: String,
    },
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::Waiting {
                brokers,
                attempt,
                waited,
                retry_in,
                cause,
            } => write!(
                f,
                "waiting for Kafka at {brokers}: attempt {attempt} failed after {:.1} s ({cause}); \
                 retrying in {:.1} s",
                waited.as_secs_f64(),
                retry_in.as_secs_f64()
            ),
            Notice::Broker { message } => write!(f, "kafka: {message} (retrying)"),
            Notice::PositionReset { message } => write!(
                f,
                "kafka: the broker no longer holds a partition's position, which the client moved: \
                 {message}"
            ),
            Notice::CommitFailed { message } => write!(
                f,
                "kafka: committing checkpointed offsets failed ({message}); the checkpoint \
                 is unaffected"
            ),
            Notice::AssignRetry {
                partitions,
                message,
            } => {
                write!(f, "kafka: cannot read start positions of ")?;
                for (i, p) in partitions.iter().enumerate() {
                    write!(f, "{}{p}", if i == 0 { "" } else { ", " })?;
                }
                write!(f, " yet ({message}); retrying")
            }
        }
    }
}
