//! The engine's snapshot: what is in neither the store's buckets nor its state rows (event
//! time, counters, watermarks, open starts, the keys to read back at once), and its restore,
//! every field checked.

use std::collections::BTreeMap;

use tidemark::codec::{Reader, Writer};
use tidemark::DecodeError;

use super::spill::{self, StateSource, StateTable};
use super::{Engine, KeyState, MetricState, Summary, WindowState};
use crate::config::Config;
use crate::kinds::CountWindow;
use crate::kinds::WindowModel;
use crate::EngineError;

/// 4 holds no keys (they are in state rows, see [`super::spill`]): watermarks, counters, the
/// open starts and which keys a restore must read back. 3 (with every key's open buckets,
/// histograms and streaks, and per-item streaks) and 2 (without per-item streaks) are still
/// read, into keys held in memory that the next checkpoint writes as rows.
const SNAPSHOT_VERSION: u8 = 4;

fn put_opt(w: &mut Writer, t: Option<u64>) {
    match t {
        Some(t) => w.u8(1).u64(t),
        None => w.u8(0).u64(0),
    };
}

impl Engine {
    /// The engine's state that is not in the store: event time, counters, watermarks, the
    /// starts of open buckets, and the keys a restore must read back at once (those not
    /// quiet at the last [`Engine::take_outputs`]; every other key is read back at its next
    /// event). Its size grows with those keys only. Take it right after
    /// [`Engine::take_outputs`], whose state rows it goes with.
    pub fn snapshot(&self) -> Vec<u8> {
        debug_assert!(
            self.batch.is_empty(),
            "a snapshot with events deferred: drain first"
        );
        let mut w = Writer::new();
        w.u8(SNAPSHOT_VERSION);
        put_opt(&mut w, self.max_time);
        w.u64(self.clock);
        w.u64(self.metrics.len() as u64);
        for m in &self.metrics {
            let c = &m.counters;
            for v in [c.events, c.late, c.dropped, c.merged, c.buckets, c.alerts] {
                w.u64(v);
            }
            put_opt(&mut w, m.closed_until);
            put_opt(&mut w, m.rolled_until);
            w.u64(m.min_limit.to_bits());
            w.u8(m.spill.maybe as u8);
            // A restore holds no key in memory: every key's open buckets are spilled then.
            let mut open = m.spill.open.clone();
            for ks in m.keys.values() {
                for o in ks.open.iter() {
                    *open.entry(o.start).or_default() += 1;
                }
            }
            w.u64(m.open_starts.len() as u64);
            for &s in &m.open_starts {
                w.u64(s).u64(open.get(&s).copied().unwrap_or(0));
            }
            w.u64(m.spill.hot.len() as u64);
            for k in &m.spill.hot {
                let k = k.as_bytes();
                w.u64(k.len() as u64).raw(k);
            }
        }
        w.bytes().to_vec()
    }

    /// An engine resumed from [`Engine::snapshot`] bytes, reading keys back from `source`
    /// (the store's state rows and closed buckets). A snapshot of version 2 or 3 holds every
    /// key itself; the rings of its distinct and frequency metrics are rebuilt from the stored
    /// buckets `source` scans.
    pub fn restore(
        config: &Config,
        snapshot: &[u8],
        source: &mut dyn StateSource,
    ) -> Result<Engine, EngineError> {
        let mut e = Engine::new(config)?;
        let mut r = Reader::new(snapshot);
        let bad = EngineError::Snapshot;
        let off = r.offset();
        let v = r.u8("snapshot version").map_err(bad)?;
        if !(2..=SNAPSHOT_VERSION).contains(&v) {
            return Err(bad(Reader::invalid(
                "snapshot version",
                off,
                "2, 3 or 4",
                v as u64,
            )));
        }
        e.max_time = opt(&mut r).map_err(bad)?;
        if v >= 4 {
            e.clock = r.u64("clock").map_err(bad)?;
        }
        let off = r.offset();
        let n = r.u64("metrics").map_err(bad)?;
        if n != e.metrics.len() as u64 {
            return Err(bad(Reader::invalid(
                "metrics",
                off,
                "the config's number of metrics",
                n,
            )));
        }
        for (i, m) in e.metrics.iter_mut().enumerate() {
            read_watermarks(m, &mut r).map_err(bad)?;
            if v >= 4 {
                restore_rows(m, i, &mut r, source)?;
            } else {
                restore_keys(m, i, v, &mut r, source)?;
            }
        }
        r.finish().map_err(bad)?;
        Ok(e)
    }
}

fn opt(r: &mut Reader<'_>) -> Result<Option<u64>, DecodeError> {
    let off = r.offset();
    let flag = r.u8("flag")?;
    let t = r.u64("time")?;
    match flag {
        0 => Ok(None),
        1 => Ok(Some(t)),
        f => Err(Reader::invalid("flag", off, "0 or 1", f as u64)),
    }
}

fn bytes_field(r: &mut Reader<'_>, f: &'static str) -> Result<Vec<u8>, DecodeError> {
    let n = r.count(f, 1, u64::MAX)?;
    Ok(r.bytes(n as u64, f)?.to_vec())
}

/// Every time the engine adds to must stay far from u64::MAX: ends are start + width.
fn aligned(t: u64, width: u64) -> bool {
    t % width == 0 && t <= u64::MAX / 2
}

/// Counters, closed-until and rolled-until, checked against the metric's config.
fn read_watermarks(m: &mut MetricState, r: &mut Reader<'_>) -> Result<(), DecodeError> {
    let c = &mut m.counters;
    for v in [
        &mut c.events,
        &mut c.late,
        &mut c.dropped,
        &mut c.merged,
        &mut c.buckets,
        &mut c.alerts,
    ] {
        *v = r.u64("counter")?;
    }
    let off = r.offset();
    m.closed_until = opt(r)?;
    let roff = r.offset();
    m.rolled_until = opt(r)?;
    if m.rolled_until.is_some() != (m.cfg.rollup.is_some() && m.closed_until.is_some())
        || m.rolled_until
            .zip(m.cfg.rollup)
            .is_some_and(|(t, w)| t % w != 0 || Some(t) > m.closed_until)
    {
        return Err(Reader::invalid(
            "rolled until",
            roff,
            "a rollup boundary not after closed-until, present iff the metric rolls up",
            m.rolled_until.unwrap_or(0),
        ));
    }
    if m.closed_until.is_some_and(|c| !aligned(c, m.cfg.bucket)) {
        return Err(Reader::invalid(
            "closed until",
            off,
            "a multiple of the bucket width",
            m.closed_until.unwrap_or(0),
        ));
    }
    Ok(())
}

/// A start of an open bucket: aligned, increasing, not before closed-until.
fn open_start(
    m: &MetricState,
    r: &mut Reader<'_>,
    previous: Option<u64>,
) -> Result<u64, DecodeError> {
    let off = r.offset();
    let start = r.u64("bucket start")?;
    if !aligned(start, m.cfg.bucket)
        || previous.is_some_and(|p| start <= p)
        || m.closed_until.is_none_or(|c| start < c)
    {
        return Err(Reader::invalid(
            "bucket start",
            off,
            "aligned, increasing, and not before closed-until",
            start,
        ));
    }
    Ok(start)
}

/// Version 4: the open starts and spill bookkeeping; the keys not quiet are read back now.
fn restore_rows(
    m: &mut MetricState,
    i: usize,
    r: &mut Reader<'_>,
    source: &mut dyn StateSource,
) -> Result<(), EngineError> {
    let bad = EngineError::Snapshot;
    let stored_limit = f64::from_bits(r.u64("min limit").map_err(bad)?);
    let off = r.offset();
    m.spill.maybe = match r.u8("spilled").map_err(bad)? {
        0 => false,
        1 => true,
        f => return Err(bad(Reader::invalid("spilled", off, "0 or 1", f as u64))),
    };
    let n = r.count("open starts", 16, u64::MAX).map_err(bad)?;
    let mut previous = None;
    for _ in 0..n {
        let s = open_start(m, r, previous).map_err(bad)?;
        previous = Some(s);
        m.open_starts.insert(s);
        let spilled = r.u64("spilled keys").map_err(bad)?;
        if spilled > 0 {
            m.spill.open.insert(s, spilled);
        }
    }
    let n = r.count("hot keys", 8, u64::MAX).map_err(bad)?;
    let mut hot = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        hot.push(bytes_field(r, "hot key").map_err(bad)?);
    }
    // Every key written is in the store; none in memory yet.
    m.spill.maybe |= m.counters.events > 0 || m.counters.merged > 0;
    // Rules changed since (the config's fingerprint leaves them out): which keys were
    // quiet is unknown, so every key with state is read back — key rows, open rows, and
    // closed buckets in the window.
    if stored_limit.to_bits() != m.min_limit.to_bits() {
        let until = m.closed_until.unwrap_or(0);
        let from = until.saturating_sub(m.cfg.window);
        let mut all = std::collections::BTreeSet::new();
        let mut add = |k: &[u8]| {
            all.insert(k.to_vec());
        };
        source
            .keys(StateTable::Key, i, 0, 1, &mut add)
            .and_then(|_| source.keys(StateTable::Open, i, until, u64::MAX, &mut add))
            .and_then(|_| source.keys(StateTable::Closed, i, from, until, &mut add))
            .map_err(EngineError::Store)?;
        hot.extend(all);
    }
    for k in hot {
        if !m.keys.contains_key(k.as_slice()) {
            spill::load(m, i, &k, source, false)?;
        }
    }
    Ok(())
}

/// Versions 2 and 3: every key's open buckets, histogram and streaks; rings from the store.
fn restore_keys(
    m: &mut MetricState,
    i: usize,
    v: u8,
    r: &mut Reader<'_>,
    source: &mut dyn StateSource,
) -> Result<(), EngineError> {
    let bad = EngineError::Snapshot;
    let buckets = r.count("open buckets", 16, u64::MAX).map_err(bad)?;
    let mut previous: Option<u64> = None;
    for _ in 0..buckets {
        let start = open_start(m, r, previous).map_err(bad)?;
        previous = Some(start);
        m.open_starts.insert(start);
        let keys = r.count("bucket keys", 16, u64::MAX).map_err(bad)?;
        for _ in 0..keys {
            let k = bytes_field(r, "key").map_err(bad)?;
            let s = bytes_field(r, "summary").map_err(bad)?;
            let s = m.shape.decode(&s, start).map_err(bad)?;
            let rules = m.cfg.alerts.len();
            let (ks, _) = m.keys.get_or_insert_with(&k, || KeyState::new(rules));
            if ks.open.last_start() == Some(start) {
                return Err(bad(DecodeError::Invalid {
                    field: "bucket keys",
                    offset: r.offset(),
                    expected: "each key once a bucket",
                    got: k.len() as u64,
                }));
            }
            ks.open.insert(start, s);
        }
    }
    let keys = r.count("windows", 8, u64::MAX).map_err(bad)?;
    let rules = m.cfg.alerts.len();
    for _ in 0..keys {
        let k = bytes_field(r, "key").map_err(bad)?;
        let mut streak = Vec::with_capacity(rules);
        for _ in 0..rules {
            streak.push(r.u32("streak").map_err(bad)?);
        }
        let h = bytes_field(r, "histogram").map_err(bad)?;
        let window = match m.shape.kind().window_model() {
            WindowModel::Histogram { epsilon } => {
                let w = CountWindow::from_bytes(&h).map_err(bad)?;
                if !w.matches(m.cfg.window, epsilon) {
                    return Err(bad(Reader::invalid(
                        "histogram",
                        r.offset(),
                        "the metric's window and ε",
                        m.cfg.window,
                    )));
                }
                Some(WindowState::Hist(Box::new(w)))
            }
            WindowModel::Ring => None,
        };
        let mut items = BTreeMap::new();
        if v >= 3 {
            let elem = 8 + 4 * rules as u64;
            let n = r.count("item streaks", elem, u64::MAX).map_err(bad)?;
            for _ in 0..n {
                let off = r.offset();
                let item = bytes_field(r, "item").map_err(bad)?;
                let mut streak = Vec::with_capacity(rules);
                for _ in 0..rules {
                    streak.push(r.u32("item streak").map_err(bad)?);
                }
                let item = item.into_boxed_slice();
                if items
                    .last_key_value()
                    .is_some_and(|(last, _)| *last >= item)
                {
                    return Err(bad(Reader::invalid(
                        "item streaks",
                        off,
                        "items in increasing byte order, each once",
                        item.len() as u64,
                    )));
                }
                items.insert(item, streak);
            }
            // Only a kind whose windows name subjects keeps their streaks.
            if n > 0 && m.shape.empty(0).named_subjects().is_none() {
                return Err(bad(Reader::invalid(
                    "item streaks",
                    r.offset(),
                    "none for a metric that is not a frequency metric",
                    n as u64,
                )));
            }
        }
        let rules = m.cfg.alerts.len();
        let (ks, _) = m.keys.get_or_insert_with(&k, || KeyState::new(rules));
        ks.streak = streak.into_boxed_slice();
        ks.items = items;
        if window.is_some() {
            ks.window = window;
        }
    }
    if let (true, Some(until)) = (m.shape.rings(), m.closed_until) {
        let from = until.saturating_sub(m.cfg.window);
        let shape = m.shape.clone();
        let mut err = None;
        let mut ring_of: BTreeMap<Vec<u8>, Vec<(u64, Summary)>> = BTreeMap::new();
        source
            .scan(
                i,
                from,
                until,
                &mut |key, start, bytes| match shape.decode(bytes, start) {
                    Ok(s) => ring_of.entry(key.to_vec()).or_default().push((start, s)),
                    Err(e) => err = Some(e),
                },
            )
            .map_err(EngineError::Store)?;
        if let Some(e) = err {
            return Err(bad(e));
        }
        for (k, mut ring) in ring_of {
            ring.sort_by_key(|(s, _)| *s);
            let rules = m.cfg.alerts.len();
            let (ks, _) = m.keys.get_or_insert_with(&k, || KeyState::new(rules));
            ks.window = Some(WindowState::Buckets(ring.into_iter().collect()));
        }
    }
    // Every key is new to the store's rows: the next checkpoint writes them.
    m.mem = 0;
    let until = m.closed_until.unwrap_or(0);
    for ks in m.keys.values_mut() {
        ks.last_start = ks.open.last_start().unwrap_or(until).max(until);
        ks.mem = spill::key_bytes(ks);
        m.mem += ks.mem;
    }
    Ok(())
}
