//! `tidemark filter`: build a resizable quotient filter (or a stack) from lines, query it,
//! describe it.
//!
//! Each input line is one key (its bytes, without the line ending). `build` saves the
//! filter's envelope to a file (never over an existing one without `--force`); `add` inserts
//! more keys into a saved filter and saves it back whole; `query` and `info` read it.

use std::path::{Path, PathBuf};

use tidemark::codec::Family;
use tidemark::membership::{Exhausted, LengtheningFilter, QuotientFilter, StackedFilter};
use tidemark::{Estimate, ParamError};

use crate::input::{for_each_line, read_envelope, Loc, SaveTo};
use crate::UsageError;
use tidemark_cli::output::{Output, Record};

/// Arguments of `tidemark filter`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    command: FilterCommand,
}

#[derive(clap::Subcommand, Debug)]
enum FilterCommand {
    /// Build a filter from lines (one key a line) and save it.
    Build(BuildArgs),
    /// Add the keys of lines (one key a line) to a saved filter and save it back.
    Add(AddArgs),
    /// Answer, for each line, whether the filter may hold it.
    Query(QueryArgs),
    /// Describe a saved filter: keys, load, life, doublings left, rate, bits.
    Info(InfoArgs),
}

/// Arguments of `tidemark filter build`.
#[derive(clap::Args, Debug)]
pub struct BuildArgs {
    /// The forecast number of keys.
    #[arg(long)]
    pub capacity: u64,
    /// The target false-positive rate at the forecast.
    #[arg(long)]
    pub fpr: f64,
    /// Extra fingerprint bits: each doubles the life (growth past the forecast the table
    /// survives) and halves the rate.
    #[arg(long, default_value_t = 0, conflicts_with = "stacked")]
    pub reserve: u32,
    /// Build a stack of filters (×2 capacity, ×½ rate a layer) that never fills up.
    #[arg(long)]
    pub stacked: bool,
    /// Insert every line, repeats included (a multiset: for a filter keys will be deleted
    /// from, once per insert). By default each distinct key is inserted once — "seen
    /// before?" is a set — and a key the filter already answers is not inserted again.
    #[arg(long)]
    pub multiset: bool,
    /// Where to save the filter (a file already there is refused unless --force; to add
    /// keys to a saved filter, `tidemark filter add`).
    #[arg(long)]
    pub save: PathBuf,
    /// Replace a file already at the --save path.
    #[arg(long)]
    pub force: bool,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Input files (standard input if none).
    pub files: Vec<PathBuf>,
}

/// Arguments of `tidemark filter add`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
The filter keeps its design and parameters, and ends as one build over its first lines and \
these would have ended, byte for byte. It is saved back whole or not at all (a temporary file \
beside it, then renamed over it): an interrupted add, or one refused because the filter is \
full, leaves the file as it was. Two adds to one file at the same time keep only the keys of \
the one that finishes last.")]
pub struct AddArgs {
    /// The saved filter; it is replaced by the filter with the new keys.
    pub filter: PathBuf,
    /// Insert every line, repeats included (as `build --multiset`). By default a key the
    /// filter already answers is not inserted again.
    #[arg(long)]
    pub multiset: bool,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Input files of keys (standard input if none).
    pub files: Vec<PathBuf>,
}

/// Arguments of `tidemark filter query`.
#[derive(clap::Args, Debug)]
pub struct QueryArgs {
    /// The saved filter.
    pub filter: PathBuf,
    /// Print only how many lines the filter may hold, and how many it does not.
    #[arg(long)]
    pub count: bool,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Input files of keys (standard input if none).
    pub files: Vec<PathBuf>,
}

/// Arguments of `tidemark filter info`.
#[derive(clap::Args, Debug)]
pub struct InfoArgs {
    /// The saved filter.
    pub filter: PathBuf,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// A saved filter of any membership family.
enum AnyFilter {
    Quotient(QuotientFilter),
    Stacked(StackedFilter),
    Lengthening(LengtheningFilter),
}

impl AnyFilter {
    fn load(path: &Path) -> anyhow::Result<AnyFilter> {
        let name = path.display().to_string();
        let families = [
            Family::QuotientFilter,
            Family::StackedFilter,
            Family::LengtheningFilter,
        ];
        let (family, bytes) = read_envelope(path, &families, "a filter")?;
        let bad = |e: tidemark::DecodeError| UsageError::file(&name, e);
        Ok(match family {
            Family::QuotientFilter => {
                AnyFilter::Quotient(QuotientFilter::from_bytes(&bytes).map_err(bad)?)
            }
            Family::StackedFilter => {
                AnyFilter::Stacked(StackedFilter::from_bytes(&bytes).map_err(bad)?)
            }
            _ => AnyFilter::Lengthening(LengtheningFilter::from_bytes(&bytes).map_err(bad)?),
        })
    }

    fn contains(&self, key: &[u8]) -> bool {
        match self {
            AnyFilter::Quotient(f) => f.contains(key),
            AnyFilter::Stacked(f) => f.contains(key),
            AnyFilter::Lengthening(f) => f.contains(key),
        }
    }

    fn insert(&mut self, key: &[u8]) -> Result<(), Exhausted> {
        match self {
            AnyFilter::Quotient(f) => f.insert(key),
            AnyFilter::Stacked(f) => {
                f.insert(key);
                Ok(())
            }
            AnyFilter::Lengthening(f) => f.insert(key),
        }
    }

    /// Inserts the key of every line of `files`, once per key unless `multiset` (a key the
    /// filter already answers, inserted before or a false positive of one, adds nothing to
    /// a set: inserting it again would only fill the table). Returns the lines read and the
    /// lines not inserted; `full` words the error of a table that cannot take a key.
    fn insert_lines(
        &mut self,
        files: &[PathBuf],
        multiset: bool,
        full: impl Fn(&Loc, &Exhausted, &AnyFilter) -> anyhow::Error,
    ) -> anyhow::Result<(u64, u64)> {
        let (mut lines, mut repeats) = (0u64, 0u64);
        for_each_line(files, |loc, line| {
            lines += 1;
            if !multiset && self.contains(line.as_bytes()) {
                repeats += 1;
                return Ok(());
            }
            self.insert(line.as_bytes())
                .map_err(|e| full(loc, &e, self))
        })?;
        Ok((lines, repeats))
    }

    /// The filter's envelope; `what` names the filter in the error of one too large to
    /// encode.
    fn to_bytes(&self, what: &str) -> anyhow::Result<Vec<u8>> {
        Ok(match self {
            AnyFilter::Quotient(f) => f.try_to_bytes().map_err(|e| {
                UsageError::flag(
                    "--capacity",
                    format!(
                        "cannot allocate memory to encode {what} (its table holds {} bits): \
                         {e}; nothing was saved",
                        f.bits()
                    ),
                )
            })?,
            AnyFilter::Stacked(s) => s.to_bytes(),
            AnyFilter::Lengthening(t) => t.to_bytes(),
        })
    }

    fn query(&self, key: &[u8]) -> Estimate {
        match self {
            AnyFilter::Quotient(f) => f.query(key),
            AnyFilter::Stacked(f) => f.query(key),
            AnyFilter::Lengthening(f) => f.query(key),
        }
    }

    fn record(&self) -> Record {
        match self {
            AnyFilter::Quotient(f) => Record::new()
                .field("filter", "quotient")
                .field("keys", f.len())
                .field("slots", f.slots())
                .field("load", f.load())
                .field("fingerprint_bits", f.fingerprint_bits())
                .field("remainder_bits", f.remainder_bits())
                .field("life", f.life())
                .field("doublings_left", f.remaining_doublings())
                .field("max_keys", f.max_keys())
                .field("fpr", f.fpr())
                .field("bits", f.bits()),
            AnyFilter::Stacked(s) => {
                let top = s.layer_filters().last().expect("a stack has a layer");
                Record::new()
                    .field("filter", "stacked")
                    .field("keys", s.len())
                    .field("layers", s.layers() as u64)
                    .field("load", top.load())
                    .field("fpr", s.fpr())
                    .field("bits", s.bits())
            }
            AnyFilter::Lengthening(t) => Record::new()
                .field("filter", "lengthening")
                .field("keys", t.len())
                .field("slots", t.slots())
                .field("load", t.len() as f64 / t.slots() as f64)
                .field("generations", t.generations() as u64)
                .field("fpr", t.fpr())
                .field("bits", t.bits()),
        }
    }
}

/// A constructor's parameter error, named by its flag. A table that cannot be allocated is
/// named by its size and the capacity that asked for it.
fn param_to_flag(e: ParamError, capacity: u64, stacked: bool) -> anyhow::Error {
    if let Some(bytes) = e.needed_bytes {
        return UsageError::flag(
            "--capacity",
            format!(
                "cannot allocate {bytes} bytes for a filter of capacity {capacity}: the system \
                 refused that much memory; {}",
                advice(stacked)
            ),
        );
    }
    let flag = match e.name {
        "capacity" => "--capacity",
        "reserve" => "--reserve",
        _ => "--fpr",
    };
    UsageError::flag(flag, format!("expected {}, got {}", e.expected, e.got))
}

/// Refuses up front a table larger than this machine's memory: a kernel that overcommits
/// would grant the allocation and then kill the process as the table is zeroed.
fn check_fits(capacity: u64, fpr: f64, reserve: u32, stacked: bool) -> anyhow::Result<()> {
    let Ok(bytes) = QuotientFilter::table_bytes_for(capacity, fpr, reserve) else {
        return Ok(()); // the constructor names the bad parameter
    };
    match physical_memory() {
        Some(total) if bytes > total => Err(UsageError::flag(
            "--capacity",
            format!(
                "cannot allocate {bytes} bytes for a filter of capacity {capacity}: more than \
                 this machine's memory ({total} bytes); {}",
                advice(stacked)
            ),
        )),
        _ => Ok(()),
    }
}

/// What to do about a table too large to allocate.
fn advice(stacked: bool) -> &'static str {
    if stacked {
        "lower --capacity or raise --fpr (a stack's first layer is built for the capacity; \
         later layers come as keys arrive)"
    } else {
        "lower --capacity or --reserve, raise --fpr, or use --stacked (its layers come as \
         keys arrive)"
    }
}

/// The machine's memory in bytes (`MemTotal` of `/proc/meminfo`), where the system says.
fn physical_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// Runs `tidemark filter`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.command {
        FilterCommand::Build(a) => build(a),
        FilterCommand::Add(a) => add(a),
        FilterCommand::Query(a) => query(a),
        FilterCommand::Info(a) => info(a),
    }
}

fn build(args: BuildArgs) -> anyhow::Result<()> {
    let save = SaveTo::new(&args.save, "--save", args.force)
        .hint(" (`tidemark filter add` adds keys to a saved filter)");
    save.check()?;
    let mut filter = if args.stacked {
        check_fits(args.capacity, args.fpr, 0, true)?;
        AnyFilter::Stacked(
            StackedFilter::new(args.capacity, args.fpr)
                .map_err(|e| param_to_flag(e, args.capacity, true))?,
        )
    } else {
        check_fits(args.capacity, args.fpr, args.reserve, false)?;
        AnyFilter::Quotient(
            QuotientFilter::with_reserve(args.capacity, args.fpr, args.reserve)
                .map_err(|e| param_to_flag(e, args.capacity, false))?,
        )
    };
    // Lines read, and lines not inserted because the filter already answered them (a repeat,
    // or a key sharing a fingerprint with one inserted: a false positive already).
    let (lines, repeats) = filter.insert_lines(&args.files, args.multiset, |loc, e, f| {
        let life = match f {
            AnyFilter::Quotient(f) => f.life(),
            _ => 0,
        };
        loc.error(format!(
            "the filter is full: it took {} keys (forecast {}, reserve {}, life 2^(p−q) = {} \
             times the forecast) and cannot double again. Build it with a larger --reserve \
             (each bit doubles the life), with --stacked (never fills), or rebuild it \
             with a --capacity near the keys you now have. Nothing was saved",
            e.keys, args.capacity, args.reserve, life
        ))
    })?;
    let what = format!("the filter of capacity {}", args.capacity);
    save.write(&filter.to_bytes(&what)?)?;
    Output::new(args.json).emit(
        &filter
            .record()
            .field("lines", lines)
            .field("repeats", repeats),
    )
}

fn add(args: AddArgs) -> anyhow::Result<()> {
    let mut filter = AnyFilter::load(&args.filter)?;
    let name = args.filter.display().to_string();
    // Replacing the file is the point: it is the filter just read, with more keys.
    let save = SaveTo::new(&args.filter, "FILTER", true);
    save.check()?;
    let (lines, repeats) = filter.insert_lines(&args.files, args.multiset, |loc, e, f| {
        let life = match f {
            AnyFilter::Quotient(f) => format!(", life {} times its forecast", f.life()),
            _ => String::new(),
        };
        loc.error(format!(
            "the filter is full: it holds {} keys in {} slots{life} and cannot double again; \
             nothing was saved, {name} is as it was. Rebuild it (`tidemark filter build`) \
             with a larger --reserve, with --stacked (never fills), or with a --capacity near \
             the keys you now have",
            e.keys, e.slots
        ))
    })?;
    save.write(&filter.to_bytes(&name)?)?;
    Output::new(args.json).emit(
        &filter
            .record()
            .field("lines", lines)
            .field("repeats", repeats),
    )
}

fn query(args: QueryArgs) -> anyhow::Result<()> {
    let filter = AnyFilter::load(&args.filter)?;
    let mut out = Output::new(args.json);
    let (mut present, mut absent) = (0u64, 0u64);
    for_each_line(&args.files, |_, line| {
        let e = filter.query(line.as_bytes());
        let yes = e.value == 1.0;
        if yes {
            present += 1;
        } else {
            absent += 1;
        }
        if !args.count {
            out.emit(
                &Record::new()
                    .field("key", line)
                    .field("present", yes)
                    .field("confidence", e.confidence()),
            )?;
        }
        Ok(())
    })?;
    if args.count {
        out.emit(
            &Record::new()
                .field("queries", present + absent)
                .field("found", present)
                .field("missing", absent),
        )?;
    }
    Ok(())
}

fn info(args: InfoArgs) -> anyhow::Result<()> {
    let filter = AnyFilter::load(&args.filter)?;
    Output::new(args.json).emit(&filter.record())
}
