//! `until_end` against a real broker (Tansu) where the next message's offset is not the end:
//! a transactional producer's commit marker, and several topics whose partitions share a
//! number. Each read must end; the limit is a timeout, not a measure of speed.

mod common;

use std::time::Duration;

use common::*;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;
use tidemark_kafka::{Config, KafkaSource};

const LIMIT: Duration = Duration::from_secs(60);

fn until_end(brokers: &str, topics: &[&str], group: &str) -> Config {
    let mut config = Config::new(brokers, topics.iter().copied(), group)
        .property("session.timeout.ms", "6000")
        .property("heartbeat.interval.ms", "500")
        .property("statistics.interval.ms", "200");
    config.connect_timeout = Duration::from_secs(10);
    config.until_end = true;
    config
}

#[test]
fn a_transactional_topic_ends_past_its_commit_marker() {
    let Some(tansu) = tansu("a_transactional_topic_ends_past_its_commit_marker") else {
        return;
    };
    let broker = Broker::start(tansu);
    let brokers = broker.address();
    let topic = topic_name("txn");
    create_topic(&brokers, &topic, 1);

    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("transactional.id", format!("{topic}-producer"))
        .create()
        .expect("transactional producer");
    let timeout = Duration::from_secs(20);
    producer
        .init_transactions(timeout)
        .expect("init_transactions (does the broker support transactions?)");
    producer.begin_transaction().expect("begin_transaction");
    for i in 0..5 {
        let value = format!("v{i}");
        producer
            .send(BaseRecord::<(), _>::to(&topic).partition(0).payload(&value))
            .map_err(|(error, _)| error)
            .expect("send");
    }
    producer
        .commit_transaction(timeout)
        .expect("commit_transaction");
    drop(producer);

    let mut source =
        KafkaSource::connect(until_end(&brokers, &[&topic], "g-txn")).expect("connect");
    let got = read_to_end(&mut source, LIMIT);
    let offsets: Vec<i64> = got.iter().map(|m| m.offset).collect();
    assert_eq!(offsets, (0..5).collect::<Vec<i64>>());
    let high = source.lag().into_iter().find_map(|lag| lag.high_watermark);
    eprintln!("transactional topic: high watermark {high:?}, 5 messages");
}

#[test]
fn two_empty_topics_end() {
    let Some(tansu) = tansu("two_empty_topics_end") else {
        return;
    };
    let broker = Broker::start(tansu);
    let brokers = broker.address();
    let e1 = topic_name("empty-one");
    let e2 = topic_name("empty-two");
    create_topic(&brokers, &e1, 1);
    create_topic(&brokers, &e2, 1);

    let mut source =
        KafkaSource::connect(until_end(&brokers, &[&e1, &e2], "g-empty")).expect("connect");
    let got = read_to_end(&mut source, LIMIT);
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(source.assignment().count(), 2);
}

#[test]
fn an_empty_topic_beside_a_full_one_ends_after_every_message() {
    let Some(tansu) = tansu("an_empty_topic_beside_a_full_one_ends_after_every_message") else {
        return;
    };
    let broker = Broker::start(tansu);
    let brokers = broker.address();
    let empty = topic_name("beside-empty");
    let full = topic_name("beside-full");
    create_topic(&brokers, &empty, 1);
    create_topic(&brokers, &full, 1);
    produce(&brokers, &full, &records(40, 1, 1_700_000_000_000));

    let mut source =
        KafkaSource::connect(until_end(&brokers, &[&empty, &full], "g-beside")).expect("connect");
    let got = read_to_end(&mut source, LIMIT);
    let offsets: Vec<i64> = got.iter().map(|m| m.offset).collect();
    assert_eq!(offsets, (0..40).collect::<Vec<i64>>());
    assert!(got.iter().all(|m| *m.partition.topic == *full));
}
