//! The engine's snapshot: what is not in the store (event time, counters, open buckets, count
//! histograms, alert streaks), and its restore, every field checked.

use std::collections::{BTreeMap, VecDeque};

use tidemark::codec::{Reader, Writer};
use tidemark::DecodeError;

use super::key::{FastMap, Key};
use super::shape::rings;
use super::{Engine, KeyWindow, OpenBucket, ScanFn, WindowState};
use crate::config::{Config, Kind};
use crate::summary::CountWindow;
use crate::EngineError;

/// 3 adds the per-item alert streaks of frequency metrics; 2 (without them, written before
/// frequency metrics ran) is still read.
const SNAPSHOT_VERSION: u8 = 3;

impl Engine {
    /// The engine's state that is not in the store: event time, counters, open buckets,
    /// count histograms and alert streaks. With the store's closed buckets (for the rings of
    /// distinct and frequency metrics, see [`Engine::restore`]) it resumes exactly where it stopped.
    pub fn snapshot(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(SNAPSHOT_VERSION);
        match self.max_time {
            Some(t) => w.u8(1).u64(t),
            None => w.u8(0).u64(0),
        };
        w.u64(self.metrics.len() as u64);
        for m in &self.metrics {
            let c = &m.counters;
            for v in [c.events, c.late, c.dropped, c.merged, c.buckets, c.alerts] {
                w.u64(v);
            }
            for t in [m.closed_until, m.rolled_until] {
                match t {
                    Some(t) => w.u8(1).u64(t),
                    None => w.u8(0).u64(0),
                };
            }
            w.u64(m.open.len() as u64);
            for b in &m.open {
                w.u64(b.start).u64(b.keys.len() as u64);
                let mut keys: Vec<_> = b.keys.iter().collect();
                keys.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                for (k, &i) in keys {
                    let bytes = b.summaries[i as usize].to_bytes();
                    let k = k.as_bytes();
                    w.u64(k.len() as u64).raw(k);
                    w.u64(bytes.len() as u64).raw(&bytes);
                }
            }
            let mut keys: Vec<_> = m.windows.iter().collect();
            keys.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            w.u64(keys.len() as u64);
            for (k, kw) in keys {
                let k = k.as_bytes();
                w.u64(k.len() as u64).raw(k);
                for &s in &kw.streak {
                    w.u32(s);
                }
                match &kw.state {
                    WindowState::Hist(h) => {
                        let bytes = h.to_bytes();
                        w.u64(bytes.len() as u64).raw(&bytes);
                    }
                    WindowState::Ring(_) => {
                        w.u64(0);
                    }
                }
                w.u64(kw.items.len() as u64);
                for (item, streak) in &kw.items {
                    w.u64(item.len() as u64).raw(item);
                    for &s in streak {
                        w.u32(s);
                    }
                }
            }
        }
        w.bytes().to_vec()
    }

    /// An engine resumed from [`Engine::snapshot`] bytes; `closed` supplies the stored
    /// buckets of each distinct or frequency metric from `closed_until − window` on, to rebuild the
    /// rings.
    pub fn restore(
        config: &Config,
        snapshot: &[u8],
        closed: &mut ScanFn<'_>,
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
                "2 or 3",
                v as u64,
            )));
        }
        let opt = |r: &mut Reader<'_>| -> Result<Option<u64>, DecodeError> {
            let off = r.offset();
            let flag = r.u8("flag")?;
            let t = r.u64("time")?;
            match flag {
                0 => Ok(None),
                1 => Ok(Some(t)),
                f => Err(Reader::invalid("flag", off, "0 or 1", f as u64)),
            }
        };
        let bytes_field = |r: &mut Reader<'_>, f: &'static str| -> Result<Vec<u8>, DecodeError> {
            let n = r.count(f, 1, u64::MAX)?;
            Ok(r.bytes(n as u64, f)?.to_vec())
        };
        e.max_time = opt(&mut r).map_err(bad)?;
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
            let c = &mut m.counters;
            for v in [
                &mut c.events,
                &mut c.late,
                &mut c.dropped,
                &mut c.merged,
                &mut c.buckets,
                &mut c.alerts,
            ] {
                *v = r.u64("counter").map_err(bad)?;
            }
            let off = r.offset();
            m.closed_until = opt(&mut r).map_err(bad)?;
            let roff = r.offset();
            m.rolled_until = opt(&mut r).map_err(bad)?;
            if m.rolled_until.is_some() != (m.cfg.rollup.is_some() && m.closed_until.is_some())
                || m.rolled_until
                    .zip(m.cfg.rollup)
                    .is_some_and(|(t, w)| t % w != 0 || Some(t) > m.closed_until)
            {
                return Err(bad(Reader::invalid(
                    "rolled until",
                    roff,
                    "a rollup boundary not after closed-until, present iff the metric rolls up",
                    m.rolled_until.unwrap_or(0),
                )));
            }
            let width = m.cfg.bucket;
            // Every time the engine adds to must stay far from u64::MAX: ends are start + width.
            let aligned = |t: u64| t % width == 0 && t <= u64::MAX / 2;
            if m.closed_until.is_some_and(|c| !aligned(c)) {
                return Err(bad(Reader::invalid(
                    "closed until",
                    off,
                    "a multiple of the bucket width",
                    m.closed_until.unwrap_or(0),
                )));
            }
            let buckets = r.count("open buckets", 16, u64::MAX).map_err(bad)?;
            let mut previous: Option<u64> = None;
            for _ in 0..buckets {
                let off = r.offset();
                let start = r.u64("bucket start").map_err(bad)?;
                if !aligned(start)
                    || previous.is_some_and(|p| start <= p)
                    || m.closed_until.is_none_or(|c| start < c)
                {
                    return Err(bad(Reader::invalid(
                        "bucket start",
                        off,
                        "aligned, increasing, and not before closed-until",
                        start,
                    )));
                }
                previous = Some(start);
                let keys = r.count("bucket keys", 16, u64::MAX).map_err(bad)?;
                let mut map = FastMap::default();
                let mut summaries = Vec::new();
                for _ in 0..keys {
                    let k = bytes_field(&mut r, "key").map_err(bad)?;
                    let s = bytes_field(&mut r, "summary").map_err(bad)?;
                    let s = m.shape.decode(&s, start).map_err(bad)?;
                    let i = summaries.len() as u32;
                    if map.insert(Key::new(&k), i).is_some() {
                        return Err(bad(DecodeError::Invalid {
                            field: "bucket keys",
                            offset: r.offset(),
                            expected: "each key once a bucket",
                            got: k.len() as u64,
                        }));
                    }
                    summaries.push(s);
                }
                m.open.push_back(OpenBucket {
                    start,
                    keys: map,
                    summaries,
                });
            }
            let keys = r.count("windows", 8, u64::MAX).map_err(bad)?;
            let rules = m.cfg.alerts.len();
            for _ in 0..keys {
                let k = bytes_field(&mut r, "key").map_err(bad)?;
                let mut streak = Vec::with_capacity(rules);
                for _ in 0..rules {
                    streak.push(r.u32("streak").map_err(bad)?);
                }
                let h = bytes_field(&mut r, "histogram").map_err(bad)?;
                let state = match m.cfg.kind {
                    Kind::Count { epsilon } => {
                        let w = CountWindow::from_bytes(&h).map_err(bad)?;
                        if !w.matches(m.cfg.window, epsilon) {
                            return Err(bad(Reader::invalid(
                                "histogram",
                                r.offset(),
                                "the metric's window and ε",
                                m.cfg.window,
                            )));
                        }
                        WindowState::Hist(w)
                    }
                    _ => WindowState::Ring(VecDeque::new()),
                };
                let mut items = BTreeMap::new();
                if v >= 3 {
                    let elem = 8 + 4 * rules as u64;
                    let n = r.count("item streaks", elem, u64::MAX).map_err(bad)?;
                    for _ in 0..n {
                        let off = r.offset();
                        let item = bytes_field(&mut r, "item").map_err(bad)?;
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
                    if n > 0 && !matches!(m.cfg.kind, Kind::Frequency { .. }) {
                        return Err(bad(Reader::invalid(
                            "item streaks",
                            r.offset(),
                            "none for a metric that is not a frequency metric",
                            n as u64,
                        )));
                    }
                }
                m.windows.insert(
                    Key::new(&k),
                    KeyWindow {
                        state,
                        streak,
                        items,
                    },
                );
            }
            if let (true, Some(until)) = (rings(m.cfg.kind), m.closed_until) {
                let from = until.saturating_sub(m.cfg.window);
                let shape = m.shape.clone();
                let rules = m.cfg.alerts.len();
                let mut err = None;
                let windows = &mut m.windows;
                closed(
                    i,
                    from,
                    until,
                    &mut |key, start, bytes| match shape.decode(bytes, start) {
                        Ok(s) => {
                            let w = windows.entry(Key::new(key)).or_insert_with(|| KeyWindow {
                                state: WindowState::Ring(VecDeque::new()),
                                streak: vec![0; rules],
                                items: BTreeMap::new(),
                            });
                            if let WindowState::Ring(r) = &mut w.state {
                                r.push_back((start, s));
                            }
                        }
                        Err(e) => err = Some(e),
                    },
                );
                if let Some(e) = err {
                    return Err(bad(e));
                }
                for w in m.windows.values_mut() {
                    if let WindowState::Ring(r) = &mut w.state {
                        r.make_contiguous().sort_by_key(|(s, _)| *s);
                    }
                }
            }
        }
        r.finish().map_err(bad)?;
        Ok(e)
    }
}
