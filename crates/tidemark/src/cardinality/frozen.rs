//! A closed bucket at rest in memory: a ring's buckets other than its newest change only when
//! a late event reaches them, so they are kept as compact bytes and thawed to be merged.
//!
//! The live forms are built for inserts: open-addressing tables at most half full (8 bytes a
//! hash, 4 an entry) and dense registers of a byte each. At rest a bucket takes what its
//! contents need:
//!
//! ```text
//! tag u8:   bits 0–1 form (0 exact, 1 sparse, 2 dense packed, 3 dense as a list),
//!           bit 2 martingale state present, bit 3 Redis's cached cardinality present, bit 4 the
//!           martingale state an exact table implies (its count; not written)
//! [martingale: value f64, sum u128]
//! [cache:   u64]
//! exact:    log2 of the table's capacity u8, count varint, the hashes ascending, u64 each
//! sparse:   log2 of the table's capacity u8, count varint, the entries (index << 6 | rank)
//!           ascending, each as the varint of its gap from the one before
//! dense:    the registers six bits each, or — when fewer bytes — the nonzero ones:
//!           count varint, then per register varint((gap << 6) | rank), the gap being the
//!           registers skipped since the last one
//! ```
//!
//! A sparse entry takes three or four bytes instead of the eight its table slot takes at half
//! load, and a dense bucket at p = 14 at most its registers packed (12 KB) instead of 16 KB, and
//! about two bytes a nonzero register while few are. Thawing gives back the same
//! sketch: its contents, its martingale state, and its tables' capacities (on which its next
//! inserts depend).

use super::hll::{Hll, Repr};
use super::martingale::Martingale;
use super::redis::{pack6, unpack6};
use super::sets::{ExactSet, SparseMap};

const FORM_EXACT: u8 = 0;
const FORM_SPARSE: u8 = 1;
const FORM_PACKED: u8 = 2;
const FORM_LIST: u8 = 3;
const HAS_MARTINGALE: u8 = 4;
const HAS_CACHE: u8 = 8;
/// The martingale state of an exact table, which it implies: its count, and a sum of 0.
const MARTINGALE_OF_EXACT: u8 = 16;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over bytes [`freeze`] wrote. They never come from outside this process, so a
/// malformed one is a broken invariant.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        s
    }

    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }

    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().expect("eight bytes"))
    }

    fn varint(&mut self) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.u8();
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    }
}

/// The bucket's bytes at rest.
pub(crate) fn freeze(h: &Hll) -> Box<[u8]> {
    let mut out = Vec::new();
    let mut tag = match &h.repr {
        Repr::Exact(_) => FORM_EXACT,
        Repr::Sparse(_) => FORM_SPARSE,
        Repr::Dense(_) => FORM_PACKED,
    };
    let implied = match (&h.repr, &h.martingale) {
        (Repr::Exact(set), Some(mart)) => mart.sum == 0 && mart.value == set.len() as f64,
        _ => false,
    };
    if implied {
        tag |= MARTINGALE_OF_EXACT;
    } else if h.martingale.is_some() {
        tag |= HAS_MARTINGALE;
    }
    if h.cache.is_some() {
        tag |= HAS_CACHE;
    }
    out.push(tag);
    if let (Some(mart), false) = (&h.martingale, implied) {
        out.extend_from_slice(&mart.value.to_le_bytes());
        out.extend_from_slice(&mart.sum.to_le_bytes());
    }
    if let Some(c) = h.cache {
        out.extend_from_slice(&c.to_le_bytes());
    }
    match &h.repr {
        Repr::Exact(set) => {
            out.push(set.capacity().trailing_zeros() as u8);
            let mut hashes: Vec<u64> = set.iter().collect();
            hashes.sort_unstable();
            put_varint(&mut out, hashes.len() as u64);
            for x in hashes {
                out.extend_from_slice(&x.to_le_bytes());
            }
        }
        Repr::Sparse(map) => {
            out.push(map.capacity().trailing_zeros() as u8);
            let mut entries: Vec<u32> = map.iter().map(|(i, r)| i << 6 | r as u32).collect();
            entries.sort_unstable();
            put_varint(&mut out, entries.len() as u64);
            let mut prev = 0u32;
            for e in entries {
                put_varint(&mut out, u64::from(e - prev));
                prev = e;
            }
        }
        Repr::Dense(regs) => {
            let mut list = Vec::new();
            let nonzero = regs.iter().filter(|&&r| r != 0).count();
            put_varint(&mut list, nonzero as u64);
            let mut next = 0usize;
            for (i, &r) in regs.iter().enumerate().filter(|(_, &r)| r != 0) {
                put_varint(&mut list, ((i - next) as u64) << 6 | u64::from(r));
                next = i + 1;
            }
            let packed = pack6(regs);
            if list.len() < packed.len() {
                out[0] = (tag & !3) | FORM_LIST;
                out.extend_from_slice(&list);
            } else {
                out.extend_from_slice(&packed);
            }
        }
    }
    out.into_boxed_slice()
}

/// The sketch [`freeze`] made `bytes` of; `empty` is an empty sketch of the ring's shape,
/// whose parameters and hash it has.
pub(crate) fn thaw(empty: &Hll, bytes: &[u8]) -> Hll {
    let mut h = empty.clone();
    let mut c = Cursor { bytes, at: 0 };
    let tag = c.u8();
    h.martingale = (tag & HAS_MARTINGALE != 0).then(|| {
        let value = f64::from_le_bytes(c.take(8).try_into().expect("eight bytes"));
        let sum = u128::from_le_bytes(c.take(16).try_into().expect("sixteen bytes"));
        Martingale { value, sum }
    });
    h.cache = (tag & HAS_CACHE != 0).then(|| c.u64());
    h.repr = match tag & 3 {
        FORM_EXACT => {
            let mut set = ExactSet::with_capacity(1 << c.u8());
            for _ in 0..c.varint() {
                set.insert(c.u64());
            }
            if tag & MARTINGALE_OF_EXACT != 0 {
                h.martingale = Some(Martingale {
                    value: set.len() as f64,
                    sum: 0,
                });
            }
            Repr::Exact(set)
        }
        FORM_SPARSE => {
            let mut map = SparseMap::with_capacity(1 << c.u8());
            let mut e = 0u32;
            for _ in 0..c.varint() {
                e += c.varint() as u32;
                map.update(e >> 6, (e & 63) as u8);
            }
            Repr::Sparse(map)
        }
        FORM_PACKED => {
            let mut regs = vec![0u8; 1 << h.p];
            unpack6(c.take(bytes.len() - c.at), &mut regs);
            Repr::Dense(regs)
        }
        _ => {
            let mut regs = vec![0u8; 1 << h.p];
            let mut next = 0usize;
            for _ in 0..c.varint() {
                let v = c.varint();
                let i = next + (v >> 6) as usize;
                regs[i] = (v & 63) as u8;
                next = i + 1;
            }
            Repr::Dense(regs)
        }
    };
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cardinality::Representation;
    use crate::hash::ItemHasher;

    /// Every form, with and without the martingale and Redis's cache, thaws to an equal sketch that
    /// answers alike, encodes alike, and goes on (its next inserts) alike.
    #[test]
    fn a_frozen_bucket_thaws_to_the_same_sketch() {
        let redis = || Hll::with_hasher(14, ItemHasher::redis()).unwrap();
        for (p, n, make) in [
            (12u8, 0u64, None),
            (12, 17, None),
            (12, 400, None),
            (12, 3_000, None),
            (14, 1_600, None),
            (14, 200_000, None),
            (4, 5_000, None),
            (14, 1_600, Some(redis as fn() -> Hll)),
            (14, 200_000, Some(redis as fn() -> Hll)),
        ] {
            let mut h = match make {
                Some(f) => f(),
                None => Hll::new(p).unwrap(),
            };
            for i in 0..n {
                h.insert_u64(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            }
            let empty = match make {
                Some(f) => f(),
                None => Hll::new(p).unwrap(),
            };
            let frozen = freeze(&h);
            let mut back = thaw(&empty, &frozen);
            assert_eq!(back, h, "p {p}, n {n}");
            assert_eq!(back.to_bytes(), h.to_bytes(), "p {p}, n {n}");
            assert_eq!(back.estimate(), h.estimate(), "p {p}, n {n}");
            for i in 0..500u64 {
                h.insert_u64(i ^ 0xDEAD_BEEF);
                back.insert_u64(i ^ 0xDEAD_BEEF);
            }
            assert_eq!(
                back.to_bytes(),
                h.to_bytes(),
                "p {p}, n {n}: after more inserts"
            );
        }
    }

    /// At rest a bucket is a few bytes an item, and a dense one never more than its registers
    /// packed six bits each.
    #[test]
    fn a_frozen_bucket_is_compact() {
        let mut h = Hll::new(14).unwrap();
        for i in 0..1_600u64 {
            h.insert_u64(i);
        }
        assert_eq!(h.representation(), Representation::Sparse);
        // About three bytes an entry (gaps near 2^31 / 1,600, varints of 3 or 4 bytes) where
        // the live table takes 8.
        let frozen = freeze(&h);
        assert!(frozen.len() <= 7 * 1_600 / 2 + 16, "{} bytes", frozen.len());
        assert!(h.bytes() >= 2 * frozen.len(), "{} live", h.bytes());
        for i in 1_600..5_000u64 {
            h.insert_u64(i);
        }
        assert_eq!(h.representation(), Representation::Dense);
        let frozen = freeze(&h);
        assert!(frozen.len() <= 12_288 + 1, "{} bytes", frozen.len());
        assert!(h.bytes() >= 2 * frozen.len(), "{} live", h.bytes());
        let mut small = Hll::new(14).unwrap();
        for i in 0..17u64 {
            small.insert_u64(i);
        }
        // The tag, the capacity, the count and the hashes: the martingale state is implied.
        assert_eq!(freeze(&small).len(), 3 + 17 * 8);
    }
}
