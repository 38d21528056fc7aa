//! [`Hll`]: the HyperLogLog sketch, exact → sparse → dense.

use core::fmt;

use super::martingale::Martingale;
use super::pfcount::{self, REDIS_PRECISION};
use super::registers::{
    bracket, ertl_from_histogram, fold, histogram, index_and_rank, max_rank, z_score,
    DEFAULT_CONFIDENCE, ERTL_RSE, MARTINGALE_RSE, MAX_PRECISION, MIN_PRECISION, Z_95,
};
use super::sets::{capacity_for, ExactSet, SparseMap, SPARSE_PRECISION};
use crate::error::{MergeError, ParamError};
use crate::estimate::{Estimate, Method};
use crate::hash::ItemHasher;

/// Which form a sketch currently holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Representation {
    /// The set of item hashes: counts exactly.
    Exact,
    /// (index, rank) pairs at the sparse precision (2^25 registers): near-exact.
    Sparse,
    /// `2^p` registers, one byte each.
    Dense,
}

impl Representation {
    /// A lower-case name for messages and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Representation::Exact => "exact",
            Representation::Sparse => "sparse",
            Representation::Dense => "dense",
        }
    }
}

impl fmt::Display for Representation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Repr {
    Exact(ExactSet),
    Sparse(SparseMap),
    Dense(Vec<u8>),
}

/// 2^(64 − r) for every rank r in 0..=64: a table, as a variable 128-bit shift is branchy.
const WEIGHTS: [u128; 65] = {
    let mut w = [0u128; 65];
    let mut r = 0;
    while r < 65 {
        w[r] = 1u128 << (64 - r);
        r += 1;
    }
    w
};

#[inline]
fn weight(rank: u8) -> u128 {
    WEIGHTS[rank as usize]
}

/// The scale of the martingale's sum, Σ 2^(64 − r): `P(change) = sum / (m·2^64)`.
const MARTINGALE_SCALE: f64 = 18_446_744_073_709_551_616.0;

/// A HyperLogLog sketch of precision `p` (4..=18): `2^p` registers once dense.
///
/// See the [module documentation](super) for the theory. Inserting is idempotent, merging is
/// the register-wise maximum, and every answer is an [`Estimate`].
///
/// ```
/// use tidemark::cardinality::{Hll, Representation};
/// use tidemark::Method;
///
/// let mut h = Hll::new(12).unwrap();
/// for i in 0..100u64 {
///     h.insert_u64(i);
///     h.insert_u64(i); // twice changes nothing
/// }
/// assert_eq!(h.representation(), Representation::Exact);
/// assert_eq!(h.estimate().value, 100.0);
///
/// for i in 0..100_000u64 {
///     h.insert_u64(i);
/// }
/// assert_eq!(h.representation(), Representation::Dense);
/// let e = h.estimate();
/// assert_eq!(e.method, Method::HllMartingale);
/// assert!(e.contains(100_000.0) || (e.value - 100_000.0).abs() < 0.06 * 100_000.0);
/// ```
#[derive(Clone, Debug)]
pub struct Hll {
    pub(crate) p: u8,
    pub(crate) hasher: ItemHasher,
    pub(crate) confidence: f64,
    z: f64,
    pub(crate) redis: bool,
    /// Redis's cached cardinality, when valid: PFCOUNT answers it without recounting.
    pub(crate) cache: Option<u64>,
    pub(crate) repr: Repr,
    pub(crate) martingale: Option<Martingale>,
}

impl Hll {
    /// A sketch of precision `p` hashing with xxh3 ([`ItemHasher::default`]).
    pub fn new(p: u8) -> Result<Hll, ParamError> {
        Hll::with_hasher(p, ItemHasher::default())
    }

    /// A sketch of precision `p` hashing with `hasher`.
    pub fn with_hasher(p: u8, hasher: ItemHasher) -> Result<Hll, ParamError> {
        if !(MIN_PRECISION..=MAX_PRECISION).contains(&p) {
            return Err(ParamError::new("precision", "in 4..=18", p));
        }
        let m = 1usize << p;
        // The first table holds 8 hashes in 128 bytes (fewer at tiny p): small keys never
        // grow, and the common ones skip the first few doublings.
        let repr = if 8 * 16 <= m {
            Repr::Exact(ExactSet::with_capacity(16))
        } else if 8 * 4 <= m {
            Repr::Exact(ExactSet::with_capacity(4))
        } else {
            Repr::Sparse(SparseMap::with_capacity(4))
        };
        let mut h = Hll {
            p,
            hasher,
            confidence: DEFAULT_CONFIDENCE,
            z: Z_95,
            redis: false,
            cache: None,
            repr,
            martingale: None,
        };
        h.martingale = Some(Martingale {
            value: 0.0,
            sum: martingale_sum(&h.repr),
        });
        Ok(h)
    }

    /// A sketch in Redis mode: MurmurHash64A with Redis's seed, `p = 14`, counted as PFCOUNT
    /// counts, and exportable as a Redis `HYLL` value.
    pub fn redis() -> Hll {
        let mut h = Hll::with_hasher(REDIS_PRECISION, ItemHasher::redis())
            .expect("14 is a valid precision");
        h.redis = true;
        h
    }

    /// The same sketch answering with brackets at `confidence` (in (0, 1); default 0.95).
    pub fn with_confidence(mut self, confidence: f64) -> Result<Hll, ParamError> {
        self.z = z_score(confidence)?;
        self.confidence = confidence;
        Ok(self)
    }

    /// The precision `p`.
    pub fn precision(&self) -> u8 {
        self.p
    }

    /// The hash and seed items are hashed with.
    pub fn hasher(&self) -> ItemHasher {
        self.hasher
    }

    /// The confidence of the brackets.
    pub fn confidence(&self) -> f64 {
        self.confidence
    }

    /// Whether the sketch is in Redis mode (counts as PFCOUNT does).
    pub fn is_redis(&self) -> bool {
        self.redis
    }

    /// Whether the martingale estimate is available: the sketch was fed by one stream
    /// and never merged (nor imported from a form that does not carry it).
    pub fn has_martingale(&self) -> bool {
        self.martingale.is_some()
    }

    /// The current representation.
    pub fn representation(&self) -> Representation {
        match self.repr {
            Repr::Exact(_) => Representation::Exact,
            Repr::Sparse(_) => Representation::Sparse,
            Repr::Dense(_) => Representation::Dense,
        }
    }

    /// Bytes held: the struct itself plus its heap (a table's full capacity, not just its
    /// entries).
    pub fn bytes(&self) -> usize {
        core::mem::size_of::<Hll>()
            + match &self.repr {
                Repr::Exact(s) => s.heap_bytes(),
                Repr::Sparse(s) => s.heap_bytes(),
                Repr::Dense(r) => r.len(),
            }
    }

    /// Whether nothing was ever inserted or merged in.
    pub fn is_empty(&self) -> bool {
        match &self.repr {
            Repr::Exact(s) => s.len() == 0,
            Repr::Sparse(s) => s.len() == 0,
            Repr::Dense(r) => r.iter().all(|&x| x == 0),
        }
    }

    /// Inserts an item's bytes.
    #[inline]
    pub fn insert(&mut self, item: &[u8]) {
        let h = self.hasher.hash(item);
        self.insert_hash(h);
    }

    /// Inserts a `u64` item (hashed as its 8 little-endian bytes).
    #[inline]
    pub fn insert_u64(&mut self, item: u64) {
        let h = self.hasher.hash_u64(item);
        self.insert_hash(h);
    }

    /// Inserts an item by its hash, as computed by [`Hll::hasher`]. Hashing with another
    /// function gives a sketch that looks right and counts garbage.
    #[inline]
    pub fn insert_hash(&mut self, hash: u64) {
        if let Repr::Dense(regs) = &mut self.repr {
            let (i, r) = index_and_rank(hash, self.p);
            let old = regs[i];
            if r > old {
                regs[i] = r;
                self.cache = None;
                if let Some(mart) = &mut self.martingale {
                    mart.value +=
                        Martingale::increment((1u64 << self.p) as f64, MARTINGALE_SCALE, mart.sum);
                    mart.sum = mart.sum - weight(old) + weight(r);
                }
            }
        } else {
            self.insert_small(hash);
        }
    }

    /// Whether inserting `hash` would change the sketch: false for a hash it holds (exact
    /// form) or whose rank its register already has. Read-only, so a caller can ask it of
    /// many sketches in a row, each read independent of the others (the pipeline asks it
    /// ahead of a batch of inserts, so that their cache misses overlap).
    ///
    /// ```
    /// let mut h = tidemark::cardinality::Hll::new(10).unwrap();
    /// let x = h.hasher().hash(b"a");
    /// assert!(h.would_change(x));
    /// h.insert_hash(x);
    /// assert!(!h.would_change(x));
    /// ```
    #[inline]
    pub fn would_change(&self, hash: u64) -> bool {
        match &self.repr {
            Repr::Exact(set) => !set.contains(hash),
            Repr::Sparse(map) => {
                let (i, r) = index_and_rank(hash, SPARSE_PRECISION);
                map.get(i as u32) < r
            }
            Repr::Dense(regs) => {
                let (i, r) = index_and_rank(hash, self.p);
                regs[i] < r
            }
        }
    }

    #[inline(never)]
    fn insert_small(&mut self, hash: u64) {
        loop {
            match &mut self.repr {
                Repr::Exact(set) => {
                    if set.full() {
                        if set.contains(hash) {
                            return;
                        }
                        self.grow();
                        continue;
                    }
                    if set.insert(hash) {
                        self.cache = None;
                        if let Some(mart) = &mut self.martingale {
                            mart.value += 1.0;
                        }
                    }
                    return;
                }
                Repr::Sparse(map) => {
                    let (i, r) = index_and_rank(hash, SPARSE_PRECISION);
                    // A full table grows only for a new entry: an entry whose rank rises is
                    // updated in place, so the form follows the entries held, not the order
                    // their ranks came in (a union is then the same sketch however merged).
                    if map.full() {
                        let old = map.get(i as u32);
                        if old >= r {
                            return;
                        }
                        if old == 0 {
                            self.grow();
                            continue;
                        }
                    }
                    if let Some(old) = map.update(i as u32, r) {
                        self.cache = None;
                        if let Some(mart) = &mut self.martingale {
                            mart.value += Martingale::increment(
                                (1u64 << SPARSE_PRECISION) as f64,
                                MARTINGALE_SCALE,
                                mart.sum,
                            );
                            mart.sum = mart.sum - weight(old) + weight(r);
                        }
                    }
                    return;
                }
                Repr::Dense(_) => {
                    self.insert_hash(hash);
                    return;
                }
            }
        }
    }

    /// Raises sparse register `index` (at the sparse precision) to `rank`, as a merge does.
    fn insert_sparse_entry(&mut self, index: u32, rank: u8) {
        loop {
            match &mut self.repr {
                Repr::Exact(_) => {
                    self.convert_exact();
                    continue;
                }
                Repr::Sparse(map) => {
                    // As in `insert_small`: a full table grows only for a new entry.
                    if map.full() {
                        let old = map.get(index);
                        if old >= rank {
                            return;
                        }
                        if old == 0 {
                            self.grow();
                            continue;
                        }
                    }
                    if map.update(index, rank).is_some() {
                        self.cache = None;
                    }
                    return;
                }
                Repr::Dense(regs) => {
                    let (i, r) = fold(index as usize, rank, SPARSE_PRECISION, self.p);
                    if r > regs[i] {
                        regs[i] = r;
                        self.cache = None;
                    }
                    return;
                }
            }
        }
    }

    fn m(&self) -> usize {
        1usize << self.p
    }

    /// Grows the current table, or moves to the next representation when the grown table
    /// would hold more bytes than the dense registers.
    fn grow(&mut self) {
        let m = self.m();
        match &self.repr {
            Repr::Exact(set) => {
                // Quadruple while that still fits: half the rehashing of doubling, for a table
                // that is at most 4× larger than needed and never larger than the registers.
                if 8 * 4 * set.capacity() <= m {
                    self.repr = Repr::Exact(set.grown(4));
                } else if 8 * 2 * set.capacity() <= m {
                    self.repr = Repr::Exact(set.grown(2));
                } else {
                    self.convert_exact();
                }
            }
            Repr::Sparse(map) => {
                if 4 * 2 * map.capacity() <= m {
                    self.repr = Repr::Sparse(map.grown());
                } else {
                    self.convert_sparse();
                }
            }
            Repr::Dense(_) => {}
        }
    }

    /// Exact → sparse (or dense, when the sparse table would not be smaller than it).
    fn convert_exact(&mut self) {
        let Repr::Exact(set) = &self.repr else {
            return;
        };
        let cap = capacity_for(set.len() + 1);
        if 4 * cap > self.m() {
            let regs = self.registers();
            self.repr = Repr::Dense(regs);
        } else {
            let mut map = SparseMap::with_capacity(cap);
            for h in set.iter() {
                let (i, r) = index_and_rank(h, SPARSE_PRECISION);
                map.update(i as u32, r);
            }
            self.repr = Repr::Sparse(map);
        }
        self.resync_martingale();
    }

    /// Sparse → dense.
    fn convert_sparse(&mut self) {
        let regs = self.registers();
        self.repr = Repr::Dense(regs);
        self.resync_martingale();
    }

    fn resync_martingale(&mut self) {
        Martingale::resync(&mut self.martingale, || martingale_sum(&self.repr));
    }

    /// The dense registers at precision `p` (one byte each, index and rank as
    /// [`super::registers::index_and_rank`] makes them), whatever the representation.
    pub fn registers(&self) -> Vec<u8> {
        let mut regs = vec![0u8; self.m()];
        match &self.repr {
            Repr::Exact(set) => {
                for h in set.iter() {
                    let (i, r) = index_and_rank(h, self.p);
                    regs[i] = regs[i].max(r);
                }
            }
            Repr::Sparse(map) => {
                for (i, r) in map.iter() {
                    let (i, r) = fold(i as usize, r, SPARSE_PRECISION, self.p);
                    regs[i] = regs[i].max(r);
                }
            }
            Repr::Dense(r) => regs.copy_from_slice(r),
        }
        regs
    }

    /// The register histogram and precision Ertl's estimator reads: the sparse precision for
    /// the exact and sparse forms, `p` for dense.
    fn ertl_histogram(&self) -> ([u32; 65], u8) {
        match &self.repr {
            Repr::Dense(regs) => (histogram(regs), self.p),
            Repr::Sparse(map) => (sparse_histogram(map.iter(), map.len()), SPARSE_PRECISION),
            Repr::Exact(set) => {
                let mut map = SparseMap::with_capacity(capacity_for(set.len()));
                for h in set.iter() {
                    let (i, r) = index_and_rank(h, SPARSE_PRECISION);
                    map.update(i as u32, r);
                }
                (sparse_histogram(map.iter(), map.len()), SPARSE_PRECISION)
            }
        }
    }

    /// The answer: exact while the exact form holds; in Redis mode, PFCOUNT's count; else the
    /// martingale estimate when available, Ertl's improved estimate otherwise.
    pub fn estimate(&self) -> Estimate {
        if self.redis {
            return self.estimate_redis();
        }
        if let Repr::Exact(set) = &self.repr {
            return Estimate::exact(set.len() as f64);
        }
        self.estimate_martingale()
            .unwrap_or_else(|| self.estimate_ertl())
    }

    /// Ertl's improved estimate (any sketch), at the sparse precision for the exact and sparse
    /// forms and at `p` for dense, with a ± z·σ bracket.
    pub fn estimate_ertl(&self) -> Estimate {
        let (h, p) = self.ertl_histogram();
        let value = ertl_from_histogram(&h, p);
        let rse = ERTL_RSE / ((1u64 << p) as f64).sqrt();
        bracket(value, rse, self.z, self.confidence, Method::HllErtl)
    }

    /// The martingale estimate, if the sketch was fed by one stream and never merged.
    pub fn estimate_martingale(&self) -> Option<Estimate> {
        let mart = self.martingale.as_ref()?;
        let p = match self.repr {
            Repr::Exact(_) => return Some(Estimate::exact(mart.value)),
            Repr::Sparse(_) => SPARSE_PRECISION,
            Repr::Dense(_) => self.p,
        };
        let rse = MARTINGALE_RSE / ((1u64 << p) as f64).sqrt();
        Some(bracket(
            mart.value,
            rse,
            self.z,
            self.confidence,
            Method::HllMartingale,
        ))
    }

    /// The count Redis's PFCOUNT gives for these registers (folded to `p = 14` registers if
    /// the sketch is not dense); a valid cached cardinality imported with a Redis value is
    /// answered as PFCOUNT answers it, without recounting. Only meaningful in Redis mode.
    pub fn pfcount(&self) -> u64 {
        if let Some(c) = self.cache {
            return c;
        }
        pfcount::pfcount_registers(&self.registers())
    }

    fn estimate_redis(&self) -> Estimate {
        let value = self.pfcount() as f64;
        let rse = ERTL_RSE / (self.m() as f64).sqrt();
        bracket(value, rse, self.z, self.confidence, Method::RedisPfcount)
    }

    /// Merges `other` in: afterwards this sketch is the sketch of the union (register-wise
    /// maximum). A larger precision folds down to the smaller one; different hashes or seeds
    /// are refused. The merged sketch answers with Ertl's estimator (the martingale holds only
    /// for one stream), unless `other` was empty.
    pub fn merge(&mut self, other: &Hll) -> Result<(), MergeError> {
        MergeError::check(self.hasher, other.hasher, &[])?;
        if other.p < self.p {
            // The fold re-expresses the same items at the smaller precision: the martingale's
            // running value stays an unbiased estimate of this stream, so only a Redis cache
            // goes.
            self.cache = None;
            self.fold_to(other.p);
        }
        if other.is_empty() {
            self.redis = self.redis && self.p == REDIS_PRECISION;
            return Ok(());
        }
        self.martingale = None;
        self.cache = None;
        self.redis = self.redis && other.redis && self.p == REDIS_PRECISION;
        match &other.repr {
            Repr::Exact(set) => {
                for h in set.iter() {
                    self.insert_hash(h);
                }
            }
            Repr::Sparse(map) => {
                for (i, r) in map.iter() {
                    self.insert_sparse_entry(i, r);
                }
            }
            Repr::Dense(theirs) => {
                if !matches!(self.repr, Repr::Dense(_)) {
                    let regs = self.registers();
                    self.repr = Repr::Dense(regs);
                }
                let (p, from) = (self.p, other.p);
                let Repr::Dense(ours) = &mut self.repr else {
                    unreachable!("made dense above");
                };
                if from == p {
                    for (a, &b) in ours.iter_mut().zip(theirs) {
                        *a = (*a).max(b);
                    }
                } else {
                    for (i, &r) in theirs.iter().enumerate() {
                        if r > 0 {
                            let (j, s) = fold(i, r, from, p);
                            ours[j] = ours[j].max(s);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Lowers the precision to `p` (≤ the current one), as a sketch of precision `p` fed the
    /// same items would be.
    fn fold_to(&mut self, p: u8) {
        debug_assert!(p <= self.p);
        let from = self.p;
        self.p = p;
        let m = self.m();
        match &self.repr {
            Repr::Exact(set) if 8 * set.capacity() > m => self.convert_exact(),
            Repr::Sparse(map) if 4 * map.capacity() > m => self.convert_sparse(),
            Repr::Dense(regs) => {
                let mut out = vec![0u8; m];
                for (i, &r) in regs.iter().enumerate() {
                    if r > 0 {
                        let (j, s) = fold(i, r, from, p);
                        out[j] = out[j].max(s);
                    }
                }
                self.repr = Repr::Dense(out);
            }
            _ => {}
        }
        self.resync_martingale();
        debug_assert!(self.registers().iter().all(|&r| r <= max_rank(p)));
    }

    /// Builds a sketch from its parts (decoders and Redis import); the parts were validated.
    pub(crate) fn from_parts(
        p: u8,
        hasher: ItemHasher,
        confidence: f64,
        redis: bool,
        cache: Option<u64>,
        repr: Repr,
        martingale_value: Option<f64>,
    ) -> Result<Hll, ParamError> {
        let z = z_score(confidence)?;
        let mut h = Hll {
            p,
            hasher,
            confidence,
            z,
            redis,
            cache,
            repr,
            martingale: None,
        };
        if let Some(value) = martingale_value {
            h.martingale = Some(Martingale {
                value,
                sum: martingale_sum(&h.repr),
            });
        }
        Ok(h)
    }

    /// The martingale's running value (for the encoder).
    pub(crate) fn martingale_value(&self) -> Option<f64> {
        self.martingale.as_ref().map(|h| h.value)
    }
}

/// Σ 2^(64 − r) over the registers of a representation (for the exact set, the change
/// probability is 1 and the sum is unused).
fn martingale_sum(repr: &Repr) -> u128 {
    match repr {
        Repr::Exact(_) => 0,
        Repr::Sparse(map) => {
            let zeros = (1u128 << SPARSE_PRECISION) - map.len() as u128;
            zeros * weight(0) + map.iter().map(|(_, r)| weight(r)).sum::<u128>()
        }
        Repr::Dense(regs) => histogram(regs)
            .iter()
            .enumerate()
            .map(|(r, &c)| c as u128 * weight(r as u8))
            .sum(),
    }
}

/// The histogram of a sparse map at the sparse precision.
fn sparse_histogram(entries: impl Iterator<Item = (u32, u8)>, len: usize) -> [u32; 65] {
    let mut h = [0u32; 65];
    h[0] = (1u32 << SPARSE_PRECISION) - len as u32;
    for (_, r) in entries {
        h[r as usize] += 1;
    }
    h
}

impl PartialEq for Hll {
    /// Equal parameters, mode, martingale state and contents (tables compared as sets, whatever
    /// their slot order).
    fn eq(&self, other: &Hll) -> bool {
        let same_repr = match (&self.repr, &other.repr) {
            (Repr::Exact(a), Repr::Exact(b)) => a == b,
            (Repr::Sparse(a), Repr::Sparse(b)) => a == b,
            (Repr::Dense(a), Repr::Dense(b)) => a == b,
            _ => false,
        };
        same_repr
            && self.p == other.p
            && self.hasher == other.hasher
            && self.confidence == other.confidence
            && self.redis == other.redis
            && self.cache == other.cache
            && self.martingale == other.martingale
    }
}
