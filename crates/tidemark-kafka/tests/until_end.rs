//! `until_end` against a real broker (Tansu) where the next message's offset is not the end:
//! a transactional producer's commit marker, several topics whose partitions share a number,
//! and a partition read to its end, then given back by a rebalance and moved back before its
//! end. Each read must end; the limit is a timeout, not a measure of speed.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientConfig;
use tidemark_kafka::{Config, Event, KafkaSource, Positions};

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

/// A partition read to its end is paused; given back by a rebalance and assigned again to
/// the same consumer at a position before that end (the caller's run stopped short of it, as
/// a scale-out worker's part does when its partitions are revoked mid-run), it is read from
/// there again. librdkafka keeps an application's pause through unassign and assign:
/// unresumed, the partition was never fetched again, and a worker reading to the end waited
/// for ever.
#[test]
fn a_partition_moved_back_from_its_end_by_a_rebalance_is_read_again() {
    let Some(tansu) = tansu("a_partition_moved_back_from_its_end_by_a_rebalance_is_read_again")
    else {
        return;
    };
    let broker = Broker::start(tansu);
    let brokers = broker.address();
    // `read`'s partition 1 is the only partition numbered 1: its end-of-partition event
    // finishes (and pauses) it at once. `read`'s partition 0 and `twin`'s share a number, so
    // their end waits for the client's statistics, which come once a day here: the consumer
    // never reaches `End`, and keeps serving the group's rebalances.
    let read = topic_name("moved-back");
    let twin = topic_name("moved-back-twin");
    let other = topic_name("moved-back-other");
    create_topic(&brokers, &read, 2);
    create_topic(&brokers, &twin, 1);
    create_topic(&brokers, &other, 1);
    produce(&brokers, &read, &records(20, 2, 1_700_000_000_000));
    produce(&brokers, &twin, &records(10, 1, 1_700_000_000_000));
    let once_a_day = |topics: &[&str]| {
        until_end(&brokers, topics, "g-moved-back").property("statistics.interval.ms", "86400000")
    };
    let moved = tidemark_kafka::Partition::new(read.as_str(), 1);

    let mut a = KafkaSource::connect(once_a_day(&[&read, &twin])).expect("connect a");
    let started = Instant::now();
    let mut first = Vec::new();
    // Read partition 1 to its end, then a second more: its end-of-partition event is taken.
    let mut last_read: Option<Instant> = None;
    while last_read.is_none_or(|at| at.elapsed() < Duration::from_secs(1)) {
        assert!(started.elapsed() < LIMIT, "partition 1 read: {first:?}");
        match a.poll(Duration::from_millis(50)).expect("poll a") {
            Event::Message(m) if m.partition == moved => {
                first.push(m.offset);
                if m.offset == 9 {
                    last_read = Some(Instant::now());
                }
            }
            Event::End => panic!("End with two partitions' ends unknown"),
            _ => {}
        }
    }
    assert_eq!(first, (0..10).collect::<Vec<i64>>());

    // A member subscribed to another topic joins: the group rebalances, and `a`'s partitions,
    // which only `a` reads, are revoked from it and assigned to it again.
    let mut b = KafkaSource::connect(once_a_day(&[&other])).expect("connect b");
    let (mut revoked, mut assigned) = (false, false);
    let mut again = Vec::new();
    while again.len() < 6 {
        assert!(
            started.elapsed() < LIMIT,
            "partition 1 not read again within {LIMIT:?}: revoked {revoked}, assigned \
             {assigned}, read again {again:?}, lag {:?}",
            a.lag()
        );
        match a.poll(Duration::from_millis(50)).expect("poll a") {
            Event::Revoked(_) => revoked = true,
            Event::Assigned(parts) => {
                assert!(revoked, "assigned again before the revoke");
                assert!(parts.contains(&moved), "{parts:?}");
                assigned = true;
                // The caller's checkpoint holds offset 4: the rest is read again.
                a.seek_to(&Positions::from([(moved.clone(), 4)]))
                    .expect("seek_to");
            }
            Event::Message(m) if m.partition == moved => {
                assert!(assigned, "{} read before the assignment", m.location());
                again.push(m.offset);
            }
            Event::End => panic!("End with two partitions' ends unknown"),
            _ => {}
        }
        // `b` polls too, so that the group's join completes.
        b.poll(Duration::ZERO).expect("poll b");
    }
    assert_eq!(again, (4..10).collect::<Vec<i64>>());
}
