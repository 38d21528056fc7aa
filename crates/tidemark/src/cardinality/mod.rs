//! Distinct counts: HyperLogLog, exact while small, interchangeable with Redis; and
//! [`ExaLogLog`], the same answers in about 43% fewer register bits (60% fewer bytes at rest).
//!
//! References: P. Flajolet, É. Fusy, O. Gandouet, F. Meunier, *HyperLogLog: the analysis of a
//! near-optimal cardinality estimation algorithm*, AofA 2007; S. Heule, M. Nunkesser, A. Hall,
//! *HyperLogLog in Practice*, EDBT 2013 (the sparse representation); O. Ertl (below); E. Cohen,
//! *All-Distances Sketches, Revisited: HIP Estimators for Massive Graphs Analysis*, PODS 2014,
//! and D. Ting, *Streamed approximate counting of distinct elements*, KDD 2014 (the martingale
//! estimator).
//!
//! # The rule
//!
//! An item's 64-bit hash gives a register index (the low `p` bits) and a rank (one plus the
//! number of trailing zeros of the other `64 − p` bits; [`registers::index_and_rank`]). Each of the
//! `m = 2^p` registers keeps the largest rank it has seen. A register's rank behaves like the
//! logarithm of the number of distinct items that fell into it, so the registers together
//! estimate the distinct count. Because a register only ever takes a maximum:
//!
//! - inserting an item twice changes nothing (replays cannot inflate a count);
//! - merging two sketches is the register-wise maximum, in any order and tree shape, and the
//!   merged sketch is exactly the sketch of the union ([`Hll::merge`]);
//! - nothing can be deleted (a maximum has no inverse).
//!
//! # Representations
//!
//! [`Hll`] starts small and grows, never holding more bytes than its dense registers would:
//!
//! 1. **Exact**: the set of item hashes (8 bytes a slot, load ≤ 1/2), answered exactly while
//!    the table is no larger than `m` bytes.
//! 2. **Sparse**: (index, rank) pairs at the sparse precision `p' = 25` (4 bytes a slot),
//!    while the table is no larger than `m` bytes. With 2^25 virtual registers the estimate is
//!    near-exact (standard error 1.04/√2^25 ≈ 0.018%).
//! 3. **Dense**: `m` registers, **one byte each**. A 6-bit packing would hold 25% fewer bytes,
//!    but every insert would then read-modify-write two bytes across a bit boundary and every
//!    count would unpack; one byte per register makes an insert one load, one compare and
//!    (rarely) one store, and a count one pass over a byte array. [`Hll::bytes`] reports what
//!    is actually held. The envelope stores registers 6-bit packed.
//!
//! A transition re-expresses the same information (`fold` maps a precision-25 register to
//! precision `p` exactly as a precision-`p` sketch would have split the hash), so there is no
//! estimator switch-over and no bias bump at a transition.
//!
//! # Estimators and their bounds
//!
//! - **Ertl's improved estimator** (O. Ertl, *New cardinality estimation algorithms for
//!   HyperLogLog sketches*, arXiv 1702.01284, 2017): from the histogram `C_k` of register
//!   values, `E = m² / (2 ln 2 · (m·σ(C₀/m) + Σ_{k=1}^{q} C_k 2^−k + m·τ(1 − C_{q+1}/m)·2^−q))`
//!   with `q = 64 − p`. σ corrects for registers still at zero (it reduces to linear counting
//!   for small counts), τ for registers at the largest rank. It needs no empirical bias
//!   tables and is essentially unbiased from 1 to far beyond 10^9; its relative standard
//!   error is `√(3 ln 2 − 1)/√m ≈ 1.04/√m` ([`registers::ERTL_RSE`]). It works on any sketch,
//!   merged or not ([`Hll::estimate_ertl`], [`registers::estimate_registers`]).
//! - **The martingale estimator** (Ertl section 6; Cohen 2014 and Ting 2014 call it the
//!   historic inverse probability, HIP, estimator — tidemark calls it the martingale
//!   estimator everywhere, for [`ExaLogLog`] too): a sketch fed by one stream adds
//!   `1/P(change)` each time an insert changes its state, where `P(change) = Σ_i 2^(−r_i) / m`.
//!   Unbiased, with relative standard error about `√(ln 2)/√m ≈ 0.83/√m`
//!   ([`registers::MARTINGALE_RSE`]). It needs the insertion history, so it is lost on merge;
//!   [`Hll::estimate`] uses it when available ([`Hll::estimate_martingale`],
//!   [`Method::HllMartingale`](crate::Method::HllMartingale)).
//!   tidemark keeps `Σ 2^(64 − r_i)` as an exact 128-bit integer, so the change probability
//!   never drifts.
//!
//! The bracket is `value ± z·σ·value` at a stated confidence (95% by default, z = 1.96;
//! [`Hll::with_confidence`]): probabilistic, from the estimator's asymptotic normality. An
//! exact sketch answers with a guaranteed bracket of width zero (collisions of 64-bit hashes
//! aside: fewer than one in 10^10 for the sizes the exact form holds).
//!
//! # Redis
//!
//! [`Hll::redis`] builds sketches register-for-register equal to Redis's (MurmurHash64A with
//! seed `0xadc83b19`, `p = 14`, the same split); [`Hll::to_redis`] and [`Hll::from_redis`]
//! convert `HYLL` string values (dense and sparse), and [`Hll::estimate`] in Redis mode is
//! PFCOUNT's count ([`redis::pfcount_registers`]). See [`RedisError`] for what a corrupted
//! value is, and [`redis`] for the value's layout.
//!
//! # Worked example
//!
//! Two partitions of a stream merge into the sketch of the union; a third, built with another
//! hash, is refused:
//!
//! ```
//! use tidemark::cardinality::Hll;
//! use tidemark::hash::ItemHasher;
//! use tidemark::{Method, MergeError};
//!
//! let mut a = Hll::new(12).unwrap();
//! let mut b = Hll::new(12).unwrap();
//! for user in 0..30_000u64 {
//!     if user % 3 == 0 { b.insert_u64(user) } else { a.insert_u64(user) }
//!     a.insert_u64(user / 2); // overlap: half of these are already in b's share
//! }
//! a.merge(&b).unwrap();
//! let e = a.estimate();
//! assert_eq!(e.method, Method::HllErtl); // merged: the martingale no longer applies
//! // 1.04/√4096 = 1.6%; six standard errors cannot plausibly be exceeded.
//! assert!((e.value - 30_000.0).abs() < 0.1 * 30_000.0, "{}", e.value);
//!
//! let other = Hll::with_hasher(12, ItemHasher::xxh3(1)).unwrap();
//! assert!(matches!(a.merge(&other), Err(MergeError::HashMismatch { .. })));
//! ```

mod distinct_sketch;
mod encoding;
pub mod exaloglog;
mod frozen;
mod hll;
mod martingale;
mod pfcount;
pub mod redis;
pub mod registers;
mod ring;
mod sets;
mod sliding;
mod window_encoding;

pub use distinct_sketch::DistinctSketch;
pub use exaloglog::ExaLogLog;
pub use hll::{Hll, Representation};
pub use redis::RedisError;
pub use ring::{BucketSketch, RingError, RingWindow};
pub use sliding::{SlidingError, SlidingHll, SlidingStats};
