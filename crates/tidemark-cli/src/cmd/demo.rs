//! `tidemark demo`: the fan-out scan detector (a ring of HyperLogLogs per source, set as in the
//! detector's design figures) on a generated flow log, with an embedded store in a temporary
//! directory.
//!
//! The log has a health checker hitting 4 targets every second (the most flows by far, and a
//! fan-out of 4), ordinary users, a laptop probing 1,024 ports on each of 3 hosts in two
//! minutes, and some late events. The detector counts distinct (dst_ip, dst_port) per src_ip
//! over 5 minutes in 1-minute HyperLogLog buckets and alerts above 500 by 3 standard errors.
//! Volume would rank the health checker first; fan-out flags the laptop.

use crate::output::outln;
use std::collections::HashMap;
use std::time::Instant;

use tidemark_stream::engine::Phase;
use tidemark_stream::flowgen::{FlowLog, FlowSpec, FANOUT_CONFIG};
use tidemark_stream::pipeline::{self, AlertOut, RunOptions};
use tidemark_stream::query;
use tidemark_stream::store::RedbStore;

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
    /// the error bars). Written only in text mode.
    #[arg(long, value_name = "FILE", default_value = "tidemark-demo.svg")]
    pub chart: std::path::PathBuf,
    /// Write no chart.
    #[arg(long)]
    pub no_chart: bool,
    /// Only write the generated flow log to this CSV file (for `tidemark run` and benches).
    #[arg(long, value_name = "FILE")]
    pub emit: Option<std::path::PathBuf>,
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
    let log = FlowLog::generate(&spec);
    if let Some(path) = &args.emit {
        std::fs::write(path, log.to_csv())
            .map_err(|e| crate::UsageError::file(path.display(), e))?;
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("tidemark-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = run_in(&args, &spec, &log, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run_in(
    args: &Args,
    spec: &FlowSpec,
    log: &FlowLog,
    dir: &std::path::Path,
) -> anyhow::Result<()> {
    let csv = dir.join("flows.csv");
    std::fs::write(&csv, log.to_csv())?;
    let db = dir.join("tidemark.db");
    let mut store = RedbStore::open(&db)?;
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
            ..RunOptions::default()
        },
        &mut |a| alerts.push(a.clone()),
    )
    .map_err(|e| crate::cmd::run::run_error(&db, e))?;
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
                Phase::Early => outln!(
                    "ALERT {} {fanout} > {:.0} in the 5 minutes to {to} (early: at {}, before \
                     the bucket closed)",
                    a.key,
                    a.alert.limit,
                    rfc(a.alert.at)
                ),
                Phase::Closed => outln!(
                    "ALERT {} {fanout} > {:.0} in the 5 minutes to {to}",
                    a.key,
                    a.alert.limit
                ),
                Phase::Confirmed => {
                    outln!("  confirmed by the close of the window to {to}: {fanout}")
                }
                Phase::Withdrawn => outln!(
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
    let (w, h) = (960.0, 520.0);
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
        for p in pts {
            if p.high > p.low {
                let _ = writeln!(
                    out,
                    r#"<line x1="{0:.1}" y1="{1:.1}" x2="{0:.1}" y2="{2:.1}" stroke="{c}"/>"#,
                    x(p.end),
                    y(p.low),
                    y(p.high)
                );
            }
        }
        let ly = top + 20.0 + 20.0 * i as f64;
        let lx = w - right + 10.0;
        let _ = writeln!(
            out,
            r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{k}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0
        );
    }
    let _ = writeln!(out, "</svg>");
    Ok(out)
}
