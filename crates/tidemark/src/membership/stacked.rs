//! A stack of quotient filters, each larger and tighter than the one before: never
//! exhausted, one lookup per layer.

use super::quotient::{grow_at, membership_estimate, QuotientFilter};
use crate::error::ParamError;
use crate::estimate::{Estimate, Method};
use crate::hash::ItemHasher;

/// Layers of quotient filters: layer `i` is built for `capacity · growth^i` keys at rate
/// `fpr · tightening^i`; inserts go to the newest layer, and a new layer starts when the
/// newest holds its forecast. Lookups consult every layer, so the rate is
/// `1 − Π(1 − fpr_i) ≤ Σ fpr_i ≤ fpr / (1 − tightening)`: at most `2·fpr` by default.
///
/// # Examples
///
/// ```
/// use tidemark::membership::StackedFilter;
///
/// let mut s = StackedFilter::new(100, 0.01).unwrap();
/// for i in 0..10_000u64 {
///     s.insert(&i.to_le_bytes()); // never refuses
/// }
/// assert!(s.layers() >= 6);
/// assert!((0..10_000u64).all(|i| s.contains(&i.to_le_bytes())));
/// assert!(s.fpr() < 0.02);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct StackedFilter {
    pub(crate) hasher: ItemHasher,
    pub(crate) capacity: u64,
    pub(crate) fpr: f64,
    pub(crate) growth: f64,
    pub(crate) tightening: f64,
    pub(crate) layers: Vec<QuotientFilter>,
    /// Each layer's forecast (the keys at which the next layer starts).
    pub(crate) forecasts: Vec<u64>,
}

impl StackedFilter {
    /// A stack whose first layer is built for `capacity` keys at `fpr`, each next layer for
    /// twice the keys at half the rate.
    pub fn new(capacity: u64, fpr: f64) -> Result<Self, ParamError> {
        StackedFilter::with_schedule(capacity, fpr, 2.0, 0.5)
    }

    /// A stack with a chosen schedule: capacity ×`growth` (≥ 1) and rate ×`tightening`
    /// (in (0, 1]) per layer.
    pub fn with_schedule(
        capacity: u64,
        fpr: f64,
        growth: f64,
        tightening: f64,
    ) -> Result<Self, ParamError> {
        if !(1.0..=1024.0).contains(&growth) {
            return Err(ParamError::new("growth", "in [1, 1024]", growth));
        }
        if !(tightening > 0.0 && tightening <= 1.0) {
            return Err(ParamError::new("tightening", "in (0, 1]", tightening));
        }
        let first = QuotientFilter::new(capacity, fpr)?;
        Ok(StackedFilter {
            hasher: ItemHasher::default(),
            capacity,
            fpr,
            growth,
            tightening,
            layers: vec![first],
            forecasts: vec![capacity],
        })
    }

    /// Layer `i`'s forecast and rate.
    pub(crate) fn layer_params(&self, i: usize) -> (u64, f64) {
        let n = (self.capacity as f64 * self.growth.powi(i as i32)).round();
        let eps = self.fpr * self.tightening.powi(i as i32);
        (n.min((1u64 << 38) as f64) as u64, eps)
    }

    /// The hash the filters' fingerprints come from.
    pub fn hasher(&self) -> ItemHasher {
        self.hasher
    }

    /// Keys held in all layers.
    pub fn len(&self) -> u64 {
        self.layers.iter().map(QuotientFilter::len).sum()
    }

    /// Whether no layer holds a key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The number of layers.
    pub fn layers(&self) -> usize {
        self.layers.len()
    }

    /// The layers, oldest first.
    pub fn layer_filters(&self) -> &[QuotientFilter] {
        &self.layers
    }

    /// Inserts an item into the newest layer, starting a new layer when the newest is at
    /// its forecast (or one insert short of its load limit). Never refuses: a layer never
    /// doubles, so it is never exhausted.
    pub fn insert(&mut self, item: &[u8]) {
        self.insert_hash(self.hasher.hash(item));
    }

    /// [`StackedFilter::insert`] for an item given by its hash.
    pub fn insert_hash(&mut self, hash: u64) {
        let top = self.layers.len() - 1;
        let full = {
            let l = &self.layers[top];
            l.len() >= self.forecasts[top] || l.len() + 1 >= grow_at(l.quotient_bits())
        };
        if full {
            let (n, eps) = self.layer_params(self.layers.len());
            // A rate so tight that p would pass 64 bits stops tightening there.
            let layer = QuotientFilter::new(n, eps)
                .or_else(|_| {
                    let q = super::quotient::quotient_bits_for(n);
                    QuotientFilter::with_bits((q + 58).min(64), q)
                })
                .expect("a layer within 64-bit fingerprints exists for n ≤ 2^38")
                .with_hasher(self.hasher);
            self.layers.push(layer);
            self.forecasts.push(n);
        }
        let top = self.layers.len() - 1;
        self.layers[top]
            .insert_hash(hash)
            .expect("the newest layer is below its load limit, so it does not double");
    }

    /// Whether the item may have been inserted (consults every layer).
    pub fn contains(&self, item: &[u8]) -> bool {
        let h = self.hasher.hash(item);
        self.layers.iter().any(|l| l.contains_hash(h))
    }

    /// The membership answer as an [`Estimate`].
    pub fn query(&self, item: &[u8]) -> Estimate {
        membership_estimate(self.contains(item), self.fpr(), Method::StackedFilter)
    }

    /// Removes one copy of an item from the newest layer that holds it.
    pub fn remove(&mut self, item: &[u8]) -> bool {
        let h = self.hasher.hash(item);
        self.layers.iter_mut().rev().any(|l| l.remove_hash(h))
    }

    /// The expected false-positive rate now: `1 − Π(1 − fpr_i)` over the layers.
    pub fn fpr(&self) -> f64 {
        1.0 - self.layers.iter().map(|l| 1.0 - l.fpr()).product::<f64>()
    }

    /// Bits held by all layers (each: slots × (remainder + 3)).
    pub fn bits(&self) -> u64 {
        self.layers.iter().map(QuotientFilter::bits).sum()
    }

    /// The first layer's forecast.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The first layer's target rate.
    pub fn target_fpr(&self) -> f64 {
        self.fpr
    }

    /// Capacity factor per layer.
    pub fn growth(&self) -> f64 {
        self.growth
    }

    /// Rate factor per layer.
    pub fn tightening(&self) -> f64 {
        self.tightening
    }
}
