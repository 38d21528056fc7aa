//! `tidemark check`: verify a store — redb's page checksums, the metadata, the run state and
//! every stored sketch — and say what is damaged.

use std::path::{Path, PathBuf};
use tidemark_cli::outln;

use serde_json::json;
use tidemark_stream::store::{RedbStore, StoreError};

use crate::UsageError;

/// Arguments of `tidemark check`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The store written by `tidemark run`.
    #[arg(long, value_name = "FILE", default_value = "tidemark.db")]
    pub db: PathBuf,
    /// One JSON object instead of lines of text.
    #[arg(long)]
    pub json: bool,
}

/// What to do about a damaged store, said after every error that finds one (`check` itself
/// says only the second part: it has just listed what is damaged).
const CHECK_STEP: &str = "run `tidemark check --db FILE` to list what is damaged; then ";
const RESTORE_STEP: &str = "restore the file from a backup, or run the input again into a new --db";

/// A damaged store: exit 2, the file named, and the next step.
pub fn damaged(db: &Path, what: impl std::fmt::Display) -> anyhow::Error {
    damage(db, what, true)
}

fn damage(db: &Path, what: impl std::fmt::Display, to_check: bool) -> anyhow::Error {
    let check = if to_check {
        CHECK_STEP.replace("FILE", &db.display().to_string())
    } else {
        String::new()
    };
    UsageError::file(
        format!("store {}", db.display()),
        format!("is damaged: {what}. Next: {check}{RESTORE_STEP}"),
    )
}

/// Maps a store error to the CLI's kinds: damage, locks and unopenable files exit 2.
pub fn store_error(db: &Path, e: StoreError) -> anyhow::Error {
    store_error_found(db, e, true)
}

fn store_error_found(db: &Path, e: StoreError, to_check: bool) -> anyhow::Error {
    match e {
        StoreError::Damaged { what } => damage(db, what, to_check),
        e @ (StoreError::Locked { .. } | StoreError::Open { .. }) => {
            UsageError::file(db.display(), e)
        }
        e => anyhow::anyhow!(e),
    }
}

/// Runs `tidemark check`.
pub fn run(args: Args) -> anyhow::Result<()> {
    // A writer's open verifies every page; a store another process is writing (or a
    // read-only file) can only be read, its pages then unverified.
    let (store, pages) = match RedbStore::open_to_read(&args.db) {
        Ok((s, true)) => (s, "verified"),
        Ok((s, false)) => (
            s,
            "not verified (the file is being written, or is read-only)",
        ),
        Err(StoreError::Damaged { what }) => {
            return Err(damage(&args.db, format!("its pages: {what}"), false))
        }
        Err(e) => return Err(store_error_found(&args.db, e, false)),
    };
    let report = tidemark_stream::check::check(&store);
    // Measured only where the pages were verified (the file is this process's to write); a
    // measurement that fails is said, and the report stands.
    let space = store.space().unwrap_or_else(|e| {
        eprintln!("tidemark: the bytes in use could not be measured: {e}");
        None
    });
    if args.json {
        let mut out = json!({
            "db": args.db.display().to_string(),
            "healthy": report.is_healthy(),
            "pages": pages,
            "records": report.records,
            "tables": report.tables.iter().map(|t| json!({
                "name": t.name, "buckets": t.buckets, "decoded": t.decoded, "value_bytes": t.bytes
            })).collect::<Vec<_>>(),
            "problems": report.problems,
        });
        // Measured only where the pages were verified: absent otherwise.
        if let (Some(space), Some(map)) = (space, out.as_object_mut()) {
            map.insert("file_bytes".into(), space.file.into());
            map.insert("in_use_bytes".into(), space.in_use.into());
        }
        outln!("{out}");
    } else {
        outln!("store {}: pages {pages}", args.db.display());
        if let Some(space) = space {
            outln!("  {} bytes, {} in use by pages", space.file, space.in_use);
        }
        for t in &report.tables {
            outln!(
                "  {}: {} buckets, {} decoded, {} bytes of values",
                t.name,
                t.buckets,
                t.decoded,
                t.bytes
            );
        }
        outln!("  {} records counted", report.records);
        for p in &report.problems {
            outln!("  damaged: {p}");
        }
    }
    if report.is_healthy() {
        Ok(())
    } else {
        Err(damage(
            &args.db,
            format!(
                "{} problem(s), the first: {}",
                report.problems.len(),
                report.problems[0]
            ),
            false,
        ))
    }
}
