//! The source against a real Kafka-protocol broker (Tansu): see `common` for how it is found.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::*;
use tidemark_kafka::{Error, Event, KafkaSource, Partition, Positions};

#[test]
fn reads_every_message_once_to_the_end() {
    let Some(tansu) = tansu("reads_every_message_once_to_the_end") else {
        return;
    };
    let broker = Broker::start(tansu);
    let topic = topic_name("to-end");
    create_topic(&broker.address(), &topic, 4);
    let sent = records(200, 4, 1_700_000_000_000);
    produce(&broker.address(), &topic, &sent);

    let mut config = config(&broker.address(), &topic, "g-to-end");
    config.until_end = true;
    let mut source = KafkaSource::connect(config).expect("connect");
    let got = read_to_end(&mut source, Duration::from_secs(30));
    assert_eq!(got.len(), sent.len());
    // Per partition: offsets 0, 1, 2, … in order, values as produced.
    let mut by_partition: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    let mut values = BTreeSet::new();
    for m in &got {
        by_partition
            .entry(m.partition.partition)
            .or_default()
            .push(m.offset);
        assert!(values.insert(m.value.clone()), "twice: {}", m.location());
        let i: usize = std::str::from_utf8(&m.value).unwrap()[1..].parse().unwrap();
        assert_eq!(m.key.as_deref(), Some(sent[i].key.as_slice()));
        assert_eq!(m.timestamp, Some(sent[i].timestamp));
        assert_eq!(m.partition.partition, sent[i].partition);
    }
    assert_eq!(by_partition.len(), 4);
    for offsets in by_partition.values() {
        assert_eq!(*offsets, (0..50).collect::<Vec<i64>>());
    }
    // End is sticky, and positions are at each partition's end.
    assert_eq!(source.poll(Duration::from_millis(10)).unwrap(), Event::End);
    let positions = source.positions();
    assert_eq!(positions.len(), 4);
    assert!(positions.values().all(|&p| p == 50), "{positions:?}");
    for lag in source.lag() {
        assert_eq!(lag.messages(), Some(0), "{lag:?}");
    }
}

/// Offsets per partition of the messages read.
fn offsets(messages: &[tidemark_kafka::Message]) -> BTreeMap<i32, Vec<i64>> {
    let mut out: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for m in messages {
        out.entry(m.partition.partition).or_default().push(m.offset);
    }
    out
}

#[test]
fn resumes_from_the_callers_positions_then_the_groups_commits() {
    let Some(tansu) = tansu("resumes_from_the_callers_positions_then_the_groups_commits") else {
        return;
    };
    let broker = Broker::start(tansu);
    let topic = topic_name("resume");
    create_topic(&broker.address(), &topic, 4);
    produce(&broker.address(), &topic, &records(100, 4, 0));
    let p = |n| Partition::new(topic.as_str(), n);

    // The caller's checkpoint says where three partitions stand; the fourth has no position
    // and the group none either: it starts at the earliest offset.
    let stored: Positions = [(p(0), 10), (p(1), 25), (p(3), 24)].into_iter().collect();
    let mut config = config(&broker.address(), &topic, "g-resume");
    config.until_end = true;
    let mut source = KafkaSource::connect(config.clone()).expect("connect");
    source.seek_to(&stored).unwrap();
    let got = offsets(&read_to_end(&mut source, Duration::from_secs(30)));
    assert_eq!(got.get(&0), Some(&(10..25).collect::<Vec<i64>>()));
    assert_eq!(got.get(&1), None, "partition 1 was read to its end already");
    assert_eq!(got.get(&2), Some(&(0..25).collect::<Vec<i64>>()));
    assert_eq!(got.get(&3), Some(&vec![24]));

    // Checkpoint, then commit: a later consumer of the group without positions starts at the
    // commits, and a stored position still wins over a commit.
    let commits: Positions = (0..4).map(|n| (p(n), 20)).collect();
    assert_eq!(source.commit(&commits), None);
    drop(source);
    produce(&broker.address(), &topic, &records(8, 4, 1_000));
    let mut source = KafkaSource::connect(config).expect("connect again");
    source.seek_to(&[(p(2), 23)].into_iter().collect()).unwrap();
    let got = offsets(&read_to_end(&mut source, Duration::from_secs(30)));
    for n in [0, 1, 3] {
        assert_eq!(
            got.get(&n),
            Some(&(20..27).collect::<Vec<i64>>()),
            "partition {n}"
        );
    }
    assert_eq!(got.get(&2), Some(&(23..27).collect::<Vec<i64>>()));
    assert!(matches!(
        source.seek_to(&[(p(0), -1)].into_iter().collect()),
        Err(Error::BadPosition { offset: -1, .. })
    ));
}

#[test]
fn two_consumers_split_the_partitions_with_a_hand_over() {
    let Some(tansu) = tansu("two_consumers_split_the_partitions_with_a_hand_over") else {
        return;
    };
    let broker = Broker::start(tansu);
    let topic = topic_name("split");
    create_topic(&broker.address(), &topic, 4);
    let sent = records(2_000, 4, 0);
    produce(&broker.address(), &topic, &sent);

    let mut config = config(&broker.address(), &topic, "g-split");
    config.until_end = true;
    // The shared store: every message's position is "checkpointed" as it is counted.
    let mut store = Positions::new();
    let mut seen: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
    // What happened, in order: (consumer, event).
    let mut log: Vec<(usize, String)> = Vec::new();
    let mut sources = vec![KafkaSource::connect(config.clone()).expect("connect a")];
    let mut ended = vec![false];
    let mut owned: Vec<BTreeSet<Partition>> = vec![BTreeSet::new()];
    let mut read = [0usize; 2];
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not done in 30 s: {} of {} read, ended {ended:?}, lag {:?}, log {log:?}",
            seen.len(),
            sent.len(),
            sources.iter().map(|s| s.lag()).collect::<Vec<_>>()
        );
        // The second consumer joins once the first has read a little.
        if sources.len() == 1 && read[0] >= 100 {
            sources.push(KafkaSource::connect(config.clone()).expect("connect b"));
            ended.push(false);
            owned.push(BTreeSet::new());
            log.push((1, "joined".into()));
        }
        for (i, source) in sources.iter_mut().enumerate() {
            match source.poll(Duration::from_millis(20)).expect("poll") {
                Event::Message(m) => {
                    assert!(
                        owned[i].contains(&m.partition),
                        "{i} read {} unowned",
                        m.location()
                    );
                    assert_eq!(
                        store.get(&m.partition).copied().unwrap_or(0),
                        m.offset,
                        "{i}: {} is not where the store says",
                        m.location()
                    );
                    store.insert(m.partition.clone(), m.next_offset());
                    *seen.entry(m.value).or_default() += 1;
                    read[i] += 1;
                }
                Event::Assigned(parts) => {
                    log.push((i, format!("assigned {parts:?}")));
                    for (other, held) in owned.iter().enumerate() {
                        if other != i {
                            assert!(
                                held.is_disjoint(&parts.iter().cloned().collect()),
                                "{parts:?} given to {i} while {other} holds them: {log:?}"
                            );
                        }
                    }
                    owned[i].extend(parts.iter().cloned());
                    let mine: Positions = store
                        .iter()
                        .filter(|(p, _)| parts.contains(p))
                        .map(|(p, &o)| (p.clone(), o))
                        .collect();
                    source.seek_to(&mine).unwrap();
                    ended[i] = false;
                }
                Event::Revoked(parts) => {
                    log.push((i, format!("revoked {parts:?}")));
                    // The checkpoint is the store (already up to date); commit for monitoring.
                    let mine: Positions = store
                        .iter()
                        .filter(|(p, _)| parts.contains(p))
                        .map(|(p, &o)| (p.clone(), o))
                        .collect();
                    if let Some(notice) = source.commit(&mine) {
                        eprintln!("{notice}");
                    }
                    for p in &parts {
                        owned[i].remove(p);
                    }
                }
                Event::End => ended[i] = true,
                Event::Notice(n) => eprintln!("notice {i}: {n}"),
                Event::Idle => {}
                other => panic!("{other:?}"),
            }
        }
        let split = sources.len() == 2 && owned.iter().all(|o| o.len() == 2);
        if split && ended.iter().all(|&e| e) && seen.len() == sent.len() {
            break;
        }
    }
    assert!(seen.values().all(|&n| n == 1), "a message read twice");
    assert_eq!(seen.len(), sent.len());
    // The first consumer gave its partitions back (Revoked) before the second got any.
    let revoked = log
        .iter()
        .position(|(i, e)| *i == 0 && e.starts_with("revoked"));
    let assigned_b = log
        .iter()
        .position(|(i, e)| *i == 1 && e.starts_with("assigned"));
    assert!(
        matches!((revoked, assigned_b), (Some(r), Some(a)) if r < a),
        "{log:?}"
    );
    let union: BTreeSet<_> = owned.iter().flatten().cloned().collect();
    assert_eq!(union.len(), 4);
    eprintln!("read: a {} b {}; {log:?}", read[0], read[1]);
}

#[test]
fn no_broker_at_start_is_unreachable_within_the_timeout() {
    // Needs no broker: nothing listens on the port.
    let port = free_port();
    let brokers = format!("127.0.0.1:{port}");
    let mut config = config(&brokers, "events", "g");
    config.connect_timeout = Duration::from_secs(2);
    let started = Instant::now();
    let mut waiting = 0;
    let result = KafkaSource::connect_with(config, |notice| {
        assert!(notice.to_string().contains(&brokers), "{notice}");
        waiting += 1;
    });
    let took = started.elapsed();
    match result {
        Err(error @ Error::Unreachable { .. }) => {
            let text = error.to_string();
            assert!(text.contains(&brokers), "{text}");
            assert!(std::error::Error::source(&error).is_some());
        }
        other => panic!("{other:?}"),
    }
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(4),
        "{took:?}"
    );
    assert!(waiting >= 1);
}

#[test]
fn a_missing_topic_is_named() {
    let Some(tansu) = tansu("a_missing_topic_is_named") else {
        return;
    };
    let broker = Broker::start(tansu);
    let present = topic_name("present");
    create_topic(&broker.address(), &present, 1);
    let mut config = config(&broker.address(), &present, "g-missing");
    config.topics.push("no-such-topic".into());
    match KafkaSource::connect(config) {
        Err(Error::TopicMissing { topic, brokers }) => {
            assert_eq!(topic, "no-such-topic");
            assert_eq!(brokers, broker.address());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_broker_restart_is_reported_and_polls_stay_bounded() {
    let Some(tansu) = tansu("a_broker_restart_is_reported_and_polls_stay_bounded") else {
        return;
    };
    let mut broker = Broker::start(tansu);
    let topic = topic_name("restart");
    create_topic(&broker.address(), &topic, 4);
    produce(&broker.address(), &topic, &records(40, 4, 0));
    let mut source =
        KafkaSource::connect(config(&broker.address(), &topic, "g-restart")).expect("connect");
    let started = Instant::now();
    let mut read = 0;
    while read < 40 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "read {read} of 40"
        );
        if let Event::Message(_) = source.poll(Duration::from_millis(200)).unwrap() {
            read += 1;
        }
    }

    // Tansu's storage here is memory: a restart loses the topic, so this checks that the
    // fault is reported and that polling neither hangs nor fails, not that reading resumes.
    broker.kill();
    let mut notices = Vec::new();
    let down = Instant::now();
    while down.elapsed() < Duration::from_secs(4) {
        let before = Instant::now();
        let event = source
            .poll(Duration::from_millis(300))
            .expect("poll while down");
        assert!(
            before.elapsed() < Duration::from_millis(1_500),
            "a poll took {:?}",
            before.elapsed()
        );
        if let Event::Notice(n) = event {
            notices.push(n.to_string());
        }
    }
    assert!(!notices.is_empty(), "no notice while the broker was down");
    eprintln!("notices while down: {notices:?}");
    broker.restart();
    let up = Instant::now();
    while up.elapsed() < Duration::from_secs(2) {
        let before = Instant::now();
        source
            .poll(Duration::from_millis(300))
            .expect("poll after restart");
        assert!(before.elapsed() < Duration::from_millis(1_500));
    }
    let closing = Instant::now();
    drop(source);
    assert!(
        closing.elapsed() < Duration::from_secs(15),
        "close took {:?}",
        closing.elapsed()
    );
}

#[test]
fn the_watermark_is_the_minimum_and_an_idle_partition_stops_holding_it() {
    let Some(tansu) = tansu("the_watermark_is_the_minimum_and_an_idle_partition_stops_holding_it")
    else {
        return;
    };
    let broker = Broker::start(tansu);
    let topic = topic_name("watermark");
    create_topic(&broker.address(), &topic, 4);
    // Partitions 0..3 get ten records each, with event times far apart; partition 3 none.
    let bases = [10_000i64, 20_000, 5_000];
    let sent: Vec<Record> = (0..30)
        .map(|i| Record {
            partition: (i % 3) as i32,
            key: vec![],
            value: format!("{i}").into_bytes(),
            timestamp: bases[i % 3] + (i / 3) as i64,
        })
        .collect();
    produce(&broker.address(), &topic, &sent);
    let mut config = config(&broker.address(), &topic, "g-watermark");
    config.idle_timeout = Duration::from_millis(1_500);
    let mut source = KafkaSource::connect(config).expect("connect");
    let started = Instant::now();
    let mut assigned_at = None;
    let mut read = 0;
    while read < sent.len() {
        assert!(started.elapsed() < Duration::from_secs(30), "read {read}");
        match source.poll(Duration::from_millis(100)).unwrap() {
            Event::Assigned(parts) => {
                assert_eq!(parts.len(), 4);
                assigned_at = Some(Instant::now());
            }
            Event::Message(m) => {
                source.observe_time(&m.partition, m.timestamp.unwrap() as u64);
                read += 1;
            }
            _ => {}
        }
    }
    let assigned_at = assigned_at.unwrap();
    if assigned_at.elapsed() < Duration::from_millis(1_200) {
        assert_eq!(source.watermark(), None, "partition 3 holds it until idle");
    }
    while assigned_at.elapsed() < Duration::from_millis(1_700) {
        source.poll(Duration::from_millis(100)).unwrap();
    }
    let p3 = Partition::new(topic.as_str(), 3);
    assert!(source.clock().is_idle(&p3, Instant::now()));
    // The minimum over partitions 0..3 of their largest time: partition 2's.
    assert_eq!(source.watermark(), Some(5_009));
}
