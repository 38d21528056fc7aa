//! The floor under any librdkafka consumer: the CPU a bare `BaseConsumer` spends to receive
//! each message of a topic and drop it (no parsing, no state), to hold beside `tidemark run`'s
//! records per CPU-second from a topic and from a file (BENCHMARKS.md, "Kafka source").
//!
//! ```text
//! cargo run --release -p tidemark-kafka --example consume_floor -- produce BROKERS TOPIC FILE
//! cargo run --release -p tidemark-kafka --example consume_floor -- read BROKERS TOPIC N
//! ```
//!
//! `produce` sends the lines of FILE after its header, one message each, to partitions 0–3 in
//! turn (the topic must exist with 4 partitions); `read` assigns those 4 partitions from their
//! start, reads N messages, and prints the process's CPU (user + system, all threads) per
//! message.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

/// The process's CPU seconds so far, user and system, from `/proc/self/stat` (Linux).
fn cpu_seconds() -> Result<f64, Box<dyn std::error::Error>> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    // The fields after the command's closing parenthesis; utime and stime are the 12th and
    // 13th of them, in clock ticks (100 a second on Linux).
    let after = stat.rsplit_once(')').ok_or("no ) in /proc/self/stat")?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).ok_or("no utime")?.parse::<u64>()?
        + fields.get(12).ok_or("no stime")?.parse::<u64>()?;
    Ok(ticks as f64 / 100.0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: consume_floor produce BROKERS TOPIC FILE | read BROKERS TOPIC N";
    let (Some(mode), Some(brokers), Some(topic), Some(last)) =
        (args.first(), args.get(1), args.get(2), args.get(3))
    else {
        return Err(usage.into());
    };
    match mode.as_str() {
        "produce" => {
            let text = std::fs::read_to_string(last)?;
            let producer: BaseProducer = ClientConfig::new()
                .set("bootstrap.servers", brokers)
                .set("linger.ms", "50")
                .set("batch.num.messages", "10000")
                .set("queue.buffering.max.messages", "1000000")
                .create()?;
            for (i, line) in text.lines().skip(1).enumerate() {
                let mut record = BaseRecord::<(), str>::to(topic)
                    .payload(line)
                    .partition((i % 4) as i32);
                // A full queue: serve the deliveries and try again.
                while let Err((_, back)) = producer.send(record) {
                    producer.poll(Duration::from_millis(10));
                    record = back;
                }
            }
            producer.flush(Duration::from_secs(120))?;
        }
        "read" => {
            let n: usize = last.parse()?;
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", brokers)
                .set("group.id", "consume-floor")
                .set("enable.auto.commit", "false")
                .create()?;
            let mut partitions = TopicPartitionList::new();
            for p in 0..4 {
                partitions.add_partition_offset(topic, p, Offset::Beginning)?;
            }
            consumer.assign(&partitions)?;
            let (cpu, wall) = (cpu_seconds()?, Instant::now());
            let (mut got, mut bytes) = (0usize, 0usize);
            while got < n {
                if let Some(m) = consumer.poll(Duration::from_millis(100)) {
                    bytes += m?.payload().map_or(0, <[u8]>::len);
                    got += 1;
                }
            }
            let used = cpu_seconds()? - cpu;
            println!(
                "{got} messages, {bytes} bytes: {used:.2} CPU-s ({:.0} ns a message), {:.2} s",
                used * 1e9 / got as f64,
                wall.elapsed().as_secs_f64()
            );
        }
        _ => return Err(usage.into()),
    }
    Ok(())
}
