//! **Experimental.** The lengthening table — per-generation fingerprints, longer for keys that
//! arrive after each doubling, after InfiniFilter (Dayan, Bercea, Reviriego, Pagh, SIGMOD
//! 2023) — as a faithful model rather than a slot array.
//!
//! Keys inserted after the `g`-th doubling get fingerprints `step·g` bits longer than the
//! first generation's `p0` (`step` = 1 or 2). The table shares one quotient, doubling at
//! load λ exactly as [`super::QuotientFilter`] does; a generation whose fingerprint is no
//! longer than the quotient has nothing left to store, so the table dies when the *first*
//! generation's remainder would reach zero bits — on the same key as the table that reserved
//! nothing.
//!
//! What is modelled and what is not: the answers are exact — each generation's stored
//! fingerprints are kept (in hash sets), and a lookup matches an item's `p_g`-bit
//! fingerprint against generation `g`'s for every `g`, which is precisely what a slot array
//! with a generation field would answer. The slot array itself is not built: its cost is
//! charged by the design's cost model, `slots × (newest remainder + 3 metadata bits +
//! ⌈log2(G + 1)⌉ generation bits)`. Runs, shifts and their time are not modelled.

use std::collections::HashSet;

use super::quotient::{
    collision_rate, fingerprint_bits_for, grow_at, membership_estimate, quotient_bits_for,
    Exhausted,
};
use crate::error::ParamError;
use crate::estimate::{Estimate, Method};
use crate::hash::ItemHasher;

/// **Experimental** model of a lengthening fingerprint table: keys inserted after
/// the `g`-th doubling get fingerprints `step·g` bits longer (`step` 1 or 2), one quotient is
/// shared, and the table dies when the first generation's remainder would reach zero bits.
///
/// Its answers are exact (each generation's fingerprints are kept, and a lookup matches an
/// item's `p_g`-bit fingerprint against generation `g` for every `g`, which is what a slot
/// array with a generation field answers), but no slot array is built: [`bits`] charges the
/// design's cost model, `slots × (newest remainder + 3 + ⌈log2(G + 1)⌉)`. Runs, shifts and
/// their time are not modelled.
///
/// [`bits`]: LengtheningFilter::bits
///
/// # Examples
///
/// ```
/// use tidemark::membership::LengtheningFilter;
///
/// let mut t = LengtheningFilter::new(2_000, 0.01, 2).unwrap();
/// for i in 0..64_000u64 {
///     t.insert(&i.to_le_bytes()).unwrap();
/// }
/// assert_eq!(t.generations(), 6);
/// assert_eq!(t.bits(), 2_228_224); // the design's target figure
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct LengtheningFilter {
    pub(crate) hasher: ItemHasher,
    pub(crate) p0: u32,
    pub(crate) q0: u32,
    pub(crate) q: u32,
    pub(crate) step: u32,
    pub(crate) len: u64,
    /// Keys inserted in each generation (a key inserted twice counts twice).
    pub(crate) counts: Vec<u64>,
    /// Each generation's distinct fingerprints.
    pub(crate) gens: Vec<HashSet<u64>>,
}

impl LengtheningFilter {
    /// A table for a forecast of `capacity` keys at `fpr`, lengthening fingerprints by
    /// `step` (1 or 2) bits per doubling.
    pub fn new(capacity: u64, fpr: f64, step: u32) -> Result<Self, ParamError> {
        if capacity == 0 || capacity > 1 << 38 {
            return Err(ParamError::new("capacity", "in 1..=2^38", capacity));
        }
        if !(fpr > 0.0 && fpr < 1.0) {
            return Err(ParamError::new("fpr", "in (0, 1)", fpr));
        }
        if !(1..=2).contains(&step) {
            return Err(ParamError::new("step", "1 or 2", step));
        }
        let p0 = fingerprint_bits_for(capacity, fpr);
        let q0 = quotient_bits_for(capacity);
        LengtheningFilter::with_bits(p0, q0, step)
    }

    pub(crate) fn with_bits(p0: u32, q0: u32, step: u32) -> Result<Self, ParamError> {
        if q0 == 0 || q0 > 40 || p0 <= q0 {
            return Err(ParamError::new(
                "fingerprint bits",
                "above the quotient",
                p0,
            ));
        }
        // The newest generation's fingerprint must fit the 64-bit hash.
        if p0 + step * (p0 - q0 - 1) > 64 {
            return Err(ParamError::new(
                "fpr",
                "a fingerprint whose lengthened generations fit in 64 bits",
                p0,
            ));
        }
        Ok(LengtheningFilter {
            hasher: ItemHasher::default(),
            p0,
            q0,
            q: q0,
            step,
            len: 0,
            counts: vec![0],
            gens: vec![HashSet::new()],
        })
    }

    /// Fingerprint bits of generation `g`.
    pub fn generation_bits(&self, g: usize) -> u32 {
        self.p0 + self.step * g as u32
    }

    fn fp(&self, hash: u64, g: usize) -> u64 {
        let p = self.generation_bits(g);
        if p == 64 {
            hash
        } else {
            hash >> (64 - p)
        }
    }

    /// Inserts an item; refuses (as a lengthening table dies) when a doubling would leave the
    /// first generation's remainder with zero bits.
    pub fn insert(&mut self, item: &[u8]) -> Result<(), Exhausted> {
        let hash = self.hasher.hash(item);
        if self.len + 1 >= grow_at(self.q) {
            if self.p0 - self.q <= 1 {
                return Err(Exhausted {
                    keys: self.len,
                    slots: self.slots(),
                    fingerprint_bits: self.p0,
                    quotient_bits: self.q,
                });
            }
            self.q += 1;
            self.counts.push(0);
            self.gens.push(HashSet::new());
        }
        let g = self.gens.len() - 1;
        let fp = self.fp(hash, g);
        self.gens[g].insert(fp);
        self.counts[g] += 1;
        self.len += 1;
        Ok(())
    }

    /// Whether the item may have been inserted.
    pub fn contains(&self, item: &[u8]) -> bool {
        let hash = self.hasher.hash(item);
        (0..self.gens.len()).any(|g| self.gens[g].contains(&self.fp(hash, g)))
    }

    /// Whether the item's fingerprint matches one stored in generation `g` (false for a
    /// generation that does not exist): each generation's share of the false positives.
    pub fn matches_generation(&self, item: &[u8], g: usize) -> bool {
        let hash = self.hasher.hash(item);
        g < self.gens.len() && self.gens[g].contains(&self.fp(hash, g))
    }

    /// The membership answer as an [`Estimate`].
    pub fn query(&self, item: &[u8]) -> Estimate {
        membership_estimate(self.contains(item), self.fpr(), Method::LengtheningFilter)
    }

    /// Keys held.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Generations so far (doublings + 1).
    pub fn generations(&self) -> usize {
        self.gens.len()
    }

    /// Keys per generation, oldest first.
    pub fn generation_counts(&self) -> &[u64] {
        &self.counts
    }

    /// Slots in the modelled table.
    pub fn slots(&self) -> u64 {
        1 << self.q
    }

    /// Quotient bits now.
    pub fn quotient_bits(&self) -> u32 {
        self.q
    }

    /// The first generation's fingerprint bits.
    pub fn first_fingerprint_bits(&self) -> u32 {
        self.p0
    }

    /// Bits of the per-slot generation field: `⌈log2(G + 1)⌉` for `G + 1` generations.
    pub fn generation_field_bits(&self) -> u32 {
        let gens = self.gens.len() as u64;
        64 - (gens - 1).leading_zeros()
    }

    /// The modelled slot width: the newest generation's remainder, 3 metadata bits and the
    /// generation field.
    pub fn slot_bits(&self) -> u32 {
        let newest = self.generation_bits(self.gens.len() - 1);
        newest - self.q + 3 + self.generation_field_bits()
    }

    /// Bits held by the modelled table: slots × slot width.
    pub fn bits(&self) -> u64 {
        self.slots() * self.slot_bits() as u64
    }

    /// Generation `g`'s contribution to the rate: `1 − (1 − 2^−p_g)^n_g`.
    pub fn generation_fpr(&self, g: usize) -> f64 {
        collision_rate(self.generation_bits(g), self.counts[g])
    }

    /// The expected false-positive rate: `1 − Π_g (1 − 2^−p_g)^n_g`.
    pub fn fpr(&self) -> f64 {
        1.0 - (0..self.gens.len())
            .map(|g| 1.0 - self.generation_fpr(g))
            .product::<f64>()
    }

    /// Lengthening step (bits per doubling).
    pub fn step(&self) -> u32 {
        self.step
    }

    /// The hash the fingerprints come from.
    pub fn hasher(&self) -> ItemHasher {
        self.hasher
    }
}
