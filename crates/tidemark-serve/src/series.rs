//! `/api/v1/series`: one key's window answer at evenly spaced ends — `from`, `from + step`,
//! … `to` — each point what `tidemark query --key KEY --window W --at END` answers.
//!
//! # What a series costs
//!
//! The key's buckets are read once for the whole series, not once a point: one keyed read
//! over `[from − window, to)` ([`Store::key_buckets`], a lookup per bucket start), from which
//! each point's window query takes its buckets ([`Prefetched`]); the points then answer from
//! the same checkpoint, its metadata read once. Merging a point's buckets still costs a
//! decode and a merge per bucket of its window (the stream crate's window query merges what
//! it is handed, and no kind's merge can be undone to slide a window), so a series costs its
//! points × its window's buckets. That is bounded: over [`MAX_SERIES_BUCKETS`] the request is
//! refused with a 400 naming `step` (fewer points: a longer step or a shorter span) or, when
//! one window alone is over it, `window`.

use std::cell::RefCell;

use serde_json::{json, Value};
use tidemark_stream::config::Config;
use tidemark_stream::store::{Meta, ReadTxn, Store, StoreError, Txn, VerifiedStarts};
use tidemark_stream::time::{format_duration, format_rfc3339, parse_duration};

use crate::ask::WindowAsk;
use crate::error::ApiError;
use crate::params::Params;
use crate::render::rows;

/// The most points a series has.
pub const MAX_STEPS: u64 = 1440;

/// The most bucket merges one series may cost: its points × the buckets of its window (a
/// 1,440-point series of 2-hour windows of 1-minute buckets is 172,800).
pub const MAX_SERIES_BUCKETS: u64 = 200_000;

/// One key's windows at each point from `from` to `to`, every `step`.
pub fn series(store: &dyn Store, config: &Config, p: &Params) -> Result<Value, ApiError> {
    p.only(&[
        "metric", "key", "window", "from", "to", "step", "quantile", "items",
    ])?;
    let w = WindowAsk::read(p, config)?;
    let key = p.required("key")?;
    let width = w.metric.width;
    let step = match p.one("step")? {
        None => width,
        Some(t) => parse_duration(t)
            .filter(|&d| d > 0 && d % width == 0)
            .ok_or_else(|| {
                ApiError::bad(
                    "step",
                    format!(
                        "expected a duration that is a multiple of {}'s bucket ({}), got {t:?}",
                        w.metric.name,
                        tidemark_stream::time::format_duration(width)
                    ),
                )
            })?,
    };
    let to = match p.time("to")? {
        Some(t) => t - t % width,
        // The newest window's end, as a query without `at` answers it.
        None => w.run(store, Some(key.as_bytes()), None, None)?.to,
    };
    let from = match p.time("from")? {
        Some(t) => t - t % width,
        None => to.saturating_sub(step.saturating_mul(59)),
    };
    if from > to {
        return Err(ApiError::bad("from", "expected a time before `to`"));
    }
    let points = (to - from) / step + 1;
    if points > MAX_STEPS {
        return Err(ApiError::bad(
            "step",
            format!(
                "from {} to {} every {} is {points} points, more than {MAX_STEPS}",
                format_rfc3339(from),
                format_rfc3339(to),
                tidemark_stream::time::format_duration(step)
            ),
        ));
    }
    check_cost(points, w.window, width, from, to, step)?;
    // Each point's window is answered from one read of the key's buckets over them all.
    let meta = store
        .meta()
        .map_err(|e| ApiError::unavailable(format!("the store cannot be read: {e}")))?;
    let once = Prefetched {
        inner: store,
        meta,
        key: key.as_bytes(),
        span: (from.saturating_sub(w.window), to),
        read: RefCell::new(None),
    };
    let mut out = Vec::with_capacity(points as usize);
    let mut omitted = 0u64;
    for i in 0..points {
        let end = from + i * step;
        match w.run(&once, Some(key.as_bytes()), None, Some(end)) {
            Ok(a) => out.push(json!({
                "from": format_rfc3339(a.from),
                "to": format_rfc3339(a.to),
                "clipped": a.clipped,
                "rows": rows(&w, &a),
            })),
            // A window wholly before the retention horizon has no answer: the series
            // starts where the store's buckets do.
            Err(e) if e.parameter.as_deref() == Some("at") => omitted += 1,
            Err(e) => return Err(e),
        }
    }
    Ok(json!({
        "metric": w.metric.name,
        "kind": w.metric.kind,
        "key": key,
        "window_s": w.window as f64 / 1000.0,
        "step_s": step as f64 / 1000.0,
        "from": format_rfc3339(from),
        "to": format_rfc3339(to),
        "omitted": omitted,
        "points": out,
    }))
}

/// Refuses a series whose points × window buckets is over [`MAX_SERIES_BUCKETS`]: naming
/// `window` when one window alone is, `step` otherwise.
fn check_cost(
    points: u64,
    window: u64,
    width: u64,
    from: u64,
    to: u64,
    step: u64,
) -> Result<(), ApiError> {
    let per = window / width.max(1);
    let cost = points.saturating_mul(per);
    if cost <= MAX_SERIES_BUCKETS {
        return Ok(());
    }
    if per > MAX_SERIES_BUCKETS {
        return Err(ApiError::bad(
            "window",
            format!(
                "a {} window is {per} buckets, more than a series may merge \
                 ({MAX_SERIES_BUCKETS} bucket reads in all)",
                format_duration(window)
            ),
        ));
    }
    Err(ApiError::bad(
        "step",
        format!(
            "from {} to {} every {} is {points} points of {per} buckets each ({cost} bucket \
             reads), more than {MAX_SERIES_BUCKETS}: at most {} points of a {} window (a longer \
             step or a shorter span)",
            format_rfc3339(from),
            format_rfc3339(to),
            format_duration(step),
            MAX_SERIES_BUCKETS / per,
            format_duration(window)
        ),
    ))
}

/// The store for a series' points: one key's keyed reads within `span` are answered from one
/// read of its buckets over the span (the first point's asks it), and the metadata from one
/// read; anything else goes to the store underneath.
struct Prefetched<'a> {
    inner: &'a dyn Store,
    meta: Option<Meta>,
    key: &'a [u8],
    span: (u64, u64),
    /// The key's buckets over the span, and the table and open table they were read from:
    /// its closed buckets by start, then its open rows by start, as `key_buckets` gives them.
    read: RefCell<Option<KeyRead>>,
}

/// A key's buckets read from a table and an open table: `(table, open, buckets)`.
type KeyRead = (String, Option<String>, Vec<(u64, Vec<u8>)>);

impl Store for Prefetched<'_> {
    fn read(
        &self,
        f: &mut dyn FnMut(&dyn ReadTxn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.inner.read(f)
    }

    fn view(&self) -> Result<Box<dyn ReadTxn>, StoreError> {
        self.inner.view()
    }

    fn write(
        &mut self,
        _: &mut dyn FnMut(&mut dyn Txn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        // Never asked: the server only reads.
        Err(StoreError::Damaged {
            what: "a series' store is read-only".to_string(),
        })
    }

    fn meta(&self) -> Result<Option<Meta>, StoreError> {
        Ok(self.meta.clone())
    }

    fn key_buckets(
        &self,
        metric: &str,
        open: Option<&str>,
        from: u64,
        to: u64,
        key: &[u8],
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let (lo, hi) = self.span;
        if key != self.key || from < lo || to > hi {
            return self.inner.key_buckets(metric, open, from, to, key);
        }
        let mut read = self.read.borrow_mut();
        let same = |r: &KeyRead| r.0 == metric && r.1.as_deref() == open;
        if !read.as_ref().is_some_and(same) {
            let parts = self.inner.key_buckets(metric, open, lo, hi, key)?;
            *read = Some((metric.to_string(), open.map(str::to_string), parts));
        }
        // Closed then open, each by start: kept in that order, as a read of [from, to) gives.
        Ok(read
            .as_ref()
            .map(|r| {
                r.2.iter()
                    .filter(|(s, _)| (from..to).contains(s))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    fn verified_starts(&self) -> Option<&VerifiedStarts> {
        self.inner.verified_starts()
    }

    fn generation(&self) -> Result<Option<u64>, StoreError> {
        self.inner.generation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_is_bounded_by_its_bucket_reads() {
        let m = 60_000;
        let h = 60 * m;
        // 1,440 points of 2-hour windows of 1-minute buckets: 172,800 reads.
        assert!(check_cost(1440, 2 * h, m, 0, 1439 * m, m).is_ok());
        // Of 7-day windows: 14,515,200, too many; fewer points would do.
        let e = check_cost(1440, 7 * 24 * h, m, 0, 1439 * m, m).unwrap_err();
        assert_eq!((e.status, e.parameter.as_deref()), (400, Some("step")));
        assert!(check_cost(19, 7 * 24 * h, m, 0, 18 * m, m).is_ok());
        // One window of more buckets than the bound: no step helps.
        let e = check_cost(1, 365 * 24 * h, m, 0, 0, m).unwrap_err();
        assert_eq!(e.parameter.as_deref(), Some("window"));
    }
}
