//! ExaLogLog's registers: how a hash becomes an update value, what each value's probability
//! is, and the four things done to a register (update, merge, reduce, read off what it knows).
//!
//! A register of a sketch with parameters `(t, d)` at precision `p` is a `u32`
//! `u << d | history`: `u` is the largest update value seen (0 for none) and bit `d − δ` of
//! `history` says whether `u − δ` was seen, for `δ = 1..=d`. Values below `u − d` are not
//! known either way; everything above `u` is known unseen.

/// The most history bits a register may keep: `u` takes `6 + t` bits and a register 32, so
/// `d ≤ 26 − t` (checked with the register's width).
pub(crate) const MAX_D: u8 = 26;
/// The largest `t`.
pub(crate) const MAX_T: u8 = 3;

/// The parameters every register of one sketch shares, with the masks and shifts an insert
/// uses precomputed (each insert would otherwise derive them again from `t`, `d` and `p`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Shape {
    pub(crate) t: u8,
    pub(crate) d: u8,
    pub(crate) p: u8,
    /// `64 − p`: the index is the hash shifted right by this.
    index_shift: u8,
    /// `2^w`: the sentinel that caps the run of zeros at `w`.
    sentinel: u64,
    /// `2^t − 1`: the sub-bits.
    sub_mask: u64,
    /// `2^(d−1)` (0 when `d = 0`): the history bit of `u − 1`, shifted into place by a
    /// value's distance.
    newest: u64,
    /// `2^d − 1`: the history bits.
    history: u32,
}

impl Shape {
    /// The shape of parameters `(t, d, p)` (`t + p < 64`, `d ≤ 26`; checked by the sketch).
    pub(crate) const fn new(t: u8, d: u8, p: u8) -> Shape {
        Shape {
            t,
            d,
            p,
            index_shift: 64 - p,
            sentinel: 1u64 << (64 - p as u32 - t as u32),
            sub_mask: (1u64 << t) - 1,
            newest: (1u64 << d) >> 1,
            history: ((1u64 << d) - 1) as u32,
        }
    }

    /// The same shape at another precision.
    pub(crate) const fn with_p(self, p: u8) -> Shape {
        Shape::new(self.t, self.d, p)
    }

    /// The same shape with another `d`.
    pub(crate) const fn with_d(self, d: u8) -> Shape {
        Shape::new(self.t, d, self.p)
    }

    /// The geometric bits of the hash: `w = 64 − p − t`, between the index (the top `p` bits)
    /// and the `t` sub-bits (the low `t` bits).
    #[inline]
    fn w(self) -> u32 {
        64 - self.p as u32 - self.t as u32
    }

    /// The largest update value, `(65 − p − t)·2^t`.
    pub(crate) fn max_value(self) -> u32 {
        (self.w() + 1) << self.t
    }

    /// Bits a register's `u` needs.
    pub(crate) fn value_bits(self) -> u32 {
        32 - self.max_value().leading_zeros()
    }

    /// Bits a register takes at rest: `u`'s bits plus `d`.
    pub(crate) fn register_bits(self) -> u32 {
        self.value_bits() + self.d as u32
    }

    /// Bytes the `2^p` registers take packed, `⌈2^p·register_bits/8⌉`.
    pub(crate) fn packed_bytes(self) -> usize {
        ((1usize << self.p) * self.register_bits() as usize).div_ceil(8)
    }

    #[inline]
    fn history_mask(self) -> u32 {
        self.history
    }

    /// The register index and update value of a hash: the index is the top `p` bits; with
    /// `s` the low `t` bits and `z` the trailing zeros of the `w` bits between (at most `w`),
    /// the value is `z·2^t + s + 1`, in `1..=max_value`.
    ///
    /// The index sits just above the geometric bits so that lowering the precision
    /// ([`Shape::reduce`]) moves index bits only past the end of a run of `w` zeros: every value
    /// below the top level keeps its meaning (O. Ertl's layout, mirrored).
    #[inline]
    pub(crate) fn split(self, hash: u64) -> (usize, u32) {
        let index = (hash >> self.index_shift) as usize;
        let sub = (hash & self.sub_mask) as u32;
        // Bit w of the shifted hash is the lowest index bit; set, it caps the zeros at w.
        let z = ((hash >> self.t) | self.sentinel).trailing_zeros();
        (index, (z << self.t) + sub + 1)
    }

    /// `j` with `P(value = k) = 2^−j`: `t + min(z + 1, w)` for `k = z·2^t + s + 1` (the top
    /// level, all geometric bits zero, has the probability of the one below it).
    #[inline]
    pub(crate) fn level(self, k: u32) -> u32 {
        debug_assert!(k >= 1 && k <= self.max_value());
        self.t as u32 + (((k - 1) >> self.t) + 1).min(self.w())
    }

    /// `P(value = k)·2^63`, exact: probabilities are powers of two from `2^−1` down to
    /// `2^−(64 − p)` (`p ≥ 4`), and a register's sums stay at most 1, so 64-bit integers
    /// scaled by `2^63` hold them all exactly.
    #[inline]
    pub(crate) fn weight(self, k: u32) -> u64 {
        1u64 << (63 - self.level(k))
    }

    /// `P(value > k)·2^63`, exact, for `k` in `0..=max_value`.
    pub(crate) fn tail(self, k: u32) -> u64 {
        if k == 0 {
            return 1u64 << 63;
        }
        let z = (k - 1) >> self.t;
        let s = (k - 1) & ((1 << self.t) - 1);
        let same_level = ((1u64 << self.t) - 1 - s as u64) * self.weight(k);
        // Every level above z together has the probability 2^−(z+1): levels z+1..w−1 give
        // 2^−(z+1) − 2^−w and the top level (probability 2^−w in all) the rest.
        let above = if z < self.w() {
            1u64 << (63 - (z + 1))
        } else {
            0
        };
        same_level + above
    }

    /// The register after seeing value `k`.
    #[inline]
    pub(crate) fn update(self, r: u32, k: u32) -> u32 {
        let u = r >> self.d;
        if k > u {
            self.raise(r, k)
        } else {
            r | self.window_bit(u, k)
        }
    }

    /// The register after seeing `k > u`: `k` becomes the largest value, the old ones move
    /// down the history (out of it past `d`).
    #[inline]
    pub(crate) fn raise(self, r: u32, k: u32) -> u32 {
        let d = self.d as u32;
        let u = r >> d;
        debug_assert!(k > u);
        let shift = k - u;
        let kept = if u == 0 || shift > d {
            0
        } else {
            ((r & self.history_mask()) | (1 << d)) >> shift
        };
        (k << d) | kept
    }

    /// The history bit of value `k ≤ u`, or 0 when `k = u` or `k` is below the window:
    /// `2^(d−1) >> (u − k − 1)`, without a branch (`u − k − 1` wraps for `k = u`, and every
    /// shift past 63 gives 0).
    #[inline]
    pub(crate) fn window_bit(self, u: u32, k: u32) -> u32 {
        debug_assert!(k <= u);
        (self.newest >> (u - k).wrapping_sub(1).min(63)) as u32
    }

    /// The register of the union of two registers' streams: exact, since every value the
    /// union's register keeps (`≥ max u − d`) is known to the side that saw it.
    #[inline]
    pub(crate) fn merge(self, a: u32, b: u32) -> u32 {
        let d = self.d as u32;
        let (ua, ub) = (a >> d, b >> d);
        let u = ua.max(ub);
        let aligned = |r: u32, ur: u32| -> u32 {
            if ur == 0 || u - ur > d {
                0
            } else {
                (((r & self.history_mask()) as u64 | (1u64 << d)) >> (u - ur)) as u32
            }
        };
        (u << d) | ((aligned(a, ua) | aligned(b, ub)) & self.history_mask())
    }

    /// The values a register knows it saw, newest first: `u`, then `u − δ` for each set
    /// history bit.
    pub(crate) fn seen(self, r: u32) -> impl Iterator<Item = u32> {
        let d = self.d as u32;
        let u = r >> d;
        let history = r & self.history_mask();
        (0..=d).filter_map(move |delta| {
            let seen = if delta == 0 {
                u > 0
            } else {
                u > delta && history >> (d - delta) & 1 == 1
            };
            seen.then(|| u - delta)
        })
    }

    /// `P(an item changes this register | it falls in it)·2^63`: a value above `u`, or one in
    /// the history window not yet seen. Values below the window change nothing.
    ///
    /// The window's unseen values are summed a level at a time (values `z·2^t + 1..=(z+1)·2^t`
    /// share one probability): a popcount per level, not a step per bit.
    pub(crate) fn change_weight(self, r: u32) -> u64 {
        let d = self.d as u32;
        let u = r >> d;
        let mut sum = self.tail(u);
        if u <= 1 || d == 0 {
            return sum;
        }
        // Value v of the window sits at bit v + d − u; unseen ones are the zero bits.
        let lowest = u.saturating_sub(d).max(1);
        let unseen = !r & self.history_mask();
        let mut v = lowest;
        while v < u {
            let level_end = ((((v - 1) >> self.t) + 1) << self.t).min(u - 1); // last value
            let (lo, hi) = (v + d - u, level_end + d - u); // bits lo..=hi
            let bits = (unseen >> lo) & (((1u64 << (hi - lo + 1)) - 1) as u32);
            sum += (bits.count_ones() as u64) << (63 - self.level(v));
            v = level_end + 1;
        }
        sum
    }

    /// Adds what a register says to the maximum-likelihood coefficients: for each value known
    /// unseen, its probability to `alpha` (scaled by 2^63); for each value seen, one to
    /// `beta[level]`.
    pub(crate) fn add_coefficients(self, r: u32, alpha: &mut u128, beta: &mut [u32; 65]) {
        let d = self.d as u32;
        let u = r >> d;
        *alpha += self.tail(u) as u128;
        if u == 0 {
            return;
        }
        beta[self.level(u) as usize] += 1;
        let history = r & self.history_mask();
        for delta in 1..=d.min(u - 1) {
            let k = u - delta;
            if history >> (d - delta) & 1 == 1 {
                beta[self.level(k) as usize] += 1;
            } else {
                *alpha += self.weight(k) as u128;
            }
        }
    }

    /// The register at precision `to < p` that register `index` becomes: what a sketch of
    /// precision `to` fed the same items holds in register `index >> (p − to)` from them.
    ///
    /// The `p − to` index bits dropped sit just above the geometric bits, so they extend a
    /// run of zeros only where all `w` geometric bits were zero: values of the top level
    /// (`k > w·2^t`) rise by `2^t` for each trailing zero of the dropped bits (all of them if
    /// the bits are zero), every other value keeps its meaning. A value below the register's
    /// window rises no more than the largest value, so it stays below the new window: the
    /// reduction is exact.
    pub(crate) fn reduce(self, index: usize, r: u32, to: u8) -> u32 {
        debug_assert!(to <= self.p);
        let target = self.with_p(to);
        let dropped = self.p - to;
        let low = index & ((1usize << dropped) - 1);
        let zeros = if low == 0 {
            dropped as u32
        } else {
            low.trailing_zeros()
        };
        let top_level = self.w() << self.t;
        let mut out = 0;
        for k in self.seen(r) {
            let lifted = if k > top_level {
                k + (zeros << self.t)
            } else {
                k
            };
            out = target.update(out, lifted);
        }
        out
    }

    /// The register with only its newest `to ≤ d` history bits, as a sketch of `d = to`
    /// would hold it.
    pub(crate) fn shorten(self, r: u32, to: u8) -> u32 {
        let u = r >> self.d;
        let history = (r & self.history_mask()) >> (self.d - to);
        (u << to) | history
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    const SHAPES: [Shape; 4] = [
        Shape::new(2, 20, 10),
        Shape::new(1, 9, 6),
        Shape::new(0, 0, 12),
        Shape::new(3, 5, 4),
    ];

    /// The split, bit by bit from its definition.
    fn split_model(s: Shape, h: u64) -> (usize, u32) {
        let index = (h as u128 >> (64 - s.p as u32)) as usize;
        let sub = (h % (1u64 << s.t)) as u32;
        let mut z = 0;
        while z < s.w() && (h >> (s.t as u32 + z)) & 1 == 0 {
            z += 1;
        }
        (index, z * (1 << s.t) + sub + 1)
    }

    fn hashes(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|i| {
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                // Every 7th hash has long runs of zeros, to reach the top levels.
                let z = z ^ (z >> 31);
                if i % 7 == 0 {
                    z & !(((1u64 << 50) - 1) << 3)
                } else {
                    z
                }
            })
            .collect()
    }

    /// The register a set of seen values gives, from the definition.
    fn register_model(s: Shape, seen: &BTreeSet<u32>) -> u32 {
        let Some(&u) = seen.iter().next_back() else {
            return 0;
        };
        let mut r = u << s.d;
        for delta in 1..=s.d as u32 {
            if u > delta && seen.contains(&(u - delta)) {
                r |= 1 << (s.d as u32 - delta);
            }
        }
        r
    }

    #[test]
    fn split_matches_the_bitwise_definition_and_stays_in_range() {
        for s in SHAPES {
            for h in hashes(20_000, s.p as u64).into_iter().chain([0, u64::MAX]) {
                let (i, k) = s.split(h);
                assert_eq!((i, k), split_model(s, h), "{s:?} {h:#x}");
                assert!(k >= 1 && k <= s.max_value());
            }
            assert_eq!(s.split(0).1, s.w() * (1 << s.t) + 1);
        }
        assert_eq!(Shape::new(2, 20, 10).register_bits(), 28);
    }

    #[test]
    fn probabilities_sum_to_one_and_tails_match_sums() {
        for s in SHAPES {
            let total: u64 = (1..=s.max_value()).map(|k| s.weight(k)).sum();
            assert_eq!(total, 1u64 << 63, "{s:?}");
            for k in 0..=s.max_value() {
                let tail: u64 = (k + 1..=s.max_value()).map(|j| s.weight(j)).sum();
                assert_eq!(s.tail(k), tail, "{s:?} k = {k}");
            }
        }
    }

    #[test]
    fn update_and_merge_match_the_set_of_seen_values() {
        for s in SHAPES {
            let hs = hashes(3_000, 7 + s.d as u64);
            let (mut ra, mut rb) = (0u32, 0u32);
            let (mut sa, mut sb) = (BTreeSet::new(), BTreeSet::new());
            for (n, &h) in hs.iter().enumerate() {
                let k = s.split(h).1;
                if n % 3 == 0 {
                    ra = s.update(ra, k);
                    sa.insert(k);
                    assert_eq!(ra, register_model(s, &sa), "{s:?}");
                } else {
                    rb = s.update(rb, k);
                    sb.insert(k);
                }
                if n % 97 == 0 {
                    let union: BTreeSet<u32> = sa.union(&sb).copied().collect();
                    assert_eq!(s.merge(ra, rb), register_model(s, &union));
                    assert_eq!(s.merge(rb, ra), s.merge(ra, rb));
                }
            }
        }
    }

    #[test]
    fn change_weight_is_the_probability_of_a_new_register() {
        for s in SHAPES {
            let mut r = 0u32;
            for h in hashes(200, 3) {
                r = s.update(r, s.split(h).1);
                let changing: u64 = (1..=s.max_value())
                    .filter(|&k| s.update(r, k) != r)
                    .map(|k| s.weight(k))
                    .sum();
                assert_eq!(s.change_weight(r), changing, "{s:?} {r:#x}");
            }
        }
    }

    #[test]
    fn coefficients_count_every_known_value_once() {
        for s in SHAPES {
            let mut r = 0u32;
            for h in hashes(300, 11) {
                r = s.update(r, s.split(h).1);
                let (mut alpha, mut beta) = (0u128, [0u32; 65]);
                s.add_coefficients(r, &mut alpha, &mut beta);
                let seen: BTreeSet<u32> = s.seen(r).collect();
                let u = r >> s.d;
                let lowest_known = u.saturating_sub(s.d as u32).max(1);
                let unseen: u128 = (lowest_known..=s.max_value())
                    .filter(|k| !seen.contains(k))
                    .map(|k| s.weight(k) as u128)
                    .sum();
                assert_eq!(alpha, unseen);
                let mut want = [0u32; 65];
                for &k in &seen {
                    want[s.level(k) as usize] += 1;
                }
                assert_eq!(beta, want);
            }
        }
    }

    #[test]
    fn reduce_gives_the_register_a_smaller_precision_would_hold() {
        // Items split at precision p, reduced to `to`, give exactly the registers of items
        // split at `to`, at every count (small counts exercise the top level and the window).
        for s in [Shape::new(2, 20, 9), Shape::new(1, 3, 7)] {
            for to in [s.p - 1, s.p - 3, 4] {
                let target = s.with_p(to);
                let mut regs = vec![0u32; 1 << s.p];
                let mut truth = vec![0u32; 1 << to];
                for (n, h) in hashes(40_000, to as u64).into_iter().enumerate() {
                    let (i, k) = s.split(h);
                    regs[i] = s.update(regs[i], k);
                    let (j, kk) = target.split(h);
                    truth[j] = target.update(truth[j], kk);
                    if n % 997 == 0 || n < 50 {
                        let mut reduced = vec![0u32; 1 << to];
                        for (i, &r) in regs.iter().enumerate() {
                            let j = i >> (s.p - to);
                            reduced[j] = target.merge(reduced[j], s.reduce(i, r, to));
                        }
                        assert_eq!(reduced, truth, "{s:?} to {to} after {n}");
                    }
                }
            }
        }
    }

    #[test]
    fn shorten_keeps_the_newest_history() {
        let s = Shape::new(2, 20, 8);
        let short = s.with_d(6);
        let (mut r, mut want) = (0u32, 0u32);
        for h in hashes(500, 9) {
            let k = s.split(h).1;
            r = s.update(r, k);
            want = short.update(want, k);
            assert_eq!(s.shorten(r, 6), want);
        }
    }
}
