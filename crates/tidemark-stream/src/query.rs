//! Answers from stored sketches: a key's window, or the top keys by window estimate.
//!
//! A window `[at − W, at)` is answered by merging the key's stored buckets that start inside
//! it (`at` is rounded down to a bucket boundary): HyperLogLogs by register-wise maximum,
//! counts by adding (exact at bucket granularity), item counts by adding counters and uniting
//! the named heavy items (a frequency row's estimate is its most frequent item's count, and
//! it lists the heavy items of the window with their brackets). The config is read from the store, so a
//! query needs only the file.
//!
//! A query for one key reads only that key's entry at each start of the window (and its open
//! row), not every key's ([`Store::key_buckets`]); the starts it reads are checked against
//! their digests as a scan checks them. `top`, and a query of every key, scan the window.

use std::cell::RefCell;
use std::collections::BinaryHeap;
use std::rc::Rc;

use tidemark::Estimate;

use crate::config::{Config, ConfigError, MetricConfig};
use crate::engine::{Engine, MetricShape, NoRows, Summary};
pub use crate::error::QueryError;
use crate::kinds::quantile::{valid_quantile, MAX_QUANTILES};
pub use crate::kinds::{Ask, Label};
use crate::pipeline::RunState;
use crate::store::{Meta, Store};

/// One key's window answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The key (lossy UTF-8).
    pub key: String,
    /// The window's estimate (what `top` ranks by): a count, a distinct count, a frequency
    /// metric's most frequent item's count, a quantile metric's highest quantile asked.
    pub estimate: Estimate,
    /// Buckets merged.
    pub buckets: u64,
    /// The window's labelled answers, under [`Answer::part`]: a frequency metric's heavy
    /// items (those reaching φ of the key's events; for an exact table with none, its most
    /// frequent item), largest first; a quantile metric's quantiles, in the order asked.
    /// Empty for other kinds, or for a sketch naming no item.
    pub parts: Vec<(Label, Estimate)>,
    /// The key's events in the window (exact), for kinds whose estimate is something else
    /// and that keep them (frequency, quantile); `None` otherwise.
    pub events: Option<u64>,
    /// Whether the window holds a bucket still open (more events may come to it): the answer
    /// so far, from the last checkpoint.
    pub partial: bool,
}

/// The answer to a window query.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The metric's kind (`count`, `distinct`, `frequency`).
    pub kind: &'static str,
    /// The field its rows' labelled answers go under (`item`, `quantile`), if it has them.
    pub part: Option<&'static str>,
    /// Window start, ms (inclusive): the one asked for, or the retention horizon when the
    /// window reaches before it (`clipped`).
    pub from: u64,
    /// Window end, ms (exclusive).
    pub to: u64,
    /// Rows: one per key, by estimate descending then key (or the one key asked for).
    pub rows: Vec<Row>,
    /// Whether the window asked for began before the metric's retention horizon and was cut
    /// to start there (buckets before it are deleted as the run passes them, so an answer
    /// over them would miss what they held).
    pub clipped: bool,
}

/// Whether `(value, key)` ranks below `(wv, wk)`: a smaller estimate, or an equal one with a
/// later key (rows are listed by estimate descending, then key).
fn worse(value: f64, key: &str, wv: f64, wk: &str) -> bool {
    value.total_cmp(&wv).then_with(|| wk.cmp(key)).is_lt()
}

/// A row in the heap of the best `top`: the worst on top.
struct Ranked {
    value: f64,
    key: String,
    row: Row,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Ranked) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Ranked) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Ranked) -> std::cmp::Ordering {
        // Greater is worse: a smaller estimate, then a later key.
        other
            .value
            .total_cmp(&self.value)
            .then_with(|| self.key.cmp(&other.key))
    }
}

/// A key's buckets `(start, bytes)` merged into one summary (`None` for none).
fn merged<B: AsRef<[u8]>>(
    shape: &MetricShape,
    parts: &[(u64, B)],
) -> Result<Option<Summary>, String> {
    let mut acc: Option<Summary> = None;
    for (start, bytes) in parts {
        let s = shape
            .decode(bytes.as_ref(), *start)
            .map_err(|e| e.to_string())?;
        match &mut acc {
            None => acc = Some(s),
            Some(a) => a.absorb(&s).map_err(|e| e.to_string())?,
        }
    }
    Ok(acc)
}

/// One key's row from its window summary.
fn row(
    shape: &MetricShape,
    ask: &Ask<'_>,
    key: &[u8],
    s: &Summary,
    buckets: u64,
    partial: bool,
) -> Row {
    let kind = shape.kind();
    Row {
        key: String::from_utf8_lossy(key).into_owned(),
        estimate: kind.rank(s, ask),
        buckets,
        parts: kind.parts(s, ask),
        events: s.events(),
        partial,
    }
}

thread_local! {
    /// The config this thread parsed last, by its text: a server's worker answers many
    /// queries of one store, whose config text changes only with a new run's, and parsing it
    /// was a tenth of a one-key query's time.
    static PARSED: RefCell<Option<(String, Rc<Config>)>> = const { RefCell::new(None) };
}

/// The config of `text`, parsed once a thread while the text is the same.
fn parsed(text: &str) -> Result<Rc<Config>, ConfigError> {
    PARSED.with(|p| {
        if let Some((t, c)) = &*p.borrow() {
            if t == text {
                return Ok(Rc::clone(c));
            }
        }
        let c = Rc::new(Config::from_toml(text)?);
        *p.borrow_mut() = Some((text.to_string(), Rc::clone(&c)));
        Ok(c)
    })
}

/// A stored metric's config, the default query time (its watermark) and its shape.
fn open_metric(
    store: &dyn Store,
    metric: &str,
) -> Result<(Rc<Config>, usize, MetricShape, Watermarks), QueryError> {
    let meta = store
        .meta()
        .map_err(QueryError::Store)?
        .ok_or(QueryError::Empty)?;
    let config = parsed(&meta.config).map_err(|e: ConfigError| QueryError::Corrupt {
        message: e.to_string(),
    })?;
    let Some((i, shape)) = MetricShape::for_name(&config, metric) else {
        return Err(QueryError::NoMetric {
            name: metric.to_string(),
            have: config
                .metrics
                .iter()
                .flat_map(|m| std::iter::once(m.name.clone()).chain(m.rollup_name()))
                .collect(),
        });
    };
    let state = RunState::from_bytes(&meta.state).map_err(|e| QueryError::Corrupt {
        message: e.to_string(),
    })?;
    let engine =
        Engine::restore(&config, &state.engine, &mut NoRows).map_err(|e| QueryError::Corrupt {
            message: e.to_string(),
        })?;
    // A rollup answers up to its last complete period, and has no open buckets.
    let closed = engine.closed_until(i).unwrap_or(0);
    let rollup = metric != config.metrics[i].name;
    let width = shape.width();
    let open_end = (!rollup)
        .then(|| engine.newest_open(i))
        .flatten()
        .map(|s| s + width);
    let closed = closed - closed % width;
    let m = &config.metrics[i];
    let retention = if rollup {
        m.rollup_retention
    } else {
        m.retention
    };
    let marks = Watermarks {
        closed,
        open_end,
        // Expiry deletes buckets starting before the end of the newest closed one − retention
        // (a rollup's periods before its last rolled end − its retention), at most
        // `closed − retention`; later ones are all kept.
        // (Rounded up to a bucket: a window's start is a bucket's, and one before this may
        // have been deleted.)
        horizon: retention_horizon(closed, retention, width),
        retention,
    };
    Ok((config, i, shape, marks))
}

/// The buckets `parts` hold: their distinct starts (a store in parts, one per partition, has
/// a part of a bucket in each partition that saw the key then). `parts` come by start.
fn starts<B>(parts: &[(u64, B)]) -> u64 {
    let changes = parts.windows(2).filter(|w| w[0].0 != w[1].0).count();
    (changes + usize::from(!parts.is_empty())) as u64
}

/// Of the metadata of stores that each hold a part of one run (a partition's), the one whose
/// buckets are closed least far, over every metric: a query's default time, taken from it,
/// is one where every part has closed its buckets. The parts must share one config.
pub fn earliest(metas: Vec<Meta>) -> Result<Option<Meta>, QueryError> {
    let corrupt = |message: String| QueryError::Corrupt { message };
    let mut best: Option<(u64, Meta)> = None;
    for meta in metas {
        if let Some((_, b)) = &best {
            if b.fingerprint != meta.fingerprint || b.config != meta.config {
                return Err(corrupt(
                    "the store's parts were written under different configs".into(),
                ));
            }
        }
        let closed = closed_until(&meta)?.into_iter().min().unwrap_or(0);
        if best.as_ref().is_none_or(|(c, _)| closed < *c) {
            best = Some((closed, meta));
        }
    }
    Ok(best.map(|(_, m)| m))
}

/// Where each metric of a stored run (in the config's order) has closed its buckets: buckets
/// starting before it are closed.
pub fn closed_until(meta: &Meta) -> Result<Vec<u64>, QueryError> {
    let corrupt = |message: String| QueryError::Corrupt { message };
    let config = parsed(&meta.config).map_err(|e| corrupt(e.to_string()))?;
    let state = RunState::from_bytes(&meta.state).map_err(|e| corrupt(e.to_string()))?;
    let engine =
        Engine::restore(&config, &state.engine, &mut NoRows).map_err(|e| corrupt(e.to_string()))?;
    Ok((0..config.metrics.len())
        .map(|i| engine.closed_until(i).unwrap_or(0))
        .collect())
}

/// Where a stored metric's buckets stand.
struct Watermarks {
    /// Buckets starting before this are closed.
    closed: u64,
    /// The end of the newest open bucket, if buckets are open (a run that left them open for
    /// the next input): the default query window ends there, partial.
    open_end: Option<u64>,
    /// Buckets starting before this may be deleted (retention); a bucket start.
    horizon: u64,
    /// The retention behind `horizon`, ms.
    retention: u64,
}

/// The quantiles `ask` names, checked: at least one, at most [`MAX_QUANTILES`], each in (0, 1].
fn check_ask(ask: &Ask<'_>) -> Result<(), QueryError> {
    if let Some(qs) = ask.quantiles {
        let outside = qs.iter().copied().find(|&q| !valid_quantile(q));
        if qs.is_empty() || qs.len() > MAX_QUANTILES || outside.is_some() {
            return Err(QueryError::BadQuantiles {
                count: qs.len(),
                most: MAX_QUANTILES,
                outside,
            });
        }
    }
    Ok(())
}

/// The bucket starts a window covers.
struct Span {
    /// The first start (inclusive).
    from: u64,
    /// The window's end (exclusive), a bucket boundary.
    to: u64,
    /// Whether the window asked for began before the retention horizon and was cut there.
    clipped: bool,
}

/// The starts of the window of `window` ms ending at `at` (rounded down to a bucket) of
/// `metric` (`m`'s, or its rollup's), against the retention `marks` say.
fn span(
    metric: &str,
    m: &MetricConfig,
    window: u64,
    at: u64,
    width: u64,
    marks: &Watermarks,
) -> Result<Span, QueryError> {
    if window == 0 || window % width != 0 {
        return Err(QueryError::BadWindow {
            window,
            bucket: width,
        });
    }
    let to = at - at % width;
    let asked = to.saturating_sub(window);
    // A window reaching before the retention horizon answers from the horizon on, and says
    // so; one wholly before it is refused.
    let horizon = marks.horizon;
    if to <= horizon && asked < horizon {
        return Err(QueryError::BeforeRetention {
            metric: metric.to_string(),
            to,
            horizon,
            retention: marks.retention,
            rollup: (metric == m.name).then(|| m.rollup_name()).flatten(),
        });
    }
    let clipped = asked < horizon;
    Ok(Span {
        from: if clipped { horizon } else { asked },
        to,
        clipped,
    })
}

/// One key's window over buckets gathered outside a store: the Redis module's published
/// windows, each bucket a key's part of it in one partition (so one start may come several
/// times, each to be merged). `closed` is the bucket end every partition has closed (the
/// default end, and where `partial` starts); `newest` the furthest one has, from which the
/// retention horizon counts. `buckets` come by start.
#[allow(clippy::too_many_arguments)]
pub fn key_window(
    m: &MetricConfig,
    key: &[u8],
    buckets: &[(u64, &[u8])],
    closed: u64,
    newest: u64,
    window: u64,
    at: Option<u64>,
    ask: &Ask<'_>,
) -> Result<Answer, QueryError> {
    check_ask(ask)?;
    let shape = MetricShape::of(m);
    let width = shape.width();
    let closed = closed - closed % width;
    let marks = Watermarks {
        closed,
        open_end: None,
        horizon: retention_horizon(newest - newest % width, m.retention, width),
        retention: m.retention,
    };
    let Span { from, to, clipped } = span(&m.name, m, window, at.unwrap_or(closed), width, &marks)?;
    let inside: Vec<(u64, &[u8])> = buckets
        .iter()
        .filter(|(s, _)| (from..to).contains(s))
        .copied()
        .collect();
    let merged = merged(&shape, &inside).map_err(|message| QueryError::Corrupt { message })?;
    let partial = to > closed;
    let row = match merged {
        Some(s) => row(&shape, ask, key, &s, starts(&inside), partial),
        None => {
            let mut zero = row(&shape, ask, key, &shape.empty(to), 0, partial);
            zero.estimate = Estimate::exact(0.0);
            zero.parts.clear();
            zero
        }
    };
    Ok(Answer {
        kind: m.kind.name(),
        part: m.kind.part(),
        from,
        to,
        rows: vec![row],
        clipped,
    })
}

/// The first start a metric keeps when its newest closed bucket ends at `closed`: expiry
/// deletes buckets starting before `closed − retention`, rounded up to a bucket (a window's
/// start is a bucket's, and one before this may have been deleted).
pub fn retention_horizon(closed: u64, retention: u64, width: u64) -> u64 {
    closed.saturating_sub(retention).div_ceil(width) * width
}

/// The window of length `window` ms ending at `at` (default: the metric's watermark), for
/// one key or every key; `top` keeps the largest `top` estimates.
pub fn window(
    store: &dyn Store,
    metric: &str,
    window: u64,
    at: Option<u64>,
    key: Option<&[u8]>,
    top: Option<usize>,
) -> Result<Answer, QueryError> {
    window_asking(store, metric, window, at, key, top, &Ask::default())
}

/// [`window`], asking the rows for what `ask` says (a quantile metric's quantiles).
pub fn window_asking(
    store: &dyn Store,
    metric: &str,
    window: u64,
    at: Option<u64>,
    key: Option<&[u8]>,
    top: Option<usize>,
    ask: &Ask<'_>,
) -> Result<Answer, QueryError> {
    check_ask(ask)?;
    let (config, i, shape, marks) = open_metric(store, metric)?;
    let m = &config.metrics[i];
    let width = shape.width();
    let at = at.unwrap_or(marks.open_end.unwrap_or(marks.closed));
    let Span { from, to, clipped } = span(metric, m, window, at, width, &marks)?;
    // Open buckets (of a run that left them open) answer as they stood at the last checkpoint.
    let open_table = marks
        .open_end
        .map(|_| crate::engine::StateTable::Open.name(metric));
    let partial = |parts: &[(u64, Vec<u8>)]| parts.iter().any(|(s, _)| *s >= marks.closed);
    // Keys come in key order, each once with its buckets: memory holds a page of buckets per
    // bucket start, plus the rows kept — every row without `top`, the best `top` with it.
    let mut rows: Vec<Row> = Vec::new();
    let mut best: BinaryHeap<Ranked> = BinaryHeap::new();
    let mut err = None;
    let mut visit = |k: &[u8], parts: &[(u64, Vec<u8>)]| {
        if err.is_some() {
            return;
        }
        let s = match merged(&shape, parts) {
            Ok(Some(s)) => s,
            Ok(None) => return,
            Err(e) => {
                err = Some(e);
                return;
            }
        };
        let value = shape.kind().rank(&s, ask).value;
        let row = |s: &Summary| row(&shape, ask, k, s, starts(parts), partial(parts));
        match top {
            None => rows.push(row(&s)),
            Some(n) => {
                let key = String::from_utf8_lossy(k).into_owned();
                // Only a key that enters the best `n` pays for its full row.
                if best.len() == n
                    && best
                        .peek()
                        .is_some_and(|w| worse(value, &key, w.value, &w.key))
                {
                    return;
                }
                best.push(Ranked {
                    value,
                    key,
                    row: row(&s),
                });
                if best.len() > n {
                    best.pop();
                }
            }
        }
    };
    match key {
        // One key: its entry at each start, not every key's (each start read is checked
        // against its digest all the same: see `Store::key_buckets`).
        Some(k) => {
            let parts = store
                .key_buckets(metric, open_table.as_deref(), from, to, k)
                .map_err(QueryError::Store)?;
            if !parts.is_empty() {
                visit(k, &parts);
            }
        }
        None => store
            .scan_by_key(metric, open_table.as_deref(), from, to, width, &mut visit)
            .map_err(QueryError::Store)?,
    }
    if let Some(message) = err {
        return Err(QueryError::Corrupt { message });
    }
    rows.extend(best.into_iter().map(|r| r.row));
    if let (Some(k), true) = (key, rows.is_empty()) {
        // A key with nothing in the window has an exact answer: zero.
        let mut zero = row(&shape, ask, k, &shape.empty(to), 0, to > marks.closed);
        zero.estimate = Estimate::exact(0.0);
        zero.parts.clear();
        rows.push(zero);
    }
    rows.sort_by(|a, b| {
        b.estimate
            .value
            .total_cmp(&a.estimate.value)
            .then_with(|| a.key.cmp(&b.key))
    });
    Ok(Answer {
        kind: m.kind.name(),
        part: m.kind.part(),
        from,
        to,
        rows,
        clipped,
    })
}
