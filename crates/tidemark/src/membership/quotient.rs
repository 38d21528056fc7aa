//! The quotient filter: one table that doubles in place until its fingerprints run out.

use core::fmt;

use super::bits::{Meta, PackedArray, CONT, MAX_WIDTH, OCC, SHIFT};
use crate::error::ParamError;
use crate::estimate::{Estimate, Method};
use crate::hash::ItemHasher;

/// The largest quotient a table may have ([`QuotientFilter::MAX_QUOTIENT_BITS`]).
pub(crate) const MAX_QUOTIENT_BITS: u32 = 40;

/// An insert refused because the table cannot double again: the doubling would leave the
/// oldest (every) remainder with zero bits. The filter is unchanged and still answers
/// lookups with no false negatives.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exhausted {
    /// Keys the table holds (it refused the next one).
    pub keys: u64,
    /// Slots in the table.
    pub slots: u64,
    /// The fingerprint length p, fixed at build.
    pub fingerprint_bits: u32,
    /// The quotient length q now: one doubling more would make it p.
    pub quotient_bits: u32,
}

impl fmt::Display for Exhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "filter exhausted after {} keys: the table has {} slots and doubling it would give \
             the {}-bit fingerprints a {}-bit quotient and no remainder; build it with a larger \
             reserve (each bit doubles its life), use a stacked filter, or rebuild it from the \
             keys with a longer fingerprint",
            self.keys,
            self.slots,
            self.fingerprint_bits,
            self.quotient_bits + 1
        )
    }
}

impl std::error::Error for Exhausted {}

/// Smallest `q` with `3·2^q ≥ 4n`, i.e. `⌈log2(n/λ)⌉` computed in integers.
pub(crate) fn quotient_bits_for(n: u64) -> u32 {
    let target = (n as u128) * 4;
    let mut q = 0;
    while 3u128 << q < target {
        q += 1;
    }
    q
}

/// Smallest `p` with `2^p ≥ n/ε` (`⌈log2(n/ε)⌉`). Multiplying by a power of two is exact
/// in floating point, so the comparison has no rounding.
pub(crate) fn fingerprint_bits_for(n: u64, eps: f64) -> u32 {
    let mut p = 0;
    while p < 200 && (2f64).powi(p as i32) * eps < n as f64 {
        p += 1;
    }
    p
}

/// The key count at which a table of `2^q` slots must double before inserting:
/// `⌈λ·2^q⌉ = ⌈3·2^q / 4⌉`.
#[inline]
pub(crate) fn grow_at(q: u32) -> u64 {
    (3u64 << q).div_ceil(4)
}

/// `1 − (1 − 2^−p)^n`: the chance that an absent item's p-bit fingerprint equals one of `n`
/// stored uniform fingerprints.
pub(crate) fn collision_rate(p: u32, n: u64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let x = -(2f64).powi(-(p as i32));
    -((n as f64) * x.ln_1p()).exp_m1()
}

/// A quotient filter (Bender et al. 2012) that grows in place; see the [module
/// docs](super) for the theory.
///
/// # Examples
///
/// ```
/// use tidemark::membership::QuotientFilter;
///
/// let mut f = QuotientFilter::new(1_000, 0.01).unwrap();
/// for i in 0..5_000u64 {
///     f.insert(&i.to_le_bytes()).unwrap(); // grows past the forecast by doubling
/// }
/// assert!((0..5_000u64).all(|i| f.contains(&i.to_le_bytes())));
/// assert!(f.remove(&7u64.to_le_bytes()));
/// assert_eq!(f.len(), 4_999);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct QuotientFilter {
    pub(crate) hasher: ItemHasher,
    /// Fingerprint bits p (including the reserve): fixed for life.
    pub(crate) p: u32,
    /// Quotient bits at build.
    pub(crate) q0: u32,
    /// Quotient bits now.
    pub(crate) q: u32,
    /// Reserve bits the caller asked for (already inside `p`).
    pub(crate) reserve: u32,
    /// Keys held.
    pub(crate) len: u64,
    /// The three metadata flags of every slot.
    pub(crate) meta: Meta,
    pub(crate) rems: PackedArray,
}

impl QuotientFilter {
    /// The load factor λ at which a table doubles: 3/4, the design's sizing rule.
    pub const LOAD_FACTOR: f64 = 0.75;

    /// The largest quotient a table may have (2^40 slots is far beyond any memory).
    pub const MAX_QUOTIENT_BITS: u32 = MAX_QUOTIENT_BITS;

    /// A filter sized for a forecast of `capacity` keys at false-positive rate `fpr`, with
    /// no reserve: `p = ⌈log2(n/ε)⌉`, `q = ⌈log2(n/λ)⌉`.
    pub fn new(capacity: u64, fpr: f64) -> Result<Self, ParamError> {
        QuotientFilter::with_reserve(capacity, fpr, 0)
    }

    /// A filter as [`QuotientFilter::new`] with `reserve` extra fingerprint bits: `2^reserve`
    /// times the life, `2^−reserve` times the rate.
    pub fn with_reserve(capacity: u64, fpr: f64, reserve: u32) -> Result<Self, ParamError> {
        let (p, q) = QuotientFilter::shape(capacity, fpr, reserve)?;
        QuotientFilter::try_empty(ItemHasher::default(), p, q, q, reserve)
            .ok_or_else(|| ParamError::unallocatable("capacity", capacity, Self::table_bytes(p, q)))
    }

    /// Bytes the table of a filter with `p`-bit fingerprints and `2^q` slots takes: three
    /// flag words per 64 slots, and the remainders of `p − q` bits packed end to end plus
    /// one spare word. (q ≤ 40 and p − q ≤ 58 keep every product far below 2^64.)
    pub fn table_bytes(p: u32, q: u32) -> u64 {
        let slots = 1u64 << q.min(MAX_QUOTIENT_BITS);
        let flag_words = 3 * slots.div_ceil(64);
        let rem_words = (slots * u64::from(p.saturating_sub(q).min(MAX_WIDTH))).div_ceil(64) + 1;
        (flag_words + rem_words) * 8
    }

    /// The bytes a filter for `capacity` keys at `fpr` with `reserve` extra bits would
    /// allocate for its table, checked, without building it.
    pub fn table_bytes_for(capacity: u64, fpr: f64, reserve: u32) -> Result<u64, ParamError> {
        let (p, q) = QuotientFilter::shape(capacity, fpr, reserve)?;
        Ok(Self::table_bytes(p, q))
    }

    /// The fingerprint and quotient bits a filter for `capacity` keys at `fpr` with `reserve`
    /// extra bits would have, checked, without building it (so a decoder can validate a
    /// schedule before anything is allocated).
    pub(crate) fn shape(capacity: u64, fpr: f64, reserve: u32) -> Result<(u32, u32), ParamError> {
        if capacity == 0 || capacity > 1 << 38 {
            return Err(ParamError::new("capacity", "in 1..=2^38", capacity));
        }
        if !(fpr > 0.0 && fpr < 1.0) {
            return Err(ParamError::new("fpr", "in (0, 1)", fpr));
        }
        let p = fingerprint_bits_for(capacity, fpr) + reserve.min(64);
        if p > 64 {
            let name = if reserve > 0 { "reserve" } else { "fpr" };
            return Err(ParamError::new(
                name,
                "a fingerprint of at most 64 bits (log2(capacity/fpr) + reserve ≤ 64)",
                if reserve > 0 { reserve as f64 } else { fpr },
            ));
        }
        let q = quotient_bits_for(capacity);
        if p <= q {
            return Err(ParamError::new(
                "fpr",
                "a rate that leaves a remainder (below about the load factor 3/4)",
                fpr,
            ));
        }
        QuotientFilter::check_bits(p, q)?;
        Ok((p, q))
    }

    /// A filter with `fingerprint_bits` (p) and `quotient_bits` (q) given directly:
    /// `2^q` slots, remainders of `p − q` bits (1..=58), p at most 64.
    pub fn with_bits(fingerprint_bits: u32, quotient_bits: u32) -> Result<Self, ParamError> {
        let (p, q) = (fingerprint_bits, quotient_bits);
        QuotientFilter::check_bits(p, q)?;
        QuotientFilter::try_empty(ItemHasher::default(), p, q, q, 0)
            .ok_or_else(|| ParamError::unallocatable("quotient bits", q, Self::table_bytes(p, q)))
    }

    /// The limits on (p, q) that [`QuotientFilter::with_bits`] enforces.
    fn check_bits(p: u32, q: u32) -> Result<(), ParamError> {
        if p > 64 {
            return Err(ParamError::new(
                "fingerprint bits",
                "at most 64 (the hash's width)",
                p,
            ));
        }
        if q == 0 || q > MAX_QUOTIENT_BITS {
            return Err(ParamError::new("quotient bits", "in 1..=40", q));
        }
        if p <= q || p - q > MAX_WIDTH {
            return Err(ParamError::new(
                "fingerprint bits",
                "between quotient + 1 and quotient + 58",
                p,
            ));
        }
        Ok(())
    }

    /// An empty table as [`QuotientFilter::empty`], or `None` when its memory cannot be
    /// allocated (or its slots cannot be indexed on this machine): the constructors' path,
    /// whose sizes come from a caller's number.
    fn try_empty(hasher: ItemHasher, p: u32, q0: u32, q: u32, reserve: u32) -> Option<Self> {
        let n = usize::try_from(1u64.checked_shl(q)?).ok()?;
        // Ask for the whole table once, untouched, before either part is zeroed: a size the
        // system refuses is then refused at once, not after gigabytes of flags are written.
        let words = usize::try_from(Self::table_bytes(p, q) / 8).ok()?;
        Vec::<u64>::new().try_reserve_exact(words).ok()?;
        Some(QuotientFilter {
            hasher,
            p,
            q0,
            q,
            reserve,
            len: 0,
            meta: Meta::try_new(n)?,
            rems: PackedArray::try_new(p - q, n)?,
        })
    }

    pub(crate) fn empty(hasher: ItemHasher, p: u32, q0: u32, q: u32, reserve: u32) -> Self {
        let n = 1usize << q;
        QuotientFilter {
            hasher,
            p,
            q0,
            q,
            reserve,
            len: 0,
            meta: Meta::new(n),
            rems: PackedArray::new(p - q, n),
        }
    }

    /// The same filter hashing with `hasher` (only while empty: a filter's hash is fixed
    /// once it holds a key).
    pub fn with_hasher(mut self, hasher: ItemHasher) -> Self {
        if self.len == 0 {
            self.hasher = hasher;
        }
        self
    }

    /// The hash the filter's fingerprints come from.
    pub fn hasher(&self) -> ItemHasher {
        self.hasher
    }

    /// Keys held (a key inserted twice counts twice and needs two removes).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the filter holds no key.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slots in the table, `2^q`.
    pub fn slots(&self) -> u64 {
        1 << self.q
    }

    /// Keys held over slots.
    pub fn load(&self) -> f64 {
        self.len as f64 / self.slots() as f64
    }

    /// Fingerprint bits p (fixed for life; includes the reserve).
    pub fn fingerprint_bits(&self) -> u32 {
        self.p
    }

    /// Quotient bits q now.
    pub fn quotient_bits(&self) -> u32 {
        self.q
    }

    /// Quotient bits at build.
    pub fn initial_quotient_bits(&self) -> u32 {
        self.q0
    }

    /// Remainder bits stored per slot now, `p − q`.
    pub fn remainder_bits(&self) -> u32 {
        self.p - self.q
    }

    /// The reserve the filter was built with.
    pub fn reserve(&self) -> u32 {
        self.reserve
    }

    /// The table's life, `2^(p − q)` at build: the growth over the initial table the
    /// fingerprint can pay for before its quotient reaches p.
    pub fn life(&self) -> u64 {
        1u64 << (self.p - self.q0).min(63)
    }

    /// Doublings still possible: each takes one remainder bit and the last remainder bit
    /// cannot be given, so `p − q − 1`.
    pub fn remaining_doublings(&self) -> u32 {
        self.p - self.q - 1
    }

    /// The most keys this filter will ever hold: it refuses the key after these, at the
    /// doubling that would take q to p. `⌈λ·2^(p−1)⌉ − 1`.
    pub fn max_keys(&self) -> u64 {
        grow_at(self.p - 1) - 1
    }

    /// The expected false-positive rate now: `1 − (1 − 2^−p)^n` for `n` keys held, the
    /// chance that an absent item's p-bit fingerprint equals one of `n` stored uniform
    /// fingerprints (about `n / 2^p`: it doubles with every doubling of the keys).
    pub fn fpr(&self) -> f64 {
        collision_rate(self.p, self.len)
    }

    /// Bits held by the table: slots × (remainder + 3 metadata bits).
    pub fn bits(&self) -> u64 {
        self.slots() * (self.remainder_bits() as u64 + 3)
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        (1usize << self.q) - 1
    }

    #[inline(always)]
    fn split(&self, hash: u64) -> (usize, u64) {
        let fp = if self.p == 64 {
            hash
        } else {
            hash >> (64 - self.p)
        };
        let r = self.p - self.q;
        ((fp >> r) as usize, fp & ((1u64 << r) - 1))
    }

    #[inline(always)]
    fn in_use(&self, i: usize) -> bool {
        self.meta.in_use(i)
    }

    /// Inserts an item. Errors only when the table is full and cannot double again.
    pub fn insert(&mut self, item: &[u8]) -> Result<(), Exhausted> {
        self.insert_hash(self.hasher.hash(item))
    }

    /// Inserts an item given by its 64-bit hash (from [`QuotientFilter::hasher`]).
    pub fn insert_hash(&mut self, hash: u64) -> Result<(), Exhausted> {
        if self.len + 1 >= grow_at(self.q) {
            if self.p - self.q <= 1 {
                return Err(Exhausted {
                    keys: self.len,
                    slots: self.slots(),
                    fingerprint_bits: self.p,
                    quotient_bits: self.q,
                });
            }
            self.double();
        }
        let (fq, fr) = self.split(hash);
        self.insert_fp(fq, fr);
        self.len += 1;
        #[cfg(any(test, fuzzing))]
        self.check_invariants();
        Ok(())
    }

    /// Whether the item may have been inserted: never false for an item inserted and not
    /// removed; true for an absent item with probability [`QuotientFilter::fpr`].
    pub fn contains(&self, item: &[u8]) -> bool {
        self.contains_hash(self.hasher.hash(item))
    }

    /// [`QuotientFilter::contains`] for an item given by its hash.
    #[inline(always)]
    pub fn contains_hash(&self, hash: u64) -> bool {
        let (fq, fr) = self.split(hash);
        if !self.meta.get(OCC, fq) {
            return false;
        }
        let mask = self.mask();
        let mut s = self.run_start(fq);
        loop {
            let r = self.rems.get(s);
            if r == fr {
                return true;
            }
            if r > fr {
                return false;
            }
            s = (s + 1) & mask;
            if !self.meta.get(CONT, s) {
                return false;
            }
        }
    }

    /// The membership answer as an [`Estimate`]: `0` is guaranteed (no false negatives);
    /// `1` holds with confidence `1 − fpr` (it is wrong only for an absent item whose
    /// fingerprint collides).
    pub fn query(&self, item: &[u8]) -> Estimate {
        membership_estimate(self.contains(item), self.fpr(), Method::QuotientFilter)
    }

    /// Removes one copy of an item's fingerprint; false if none was stored. Remove only
    /// items you inserted: removing an absent item whose fingerprint collides with a stored
    /// one deletes that one and makes it a false negative.
    pub fn remove(&mut self, item: &[u8]) -> bool {
        self.remove_hash(self.hasher.hash(item))
    }

    /// [`QuotientFilter::remove`] for an item given by its hash.
    pub fn remove_hash(&mut self, hash: u64) -> bool {
        let (fq, fr) = self.split(hash);
        let removed = self.remove_fp(fq, fr);
        if removed {
            self.len -= 1;
        }
        #[cfg(any(test, fuzzing))]
        self.check_invariants();
        removed
    }

    /// The slot where quotient `fq`'s run starts (or would start). `fq` must be in use and
    /// marked occupied.
    ///
    /// Word at a time: the cluster starts at the last unshifted slot at or before `fq`; if
    /// `k` quotients in `[start, fq]` are occupied, `fq`'s run starts where the `k − 1` runs
    /// before it end, which is the `k`-th slot from the cluster start with no continuation
    /// bit (run heads, then the empty slot that ends the cluster). A cluster that wraps past
    /// the end of the table takes the slot-by-slot walk.
    #[inline(always)]
    fn run_start(&self, fq: usize) -> usize {
        // An unshifted home slot starts a cluster, and so its own run.
        if !self.meta.get(SHIFT, fq) {
            return fq;
        }
        let fast = self.meta.prev_clear(SHIFT, fq).and_then(|b| {
            let k = self.meta.count_ones(OCC, b, fq);
            self.meta.select_clear(CONT, b, k, 1usize << self.q)
        });
        let s = match fast {
            Some(s) => s,
            None => self.run_start_walk(fq),
        };
        #[cfg(test)]
        debug_assert_eq!(s, self.run_start_walk(fq));
        s
    }

    /// [`QuotientFilter::run_start`] slot by slot, wrapping around the table.
    fn run_start_walk(&self, fq: usize) -> usize {
        let mask = self.mask();
        let mut b = fq;
        while self.meta.get(SHIFT, b) {
            b = b.wrapping_sub(1) & mask;
        }
        let mut s = b;
        while b != fq {
            loop {
                s = (s + 1) & mask;
                if !self.meta.get(CONT, s) {
                    break;
                }
            }
            loop {
                b = (b + 1) & mask;
                if self.meta.get(OCC, b) {
                    break;
                }
            }
        }
        s
    }

    #[inline(always)]
    fn write(&mut self, i: usize, rem: u64, cont: bool, shifted: bool) {
        self.rems.set(i, rem);
        self.meta.set(CONT, i, cont);
        self.meta.set(SHIFT, i, shifted);
    }

    fn insert_fp(&mut self, fq: usize, fr: u64) {
        if !self.in_use(fq) {
            self.rems.set(fq, fr);
            self.meta.set(OCC, fq, true);
            return;
        }
        let mask = self.mask();
        let had_run = self.meta.get(OCC, fq);
        self.meta.set(OCC, fq, true);
        let start = self.run_start(fq);
        let mut s = start;
        let mut cont = false;
        let mut head_pushed = false;
        if had_run {
            // Runs are kept sorted: insert before the first larger remainder.
            loop {
                if self.rems.get(s) > fr {
                    break;
                }
                s = (s + 1) & mask;
                if !self.meta.get(CONT, s) {
                    break;
                }
            }
            if s == start {
                head_pushed = true;
            } else {
                cont = true;
            }
        }
        // Shift everything from s to the next empty slot one place right.
        let (mut rem, mut c, mut sh) = (fr, cont, s != fq);
        let mut i = s;
        let mut first = true;
        loop {
            let was_used = self.in_use(i);
            let old_rem = self.rems.get(i);
            let old_cont = self.meta.get(CONT, i);
            self.write(i, rem, c, sh);
            if !was_used {
                break;
            }
            rem = old_rem;
            c = old_cont || (first && head_pushed);
            sh = true;
            first = false;
            i = (i + 1) & mask;
        }
    }

    fn remove_fp(&mut self, fq: usize, fr: u64) -> bool {
        if !self.meta.get(OCC, fq) {
            return false;
        }
        let mask = self.mask();
        let start = self.run_start(fq);
        let mut d = start;
        loop {
            let r = self.rems.get(d);
            if r == fr {
                break;
            }
            if r > fr {
                return false;
            }
            d = (d + 1) & mask;
            if !self.meta.get(CONT, d) {
                return false;
            }
        }
        let head_removed = d == start;
        if head_removed && !self.meta.get(CONT, (d + 1) & mask) {
            self.meta.set(OCC, fq, false);
        }
        // Shift the rest of the cluster one place left, re-deriving each moved run head's
        // shifted bit from its quotient (tracked through the occupied bits in order).
        let mut i = d;
        let mut cur_q = fq;
        let mut first = true;
        loop {
            let n = (i + 1) & mask;
            if !self.meta.get(SHIFT, n) {
                self.write(i, 0, false, false);
                break;
            }
            let rem = self.rems.get(n);
            let (c, sh) = if self.meta.get(CONT, n) {
                if first && head_removed {
                    (false, i != fq)
                } else {
                    (true, true)
                }
            } else {
                loop {
                    cur_q = (cur_q + 1) & mask;
                    if self.meta.get(OCC, cur_q) {
                        break;
                    }
                }
                (false, i != cur_q)
            };
            self.write(i, rem, c, sh);
            first = false;
            i = n;
        }
        true
    }

    /// The stored fingerprints as (quotient, remainder), in circular quotient order
    /// starting after the first empty slot, sorted within each run.
    pub(crate) fn for_each_fingerprint(&self, mut f: impl FnMut(usize, u64)) {
        let n = 1usize << self.q;
        let mask = self.mask();
        let Some(e) = (0..n).find(|&i| !self.in_use(i)) else {
            return;
        };
        let mut cur_q = e;
        for j in 1..n {
            let i = (e + j) & mask;
            if !self.in_use(i) {
                continue;
            }
            if !self.meta.get(CONT, i) {
                if !self.meta.get(SHIFT, i) {
                    cur_q = i;
                } else {
                    loop {
                        cur_q = (cur_q + 1) & mask;
                        if self.meta.get(OCC, cur_q) {
                            break;
                        }
                    }
                }
            }
            f(cur_q, self.rems.get(i));
        }
    }

    /// Doubles the table: every remainder gives its top bit to the quotient. The new slot
    /// array is written from the old one by walking its runs in order — same fingerprints,
    /// no keys needed.
    fn double(&mut self) {
        debug_assert!(self.p - self.q >= 2);
        let old_r = self.p - self.q;
        let new_q = self.q + 1;
        let mut next = QuotientFilter::empty(self.hasher, self.p, self.q0, new_q, self.reserve);
        let mut app = Appender::default();
        let low = (1u64 << (old_r - 1)) - 1;
        self.for_each_fingerprint(|oq, rem| {
            let nq = (oq << 1) | (rem >> (old_r - 1)) as usize;
            app.push(&mut next, nq, rem & low);
        });
        next.len = self.len;
        *self = next;
    }

    /// Checks every structural invariant of the table without panicking: metadata bits
    /// consistent with runs and clusters, runs sorted, an empty slot left, the key count.
    pub(crate) fn validate(&self) -> Result<(), &'static str> {
        let n = 1usize << self.q;
        let mask = self.mask();
        if self.len >= grow_at(self.q) {
            return Err("more keys than the table's load allows");
        }
        let Some(e) = (0..n).find(|&i| !self.in_use(i)) else {
            return Err("no empty slot");
        };
        let mut pending = std::collections::VecDeque::new();
        let mut used = 0u64;
        let mut prev_in_use = false;
        let mut prev_rem = 0u64;
        for j in 1..=n {
            let lin = e + j;
            let i = lin & mask;
            let occ = self.meta.get(OCC, i);
            let cont = self.meta.get(CONT, i);
            let sh = self.meta.get(SHIFT, i);
            if occ {
                pending.push_back(lin);
            }
            if !(occ || sh) {
                if cont || self.rems.get(i) != 0 {
                    return Err("an empty slot with a continuation bit or a remainder");
                }
                if !pending.is_empty() {
                    return Err("an occupied quotient whose run never starts");
                }
                prev_in_use = false;
                continue;
            }
            used += 1;
            let rem = self.rems.get(i);
            if cont {
                if !sh || !prev_in_use {
                    return Err("a continuation that is not shifted or follows an empty slot");
                }
                if rem < prev_rem {
                    return Err("a run out of order");
                }
            } else {
                let Some(home) = pending.pop_front() else {
                    return Err("a run start with no occupied quotient");
                };
                if sh != (home != lin) {
                    return Err("a run start whose shifted bit is wrong");
                }
                if sh && !prev_in_use {
                    return Err("a shifted slot after an empty slot");
                }
            }
            prev_in_use = true;
            prev_rem = rem;
        }
        if used != self.len {
            return Err("the key count differs from the slots in use");
        }
        Ok(())
    }

    /// Panics if an internal invariant is broken (tests and fuzzing only).
    #[cfg(any(test, fuzzing))]
    pub(crate) fn check_invariants(&self) {
        if let Err(e) = self.validate() {
            panic!("quotient filter invariant broken: {e}");
        }
    }
}

/// Writes fingerprints into an empty table in (circularly) sorted quotient order: each goes
/// to its quotient or just after the previous one.
#[derive(Default)]
struct Appender {
    start: Option<usize>,
    last: Option<(usize, usize)>,
}

impl Appender {
    fn push(&mut self, t: &mut QuotientFilter, q: usize, rem: u64) {
        let n = 1usize << t.q;
        let start = *self.start.get_or_insert(q);
        let lq = start + ((q + n - start) & (n - 1));
        let (pos, cont) = match self.last {
            Some((llq, lpos)) => (lq.max(lpos + 1), llq == lq),
            None => (lq, false),
        };
        let slot = pos & (n - 1);
        t.meta.set(OCC, q, true);
        t.write(slot, rem, cont, pos != lq);
        self.last = Some((lq, pos));
    }
}

/// The membership estimate: absent is guaranteed, present is probabilistic.
pub(crate) fn membership_estimate(present: bool, fpr: f64, method: Method) -> Estimate {
    if present {
        Estimate::probabilistic(1.0, 1.0, 1.0, 1.0 - fpr, method)
    } else {
        Estimate::guaranteed(0.0, 0.0, 0.0, method)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u64),
        Remove(u64),
        Lookup(u64),
    }

    /// Keys from a small universe so that removes and re-inserts hit; hashes are forced into
    /// few quotients by `skew` so that clusters are long and wrap.
    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u64..300).prop_map(Op::Insert),
            2 => (0u64..300).prop_map(Op::Remove),
            1 => (0u64..300).prop_map(Op::Lookup),
        ]
    }

    fn hash_of(key: u64, skew: bool) -> u64 {
        let h = ItemHasher::default().hash_u64(key);
        // Skewed: the top 3 bits forced to 1 crowd every key into the last eighth of the
        // table, which makes clusters wrap past the end.
        if skew {
            h | (7 << 61)
        } else {
            h
        }
    }

    proptest! {
        // Every operation runs the full invariant check (cfg(test)), so these cases also
        // check the slot layout after each insert, remove and doubling.
        #[test]
        fn no_false_negative_against_a_multiset(
            ops in proptest::collection::vec(op(), 1..400),
            skew in any::<bool>(),
            reserve in 0u32..3,
        ) {
            let mut f = QuotientFilter::with_reserve(4, 0.05, reserve).unwrap();
            let mut model: HashMap<u64, u64> = HashMap::new();
            for op in ops {
                match op {
                    Op::Insert(k) => match f.insert_hash(hash_of(k, skew)) {
                        Ok(()) => *model.entry(k).or_default() += 1,
                        Err(e) => {
                            prop_assert_eq!(e.keys, f.len());
                            prop_assert_eq!(f.remaining_doublings(), 0);
                        }
                    },
                    Op::Remove(k) => {
                        // Remove only what was inserted (the filter's contract).
                        if let Some(c) = model.get_mut(&k) {
                            prop_assert!(f.remove_hash(hash_of(k, skew)));
                            *c -= 1;
                            if *c == 0 {
                                model.remove(&k);
                            }
                        }
                    }
                    Op::Lookup(k) => {
                        if model.contains_key(&k) {
                            prop_assert!(f.contains_hash(hash_of(k, skew)));
                        }
                    }
                }
                prop_assert_eq!(f.len(), model.values().sum::<u64>());
                for &k in model.keys() {
                    prop_assert!(f.contains_hash(hash_of(k, skew)), "false negative for {}", k);
                }
            }
        }
    }

    #[test]
    fn table_bytes_match_the_allocated_table() {
        for (p, q) in [(14, 8), (20, 12), (9, 1), (64, 20)] {
            let f = QuotientFilter::with_bits(p, q).unwrap();
            let flag_words: usize = (0..3).map(|i| f.meta.field_words(i).count()).sum();
            let words = flag_words + f.rems.words().len();
            assert_eq!(
                QuotientFilter::table_bytes(p, q),
                8 * words as u64,
                "p {p} q {q}"
            );
        }
        // The documented maximum, 2^38 keys at 1%: 2^39 slots of 6 + 3 bits.
        assert_eq!(
            QuotientFilter::table_bytes_for(1 << 38, 0.01, 0).unwrap(),
            618_475_290_632
        );
    }

    /// Memory and swap of this machine, and whether its kernel refuses an allocation larger
    /// than them (Linux's heuristic overcommit, mode 0): only then is it safe to ask for a
    /// table larger than the machine and expect a refusal rather than a kill on first touch.
    fn refuses_oversized_allocations() -> bool {
        let mode = std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap_or_default();
        let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let kib = |key: &str| -> Option<u64> {
            let line = info.lines().find(|l| l.starts_with(key))?;
            line[key.len()..]
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()
        };
        let (Some(mem), Some(swap)) = (kib("MemTotal:"), kib("SwapTotal:")) else {
            return false;
        };
        // The smaller of the two tables at the maximum is 206 GB: far above this machine.
        mode.trim() == "0" && (mem + swap) * 1024 < 100 << 30
    }

    #[test]
    fn a_table_no_machine_has_is_refused_with_its_size_not_aborted() {
        if !refuses_oversized_allocations() {
            eprintln!("skipped: this kernel may overcommit a 618 GB table");
            return;
        }
        let e = QuotientFilter::new(1 << 38, 0.01).unwrap_err();
        assert_eq!(e.name, "capacity");
        assert_eq!(e.needed_bytes, Some(618_475_290_632));
        assert!(e.to_string().contains("618475290632 bytes"), "{e}");
        let e = QuotientFilter::with_bits(64, 40).unwrap_err();
        assert_eq!(e.needed_bytes, Some(QuotientFilter::table_bytes(64, 40)));
    }

    #[test]
    fn sizing_integers() {
        assert_eq!(quotient_bits_for(2_000), 12);
        assert_eq!(quotient_bits_for(3), 2);
        assert_eq!(quotient_bits_for(4), 3);
        assert_eq!(fingerprint_bits_for(2_000, 0.01), 18);
        assert_eq!(fingerprint_bits_for(1024, 1.0 / 1024.0), 20);
        assert_eq!(grow_at(17), 98_304);
        assert_eq!(grow_at(1), 2);
    }

    #[test]
    fn a_small_table_survives_collisions_wraps_and_removes() {
        // 16 slots, 4-bit remainders: heavy collisions, clusters wrapping past the end.
        let mut f = QuotientFilter::with_bits(8, 4).unwrap();
        let mut held = Vec::new();
        for h in [
            u64::MAX,
            u64::MAX - 1,
            0xF0 << 56,
            0xFF << 56,
            0,
            1 << 56,
            0xF1 << 56,
        ] {
            f.insert_hash(h).unwrap();
            held.push(h);
            for &k in &held {
                assert!(f.contains_hash(k));
            }
        }
        for (i, &h) in held.clone().iter().enumerate() {
            assert!(f.remove_hash(h), "remove {i}");
            for &k in &held[i + 1..] {
                assert!(f.contains_hash(k));
            }
        }
        assert!(f.is_empty());
    }
}
