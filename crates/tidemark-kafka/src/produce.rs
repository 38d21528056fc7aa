//! [`produce`]: lines written into a topic, one message each, for `tidemark demo` to put its
//! flow log where `tidemark run` can read it from a broker.
//!
//! The producer is idempotent (`enable.idempotence`): a send the client retries after a lost
//! answer is not written twice. Every message's delivery is awaited (a flush bounded by
//! [`FLUSH_WAIT`]) and counted: the call fails unless the broker acknowledged each one, naming
//! how many failed and the first reason.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;

use crate::Error;

/// How long the end of a [`produce`] waits for the broker to acknowledge what is in flight.
pub const FLUSH_WAIT: Duration = Duration::from_secs(120);

/// How long a metadata request for the topic may take.
const METADATA_WAIT: Duration = Duration::from_secs(15);

/// One message to write: its key, its value, and its timestamp (ms since the epoch).
pub struct Record<'a> {
    /// The key (the partition is chosen by its hash).
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// The timestamp, ms since the epoch.
    pub timestamp: i64,
}

/// Counts the deliveries the broker refused, and keeps the first reason.
#[derive(Default)]
struct Deliveries {
    failed: AtomicU64,
    first: Mutex<Option<String>>,
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, _)) = result {
            self.failed.fetch_add(1, Ordering::Relaxed);
            let mut first = self.first.lock().unwrap_or_else(|p| p.into_inner());
            first.get_or_insert_with(|| error.to_string());
        }
    }
}

/// Writes `records` into `topic` on `brokers` and waits until the broker acknowledged each;
/// returns how many were written. A topic the brokers do not have is [`Error::TopicMissing`],
/// unless the broker creates topics on first use (with its default partition count).
pub fn produce<'a>(
    brokers: &str,
    topic: &str,
    records: impl IntoIterator<Item = Record<'a>>,
) -> Result<u64, Error> {
    if brokers.trim().is_empty() {
        return Err(Error::Config {
            field: "brokers",
            expected: "a comma-separated list of host:port",
        });
    }
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("linger.ms", "20")
        .set("message.timeout.ms", "60000")
        .create_with_context(Deliveries::default())
        .map_err(|source| Error::Client {
            during: "creating the producer",
            source,
        })?;
    let metadata = producer
        .client()
        .fetch_metadata(Some(topic), METADATA_WAIT)
        .map_err(|source| Error::Unreachable {
            brokers: brokers.to_string(),
            waited: METADATA_WAIT,
            attempts: 1,
            source,
        })?;
    let exists = metadata
        .topics()
        .iter()
        .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty());
    if !exists {
        return Err(Error::TopicMissing {
            topic: topic.to_string(),
            brokers: brokers.to_string(),
        });
    }
    let mut sent = 0u64;
    for r in records {
        let mut record = BaseRecord::to(topic)
            .key(r.key)
            .payload(r.value)
            .timestamp(r.timestamp);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                // The client's queue is full: serve deliveries, then send again.
                Err((e, back)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                    producer.poll(Duration::from_millis(50));
                    record = back;
                }
                Err((source, _)) => {
                    return Err(Error::Client {
                        during: "queueing a message",
                        source,
                    })
                }
            }
        }
        sent += 1;
        if sent % 10_000 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(FLUSH_WAIT).map_err(|source| Error::Client {
        during: "waiting for the broker to acknowledge the messages",
        source,
    })?;
    let context = producer.context();
    let failed = context.failed.load(Ordering::Relaxed);
    if failed > 0 {
        let first = context
            .first
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_default();
        return Err(Error::Undelivered {
            failed,
            sent,
            first,
        });
    }
    Ok(sent)
}
