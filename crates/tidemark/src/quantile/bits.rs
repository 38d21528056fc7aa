//! Compact integer codes for the encoding: LEB128 varints, zigzag, and the adaptive Rice code
//! of a store's bin counts.
//!
//! Neighbouring bins of a smooth distribution hold similar counts, so a store's counts are
//! coded as differences from the bin before (mod 2^64, zigzagged: 0, −1, 1, −2, … ↦ 0, 1,
//! 2, 3, …). Each difference `d` is Rice-coded with a parameter `k` that follows the
//! differences' running mean (as in LOCO-I, M. Weinberger, G. Seroussi, G. Sapiro, IEEE
//! Trans. Image Processing 9(8), 2000): `q = d >> k` one-bits, a zero-bit, then the low `k`
//! bits of `d`; a quotient of 16 or more is written as 16 one-bits and the 64 bits of `d`.
//! `k` is the smallest with `N·2^k ≥ A`, where `A` sums the differences so far (starting at
//! 4) and `N` counts them (starting at 1), both halved when `N` reaches 16. Bits fill each
//! byte from its least significant bit; the last byte is padded with zeros.
//!
//! A count of `c ± √c` costs about `log₂ √c + 2` bits instead of a varint's `⌈log₂ c / 7⌉`
//! bytes: a bin of 10,000 about 9 bits, an empty bin in a sparse tail about 1.
//!
//! Every code here has exactly one form: a decoder refuses an overlong varint, an escape
//! whose quotient would have fit, non-zero padding and bytes past the last count, so what
//! decodes re-encodes to the same bytes.

use crate::codec::Reader;
use crate::DecodeError;

/// Quotients from this up are escaped.
const ESCAPE: u64 = 16;
/// `N` at which `A` and `N` are halved.
const RESET: u64 = 16;

/// Appends `v` as a LEB128 varint ([`crate::codec::Writer::varint`]).
pub(crate) fn put_varint(out: &mut Vec<u8>, v: u64) {
    crate::codec::Writer::put_varint(out, v);
}

/// Reads a varint written by [`put_varint`] ([`Reader::varint`]).
pub(crate) fn read_varint(r: &mut Reader<'_>, field: &'static str) -> Result<u64, DecodeError> {
    r.varint(field)
}

/// `0, −1, 1, −2, …` ↦ `0, 1, 2, 3, …`.
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The Rice parameter's state: the sum of the differences so far and their number.
struct Adaptive {
    sum: u128,
    n: u64,
}

impl Adaptive {
    fn new() -> Adaptive {
        Adaptive { sum: 4, n: 1 }
    }

    /// The smallest `k ≤ 63` with `n·2^k ≥ sum`.
    fn k(&self) -> u32 {
        let n = self.n as u128;
        if self.sum <= n {
            return 0;
        }
        // `n·2^k` has `bits(n) + k` bits, so the answer is `bits(sum) − bits(n)` or one more:
        // a shift and a compare instead of a 128-bit division in every bin's code.
        let bits = |v: u128| 128 - v.leading_zeros();
        let k = bits(self.sum) - bits(n);
        let k = if n << k >= self.sum { k } else { k + 1 };
        k.min(63)
    }

    fn update(&mut self, d: u64) {
        self.sum += d as u128;
        self.n += 1;
        if self.n == RESET {
            self.sum /= 2;
            self.n /= 2;
        }
    }
}

/// [`Adaptive`] for counts below `2^32`, in 64 bits: each difference is then below `2^33`,
/// and the sum stays below `2^38` (at most 15 differences before the first halving, 8
/// between halvings after), so no 128-bit arithmetic is needed in a store's commonest code.
struct NarrowAdaptive {
    sum: u64,
    n: u64,
}

impl NarrowAdaptive {
    fn new() -> NarrowAdaptive {
        NarrowAdaptive { sum: 4, n: 1 }
    }

    /// As [`Adaptive::k`].
    #[inline(always)]
    fn k(&self) -> u32 {
        if self.sum <= self.n {
            return 0;
        }
        let k = self.n.leading_zeros() - self.sum.leading_zeros();
        if self.n << k >= self.sum {
            k
        } else {
            k + 1
        }
    }

    #[inline(always)]
    fn update(&mut self, d: u64) {
        self.sum += d;
        self.n += 1;
        if self.n == RESET {
            self.sum /= 2;
            self.n /= 2;
        }
    }
}

struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    /// Bits in `acc` not yet written: fewer than 64 between calls.
    filled: u32,
}

impl BitWriter<'_> {
    fn new(out: &mut Vec<u8>) -> BitWriter<'_> {
        BitWriter {
            out,
            acc: 0,
            filled: 0,
        }
    }

    /// Appends the low `n ≤ 56` bits of `v` (whose higher bits are zero).
    #[inline(always)]
    fn bits(&mut self, v: u64, n: u32) {
        debug_assert!(n <= 56 && v >> n == 0);
        self.acc |= v << self.filled;
        let filled = self.filled + n;
        if filled >= 64 {
            // Eight whole bytes out at once, a fixed-size copy: a bin's code is usually a
            // byte or less, so this runs about once in eight bins. (`filled ≥ 64` with
            // `n ≤ 56` means `self.filled ≥ 8`: the shift below is less than 64.)
            self.out.extend_from_slice(&self.acc.to_le_bytes());
            self.acc = v >> (64 - self.filled);
            self.filled = filled - 64;
        } else {
            self.filled = filled;
        }
    }

    /// Appends the low `n ≤ 64` bits of `v`.
    fn wide(&mut self, v: u64, n: u32) {
        if n > 32 {
            self.bits(v & 0xffff_ffff, 32);
            self.bits(v >> 32 & (u64::MAX >> (96 - n)), n - 32);
        } else if n > 0 {
            self.bits(v & (u64::MAX >> (64 - n)), n);
        }
    }

    /// Writes the bits left, the last byte padded with zeros.
    fn finish(self) {
        let bytes = self.filled.div_ceil(8) as usize;
        self.out.extend_from_slice(&self.acc.to_le_bytes()[..bytes]);
    }

    /// One difference's code with the parameter `k`: `q = d >> k` one-bits, a zero-bit and the
    /// low `k` bits of `d`, or the escape.
    #[inline(always)]
    fn code(&mut self, d: u64, k: u32) {
        let q = d >> k;
        if q < ESCAPE && k < 56 - ESCAPE as u32 {
            // q ones, a zero, then the low k bits of d: one write of at most 56 bits.
            let low = d & ((1u64 << k) - 1);
            self.bits(((1u64 << q) - 1) | low << (q + 1), q as u32 + 1 + k);
        } else if q < ESCAPE {
            self.bits((1u64 << q) - 1, q as u32 + 1);
            self.wide(d, k);
        } else {
            self.bits((1u64 << ESCAPE) - 1, ESCAPE as u32);
            self.wide(d, 64);
        }
    }
}

/// Appends the Rice code of `counts` (see the module documentation).
pub(crate) fn write_counts(out: &mut Vec<u8>, counts: impl Iterator<Item = u64>) {
    let mut w = BitWriter::new(out);
    let mut state = Adaptive::new();
    let mut prev = 0u64;
    for c in counts {
        let d = zigzag(c.wrapping_sub(prev) as i64);
        prev = c;
        w.code(d, state.k());
        state.update(d);
    }
    w.finish();
}

/// [`write_counts`] of counts below `2^32` (a store's 32-bit counts, a few values' bins):
/// the same bytes, the parameter kept in 64 bits.
pub(crate) fn write_narrow_counts(out: &mut Vec<u8>, counts: impl Iterator<Item = u32>) {
    let mut w = BitWriter::new(out);
    let mut state = NarrowAdaptive::new();
    let mut prev = 0u64;
    for c in counts {
        let c = c as u64;
        let d = zigzag(c.wrapping_sub(prev) as i64);
        prev = c;
        w.code(d, state.k());
        state.update(d);
    }
    w.finish();
}

struct BitReader<'a> {
    bytes: &'a [u8],
    /// The next bit's position.
    at: u64,
    /// The offset of `bytes[0]` in the whole encoding.
    base: usize,
}

impl BitReader<'_> {
    fn bit(&mut self) -> Result<u64, DecodeError> {
        let byte = (self.at / 8) as usize;
        let Some(&b) = self.bytes.get(byte) else {
            return Err(DecodeError::Truncated {
                field: "bin counts",
                offset: self.base + self.bytes.len(),
                needed: 1,
                available: 0,
            });
        };
        let v = (b >> (self.at % 8)) & 1;
        self.at += 1;
        Ok(v as u64)
    }

    fn bits(&mut self, n: u32) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for i in 0..n {
            v |= self.bit()? << i;
        }
        Ok(v)
    }
}

/// Decodes `n` counts from `bytes`, a whole Rice stream starting at offset `base` of the
/// encoding: every byte must be needed, and the padding zero.
pub(crate) fn read_counts(bytes: &[u8], n: usize, base: usize) -> Result<Vec<u64>, DecodeError> {
    // Each count takes at least one bit: the caller checked n ≤ 8·len before this
    // allocation.
    debug_assert!(n as u64 <= 8 * bytes.len() as u64);
    let mut r = BitReader { bytes, at: 0, base };
    let mut out = Vec::with_capacity(n);
    let mut state = Adaptive::new();
    let mut prev = 0u64;
    for _ in 0..n {
        let start = base + (r.at / 8) as usize;
        let k = state.k();
        let mut q = 0;
        while q < ESCAPE && r.bit()? == 1 {
            q += 1;
        }
        let d = if q < ESCAPE {
            let low = r.bits(k)?;
            (q << k) | low
        } else {
            let d = r.bits(64)?;
            if d >> k < ESCAPE {
                return Err(Reader::invalid(
                    "bin counts",
                    start,
                    "an escape only for a quotient of 16 or more",
                    d,
                ));
            }
            d
        };
        state.update(d);
        prev = prev.wrapping_add(unzigzag(d) as u64);
        out.push(prev);
    }
    let used = r.at.div_ceil(8);
    if used != bytes.len() as u64 {
        return Err(DecodeError::TrailingBytes {
            offset: base + used as usize,
            extra: bytes.len() - used as usize,
        });
    }
    if r.at % 8 != 0 && bytes[bytes.len() - 1] >> (r.at % 8) != 0 {
        return Err(Reader::invalid(
            "bin counts",
            base + bytes.len() - 1,
            "zero bits after the last count",
            bytes[bytes.len() - 1] as u64,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn varint_round_trip(v: u64) {
        let mut out = Vec::new();
        put_varint(&mut out, v);
        let mut r = Reader::new(&out);
        assert_eq!(read_varint(&mut r, "v").unwrap(), v);
        r.finish().unwrap();
    }

    #[test]
    fn varints_round_trip_and_refuse_other_forms() {
        for v in [0, 1, 127, 128, 300, u32::MAX as u64, u64::MAX - 1, u64::MAX] {
            varint_round_trip(v);
        }
        // Overlong: 0 as two bytes.
        assert!(read_varint(&mut Reader::new(&[0x80, 0x00]), "v").is_err());
        // Past 64 bits.
        let mut b = vec![0xff; 9];
        b.push(0x02);
        assert!(read_varint(&mut Reader::new(&b), "v").is_err());
        // Cut.
        assert!(read_varint(&mut Reader::new(&[0x80]), "v").is_err());
    }

    /// The Rice parameter by its definition: the smallest `k ≤ 63` with `n·2^k ≥ sum`.
    fn k_by_definition(sum: u128, n: u128) -> u32 {
        (0..63).find(|&k| n << k >= sum).unwrap_or(63)
    }

    #[test]
    fn the_rice_parameter_is_the_smallest_that_covers_the_mean() {
        let mut sums: Vec<u128> = (0..300).collect();
        for b in 1..100 {
            let p = 1u128 << b;
            sums.extend([p - 1, p, p + 1]);
        }
        for n in 1..=RESET {
            for &sum in &sums {
                let state = Adaptive { sum, n };
                assert_eq!(
                    state.k(),
                    k_by_definition(sum, n as u128),
                    "sum {sum}, n {n}"
                );
                // The narrow state's sums: below 2^38 (checked to 2^40).
                if sum < 1 << 40 {
                    let narrow = NarrowAdaptive { sum: sum as u64, n };
                    assert_eq!(narrow.k(), state.k(), "sum {sum}, n {n}");
                }
            }
        }
    }

    #[test]
    fn zigzag_is_a_bijection_at_the_ends() {
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    fn coded(counts: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        write_counts(&mut out, counts.iter().copied());
        out
    }

    #[test]
    fn smooth_counts_take_about_log_sqrt_bits() {
        // A bell of peak 10,000 over 500 bins: well under two bytes a bin.
        let counts: Vec<u64> = (0..500)
            .map(|i| {
                let z = (i as f64 - 250.0) / 60.0;
                (10_000.0 * (-z * z / 2.0).exp()) as u64 + 1
            })
            .collect();
        let bytes = coded(&counts);
        assert!(bytes.len() < 500, "{} bytes", bytes.len());
        assert_eq!(read_counts(&bytes, counts.len(), 0).unwrap(), counts);
    }

    #[test]
    fn the_decoder_refuses_padding_extra_bytes_and_needless_escapes() {
        let bytes = coded(&[5, 3]);
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(matches!(
            read_counts(&extra, 2, 0),
            Err(DecodeError::TrailingBytes { .. })
        ));
        let mut padded = bytes.clone();
        *padded.last_mut().unwrap() |= 0x80;
        assert!(read_counts(&padded, 2, 0).is_err());
        // An escape for d = 1: 16 ones, then 64 bits of 1.
        let mut esc = Vec::new();
        let mut w = BitWriter::new(&mut esc);
        w.bits(0xffff, 16);
        w.wide(1, 64);
        w.finish();
        assert!(matches!(
            read_counts(&esc, 1, 0),
            Err(DecodeError::Invalid { .. })
        ));
        assert!(read_counts(&bytes[..bytes.len() - 1], 2, 0).is_err());
    }

    proptest! {
        #[test]
        fn counts_round_trip(counts in proptest::collection::vec(any::<u64>(), 0..40),
                             small in proptest::collection::vec(0u64..50, 0..200)) {
            for c in [&counts, &small] {
                let bytes = coded(c);
                prop_assert_eq!(&read_counts(&bytes, c.len(), 0).unwrap(), c);
            }
        }

        /// Counts below 2^32 (up to the largest, in runs of every size) code to the same
        /// bytes in 64 bits as in 128.
        #[test]
        fn narrow_counts_code_as_wide_ones(
            counts in proptest::collection::vec(
                prop_oneof![0u32..4, 0u32..1_000, Just(u32::MAX), any::<u32>()],
                0..300,
            ),
        ) {
            let mut narrow = Vec::new();
            write_narrow_counts(&mut narrow, counts.iter().copied());
            prop_assert_eq!(&narrow, &coded(&counts.iter().map(|&c| c as u64).collect::<Vec<_>>()));
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..64), n in 0usize..64) {
            let n = n.min(8 * bytes.len());
            if let Ok(counts) = read_counts(&bytes, n, 0) {
                prop_assert_eq!(coded(&counts), bytes);
            }
        }
    }
}
