//! [`ExaLogLog`] in the envelope.
//!
//! ```text
//! ExaLogLog (family 19)
//!   flags:   bit 0 martingale estimate present; other bits zero
//!   params:  t u8 (0..=3), d u8 (6 + t + d ≤ 32), p u8 (4..=18), confidence f64 (in (0, 1))
//!   payload: representation u8 (0 exact, 1 dense, 2 coded)
//!            [martingale value f64, finite and ≥ 0; for the exact form equal to its count]
//!     exact: count u64, then count hashes u64, strictly increasing; their table (load ≤ 1/2,
//!            power-of-two capacity ≥ 4) at 8 bytes a slot takes at most 4·2^p bytes
//!     dense: ⌈2^p·(6 + t + d)/8⌉ bytes, register i in bits i·b..(i+1)·b (b = 6 + t + d,
//!            little-endian bit order), each u << d | history with u ≤ (65 − p − t)·2^t and
//!            no history bit for a value below 1 (none at all when u = 0)
//!     coded: the rest of the payload, the same registers range-coded (`coded.rs`): at least
//!            ⌈2^p/8⌉ bytes and fewer than the dense form's, without trailing zero bytes,
//!            and exactly what the coder writes for them
//! ```
//!
//! Fields are checked in this order before anything is allocated (the coded form decodes into
//! the 2^p registers its precision names, and is then coded again and compared); sorted
//! hashes, unused bits at zero and the coder's own output make what is written canonical:
//! equal sketches encode to equal bytes. A dense sketch is written coded whenever the stream
//! fits those lengths (nearly always past a few dozen registers), packed otherwise; a reader
//! also takes the packed form where the coded one would fit (as builds before the coded form
//! wrote every dense sketch) and writes it coded. Builds before the coded form refuse
//! representation 2 by name.

use super::coded;
use super::register::Shape;
use super::{check_params, ExaLogLog, Repr};
use crate::cardinality::encoding::{check_exact_martingale, read_confidence, read_martingale};
use crate::cardinality::sets::{read_hashes, write_hashes};
use crate::codec::{self, Family, Reader, Writer};
use crate::DecodeError;

const FLAG_MARTINGALE: u8 = 1;
const REPR_EXACT: u8 = 0;
const REPR_DENSE: u8 = 1;
const REPR_CODED: u8 = 2;

/// Packs `bits`-bit values, little-endian bit order.
fn pack(values: &[u32], bits: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity((values.len() * bits as usize).div_ceil(8));
    let (mut acc, mut held) = (0u64, 0u32);
    for &v in values {
        acc |= (v as u64) << held;
        held += bits;
        while held >= 8 {
            out.push(acc as u8);
            acc >>= 8;
            held -= 8;
        }
    }
    if held > 0 {
        out.push(acc as u8);
    }
    out
}

/// The `i`-th `bits`-bit value of a packing.
fn unpack_at(bytes: &[u8], i: usize, bits: u32) -> u32 {
    let start = i * bits as usize;
    let mut acc = 0u64;
    for (n, b) in bytes[start / 8..].iter().take(5).enumerate() {
        acc |= (*b as u64) << (8 * n);
    }
    ((acc >> (start % 8)) & ((1u64 << bits) - 1)) as u32
}

impl ExaLogLog {
    /// Encodes the sketch in the envelope (see `FORMAT.md`).
    pub fn to_bytes(&self) -> Vec<u8> {
        let (t, d, p) = self.shape_parts();
        let mut params = Writer::with_capacity(11);
        params.u8(t).u8(d).u8(p).f64(self.confidence());
        // Sized for the exact form, the one written at every close of a small pipeline
        // bucket; a dense sketch's payload is its coded stream, grown once.
        let mut w = Writer::with_capacity(match &self.repr {
            Repr::Exact(set) => 1 + 8 + 8 + 8 * set.len(),
            Repr::Dense(_) => 0,
        });
        let martingale = |w: &mut Writer| {
            if let Some(m) = &self.martingale {
                w.f64(m.value);
            }
        };
        match &self.repr {
            Repr::Exact(set) => {
                martingale(w.u8(REPR_EXACT));
                write_hashes(&mut w, set);
            }
            Repr::Dense(regs) => {
                let stream = coded::encode(self.shape, regs);
                if coded::fits(self.shape, stream.len()) {
                    martingale(w.u8(REPR_CODED));
                    w.raw(&stream);
                } else {
                    martingale(w.u8(REPR_DENSE));
                    w.raw(&pack(regs, self.register_bits()));
                }
            }
        }
        let flags = if self.martingale.is_some() {
            FLAG_MARTINGALE
        } else {
            0
        };
        codec::encode(
            Family::ExaLogLog,
            flags,
            self.hasher(),
            params.bytes(),
            w.bytes(),
        )
    }

    /// Decodes a sketch, checking every field before building it.
    pub fn from_bytes(bytes: &[u8]) -> Result<ExaLogLog, DecodeError> {
        let env = codec::decode_family(bytes, Family::ExaLogLog)?;
        env.flags_within(FLAG_MARTINGALE, "only bit 0 (martingale)")?;
        let mut params = env.params();
        let shape = read_shape(&mut params)?;
        let (t, d, p) = (shape.t, shape.d, shape.p);
        let coff = params.offset();
        let confidence = read_confidence(&mut params)?;
        params.finish()?;

        let mut r = env.payload();
        let kind = r.u8_in(
            "representation",
            ..=REPR_CODED,
            "0 (exact), 1 (dense) or 2 (coded)",
        )?;
        let moff = r.offset();
        let martingale =
            read_martingale(&mut r, env.flags & FLAG_MARTINGALE != 0, "martingale value")?;
        let repr = if kind == REPR_EXACT {
            // The table may take no more than the dense registers do in memory.
            let set = read_hashes(&mut r, 4 << p)?;
            check_exact_martingale(martingale, &set, "martingale value", moff)?;
            Repr::Exact(set)
        } else if kind == REPR_CODED {
            Repr::Dense(read_coded(&mut r, shape)?)
        } else {
            let bits = shape.register_bits();
            let m = 1usize << p;
            let off = r.offset();
            let packed = r.bytes(shape.packed_bytes() as u64, "registers")?;
            let mut regs = Vec::with_capacity(m);
            for i in 0..m {
                let reg = unpack_at(packed, i, bits);
                check_register(shape, reg).map_err(|why| {
                    Reader::invalid("registers", off + i * bits as usize / 8, why, reg as u64)
                })?;
                regs.push(reg);
            }
            let tail_bits = (m * bits as usize) % 8;
            let last = packed[packed.len() - 1];
            Reader::ensure(
                tail_bits == 0 || last >> tail_bits == 0,
                "registers",
                off + packed.len() - 1,
                "unused bits of the last byte zero",
                last as u64,
            )?;
            Repr::Dense(regs)
        };
        r.finish()?;
        ExaLogLog::from_parts(t, d, p, env.hasher, confidence, repr, martingale)
            .map_err(|_| Reader::invalid("confidence", coff, "in (0, 1)", confidence.to_bits()))
    }
}

/// The shape `(t, d, p)`, one byte each, checked as [`ExaLogLog::with_params`] checks it: an
/// error names the first field refused.
pub(crate) fn read_shape(r: &mut Reader<'_>) -> Result<Shape, DecodeError> {
    let off = r.offset();
    let t = r.u8("t")?;
    let d = r.u8("d")?;
    let p = r.u8("precision")?;
    check_params(t, d, p).map_err(|e| {
        let (field, at, got) = match e.name {
            "t" => ("t", off, t),
            "d" => ("d", off + 1, d),
            _ => ("precision", off + 2, p),
        };
        Reader::invalid(field, at, e.expected, got as u64)
    })
}

/// The coded form's registers: the stream to the payload's end, decoded and checked to be
/// exactly what the coder writes for them.
fn read_coded(r: &mut Reader<'_>, shape: Shape) -> Result<Vec<u32>, DecodeError> {
    let off = r.offset();
    let stream = r.bytes(r.remaining() as u64, "coded registers")?;
    Reader::ensure(
        coded::fits(shape, stream.len()),
        "coded registers",
        off,
        "a length of at least one byte per 8 registers and below the packed registers' bytes",
        stream.len() as u64,
    )?;
    let refuse = || {
        Reader::invalid(
            "coded registers",
            off,
            "the coder's own output for valid registers",
            stream.len() as u64,
        )
    };
    let regs = coded::decode(shape, stream).ok_or_else(refuse)?;
    if coded::encode(shape, &regs) != stream {
        return Err(refuse());
    }
    Ok(regs)
}

/// Why a register value cannot have been written by a sketch of `shape`.
fn check_register(shape: Shape, reg: u32) -> Result<(), &'static str> {
    let d = shape.d as u32;
    let u = reg >> d;
    let history = reg & ((1u64 << d) - 1) as u32;
    if u > shape.max_value() {
        return Err("u at most (65 − p − t)·2^t");
    }
    // Bit d − δ stands for value u − δ, which exists only for δ < u.
    let possible = if u == 0 {
        0
    } else if u > d {
        history
    } else {
        history & !((1u32 << (d - (u - 1))) - 1)
    };
    if history != possible {
        return Err("no history bit for a value below 1");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_every_width() {
        for bits in [6u32, 16, 23, 28, 32] {
            let vals: Vec<u32> = (0..37u64)
                .map(|i| ((i * 0x9e37_79b9) & ((1u64 << bits) - 1)) as u32)
                .collect();
            let packed = pack(&vals, bits);
            assert_eq!(packed.len(), (37 * bits as usize).div_ceil(8));
            for (i, &v) in vals.iter().enumerate() {
                assert_eq!(unpack_at(&packed, i, bits), v, "bits {bits} at {i}");
            }
        }
    }

    /// `registers` of `shape` in an envelope whose payload is their coded stream.
    fn coded_envelope(shape: Shape, registers: &[u32]) -> Vec<u8> {
        let mut params = Writer::new();
        params.u8(shape.t).u8(shape.d).u8(shape.p).f64(0.95);
        let mut w = Writer::new();
        w.u8(REPR_CODED).raw(&coded::encode(shape, registers));
        codec::encode(
            Family::ExaLogLog,
            0,
            crate::hash::ItemHasher::default(),
            params.bytes(),
            w.bytes(),
        )
    }

    fn refused_field(bytes: &[u8]) -> &'static str {
        match ExaLogLog::from_bytes(bytes) {
            Err(DecodeError::Invalid { field, .. }) => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_coders_own_output_is_refused_outside_its_lengths() {
        // Below a byte per 8 registers: all-zero registers code to a few bytes.
        let s = Shape::new(2, 20, 10);
        let zeros = vec![0u32; 1 << 10];
        assert!(coded::encode(s, &zeros).len() < 128);
        assert_eq!(refused_field(&coded_envelope(s, &zeros)), "coded registers");
        // Not shorter than packed: registers drawn uniformly code to about their 32 bits.
        let s = Shape::new(0, 26, 4);
        let mut x = 7u64;
        let random: Vec<u32> = (0..16)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 33) as u32 % (s.max_value() - 26) + 27;
                u << 26 | (x >> 7) as u32 & ((1 << 26) - 1)
            })
            .collect();
        assert!(random.iter().all(|&r| check_register(s, r).is_ok()));
        assert!(coded::encode(s, &random).len() >= pack(&random, s.register_bits()).len());
        assert_eq!(
            refused_field(&coded_envelope(s, &random)),
            "coded registers"
        );
        // Within both lengths the same kind of registers decode.
        let s = Shape::new(2, 20, 8);
        let ramp: Vec<u32> = (0..256u32)
            .map(|i| (i % 40 + 30) << 20 | 0xF_0000)
            .collect();
        assert!(ramp.iter().all(|&r| check_register(s, r).is_ok()));
        let back = ExaLogLog::from_bytes(&coded_envelope(s, &ramp)).unwrap();
        assert_eq!(back.registers(), ramp);
    }

    #[test]
    fn a_coded_value_above_the_largest_is_refused() {
        // (2, 20, 8): u takes 8 bits, so a tree can spell 221..=255 above the largest, 220.
        let s = Shape::new(2, 20, 8);
        let mut regs: Vec<u32> = (0..256u32).map(|i| (i % 50 + 100) << 20).collect();
        assert_eq!(
            coded::decode(s, &coded::encode(s, &regs)),
            Some(regs.clone())
        );
        regs[17] = 230 << 20;
        assert_eq!(coded::decode(s, &coded::encode(s, &regs)), None);
        assert_eq!(refused_field(&coded_envelope(s, &regs)), "coded registers");
    }

    #[test]
    fn registers_with_impossible_history_are_refused() {
        let s = Shape::new(2, 20, 10);
        assert!(check_register(s, 0).is_ok());
        assert!(check_register(s, 1).is_err()); // history without a value
        assert!(check_register(s, 1 << 20).is_ok()); // u = 1, nothing below
        assert!(check_register(s, (1 << 20) | (1 << 19)).is_err()); // u = 1 claims value 0
        assert!(check_register(s, (2 << 20) | (1 << 19)).is_ok()); // u = 2 saw 1
        assert!(check_register(s, (2 << 20) | (1 << 18)).is_err()); // u = 2 claims 0
        assert!(check_register(s, (s.max_value() + 1) << 20).is_err());
    }
}
