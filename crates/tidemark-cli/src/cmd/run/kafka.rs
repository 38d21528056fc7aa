//! `tidemark run` reading a Kafka topic: the `[source]` table and the flags that override it,
//! turned into a connected [`KafkaMessages`] for the pipeline.
//!
//! The client is `tidemark-kafka`'s (rdkafka, librdkafka built from its bundled source): the
//! pipeline crate knows only its `MessageSource` seam. The positions the store committed are
//! handed to the consumer by the pipeline itself before the first poll, so a restart resumes
//! each partition at the offset after the last message counted.

use std::time::Duration;

use tidemark_kafka::{Error, KafkaMessages, KafkaSource};
use tidemark_stream::config::{Config, SourceConfig};

use super::Args;
use crate::UsageError;

/// The consumer group when neither the config nor `--group` names one.
pub const DEFAULT_GROUP: &str = "tidemark";

/// Whether this run reads Kafka: the config has a `[source]`, or a Kafka flag is given.
pub fn wanted(config: &Config, args: &Args) -> bool {
    config.source.is_some() || args.brokers.is_some() || !args.topic.is_empty()
}

/// The client's config: the `[source]` table, overridden by the flags.
fn client_config(config: &Config, args: &Args) -> anyhow::Result<tidemark_kafka::Config> {
    let default = SourceConfig::default();
    let source = config.source.as_ref().unwrap_or(&default);
    let brokers = args
        .brokers
        .clone()
        .or_else(|| source.brokers.clone())
        .ok_or_else(|| {
            UsageError::flag(
                "--brokers",
                "a Kafka source needs brokers (host:port): give --brokers or `brokers` in \
                 [source]",
            )
        })?;
    let topics = if args.topic.is_empty() {
        source.topics.clone()
    } else {
        args.topic.clone()
    };
    if topics.is_empty() {
        return Err(UsageError::flag(
            "--topic",
            "a Kafka source needs a topic: give --topic or `topic` in [source]",
        ));
    }
    let group = args
        .group
        .clone()
        .or_else(|| source.group.clone())
        .unwrap_or_else(|| DEFAULT_GROUP.to_string());
    let mut client = tidemark_kafka::Config::new(brokers, topics, group);
    for (key, value) in &source.properties {
        client = client.property(key.clone(), value.clone());
    }
    client.until_end = args.until_end;
    if let Some(ms) = source.idle_timeout {
        client.idle_timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = source.connect_timeout {
        client.connect_timeout = Duration::from_millis(ms);
    }
    Ok(client)
}

/// Connects to the brokers (waiting for them with backoff, said on stderr) and joins the
/// group.
pub fn connect(config: &Config, args: &Args) -> anyhow::Result<KafkaMessages<'static>> {
    Ok(KafkaMessages::new(source(config, args)?, |notice| {
        eprintln!("tidemark: {notice}")
    }))
}

/// [`connect`]'s consumer, read by the caller.
pub fn source(config: &Config, args: &Args) -> anyhow::Result<KafkaSource> {
    if config.input.format == tidemark_stream::config::Format::Csv
        && config.source.as_ref().is_none_or(|s| s.columns.is_empty())
    {
        return Err(UsageError::file(
            args.config.display(),
            "a CSV message has no header line: name its fields in [source] columns",
        ));
    }
    let client = client_config(config, args)?;
    KafkaSource::connect_with(client, |notice| eprintln!("tidemark: {notice}"))
        .map_err(connect_error)
}

/// A failure to connect: the user's settings (exit 2), or brokers that never answered.
fn connect_error(e: Error) -> anyhow::Error {
    match e {
        e @ (Error::Config { .. }
        | Error::Property { .. }
        | Error::TopicMissing { .. }
        | Error::BadPosition { .. }) => UsageError::file("tidemark run: kafka", e),
        e => anyhow::Error::new(e).context("tidemark run: kafka"),
    }
}
