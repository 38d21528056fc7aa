//! `tidemark demo`: seed 003's fan-out scan detector on a generated flow log, with an
//! embedded store in a temporary directory.
//!
//! The log has a health checker hitting 4 targets every second (the most flows by far, and a
//! fan-out of 4), ordinary users, a laptop probing 1,024 ports on each of 3 hosts in two
//! minutes, and some late events. The detector counts distinct (dst_ip, dst_port) per src_ip
//! over 5 minutes in 1-minute HyperLogLog buckets and alerts above 500 by 3 standard errors.
//! Volume would rank the health checker first; fan-out flags the laptop.

use std::collections::HashMap;
use std::time::Instant;

use tidemark_stream::flowgen::{FlowLog, FlowSpec, FANOUT_CONFIG};
use tidemark_stream::pipeline::{self, AlertOut, RunOptions};
use tidemark_stream::query;
use tidemark_stream::store::RedbStore;

use crate::output::{Output, Record};

/// Arguments of `tidemark demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Minutes of event time to generate.
    #[arg(long, default_value_t = 30)]
    pub minutes: u64,
    /// Ordinary users.
    #[arg(long, default_value_t = 200)]
    pub users: u32,
    /// Scanning laptops.
    #[arg(long, default_value_t = 1)]
    pub scanners: u32,
    /// Random seed of the generated log.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// JSON lines (alerts, then a summary object) instead of text.
    #[arg(long)]
    pub json: bool,
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
        println!(
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
        println!(
            "fan-out detector: distinct (dst_ip, dst_port) per src_ip over 5 minutes, 1-minute \
             HyperLogLog buckets at p = 10, alert above 500 + 3σ; allowed lateness 30 s, \
             later events dropped and counted"
        );
    }
    let mut alerts: Vec<AlertOut> = Vec::new();
    let started = Instant::now();
    let report = pipeline::run(
        FANOUT_CONFIG,
        &mut store,
        RunOptions {
            inputs: vec![csv],
            ..RunOptions::default()
        },
        &mut |a| alerts.push(a.clone()),
    )
    .map_err(crate::cmd::run::run_error)?;
    let secs = started.elapsed().as_secs_f64();
    if args.json {
        let mut out = Output::new(true);
        for a in &alerts {
            println!("{}", crate::cmd::run::alert_json(a));
        }
        out.emit(
            &Record::new()
                .field("flows", report.records)
                .field("alerts", report.alerts)
                .field("late", report.late)
                .field("dropped", report.dropped)
                .field("buckets", report.buckets)
                .field("seconds", secs),
        )?;
    } else {
        for a in &alerts {
            let e = &a.alert.estimate;
            println!(
                "ALERT {} fan-out {:.0} [{:.0}, {:.0}] > {:.0} in the 5 minutes to {}",
                a.key,
                e.value,
                e.low,
                e.high,
                a.alert.limit,
                crate::cmd::query::rfc3339(a.alert.window_end)
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
        println!("top sources by volume, with their fan-out over the whole log:");
        for (src, n) in by_volume.iter().take(4) {
            let fan = all.rows.iter().find(|r| r.key == *src);
            println!(
                "  {src:<12} {n:>8} flows   fan-out {}",
                fan.map_or("-".to_string(), |r| format!(
                    "{:.0} [{:.0}, {:.0}]",
                    r.estimate.value, r.estimate.low, r.estimate.high
                ))
            );
        }
        crate::cmd::run::print_summary(&report, secs);
    }
    Ok(())
}
