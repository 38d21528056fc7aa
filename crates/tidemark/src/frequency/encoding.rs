//! Count-Min sketches in the envelope.
//!
//! ```text
//! Count-Min (family 32), flags bit 0 = conservative update (plain, cash register only)
//!   params:  kind u8 (0 plain CountMin, 1 DyadicCountMin),
//!            row-hash family u8 (2 = multiply-add-shift on two 32-bit halves of the key;
//!                               3 = multiply-shift of the item hash, plain sketches only;
//!                               columns by multiply-high, or the top bits for a
//!                               power-of-two width; 1, Carter–Wegman, is no longer read),
//!            model u8 (0 cash register, 1 non-negative turnstile, 2 general turnstile),
//!            width u32 (1..=2^26), depth u8 (1..=64), width × depth ≤ 2^27,
//!            dyadic only: bits u8 (1..=60; model 0 or 1)
//!   payload: total i64, mass u64 (Σ|c| ≤ 2^63 − 1, |total| ≤ mass), then the counters, i64:
//!            plain:  depth × width, row-major
//!            dyadic: for each layer l = 0..bits: 2^(bits−l) exact counters if that is at
//!                    most width × depth, else depth × width sketch counters
//! ```
//!
//! The row functions are not stored: they derive from the envelope's hash seed
//! ([`crate::hash::PairwiseHash::rows`]), which the envelope records with the hash id, and the
//! row-hash family byte pins the derivation. The decoder checks each field in order, the
//! counters' byte length against the bytes present before allocating, and then the sketch's
//! invariants: no counter beyond the mass; in the non-negative models no negative counter and
//! a non-negative total; every row (and exact layer) summing to the total — the sketch is
//! linear — or, under conservative update, to at most the total.

use super::count_min::CountMin;
use super::dyadic::{layer_is_exact, layer_rows, DyadicCountMin, Layer, MAX_BITS};
use super::table::RowFamily;
use super::table::{Table, MAX_COUNTERS, MAX_DEPTH, MAX_WIDTH};
use super::Model;
use crate::codec::{self, Family, Reader, Writer};
use crate::hash::PairwiseHash;
use crate::DecodeError;

const FLAG_CONSERVATIVE: u8 = 1;
const KIND_PLAIN: u8 = 0;
const KIND_DYADIC: u8 = 1;

/// A Count-Min sketch of either kind, as the Count-Min envelope (family 32) holds it: what
/// [`AnyCountMin::from_bytes`] gives for bytes that may be either.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)]
pub enum AnyCountMin {
    /// A plain sketch.
    CountMin(CountMin),
    /// A dyadic sketch.
    Dyadic(DyadicCountMin),
}

fn header(w: &mut Writer, kind: u8, family: RowFamily, model: Model, width: usize, depth: usize) {
    w.u8(kind)
        .u8(family.id())
        .u8(model as u8)
        .u32(width as u32)
        .u8(depth as u8);
}

fn payload(total: i64, mass: u64, counters: &[&[i64]]) -> Vec<u8> {
    let mut p = Writer::new();
    p.i64(total).u64(mass);
    for block in counters {
        for &c in block.iter() {
            p.i64(c);
        }
    }
    p.bytes().to_vec()
}

impl CountMin {
    /// Encodes the sketch in the envelope.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut params = Writer::new();
        header(
            &mut params,
            KIND_PLAIN,
            self.row_family(),
            self.model,
            self.width(),
            self.depth(),
        );
        let flags = if self.conservative {
            FLAG_CONSERVATIVE
        } else {
            0
        };
        codec::encode(
            Family::CountMin,
            flags,
            self.hasher,
            params.bytes(),
            &payload(self.total, self.mass, &[&self.table.counters]),
        )
    }

    /// Decodes a plain sketch, checking every field and invariant before building it.
    pub fn from_bytes(bytes: &[u8]) -> Result<CountMin, DecodeError> {
        match AnyCountMin::from_bytes(bytes)? {
            AnyCountMin::CountMin(cm) => Ok(cm),
            AnyCountMin::Dyadic(_) => Err(other_kind("0 (a plain Count-Min sketch)", KIND_DYADIC)),
        }
    }
}

impl DyadicCountMin {
    /// Encodes the layers in the envelope.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut params = Writer::new();
        header(
            &mut params,
            KIND_DYADIC,
            RowFamily::Pairwise,
            self.model,
            self.width,
            self.depth,
        );
        params.u8(self.bits as u8);
        let blocks: Vec<&[i64]> = self
            .layers
            .iter()
            .map(|l| match l {
                Layer::Exact(c) => &c[..],
                Layer::Sketch(t) => &t.counters[..],
            })
            .collect();
        codec::encode(
            Family::CountMin,
            0,
            self.hasher,
            params.bytes(),
            &payload(self.total, self.mass, &blocks),
        )
    }

    /// Decodes a dyadic sketch, checking every field and invariant before building it.
    pub fn from_bytes(bytes: &[u8]) -> Result<DyadicCountMin, DecodeError> {
        match AnyCountMin::from_bytes(bytes)? {
            AnyCountMin::Dyadic(s) => Ok(s),
            AnyCountMin::CountMin(_) => {
                Err(other_kind("1 (a dyadic Count-Min sketch)", KIND_PLAIN))
            }
        }
    }
}

/// A valid Count-Min envelope of the other kind than the one asked for (`got`), refused at
/// its kind byte, the first of the parameters.
fn other_kind(expected: &'static str, got: u8) -> DecodeError {
    Reader::invalid("kind", codec::HEADER_LEN, expected, got as u64)
}

/// Reads `n` counters after checking they are present; each within `±mass`, and `≥ 0` when
/// `non_negative`.
fn read_counters(
    r: &mut Reader<'_>,
    n: usize,
    mass: u64,
    non_negative: bool,
) -> Result<Vec<i64>, DecodeError> {
    r.expect_left("counters", n as u64, 8)?;
    let expected = if non_negative {
        "in [0, mass] (non-negative model)"
    } else {
        "within ±mass"
    };
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(r.i64_if("counter", expected, |c| {
            c.unsigned_abs() <= mass && (!non_negative || c >= 0)
        })?);
    }
    Ok(out)
}

/// Checks that each `len`-long block of `counters` sums to `total` (or to at most it).
fn check_sums(
    counters: &[i64],
    len: usize,
    total: i64,
    at_most: bool,
    offset: usize,
) -> Result<(), DecodeError> {
    for (i, block) in counters.chunks_exact(len).enumerate() {
        let sum: i128 = block.iter().map(|&c| c as i128).sum();
        let ok = if at_most {
            sum <= total as i128
        } else {
            sum == total as i128
        };
        Reader::ensure(
            ok,
            "counters",
            offset + i * len * 8,
            "rows that sum to the total (a linear sketch)",
            sum as u64,
        )?;
    }
    Ok(())
}

impl AnyCountMin {
    /// Decodes a Count-Min summary of either kind, checking every field and invariant before
    /// building it.
    pub fn from_bytes(bytes: &[u8]) -> Result<AnyCountMin, DecodeError> {
        decode(bytes)
    }
}

/// Decodes a Count-Min summary of either kind.
fn decode(bytes: &[u8]) -> Result<AnyCountMin, DecodeError> {
    let env = codec::decode_family(bytes, Family::CountMin)?;
    let mut p = env.params();
    let kind = p.u8_in("kind", KIND_PLAIN..=KIND_DYADIC, "0 (plain) or 1 (dyadic)")?;
    Reader::ensure(
        env.flags & !FLAG_CONSERVATIVE == 0 && (kind == KIND_PLAIN || env.flags == 0),
        "flags",
        6,
        "only bit 0 (conservative update, plain sketches)",
        env.flags as u64,
    )?;
    let conservative = env.flags & FLAG_CONSERVATIVE != 0;
    let family = p.u8_as(
        "row-hash family",
        "2 (multiply-add-shift), or 3 (multiply-shift) for a plain sketch; 1 was \
         Carter–Wegman, no longer read",
        |b| match (RowFamily::from_id(b), kind) {
            (Some(RowFamily::Pairwise), _) => Some(RowFamily::Pairwise),
            (Some(RowFamily::MultiplyShift), KIND_PLAIN) => Some(RowFamily::MultiplyShift),
            _ => None,
        },
    )?;
    let moff = p.offset();
    let model = p.u8_as("model", "0, 1 or 2", Model::from_byte)?;
    Reader::ensure(
        !conservative || model == Model::CashRegister,
        "model",
        moff,
        "0 (cash register) under conservative update",
        model as u64,
    )?;
    let width = p.u32_in("width", 1..=MAX_WIDTH as u32, "in 1..=2^26")? as usize;
    let depth = p.u8_if("depth", "in 1..=64 with width × depth ≤ 2^27", |d| {
        (1..=MAX_DEPTH).contains(&(d as usize)) && width * d as usize <= MAX_COUNTERS
    })? as usize;
    let bits = if kind == KIND_DYADIC {
        let bits = p.u8_in("bits", 1..=MAX_BITS as u8, "in 1..=60")? as u32;
        Reader::ensure(
            model != Model::GeneralTurnstile,
            "model",
            moff,
            "0 or 1 (dyadic sketches are non-negative)",
            model as u64,
        )?;
        bits
    } else {
        0
    };
    p.finish()?;

    let mut r = env.payload();
    let toff = r.offset();
    let total = r.i64("total")?;
    let mass = r.u64_in("mass", ..=i64::MAX as u64, "at most 2^63 − 1")?;
    let non_negative = model != Model::GeneralTurnstile;
    Reader::ensure(
        total.unsigned_abs() <= mass && (!non_negative || total >= 0),
        "total",
        toff,
        "within ±mass, and non-negative in the non-negative models",
        total as u64,
    )?;
    let hasher = env.hasher;
    if kind == KIND_PLAIN {
        let coff = r.offset();
        let counters = read_counters(&mut r, width * depth, mass, non_negative)?;
        check_sums(&counters, width, total, conservative, coff)?;
        r.finish()?;
        return Ok(AnyCountMin::CountMin(CountMin {
            hasher,
            model,
            conservative,
            table: Table::from_parts(
                width,
                PairwiseHash::rows(hasher.seed(), super::count_min::PLAIN_STREAM, depth),
                family,
                counters,
            ),
            total,
            mass,
        }));
    }
    let mut layers = Vec::with_capacity(bits as usize);
    for l in 0..bits {
        let coff = r.offset();
        if layer_is_exact(bits, l, width, depth) {
            let n = 1usize << (bits - l);
            let counters = read_counters(&mut r, n, mass, true)?;
            check_sums(&counters, n, total, false, coff)?;
            layers.push(Layer::Exact(counters));
        } else {
            let counters = read_counters(&mut r, width * depth, mass, true)?;
            check_sums(&counters, width, total, false, coff)?;
            layers.push(Layer::Sketch(Table::from_parts(
                width,
                layer_rows(hasher.seed(), l, depth),
                RowFamily::Pairwise,
                counters,
            )));
        }
    }
    r.finish()?;
    Ok(AnyCountMin::Dyadic(DyadicCountMin {
        hasher,
        model,
        bits,
        width,
        depth,
        layers,
        total,
        mass,
    }))
}
