//! [`Hll`] in the envelope.
//!
//! ```text
//! Hll (family 16)
//!   flags:   bit 0 Redis mode (requires murmur64a seed 0xadc83b19 and p = 14),
//!            bit 1 martingale estimate present (its field named "HIP value"), bit 2 Redis
//!            cached cardinality present (Redis mode only); other bits zero
//!   params:  p u8 (4..=18), sparse precision u8 (25), confidence f64 (in (0, 1))
//!   payload: representation u8 (0 exact, 1 sparse, 2 dense)
//!            [HIP value f64, finite and ≥ 0; for the exact form equal to its count]
//!            [cached cardinality u64 < 2^63]
//!     exact:  count u64, then count hashes u64, strictly increasing; the table holding them
//!             (load ≤ 1/2, power-of-two capacity ≥ 4) must take at most 2^p bytes at 8 a slot
//!     sparse: count u64, then count entries u32 = index << 6 | rank, strictly increasing,
//!             index < 2^25, rank in 1..=40; the table at 4 bytes a slot at most 2^p bytes
//!     dense:  ⌈6·2^p / 8⌉ bytes, register i in bits 6i..6i+6 (little-endian bit order),
//!             each at most 65 − p
//! ```
//!
//! The decoder checks each field in this order before allocating; the envelope has already
//! checked lengths and the checksum. Sorted entries make the encoding canonical: equal
//! sketches encode to equal bytes.

use super::hll::{Hll, Repr};
use super::redis::{pack6, unpack6};
use super::registers::{max_rank, MAX_PRECISION, MIN_PRECISION};
use super::sets::{capacity_for, read_hashes, write_hashes, ExactSet, SparseMap, SPARSE_PRECISION};
use crate::codec::{self, Family, Reader, Writer};
use crate::hash::ItemHasher;
use crate::DecodeError;

const FLAG_REDIS: u8 = 1;
const FLAG_MARTINGALE: u8 = 2;
const FLAG_CACHE: u8 = 4;

const REPR_EXACT: u8 = 0;
const REPR_SPARSE: u8 = 1;
const REPR_DENSE: u8 = 2;

impl Hll {
    /// Encodes the sketch in the envelope (see `FORMAT.md`).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut flags = 0;
        if self.redis {
            flags |= FLAG_REDIS;
        }
        if self.martingale.is_some() {
            flags |= FLAG_MARTINGALE;
        }
        if self.cache.is_some() {
            flags |= FLAG_CACHE;
        }
        let mut params = Writer::with_capacity(10);
        params.u8(self.p).u8(SPARSE_PRECISION).f64(self.confidence);
        // The payload's length, so its buffer is allocated once: representation, martingale and
        // cached values, then a count and 8-byte hashes, a count and 4-byte entries, or the
        // packed registers.
        let body = match &self.repr {
            Repr::Exact(set) => 8 + 8 * set.len(),
            Repr::Sparse(map) => 8 + 4 * map.len(),
            Repr::Dense(regs) => (regs.len() * 6).div_ceil(8),
        };
        let mut w = Writer::with_capacity(1 + 8 + 8 + body);
        w.u8(match self.repr {
            Repr::Exact(_) => REPR_EXACT,
            Repr::Sparse(_) => REPR_SPARSE,
            Repr::Dense(_) => REPR_DENSE,
        });
        if let Some(v) = self.martingale_value() {
            w.f64(v);
        }
        if let Some(c) = self.cache {
            w.u64(c);
        }
        match &self.repr {
            Repr::Exact(set) => write_hashes(&mut w, set),
            Repr::Sparse(map) => {
                let mut es: Vec<u32> = map.iter().map(|(i, r)| i << 6 | r as u32).collect();
                es.sort_unstable();
                w.u64(es.len() as u64);
                for e in es {
                    w.u32(e);
                }
            }
            Repr::Dense(regs) => {
                w.raw(&pack6(regs));
            }
        }
        codec::encode(Family::Hll, flags, self.hasher, params.bytes(), w.bytes())
    }

    /// Decodes a sketch, checking every field before building it.
    pub fn from_bytes(bytes: &[u8]) -> Result<Hll, DecodeError> {
        let env = codec::decode_family(bytes, Family::Hll)?;
        let flags = env.flags_within(
            FLAG_REDIS | FLAG_MARTINGALE | FLAG_CACHE,
            "only bits 0 (Redis), 1 (HIP), 2 (cache)",
        )?;
        let mut params = env.params();
        let p = params.u8_in("precision", MIN_PRECISION..=MAX_PRECISION, "in 4..=18")?;
        params.u8_in(
            "sparse precision",
            SPARSE_PRECISION..=SPARSE_PRECISION,
            "25",
        )?;
        let coff = params.offset();
        let confidence = read_confidence(&mut params)?;
        params.finish()?;
        let redis = flags & FLAG_REDIS != 0;
        Reader::ensure(
            !redis || (env.hasher == ItemHasher::redis() && p == 14),
            "flags",
            6,
            "Redis mode only with murmur64a seed 0xadc83b19 at p = 14",
            flags as u64,
        )?;
        Reader::ensure(
            flags & FLAG_CACHE == 0 || redis,
            "flags",
            6,
            "a cached cardinality only in Redis mode",
            flags as u64,
        )?;

        let m = 1usize << p;
        let mut r = env.payload();
        let kind = r.u8_in(
            "representation",
            ..=REPR_DENSE,
            "0 (exact), 1 (sparse) or 2 (dense)",
        )?;
        let hoff = r.offset();
        let martingale = read_martingale(&mut r, flags & FLAG_MARTINGALE != 0, "HIP value")?;
        let cache = if flags & FLAG_CACHE != 0 {
            Some(r.u64_in("cached cardinality", ..1 << 63, "below 2^63")?)
        } else {
            None
        };
        let repr = match kind {
            REPR_EXACT => {
                let set = read_hashes(&mut r, m)?;
                check_exact_martingale(martingale, &set, "HIP value", hoff)?;
                Repr::Exact(set)
            }
            REPR_SPARSE => {
                let off = r.offset();
                let n = r.count("sparse entries", 4, u64::MAX)?;
                let cap = capacity_for(n);
                Reader::ensure(
                    4 * cap <= m,
                    "sparse entries",
                    off,
                    "no more than the sparse form holds at this precision",
                    n as u64,
                )?;
                let mut map = SparseMap::with_capacity(cap);
                let mut prev: Option<u32> = None;
                for _ in 0..n {
                    let off = r.offset();
                    let e = r.u32_if("sparse entry", "indices strictly increasing", |e| {
                        prev.is_none_or(|q| e >> 6 > q >> 6)
                    })?;
                    let (index, rank) = (e >> 6, (e & 63) as u8);
                    Reader::ensure(
                        index < 1 << SPARSE_PRECISION
                            && (1..=max_rank(SPARSE_PRECISION)).contains(&rank),
                        "sparse entry",
                        off,
                        "index below 2^25 and rank in 1..=40",
                        e as u64,
                    )?;
                    prev = Some(e);
                    map.update(index, rank);
                }
                Repr::Sparse(map)
            }
            _ => {
                let off = r.offset();
                let packed = r.bytes((6 * m).div_ceil(8) as u64, "registers")?;
                let mut regs = vec![0u8; m];
                unpack6(packed, &mut regs);
                if let Some(i) = regs.iter().position(|&x| x > max_rank(p)) {
                    return Err(Reader::invalid(
                        "registers",
                        off + 6 * i / 8,
                        "ranks at most 65 − p",
                        regs[i] as u64,
                    ));
                }
                Repr::Dense(regs)
            }
        };
        r.finish()?;
        Hll::from_parts(p, env.hasher, confidence, redis, cache, repr, martingale)
            .map_err(|_| Reader::invalid("confidence", coff, "in (0, 1)", confidence.to_bits()))
    }
}

/// The confidence of a sketch's brackets, in (0, 1).
pub(crate) fn read_confidence(r: &mut Reader<'_>) -> Result<f64, DecodeError> {
    r.f64_if("confidence", "in (0, 1)", |c| c > 0.0 && c < 1.0)
}

/// The martingale estimate's running value when the flags say it is `present`
/// (written under `field`): finite and at least 0.
pub(crate) fn read_martingale(
    r: &mut Reader<'_>,
    present: bool,
    field: &'static str,
) -> Result<Option<f64>, DecodeError> {
    if !present {
        return Ok(None);
    }
    let v = r.f64_if(field, "finite and at least 0", |v| {
        v.is_finite() && v >= 0.0
    })?;
    Ok(Some(v))
}

/// An exact form's martingale value, read at `offset`, must be its count: every new hash
/// added one.
pub(crate) fn check_exact_martingale(
    value: Option<f64>,
    set: &ExactSet,
    field: &'static str,
    offset: usize,
) -> Result<(), DecodeError> {
    match value {
        Some(v) if v != set.len() as f64 => Err(Reader::invalid(
            field,
            offset,
            "the exact form's count",
            v.to_bits(),
        )),
        _ => Ok(()),
    }
}
