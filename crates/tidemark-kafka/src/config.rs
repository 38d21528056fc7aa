//! The consumer's config, and the librdkafka properties it becomes.

use std::time::Duration;

use rdkafka::ClientConfig;

use crate::{Error, PartitionClock};

/// What [`KafkaSource::connect`](crate::KafkaSource::connect) needs. Build it with
/// [`Config::new`] and set the public fields.
///
/// ```
/// use std::time::Duration;
/// use tidemark_kafka::Config;
///
/// let mut config = Config::new("127.0.0.1:9092", ["events"], "tidemark");
/// config.until_end = true;
/// config.connect_timeout = Duration::from_secs(5);
/// config.properties.push(("security.protocol".into(), "sasl_plaintext".into()));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Bootstrap brokers, `host:port` separated by commas.
    pub brokers: String,
    /// Topics to read: one or several, all read by one consumer group.
    pub topics: Vec<String>,
    /// The consumer group: its members share the topics' partitions.
    pub group: String,
    /// librdkafka properties passed through verbatim (`security.protocol`, `sasl.mechanism`,
    /// `sasl.username`, `session.timeout.ms`, `auto.offset.reset`, …), applied after this
    /// crate's defaults so they override them. `bootstrap.servers`, `group.id` and
    /// `enable.auto.commit` are refused: the first two are fields here, and committing
    /// offsets is the caller's decision after its checkpoint.
    pub properties: Vec<(String, String)>,
    /// Stop at each partition's end offset as seen at start (the high watermark of the first
    /// fetch answer for it, or the last stable offset under `read_committed`):
    /// [`Event::End`](crate::Event::End) once every assigned partition is read to it. Messages
    /// produced after that offset are not delivered.
    pub until_end: bool,
    /// How long [`connect`](crate::KafkaSource::connect) keeps asking for metadata while no
    /// broker answers, with backoff from 250 ms up to 5 s, before it stops with
    /// [`Error::Unreachable`]. Default [`Config::DEFAULT_CONNECT_TIMEOUT`], 30 s.
    pub connect_timeout: Duration,
    /// The bound on each request the consumer makes synchronously: metadata, committed
    /// offsets, watermarks, seeks. Default 10 s.
    pub request_timeout: Duration,
    /// A partition silent this long stops holding the watermark back (see
    /// [`PartitionClock`]). Default [`PartitionClock::DEFAULT_IDLE_TIMEOUT`], 10 s.
    pub idle_timeout: Duration,
}

/// Where a partition with neither a stored nor a committed position starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reset {
    Earliest,
    Latest,
    Error,
}

/// Properties the consumer owns.
const RESERVED: [(&str, &str); 3] = [
    ("bootstrap.servers", "set `brokers` instead"),
    ("group.id", "set `group` instead"),
    (
        "enable.auto.commit",
        "offsets are committed by the caller after each checkpoint (a commit ahead of the \
         checkpoint would lose messages after a crash)",
    ),
];

impl Config {
    /// The default [`Config::connect_timeout`].
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

    /// A config reading `topics` from `brokers` as a member of `group`, with the defaults.
    pub fn new<T: Into<String>>(
        brokers: impl Into<String>,
        topics: impl IntoIterator<Item = T>,
        group: impl Into<String>,
    ) -> Config {
        Config {
            brokers: brokers.into(),
            topics: topics.into_iter().map(Into::into).collect(),
            group: group.into(),
            properties: Vec::new(),
            until_end: false,
            connect_timeout: Config::DEFAULT_CONNECT_TIMEOUT,
            request_timeout: Duration::from_secs(10),
            idle_timeout: PartitionClock::DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// Adds a librdkafka property (see [`Config::properties`]).
    pub fn property(mut self, key: impl Into<String>, value: impl Into<String>) -> Config {
        self.properties.push((key.into(), value.into()));
        self
    }

    /// The value a property ends with: the caller's last one, else this crate's default.
    pub(crate) fn effective(&self, key: &str) -> Option<&str> {
        self.properties
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .or_else(|| DEFAULTS.iter().find(|(k, _)| *k == key).map(|(_, v)| *v))
    }

    /// Checks the fields and builds librdkafka's config.
    pub(crate) fn client_config(&self) -> Result<ClientConfig, Error> {
        if self.brokers.trim().is_empty() {
            return Err(Error::Config {
                field: "brokers",
                expected: "a list of host:port",
            });
        }
        if self.topics.is_empty() || self.topics.iter().any(|t| t.trim().is_empty()) {
            return Err(Error::Config {
                field: "topics",
                expected: "one or more topic names, none empty",
            });
        }
        if self.group.trim().is_empty() {
            return Err(Error::Config {
                field: "group",
                expected: "a consumer group name",
            });
        }
        let mut client = ClientConfig::new();
        client
            .set("bootstrap.servers", &self.brokers)
            .set("group.id", &self.group)
            .set("enable.auto.commit", "false");
        for (key, value) in DEFAULTS {
            client.set(key, value);
        }
        for (key, value) in &self.properties {
            if let Some((_, reason)) = RESERVED.iter().find(|(k, _)| k == key) {
                return Err(Error::Property {
                    key: key.clone(),
                    value: value.clone(),
                    reason: (*reason).to_string(),
                });
            }
            client.set(key, value);
        }
        if self.until_end {
            // The end-of-partition events tell that a partition with nothing left to read
            // (empty, or started at its end) is done.
            client.set("enable.partition.eof", "true");
        }
        self.reset()?;
        if self.until_end && self.stats_interval_ms() == Some(0) {
            return Err(Error::Property {
                key: "statistics.interval.ms".into(),
                value: "0".into(),
                reason: "until_end reads each partition's end offset from the client's \
                         statistics: give it a positive interval"
                    .into(),
            });
        }
        Ok(client)
    }

    fn stats_interval_ms(&self) -> Option<u64> {
        self.effective("statistics.interval.ms")
            .and_then(|v| v.trim().parse().ok())
    }

    /// The `auto.offset.reset` policy, read as librdkafka reads it.
    pub(crate) fn reset(&self) -> Result<Reset, Error> {
        let value = self.effective("auto.offset.reset").unwrap_or("earliest");
        match value.to_ascii_lowercase().as_str() {
            "earliest" | "smallest" | "beginning" => Ok(Reset::Earliest),
            "latest" | "largest" | "end" => Ok(Reset::Latest),
            "error" => Ok(Reset::Error),
            _ => Err(Error::Property {
                key: "auto.offset.reset".into(),
                value: value.into(),
                reason: "expected earliest, latest or error".into(),
            }),
        }
    }
}

/// This crate's defaults, overridden by [`Config::properties`].
///
/// - `auto.offset.reset = earliest`: a partition nobody has read (a new group, a partition
///   added to the topic) is read from its start, so nothing produced before the consumer
///   noticed it is skipped (Kafka's own default, `latest`, skips it);
/// - `statistics.interval.ms = 500`: the client's statistics carry each partition's high
///   watermark as its last fetch answer gave it, the source of [`lag`](crate::KafkaSource::lag)
///   and of `until_end`'s end offsets (rdkafka offers no other way to read that cached value,
///   and asking the broker with a ListOffsets request is what some Kafka-protocol brokers
///   answer wrongly);
/// - `enable.auto.offset.store = false`: offsets are committed explicitly;
/// - `client.id = tidemark`, to find the consumer in broker logs;
/// - memory: librdkafka prefetches into one queue for all assigned partitions, by default up to
///   64 MiB (`queued.max.messages.kbytes = 65536`) and 100 000 messages per partition
///   (`queued.min.messages`), with fetches of up to 50 MiB. The source bounds the queue to
///   1 MiB and 1 000 messages per partition and each fetch to 1 MiB (`fetch.max.bytes`;
///   256 KiB per partition, `max.partition.fetch.bytes`): the client holds about 2 MiB of
///   message data (and their decoded headers) whatever the number of partitions or the
///   backlog. Measured on `tidemark run` over a 4-partition topic of half a million demo flows
///   (2026-12-04): the run's peak memory 39 MiB against 76 MiB with 8 MiB and 10 000 messages
///   and 4 MiB fetches, and no fewer records per CPU-second (each fetch still carries
///   thousands of small records).
const DEFAULTS: [(&str, &str); 8] = [
    ("auto.offset.reset", "earliest"),
    ("statistics.interval.ms", "500"),
    ("enable.auto.offset.store", "false"),
    ("client.id", "tidemark"),
    ("queued.max.messages.kbytes", "1024"),
    ("queued.min.messages", "1000"),
    ("fetch.max.bytes", "1048576"),
    ("max.partition.fetch.bytes", "262144"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_properties_are_refused_with_the_reason() {
        let config = Config::new("b:9092", ["t"], "g").property("enable.auto.commit", "true");
        let err = config.client_config().unwrap_err();
        assert!(
            matches!(&err, Error::Property { key, .. } if key == "enable.auto.commit"),
            "{err:?}"
        );
        assert!(err.to_string().contains("checkpoint"), "{err}");
        let config = Config::new("b:9092", ["t"], "g").property("group.id", "other");
        assert!(matches!(
            config.client_config(),
            Err(Error::Property { .. })
        ));
    }

    #[test]
    fn empty_fields_are_refused() {
        for (config, field) in [
            (Config::new(" ", ["t"], "g"), "brokers"),
            (Config::new("b:1", Vec::<String>::new(), "g"), "topics"),
            (Config::new("b:1", [""], "g"), "topics"),
            (Config::new("b:1", ["t"], ""), "group"),
        ] {
            match config.client_config() {
                Err(Error::Config { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_callers_properties_override_the_defaults() {
        let config = Config::new("b:1", ["t"], "g");
        assert_eq!(config.reset().unwrap(), Reset::Earliest);
        let config = config.property("auto.offset.reset", "largest");
        assert_eq!(config.reset().unwrap(), Reset::Latest);
        let bad = Config::new("b:1", ["t"], "g").property("auto.offset.reset", "soonest");
        assert!(
            matches!(bad.client_config(), Err(Error::Property { key, .. }) if key == "auto.offset.reset")
        );
        let mut small =
            Config::new("b:1", ["t"], "g").property("queued.max.messages.kbytes", "2048");
        small.until_end = true;
        let client = small.client_config().unwrap();
        assert_eq!(client.get("queued.max.messages.kbytes"), Some("2048"));
        assert_eq!(client.get("enable.partition.eof"), Some("true"));
        let mut no_stats = Config::new("b:1", ["t"], "g").property("statistics.interval.ms", "0");
        assert!(no_stats.client_config().is_ok());
        no_stats.until_end = true;
        assert!(no_stats.client_config().is_err());
    }

    #[test]
    fn unknown_properties_are_refused_by_librdkafka_at_connect() {
        let config = Config::new("127.0.0.1:1", ["t"], "g").property("no.such.property", "1");
        match crate::KafkaSource::connect(config) {
            Err(Error::Property { key, reason, .. }) => {
                assert_eq!(key, "no.such.property");
                assert!(!reason.is_empty());
            }
            Err(other) => panic!("{other:?}"),
            Ok(_) => panic!("connected with an unknown property"),
        }
    }
}
