//! `tidemark run`: the keyed event-time pipeline over files or stdin, into an embedded store.
//!
//! Alerts are JSON lines on stdout; the summary (and the progress bar, when stderr is a
//! terminal and the input is files) goes to stderr. A store written before is resumed from its
//! committed input position, so a run killed at any point and started again with the same
//! arguments counts every record once.
//!
//! With a `[source] kind = "kafka"` table (or `--brokers`/`--topic`) the run reads a Kafka topic
//! instead of files ([`kafka`]): it follows the topic until SIGINT or SIGTERM (a final
//! checkpoint, exit 0), or with `--until-end` stops at the partitions' ends as seen at start.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidemark_cli::outln;

use serde_json::json;
use tidemark_cluster::{AlertDuty, PartitionStore, Server};
use tidemark_stream::pipeline::{self, AlertOut, Follow, RunOptions, RunReport};
use tidemark_stream::store::{RedbStore, Store, StoreError};
use tidemark_stream::RunError;

use crate::cmd::check::{damaged, store_error};
use crate::UsageError;

pub mod kafka;
mod scale_out;

/// Arguments of `tidemark run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The pipeline's TOML config (see examples/ in the repository).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The store: one redb file, created if absent, resumed if present.
    #[arg(long, value_name = "FILE", default_value = "tidemark.db")]
    pub db: PathBuf,
    /// Keep the state in Redis instead of a file, as parts of a run spread over processes
    /// and machines: `redis://[[user]:password@]host:port[,host:port…]` (a server, or a
    /// cluster's seed nodes).
    /// Reading a Kafka topic, this run is one worker of the consumer group, each partition it
    /// is given kept as the part `<topic>:<partition>`; reading files, it writes the part
    /// --part names. `tidemark query --store` reads every part merged (docs/scale-out.md).
    #[arg(long, value_name = "URL", conflicts_with_all = ["db", "serve"])]
    pub store: Option<String>,
    /// With --store and files: the part this run writes (`flows:3`: 1 to 260 of A-Z a-z 0-9
    /// . _ : -), claimed for this run: a run that claimed it before can no longer write it.
    /// Every part's keys are its own (split the input by key), and a part resumes where it
    /// stopped.
    #[arg(long, value_name = "NAME", requires = "store")]
    pub part: Option<String>,
    /// With --store: after each checkpoint, also put every key's buckets it wrote into the
    /// tidemark-redis module's value of the key (`tm:<metric>:<key>`), where any Redis client
    /// asks for the key's windows merged over the partitions (`TMWINDOW.GET`). The module must
    /// be loaded on every master; Redis then holds the buckets twice (docs/scale-out.md).
    #[arg(long, requires = "store")]
    pub publish: bool,
    /// With --store: where the alert rules are evaluated. `merged` (the default for Kafka
    /// workers): once for the whole run, on the parts merged, at each close every part has
    /// closed, by one worker at a time (the alert duty, a lease in Redis) — right whatever a
    /// metric is keyed by, at least once, no early alerts. `partition` (the default with
    /// --part, whose keys are the part's own): by each part's engine on its share of a key —
    /// early alerts and no wait for the slowest partition, right only for metrics keyed as
    /// the input is partitioned. A file part run with `merged` evaluates, at its end, the
    /// closes every part listed then has closed (docs/scale-out.md).
    #[arg(long, value_enum, value_name = "WHERE", requires = "store")]
    pub alerts: Option<AlertsAt>,
    /// Count and report malformed lines instead of stopping at the first.
    #[arg(long)]
    pub skip_bad: bool,
    /// Close every bucket at the end of the input, for a final answer (and read a last line
    /// without a newline as a record). By default the buckets that later input could still
    /// reach stay open, and a last line without a newline waits: the next run continues
    /// them, so a log split into parts counts as one (`query` sees open buckets, marked
    /// partial).
    #[arg(long)]
    pub close: bool,
    /// The default (kept for scripts that name it): leave the last buckets open.
    #[arg(long, hide = true, conflicts_with = "close")]
    pub keep_open: bool,
    /// Read the given files from their start as new data, even files read before whose
    /// contents changed since (by default such a file is refused: resuming it would skip or
    /// repeat lines).
    #[arg(long)]
    pub restart: bool,
    /// The memory budget of the keys' state (e.g. 512MiB, 2GiB; overrides the config's
    /// `[state] max_memory`, default 1GiB): past a third of it, the least recently active
    /// quiet keys are written to the store and leave memory.
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Option<String>,
    /// Threads to use (default: every core the machine has; 1: one thread). With two or more,
    /// the lines of a file, a named pipe or standard input are split and parsed in a thread of
    /// their own while another feeds the engine, and checkpoints are written by a third (on
    /// Linux these two at nice +5, behind the engine's); a followed file and a Kafka topic are
    /// read in one thread. The answers, alerts and stored rows are the same whatever the
    /// number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
    /// Follow the file as it grows (`tail -F`): read lines as they are appended, go on
    /// across a rotation (the path names a new file, or none: the old one is read to its end
    /// and kept until it has been idle for --rotate-wait, then the new one) and a truncation
    /// (read again from the start), checkpoint while idle, and stop on SIGINT or SIGTERM with
    /// a final commit. One file.
    #[arg(long, conflicts_with = "close")]
    pub follow: bool,
    /// With --follow: how long a rotated file must stay idle (not grow) before the run moves
    /// on to the path's new file; a writer still holding the old file within it loses
    /// nothing (as `tail -F`, or Fluent Bit's Rotate_Wait). The new file's lines wait
    /// meanwhile, so they never count the old file's later lines as late.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "5s",
        requires = "follow"
    )]
    pub rotate_wait: String,
    /// Read a Kafka topic from these brokers (host:port[,host:port…]; overrides the config's
    /// [source] brokers).
    #[arg(long, value_name = "HOSTS")]
    pub brokers: Option<String>,
    /// The Kafka topic to read (repeat for several; overrides [source] topic).
    #[arg(long, value_name = "TOPIC")]
    pub topic: Vec<String>,
    /// The Kafka consumer group (overrides [source] group; default "tidemark").
    #[arg(long, value_name = "GROUP")]
    pub group: Option<String>,
    /// Kafka: stop at the end offsets the partitions had at start (a backfill), instead of
    /// following the topic until SIGINT or SIGTERM.
    #[arg(long)]
    pub until_end: bool,
    /// Print no summary.
    #[arg(long)]
    pub quiet: bool,
    /// Print the summary as one JSON line on standard output, after the alerts (per metric;
    /// docs/output.md), instead of text on standard error.
    #[arg(long)]
    pub json: bool,
    /// Serve the store while the run writes it, on this address and port (e.g.
    /// 127.0.0.1:9464; loopback unless told otherwise): the server of `tidemark serve`
    /// (JSON API, Prometheus /metrics, dashboard), read-only beside the run, its /metrics
    /// adding the run's own counts (bad lines, alerts, start time, memory budget, a Kafka
    /// source's lag per partition).
    #[arg(long, value_name = "ADDR:PORT")]
    pub serve: Option<String>,
    /// With --serve: a file holding the bearer token every request must carry (as `tidemark
    /// serve --token-file`).
    #[arg(long, value_name = "FILE", requires = "serve")]
    pub serve_token_file: Option<PathBuf>,
    /// With --serve: keys per metric in /metrics (1 to 10,000; as `tidemark serve --top`).
    #[arg(long, value_name = "N", default_value_t = 100, requires = "serve")]
    pub serve_top: usize,
    /// Input files (standard input if none).
    pub files: Vec<PathBuf>,
}

/// Where a run with `--store` evaluates its alert rules.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertsAt {
    /// Once for the run, on the parts merged (the alert duty).
    Merged,
    /// By each partition's engine, on its share.
    Partition,
}

impl Args {
    /// Whether the run's alerts are the alert duty's, not its partitions' engines'.
    pub(super) fn merged_alerts(&self) -> bool {
        let default = if self.part.is_some() {
            AlertsAt::Partition
        } else {
            AlertsAt::Merged
        };
        self.store.is_some() && self.alerts.unwrap_or(default) == AlertsAt::Merged
    }
}

/// How long a worker that ends waits for the alert duty (held by another worker, in a long
/// round, or by one killed, whose lease lapses) to evaluate what its own last commits closed.
pub(super) const DUTY_WAIT: Duration = Duration::from_secs(30);

/// Prints an alert line on standard output (as a partition's engine does, a line standard
/// output refuses is dropped: the run goes on).
pub(super) fn print_alert(a: &AlertOut) {
    let _ = writeln!(std::io::stdout().lock(), "{}", alert_json(a));
}

/// The merged alerts' last rounds of a run that ends, on standard output (docs/scale-out.md).
pub(super) fn finish_duty(duty: &mut AlertDuty, wait: Duration) {
    if let Err(e) = duty.finish(&mut print_alert, wait) {
        eprintln!("tidemark: the merged alerts: {e}");
    }
}

/// An alert as one JSON object (docs/output.md): the window as `from`/`to`, as a query's rows
/// name it, and the phase (`early`, `closed`, `confirmed`, `withdrawn`) with the event time
/// it was raised `at`.
pub fn alert_json(a: &AlertOut) -> serde_json::Value {
    let e = &a.alert.estimate;
    let rfc = crate::cmd::query::rfc3339;
    let mut v = json!({
        "metric": a.metric,
        "key": a.key,
    });
    // A frequency metric's alert counts one item: name it.
    if let Some(item) = &a.alert.item {
        v["item"] = String::from_utf8_lossy(item).into_owned().into();
    }
    // A quantile metric's alert is about one quantile of the window: name it.
    if let Some(q) = a.alert.quantile {
        v["quantile"] = q.into();
    }
    for (k, x) in [
        ("phase", json!(a.alert.phase.name())),
        ("at", json!(rfc(a.alert.at))),
        ("from", json!(rfc(a.alert.window_start))),
        ("to", json!(rfc(a.alert.window_end))),
        ("estimate", json!(e.value)),
        ("low", json!(e.low)),
        ("high", json!(e.high)),
        ("confidence", json!(e.confidence())),
        ("method", json!(e.method.to_string())),
        ("threshold", json!(a.alert.threshold)),
        ("limit", json!(a.alert.limit)),
        ("id", json!(alert_id(a))),
    ] {
        v[k] = x;
    }
    v
}

/// An alert line's identity: 16 hex digits of a hash of its metric, key, item or quantile,
/// phase and window. Alerts are delivered at least once (a run resumed after a crash, or a
/// partition taken over by another worker, raises again what it raised after its last
/// checkpoint), and a line raised again has the same id.
fn alert_id(a: &AlertOut) -> String {
    let mut bytes = Vec::with_capacity(64);
    for part in [a.metric.as_bytes(), a.key.as_bytes()] {
        bytes.extend_from_slice(&(part.len() as u64).to_le_bytes());
        bytes.extend_from_slice(part);
    }
    let item = a.alert.item.as_deref().unwrap_or_default();
    bytes.extend_from_slice(&(item.len() as u64).to_le_bytes());
    bytes.extend_from_slice(item);
    bytes.extend_from_slice(
        &a.alert
            .quantile
            .map_or(u64::MAX, f64::to_bits)
            .to_le_bytes(),
    );
    bytes.extend_from_slice(a.alert.phase.name().as_bytes());
    bytes.extend_from_slice(&a.alert.window_start.to_le_bytes());
    bytes.extend_from_slice(&a.alert.window_end.to_le_bytes());
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes))
}

/// The threads a run uses by default: every core the system gives the process.
pub fn every_core() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Maps a pipeline error to the CLI's kinds: input, config and damaged-store errors exit 2.
pub fn run_error(db: &std::path::Path, e: RunError) -> anyhow::Error {
    match e {
        RunError::BadLine {
            file,
            line,
            message,
        } => crate::input::Loc { file, line }.error(message),
        e @ RunError::BadMessage { .. } => UsageError::file("tidemark run", e),
        RunError::Store(e) => store_error(db, e),
        RunError::State(e) => damaged(db, format!("its run state: {e}")),
        // A budget too small for the keys that cannot spill is the user's setting, not damage.
        RunError::Engine(e @ tidemark_stream::EngineError::Budget { .. }) => {
            UsageError::file("tidemark run", e)
        }
        RunError::Engine(e) => damaged(db, e),
        e if e.is_usage() => UsageError::file("tidemark run", e),
        e => anyhow::anyhow!(e),
    }
}

/// Runs `tidemark run`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let text = crate::input::read_config(&args.config)?;
    // Validate before touching the store, so a bad config never creates a file.
    let mut config = tidemark_stream::config::Config::from_toml(&text)
        .map_err(|e| UsageError::file(args.config.display(), e))?;
    if let Some(size) = &args.max_memory {
        let n = tidemark_stream::config::parse_size(size)
            .map_err(|e| UsageError::flag("--max-memory", e))?;
        if n < tidemark_stream::config::MIN_MAX_MEMORY {
            return Err(UsageError::flag("--max-memory", "at least 64KiB"));
        }
        config.checkpoint.max_memory = n;
    }
    let rotate_wait =
        tidemark_stream::time::parse_duration(&args.rotate_wait).ok_or_else(|| {
            UsageError::flag(
                "--rotate-wait",
                format!("a duration such as 5s or 500ms, got {:?}", args.rotate_wait),
            )
        })?;
    let reads_kafka = kafka::wanted(&config, &args);
    if reads_kafka && !args.files.is_empty() {
        return Err(UsageError::flag(
            "FILES",
            "a run reads a Kafka topic ([source] or --brokers/--topic) or files, not both",
        ));
    }
    if reads_kafka && args.follow {
        return Err(UsageError::flag(
            "--follow",
            "a Kafka topic is followed already (until SIGINT or SIGTERM; --until-end stops at \
             its end)",
        ));
    }
    if args.until_end && !reads_kafka {
        return Err(UsageError::flag(
            "--until-end",
            "for a Kafka source ([source] or --brokers/--topic)",
        ));
    }
    if args.follow && args.files.len() != 1 {
        return Err(UsageError::flag(
            "--follow",
            format!("follows one named file, got {}", args.files.len()),
        ));
    }
    if let Some(url) = &args.store {
        let part = match (&args.part, reads_kafka) {
            (None, true) => None,
            (Some(_), true) => {
                return Err(UsageError::flag(
                    "--part",
                    "a Kafka worker's parts are its partitions (<topic>:<partition>): give \
                     --store alone",
                ))
            }
            (Some(p), false) => Some(p),
            (None, false) => {
                return Err(UsageError::flag(
                    "--store",
                    "a run of files writes one part of the store: name it with --part",
                ))
            }
        };
        let server = Server::connect(url).map_err(|e| UsageError::flag("--store", e))?;
        let Some(part) = part else {
            return scale_out_worker(&config, &args, &server);
        };
        let mut store = PartitionStore::claim(&server, part).map_err(|e| match e {
            e @ StoreError::PartName { .. } => UsageError::flag("--part", e),
            e => UsageError::flag("--store", e),
        })?;
        if args.publish {
            store = store
                .publishing()
                .map_err(|e| UsageError::flag("--publish", e))?;
        }
        let started = Instant::now();
        let report = execute(
            &config,
            &mut store,
            &args,
            Duration::from_millis(rotate_wait),
            None,
            None,
        )?;
        if args.merged_alerts() {
            let mut duty = AlertDuty::new(&server, &config, &format!("part {part}"));
            finish_duty(&mut duty, DUTY_WAIT);
        }
        return finish(&args, &report, started);
    }
    let mut store = RedbStore::open_for_run(&args.db, config.checkpoint.max_memory)
        .map_err(|e| store_error(&args.db, e))?;
    let started = Instant::now();
    let live = match &args.serve {
        Some(addr) => {
            let flags = crate::cmd::serve::Flags {
                listen: addr.clone(),
                token_file: args.serve_token_file.clone(),
                top: args.serve_top,
                alerts: None,
            };
            let health = crate::cmd::serve::beside_run(flags, &args.db)?;
            health.set_budget(config.checkpoint.max_memory);
            Some(health)
        }
        None => None,
    };
    let messages = if reads_kafka {
        let messages = kafka::connect(&config, &args)?;
        Some(match &live {
            Some(health) => {
                let health = Arc::clone(health);
                messages.on_committed(move |partitions| {
                    health.set_lag(
                        partitions
                            .iter()
                            .filter_map(|p| Some((p.topic.clone(), p.partition, p.lag?)))
                            .collect(),
                    )
                })
            }
            None => messages,
        })
    } else {
        None
    };
    let report = execute(
        &config,
        &mut store,
        &args,
        Duration::from_millis(rotate_wait),
        messages,
        live.as_deref(),
    )?;
    // The pages the run's commits freed go back to the file system (the store is whole
    // either way: a compaction that fails or is refused changes no row).
    if let Err(e) = store.compact_if_loose() {
        eprintln!("tidemark: the store was not compacted: {e}");
    }
    finish(&args, &report, started)
}

/// A worker of the group reading a Kafka topic, its partitions' state in Redis.
fn scale_out_worker(
    config: &tidemark_stream::config::Config,
    args: &Args,
    server: &Server,
) -> anyhow::Result<()> {
    let source = kafka::source(config, args)?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_default(signal, Arc::clone(&stop))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&stop)))
            .map_err(|e| anyhow::anyhow!("cannot handle signal {signal}: {e}"))?;
    }
    let started = Instant::now();
    let worked = scale_out::work(config, args, server, source, &stop)?;
    if args.json {
        outln!(
            "{}",
            json!({
                "partition_runs": worked.runs,
                "records_this_run": worked.records,
                "seconds": started.elapsed().as_secs_f64(),
            })
        );
    } else if !args.quiet {
        eprintln!(
            "tidemark: {} records this run, in {} partition runs, in {:.2} s",
            worked.records,
            worked.runs,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// The run's summary.
fn finish(args: &Args, report: &RunReport, started: Instant) -> anyhow::Result<()> {
    let secs = started.elapsed().as_secs_f64();
    if args.json {
        outln!("{}", summary_json(report, secs));
    } else if !args.quiet {
        print_summary(report, secs);
    }
    Ok(())
}

/// The process's peak resident memory so far, bytes (Linux's `VmHWM`; `None` elsewhere).
pub fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse::<u64>()
        .ok()?;
    Some(kb * 1024)
}

/// The run summary as one JSON object: the run's figures, and per metric its counters, and
/// the process's peak memory.
pub fn summary_json(r: &RunReport, secs: f64) -> serde_json::Value {
    let metrics: Vec<serde_json::Value> = r
        .metrics
        .iter()
        .map(|m| {
            json!({
                "metric": m.name,
                "events": m.counters.events,
                "late": m.counters.late,
                "dropped": m.counters.dropped,
                "merged": m.counters.merged,
                "buckets": m.counters.buckets,
                "alerts": m.counters.alerts,
                "live_keys": m.live_keys,
            })
        })
        .collect();
    let mut summary = json!({
        "summary": "run",
        "records": r.records,
        "records_this_run": r.records_this_run,
        "resumed": r.resumed,
        "bad_lines": r.bad_lines,
        "seconds": secs,
        "commits": r.commits,
        "spills": r.spills,
        "written_ahead": r.written_ahead,
        "metrics": metrics,
    });
    if !r.partitions.is_empty() {
        let partitions: Vec<serde_json::Value> = r
            .partitions
            .iter()
            .map(|p| {
                json!({
                    "topic": p.topic,
                    "partition": p.partition,
                    "position": p.position,
                    "lag": p.lag,
                })
            })
            .collect();
        summary["source"] = json!({
            "kind": "kafka",
            "bad_messages": r.bad_lines,
            "partitions": partitions,
        });
    }
    if let (Some(peak), Some(map)) = (peak_rss(), summary.as_object_mut()) {
        map.insert("peak_rss_bytes".into(), peak.into());
    }
    summary
}

fn execute(
    config: &tidemark_stream::config::Config,
    store: &mut (dyn Store + Send),
    args: &Args,
    rotate_wait: Duration,
    messages: Option<tidemark_kafka::KafkaMessages<'static>>,
    live: Option<&tidemark_serve::RunHealth>,
) -> anyhow::Result<RunReport> {
    let bar = if std::io::stderr().is_terminal() && !args.files.is_empty() {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} eta {eta}",
            )
            .expect("a valid template"),
        );
        Some(b)
    } else {
        None
    };
    let mut progress = |done: u64, total: u64| {
        if let Some(b) = &bar {
            b.set_length(total);
            b.set_position(done);
        }
    };
    let mut bad_shown = 0u32;
    let mut on_bad = |file: &str, line: u64, message: &str| {
        if bad_shown < 10 {
            // A message is named by topic, partition and offset, with no line.
            if line == 0 {
                eprintln!("tidemark: skipped {file}: {message}");
            } else {
                eprintln!("tidemark: skipped {file}:{line}: {message}");
            }
        }
        bad_shown += 1;
        if let Some(l) = live {
            l.bad_line();
        }
    };
    let mut on_checkpoint = |c: &tidemark_stream::pipeline::Checkpointed| {
        if let Some(l) = live {
            l.set_open_bytes(c.open_bytes);
        }
    };
    let stdout = std::io::stdout();
    let mut write_err = None;
    // The alert duty evaluates a store's rules merged: the part's own engine keeps quiet.
    let quiet_alerts = args.merged_alerts();
    let mut on_alert = |a: &AlertOut| {
        if quiet_alerts {
            return;
        }
        let mut out = stdout.lock();
        if let Err(e) = writeln!(out, "{}", alert_json(a)) {
            write_err.get_or_insert(e);
        }
        if let Some(l) = live {
            l.alert();
        }
    };
    // SIGINT and SIGTERM stop a run of files in order: what was read is committed, and the
    // next run goes on from there (a second signal of the same kind is left to its default).
    // Standard input, a named pipe and a device keep the default: a read blocked on an idle
    // pipe would not see a flag, nor would an endless scan of `/dev/zero`, and a killed run
    // resumes from its last checkpoint anyway.
    let stop = Arc::new(AtomicBool::new(false));
    let stream =
        |f: &std::path::PathBuf| std::fs::metadata(f).is_ok_and(|m| !m.is_file() && !m.is_dir());
    // A Kafka source polls in short waits, so it sees the flag.
    let signals = if messages.is_none() && (args.files.is_empty() || args.files.iter().any(stream))
    {
        &[][..]
    } else {
        &[signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM][..]
    };
    for &signal in signals {
        signal_hook::flag::register_conditional_default(signal, Arc::clone(&stop))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&stop)))
            .map_err(|e| anyhow::anyhow!("cannot handle signal {signal}: {e}"))?;
    }
    let result = pipeline::run(
        config,
        store,
        RunOptions {
            inputs: args.files.clone(),
            skip_bad: args.skip_bad,
            keep_open: !args.close,
            restart: args.restart,
            progress: Some(&mut progress),
            on_bad: Some(&mut on_bad),
            follow: args.follow.then_some(Follow {
                poll: Duration::from_millis(200),
                rotate_wait,
            }),
            stop: Some(&stop),
            messages: messages
                .map(|m| Box::new(m) as Box<dyn tidemark_stream::pipeline::MessageSource>),
            on_checkpoint: live.is_some().then_some(&mut on_checkpoint),
            threads: args.threads.map_or_else(every_core, usize::from),
        },
        &mut on_alert,
    );
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    if let Some(e) = write_err {
        return Err(e.into());
    }
    let name = args
        .store
        .as_ref()
        .map_or_else(|| args.db.clone(), std::path::PathBuf::from);
    result.map_err(|e| run_error(&name, e))
}

/// The summary on stderr: the run's figures, then each metric's counters (which are
/// cumulative over the store's runs, as `records` is).
pub fn print_summary(r: &RunReport, secs: f64) {
    let rate = if secs > 0.0 {
        r.records_this_run as f64 / secs
    } else {
        0.0
    };
    eprintln!(
        "tidemark: {} records this run{} in {:.2} s ({:.0} records/s), {} bad lines{}{}",
        r.records_this_run,
        if r.resumed {
            format!(" (resumed; {} in all)", r.records)
        } else {
            String::new()
        },
        secs,
        rate,
        r.bad_lines,
        if r.spills > 0 {
            format!(", {} spills of quiet keys to the store", r.spills)
        } else {
            String::new()
        },
        peak_rss().map_or(String::new(), |b| format!(
            ", peak memory {:.0} MiB",
            b as f64 / (1 << 20) as f64
        ))
    );
    for p in &r.partitions {
        eprintln!(
            "  {}[{}]: next offset {}, lag {}",
            p.topic,
            p.partition,
            p.position.map_or("unknown".to_string(), |o| o.to_string()),
            p.lag.map_or("unknown".to_string(), |l| l.to_string())
        );
    }
    for m in &r.metrics {
        let c = &m.counters;
        eprintln!(
            "  {}: {} events, {} keys in memory, {} buckets stored, {} late (own bucket), {} \
             dropped, {} merged late, {} alerts",
            m.name, c.events, m.live_keys, c.buckets, c.late, c.dropped, c.merged, c.alerts
        );
    }
}
