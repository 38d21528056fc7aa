//! A key's row (`~key/<metric>`): what of a key is in neither its open rows nor the metric's
//! stored buckets — its expiry, the starts of its open buckets, its alert streaks and, for a
//! count metric, its window's exponential histogram — checksummed, every field checked on
//! the way back (FORMAT.md, "The keys' state rows", has the layout of each version).

use std::collections::BTreeMap;

use tidemark::codec::{Reader, Writer};
use tidemark::DecodeError;
use xxhash_rust::xxh3::xxh3_64;

use super::spill::expiry;
use super::{KeyState, MetricState, WindowState};
use crate::kinds::CountWindow;
use crate::kinds::WindowModel;

/// 3: varints, and a count key's histogram as its compact payload without an envelope
/// (the config gives its window and ε, the row's checksum covers it): a count key's row is
/// about a sixth of version 1's bytes. 1 (every count a `u64`, the histogram a whole
/// envelope) is still read. 2 was written only by a build that never shipped (its
/// histogram's compact layout without runs), and is refused rather than misread.
const KEY_ROW_VERSION: u8 = 3;

pub(super) fn key_row(m: &MetricState, ks: &KeyState) -> Vec<u8> {
    let mut w = Writer::new();
    // The expiry stays a fixed `u64` first: the store sweeps rows by it.
    w.u64(expiry(m, ks)).u8(KEY_ROW_VERSION);
    // Open starts in bucket widths: the first, then the distance from the one before.
    let width = m.cfg.bucket;
    w.varint(ks.open.len() as u64);
    let mut before = 0;
    for o in ks.open.iter() {
        w.varint((o.start - before) / width);
        before = o.start;
    }
    w.varint(ks.streak.len() as u64);
    for &s in ks.streak.iter() {
        w.varint(u64::from(s));
    }
    w.varint(ks.items.len() as u64);
    for (item, streak) in &ks.items {
        w.varint(item.len() as u64).raw(item);
        for &s in streak {
            w.varint(u64::from(s));
        }
    }
    match &ks.window {
        Some(WindowState::Hist(h)) => {
            let b = h.to_payload();
            w.u8(1).varint(b.len() as u64).raw(&b);
        }
        _ => {
            w.u8(0);
        }
    }
    let mut bytes = w.into_bytes();
    let sum = xxh3_64(&bytes);
    bytes.extend_from_slice(&sum.to_le_bytes());
    bytes
}

/// A key's row, decoded.
pub(super) struct KeyRow {
    pub(super) expiry: u64,
    pub(super) open: Vec<u64>,
    pub(super) streak: Vec<u32>,
    pub(super) items: BTreeMap<Box<[u8]>, Vec<u32>>,
    pub(super) hist: Option<CountWindow>,
}

/// Decodes a key's row of metric `m`: its checksum first, then every field.
pub(super) fn decode_key_row(m: &MetricState, bytes: &[u8]) -> Result<KeyRow, DecodeError> {
    let Some((body, sum)) = bytes.split_last_chunk::<8>() else {
        return Err(Reader::invalid(
            "key row",
            0,
            "at least 8 bytes",
            bytes.len() as u64,
        ));
    };
    let sum = u64::from_le_bytes(*sum);
    if xxh3_64(body) != sum {
        return Err(Reader::invalid(
            "key row checksum",
            body.len(),
            "the checksum of the row",
            sum,
        ));
    }
    let mut r = Reader::new(body);
    let expiry = r.u64("expiry")?;
    let off = r.offset();
    let v = r.u8("key row version")?;
    if v != 1 && v != KEY_ROW_VERSION {
        return Err(Reader::invalid("key row version", off, "1 or 3", v as u64));
    }
    // Version 3 writes counts and streaks as varints, starts as distances in bucket widths;
    // 1 as fixed-width integers.
    let varints = v >= 3;
    // A count of elements of at least `size` bytes each, checked against the bytes left.
    let count = |r: &mut Reader<'_>, field, size: u64| -> Result<usize, DecodeError> {
        if !varints {
            return r.count(field, size, u64::MAX);
        }
        let n = r.varint(field)?;
        r.expect_left(field, n, 1)?;
        Ok(n as usize)
    };
    let word = |r: &mut Reader<'_>, field| -> Result<u32, DecodeError> {
        if !varints {
            return r.u32(field);
        }
        let off = r.offset();
        let v = r.varint(field)?;
        u32::try_from(v).map_err(|_| Reader::invalid(field, off, "a 32-bit streak", v))
    };
    let w = m.cfg.bucket;
    let n = count(&mut r, "open starts", 8)?;
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        let off = r.offset();
        let s = if varints {
            let d = r.varint("open start")?;
            d.checked_mul(w)
                .and_then(|d| d.checked_add(open.last().copied().unwrap_or(0)))
                .unwrap_or(u64::MAX)
        } else {
            r.u64("open start")?
        };
        if s % w != 0 || open.last().is_some_and(|&p| s <= p) || s > u64::MAX / 2 {
            return Err(Reader::invalid(
                "open start",
                off,
                "aligned to the bucket width and increasing",
                s,
            ));
        }
        open.push(s);
    }
    // One streak per rule of the config that wrote the row; the rules may have changed
    // since (they are not part of the store's fingerprint): streaks of rules gone are
    // dropped, new rules start from zero.
    let rules = m.cfg.alerts.len();
    let written = count(&mut r, "streaks", 4)?;
    let streaks = |r: &mut Reader<'_>, field| -> Result<Vec<u32>, DecodeError> {
        let mut out = vec![0; rules];
        for i in 0..written {
            let s = word(r, field)?;
            if let Some(slot) = out.get_mut(i) {
                *slot = s;
            }
        }
        Ok(out)
    };
    let streak = streaks(&mut r, "streak")?;
    let n = count(&mut r, "item streaks", 8 + 4 * written as u64)?;
    let mut items = BTreeMap::new();
    for _ in 0..n {
        let len = count(&mut r, "item", 1)?;
        let item: Box<[u8]> = r.bytes(len as u64, "item")?.into();
        items.insert(item, streaks(&mut r, "item streak")?);
    }
    let off = r.offset();
    let hist = match r.u8("histogram flag")? {
        0 => None,
        1 => {
            let len = count(&mut r, "histogram", 1)?;
            let bytes = r.bytes(len as u64, "histogram")?;
            let not_its = || {
                Reader::invalid(
                    "histogram",
                    off,
                    "a count metric's window and ε",
                    len as u64,
                )
            };
            let WindowModel::Histogram { epsilon } = m.shape.kind().window_model() else {
                return Err(not_its());
            };
            let h = if varints {
                CountWindow::from_payload(m.cfg.window, epsilon, bytes)?
            } else {
                CountWindow::from_bytes(bytes)?
            };
            if !h.matches(m.cfg.window, epsilon) {
                return Err(not_its());
            }
            Some(h)
        }
        f => return Err(Reader::invalid("histogram flag", off, "0 or 1", f as u64)),
    };
    r.finish()?;
    Ok(KeyRow {
        expiry,
        open,
        streak,
        items,
        hist,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// A count metric with an alert rule, and a frequency one (whose keys have item streaks).
    const CONFIG: &str = r#"
[input]
time_field = "ts"
[[metric]]
name = "c"
kind = "count"
key = ["k"]
bucket = "1m"
window = "10m"
epsilon = 0.05
[[metric.alert]]
above = 100
consecutive = 3
"#;

    fn metric() -> MetricState {
        let config = Config::from_toml(CONFIG).unwrap();
        MetricState::new(&config.metrics[0])
    }

    /// A busy count key: twelve closed minutes in its histogram, two open buckets, a streak.
    fn busy_key(m: &MetricState) -> KeyState {
        let mut ks = KeyState::new(m.cfg.alerts.len());
        let mut window = CountWindow::new(m.cfg.window, 0.05);
        for minute in 1..=12u64 {
            window.add_bucket(minute * 60_000, 90 + minute * 7);
            window.advance(minute * 60_000);
        }
        ks.window = Some(WindowState::Hist(Box::new(window)));
        for minute in [12u64, 13] {
            ks.open
                .insert(minute * 60_000, m.shape.empty(minute * 60_000));
        }
        ks.last_start = 13 * 60_000;
        ks.streak[0] = 2 | 1 << 31;
        ks.items
            .insert(b"item".to_vec().into_boxed_slice(), vec![5]);
        ks
    }

    /// The row as version 1 wrote it (fixed-width integers, the histogram as an envelope),
    /// under the version byte `version`.
    fn old_row(m: &MetricState, ks: &KeyState, version: u8) -> Vec<u8> {
        let mut w = Writer::new();
        w.u64(super::expiry(m, ks)).u8(version);
        w.u64(ks.open.len() as u64);
        for o in ks.open.iter() {
            w.u64(o.start);
        }
        w.u64(ks.streak.len() as u64);
        for &s in ks.streak.iter() {
            w.u32(s);
        }
        w.u64(ks.items.len() as u64);
        for (item, streak) in &ks.items {
            w.u64(item.len() as u64).raw(item);
            for &s in streak {
                w.u32(s);
            }
        }
        let Some(WindowState::Hist(h)) = &ks.window else {
            panic!("a count key has a histogram");
        };
        let b = h.to_bytes();
        w.u8(1).u64(b.len() as u64).raw(&b);
        let mut bytes = w.into_bytes();
        let sum = xxh3_64(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        bytes
    }

    fn assert_reads_as(row: &KeyRow, m: &MetricState, ks: &KeyState) {
        assert_eq!(row.expiry, super::expiry(m, ks));
        assert_eq!(
            row.open,
            ks.open.iter().map(|o| o.start).collect::<Vec<_>>()
        );
        assert_eq!(row.streak, &ks.streak[..]);
        assert_eq!(row.items, ks.items);
        let Some(WindowState::Hist(h)) = &ks.window else {
            panic!("a count key has a histogram");
        };
        assert_eq!(
            row.hist.as_ref().map(CountWindow::to_bytes),
            Some(h.to_bytes())
        );
    }

    #[test]
    fn every_version_of_a_key_row_reads_back_as_written() {
        let m = metric();
        let ks = busy_key(&m);
        let now = key_row(&m, &ks);
        assert_reads_as(&decode_key_row(&m, &now).unwrap(), &m, &ks);
        let v1 = old_row(&m, &ks, 1);
        assert_reads_as(&decode_key_row(&m, &v1).unwrap(), &m, &ks);
        // Version 2 never shipped: refused, naming the version.
        match decode_key_row(&m, &old_row(&m, &ks, 2)) {
            Err(DecodeError::Invalid { field, .. }) => assert_eq!(field, "key row version"),
            other => panic!("version 2 read: {:?}", other.map(|r| r.expiry)),
        }
        // The point of version 3: a count key's row in a fraction of version 1's bytes.
        assert!(
            now.len() * 3 < v1.len(),
            "version 3: {} bytes, version 1: {}",
            now.len(),
            v1.len()
        );
    }

    /// Any byte of a row changed (its checksum made to match, so the fields' own checks are
    /// what stands), and any row cut short: refused or read, never a panic; a changed byte
    /// under the old checksum is refused.
    #[test]
    fn damaged_key_rows_are_refused_never_a_panic() {
        let m = metric();
        let ks = busy_key(&m);
        for row in [key_row(&m, &ks), old_row(&m, &ks, 1)] {
            let body = &row[..row.len() - 8];
            for i in 0..body.len() {
                for bits in [0x01u8, 0x80, 0xff] {
                    let mut b = body.to_vec();
                    b[i] ^= bits;
                    let unsealed = [&b[..], &row[row.len() - 8..]].concat();
                    assert!(
                        decode_key_row(&m, &unsealed).is_err(),
                        "byte {i} ^ {bits:#x}"
                    );
                    let sum = xxh3_64(&b);
                    b.extend_from_slice(&sum.to_le_bytes());
                    let _ = decode_key_row(&m, &b);
                }
            }
            for cut in 0..row.len() {
                let mut b = body[..cut.min(body.len())].to_vec();
                let sum = xxh3_64(&b);
                b.extend_from_slice(&sum.to_le_bytes());
                if cut < body.len() {
                    assert!(decode_key_row(&m, &b).is_err(), "cut at {cut}");
                }
            }
        }
    }
}
