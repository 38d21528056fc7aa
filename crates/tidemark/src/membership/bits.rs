//! Packed bit storage: fixed-width fields in a `Vec<u64>` and one-bit flags.
//!
//! Written for the quotient filter: remainders of `width` bits (1..=58) packed end to end
//! with no padding between fields, so that a table of `2^q` slots holds exactly
//! `2^q · width` remainder bits (plus one spare word, so that a field straddling two words
//! can always read both without a bounds branch).

/// `n` zero words, or `None` if the allocator refuses them. A table sized from a caller's
/// number may be larger than any machine: that must be an error, not an abort. (The zeros
/// are written at once, so the pages are touched at build: a kernel that overcommitted
/// memory it does not have fails the process here, not halfway through its input.)
fn try_zeroed_words(n: usize) -> Option<Vec<u64>> {
    let mut words = Vec::new();
    words.try_reserve_exact(n).ok()?;
    words.resize(n, 0);
    Some(words)
}

/// `len` fields of `width` bits each, packed end to end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PackedArray {
    width: u32,
    mask: u64,
    len: usize,
    words: Vec<u64>,
}

/// The widest field a [`PackedArray`] holds: a field plus its offset must fit in 128 bits
/// when read across two words, and 58 leaves the quotient filter room for any sane table.
pub(crate) const MAX_WIDTH: u32 = 58;

impl PackedArray {
    /// `len` zero fields of `width` bits (`1..=MAX_WIDTH`).
    pub(crate) fn new(width: u32, len: usize) -> Self {
        debug_assert!((1..=MAX_WIDTH).contains(&width));
        let bits = len * width as usize;
        PackedArray {
            width,
            mask: (1u64 << width) - 1,
            len,
            words: vec![0; bits.div_ceil(64) + 1],
        }
    }

    /// As [`PackedArray::new`], or `None` when the words cannot be allocated.
    pub(crate) fn try_new(width: u32, len: usize) -> Option<Self> {
        debug_assert!((1..=MAX_WIDTH).contains(&width));
        let bits = len.checked_mul(width as usize)?;
        Some(PackedArray {
            width,
            mask: (1u64 << width) - 1,
            len,
            words: try_zeroed_words(bits.div_ceil(64).checked_add(1)?)?,
        })
    }

    /// The backing words (for encoding): `⌈len·width/64⌉ + 1` of them.
    pub(crate) fn words(&self) -> &[u64] {
        &self.words
    }

    /// The words an array of `len` fields of `width` bits is stored in.
    pub(crate) fn word_count(width: u32, len: usize) -> usize {
        (len * width as usize).div_ceil(64) + 1
    }

    /// An array over stored words, or `None` if their number is wrong or a bit beyond the
    /// last field is set (so that every array has one encoding).
    pub(crate) fn from_words(width: u32, len: usize, words: Vec<u64>) -> Option<Self> {
        if !(1..=MAX_WIDTH).contains(&width) || words.len() != Self::word_count(width, len) {
            return None;
        }
        let used = len * width as usize;
        let (k, off) = (used / 64, used % 64);
        let tail_clean = words[k] >> off == 0;
        if !tail_clean || words[k + 1..].iter().any(|&w| w != 0) {
            return None;
        }
        Some(PackedArray {
            width,
            mask: (1u64 << width) - 1,
            len,
            words,
        })
    }

    /// The field width in bits.
    #[cfg(test)]
    pub(crate) fn width(&self) -> u32 {
        self.width
    }

    /// The number of fields.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Field `i`.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> u64 {
        debug_assert!(i < self.len);
        let bit = i * self.width as usize;
        let (k, off) = (bit >> 6, (bit & 63) as u32);
        let lo = self.words[k] >> off;
        let v = if off + self.width > 64 {
            lo | (self.words[k + 1] << (64 - off))
        } else {
            lo
        };
        v & self.mask
    }

    /// Sets field `i` to `v` (which must fit in the width).
    #[inline(always)]
    pub(crate) fn set(&mut self, i: usize, v: u64) {
        debug_assert!(i < self.len);
        debug_assert!(v <= self.mask);
        let bit = i * self.width as usize;
        let (k, off) = (bit >> 6, (bit & 63) as u32);
        self.words[k] = (self.words[k] & !(self.mask << off)) | (v << off);
        if off + self.width > 64 {
            let spill = 64 - off;
            let hi_mask = self.mask >> spill;
            self.words[k + 1] = (self.words[k + 1] & !hi_mask) | (v >> spill);
        }
    }
}

/// `SELECT_IN_BYTE[b][j]`: the position of the `j`-th (0-based) set bit of byte `b` (8 if
/// there is none).
const SELECT_IN_BYTE: [[u8; 8]; 256] = {
    let mut t = [[8u8; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let (mut i, mut j) = (0, 0);
        while i < 8 {
            if (b >> i) & 1 == 1 {
                t[b][j] = i as u8;
                j += 1;
            }
            i += 1;
        }
        b += 1;
    }
    t
};

/// The position of the `j`-th (0-based) set bit of `w`, which must have more than `j`:
/// broadword select (Vigna 2008) — per-byte popcounts, their prefix sums by one multiply, a
/// byte-wise comparison with `j` to pick the byte, and a table within the byte.
#[inline(always)]
pub(crate) fn select_in_word(w: u64, j: u32) -> u32 {
    const L8: u64 = 0x0101_0101_0101_0101;
    const H8: u64 = 0x8080_8080_8080_8080;
    debug_assert!(j < w.count_ones());
    let mut s = w - ((w >> 1) & 0x5555_5555_5555_5555);
    s = (s & 0x3333_3333_3333_3333) + ((s >> 2) & 0x3333_3333_3333_3333);
    s = (s + (s >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    // Byte i of `prefix` is the number of set bits in bytes 0..=i (at most 64).
    let prefix = s.wrapping_mul(L8);
    let y = j as u64 * L8;
    // High bit of byte i set when prefix_i ≤ j: the bytes wholly before the target bit.
    let le = ((((y | H8) - (prefix & !H8)) ^ prefix ^ y) & H8) >> 7;
    let bytes_before = (le.wrapping_mul(L8) >> 56) as u32;
    let shift = bytes_before * 8;
    let before = ((prefix << 8) >> shift) & 0xff;
    let byte = ((w >> shift) & 0xff) as usize;
    shift + SELECT_IN_BYTE[byte][(j as u64 - before) as usize] as u32
}

/// The quotient filter's three metadata flags per slot, interleaved by blocks of 64 slots
/// (`words[3·b + field]` holds field `field` of slots `64·b .. 64·b + 63`), so that a
/// lookup's three flags of a slot share a cache line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    words: Vec<u64>,
}

/// `is_occupied`.
pub(crate) const OCC: usize = 0;
/// `is_continuation`.
pub(crate) const CONT: usize = 1;
/// `is_shifted`.
pub(crate) const SHIFT: usize = 2;

impl Meta {
    /// `len` slots with every flag clear.
    pub(crate) fn new(len: usize) -> Self {
        Meta {
            words: vec![0; 3 * Self::word_count(len)],
        }
    }

    /// As [`Meta::new`], or `None` when the words cannot be allocated.
    pub(crate) fn try_new(len: usize) -> Option<Self> {
        Some(Meta {
            words: try_zeroed_words(Self::word_count(len).checked_mul(3)?)?,
        })
    }

    #[inline(always)]
    fn word(&self, field: usize, block: usize) -> u64 {
        self.words[3 * block + field]
    }

    /// Flag `field` of slot `i`.
    #[inline(always)]
    pub(crate) fn get(&self, field: usize, i: usize) -> bool {
        (self.word(field, i >> 6) >> (i & 63)) & 1 == 1
    }

    /// Sets flag `field` of slot `i` to `v`.
    #[inline(always)]
    pub(crate) fn set(&mut self, field: usize, i: usize, v: bool) {
        let w = &mut self.words[3 * (i >> 6) + field];
        let m = 1u64 << (i & 63);
        if v {
            *w |= m;
        } else {
            *w &= !m;
        }
    }

    /// Whether slot `i` holds a remainder: occupied or shifted (a continuation is always
    /// shifted).
    #[inline(always)]
    pub(crate) fn in_use(&self, i: usize) -> bool {
        let b = 3 * (i >> 6);
        ((self.words[b + OCC] | self.words[b + SHIFT]) >> (i & 63)) & 1 == 1
    }

    /// One field's words in slot order (for encoding).
    pub(crate) fn field_words(&self, field: usize) -> impl Iterator<Item = u64> + '_ {
        self.words.iter().skip(field).step_by(3).copied()
    }

    /// The words `len` flags of one field are stored in.
    pub(crate) fn word_count(len: usize) -> usize {
        len.div_ceil(64)
    }

    /// Flags from three fields' words, or `None` if their number is wrong or a bit past
    /// `len` is set.
    pub(crate) fn from_fields(len: usize, fields: [Vec<u64>; 3]) -> Option<Self> {
        let n = Self::word_count(len);
        let mut words = vec![0; 3 * n];
        for (f, ws) in fields.iter().enumerate() {
            if ws.len() != n || (len % 64 != 0 && ws[len / 64] >> (len % 64) != 0) {
                return None;
            }
            for (b, &w) in ws.iter().enumerate() {
                words[3 * b + f] = w;
            }
        }
        Some(Meta { words })
    }

    /// The highest `i ≤ at` whose `field` flag is clear, without wrapping below 0.
    #[inline(always)]
    pub(crate) fn prev_clear(&self, field: usize, at: usize) -> Option<usize> {
        let mut k = at >> 6;
        let off = at & 63;
        let mut w = !self.word(field, k) & (u64::MAX >> (63 - off));
        loop {
            if w != 0 {
                return Some(k * 64 + 63 - w.leading_zeros() as usize);
            }
            if k == 0 {
                return None;
            }
            k -= 1;
            w = !self.word(field, k);
        }
    }

    /// Set `field` flags in `from..=to` (`from ≤ to`).
    #[inline(always)]
    pub(crate) fn count_ones(&self, field: usize, from: usize, to: usize) -> u32 {
        let (kf, kt) = (from >> 6, to >> 6);
        let lo = u64::MAX << (from & 63);
        let hi = u64::MAX >> (63 - (to & 63));
        if kf == kt {
            return (self.word(field, kf) & lo & hi).count_ones();
        }
        let mut n =
            (self.word(field, kf) & lo).count_ones() + (self.word(field, kt) & hi).count_ones();
        for k in kf + 1..kt {
            n += self.word(field, k).count_ones();
        }
        n
    }

    /// The index of the `k`-th (1-based) clear `field` flag at or after `from`, if it lies
    /// below `limit` (no wrapping).
    #[inline(always)]
    pub(crate) fn select_clear(
        &self,
        field: usize,
        from: usize,
        mut k: u32,
        limit: usize,
    ) -> Option<usize> {
        let blocks = self.words.len() / 3;
        let mut i = from >> 6;
        let mut w = !self.word(field, i) & (u64::MAX << (from & 63));
        loop {
            let c = w.count_ones();
            if c >= k {
                let pos = i * 64 + select_in_word(w, k - 1) as usize;
                return (pos < limit).then_some(pos);
            }
            k -= c;
            i += 1;
            if i >= blocks {
                return None;
            }
            w = !self.word(field, i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    #[test]
    fn packed_fields_match_a_plain_vector_at_every_width() {
        let mut rng = Pcg64::seed_from_u64(7);
        for width in 1..=MAX_WIDTH {
            let len = 301;
            let mut a = PackedArray::new(width, len);
            let mut model = vec![0u64; len];
            assert_eq!((a.width(), a.len()), (width, len));
            for _ in 0..2_000 {
                let i = rng.random_range(0..len);
                let v = rng.random::<u64>() >> (64 - width);
                a.set(i, v);
                model[i] = v;
            }
            for (i, &m) in model.iter().enumerate() {
                assert_eq!(a.get(i), m, "width {width}, field {i}");
            }
        }
    }

    #[test]
    fn broadword_select_matches_a_scan() {
        let mut rng = Pcg64::seed_from_u64(9);
        let mut words = vec![u64::MAX, 1, 1 << 63, 0x8000_0000_0000_0001, 0xff00];
        for _ in 0..2_000 {
            // Sparse, dense and even words.
            let a: u64 = rng.random();
            let b: u64 = rng.random();
            words.extend([a, a & b, a | b]);
        }
        for w in words.into_iter().filter(|&w| w != 0) {
            let set: Vec<u32> = (0..64).filter(|&i| (w >> i) & 1 == 1).collect();
            for (j, &pos) in set.iter().enumerate() {
                assert_eq!(select_in_word(w, j as u32), pos, "word {w:#x}, j {j}");
            }
        }
    }

    #[test]
    fn flags_and_word_queries_match_plain_vectors() {
        let mut rng = Pcg64::seed_from_u64(8);
        let len = 300;
        let mut b = Meta::new(len);
        let mut model = vec![[false; 3]; len];
        for _ in 0..5_000 {
            let i = rng.random_range(0..len);
            let f = rng.random_range(0..3);
            let v = rng.random_bool(0.7);
            b.set(f, i, v);
            model[i][f] = v;
        }
        for f in 0..3 {
            for (i, m) in model.iter().enumerate() {
                assert_eq!(b.get(f, i), m[f]);
                let prev = (0..=i).rev().find(|&j| !model[j][f]);
                assert_eq!(b.prev_clear(f, i), prev);
                for to in i..(i + 70).min(len) {
                    let n = (i..=to).filter(|&j| model[j][f]).count() as u32;
                    assert_eq!(b.count_ones(f, i, to), n);
                }
                for k in 1..5u32 {
                    let want = (i..len).filter(|&j| !model[j][f]).nth(k as usize - 1);
                    assert_eq!(
                        b.select_clear(f, i, k, len),
                        want,
                        "field {f} from {i} k {k}"
                    );
                }
            }
            let words: Vec<u64> = b.field_words(f).collect();
            assert_eq!(words.len(), Meta::word_count(len));
        }
        let fields = [0, 1, 2].map(|f| b.field_words(f).collect::<Vec<u64>>());
        assert_eq!(Meta::from_fields(len, fields), Some(b));
    }
}
