//! The windowed distinct-count structures in the envelope.
//!
//! ```text
//! SlidingHll (family 18); the envelope's hash id and seed are the sketch's
//!   params:  p u8 (4..=18), retention u64 (1..=2^26 − 1), confidence f64 (in (0, 1))
//!   payload: base u64, has newest u8 (0/1), newest u64, horizon u64, then for each of the
//!            2^p registers: pairs u8 (≤ 65 − p), then per pair, oldest first:
//!            tick offset from base u32 (≤ 2^26 − 1), rank u8 (1..=65 − p);
//!            offsets strictly increase and ranks strictly decrease
//! RingWindow of Hll (family 17) and of ExaLogLog (family 20)
//!   params:  the bucket sketch's shape — p u8 (family 17); t u8, d u8, p u8 (family 20) —
//!            then bucket width u64 (≥ 1), buckets u32 (1..=10^6)
//!   payload: has newest u8, newest bucket u64, then for each slot i: present u8, and if
//!            present: bucket u64 (≡ i mod buckets, at most the newest: an older one than the
//!            ring reaches is a slot no newer bucket has reused yet), length u64, and that
//!            many bytes: the bucket's sketch in its own envelope (family 16 or 19), whose
//!            hash and shape must be the ring's
//! ```

use super::registers::max_rank;
use super::registers::{MAX_PRECISION, MIN_PRECISION};
use super::ring::{BucketSketch, Held, Slot};
use super::{Hll, RingWindow, SlidingHll};
use crate::codec::{self, Family, Reader, Writer};
use crate::DecodeError;

impl SlidingHll {
    /// Encodes the sketch in the envelope.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut params = Writer::new();
        params
            .u8(self.precision())
            .u64(self.retention())
            .f64(self.confidence());
        let mut w = Writer::new();
        w.u64(self.base())
            .u8(self.newest().is_some() as u8)
            .u64(self.newest().unwrap_or(0))
            .u64(self.horizon());
        for (_, list) in self.pairs() {
            w.u8(list.len() as u8);
            for (tick, rank) in list {
                w.u32((tick - self.base()) as u32).u8(rank);
            }
        }
        codec::encode(
            Family::SlidingHll,
            0,
            self.hasher(),
            params.bytes(),
            w.bytes(),
        )
    }

    /// Decodes a sketch, checking every pair before building it.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let env = codec::decode_family(bytes, Family::SlidingHll)?;
        env.flags_within(0, "0")?;
        let mut params = env.params();
        let p = params.u8_in("precision", MIN_PRECISION..=MAX_PRECISION, "in 4..=18")?;
        let retention = params.u64_in(
            "retention",
            1..=SlidingHll::MAX_RETENTION,
            "in 1..=2^26 − 1",
        )?;
        let coff = params.offset();
        let confidence = params.f64("confidence")?;
        params.finish()?;
        let sketch = SlidingHll::with_hasher(p, retention, env.hasher)
            .and_then(|s| s.with_confidence(confidence))
            .map_err(|_| Reader::invalid("confidence", coff, "in (0, 1)", confidence.to_bits()))?;

        let mut r = env.payload();
        let base = r.u64("base")?;
        let has_newest = r.bool("has newest")?;
        // With no event the field is written as 0: anything else would decode to a sketch
        // that re-encodes to other bytes (found by the decode_sliding_hll fuzz target).
        let newest_tick = r.u64_if(
            "newest",
            "within 2^26 − 1 ticks after the base, and 0 before any event",
            |n| {
                if has_newest {
                    n >= base && n - base <= SlidingHll::MAX_RETENTION
                } else {
                    n == 0
                }
            },
        )?;
        let newest = has_newest.then_some(newest_tick);
        // Expiring moves the horizon, rebasing moves the base only up to it: an encoding
        // with the base past the horizon was not written by a sketch, and its offsets would
        // be measured from the wrong end.
        let horizon = r.u64_in("horizon", base.., "at or after the base")?;
        let m = 1usize << p;
        r.expect_left("registers", m as u64, 1)?;
        let top = max_rank(p);
        let mut lists = Vec::with_capacity(m);
        for _ in 0..m {
            let len = r.u8_if(
                "pairs",
                "at most 65 − p pairs, and none before any event",
                |len| len <= top && (len == 0 || has_newest),
            )?;
            let mut list = Vec::with_capacity(len as usize);
            let mut prev: Option<(u32, u8)> = None;
            for _ in 0..len {
                let toff = r.offset();
                let offset = r.u32("tick offset")?;
                let rank = r.u8("rank")?;
                // A tick past 2^64 − 1 is outside any window.
                let tick = base
                    .checked_add(offset as u64)
                    .filter(|&t| t <= newest_tick && t >= horizon);
                let ordered = prev.is_none_or(|(po, pr)| offset > po && rank < pr)
                    && rank >= 1
                    && rank <= top;
                let (true, Some(tick)) = (ordered, tick) else {
                    return Err(Reader::invalid(
                        "pair",
                        toff,
                        "ticks increasing within [horizon, newest], ranks decreasing in 1..=65 − p",
                        offset as u64,
                    ));
                };
                prev = Some((offset, rank));
                list.push((tick, rank));
            }
            lists.push(list);
        }
        r.finish()?;
        Ok(SlidingHll::from_parts(sketch, base, newest, horizon, lists))
    }
}

impl RingWindow<Hll> {
    /// Decodes a ring of HyperLogLogs, checking every slot and nested sketch.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        RingWindow::decode(bytes)
    }
}

impl<S: BucketSketch> RingWindow<S> {
    /// Encodes the ring in the envelope; each bucket's sketch is nested in its own.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut params = Writer::new();
        self.empty_sketch().write_shape(&mut params);
        params.u64(self.width()).u32(self.buckets() as u32);
        let mut w = Writer::new();
        w.u8(self.newest_bucket().is_some() as u8)
            .u64(self.newest_bucket().unwrap_or(0));
        for slot in self.slots() {
            match slot {
                None => {
                    w.u8(0);
                }
                Some(s) => {
                    let inner = s.sketch(self.empty_sketch()).to_bytes();
                    w.u8(1).u64(s.bucket).u64(inner.len() as u64).raw(&inner);
                }
            }
        }
        codec::encode(S::RING_FAMILY, 0, self.hasher(), params.bytes(), w.bytes())
    }

    /// Decodes a ring of `S`, checking every slot and nested sketch
    /// (`RingWindow::<ExaLogLog>::decode`; a HyperLogLog ring also has
    /// [`RingWindow::from_bytes`]).
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let env = codec::decode_family(bytes, S::RING_FAMILY)?;
        env.flags_within(0, "0")?;
        let mut params = env.params();
        let empty = S::read_shape(&mut params, env.hasher)?;
        let woff = params.offset();
        let width = params.u64("bucket width")?;
        let boff = params.offset();
        let n = params.u32("buckets")?;
        params.finish()?;
        let shape = empty.shape();
        let mut ring = RingWindow::of(empty, width, n).map_err(|e| {
            if e.name == "buckets" {
                Reader::invalid("buckets", boff, "in 1..=1000000", n as u64)
            } else {
                Reader::invalid("bucket width", woff, "at least 1", width)
            }
        })?;
        let n = n as u64;
        let mut r = env.payload();
        let has_newest = r.bool("has newest")?;
        // With no bucket the field is written as 0: anything else would decode to a ring
        // that re-encodes to other bytes (found by the decode_ring_window fuzz target).
        let newest = r.u64_if("newest bucket", "0 when the ring has no bucket", |b| {
            has_newest || b == 0
        })?;
        let newest = has_newest.then_some(newest);
        r.expect_left("slots", n, 1)?;
        let mut slots = Vec::with_capacity(n as usize);
        for i in 0..n {
            if !r.bool("slot present")? {
                slots.push(None);
                continue;
            }
            // A slot keeps its bucket until a newer one reuses it, so a slot older than the
            // ring reaches is a state the ring is in (and writes) after a quiet spell: kept,
            // as it was. A bucket newer than the newest is not.
            let bucket = r.u64_if(
                "bucket",
                "its slot's bucket, no newer than the newest",
                |b| newest.is_some_and(|nb| b <= nb) && b % n == i,
            )?;
            let len = r.u64("sketch length")?;
            let soff = r.offset();
            let inner = r.bytes(len, "bucket sketch")?;
            let sketch = S::from_bytes(inner)?;
            Reader::ensure(
                sketch.shape() == shape && sketch.hasher() == env.hasher,
                "bucket sketch",
                soff,
                "the ring's shape (precision, and t and d for ExaLogLog) and hash",
                sketch.precision() as u64,
            )?;
            slots.push(Some(Slot {
                bucket,
                sketch: Held::Live(Box::new(sketch)),
            }));
        }
        r.finish()?;
        ring.restore(newest, slots);
        Ok(ring)
    }
}
