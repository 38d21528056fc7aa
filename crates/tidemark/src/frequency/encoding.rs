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

/// A decoded Count-Min summary of either kind.
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)]
pub enum Decoded {
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
        match decode(bytes)? {
            Decoded::CountMin(cm) => Ok(cm),
            Decoded::Dyadic(_) => Err(Reader::invalid(
                "kind",
                codec::HEADER_LEN,
                "0 (a plain Count-Min sketch)",
                KIND_DYADIC as u64,
            )),
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
        match decode(bytes)? {
            Decoded::Dyadic(s) => Ok(s),
            Decoded::CountMin(_) => Err(Reader::invalid(
                "kind",
                codec::HEADER_LEN,
                "1 (a dyadic Count-Min sketch)",
                KIND_PLAIN as u64,
            )),
        }
    }
}

/// Reads `n` counters after checking they are present; each within `±mass`, and `≥ 0` when
/// `non_negative`.
fn read_counters(
    r: &mut Reader<'_>,
    n: usize,
    mass: u64,
    non_negative: bool,
) -> Result<Vec<i64>, DecodeError> {
    if n as u64 > r.remaining() as u64 / 8 {
        return Err(DecodeError::Truncated {
            field: "counters",
            offset: r.offset(),
            needed: n as u64 * 8,
            available: r.remaining(),
        });
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let off = r.offset();
        let c = r.i64("counter")?;
        if c.unsigned_abs() > mass || (non_negative && c < 0) {
            return Err(Reader::invalid(
                "counter",
                off,
                if non_negative {
                    "in [0, mass] (non-negative model)"
                } else {
                    "within ±mass"
                },
                c as u64,
            ));
        }
        out.push(c);
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
        if !ok {
            return Err(Reader::invalid(
                "counters",
                offset + i * len * 8,
                "rows that sum to the total (a linear sketch)",
                sum as u64,
            ));
        }
    }
    Ok(())
}

/// Decodes a Count-Min summary of either kind.
pub fn decode(bytes: &[u8]) -> Result<Decoded, DecodeError> {
    let env = codec::decode_family(bytes, Family::CountMin)?;
    let mut p = env.params();
    let koff = p.offset();
    let kind = p.u8("kind")?;
    if kind != KIND_PLAIN && kind != KIND_DYADIC {
        return Err(Reader::invalid(
            "kind",
            koff,
            "0 (plain) or 1 (dyadic)",
            kind as u64,
        ));
    }
    if env.flags & !FLAG_CONSERVATIVE != 0 || (kind == KIND_DYADIC && env.flags != 0) {
        return Err(Reader::invalid(
            "flags",
            6,
            "only bit 0 (conservative update, plain sketches)",
            env.flags as u64,
        ));
    }
    let conservative = env.flags & FLAG_CONSERVATIVE != 0;
    let foff = p.offset();
    let family_byte = p.u8("row-hash family")?;
    let family = match (RowFamily::from_id(family_byte), kind) {
        (Some(RowFamily::Pairwise), _) => RowFamily::Pairwise,
        (Some(RowFamily::MultiplyShift), KIND_PLAIN) => RowFamily::MultiplyShift,
        _ => {
            return Err(Reader::invalid(
                "row-hash family",
                foff,
                "2 (multiply-add-shift), or 3 (multiply-shift) for a plain sketch; 1 was \
                 Carter–Wegman, no longer read",
                family_byte as u64,
            ))
        }
    };
    let moff = p.offset();
    let model_byte = p.u8("model")?;
    let model = Model::from_byte(model_byte).ok_or(Reader::invalid(
        "model",
        moff,
        "0, 1 or 2",
        model_byte as u64,
    ))?;
    if conservative && model != Model::CashRegister {
        return Err(Reader::invalid(
            "model",
            moff,
            "0 (cash register) under conservative update",
            model_byte as u64,
        ));
    }
    let woff = p.offset();
    let width = p.u32("width")? as usize;
    if !(1..=MAX_WIDTH).contains(&width) {
        return Err(Reader::invalid("width", woff, "in 1..=2^26", width as u64));
    }
    let doff = p.offset();
    let depth = p.u8("depth")? as usize;
    if !(1..=MAX_DEPTH).contains(&depth) || width * depth > MAX_COUNTERS {
        return Err(Reader::invalid(
            "depth",
            doff,
            "in 1..=64 with width × depth ≤ 2^27",
            depth as u64,
        ));
    }
    let bits = if kind == KIND_DYADIC {
        let boff = p.offset();
        let bits = p.u8("bits")? as u32;
        if !(1..=MAX_BITS).contains(&bits) {
            return Err(Reader::invalid("bits", boff, "in 1..=60", bits as u64));
        }
        if model == Model::GeneralTurnstile {
            return Err(Reader::invalid(
                "model",
                moff,
                "0 or 1 (dyadic sketches are non-negative)",
                model_byte as u64,
            ));
        }
        bits
    } else {
        0
    };
    p.finish()?;

    let mut r = env.payload();
    let toff = r.offset();
    let total = r.i64("total")?;
    let moff = r.offset();
    let mass = r.u64("mass")?;
    if mass > i64::MAX as u64 {
        return Err(Reader::invalid("mass", moff, "at most 2^63 − 1", mass));
    }
    let non_negative = model != Model::GeneralTurnstile;
    if total.unsigned_abs() > mass || (non_negative && total < 0) {
        return Err(Reader::invalid(
            "total",
            toff,
            "within ±mass, and non-negative in the non-negative models",
            total as u64,
        ));
    }
    let hasher = env.hasher;
    if kind == KIND_PLAIN {
        let coff = r.offset();
        let counters = read_counters(&mut r, width * depth, mass, non_negative)?;
        check_sums(&counters, width, total, conservative, coff)?;
        r.finish()?;
        return Ok(Decoded::CountMin(CountMin {
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
    Ok(Decoded::Dyadic(DyadicCountMin {
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
