//! [`ExaLogLog`]: distinct counts in about 43% fewer register bits than HyperLogLog at equal
//! error, and about 60% fewer bytes at rest.
//!
//! Reference: O. Ertl, *ExaLogLog: Space-Efficient and Practical Approximate Distinct
//! Counting up to the Exa-Scale*, EDBT 2025 (arXiv 2402.13726).
//!
//! # The rule
//!
//! An item's 64-bit hash gives a register index (its top `p` bits) and an **update value**
//! `k = z·2^t + s + 1`, where `s` is the hash's low `t` bits and `z` the number of trailing
//! zeros of the `w = 64 − p − t` bits between (at most `w`). `k` is geometric with base
//! `2^(2^−t)` instead of HyperLogLog's 2: `P(k) = 2^−min(t + 1 + ⌊(k−1)/2^t⌋, 64 − p)`.
//! Each of the `m = 2^p` registers keeps the largest value `u` it has seen **and whether each
//! of the `d` values below `u` was seen**, in `6 + t + d` bits (`u` needs `6 + t`). HyperLogLog
//! is `t = d = 0`; the recommended `(t, d) = (2, 20)` takes 28 bits a register and has the
//! smallest memory-variance product (MVP: bits × relative variance × m) of its family, 3.67
//! against HyperLogLog's 6.45 with the same estimator.
//!
//! Like HyperLogLog's maximum, the register is a function of the *set* of values seen (its
//! largest and the recent ones), so inserting twice changes nothing, and merging two sketches
//! register by register gives exactly the sketch of the union ([`ExaLogLog::merge`]).
//! Lowering `p` or `d` is exact too ([`ExaLogLog::reduce`]): the index bits dropped sit just
//! above the geometric bits, so they only lengthen runs of zeros that were already maximal.
//! Sketches of different `p` or `d` merge at the smaller of each; `t` must agree.
//!
//! # Estimators
//!
//! - **Maximum likelihood** (any sketch, merged or not): the register states give the
//!   log-likelihood `−α·λ + Σ_j β_j ln(1 − e^(−λ·2^−j))` of `λ = n/m` ([`estimator`] solves
//!   it), then the first-order bias is divided out. Relative standard error
//!   `√(ln b / ζ(2, 1 + x))/√m` with `b = 2^(2^−t)`, `x = b^−d/(b − 1)`: 0.362/√m at (2, 20).
//! - **Martingale** (a sketch fed by one stream, unmerged): each insert that changes the state
//!   adds `1/P(change)`, `P(change)` being the summed probability of the values that would
//!   still change some register, kept as an exact integer. Relative standard error
//!   `√(ln b·(1 + x)/2)/√m`: 0.318/√m at (2, 20).
//!
//! Brackets are `value ± z·σ·value` at the sketch's confidence (95% by default).
//!
//! # Representations
//!
//! A sketch starts **exact** — the set of item hashes, answered exactly — while that table
//! takes no more bytes than the registers would, then turns **dense**: `m` registers of 32
//! bits each in memory (one load and compare an insert). At rest the envelope
//! **entropy-codes** them (`coded.rs`: a range coder with models learned as it goes), about
//! 60% of their packed `6 + t + d` bits for (2, 20) once n is a few times m, since a register
//! carries about
//! 16.75 bits of information in its 28; decoding pays for that (about 0.3 ms at p = 10). A
//! sparse form like [`super::Hll`]'s would pay only between about `m/4` and `0.4·m` items at
//! 28-bit registers, so there is none.
//!
//! ```
//! use tidemark::cardinality::ExaLogLog;
//! use tidemark::Method;
//!
//! // p = 8, (t, d) = (2, 20): 896 bytes of packed registers (about 550 coded at rest),
//! // about 2.3% standard error.
//! let mut a = ExaLogLog::new(8).unwrap();
//! let mut b = ExaLogLog::new(8).unwrap();
//! for user in 0..40_000u64 {
//!     if user % 4 == 0 { b.insert_u64(user) } else { a.insert_u64(user) }
//! }
//! assert_eq!(a.estimate().method, Method::ExaLogLogMartingale);
//! a.merge(&b).unwrap();
//! let e = a.estimate();
//! assert_eq!(e.method, Method::ExaLogLogMl);
//! // Six standard errors (6 × 2.3%) cannot plausibly be exceeded.
//! assert!((e.value - 40_000.0).abs() < 0.14 * 40_000.0, "{}", e.value);
//! assert_eq!(a.serialized_register_bytes(), 896);
//! assert!(a.to_bytes().len() < 56 + 896 * 2 / 3);
//! ```

mod coded;
mod encoding;
pub mod estimator;
mod register;

use core::fmt;
use std::borrow::Cow;

pub(crate) use self::encoding::read_shape;
use self::estimator::{martingale_rse_constant, ml_bias_constant, ml_rse_constant, solve};
use self::register::{Shape, MAX_D, MAX_T};
use super::martingale::Martingale;
use super::registers::{bracket, z_score, DEFAULT_CONFIDENCE, MAX_PRECISION, MIN_PRECISION, Z_95};
use super::sets::{capacity_for, ExactSet};
use super::Representation;
use crate::error::{MergeError, ParamError};
use crate::estimate::{Estimate, Method};
use crate::hash::ItemHasher;

#[derive(Clone, Debug)]
pub(crate) enum Repr {
    Exact(ExactSet),
    Dense(Vec<u32>),
}

/// An ExaLogLog sketch: `2^p` registers of `6 + t + d` bits once dense.
///
/// See the [module documentation](self) for the theory; every answer is an [`Estimate`].
#[derive(Clone, Debug)]
pub struct ExaLogLog {
    shape: Shape,
    hasher: ItemHasher,
    confidence: f64,
    z: f64,
    pub(crate) repr: Repr,
    pub(crate) martingale: Option<Martingale>,
}

/// Why parameters `(t, d, p)` are refused.
fn check_params(t: u8, d: u8, p: u8) -> Result<Shape, ParamError> {
    if t > MAX_T {
        return Err(ParamError::new("t", "in 0..=3", t));
    }
    if d > MAX_D {
        return Err(ParamError::new("d", "in 0..=26", d));
    }
    if !(MIN_PRECISION..=MAX_PRECISION).contains(&p) {
        return Err(ParamError::new("precision", "in 4..=18", p));
    }
    if 6 + t as u32 + d as u32 > 32 {
        return Err(ParamError::new(
            "d",
            "at most 26 − t (registers of 32 bits)",
            d,
        ));
    }
    let shape = Shape::new(t, d, p);
    debug_assert_eq!(shape.register_bits(), 6 + t as u32 + d as u32);
    Ok(shape)
}

impl ExaLogLog {
    /// The recommended `t`: update values with base `2^(1/4)`.
    pub const DEFAULT_T: u8 = 2;
    /// The recommended `d`: 20 history bits, 28 bits a register, the smallest MVP (3.67).
    pub const DEFAULT_D: u8 = 20;

    /// The recommended `(t, d) = (2, 20)` at precision `p` (4..=18), hashing with xxh3.
    pub fn new(p: u8) -> Result<ExaLogLog, ParamError> {
        ExaLogLog::with_params(Self::DEFAULT_T, Self::DEFAULT_D, p)
    }

    /// Parameters `(t, d, p)`: `t` in 0..=3, `d` in `0..=26 − t` (registers of at most 32
    /// bits), `p` in 4..=18. The
    /// paper's configurations: (2, 20) for the smallest MVP, (2, 24) for 32-bit registers,
    /// (1, 9) for 16-bit ones.
    pub fn with_params(t: u8, d: u8, p: u8) -> Result<ExaLogLog, ParamError> {
        ExaLogLog::with_hasher(t, d, p, ItemHasher::default())
    }

    /// The same, hashing with `hasher`.
    pub fn with_hasher(t: u8, d: u8, p: u8, hasher: ItemHasher) -> Result<ExaLogLog, ParamError> {
        let shape = check_params(t, d, p)?;
        // 16 hashes (128 bytes) when that fits, so common small keys never grow; 4 always
        // fits (32 bytes ≤ 4·2^4).
        let first = if 8 * 16 <= 4 << p { 16 } else { 4 };
        Ok(ExaLogLog {
            shape,
            hasher,
            confidence: DEFAULT_CONFIDENCE,
            z: Z_95,
            repr: Repr::Exact(ExactSet::with_capacity(first)),
            martingale: Some(Martingale { value: 0.0, sum: 0 }),
        })
    }

    /// The same sketch answering with brackets at `confidence` (in (0, 1); default 0.95).
    pub fn with_confidence(mut self, confidence: f64) -> Result<ExaLogLog, ParamError> {
        self.z = z_score(confidence)?;
        self.confidence = confidence;
        Ok(self)
    }

    /// `t`: update values are geometric with base `2^(2^−t)`.
    pub fn t(&self) -> u8 {
        self.shape.t
    }

    /// `d`: the history bits a register keeps.
    pub fn d(&self) -> u8 {
        self.shape.d
    }

    /// The precision `p`: `2^p` registers.
    pub fn precision(&self) -> u8 {
        self.shape.p
    }

    /// The hash and seed items are hashed with.
    pub fn hasher(&self) -> ItemHasher {
        self.hasher
    }

    /// The confidence of the brackets.
    pub fn confidence(&self) -> f64 {
        self.confidence
    }

    /// The current representation: [`Representation::Exact`] or [`Representation::Dense`].
    pub fn representation(&self) -> Representation {
        match self.repr {
            Repr::Exact(_) => Representation::Exact,
            Repr::Dense(_) => Representation::Dense,
        }
    }

    /// Bits a register takes at rest: `6 + t + d`.
    pub fn register_bits(&self) -> u32 {
        self.shape.register_bits()
    }

    /// Bytes the dense registers take packed, `⌈m·(6 + t + d)/8⌉`: the paper's memory, to
    /// compare with other sketches' registers. At rest ([`ExaLogLog::to_bytes`]) they are
    /// entropy-coded whenever that is shorter, about 60% of this at (2, 20).
    pub fn serialized_register_bytes(&self) -> usize {
        self.shape.packed_bytes()
    }

    /// Bytes held: the struct and its heap (a table's whole capacity).
    pub fn bytes(&self) -> usize {
        core::mem::size_of::<ExaLogLog>()
            + match &self.repr {
                Repr::Exact(s) => s.heap_bytes(),
                Repr::Dense(r) => 4 * r.len(),
            }
    }

    /// Whether nothing was ever inserted or merged in.
    pub fn is_empty(&self) -> bool {
        match &self.repr {
            Repr::Exact(s) => s.len() == 0,
            Repr::Dense(r) => r.iter().all(|&x| x == 0),
        }
    }

    /// Whether the martingale estimate is available (one stream, never merged).
    pub fn has_martingale(&self) -> bool {
        self.martingale.is_some()
    }

    fn m(&self) -> usize {
        1usize << self.shape.p
    }

    /// Whether an exact table of `capacity` slots takes no more than the dense registers.
    fn exact_fits(&self, capacity: usize) -> bool {
        8 * capacity <= 4 * self.m()
    }

    /// Inserts an item's bytes.
    #[inline]
    pub fn insert(&mut self, item: &[u8]) {
        self.insert_hash(self.hasher.hash(item));
    }

    /// Inserts a `u64` item (hashed as its 8 little-endian bytes).
    #[inline]
    pub fn insert_u64(&mut self, item: u64) {
        self.insert_hash(self.hasher.hash_u64(item));
    }

    /// Inserts an item by its hash, as computed by [`ExaLogLog::hasher`].
    #[inline]
    pub fn insert_hash(&mut self, hash: u64) {
        let shape = self.shape;
        if let Repr::Dense(regs) = &mut self.repr {
            let (i, k) = shape.split(hash);
            let old = regs[i];
            let u = old >> shape.d;
            if k > u {
                self.change(i, old, shape.raise(old, k), k);
            } else {
                // The common case, a value at or below u: one OR with the value's history bit
                // (0 for u itself and below the window).
                let new = old | shape.window_bit(u, k);
                if new != old {
                    self.change(i, old, new, k);
                }
            }
        } else {
            self.insert_exact(hash);
        }
    }

    /// Whether inserting `hash` would change the sketch: false for a hash its exact form
    /// holds, or whose value its register already records. Read-only (see
    /// [`crate::cardinality::Hll::would_change`]).
    ///
    /// ```
    /// let mut e = tidemark::cardinality::ExaLogLog::new(10).unwrap();
    /// let x = e.hasher().hash(b"a");
    /// assert!(e.would_change(x));
    /// e.insert_hash(x);
    /// assert!(!e.would_change(x));
    /// ```
    #[inline]
    pub fn would_change(&self, hash: u64) -> bool {
        let shape = self.shape;
        match &self.repr {
            Repr::Exact(set) => !set.contains(hash),
            Repr::Dense(regs) => {
                let (i, k) = shape.split(hash);
                let old = regs[i];
                let u = old >> shape.d;
                k > u || old | shape.window_bit(u, k) != old
            }
        }
    }

    /// Register `i` goes from `old` to `new` on value `k`: stored, and the martingale counts
    /// the change. Out of line: a few percent of inserts come here, and keeping the
    /// martingale's arithmetic out of the insert loop keeps the loop's values in registers.
    #[inline(never)]
    fn change(&mut self, i: usize, old: u32, new: u32, k: u32) {
        let shape = self.shape;
        let Repr::Dense(regs) = &mut self.repr else {
            unreachable!("called by the dense insert");
        };
        regs[i] = new;
        if let Some(mart) = &mut self.martingale {
            mart.value += Martingale::increment((1usize << shape.p) as f64, TWO_63, mart.sum);
            mart.sum = if new >> shape.d == old >> shape.d {
                // Filling the window takes only this value's probability away.
                mart.sum - shape.weight(k) as u128
            } else {
                mart.sum - shape.change_weight(old) as u128 + shape.change_weight(new) as u128
            };
        }
    }

    #[inline(never)]
    fn insert_exact(&mut self, hash: u64) {
        let Repr::Exact(set) = &mut self.repr else {
            return self.insert_hash(hash);
        };
        if set.full() {
            if set.contains(hash) {
                return;
            }
            let grown = 2 * set.capacity();
            if self.exact_fits(grown) {
                if let Repr::Exact(set) = &mut self.repr {
                    *set = set.grown(2);
                }
            } else {
                self.make_dense();
                return self.insert_hash(hash);
            }
        }
        if let Repr::Exact(set) = &mut self.repr {
            if set.insert(hash) {
                if let Some(mart) = &mut self.martingale {
                    mart.value += 1.0;
                }
            }
        }
    }

    /// Exact → dense: the registers the hashes give; the martingale's value carries on.
    fn make_dense(&mut self) {
        let regs = self.registers();
        self.repr = Repr::Dense(regs);
        self.resync_martingale();
    }

    /// Recomputes the martingale's change probability from the registers (after the form or
    /// the registers changed other than by an insert); its running value carries on.
    fn resync_martingale(&mut self) {
        let shape = self.shape;
        Martingale::resync(&mut self.martingale, || martingale_sum(&self.repr, shape));
    }

    /// The `2^p` registers (`u << d | history`), whatever the representation.
    pub fn registers(&self) -> Vec<u32> {
        self.dense_registers().into_owned()
    }

    /// The registers, borrowed when dense (merges and estimates read them without a copy).
    fn dense_registers(&self) -> Cow<'_, [u32]> {
        match &self.repr {
            Repr::Dense(r) => Cow::Borrowed(r),
            Repr::Exact(set) => {
                let mut regs = vec![0u32; self.m()];
                for h in set.iter() {
                    let (i, k) = self.shape.split(h);
                    regs[i] = self.shape.update(regs[i], k);
                }
                Cow::Owned(regs)
            }
        }
    }

    /// The answer: exact while the exact form holds; else the martingale estimate when
    /// available, the maximum-likelihood one otherwise.
    pub fn estimate(&self) -> Estimate {
        if let Repr::Exact(set) = &self.repr {
            return Estimate::exact(set.len() as f64);
        }
        self.estimate_martingale()
            .unwrap_or_else(|| self.estimate_ml())
    }

    /// The maximum-likelihood estimate (any sketch; the exact form is read as its registers),
    /// bias-corrected, with a ± z·σ bracket.
    pub fn estimate_ml(&self) -> Estimate {
        let shape = self.shape;
        let (mut alpha, mut beta) = (0u128, [0u32; 65]);
        for &r in self.dense_registers().iter() {
            shape.add_coefficients(r, &mut alpha, &mut beta);
        }
        let m = self.m() as f64;
        let alpha = alpha as f64 / TWO_63;
        let lambda = solve(alpha, &beta);
        let value = m * lambda / (1.0 + ml_bias_constant(shape.t, shape.d) / m);
        let rse = ml_rse_constant(shape.t, shape.d) / m.sqrt();
        bracket(value, rse, self.z, self.confidence, Method::ExaLogLogMl)
    }

    /// The martingale estimate, if the sketch was fed by one stream and never merged.
    pub fn estimate_martingale(&self) -> Option<Estimate> {
        let mart = self.martingale.as_ref()?;
        if let Repr::Exact(_) = self.repr {
            return Some(Estimate::exact(mart.value));
        }
        let rse = martingale_rse_constant(self.shape.t, self.shape.d) / (self.m() as f64).sqrt();
        Some(bracket(
            mart.value,
            rse,
            self.z,
            self.confidence,
            Method::ExaLogLogMartingale,
        ))
    }

    /// The same items as a sketch of precision `p` and `d` history bits (each at most the
    /// current one) would hold them: exact, as the paper defines the reduction. The
    /// martingale estimate is kept (it still estimates the same stream).
    pub fn reduce(&self, p: u8, d: u8) -> Result<ExaLogLog, ParamError> {
        if p > self.shape.p || p < MIN_PRECISION {
            return Err(ParamError::new(
                "precision",
                "in 4..=the sketch's precision",
                p,
            ));
        }
        if d > self.shape.d {
            return Err(ParamError::new("d", "at most the sketch's d", d));
        }
        let target = Shape::new(self.shape.t, d, p);
        let repr = match &self.repr {
            Repr::Exact(set) => Repr::Exact(set.clone()),
            Repr::Dense(regs) => {
                let narrow = self.shape.with_d(d);
                let mut reduced = vec![0u32; 1 << p];
                for (i, &r) in regs.iter().enumerate() {
                    let r = narrow.reduce(i, self.shape.shorten(r, d), p);
                    let j = i >> (self.shape.p - p);
                    reduced[j] = target.merge(reduced[j], r);
                }
                Repr::Dense(reduced)
            }
        };
        let mut out = ExaLogLog {
            shape: target,
            hasher: self.hasher,
            confidence: self.confidence,
            z: self.z,
            repr,
            martingale: self.martingale.clone(),
        };
        match &out.repr {
            // A smaller precision has room for fewer hashes. The table was sized at this
            // sketch's precision: the smallest one that holds the hashes decides, as for a
            // sketch built at the smaller precision.
            Repr::Exact(set) if !out.exact_fits(set.capacity()) => {
                let capacity = capacity_for(set.len());
                if out.exact_fits(capacity) {
                    out.repr = Repr::Exact(set.resized(capacity));
                } else {
                    out.make_dense();
                }
            }
            Repr::Exact(_) => {}
            Repr::Dense(_) => {
                out.resync_martingale();
            }
        }
        Ok(out)
    }

    /// Merges `other` in: afterwards this sketch is the sketch of the union. Different `p` or
    /// `d` merge at the smaller of each ([`ExaLogLog::reduce`]); a different `t` or hash is
    /// refused. The merged sketch answers by maximum likelihood (the martingale holds only
    /// for one stream), unless `other` was empty.
    pub fn merge(&mut self, other: &ExaLogLog) -> Result<(), MergeError> {
        MergeError::check(
            self.hasher,
            other.hasher,
            &[("t", self.shape.t as u64, other.shape.t as u64)],
        )?;
        let (p, d) = (
            self.shape.p.min(other.shape.p),
            self.shape.d.min(other.shape.d),
        );
        if (p, d) != (self.shape.p, self.shape.d) {
            *self = self.reduce(p, d).expect(
                "p and d are the smaller of the two sketches', so no larger than this one's",
            );
        }
        if other.is_empty() {
            return Ok(());
        }
        self.martingale = None;
        if let Repr::Exact(set) = &other.repr {
            // Hashes re-split at this sketch's shape, whatever the other's.
            for h in set.iter() {
                self.insert_hash(h);
            }
            return Ok(());
        }
        let reduced;
        let theirs = if (other.shape.p, other.shape.d) == (p, d) {
            other.dense_registers()
        } else {
            reduced = other
                .reduce(p, d)
                .expect("p and d are the smaller of the two sketches', so no larger than other's");
            reduced.dense_registers()
        };
        if let Repr::Exact(_) = self.repr {
            self.make_dense();
        }
        let shape = self.shape;
        let Repr::Dense(ours) = &mut self.repr else {
            unreachable!("made dense above");
        };
        for (a, &b) in ours.iter_mut().zip(theirs.iter()) {
            *a = shape.merge(*a, b);
        }
        Ok(())
    }

    /// Builds a sketch from its parts (the decoder; the parts were validated).
    pub(crate) fn from_parts(
        t: u8,
        d: u8,
        p: u8,
        hasher: ItemHasher,
        confidence: f64,
        repr: Repr,
        martingale_value: Option<f64>,
    ) -> Result<ExaLogLog, ParamError> {
        let mut s = ExaLogLog::with_hasher(t, d, p, hasher)?.with_confidence(confidence)?;
        s.repr = repr;
        s.martingale = martingale_value.map(|value| Martingale { value, sum: 0 });
        s.resync_martingale();
        Ok(s)
    }

    pub(crate) fn shape_parts(&self) -> (u8, u8, u8) {
        (self.shape.t, self.shape.d, self.shape.p)
    }
}

/// `Σ P(change of register i)·2^63` over the registers of a form of `shape` (unused by the
/// exact form, where every new hash is a change).
fn martingale_sum(repr: &Repr, shape: Shape) -> u128 {
    match repr {
        Repr::Exact(_) => 0,
        Repr::Dense(regs) => regs.iter().map(|&r| shape.change_weight(r) as u128).sum(),
    }
}

/// 2^63, the scale of the exact probability sums (the martingale's `Σ P(change of register
/// i)·2^63`, and the maximum-likelihood estimate's `α`).
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

impl PartialEq for ExaLogLog {
    /// Equal parameters, martingale state and contents (exact tables compared as sets).
    fn eq(&self, other: &ExaLogLog) -> bool {
        let same = match (&self.repr, &other.repr) {
            (Repr::Exact(a), Repr::Exact(b)) => a == b,
            (Repr::Dense(a), Repr::Dense(b)) => a == b,
            _ => false,
        };
        same && self.shape == other.shape
            && self.hasher == other.hasher
            && self.confidence == other.confidence
            && self.martingale == other.martingale
    }
}

impl fmt::Display for ExaLogLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ExaLogLog(t = {}, d = {}, p = {}, {})",
            self.shape.t,
            self.shape.d,
            self.shape.p,
            self.representation()
        )
    }
}
