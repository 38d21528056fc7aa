//! A real broker for the tests: the Tansu binary named by `TIDEMARK_TANSU`
//! (`scripts/kafka-broker` installs it), one broker per test on a free port, in-memory
//! storage, killed when the test's guard drops. Without the variable a test prints a loud
//! SKIPPED line and passes, unless `TIDEMARK_REQUIRE_KAFKA=1`.
#![allow(dead_code)]

use std::future::Future;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::pin::pin;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::ClientConfig;
use tidemark_kafka::{Config, Event, KafkaSource, Message};

/// The Tansu binary, or `None` after printing why the test is skipped.
pub fn tansu(test: &str) -> Option<PathBuf> {
    match std::env::var_os("TIDEMARK_TANSU") {
        Some(path) if !path.is_empty() => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "TIDEMARK_TANSU={} is not a file",
                path.display()
            );
            Some(path)
        }
        _ => {
            if std::env::var("TIDEMARK_REQUIRE_KAFKA").as_deref() == Ok("1") {
                panic!(
                    "{test}: TIDEMARK_REQUIRE_KAFKA=1 but TIDEMARK_TANSU is not set \
                     (export TIDEMARK_TANSU=\"$(scripts/kafka-broker)\")"
                );
            }
            eprintln!(
                "\n*** SKIPPED {test}: no Kafka broker (set TIDEMARK_TANSU to the Tansu binary: \
                 export TIDEMARK_TANSU=\"$(scripts/kafka-broker)\") ***\n"
            );
            None
        }
    }
}

/// A port nobody listens on (at the time of asking).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

/// A running broker, killed on drop.
pub struct Broker {
    binary: PathBuf,
    pub port: u16,
    child: Option<Child>,
}

impl Broker {
    /// Starts a broker on a free port and waits until it accepts connections.
    pub fn start(binary: PathBuf) -> Broker {
        let mut broker = Broker {
            binary,
            port: free_port(),
            child: None,
        };
        broker.restart();
        broker
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the broker (its in-memory data goes with it).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the broker again on the same port.
    pub fn restart(&mut self) {
        self.kill();
        let url = format!("tcp://127.0.0.1:{}", self.port);
        let child = Command::new(&self.binary)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
                "--storage-engine",
                "memory://tansu/",
            ])
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Tansu broker");
        self.child = Some(child);
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "Tansu did not listen on port {} within 10 s",
                self.port
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on this thread (rdkafka's admin client answers through a
/// channel; no runtime is needed to wait for it).
pub fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut context) {
            return out;
        }
        thread::park_timeout(Duration::from_millis(50));
    }
}

/// Creates `topic` with `partitions` partitions.
pub fn create_topic(brokers: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .expect("admin client");
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let results = block_on(admin.create_topics([&new], &options)).expect("create_topics");
    for result in results {
        result.unwrap_or_else(|(name, code)| panic!("creating topic {name}: {code}"));
    }
}

/// One message to produce.
#[derive(Clone, Debug)]
pub struct Record {
    pub partition: i32,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub timestamp: i64,
}

/// `count` records spread round-robin over `partitions`, value `v{i}`, key `k{i}`, timestamp
/// `base + i`.
pub fn records(count: usize, partitions: i32, base: i64) -> Vec<Record> {
    (0..count)
        .map(|i| Record {
            partition: (i as i32) % partitions,
            key: format!("k{i}").into_bytes(),
            value: format!("v{i}").into_bytes(),
            timestamp: base + i as i64,
        })
        .collect()
}

/// Produces `records` to `topic` and waits until the broker acknowledged them all.
pub fn produce(brokers: &str, topic: &str, records: &[Record]) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        // Each record is sent once and acknowledged by the one broker: the idempotent
        // producer's extra requests are not needed here.
        .set("enable.idempotence", "false")
        .set("acks", "all")
        .create()
        .expect("producer");
    for record in records {
        let mut attempt = BaseRecord::to(topic)
            .partition(record.partition)
            .key(&record.key)
            .payload(&record.value)
            .timestamp(record.timestamp);
        loop {
            match producer.send(attempt) {
                Ok(()) => break,
                Err((e, back)) if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) => {
                    // Let deliveries drain.
                    attempt = back;
                    thread::sleep(Duration::from_millis(5));
                }
                Err((e, _)) => panic!("producing to {topic}: {e}"),
            }
        }
    }
    producer
        .flush(Duration::from_secs(20))
        .expect("every record acknowledged");
    assert_eq!(producer.in_flight_count(), 0);
}

/// A consumer config with group timings short enough for quick rebalances.
pub fn config(brokers: &str, topic: &str, group: &str) -> Config {
    let mut config = Config::new(brokers, [topic], group)
        .property("session.timeout.ms", "6000")
        .property("heartbeat.interval.ms", "500")
        .property("statistics.interval.ms", "200");
    config.connect_timeout = Duration::from_secs(10);
    config
}

/// Polls until `End`, returning the messages; panics after `limit`.
pub fn read_to_end(source: &mut KafkaSource, limit: Duration) -> Vec<Message> {
    let started = Instant::now();
    let mut out = Vec::new();
    loop {
        assert!(
            started.elapsed() < limit,
            "no End within {limit:?} ({} messages read)",
            out.len()
        );
        match source.poll(Duration::from_millis(200)).expect("poll") {
            Event::Message(m) => out.push(m),
            Event::End => return out,
            Event::Notice(n) => eprintln!("notice: {n}"),
            _ => {}
        }
    }
}

/// A topic name unique to a test.
pub fn topic_name(test: &str) -> String {
    format!("{test}-{}", std::process::id())
}
