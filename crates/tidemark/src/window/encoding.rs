//! The window structures in the envelope.
//!
//! ```text
//! ExpHistogram (family 1), flags bit 0 = interpolation
//!   params:  span kind u8 (0 arrivals, 1 ticks), window u64, k u32
//!   payload: now u64, started u8, merges u64, worst merges u64, span start u64,
//!            classes u8 (≤ 64), then per class: buckets u32 (≤ k + 1) and that many
//!            timestamps u64, class 0 first, oldest first within a class
//!   compact payload (no envelope, for a store's key rows: `to_compact_payload`): the same
//!            fields in the same order, each integer a LEB128
//!            varint (started and classes stay a byte), and a class's timestamps as runs:
//!            the run's timestamp as a distance (the class's oldest as now − t, each later
//!            one as t − the one before), then how many more buckets share it
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
use super::exp_histogram::{ExpHistogram, Parts, MAX_CLASSES};
use super::Window;
use crate::codec::{self, Family, Reader, Writer};
use crate::hash::ItemHasher;
use crate::DecodeError;

const FLAG_INTERPOLATE: u8 = 1;

/// How a histogram's payload writes its integers: the envelope's fixed layout, or the compact
/// one (varints, and timestamps as runs of distances: a histogram's timestamps sit within its
/// window and repeat, a count metric stamping a whole bucket at one tick).
#[derive(Clone, Copy)]
enum Layout {
    Fixed,
    Compact,
}

impl Layout {
    fn put_u64(self, w: &mut Writer, v: u64) {
        match self {
            Layout::Fixed => w.u64(v),
            Layout::Compact => w.varint(v),
        };
    }

    fn put_u32(self, w: &mut Writer, v: u32) {
        match self {
            Layout::Fixed => w.u32(v),
            Layout::Compact => w.varint(u64::from(v)),
        };
    }

    fn u64(self, r: &mut Reader<'_>, field: &'static str) -> Result<u64, DecodeError> {
        match self {
            Layout::Fixed => r.u64(field),
            Layout::Compact => r.varint(field),
        }
    }

    /// Bytes a timestamp takes at least: what a class's length must leave room for before
    /// anything is allocated. A compact run of any length takes two bytes, so there the
    /// class's length (at most k + 1) is the bound.
    fn min_timestamp_bytes(self) -> u64 {
        match self {
            Layout::Fixed => 8,
            Layout::Compact => 0,
        }
    }
}

fn write_window(w: &mut Writer, window: Window) {
    match window {
        Window::Arrivals(n) => w.u8(0).u64(n),
        Window::Ticks(n) => w.u8(1).u64(n),
    };
}

fn read_window(r: &mut Reader<'_>) -> Result<Window, DecodeError> {
    let off = r.offset();
    let kind = r.u8("span kind")?;
    let len = r.u64_in("window", 1.., "at least 1")?;
    match kind {
        0 => Ok(Window::Arrivals(len)),
        1 => Ok(Window::Ticks(len)),
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
        write_window(&mut params, p.window);
        params.u32(p.k);
        let payload = write_payload(&p, Layout::Fixed);
        let flags = if p.interpolate { FLAG_INTERPOLATE } else { 0 };
        codec::encode(
            Family::ExpHistogram,
            flags,
            ItemHasher::default(),
            params.bytes(),
            payload.bytes(),
        )
    }

    /// The histogram's compact payload, without an envelope (see the module doc): for a
    /// container that knows the histogram's window, `k` and interpolation from elsewhere and
    /// checksums its bytes itself (a store's key row, whose config gives them). A count
    /// metric's window of ten minutes takes about a sixth of [`ExpHistogram::to_bytes`]'s
    /// bytes. [`ExpHistogram::from_compact_payload`] reads it back. (No envelope carries
    /// it: runs let a few bytes stand for up to k + 1 buckets a class, and `k` from a
    /// stranger's envelope would let a few bytes ask for that much memory.)
    pub fn to_compact_payload(&self) -> Vec<u8> {
        write_payload(&self.parts(), Layout::Compact).into_bytes()
    }

    /// A histogram from [`ExpHistogram::to_compact_payload`]'s bytes and the `window`, `k`
    /// and interpolation it was made with, every field checked as
    /// [`ExpHistogram::from_bytes`] checks it (offsets are within the payload).
    pub fn from_compact_payload(
        window: Window,
        k: u32,
        interpolate: bool,
        payload: &[u8],
    ) -> Result<Self, DecodeError> {
        let (Window::Arrivals(len) | Window::Ticks(len)) = window;
        if len == 0 || !(1..=1_000_000).contains(&k) {
            return Err(Reader::invalid(
                "parameters",
                0,
                "a window of at least 1 and k in 1..=1000000",
                u64::from(k),
            ));
        }
        read_payload(
            window,
            k,
            interpolate,
            Layout::Compact,
            Reader::new(payload),
        )
    }
}

/// A histogram's payload in `layout` (see the module doc).
fn write_payload(p: &Parts, layout: Layout) -> Writer {
    let mut payload = Writer::new();
    layout.put_u64(&mut payload, p.now);
    payload.u8(p.started as u8);
    for v in [p.merges, p.worst_merges, p.span_start] {
        layout.put_u64(&mut payload, v);
    }
    payload.u8(p.classes.len() as u8);
    for class in &p.classes {
        layout.put_u32(&mut payload, class.len() as u32);
        match layout {
            Layout::Fixed => {
                for &t in class {
                    payload.u64(t);
                }
            }
            Layout::Compact => {
                // Runs of one timestamp: its distance (timestamps are at most `now` and
                // ascend within a class), then how many more buckets share it.
                let mut before = None;
                let mut i = 0;
                while let Some(&t) = class.get(i) {
                    let same = class[i + 1..].iter().take_while(|&&u| u == t).count();
                    let distance = before.map_or(p.now - t, |b| t - b);
                    payload.varint(distance).varint(same as u64);
                    before = Some(t);
                    i += 1 + same;
                }
            }
        }
    }
    payload
}

impl ExpHistogram {
    /// Decodes a histogram, checking every invariant before building it.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let env = codec::decode_family(bytes, Family::ExpHistogram)?;
        let flags = env.flags_within(FLAG_INTERPOLATE, "only bit 0 (interpolation)")?;
        let mut params = env.params();
        let window = read_window(&mut params)?;
        let k = params.u32_in("k", 1..=1_000_000, "in 1..=1000000")?;
        params.finish()?;

        read_payload(
            window,
            k,
            flags & FLAG_INTERPOLATE != 0,
            Layout::Fixed,
            env.payload(),
        )
    }
}

/// A histogram's payload read in `layout` for `window` and `k`, every invariant checked
/// before the histogram is built.
fn read_payload(
    window: Window,
    k: u32,
    interpolate: bool,
    layout: Layout,
    mut r: Reader<'_>,
) -> Result<ExpHistogram, DecodeError> {
    let noff = r.offset();
    // A clock past the bound could not have been counted to, and would leave the next
    // arrival no room.
    let now = layout.u64(&mut r, "now")?;
    Reader::ensure(
        matches!(window, Window::Ticks(_)) || now <= ExpHistogram::MAX_ARRIVALS,
        "now",
        noff,
        "at most 2^62 (the arrivals clock's bound)",
        now,
    )?;
    let started = r.bool("started")?;
    let merges = layout.u64(&mut r, "merges")?;
    let worst_merges = layout.u64(&mut r, "worst merges")?;
    let soff = r.offset();
    let span_start = layout.u64(&mut r, "span start")?;
    let coff = r.offset();
    let nclasses = r.u8_in("classes", ..=MAX_CLASSES as u8, "at most 64")? as usize;
    let mut classes = Vec::with_capacity(nclasses);
    let mut total: u64 = 0;
    // Timestamps run oldest-first from the highest class down; reading class 0 first, each
    // class's newest must not exceed the previous (lower) class's oldest.
    let mut newer_bound = now;
    for j in 0..nclasses {
        let loff = r.offset();
        let len = match layout {
            Layout::Fixed => u64::from(r.u32("class length")?),
            Layout::Compact => r.varint("class length")?,
        };
        Reader::ensure(
            len <= u64::from(k) + 1,
            "class length",
            loff,
            "at most k + 1 buckets of a size",
            len,
        )?;
        r.expect_left("timestamps", len, layout.min_timestamp_bytes())?;
        let mut class = Vec::with_capacity(len as usize);
        let mut prev = 0u64;
        while (class.len() as u64) < len {
            let toff = r.offset();
            let v = layout.u64(&mut r, "timestamp")?;
            let (t, same) = match layout {
                Layout::Fixed => (Some(v), 0),
                Layout::Compact => {
                    let t = if class.is_empty() {
                        now.checked_sub(v)
                    } else {
                        prev.checked_add(v)
                    };
                    let soff = r.offset();
                    let same = r.varint("repeats")?;
                    Reader::ensure(
                        same < len - class.len() as u64,
                        "repeats",
                        soff,
                        "within the class's length",
                        same,
                    )?;
                    (t, same)
                }
            };
            let t =
                t.filter(|&t| t >= prev && t <= newer_bound && !window.expired(t, now) && started);
            let Some(t) = t else {
                return Err(Reader::invalid(
                    "timestamp",
                    toff,
                    "inside the window and in order",
                    v,
                ));
            };
            prev = t;
            for _ in 0..=same {
                class.push(t);
            }
        }
        if let Some(&oldest) = class.first() {
            newer_bound = oldest;
        }
        let too_many = Reader::invalid("class length", loff, "a total within u64", len);
        let size_total = len.checked_mul(1u64 << j).ok_or(too_many.clone())?;
        total = total.checked_add(size_total).ok_or(too_many)?;
        classes.push(class);
    }
    Reader::ensure(
        classes.last().is_none_or(|c| !c.is_empty()),
        "classes",
        coff,
        "a non-empty highest class",
        nclasses as u64,
    )?;
    Reader::ensure(
        classes
            .last()
            .and_then(|c| c.first())
            .is_none_or(|&oldest| span_start <= oldest),
        "span start",
        soff,
        "no later than the oldest bucket",
        span_start,
    )?;
    Reader::ensure(
        matches!(window, Window::Ticks(_)) || total <= now,
        "now",
        noff,
        "at least the ones held (arrivals window)",
        now,
    )?;
    r.finish()?;
    Ok(ExpHistogram::from_parts(Parts {
        window,
        k,
        interpolate,
        now,
        started,
        merges,
        worst_merges,
        span_start,
        classes,
    }))
}

impl BlockCounter {
    /// Encodes the counter in the envelope.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut params = Writer::new();
        write_window(&mut params, self.window());
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
        env.flags_within(0, "0")?;
        let mut params = env.params();
        let window = read_window(&mut params)?;
        let block = params.u64_in("block", 1..=window.length(), "in 1..=window")?;
        params.finish()?;
        let mut r = env.payload();
        let now = r.u64("now")?;
        let started = r.bool("started")?;
        let max_blocks = BlockCounter::max_blocks(window.length(), block) as u64;
        let n = r.count("blocks", 16, max_blocks)?;
        let mut blocks = Vec::with_capacity(n);
        let mut prev: Option<u64> = None;
        let current = now / block;
        for _ in 0..n {
            let index = r.u64_if("block index", "increasing and within the ring", |index| {
                let in_order = prev.is_none_or(|p| index > p);
                let in_window = index <= current && current - index < max_blocks;
                in_order && in_window && started
            })?;
            let count = r.u64("block count")?;
            prev = Some(index);
            blocks.push((index, count));
        }
        r.finish()?;
        let mut counter =
            BlockCounter::with_block(window, block).expect("span and block were validated");
        counter.restore(now, started, &blocks);
        Ok(counter)
    }
}
