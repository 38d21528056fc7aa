//! `tidemark freq`: item frequencies by Count-Min sketch — point queries, heavy hitters,
//! top-k, range sums, quantiles and join sizes, each with its bound.
//!
//! Input lines are `ITEM` (one occurrence) or `ITEM COUNT` (COUNT a signed integer; negative
//! counts need a turnstile model). Blank lines are skipped; anything else is an error naming
//! the file and line.
//!
//! Items are opaque strings, hashed — except when the question needs an order on items:
//! `--range` and `--quantile` (and `--heavy`/`--top` under a turnstile model, found by
//! descending the dyadic layers) need every item to be an integer in `[0, 2^bits)` (`--bits`,
//! default 32), and a line whose item is not is an error naming the line. Those runs use a
//! `DyadicCountMin`; the others a `CountMin` (plus, in the cash-register model, a candidate
//! set for `--heavy` and the `k` best for `--top`).

use std::path::PathBuf;

use tidemark::codec::Family;
use tidemark::frequency::{CountMin, DyadicCountMin, FrequencyError, HeavyHitters, Model, TopK};
use tidemark::{Estimate, ParamError};

use crate::input::{for_each_line, read_envelope, SaveTo};
use crate::UsageError;
use tidemark_cli::output::{Output, Record};

/// The update model, as typed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelArg {
    /// Cash register: positive counts only.
    Cash,
    /// Non-negative turnstile: negative counts allowed, no frequency below zero.
    Turnstile,
    /// General turnstile: frequencies may go negative (median estimator).
    General,
}

impl From<ModelArg> for Model {
    fn from(m: ModelArg) -> Model {
        match m {
            ModelArg::Cash => Model::CashRegister,
            ModelArg::Turnstile => Model::NonNegativeTurnstile,
            ModelArg::General => Model::GeneralTurnstile,
        }
    }
}

/// Arguments of `tidemark freq`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = "\
Input lines are ITEM (one occurrence) or ITEM COUNT (a signed integer; negative counts need \
--model turnstile or general). Blank lines are skipped; any other bad line stops with its \
file and line named, exit code 2.

Items are opaque strings, hashed, except when an answer needs their order: --range and \
--quantile, and --heavy/--top under a turnstile model (found by descending dyadic layers), \
need every item to be an integer in [0, 2^BITS); a line whose item is not is an error. \
--join takes a sketch saved by --save with the same --epsilon and --delta.

Each answer is a row: kind (total, point, heavy, top, range, quantile, join), item, \
estimate, low, high, confidence (the probability that [low, high] holds the truth).

--save never replaces an existing file unless --force is given (exit 2, naming the file).")]
pub struct Args {
    /// Error bound ε: point queries within ε‖a‖₁ (w = ⌈e/ε⌉ columns).
    #[arg(long, default_value_t = 0.001)]
    pub epsilon: f64,
    /// Failure probability δ (d = ⌈ln 1/δ⌉ rows).
    #[arg(long, default_value_t = 0.01)]
    pub delta: f64,
    /// Update model.
    #[arg(long, value_enum, default_value_t = ModelArg::Cash)]
    pub model: ModelArg,
    /// Conservative update (cash register only; beyond the paper, never less accurate).
    #[arg(long)]
    pub conservative: bool,
    /// Report ITEM's estimated frequency (repeatable).
    #[arg(long = "query", value_name = "ITEM")]
    pub queries: Vec<String>,
    /// Report the items whose frequency reaches PHI·‖a‖₁.
    #[arg(long, value_name = "PHI")]
    pub heavy: Option<f64>,
    /// Report the K most frequent items.
    #[arg(long, value_name = "K")]
    pub top: Option<usize>,
    /// Report the sum of frequencies of the integer items in [L, R] (repeatable).
    #[arg(long, num_args = 2, value_names = ["L", "R"])]
    pub range: Vec<u64>,
    /// Report the Q-quantile of the integer items, Q in (0, 1] (repeatable).
    #[arg(long, value_name = "Q")]
    pub quantile: Vec<f64>,
    /// Integer items are in [0, 2^BITS) (for --range, --quantile, turnstile heavy hitters).
    #[arg(long, default_value_t = 32)]
    pub bits: u32,
    /// Save the sketch to FILE (a tidemark envelope; a file already there is refused unless
    /// --force).
    #[arg(long, value_name = "FILE")]
    pub save: Option<PathBuf>,
    /// With --save: replace a file already at FILE.
    #[arg(long, requires = "save")]
    pub force: bool,
    /// Report the join size (inner product) with the sketch saved in FILE.
    #[arg(long, value_name = "FILE")]
    pub join: Option<PathBuf>,
    /// JSON lines instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Input files (standard input if none).
    pub files: Vec<PathBuf>,
}

fn param_to_flag(e: ParamError) -> anyhow::Error {
    let flag = match e.name {
        "epsilon" | "width" => "--epsilon",
        "delta" | "depth" => "--delta",
        "bits" => "--bits",
        "model" => "--model",
        "phi" => "--heavy",
        "k" => "--top",
        _ => "argument",
    };
    UsageError::flag(flag, format!("expected {}, got {}", e.expected, e.got))
}

/// The sketches one run feeds (one per run: the size difference does not matter).
#[allow(clippy::large_enum_variant)]
enum Engine {
    Items {
        cm: CountMin,
        heavy: Option<HeavyHitters>,
        top: Option<TopK>,
    },
    Integers(DyadicCountMin),
}

fn parse_line(line: &str) -> Result<Option<(&str, Option<&str>)>, String> {
    let mut parts = line.split_whitespace();
    let Some(item) = parts.next() else {
        return Ok(None);
    };
    let count = parts.next();
    if parts.next().is_some() {
        return Err(format!("expected ITEM or ITEM COUNT, got {line:?}"));
    }
    Ok(Some((item, count)))
}

/// A row about one item (always named as a string, an integer item too), or about none
/// (`total`, `join`).
fn record(kind: &str, item: Option<String>, e: &Estimate) -> Record {
    Record::new()
        .field("kind", kind)
        .field_opt("item", item)
        .estimate(e)
}

/// A quantile row: the quantile asked, the smallest value whose rank reaches it, and that
/// rank with its bracket (`low`, `high` bracket the rank).
fn quantile_record(q: f64, value: u64, rank: &Estimate) -> Record {
    Record::new()
        .field("kind", "quantile")
        .field("quantile", q)
        .field("value", value)
        .field("rank", rank.value)
        .field("low", rank.low)
        .field("high", rank.high)
        .field("confidence", rank.confidence())
        .field("method", rank.method.to_string())
}

/// Runs `tidemark freq`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let save = args
        .save
        .as_deref()
        .map(|path| SaveTo::new(path, "--save", args.force));
    if let Some(save) = &save {
        save.check()?;
    }
    let model = Model::from(args.model);
    let ranges: Vec<(u64, u64)> = args.range.chunks(2).map(|c| (c[0], c[1])).collect();
    for &(l, r) in &ranges {
        if l > r {
            return Err(UsageError::flag(
                "--range",
                format!("expected L ≤ R, got {l} > {r}"),
            ));
        }
    }
    for &q in &args.quantile {
        if !(q > 0.0 && q <= 1.0) {
            return Err(UsageError::flag(
                "--quantile",
                format!("expected Q in (0, 1], got {q}"),
            ));
        }
    }
    if let Some(phi) = args.heavy {
        if !(phi > 0.0 && phi <= 1.0) {
            return Err(UsageError::flag(
                "--heavy",
                format!("expected PHI in (0, 1], got {phi}"),
            ));
        }
    }
    if args.top == Some(0) {
        return Err(UsageError::flag("--top", "expected at least 1, got 0"));
    }
    let integers = !ranges.is_empty()
        || !args.quantile.is_empty()
        || ((args.heavy.is_some() || args.top.is_some()) && model != Model::CashRegister);
    if args.conservative && model != Model::CashRegister {
        return Err(UsageError::flag(
            "--conservative",
            "needs --model cash (conservative update takes positive counts only)",
        ));
    }
    let mut engine = if integers {
        if args.join.is_some() {
            return Err(UsageError::flag(
                "--join",
                "joins use string items; not available with --range, --quantile or turnstile --heavy/--top",
            ));
        }
        if args.conservative {
            return Err(UsageError::flag(
                "--conservative",
                "not available with --range, --quantile or turnstile --heavy/--top",
            ));
        }
        Engine::Integers(
            DyadicCountMin::new(args.epsilon, args.delta, args.bits, model)
                .map_err(param_to_flag)?,
        )
    } else {
        let mut cm = CountMin::new(args.epsilon, args.delta, model).map_err(param_to_flag)?;
        if args.conservative {
            cm = cm
                .conservative()
                .map_err(|e| UsageError::flag("--conservative", e))?;
        }
        let heavy = args
            .heavy
            .map(|phi| HeavyHitters::with_sketch(phi, cm.clone()))
            .transpose()
            .map_err(param_to_flag)?;
        let top = args
            .top
            .map(|k| TopK::with_sketch(k, cm.clone()))
            .transpose()
            .map_err(param_to_flag)?;
        Engine::Items { cm, heavy, top }
    };
    // The joined sketch is read, and checked against this run's shape, before any input
    // or output: a bad --join must not come after a printed answer.
    let join = match (&args.join, &engine) {
        (Some(path), Engine::Items { cm, .. }) => {
            let name = path.display().to_string();
            let (_, bytes) = read_envelope(path, &[Family::CountMin], "a Count-Min sketch")?;
            let other = CountMin::from_bytes(&bytes).map_err(|e| UsageError::file(&name, e))?;
            cm.inner_product(&other).map_err(|e| {
                UsageError::flag(
                    "--join",
                    format!("{name} cannot be joined with this run's sketch: {e}"),
                )
            })?;
            Some((name, other))
        }
        _ => None,
    };
    // Integer queries are checked before any input is read, as the ranges are.
    let mut int_queries: Vec<u64> = Vec::new();
    if let Engine::Integers(s) = &engine {
        if let Some(&(_, r)) = ranges.iter().find(|&&(_, r)| r >> s.bits() != 0) {
            return Err(UsageError::flag(
                "--range",
                format!("expected R below 2^{} (--bits), got {r}", s.bits()),
            ));
        }
        for q in &args.queries {
            let x: u64 = q.parse().map_err(|_| {
                UsageError::flag("--query", format!("expected an integer item, got {q:?}"))
            })?;
            if x >> s.bits() != 0 {
                return Err(UsageError::flag(
                    "--query",
                    format!("expected an item below 2^{} (--bits), got {x}", s.bits()),
                ));
            }
            int_queries.push(x);
        }
    }

    for_each_line(&args.files, |loc, line| {
        let Some((item, count)) = parse_line(line).map_err(|m| loc.error(m))? else {
            return Ok(());
        };
        let count: i64 = match count {
            None => 1,
            Some(c) => c
                .parse()
                .map_err(|_| loc.error(format!("expected an integer COUNT, got {c:?}")))?,
        };
        let result: Result<(), FrequencyError> = match &mut engine {
            Engine::Items { cm, heavy, top } => cm.update(item.as_bytes(), count).and_then(|()| {
                if let Some(h) = heavy {
                    h.insert(item.as_bytes(), count)?;
                }
                if let Some(t) = top {
                    t.insert(item.as_bytes(), count)?;
                }
                Ok(())
            }),
            Engine::Integers(s) => {
                let x: u64 = item.parse().map_err(|_| {
                    loc.error(format!(
                        "expected an integer item in [0, 2^{}) (--range, --quantile and turnstile \
                         heavy hitters order items), got {item:?}",
                        s.bits()
                    ))
                })?;
                s.update(x, count)
            }
        };
        result.map_err(|e| loc.error(e))
    })?;

    let mut out = Output::new(args.json);
    match &engine {
        Engine::Items { cm, heavy, top } => {
            out.emit(&record("total", None, &Estimate::exact(cm.total() as f64)))?;
            for q in &args.queries {
                out.emit(&record("point", Some(q.clone()), &cm.point(q.as_bytes())))?;
            }
            let name = |item: &[u8]| Some(String::from_utf8_lossy(item).into_owned());
            if let Some(h) = heavy {
                for (item, e) in h.heavy_hitters() {
                    out.emit(&record("heavy", name(&item), &e))?;
                }
            }
            if let Some(t) = top {
                for (item, e) in t.top() {
                    out.emit(&record("top", name(&item), &e))?;
                }
            }
            if let Some((file, other)) = &join {
                let e = cm
                    .inner_product(other)
                    .map_err(|e| UsageError::flag("--join", e))?;
                out.emit(&record("join", None, &e).field("with", file.as_str()))?;
            }
            if let Some(save) = &save {
                save.write(&cm.to_bytes())?;
            }
        }
        Engine::Integers(s) => {
            out.emit(&record("total", None, &Estimate::exact(s.total() as f64)))?;
            for &x in &int_queries {
                let e = s.point(x).map_err(|e| UsageError::flag("--query", e))?;
                out.emit(&record("point", Some(x.to_string()), &e))?;
            }
            if let Some(phi) = args.heavy {
                for (x, e) in s
                    .heavy_hitters(phi)
                    .map_err(|e| UsageError::flag("--heavy", e))?
                {
                    out.emit(&record("heavy", Some(x.to_string()), &e))?;
                }
            }
            if let Some(k) = args.top {
                for (x, e) in s.top_k(k) {
                    out.emit(&record("top", Some(x.to_string()), &e))?;
                }
            }
            for &(l, r) in &ranges {
                let e = s.range(l, r).map_err(|e| UsageError::flag("--range", e))?;
                out.emit(&record("range", Some(format!("{l}..={r}")), &e))?;
            }
            for &q in &args.quantile {
                let (x, e) = s
                    .quantile(q)
                    .map_err(|e| UsageError::flag("--quantile", e))?;
                out.emit(&quantile_record(q, x, &e))?;
            }
            if let Some(save) = &save {
                save.write(&s.to_bytes())?;
            }
        }
    }
    Ok(())
}
