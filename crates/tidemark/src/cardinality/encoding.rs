//! [`Hll`] in the envelope.
//!
//! ```text
//! Hll (family 16)
//!   flags:   bit 0 Redis mode (requires murmur64a seed 0xadc83b19 and p = 14),
//!            bit 1 HIP estimate present, bit 2 Redis cached cardinality present (Redis mode
//!            only); other bits zero
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
use super::sets::{capacity_for, read_hashes, write_hashes, SparseMap, SPARSE_PRECISION};
use crate::codec::{self, Family, Reader, Writer};
use crate::hash::ItemHasher;
use crate::DecodeError;

const FLAG_REDIS: u8 = 1;
const FLAG_HIP: u8 = 2;
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
        if self.hip.is_some() {
            flags |= FLAG_HIP;
        }
        if self.cache.is_some() {
            flags |= FLAG_CACHE;
        }
        let mut params = Writer::with_capacity(10);
        params.u8(self.p).u8(SPARSE_PRECISION).f64(self.confidence);
        // The payload's length, so its buffer is allocated once: representation, HIP and
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
        if let Some(v) = self.hip_value() {
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
        let flags = env.flags;
        if flags & !(FLAG_REDIS | FLAG_HIP | FLAG_CACHE) != 0 {
            return Err(Reader::invalid(
                "flags",
                6,
                "only bits 0 (Redis), 1 (HIP), 2 (cache)",
                flags as u64,
            ));
        }
        let mut params = env.params();
        let poff = params.offset();
        let p = params.u8("precision")?;
        if !(MIN_PRECISION..=MAX_PRECISION).contains(&p) {
            return Err(Reader::invalid("precision", poff, "in 4..=18", p as u64));
        }
        let soff = params.offset();
        let sp = params.u8("sparse precision")?;
        if sp != SPARSE_PRECISION {
            return Err(Reader::invalid("sparse precision", soff, "25", sp as u64));
        }
        let coff = params.offset();
        let confidence = params.f64("confidence")?;
        if !(confidence > 0.0 && confidence < 1.0) {
            return Err(Reader::invalid(
                "confidence",
                coff,
                "in (0, 1)",
                confidence.to_bits(),
            ));
        }
        params.finish()?;
        let redis = flags & FLAG_REDIS != 0;
        if redis && (env.hasher != ItemHasher::redis() || p != 14) {
            return Err(Reader::invalid(
                "flags",
                6,
                "Redis mode only with murmur64a seed 0xadc83b19 at p = 14",
                flags as u64,
            ));
        }
        if flags & FLAG_CACHE != 0 && !redis {
            return Err(Reader::invalid(
                "flags",
                6,
                "a cached cardinality only in Redis mode",
                flags as u64,
            ));
        }

        let m = 1usize << p;
        let mut r = env.payload();
        let roff = r.offset();
        let kind = r.u8("representation")?;
        if kind > REPR_DENSE {
            return Err(Reader::invalid(
                "representation",
                roff,
                "0 (exact), 1 (sparse) or 2 (dense)",
                kind as u64,
            ));
        }
        let hoff = r.offset();
        let hip = if flags & FLAG_HIP != 0 {
            let v = r.f64("HIP value")?;
            if !(v.is_finite() && v >= 0.0) {
                return Err(Reader::invalid(
                    "HIP value",
                    hoff,
                    "finite and at least 0",
                    v.to_bits(),
                ));
            }
            Some(v)
        } else {
            None
        };
        let cache = if flags & FLAG_CACHE != 0 {
            let off = r.offset();
            let c = r.u64("cached cardinality")?;
            if c >> 63 != 0 {
                return Err(Reader::invalid("cached cardinality", off, "below 2^63", c));
            }
            Some(c)
        } else {
            None
        };
        let repr = match kind {
            REPR_EXACT => {
                let set = read_hashes(&mut r, m)?;
                if let Some(v) = hip {
                    if v != set.len() as f64 {
                        return Err(Reader::invalid(
                            "HIP value",
                            hoff,
                            "the exact form's count",
                            v.to_bits(),
                        ));
                    }
                }
                Repr::Exact(set)
            }
            REPR_SPARSE => {
                let off = r.offset();
                let n = r.count("sparse entries", 4, u64::MAX)?;
                let cap = capacity_for(n);
                if 4 * cap > m {
                    return Err(Reader::invalid(
                        "sparse entries",
                        off,
                        "no more than the sparse form holds at this precision",
                        n as u64,
                    ));
                }
                let mut map = SparseMap::with_capacity(cap);
                let mut prev: Option<u32> = None;
                for _ in 0..n {
                    let off = r.offset();
                    let e = r.u32("sparse entry")?;
                    let (index, rank) = (e >> 6, (e & 63) as u8);
                    if prev.is_some_and(|q| index <= q >> 6) {
                        return Err(Reader::invalid(
                            "sparse entry",
                            off,
                            "indices strictly increasing",
                            e as u64,
                        ));
                    }
                    if index >= 1 << SPARSE_PRECISION
                        || rank == 0
                        || rank > max_rank(SPARSE_PRECISION)
                    {
                        return Err(Reader::invalid(
                            "sparse entry",
                            off,
                            "index below 2^25 and rank in 1..=40",
                            e as u64,
                        ));
                    }
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
        Hll::from_parts(p, env.hasher, confidence, redis, cache, repr, hip)
            .map_err(|_| Reader::invalid("confidence", coff, "in (0, 1)", confidence.to_bits()))
    }
}
