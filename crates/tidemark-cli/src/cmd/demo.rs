//! `tidemark demo`: the fan-out scan detector (a ring of HyperLogLogs per source, set as in the
//! detector's design figures) on a generated flow log, with an embedded store: a temporary one
//! deleted at exit, or kept where `--db` says, for `tidemark query`. `--emit` writes the log
//! alone, as the CSV `tidemark run` reads; `--brokers` with `--topic` writes it into a Kafka
//! topic instead, one line a message keyed by source (what `examples/kafka.toml` reads).
//!
//! The log has a health checker hitting 4 targets every second (the most flows by far, and a
//! fan-out of 4), ordinary users, a laptop probing 1,024 ports on each of 3 hosts in two
//! minutes, and some late events. The detector counts distinct (dst_ip, dst_port) per src_ip
//! over 5 minutes in 1-minute HyperLogLog buckets and alerts above 500 by 3 standard errors.
//! Volume would rank the health checker first; fan-out flags the laptop.

use std::collections::HashMap;
use std::time::Instant;
use tidemark_cli::outln;

use tidemark_stream::engine::AlertPhase;
use tidemark_stream::flowgen::{FlowLog, FlowSpec, FANOUT_CONFIG};
use tidemark_stream::pipeline::{self, AlertOut, RunOptions};
use tidemark_stream::query;
use tidemark_stream::store::RedbStore;

use crate::input::SaveTo;

/// Arguments of `tidemark demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Minutes of event time to generate (at most a day: the log is built in memory).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub minutes: u64,
    /// Ordinary users (at most 64,000: they are 10.2.0.1 to 10.2.255.250).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(0..=64_000))]
    pub users: u32,
    /// Scanning laptops (at most 254: they are 10.9.0.1 to 10.9.0.254).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=254))]
    pub scanners: u32,
    /// Random seed of the generated log.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// JSON lines (alerts, then a summary object) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Where to write the chart (SVG: fan-out per source over time, with the threshold and
    /// the error bars), replacing the file there. Written only in text mode.
    #[arg(long, value_name = "FILE", default_value = "tidemark-demo.svg")]
    pub chart: std::path::PathBuf,
    /// Write no chart.
    #[arg(long)]
    pub no_chart: bool,
    /// Keep the demo's store at FILE, for `tidemark query --db FILE --metric fanout` (default:
    /// a temporary store, deleted at exit). A file already there is refused unless --force.
    #[arg(long, value_name = "FILE", conflicts_with = "emit")]
    pub db: Option<std::path::PathBuf>,
    /// With --db: replace a file already at FILE.
    #[arg(long, requires = "db")]
    pub force: bool,
    /// Only write the generated flow log to this CSV file (`ts,src_ip,dst_ip,dst_port`, the
    /// input of `tidemark run --config examples/fanout.toml`), replacing the file there: the
    /// same flags write the same log, byte for byte.
    #[arg(long, value_name = "FILE")]
    pub emit: Option<std::path::PathBuf>,
    /// Only write the generated flow log into this Kafka topic, at the brokers of --brokers:
    /// each line after the header one message, keyed by its source address, its timestamp the
    /// flow's time (the input of `tidemark run --config examples/kafka.toml`). Create the topic
    /// first with the partitions you want: a broker that creates topics on first use gives its
    /// default count, and one that does not is named in the error.
    #[arg(long, value_name = "TOPIC", requires = "brokers", conflicts_with_all = ["emit", "db"])]
    pub topic: Option<String>,
    /// With --topic: the Kafka brokers (host:port, comma-separated).
    #[arg(long, value_name = "LIST", requires = "topic")]
    pub brokers: Option<String>,
    /// With --emit or --topic: add each flow's response time, a `latency_ms` column (the input
    /// of `tidemark run --config examples/latency.toml`; one destination in sixteen has an
    /// incident in minutes 10 to 14).
    #[arg(long)]
    pub latency: bool,
}

/// Writes the log's lines after its header into `topic`, keyed by their source address (the
/// second field), timestamped with their time (the first, in seconds).
fn to_topic(csv: &str, brokers: &str, topic: &str) -> anyhow::Result<()> {
    let records = csv.lines().skip(1).map(|line| {
        let mut fields = line.split(',');
        let seconds: i64 = fields.next().and_then(|t| t.parse().ok()).unwrap_or(0);
        tidemark_kafka::Record {
            key: fields.next().unwrap_or("").as_bytes(),
            value: line.as_bytes(),
            timestamp: seconds.saturating_mul(1000),
        }
    });
    let sent = tidemark_kafka::produce(brokers, topic, records).map_err(|e| match e {
        e @ (tidemark_kafka::Error::TopicMissing { .. } | tidemark_kafka::Error::Config { .. }) => {
            crate::UsageError::flag("--topic", e)
        }
        e => anyhow::Error::new(e).context("tidemark demo: writing the log into Kafka"),
    })?;
    eprintln!("tidemark: wrote {sent} flows into topic {topic} at {brokers}");
    Ok(())
}

/// Runs the demo.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.minutes == 0 {
        return Err(crate::UsageError::flag(
            "--minutes",
            "expected at least 1, got 0",
        ));
    }
    let spec = FlowSpec {
        minutes: args.minutes,
        users: args.users,
        scanners: args.scanners,
        seed: args.seed,
        ..FlowSpec::default()
    };
    // A kept store is checked before the log is generated: a refusal comes first.
    let keep = args
        .db
        .as_deref()
        .map(|path| SaveTo::new(path, "--db", args.force));
    if let Some(keep) = &keep {
        keep.check()?;
    }
    if args.latency && args.emit.is_none() && args.topic.is_none() {
        return Err(crate::UsageError::flag(
            "--latency",
            "adds a column to the log --emit or --topic writes",
        ));
    }
    let log = FlowLog::generate(&spec);
    let csv = || {
        if args.latency {
            log.to_csv_with_latency()
        } else {
            log.to_csv()
        }
    };
    if let Some(path) = &args.emit {
        // The log is the seed's, regenerated byte for byte: replacing it loses nothing.
        return SaveTo::new(path, "--emit", true).write(csv().as_bytes());
    }
    if let (Some(topic), Some(brokers)) = (&args.topic, &args.brokers) {
        return to_topic(&csv(), brokers, topic);
    }
    let dir = std::env::temp_dir().join(format!("tidemark-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // A kept store is written under a temporary name beside its path and moved there whole
    // once the demo is done: a demo that fails leaves no half store at the path.
    let db = match &keep {
        Some(keep) => keep.temp_path()?,
        None => dir.join("tidemark.db"),
    };
    let result = run_in(&args, &spec, &log, &dir, &db);
    let _ = std::fs::remove_dir_all(&dir);
    match (&keep, result) {
        (Some(keep), Ok(())) => {
            keep.place(&db)?;
            if !args.json {
                let path = keep.path.display();
                outln!(
                    "store kept: {path} (tidemark query --db {path} --metric fanout --top 10 \
                     --window 5m)"
                );
            }
            Ok(())
        }
        (Some(_), Err(e)) => {
            let _ = std::fs::remove_file(&db);
            Err(e)
        }
        (None, result) => result,
    }
}

fn run_in(
    args: &Args,
    spec: &FlowSpec,
    log: &FlowLog,
    dir: &std::path::Path,
    db: &std::path::Path,
) -> anyhow::Result<()> {
    let csv = dir.join("flows.csv");
    std::fs::write(&csv, log.to_csv())?;
    let mut store = RedbStore::open(db)?;
    if !args.json {
        outln!(
            "generated {} flows over {} minutes: a health checker ({}, 4 targets every second), \
             {} users, {} scanner(s) (1,024 ports on each of 3 hosts in two minutes), \
             {:.1}% of user flows {} s late and {:.1}% {} s late",
            log.flows.len(),
            spec.minutes,
            FlowLog::HEALTH,
            spec.users,
            spec.scanners,
            spec.late_share * 100.0,
            spec.late_within,
            spec.too_late_share * 100.0,
            spec.late_beyond
        );
        outln!(
            "fan-out detector: distinct (dst_ip, dst_port) per src_ip over 5 minutes, 1-minute \
             HyperLogLog buckets at p = 10, alert above 500 + 3σ; allowed lateness 30 s, \
             later events dropped and counted"
        );
    }
    let mut alerts: Vec<AlertOut> = Vec::new();
    let started = Instant::now();
    let report = pipeline::run(
        &tidemark_stream::config::Config::from_toml(FANOUT_CONFIG)?,
        &mut store,
        RunOptions {
            inputs: vec![csv],
            threads: crate::cmd::run::every_core(),
            ..RunOptions::default()
        },
        &mut |a| alerts.push(a.clone()),
    )
    .map_err(|e| crate::cmd::run::run_error(db, e))?;
    let secs = started.elapsed().as_secs_f64();
    if args.json {
        for a in &alerts {
            outln!("{}", crate::cmd::run::alert_json(a));
        }
        outln!("{}", crate::cmd::run::summary_json(&report, secs));
    } else {
        let rfc = crate::cmd::query::rfc3339;
        for a in &alerts {
            let e = &a.alert.estimate;
            let fanout = format!("fan-out {:.0} [{:.0}, {:.0}]", e.value, e.low, e.high);
            let to = rfc(a.alert.window_end);
            match a.alert.phase {
                AlertPhase::Early => outln!(
                    "ALERT {} {fanout} > {:.0} in the 5 minutes to {to} (early: at {}, before \
                     the bucket closed)",
                    a.key,
                    a.alert.limit,
                    rfc(a.alert.at)
                ),
                AlertPhase::Closed => outln!(
                    "ALERT {} {fanout} > {:.0} in the 5 minutes to {to}",
                    a.key,
                    a.alert.limit
                ),
                AlertPhase::Confirmed => {
                    outln!("  confirmed by the close of the window to {to}: {fanout}")
                }
                AlertPhase::Withdrawn => outln!(
                    "  withdrawn by the close of the window to {to}: {fanout} is not above {:.0}",
                    a.alert.limit
                ),
            }
        }
        if !alerts.is_empty() {
            outln!(
                "(one alert an episode: a source alerts again only after a close finds its \
                 window below the limit)"
            );
        }
        // Volume against fan-out, over the whole log, for the top sources by volume.
        let mut volume: HashMap<&str, u64> = HashMap::new();
        for f in &log.flows {
            *volume.entry(f.src.as_str()).or_default() += 1;
        }
        let mut by_volume: Vec<(&str, u64)> = volume.into_iter().collect();
        by_volume.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let total = spec.minutes * 60_000;
        let all = query::window(&store, "fanout", total, None, None, None)?;
        outln!("top sources by volume, with their fan-out over the whole log:");
        for (src, n) in by_volume.iter().take(4) {
            let fan = all.rows.iter().find(|r| r.key == *src);
            outln!(
                "  {src:<12} {n:>8} flows   fan-out {}",
                fan.map_or("-".to_string(), |r| format!(
                    "{:.0} [{:.0}, {:.0}]",
                    r.estimate.value, r.estimate.low, r.estimate.high
                ))
            );
        }
        if !args.no_chart {
            let mut keys: Vec<String> = (0..spec.scanners).map(FlowLog::scanner).collect();
            keys.push(FlowLog::HEALTH.to_string());
            // The busiest users by volume, for contrast.
            keys.extend(
                by_volume
                    .iter()
                    .filter(|(k, _)| k.starts_with("10.2."))
                    .take(2)
                    .map(|(k, _)| k.to_string()),
            );
            let svg = chart(&store, &keys, log)?;
            std::fs::write(&args.chart, svg)
                .map_err(|e| crate::UsageError::file(args.chart.display(), e))?;
            outln!("chart: {}", args.chart.display());
        }
        crate::cmd::run::print_summary(&report, secs);
    }
    Ok(())
}

/// One point of a series: window end (ms) and the estimate.
struct Point {
    end: u64,
    value: f64,
    low: f64,
    high: f64,
}

/// The 5-minute fan-out of each key at every bucket end, from the stored sketches, drawn as
/// an SVG line chart on a log scale with error bars, the threshold and the alert limit.
fn chart(store: &RedbStore, keys: &[String], log: &FlowLog) -> anyhow::Result<String> {
    const BUCKET: u64 = 60_000;
    let first = log.flows.iter().map(|f| f.ts).min().unwrap_or(0) * 1000;
    let last = log.flows.iter().map(|f| f.ts).max().unwrap_or(0) * 1000;
    let mut series: Vec<Vec<Point>> = keys.iter().map(|_| Vec::new()).collect();
    let mut end = first - first % BUCKET + BUCKET;
    while end <= last - last % BUCKET + BUCKET {
        // A window the retention has (partly) deleted is not drawn: with --minutes near a
        // day, the first minutes are past the metric's one-day retention by the run's end.
        let a = match query::window(store, "fanout", 5 * BUCKET, Some(end), None, None) {
            Ok(a) if !a.clipped => a,
            Ok(_) | Err(query::QueryError::BeforeRetention { .. }) => {
                end += BUCKET;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        for (i, k) in keys.iter().enumerate() {
            if let Some(r) = a.rows.iter().find(|r| &r.key == k) {
                series[i].push(Point {
                    end,
                    value: r.estimate.value,
                    low: r.estimate.low,
                    high: r.estimate.high,
                });
            }
        }
        end += BUCKET;
    }
    // Tall enough that a decade is 127 px: the scanner's 95% bracket at p = 10 (about ±6.4%,
    // 0.028 of a decade each way) spans 7 px, drawn as a shaded band and capped bars.
    let (w, h) = (960.0, 600.0);
    let (left, right, top, bottom) = (70.0, 230.0, 40.0, 50.0);
    let x0 = first - first % BUCKET;
    let x1 = (last - last % BUCKET + BUCKET).max(x0 + BUCKET);
    let x = |t: u64| left + (t - x0) as f64 / (x1 - x0) as f64 * (w - left - right);
    let ymax = 4.0; // log10 of 10,000
    let y = |v: f64| top + (1.0 - v.max(1.0).log10() / ymax) * (h - top - bottom);
    let mut out = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{left}" y="22" font-size="15">Fan-out per source: distinct (dst_ip, dst_port) in the last 5 minutes (HyperLogLog p = 10, 95% bars)</text>"#
    );
    for d in 0..=4 {
        let v = 10f64.powi(d);
        let yy = y(v);
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            w - right,
            left - 6.0,
            yy + 4.0,
            v as u64
        );
    }
    let mut t = x0;
    while t <= x1 {
        let xx = x(t);
        let _ = writeln!(
            out,
            r##"<line x1="{xx:.1}" y1="{top}" x2="{xx:.1}" y2="{:.1}" stroke="#eee"/><text x="{xx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            h - bottom,
            h - bottom + 18.0,
            &crate::cmd::query::rfc3339(t)[11..16]
        );
        t += 5 * BUCKET;
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">window end (UTC)</text>"##,
        left + (w - left - right) / 2.0,
        h - 10.0
    );
    // The y axis's quantity and unit, along the axis.
    let _ = writeln!(
        out,
        r##"<text class="y-label" x="0" y="0" text-anchor="middle" transform="translate(18,{:.1}) rotate(-90)">fan-out: distinct (dst_ip, dst_port) in 5 minutes (log scale)</text>"##,
        top + (h - top - bottom) / 2.0
    );
    for (v, label, dash, dy) in [
        (500.0, "threshold 500", "6,4", 14.0),
        (548.75, "alert limit 500 + 3σ", "2,3", -4.0),
    ] {
        let yy = y(v);
        let _ = writeln!(
            out,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#c00" stroke-dasharray="{dash}"/><text x="{:.1}" y="{:.1}" fill="#c00">{label}</text>"##,
            w - right,
            w - right + 6.0,
            yy + dy
        );
    }
    let colours = [
        "#d62728", "#ff7f0e", "#9467bd", "#1f77b4", "#2ca02c", "#8c564b",
    ];
    for (i, (k, pts)) in keys.iter().zip(&series).enumerate() {
        let c = colours[i % colours.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|p| format!("{:.1},{:.1}", x(p.end), y(p.value)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        // The bracket, twice: a shaded band along each run of points that have one (the
        // eye follows it where a bar alone is a few pixels), and at each point a bar with
        // caps, drawn over the line so the line does not hide it. An exact answer (sparse
        // sketch, small fan-out) has no bracket to draw.
        for run in pts.split(|p| p.high <= p.low).filter(|run| !run.is_empty()) {
            let upper = run
                .iter()
                .map(|p| format!("{:.1},{:.1}", x(p.end), y(p.high)));
            let lower = run
                .iter()
                .rev()
                .map(|p| format!("{:.1},{:.1}", x(p.end), y(p.low)));
            let band: Vec<String> = upper.chain(lower).collect();
            let _ = writeln!(
                out,
                r#"<polygon class="error-band" fill="{c}" fill-opacity="0.25" stroke="none" points="{}"/>"#,
                band.join(" ")
            );
        }
        for p in pts.iter().filter(|p| p.high > p.low) {
            let (xx, lo, hi) = (x(p.end), y(p.low), y(p.high));
            let _ = writeln!(
                out,
                r#"<path class="error-bar" stroke="{c}" stroke-width="1.5" fill="none" d="M{:.1},{hi:.1}H{:.1}M{xx:.1},{hi:.1}V{lo:.1}M{:.1},{lo:.1}H{:.1}"/>"#,
                xx - 4.0,
                xx + 4.0,
                xx - 4.0,
                xx + 4.0
            );
        }
        let ly = top + 40.0 + 20.0 * i as f64;
        let lx = w - right + 10.0;
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{k}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0
        );
    }
    // What the bands and bars are, above the legend's series.
    let (lx, ly) = (w - right + 10.0, top + 20.0);
    let _ = writeln!(
        out,
        r##"<rect x="{lx}" y="{:.1}" width="20" height="8" fill="#888" fill-opacity="0.25"/><path stroke="#888" stroke-width="1.5" fill="none" d="M{:.1},{:.1}H{:.1}M{:.1},{:.1}V{:.1}M{:.1},{:.1}H{:.1}"/><text x="{:.1}" y="{:.1}">95% bracket</text>"##,
        ly - 4.0,
        lx + 6.0,
        ly - 6.0,
        lx + 14.0,
        lx + 10.0,
        ly - 6.0,
        ly + 6.0,
        lx + 6.0,
        ly + 6.0,
        lx + 14.0,
        lx + 26.0,
        ly + 4.0
    );
    let _ = writeln!(out, "</svg>");
    Ok(out)
}
