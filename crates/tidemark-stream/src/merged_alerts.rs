//! Alert rules evaluated on windows merged over a run's parts, for a run spread over
//! processes (one part per input partition, `tidemark-cluster`).
//!
//! A part's engine sees only its partition's share of a key: a metric keyed otherwise than
//! the input is partitioned (flows per destination port, read from a topic partitioned by
//! source) would alert on each share. Here the rules are evaluated once for the run, on the
//! store read merged: at each window end `T` of a metric that **every** part has closed
//! (`closed[i]`, the earliest of the parts' watermarks), every key's buckets in
//! `[T − window, T)` — the union of the parts', merged as summaries merge — give the key's
//! window summary, and the rules advance the key's streaks exactly as the engine's close
//! does (a window end where no key has a bucket ending is no close, as in one process, whose
//! closes are of the buckets some key has open) ([`crate::engine`]'s `alert::step`, the same code): an episode starts when a window
//! passes the limit, a rule fires at the `consecutive`-th close above it, and the episode ends
//! at the first close below. A frequency window's named items are subjects of their own, as
//! in the engine.
//!
//! Differences from one process's alerts, by design:
//! - **no early alerts**: a running window lives in the parts' engines, not in the store, so a
//!   rule with `early = true` fires at the close (`closed`), never `early`;
//! - **a count metric compares its exact window count** (the buckets' sum), where one process
//!   compares its exponential histogram's estimate of it;
//! - a line's `at` is the window's end plus the metric's allowed lateness: the earliest event
//!   time at which one process would have closed it.
//!
//! The evaluator's state — per metric the last window end evaluated, and the streaks of the
//! keys in an episode (a key whose streaks are all zero is not kept) — is a few bytes a key in
//! an episode ([`MergedAlerts::to_bytes`]): the caller stores it after emitting a close's
//! lines, so that an evaluator started again after a crash raises again at most the lines of
//! the closes it had not stored (at least once; an alert's identity is its metric, key,
//! subject, phase and window).
//!
//! Memory: one window's buckets of every key at once while a close is evaluated (the store's
//! scan by key), and the streaks of the keys in an episode.
//!
//! ```
//! use tidemark_stream::config::Config;
//! use tidemark_stream::merged_alerts::MergedAlerts;
//!
//! let config = Config::from_toml(r#"
//! [input]
//! format = "csv"
//! time_field = "ts"
//! [[metric]]
//! name = "flows"
//! kind = "count"
//! key = ["port"]
//! bucket = "1m"
//! window = "5m"
//! [[metric.alert]]
//! above = 100
//! "#)?;
//! let mut alerts = MergedAlerts::new(&config);
//! // Nothing to evaluate until the metric's first bucket is known.
//! assert_eq!(alerts.next_due(&config, &[600_000]), None);
//! alerts.start_at(0, 60_000);
//! let due = alerts.next_due(&config, &[600_000]).unwrap();
//! assert_eq!((due.metric, due.end), (0, 120_000));
//! // The state round-trips through its bytes.
//! let again = MergedAlerts::restore(&config, &alerts.to_bytes())?;
//! assert_eq!(again.next_due(&config, &[600_000]), Some(due));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;

use tidemark::codec::{Reader, Writer};
use tidemark::{DecodeError, Estimate};

use crate::config::{Config, LatePolicy};
use crate::engine::{self, step_window, MetricShape, Summary, Window};
use crate::pipeline::AlertOut;
use crate::query::QueryError;
use crate::rule::AlertRule;
use crate::store::Store;

/// The state's first byte: its version.
const VERSION: u8 = 1;

/// The most keys in an episode a stored state may hold (a bound before allocation).
const MAX_KEYS: u64 = 1 << 32;

/// The longest key or item a stored state may hold, bytes.
const MAX_NAME: u64 = 1 << 20;

/// A key's streak words (one per rule, as the engine keeps them), and its named items'.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Streaks {
    key: Vec<u32>,
    items: BTreeMap<Box<[u8]>, Vec<u32>>,
}

impl Streaks {
    fn is_reset(&self) -> bool {
        self.items.is_empty() && self.key.iter().all(|&s| s == 0)
    }
}

/// One metric's evaluation: where it stands and its keys in an episode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct MetricAlerts {
    /// The last window end evaluated (`None`: not started).
    through: Option<u64>,
    keys: BTreeMap<Box<[u8]>, Streaks>,
}

/// A close to evaluate: metric `metric`'s window ending at `end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// The metric's index in the config.
    pub metric: usize,
    /// The window's end (a bucket boundary), ms.
    pub end: u64,
}

/// A metric's window at its last close evaluated: each key's buckets, by start.
#[derive(Clone, Debug)]
struct Windows {
    end: u64,
    keys: BTreeMap<Box<[u8]>, Vec<(u64, Summary)>>,
}

/// The rules of a run's metrics evaluated on merged windows (see the module doc).
#[derive(Clone, Debug)]
pub struct MergedAlerts {
    fingerprint: u64,
    metrics: Vec<MetricAlerts>,
    /// Per metric, the buckets read at its last close (not part of the state: an evaluator
    /// that has none reads the whole window).
    windows: Vec<Option<Windows>>,
}

impl PartialEq for MergedAlerts {
    fn eq(&self, other: &MergedAlerts) -> bool {
        self.fingerprint == other.fingerprint && self.metrics == other.metrics
    }
}

impl MergedAlerts {
    /// A fresh evaluation of `config`'s rules: no metric started.
    pub fn new(config: &Config) -> MergedAlerts {
        MergedAlerts {
            fingerprint: config.fingerprint(),
            metrics: vec![MetricAlerts::default(); config.metrics.len()],
            windows: vec![None; config.metrics.len()],
        }
    }

    /// The metrics that have rules and no first bucket yet: give each its first bucket's
    /// start with [`MergedAlerts::start_at`] once the store has one.
    pub fn unstarted<'c>(&'c self, config: &'c Config) -> impl Iterator<Item = usize> + 'c {
        config
            .metrics
            .iter()
            .zip(&self.metrics)
            .enumerate()
            .filter(|(_, (m, a))| !m.alerts.is_empty() && a.through.is_none())
            .map(|(i, _)| i)
    }

    /// Starts metric `metric` at the bucket starting at `first`: its first window evaluated
    /// ends at that bucket's end. A metric started already is left as it is.
    pub fn start_at(&mut self, metric: usize, first: u64) {
        if let Some(m) = self.metrics.get_mut(metric) {
            m.through.get_or_insert(first);
        }
    }

    /// The last window end evaluated of metric `metric`.
    pub fn through(&self, metric: usize) -> Option<u64> {
        self.metrics.get(metric).and_then(|m| m.through)
    }

    /// The earliest close not yet evaluated whose window every part has closed: metric `i`'s
    /// next window end at or below `closed[i]` (buckets starting before `closed[i]` are closed
    /// in every part). `None` when every started metric is evaluated up to its `closed`.
    pub fn next_due(&self, config: &Config, closed: &[u64]) -> Option<Due> {
        let mut best: Option<Due> = None;
        for (i, (m, a)) in config.metrics.iter().zip(&self.metrics).enumerate() {
            let (Some(through), Some(&closed)) = (a.through, closed.get(i)) else {
                continue;
            };
            if m.alerts.is_empty() {
                continue;
            }
            let width = m.bucket;
            let end = through - through % width + width;
            if end <= closed && best.is_none_or(|b| end < b.end) {
                best = Some(Due { metric: i, end });
            }
        }
        best
    }

    /// Evaluates close `due` over `store` (every part, merged): advances the streaks of every
    /// key with buckets in the window (a key without any is reset) and returns the lines due,
    /// by key.
    ///
    /// Under `late = "drop"` a closed bucket never changes, so the buckets read for a close
    /// are kept for the next one, which reads only its newest start: each bucket is read once.
    /// Under `late = "merge"` a late event may still change a bucket inside the window (as it
    /// changes one process's live window), so every close reads its whole window.
    pub fn evaluate(
        &mut self,
        config: &Config,
        store: &dyn Store,
        due: Due,
    ) -> Result<Vec<AlertOut>, QueryError> {
        let corrupt = |message: String| QueryError::Corrupt { message };
        let m = config
            .metrics
            .get(due.metric)
            .ok_or_else(|| corrupt(format!("no metric {} in the config", due.metric)))?;
        let shape = MetricShape::of(m);
        let width = shape.width();
        if due.end % width != 0 || due.end < width {
            return Err(corrupt(format!(
                "a window end {} that is no bucket boundary of {} ms",
                due.end, width
            )));
        }
        let window_start = due.end.saturating_sub(m.window);
        let last = due.end - width;
        let kept = self.windows[due.metric]
            .take()
            .filter(|w| w.end + width == due.end && m.late == LatePolicy::Drop);
        let (read_from, mut keys) = match kept {
            Some(w) => (last, w.keys),
            None => (window_start, BTreeMap::new()),
        };
        let mut failed = None;
        let mut closing = false;
        store
            .scan_by_key(
                &m.name,
                None,
                read_from,
                due.end,
                width,
                &mut |key, parts| {
                    if failed.is_some() {
                        return;
                    }
                    match by_start(&shape, parts) {
                        Ok(b) => {
                            closing |= b.iter().any(|(s, _)| *s == last);
                            keys.entry(key.into()).or_default().extend(b);
                        }
                        Err(e) => failed = Some(corrupt(format!("{}: {e}", m.name))),
                    }
                },
            )
            .map_err(QueryError::Store)?;
        if let Some(e) = failed {
            return Err(e);
        }
        // The buckets the window slid past leave it.
        keys.retain(|_, b| {
            b.retain(|(s, _)| *s >= window_start);
            !b.is_empty()
        });
        let close = Close {
            line: engine::Close {
                metric: due.metric,
                start: last,
                window_start,
                end: due.end,
                at: due.end.saturating_add(m.allowed_lateness),
            },
            name: &m.name,
            rules: &m.alerts,
            shape: &shape,
            min_limit: shape.min_limit(&m.alerts),
        };
        let metric = &mut self.metrics[due.metric];
        let mut lines = Vec::new();
        // No key has the bucket ending here: one process has no such close.
        if closing {
            // A key in an episode with no bucket in the window is not carried over: reset.
            let mut before = std::mem::take(&mut metric.keys);
            for (key, buckets) in &keys {
                let streaks = before.remove(key).unwrap_or_default();
                if let Some(s) = close.key(key, buckets, streaks, &mut lines) {
                    metric.keys.insert(key.clone(), s);
                }
            }
        }
        metric.through = Some(due.end);
        self.windows[due.metric] = Some(Windows { end: due.end, keys });
        Ok(lines)
    }

    /// The state as bytes, for [`MergedAlerts::restore`].
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(VERSION)
            .u64(self.fingerprint)
            .u64(self.metrics.len() as u64);
        for m in &self.metrics {
            w.u8(u8::from(m.through.is_some()))
                .u64(m.through.unwrap_or(0))
                .u64(m.keys.len() as u64);
            for (key, s) in &m.keys {
                name(&mut w, key);
                words(&mut w, &s.key);
                w.u64(s.items.len() as u64);
                for (item, streak) in &s.items {
                    name(&mut w, item);
                    words(&mut w, streak);
                }
            }
        }
        w.into_bytes()
    }

    /// A state stored by [`MergedAlerts::to_bytes`] for `config`, every field checked before
    /// anything is allocated for it. A state of another config (its metrics' shapes) is
    /// refused; a metric whose rules changed in number keeps its place and starts its
    /// streaks again.
    pub fn restore(config: &Config, bytes: &[u8]) -> Result<MergedAlerts, DecodeError> {
        let mut r = Reader::new(bytes);
        r.u8_in("merged alerts version", VERSION..=VERSION, "version 1")?;
        let fingerprint = config.fingerprint();
        r.u64_if(
            "merged alerts config fingerprint",
            "the fingerprint of the run's config",
            |f| f == fingerprint,
        )?;
        let n = config.metrics.len() as u64;
        r.u64_in(
            "merged alerts metrics",
            n..=n,
            "the config's number of metrics",
        )?;
        let mut metrics = Vec::with_capacity(config.metrics.len());
        for m in &config.metrics {
            let rules = m.alerts.len();
            let started = r.bool("merged alerts started")?;
            // A window end a bucket can follow (the next close is `through` + a bucket).
            let through = r.u64_in(
                "merged alerts through",
                ..=u64::MAX - m.bucket,
                "a time a bucket's width below 2^64",
            )?;
            // A key takes at least its length, its streak count and its item count.
            let n = r.count("merged alerts keys", 24, MAX_KEYS)?;
            let mut keys = BTreeMap::new();
            for _ in 0..n {
                let key = read_name(&mut r, "merged alerts key length", "merged alerts key")?;
                let key_words = read_words(&mut r)?;
                let items_n = r.count("merged alerts items", 16, MAX_KEYS)?;
                let mut items = BTreeMap::new();
                for _ in 0..items_n {
                    let item =
                        read_name(&mut r, "merged alerts item length", "merged alerts item")?;
                    let words = read_words(&mut r)?;
                    if words.len() == rules {
                        items.insert(item, words);
                    }
                }
                if key_words.len() == rules {
                    keys.insert(
                        key,
                        Streaks {
                            key: key_words,
                            items,
                        },
                    );
                }
            }
            metrics.push(MetricAlerts {
                through: started.then_some(through),
                keys,
            });
        }
        r.finish()?;
        Ok(MergedAlerts {
            fingerprint,
            windows: vec![None; metrics.len()],
            metrics,
        })
    }
}

/// One close of one metric.
struct Close<'a> {
    /// The close as its lines name it.
    line: engine::Close,
    name: &'a str,
    rules: &'a [AlertRule],
    shape: &'a MetricShape,
    /// The smallest limit of the rules.
    min_limit: f64,
}

impl Close<'_> {
    /// Advances `streaks`, a key's, with its window `buckets` (by start), pushing the lines
    /// due onto `lines`; the streaks after, or `None` when all are reset.
    fn key(
        &self,
        key: &[u8],
        buckets: &[(u64, Summary)],
        mut streaks: Streaks,
        lines: &mut Vec<AlertOut>,
    ) -> Option<Streaks> {
        let rules = self.rules;
        // The engine's shortcut, taken as it takes it: a window whose buckets' bounds sum to
        // no more than every limit resets the key's streaks unevaluated (an exact union is at
        // most the sum; an estimate may land above it).
        if buckets.iter().map(|(_, b)| b.upper()).sum::<f64>() <= self.min_limit {
            return None;
        }
        let window = window_of(self.shape, buckets)?;
        streaks.key.resize(rules.len(), 0);
        // `step` says the phase: `closed` here, as no early alert is ever raised.
        let mut fire = |rule: usize, limit: f64, estimate: Estimate, item: Option<&[u8]>, phase| {
            let alert = self
                .line
                .line(key, (rule, &rules[rule], limit), estimate, item, phase);
            lines.push(AlertOut::new(self.name, alert));
        };
        step_window(
            rules,
            self.shape,
            self.min_limit,
            &mut streaks.key,
            &mut streaks.items,
            Window::Merged(&window),
            &mut fire,
        );
        (!streaks.is_reset()).then_some(streaks)
    }
}

/// A key's buckets `(start, bytes)` by start, each start's parts (one a partition that saw
/// the key then) merged into one bucket: the buckets one process holds.
fn by_start(shape: &MetricShape, parts: &[(u64, Vec<u8>)]) -> Result<Vec<(u64, Summary)>, String> {
    let mut out: Vec<(u64, Summary)> = Vec::new();
    for (start, bytes) in parts {
        let s = shape.decode(bytes, *start).map_err(|e| e.to_string())?;
        match out.last_mut() {
            Some((last, acc)) if *last == *start => acc.absorb(&s).map_err(|e| e.to_string())?,
            _ => out.push((*start, s)),
        }
    }
    Ok(out)
}

/// The window's summary as the engine's ring makes it at a close: its buckets merged into an
/// empty summary, oldest first. (Even a window of one bucket is merged: a sketch that was
/// merged estimates as merged sketches do, not by its insertion history, and the engine's
/// window always was.)
fn window_of(shape: &MetricShape, buckets: &[(u64, Summary)]) -> Option<Summary> {
    let (first, _) = buckets.first()?;
    Some(shape.merged(*first, buckets.iter().map(|(_, b)| b)))
}

/// A key's or an item's bytes, after their length.
fn name(w: &mut Writer, bytes: &[u8]) {
    w.u64(bytes.len() as u64).raw(bytes);
}

fn read_name(
    r: &mut Reader<'_>,
    len_field: &'static str,
    field: &'static str,
) -> Result<Box<[u8]>, DecodeError> {
    let len = r.count(len_field, 1, MAX_NAME)?;
    Ok(r.bytes(len as u64, field)?.into())
}

fn words(w: &mut Writer, streak: &[u32]) {
    w.u64(streak.len() as u64);
    for &s in streak {
        w.u32(s);
    }
}

fn read_words(r: &mut Reader<'_>) -> Result<Vec<u32>, DecodeError> {
    let n = r.count("merged alerts streaks", 4, 1 << 16)?;
    (0..n).map(|_| r.u32("merged alerts streak")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = r#"
[input]
format = "csv"
time_field = "ts"
[[metric]]
name = "f"
kind = "frequency"
key = ["k"]
item = ["i"]
bucket = "1m"
window = "5m"
[[metric.alert]]
above = 10
[[metric.alert]]
above = 20
consecutive = 3
[[metric]]
name = "plain"
kind = "count"
key = ["k"]
bucket = "1m"
window = "1m"
"#;

    fn state(config: &Config) -> MergedAlerts {
        let mut s = MergedAlerts::new(config);
        s.start_at(0, 60_000);
        let mut items = BTreeMap::new();
        items.insert(b"item".to_vec().into_boxed_slice(), vec![1, 2]);
        s.metrics[0].keys.insert(
            b"key".to_vec().into_boxed_slice(),
            Streaks {
                key: vec![0, 2],
                items,
            },
        );
        s
    }

    type Result = std::result::Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn a_state_round_trips_and_every_damage_is_refused_naming_its_field() -> Result {
        let config = Config::from_toml(CONFIG)?;
        let s = state(&config);
        let bytes = s.to_bytes();
        assert_eq!(MergedAlerts::restore(&config, &bytes)?, s);
        // Every cut is refused, none panics.
        for n in 0..bytes.len() {
            assert!(
                MergedAlerts::restore(&config, &bytes[..n]).is_err(),
                "cut at {n}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            MergedAlerts::restore(&config, &longer),
            Err(DecodeError::TrailingBytes { .. })
        ));
        // Another config's state.
        let other = Config::from_toml(&CONFIG.replace("\"5m\"", "\"10m\""))?;
        let e = MergedAlerts::restore(&other, &bytes).expect_err("another config's state");
        assert!(e.to_string().contains("fingerprint"), "{e}");
        // A key count no bytes could hold is refused before anything is allocated for it.
        let mut huge = bytes.clone();
        let at = 1 + 8 + 8 + 1 + 8;
        huge[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let e = MergedAlerts::restore(&config, &huge).expect_err("a key count past the bytes");
        assert!(e.to_string().contains("merged alerts keys"), "{e}");
        Ok(())
    }

    #[test]
    fn a_metric_whose_rules_changed_in_number_starts_its_streaks_again() -> Result {
        let config = Config::from_toml(CONFIG)?;
        let bytes = state(&config).to_bytes();
        let fewer = Config::from_toml(&CONFIG.replacen(
            "[[metric.alert]]\nabove = 20\nconsecutive = 3\n",
            "",
            1,
        ))?;
        let s = MergedAlerts::restore(&fewer, &bytes)?;
        assert_eq!(s.through(0), Some(60_000));
        assert!(s.metrics[0].keys.is_empty());
        Ok(())
    }

    #[test]
    fn the_next_close_is_the_earliest_pending_one_every_part_has_closed() -> Result {
        let config = Config::from_toml(CONFIG)?;
        let mut s = MergedAlerts::new(&config);
        // A metric without rules is never started nor due.
        assert_eq!(s.unstarted(&config).collect::<Vec<_>>(), vec![0]);
        s.start_at(1, 0);
        assert_eq!(s.next_due(&config, &[u64::MAX, u64::MAX]), None);
        s.start_at(0, 120_000);
        s.start_at(0, 0);
        assert_eq!(s.through(0), Some(120_000), "a started metric stays");
        assert_eq!(s.next_due(&config, &[179_999, u64::MAX]), None);
        assert_eq!(
            s.next_due(&config, &[180_000, 0]),
            Some(Due {
                metric: 0,
                end: 180_000
            })
        );
        Ok(())
    }
}
