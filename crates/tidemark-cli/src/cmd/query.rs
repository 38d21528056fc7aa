//! `tidemark query`: window estimates with error bars from a store's sketches. A frequency
//! metric answers with each key's heavy items (those reaching φ of its events in the window),
//! a quantile metric with each key's quantiles (a line each).

use std::path::PathBuf;
use tidemark_cli::outln;

use tidemark_cluster::{MergedStore, Server};
use tidemark_stream::query::{self, Label, QueryError};
use tidemark_stream::store::{RedbStore, Store};
use tidemark_stream::time::{parse_duration, parse_rfc3339, TimeFormat};

use crate::cmd::check::{damaged, store_error};
use crate::UsageError;
use tidemark_cli::output::{Output, Record};

/// Arguments of `tidemark query`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The store written by `tidemark run`.
    #[arg(long, value_name = "FILE", default_value = "tidemark.db")]
    pub db: PathBuf,
    /// Read the parts that `tidemark run --store` workers keep in Redis instead of a file:
    /// `redis://host:port[,host:port…]` (a server, or a cluster's seed nodes), merged.
    #[arg(long, value_name = "URL", conflicts_with = "db")]
    pub store: Option<String>,
    /// The metric's name.
    #[arg(long)]
    pub metric: String,
    /// One key (for a key of several fields, their values joined by `,`, a value holding `,`
    /// or `"` in double quotes with its quotes doubled, as in CSV: `--key '"a,b",c'`).
    #[arg(long, conflicts_with = "top")]
    pub key: Option<String>,
    /// The N keys with the largest window estimates (default: every key, largest first); for
    /// a frequency metric, the keys whose most frequent item is the most frequent.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// A frequency metric: at most M heavy items per key, the most frequent (default: every
    /// item reaching φ of the key's events). With --top: the top M items of the top N keys.
    #[arg(long, value_name = "M")]
    pub items: Option<usize>,
    /// A quantile metric: the quantiles each key answers (`0.5,0.99`, or the flag again;
    /// default the metric's `quantiles`), each in (0, 1]. With --top, keys rank by the
    /// highest.
    #[arg(long, value_name = "Q", value_delimiter = ',')]
    pub quantile: Vec<f64>,
    /// Window length (`5m`, `1h`), a multiple of the metric's bucket width.
    #[arg(long)]
    pub window: String,
    /// Window end: RFC 3339 or epoch seconds, rounded down to a bucket boundary (default: the
    /// end of the metric's newest open bucket, so the window holds the answer so far, marked
    /// partial; when no bucket is open, where its closed buckets end; for a rollup, the end of
    /// its last complete period).
    #[arg(long, value_name = "T")]
    pub at: Option<String>,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Epoch ms as RFC 3339 (UTC, millisecond precision when needed).
pub use tidemark_stream::time::format_rfc3339 as rfc3339;

/// Runs `tidemark query`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let window = parse_duration(&args.window)
        .filter(|&w| w > 0)
        .ok_or_else(|| {
            UsageError::flag(
                "--window",
                format!("expected a duration like 5m or 1h, got {:?}", args.window),
            )
        })?;
    let at = match &args.at {
        None => None,
        Some(t) => Some(
            parse_rfc3339(t)
                .or_else(|_| TimeFormat::EpochSeconds.parse(t))
                .map_err(|_| {
                    UsageError::flag(
                        "--at",
                        format!("expected RFC 3339 or epoch seconds, got {t:?}"),
                    )
                })?,
        ),
    };
    if args.top == Some(0) {
        return Err(UsageError::flag("--top", "expected at least 1, got 0"));
    }
    if args.items == Some(0) {
        return Err(UsageError::flag("--items", "expected at least 1, got 0"));
    }
    if let Some(q) = args.quantile.iter().find(|q| !(**q > 0.0 && **q <= 1.0)) {
        return Err(UsageError::flag(
            "--quantile",
            format!("expected quantiles in (0, 1] (0.99 is the p99), got {q}"),
        ));
    }
    let store: Box<dyn Store> = match &args.store {
        Some(url) => {
            let server = Server::connect(url).map_err(|e| UsageError::flag("--store", e))?;
            Box::new(MergedStore::open(&server).map_err(|e| UsageError::flag("--store", e))?)
        }
        None => {
            if !args.db.exists() {
                return Err(UsageError::file(args.db.display(), "no such store"));
            }
            // Read-only: a query never takes the writer's lock (a run can start while it
            // reads) and does not verify every page of the file (`tidemark check` does); the
            // values it reads are checked by their checksums and digests.
            Box::new(RedbStore::open_existing(&args.db).map_err(|e| store_error(&args.db, e))?)
        }
    };
    let name = args
        .store
        .as_ref()
        .map_or_else(|| args.db.clone(), PathBuf::from);
    let ask = query::Ask {
        quantiles: (!args.quantile.is_empty()).then_some(&args.quantile[..]),
    };
    let answer = query::window_asking(
        &*store,
        &args.metric,
        window,
        at,
        args.key.as_deref().map(str::as_bytes),
        args.top,
        &ask,
    )
    .map_err(|e| match e {
        QueryError::NoMetric { .. } => UsageError::flag("--metric", e),
        QueryError::BadWindow { .. } => UsageError::flag("--window", e),
        QueryError::BeforeRetention { .. } if args.at.is_some() => UsageError::flag("--at", e),
        QueryError::BeforeRetention { .. } => UsageError::flag("--window", e),
        QueryError::BadQuantiles { .. } => UsageError::flag("--quantile", e),
        QueryError::Empty => UsageError::file(name.display(), e),
        // The advice for a damaged file (check it, restore it) is not a server's.
        QueryError::Store(e) if args.store.is_some() => anyhow::anyhow!(e),
        QueryError::Store(e) => store_error(&name, e),
        QueryError::Corrupt { message } => damaged(&name, message),
        e => anyhow::anyhow!(e),
    })?;
    // By the metric's kind, not its rows: an empty window is refused the same.
    for (flag, given, part) in [
        ("--items", args.items.is_some(), "item"),
        ("--quantile", !args.quantile.is_empty(), "quantile"),
    ] {
        if given && answer.part != Some(part) {
            return Err(UsageError::flag(
                flag,
                format!(
                    "only for a {} metric; {} is a {} metric",
                    if part == "item" {
                        "frequency"
                    } else {
                        "quantile"
                    },
                    args.metric,
                    answer.kind
                ),
            ));
        }
    }
    if answer.clipped {
        eprintln!(
            "tidemark: note: the window starts at {}, {}'s retention horizon, not {} earlier: \
             buckets before it are deleted as the run passes them",
            rfc3339(answer.from),
            args.metric,
            tidemark_stream::time::format_duration(window - (answer.to - answer.from)),
        );
    }
    let mut out = Output::new(args.json);
    for row in &answer.rows {
        let line = |label: Option<(&'static str, &Label)>, e: &tidemark::Estimate| {
            let mut r = Record::new()
                .field("metric", args.metric.as_str())
                .field("key", row.key.as_str());
            r = match label {
                Some((field, Label::Text(t))) => r.field(field, t.as_str()),
                Some((field, Label::Number(x))) => r.field(field, *x),
                None => r,
            };
            r = r
                .field("from", rfc3339(answer.from))
                .field("to", rfc3339(answer.to))
                .estimate(e);
            if let Some(events) = row.events {
                r = r.field("events", events);
            }
            r.field("buckets", row.buckets)
                .field("partial", row.partial)
        };
        match answer.part {
            // One line per labelled answer (a frequency metric's heavy items, largest first:
            // --items keeps the most frequent); a row with none gets one line without the
            // label, its estimate (a sketch naming no item bounds its most frequent one).
            Some(field) if !row.parts.is_empty() => {
                let keep = args.items.unwrap_or(usize::MAX).min(row.parts.len());
                for (label, e) in &row.parts[..keep] {
                    out.emit(&line(Some((field, label)), e))?;
                }
            }
            _ => out.emit(&line(None, &row.estimate))?,
        }
    }
    if answer.rows.is_empty() && !args.json {
        outln!(
            "no keys in {} [{}, {})",
            args.metric,
            rfc3339(answer.from),
            rfc3339(answer.to)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_through_the_parser() {
        for ms in [0u64, 1_700_000_000_000, 1_709_164_800_123, 951_782_400_000] {
            assert_eq!(parse_rfc3339(&rfc3339(ms)).unwrap(), ms, "{}", rfc3339(ms));
        }
        assert_eq!(rfc3339(1_700_000_000_000), "2023-11-14T22:13:20Z");
    }
}
