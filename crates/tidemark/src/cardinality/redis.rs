//! Redis `HYLL` values: import, export, and PFCOUNT's count.
//!
//! Written from the format's public description (the comments of Redis's HyperLogLog
//! implementation describe the layout; no code is copied):
//!
//! ```text
//! offset  size  field
//! 0       4     magic "HYLL"
//! 4       1     encoding: 0 dense, 1 sparse
//! 5       3     unused (written as zero)
//! 8       8     cached cardinality, little-endian; the most significant bit of byte 15 set
//!               means the cache is invalid
//! 16      …     registers: 16,384 of them (p = 14)
//!   dense:  12,288 bytes, register i in bits 6i..6i+6 counted from the least significant
//!           bit of byte 0 (little-endian bit packing)
//!   sparse: opcodes, each a run of registers, which must cover exactly 16,384 registers:
//!           ZERO   00xxxxxx            xxxxxx + 1 registers (1..=64) set to 0
//!           XZERO  01xxxxxx yyyyyyyy   (xxxxxx·256 + yyyyyyyy) + 1 registers (1..=16384) at 0
//!           VAL    1vvvvvxx            xx + 1 registers (1..=4) set to vvvvv + 1 (1..=32)
//! ```
//!
//! Registers hold the rank of MurmurHash64A (seed `0xadc83b19`) as
//! [`super::registers::index_and_rank`] gives it at p = 14, so they range over `0..=51`.
//! tidemark refuses dense registers above 51, which no Redis ever writes (Redis itself would
//! read them and ignore them in its count).
//!
//! PFCOUNT (Redis ≥ 5) is Ertl's improved estimator over the register histogram, rounded to
//! the nearest integer; [`pfcount_registers`] evaluates it in the same order of floating-point
//! operations, so the results are equal, not just close.

use core::fmt;

use super::hll::{Hll, Repr};
pub use super::pfcount::{pfcount_registers, REDIS_PRECISION, REDIS_REGISTERS};
use super::registers::{max_rank, DEFAULT_CONFIDENCE};
use crate::hash::ItemHasher;

/// Bytes of a Redis `HYLL` header.
pub const REDIS_HEADER_LEN: usize = 16;
/// Bytes of a dense Redis `HYLL` value.
pub const REDIS_DENSE_LEN: usize = REDIS_HEADER_LEN + REDIS_REGISTERS * 6 / 8;
/// The sparse-value size above which Redis (by default, `hll-sparse-max-bytes 3000`) turns
/// a value dense; [`Hll::to_redis`] follows the same rule.
pub const REDIS_SPARSE_MAX_BYTES: usize = 3000;

const ENC_DENSE: u8 = 0;
const ENC_SPARSE: u8 = 1;

/// A byte string that is not a valid Redis `HYLL` value, or a sketch that cannot become one.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedisError {
    /// Shorter than the 16-byte header.
    TooShort {
        /// Its length.
        len: usize,
    },
    /// The first four bytes are not `HYLL`.
    BadMagic {
        /// What they were.
        got: [u8; 4],
    },
    /// An encoding byte other than 0 (dense) or 1 (sparse).
    UnknownEncoding {
        /// The byte.
        got: u8,
    },
    /// A dense value of the wrong length.
    DenseLength {
        /// 12,304 bytes.
        expected: usize,
        /// Its length.
        got: usize,
    },
    /// A register above the largest rank (51).
    RegisterOutOfRange {
        /// The register's index.
        index: usize,
        /// Its value.
        value: u8,
    },
    /// A sparse opcode whose run goes past the last register.
    SparseOverrun {
        /// The opcode's byte offset.
        offset: usize,
        /// Registers covered before it.
        covered: usize,
        /// Its run length.
        run: usize,
    },
    /// A sparse XZERO opcode cut off after its first byte.
    SparseTruncated {
        /// The opcode's byte offset.
        offset: usize,
    },
    /// Sparse opcodes that cover fewer than 16,384 registers.
    SparseShort {
        /// Registers covered.
        covered: usize,
    },
    /// The sketch is not register-compatible with Redis (MurmurHash64A, seed 0xadc83b19,
    /// p = 14).
    NotRedisCompatible {
        /// The sketch's hash.
        hasher: ItemHasher,
        /// The sketch's precision.
        precision: u8,
    },
}

impl fmt::Display for RedisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisError::TooShort { len } => {
                write!(
                    f,
                    "not a Redis HyperLogLog: {len} bytes, the header alone is 16"
                )
            }
            RedisError::BadMagic { got } => {
                write!(
                    f,
                    "not a Redis HyperLogLog: magic {got:?}, expected b\"HYLL\""
                )
            }
            RedisError::UnknownEncoding { got } => write!(
                f,
                "corrupted Redis HyperLogLog: encoding {got} at byte 4, expected 0 or 1"
            ),
            RedisError::DenseLength { expected, got } => write!(
                f,
                "corrupted Redis HyperLogLog: dense value of {got} bytes, expected {expected}"
            ),
            RedisError::RegisterOutOfRange { index, value } => write!(
                f,
                "corrupted Redis HyperLogLog: register {index} holds {value}, at most 51"
            ),
            RedisError::SparseOverrun {
                offset,
                covered,
                run,
            } => write!(
                f,
                "corrupted Redis HyperLogLog: opcode at byte {offset} runs {run} registers \
                 past register {covered}, beyond 16384"
            ),
            RedisError::SparseTruncated { offset } => write!(
                f,
                "corrupted Redis HyperLogLog: XZERO opcode at byte {offset} lacks its second byte"
            ),
            RedisError::SparseShort { covered } => write!(
                f,
                "corrupted Redis HyperLogLog: sparse opcodes cover {covered} registers, not 16384"
            ),
            RedisError::NotRedisCompatible { hasher, precision } => write!(
                f,
                "sketch is not Redis-compatible: {} seed {:#x} at p = {precision} \
                 (Redis needs murmur64a seed 0xadc83b19 at p = 14)",
                hasher.id(),
                hasher.seed()
            ),
        }
    }
}

impl std::error::Error for RedisError {}

/// The registers of a Redis `HYLL` value, and its cached cardinality if the cache is valid.
pub fn parse_redis(value: &[u8]) -> Result<(Vec<u8>, Option<u64>), RedisError> {
    if value.len() < REDIS_HEADER_LEN {
        return Err(RedisError::TooShort { len: value.len() });
    }
    let magic: [u8; 4] = value[..4].try_into().expect("4 bytes");
    if &magic != b"HYLL" {
        return Err(RedisError::BadMagic { got: magic });
    }
    let card: [u8; 8] = value[8..16].try_into().expect("8 bytes");
    let cache = (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card));
    let body = &value[REDIS_HEADER_LEN..];
    let mut regs = vec![0u8; REDIS_REGISTERS];
    match value[4] {
        ENC_DENSE => {
            if value.len() != REDIS_DENSE_LEN {
                return Err(RedisError::DenseLength {
                    expected: REDIS_DENSE_LEN,
                    got: value.len(),
                });
            }
            unpack6(body, &mut regs);
            if let Some(index) = regs.iter().position(|&r| r > max_rank(REDIS_PRECISION)) {
                return Err(RedisError::RegisterOutOfRange {
                    index,
                    value: regs[index],
                });
            }
        }
        ENC_SPARSE => {
            let mut covered = 0usize;
            let mut pos = 0usize;
            while pos < body.len() {
                let offset = REDIS_HEADER_LEN + pos;
                let op = body[pos];
                let (run, val, len) = match op >> 6 {
                    0 => ((op & 63) as usize + 1, 0u8, 1),
                    1 => {
                        let Some(&lo) = body.get(pos + 1) else {
                            return Err(RedisError::SparseTruncated { offset });
                        };
                        ((((op & 63) as usize) << 8 | lo as usize) + 1, 0u8, 2)
                    }
                    _ => ((op & 3) as usize + 1, ((op >> 2) & 31) + 1, 1),
                };
                if covered + run > REDIS_REGISTERS {
                    return Err(RedisError::SparseOverrun {
                        offset,
                        covered,
                        run,
                    });
                }
                regs[covered..covered + run].fill(val);
                covered += run;
                pos += len;
            }
            if covered != REDIS_REGISTERS {
                return Err(RedisError::SparseShort { covered });
            }
        }
        other => return Err(RedisError::UnknownEncoding { got: other }),
    }
    Ok((regs, cache))
}

/// Unpacks 6-bit little-endian packed registers (`packed` holds at least ⌈6n/8⌉ bytes).
pub(crate) fn unpack6(packed: &[u8], regs: &mut [u8]) {
    for (i, r) in regs.iter_mut().enumerate() {
        let bit = 6 * i;
        let (byte, shift) = (bit / 8, bit % 8);
        let lo = packed[byte] as u16;
        let hi = packed.get(byte + 1).copied().unwrap_or(0) as u16;
        *r = (((lo | hi << 8) >> shift) & 63) as u8;
    }
}

/// Packs registers (each < 64) 6 bits each, little-endian, into ⌈6n/8⌉ bytes.
pub(crate) fn pack6(regs: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; (6 * regs.len()).div_ceil(8)];
    for (i, &r) in regs.iter().enumerate() {
        let bit = 6 * i;
        let (byte, shift) = (bit / 8, bit % 8);
        let v = ((r & 63) as u16) << shift;
        out[byte] |= v as u8;
        if shift > 2 {
            out[byte + 1] |= (v >> 8) as u8;
        }
    }
    out
}

fn header(encoding: u8, cache: Option<u64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(REDIS_DENSE_LEN);
    out.extend_from_slice(b"HYLL");
    out.extend_from_slice(&[encoding, 0, 0, 0]);
    match cache {
        Some(c) if c >> 63 == 0 => out.extend_from_slice(&c.to_le_bytes()),
        _ => out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x80]),
    }
    out
}

/// The sparse opcodes of a register array, or `None` if a register exceeds 32 (VAL's limit).
fn sparse_opcodes(regs: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < regs.len() {
        let v = regs[i];
        let mut j = i;
        while j < regs.len() && regs[j] == v {
            j += 1;
        }
        let mut run = j - i;
        if v == 0 {
            while run > 0 {
                let n = run.min(16384);
                if n <= 64 {
                    out.push((n - 1) as u8);
                } else {
                    out.push(0x40 | ((n - 1) >> 8) as u8);
                    out.push(((n - 1) & 0xff) as u8);
                }
                run -= n;
            }
        } else {
            if v > 32 {
                return None;
            }
            while run > 0 {
                let n = run.min(4);
                out.push(0x80 | (v - 1) << 2 | (n - 1) as u8);
                run -= n;
            }
        }
        i = j;
    }
    Some(out)
}

impl Hll {
    /// Imports a Redis `HYLL` value (dense or sparse) as a dense sketch in Redis mode; a
    /// valid cached cardinality is kept and answered as PFCOUNT answers it. Corrupted values
    /// are refused, field by field.
    pub fn from_redis(value: &[u8]) -> Result<Hll, RedisError> {
        let (regs, cache) = parse_redis(value)?;
        Ok(Hll::from_parts(
            REDIS_PRECISION,
            ItemHasher::redis(),
            DEFAULT_CONFIDENCE,
            true,
            cache,
            Repr::Dense(regs),
            None,
        )
        .expect("the default confidence is valid"))
    }

    fn check_redis_compatible(&self) -> Result<(), RedisError> {
        if self.hasher != ItemHasher::redis() || self.p != REDIS_PRECISION {
            return Err(RedisError::NotRedisCompatible {
                hasher: self.hasher,
                precision: self.p,
            });
        }
        Ok(())
    }

    /// Exports as a Redis `HYLL` value the way Redis would hold it: sparse while every
    /// register is at most 32 and the opcodes fit in 3,000 bytes, dense otherwise. The cached
    /// cardinality is marked invalid unless one was imported and nothing changed since.
    pub fn to_redis(&self) -> Result<Vec<u8>, RedisError> {
        self.check_redis_compatible()?;
        let regs = self.registers();
        match sparse_opcodes(&regs) {
            Some(ops) if REDIS_HEADER_LEN + ops.len() <= REDIS_SPARSE_MAX_BYTES => {
                let mut out = header(ENC_SPARSE, self.cache);
                out.extend_from_slice(&ops);
                Ok(out)
            }
            _ => self.to_redis_dense(),
        }
    }

    /// Exports as a dense Redis `HYLL` value (12,304 bytes).
    pub fn to_redis_dense(&self) -> Result<Vec<u8>, RedisError> {
        self.check_redis_compatible()?;
        let mut out = header(ENC_DENSE, self.cache);
        out.extend_from_slice(&pack6(&self.registers()));
        Ok(out)
    }

    /// Exports as a sparse Redis `HYLL` value, or `None` when a register exceeds 32 (which
    /// the sparse encoding cannot hold).
    pub fn to_redis_sparse(&self) -> Result<Option<Vec<u8>>, RedisError> {
        self.check_redis_compatible()?;
        Ok(sparse_opcodes(&self.registers()).map(|ops| {
            let mut out = header(ENC_SPARSE, self.cache);
            out.extend_from_slice(&ops);
            out
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack6_round_trips_and_places_bits_little_endian() {
        let regs: Vec<u8> = (0..1000u32).map(|i| (i * 37 % 64) as u8).collect();
        let packed = pack6(&regs);
        assert_eq!(packed.len(), 750);
        let mut back = vec![0u8; 1000];
        unpack6(&packed, &mut back);
        assert_eq!(back, regs);
        // Register 0 in the low six bits of byte 0, register 1 starts at bit 6.
        let p = pack6(&[0b10_1101, 0b11_0110]);
        assert_eq!(p, [0b1010_1101, 0b1101]);
    }

    #[test]
    fn sparse_opcodes_round_trip_through_the_parser() {
        let mut regs = vec![0u8; REDIS_REGISTERS];
        for (i, v) in [
            (0usize, 1u8),
            (1, 1),
            (2, 1),
            (3, 1),
            (4, 1),
            (100, 32),
            (5000, 7),
            (16383, 2),
        ] {
            regs[i] = v;
        }
        let h = Hll::from_parts(
            14,
            ItemHasher::redis(),
            0.95,
            true,
            None,
            Repr::Dense(regs.clone()),
            None,
        )
        .unwrap();
        let v = h.to_redis_sparse().unwrap().unwrap();
        assert_eq!(v[4], ENC_SPARSE);
        assert_eq!(parse_redis(&v).unwrap(), (regs.clone(), None));
        let d = h.to_redis_dense().unwrap();
        assert_eq!(d.len(), REDIS_DENSE_LEN);
        assert_eq!(parse_redis(&d).unwrap(), (regs, None));
    }

    #[test]
    fn empty_sketch_exports_the_single_xzero_redis_starts_with() {
        let v = Hll::redis().to_redis().unwrap();
        assert_eq!(&v[16..], &[0x7f, 0xff]);
        assert_eq!(v[15], 0x80);
    }

    #[test]
    fn corrupted_values_are_refused() {
        let good = Hll::redis().to_redis().unwrap();
        assert!(matches!(
            parse_redis(&good[..10]),
            Err(RedisError::TooShort { len: 10 })
        ));
        let mut b = good.clone();
        b[0] = b'X';
        assert!(matches!(parse_redis(&b), Err(RedisError::BadMagic { .. })));
        let mut b = good.clone();
        b[4] = 2;
        assert_eq!(parse_redis(&b), Err(RedisError::UnknownEncoding { got: 2 }));
        let mut b = good.clone();
        b[16] = 0x7e; // XZERO of 16128: short
        assert!(matches!(
            parse_redis(&b),
            Err(RedisError::SparseShort { covered: 16128 })
        ));
        let mut b = good.clone();
        b.push(0); // one more zero register
        assert!(matches!(
            parse_redis(&b),
            Err(RedisError::SparseOverrun { .. })
        ));
        let b = good[..17].to_vec();
        assert!(matches!(
            parse_redis(&b),
            Err(RedisError::SparseTruncated { offset: 16 })
        ));
        let mut d = Hll::redis().to_redis_dense().unwrap();
        d.pop();
        assert!(matches!(
            parse_redis(&d),
            Err(RedisError::DenseLength { .. })
        ));
        let mut d = Hll::redis().to_redis_dense().unwrap();
        d[16] = 52; // register 0 = 52
        assert!(matches!(
            parse_redis(&d),
            Err(RedisError::RegisterOutOfRange {
                index: 0,
                value: 52
            })
        ));
    }

    #[test]
    fn non_redis_sketches_do_not_export() {
        assert!(matches!(
            Hll::new(14).unwrap().to_redis(),
            Err(RedisError::NotRedisCompatible { .. })
        ));
    }
}
