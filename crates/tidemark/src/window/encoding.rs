//! The window structures in the envelope.
//!
//! ```text
//! ExpHistogram (family 1), flags bit 0 = interpolation
//!   params:  span kind u8 (0 arrivals, 1 ticks), window u64, k u32
//!   payload: now u64, started u8, merges u64, worst merges u64, span start u64,
//!            classes u8 (≤ 64), then per class: buckets u32 (≤ k + 1) and that many
//!            timestamps u64, class 0 first, oldest first within a class
//! BlockCounter (family 2)
//!   params:  span kind u8, window u64, block u64
//!   payload: now u64, started u8, blocks u64 (≤ ⌈W/block⌉ + 1), then per block:
//!            index u64, count u64, oldest first
//! ```
//!
//! The decoder checks every field against the invariants the structure keeps (class sizes,
//! timestamps inside the window and in order, block indices in the window and increasing,
//! totals without overflow, an arrivals histogram's clock within
//! [`ExpHistogram::MAX_ARRIVALS`]) before building anything.

use super::block_counter::BlockCounter;
use super::exp_histogram::{ExpHistogram, OwnedParts, MAX_CLASSES};
use super::Span;
use crate::codec::{self, Family, Reader, Writer};
use crate::hash::ItemHasher;
use crate::DecodeError;

const FLAG_INTERPOLATE: u8 = 1;

fn write_span(w: &mut Writer, span: Span) {
    match span {
        Span::Arrivals(n) => w.u8(0).u64(n),
        Span::Ticks(n) => w.u8(1).u64(n),
    };
}

fn read_span(r: &mut Reader<'_>) -> Result<Span, DecodeError> {
    let off = r.offset();
    let kind = r.u8("span kind")?;
    let woff = r.offset();
    let len = r.u64("window")?;
    if len == 0 {
        return Err(Reader::invalid("window", woff, "at least 1", 0));
    }
    match kind {
        0 => Ok(Span::Arrivals(len)),
        1 => Ok(Span::Ticks(len)),
        other => Err(Reader::invalid(
            "span kind",
            off,
            "0 (arrivals) or 1 (ticks)",
            other as u64,
        )),
    }
}

impl ExpHistogram {
    /// Encodes the histogram in the envelope.
    pub fn to_bytes(&self) -> Vec<u8> {
        let p = self.parts();
        let mut params = Writer::new();
        write_span(&mut params, p.span);
        params.u32(p.k);
        let mut payload = Writer::new();
        payload
            .u64(p.now)
            .u8(p.started as u8)
            .u64(p.merges)
            .u64(p.worst_merges)
            .u64(p.span_start)
            .u8(p.classes.len() as u8);
        for class in &p.classes {
            payload.u32(class.len() as u32);
            for &t in class {
                payload.u64(t);
            }
        }
        let flags = if p.interpolate { FLAG_INTERPOLATE } else { 0 };
        codec::encode(
            Family::ExpHistogram,
            flags,
            ItemHasher::default(),
            params.bytes(),
            payload.bytes(),
        )
    }

    /// Decodes a histogram, checking every invariant before building it.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let env = codec::decode_family(bytes, Family::ExpHistogram)?;
        if env.flags & !FLAG_INTERPOLATE != 0 {
            return Err(Reader::invalid(
                "flags",
                6,
                "only bit 0 (interpolation)",
                env.flags as u64,
            ));
        }
        let mut params = env.params();
        let span = read_span(&mut params)?;
        let koff = params.offset();
        let k = params.u32("k")?;
        if !(1..=1_000_000).contains(&k) {
            return Err(Reader::invalid("k", koff, "in 1..=1000000", k as u64));
        }
        params.finish()?;

        let mut r = env.payload();
        let noff = r.offset();
        let now = r.u64("now")?;
        // A clock past the bound could not have been counted to, and would leave the next
        // arrival no room.
        if matches!(span, Span::Arrivals(_)) && now > ExpHistogram::MAX_ARRIVALS {
            return Err(Reader::invalid(
                "now",
                noff,
                "at most 2^62 (the arrivals clock's bound)",
                now,
            ));
        }
        let started = r.bool("started")?;
        let merges = r.u64("merges")?;
        let worst_merges = r.u64("worst merges")?;
        let soff = r.offset();
        let span_start = r.u64("span start")?;
        let coff = r.offset();
        let nclasses = r.u8("classes")? as usize;
        if nclasses > MAX_CLASSES {
            return Err(Reader::invalid(
                "classes",
                coff,
                "at most 64",
                nclasses as u64,
            ));
        }
        let mut classes = Vec::with_capacity(nclasses);
        let mut total: u64 = 0;
        // Timestamps run oldest-first from the highest class down; reading class 0 first, each
        // class's newest must not exceed the previous (lower) class's oldest.
        let mut newer_bound = now;
        for j in 0..nclasses {
            let loff = r.offset();
            let len = r.u32("class length")? as u64;
            if len > k as u64 + 1 {
                return Err(Reader::invalid(
                    "class length",
                    loff,
                    "at most k + 1 buckets of a size",
                    len,
                ));
            }
            if len > r.remaining() as u64 / 8 {
                return Err(DecodeError::Truncated {
                    field: "timestamps",
                    offset: r.offset(),
                    needed: len * 8,
                    available: r.remaining(),
                });
            }
            let mut class = Vec::with_capacity(len as usize);
            let mut prev = 0u64;
            for _ in 0..len {
                let toff = r.offset();
                let t = r.u64("timestamp")?;
                if t < prev || t > newer_bound || span.expired(t, now) || (!started) {
                    return Err(Reader::invalid(
                        "timestamp",
                        toff,
                        "inside the window and in order",
                        t,
                    ));
                }
                prev = t;
                class.push(t);
            }
            if let Some(&oldest) = class.first() {
                newer_bound = oldest;
            }
            let size_total = len.checked_mul(1u64 << j).ok_or(Reader::invalid(
                "class length",
                loff,
                "a total within u64",
                len,
            ))?;
            total = total.checked_add(size_total).ok_or(Reader::invalid(
                "class length",
                loff,
                "a total within u64",
                len,
            ))?;
            classes.push(class);
        }
        if classes.last().is_some_and(Vec::is_empty) {
            return Err(Reader::invalid(
                "classes",
                coff,
                "a non-empty highest class",
                nclasses as u64,
            ));
        }
        if let Some(&oldest) = classes.last().and_then(|c| c.first()) {
            if span_start > oldest {
                return Err(Reader::invalid(
                    "span start",
                    soff,
                    "no later than the oldest bucket",
                    span_start,
                ));
            }
        }
        if matches!(span, Span::Arrivals(_)) && total > now {
            return Err(Reader::invalid(
                "now",
                noff,
                "at least the ones held (arrivals window)",
                now,
            ));
        }
        r.finish()?;
        Ok(ExpHistogram::from_parts(OwnedParts {
            span,
            k,
            interpolate: env.flags & FLAG_INTERPOLATE != 0,
            now,
            started,
            merges,
            worst_merges,
            span_start,
            classes,
        }))
    }
}

impl BlockCounter {
    /// Encodes the counter in the envelope.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut params = Writer::new();
        write_span(&mut params, self.span());
        params.u64(self.block());
        let mut payload = Writer::new();
        payload.u64(self.now()).u8(self.started() as u8);
        let blocks: Vec<(u64, u64)> = self.blocks().collect();
        payload.u64(blocks.len() as u64);
        for (index, count) in blocks {
            payload.u64(index).u64(count);
        }
        codec::encode(
            Family::BlockCounter,
            0,
            ItemHasher::default(),
            params.bytes(),
            payload.bytes(),
        )
    }

    /// Decodes a block counter, checking every field before building it.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let env = codec::decode_family(bytes, Family::BlockCounter)?;
        if env.flags != 0 {
            return Err(Reader::invalid("flags", 6, "0", env.flags as u64));
        }
        let mut params = env.params();
        let span = read_span(&mut params)?;
        let boff = params.offset();
        let block = params.u64("block")?;
        if block == 0 || block > span.length() {
            return Err(Reader::invalid("block", boff, "in 1..=window", block));
        }
        params.finish()?;
        let mut r = env.payload();
        let now = r.u64("now")?;
        let started = r.bool("started")?;
        let max_blocks = BlockCounter::ring_len(span.length(), block) as u64;
        let n = r.count("blocks", 16, max_blocks)?;
        let mut blocks = Vec::with_capacity(n);
        let mut prev: Option<u64> = None;
        let current = now / block;
        for _ in 0..n {
            let ioff = r.offset();
            let index = r.u64("block index")?;
            let count = r.u64("block count")?;
            let in_order = prev.is_none_or(|p| index > p);
            let in_ring = index <= current && current - index < max_blocks;
            if !in_order || !in_ring || !started {
                return Err(Reader::invalid(
                    "block index",
                    ioff,
                    "increasing and within the ring",
                    index,
                ));
            }
            prev = Some(index);
            blocks.push((index, count));
        }
        r.finish()?;
        let mut counter =
            BlockCounter::with_block(span, block).expect("span and block were validated");
        counter.restore(now, started, &blocks);
        Ok(counter)
    }
}
