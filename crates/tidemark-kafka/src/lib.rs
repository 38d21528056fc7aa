//! tidemark's Kafka source: a synchronous consumer whose positions the caller owns, with
//! rebalance hand-over and a per-partition event-time clock.
//!
//! # What and why
//!
//! A pipeline that checkpoints its state must store the source's positions in the same
//! transaction, or a crash between the two loses messages or counts them twice. So this
//! consumer never decides where to read from by itself: the caller hands it the positions from
//! its checkpoint ([`KafkaSource::seek_to`], a [`Positions`] map of next offset per
//! partition), and whenever the consumer group assigns a partition (at start, at each
//! rebalance) reading starts at the caller's position if it has one, else at the group's
//! committed offset, else per `auto.offset.reset` (default `earliest`). The broker's committed
//! offsets are written by [`KafkaSource::commit`] after each checkpoint, for monitoring and for
//! consumers without a checkpoint: never ahead of it.
//!
//! When the group takes partitions away, [`KafkaSource::poll`] returns [`Event::Revoked`]
//! *before* they go: the partitions are given back only at the next `poll`, so the caller
//! checkpoints them first and the next owner resumes from that checkpoint. Likewise
//! [`Event::Assigned`] comes before reading starts, so the caller can hand over positions for
//! the new partitions. (The client context defers librdkafka's rebalance callback to do this:
//! rdkafka's own `pre_rebalance` hook runs inside the client's poll, where the caller cannot
//! act.)
//!
//! The client is the `rdkafka` crate with librdkafka built from its bundled source (no system
//! library, no tokio: the API is synchronous, on `BaseConsumer`). It is the most used and best
//! kept Kafka client in Rust, and it carries consumer groups, cooperative rebalancing, SASL and
//! every broker quirk librdkafka knows; the pure-Rust clients lacked consumer groups or offset
//! commits.
//!
//! # Also here
//! - [`Config::until_end`]: stop with [`Event::End`] once every assigned partition is read to
//!   the end it had when first seen (the high watermark of the client's fetch answers, never a
//!   ListOffsets request, which some Kafka-protocol brokers answer wrongly);
//! - [`PartitionClock`]: the watermark is the minimum over assigned partitions of their
//!   event time, with an idle timeout; the source tells it of assignments, arrivals and ends,
//!   the caller of event times ([`KafkaSource::observe_time`]);
//! - broker faults the client retries by itself come back as [`Event::Notice`] for the caller
//!   to report; [`KafkaSource::lag`] per partition;
//! - [`KafkaMessages`]: the source as `tidemark run`'s message source (the pipeline's
//!   [`MessageSource`](tidemark_stream::pipeline::MessageSource)), which stores the positions
//!   in its checkpoints;
//! - [`produce`]: lines written into a topic (what `tidemark demo` uses to fill one);
//! - memory: the client's prefetch queue is bounded (about 2 MiB of messages in all; see
//!   [`Config`]).
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use tidemark_kafka::{Config, Event, KafkaSource, Positions};
//!
//! # fn load_checkpoint() -> Positions { Positions::new() }
//! # fn checkpoint(_: &Positions) {}
//! let mut config = Config::new("127.0.0.1:9092", ["events"], "tidemark");
//! config.until_end = true;
//! let mut source = KafkaSource::connect(config)?;
//! let mut positions = load_checkpoint();
//! source.seek_to(&positions)?;
//! loop {
//!     match source.poll(Duration::from_millis(500))? {
//!         Event::Message(message) => {
//!             // … fold message.value into the state …
//!             positions.insert(message.partition.clone(), message.next_offset());
//!         }
//!         Event::Revoked(_) => {
//!             checkpoint(&positions);
//!             if let Some(notice) = source.commit(&positions) {
//!                 eprintln!("{notice}");
//!             }
//!         }
//!         Event::Notice(notice) => eprintln!("{notice}"),
//!         Event::End => break,
//!         _ => {}
//!     }
//! }
//! checkpoint(&positions);
//! # Ok::<(), tidemark_kafka::Error>(())
//! ```

mod clock;
mod config;
mod context;
mod error;
mod messages;
mod partition;
mod produce;
mod source;

pub use clock::PartitionClock;
pub use config::Config;
pub use error::{Error, Notice};
pub use messages::{KafkaMessages, POLL_WAIT};
pub use partition::{Message, Partition, Positions};
pub use produce::{produce, Record, FLUSH_WAIT};
pub use source::{Event, KafkaSource, Lag};
