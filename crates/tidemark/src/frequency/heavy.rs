//! Cash-register heavy hitters and top-k: a [`CountMin`] and a set of candidates.

use std::collections::HashMap;

use super::dyadic::sort_by_estimate;
use super::{CountMin, FrequencyError, Model};
use crate::error::ParamError;
use crate::estimate::Estimate;

/// The paper's cash-register heavy hitters: a Count-Min sketch, the total `‖a‖₁`, and the
/// candidates whose estimate reached `φ‖a‖₁` when they were last updated.
///
/// After each update the item's estimate is compared with `φ‖a‖₁`; if it reaches it, the
/// item becomes (or stays) a candidate. The paper keeps the candidates in a heap ordered by
/// estimate and pops those that fall below the threshold as `‖a‖₁` grows; tidemark keeps them
/// in a hash map and sweeps it (re-querying the sketch) whenever it has doubled since the last
/// sweep, which gives the same answers at amortised constant cost.
///
/// Guarantees (Theorem 1 in the cash-register model): an item with `a_i ≥ φ‖a‖₁` had an
/// estimate of at least `a_i ≥ φ‖a‖₁(t)` at its last update `t` and at every later sweep, so
/// it is always reported (recall 1); an item below `(φ − ε)‖a‖₁` is reported only if its
/// estimate erred by more than `ε‖a‖₁`, probability at most δ.
///
/// ```
/// use tidemark::frequency::HeavyHitters;
///
/// let mut hh = HeavyHitters::new(0.1, 0.001, 0.01).unwrap();
/// for i in 0..1_000u32 {
///     let item = if i % 4 == 0 { "hot".to_string() } else { format!("cold{i}") };
///     hh.insert(item.as_bytes(), 1).unwrap();
/// }
/// let found = hh.heavy_hitters();
/// assert_eq!(found.len(), 1);
/// assert_eq!(found[0].0, b"hot");
/// ```
#[derive(Clone, Debug)]
pub struct HeavyHitters {
    sketch: CountMin,
    phi: f64,
    candidates: HashMap<Vec<u8>, ()>,
    sweep_at: usize,
}

impl HeavyHitters {
    /// Heavy hitters above `φ‖a‖₁` over a cash-register Count-Min of `(ε, δ)`.
    pub fn new(phi: f64, epsilon: f64, delta: f64) -> Result<HeavyHitters, ParamError> {
        HeavyHitters::with_sketch(phi, CountMin::new(epsilon, delta, Model::CashRegister)?)
    }

    /// Heavy hitters over an empty cash-register sketch (plain or conservative).
    pub fn with_sketch(phi: f64, sketch: CountMin) -> Result<HeavyHitters, ParamError> {
        if !(phi > 0.0 && phi <= 1.0) {
            return Err(ParamError::new("phi", "in (0, 1]", phi));
        }
        if sketch.model() != Model::CashRegister {
            return Err(ParamError::new(
                "model",
                "cash register (turnstile heavy hitters use DyadicCountMin)",
                sketch.model(),
            ));
        }
        if sketch.total() != 0 {
            return Err(ParamError::new("sketch", "empty", sketch.total()));
        }
        Ok(HeavyHitters {
            sketch,
            phi,
            candidates: HashMap::new(),
            sweep_at: sweep_floor(phi),
        })
    }

    /// The threshold fraction φ.
    pub fn phi(&self) -> f64 {
        self.phi
    }

    /// The underlying sketch (for point queries, saving, joins).
    pub fn sketch(&self) -> &CountMin {
        &self.sketch
    }

    /// How many candidates are held now.
    pub fn candidates(&self) -> usize {
        self.candidates.len()
    }

    /// Adds `count` (≥ 0) occurrences of `item`.
    pub fn insert(&mut self, item: &[u8], count: i64) -> Result<(), FrequencyError> {
        self.sketch.update(item, count)?;
        let threshold = self.phi * self.sketch.total() as f64;
        if self.sketch.point(item).value >= threshold && !self.candidates.contains_key(item) {
            self.candidates.insert(item.to_vec(), ());
            if self.candidates.len() >= self.sweep_at {
                self.sweep();
            }
        }
        Ok(())
    }

    /// Drops the candidates now below the threshold.
    fn sweep(&mut self) {
        let threshold = self.phi * self.sketch.total() as f64;
        let sketch = &self.sketch;
        self.candidates
            .retain(|item, _| sketch.point(item).value >= threshold);
        self.sweep_at = (2 * self.candidates.len()).max(sweep_floor(self.phi));
    }

    /// The items whose estimate reaches `φ‖a‖₁` now, largest first, each with its point
    /// estimate.
    pub fn heavy_hitters(&self) -> Vec<(Vec<u8>, Estimate)> {
        let threshold = self.phi * self.sketch.total() as f64;
        let mut out: Vec<(Vec<u8>, Estimate)> = self
            .candidates
            .keys()
            .map(|item| (item.clone(), self.sketch.point(item)))
            .filter(|(_, e)| e.value >= threshold && e.value > 0.0)
            .collect();
        sort_by_estimate(&mut out);
        out
    }
}

fn sweep_floor(phi: f64) -> usize {
    (4.0 / phi).ceil().min(1e6) as usize
}

/// The `k` items of largest estimate in a cash-register stream: a Count-Min sketch and the
/// `k` best candidates by their estimate at their last update (the standard Count-Min top-k;
/// a convenience beyond the paper, with no recall guarantee of its own: an item that climbs
/// into the top `k` late is caught at its next update).
///
/// ```
/// use tidemark::frequency::TopK;
///
/// let mut top = TopK::new(2, 0.001, 0.01).unwrap();
/// for (item, n) in [("a", 50), ("b", 30), ("c", 20), ("d", 1)] {
///     top.insert(item.as_bytes(), n).unwrap();
/// }
/// let items: Vec<Vec<u8>> = top.top().into_iter().map(|(i, _)| i).collect();
/// assert_eq!(items, [b"a".to_vec(), b"b".to_vec()]);
/// ```
#[derive(Clone, Debug)]
pub struct TopK {
    sketch: CountMin,
    k: usize,
    best: HashMap<Vec<u8>, i64>,
    /// The smallest held estimate, once the `k` places are full (`None`: to recompute).
    worst: Option<i64>,
}

impl TopK {
    /// The top `k` (`k ≥ 1`) over a cash-register Count-Min of `(ε, δ)`.
    pub fn new(k: usize, epsilon: f64, delta: f64) -> Result<TopK, ParamError> {
        TopK::with_sketch(k, CountMin::new(epsilon, delta, Model::CashRegister)?)
    }

    /// The top `k` over an empty cash-register sketch.
    pub fn with_sketch(k: usize, sketch: CountMin) -> Result<TopK, ParamError> {
        if k == 0 {
            return Err(ParamError::new("k", "at least 1", k));
        }
        if sketch.model() != Model::CashRegister || sketch.total() != 0 {
            return Err(ParamError::new(
                "sketch",
                "an empty cash-register sketch",
                sketch.model(),
            ));
        }
        Ok(TopK {
            sketch,
            k,
            best: HashMap::new(),
            worst: None,
        })
    }

    /// The underlying sketch.
    pub fn sketch(&self) -> &CountMin {
        &self.sketch
    }

    /// Adds `count` (≥ 0) occurrences of `item`.
    pub fn insert(&mut self, item: &[u8], count: i64) -> Result<(), FrequencyError> {
        self.sketch.update(item, count)?;
        let v = self.sketch.point(item).value as i64;
        if let Some(old) = self.best.get_mut(item) {
            // Estimates only grow in a cash register: the worst can only rise.
            *old = v;
            self.worst = None;
            return Ok(());
        }
        if self.best.len() < self.k {
            self.best.insert(item.to_vec(), v);
            self.worst = None;
            return Ok(());
        }
        let worst = match self.worst {
            Some(w) => w,
            None => {
                let w = self.best.values().copied().min().unwrap_or(i64::MIN);
                self.worst = Some(w);
                w
            }
        };
        if v > worst {
            // Evict one holder of the smallest estimate, then take its place.
            let evict = self
                .best
                .iter()
                .find(|(_, &e)| e == worst)
                .map(|(i, _)| i.clone())
                .expect("the worst estimate is held");
            self.best.remove(&evict);
            self.best.insert(item.to_vec(), v);
            self.worst = None;
        }
        Ok(())
    }

    /// The held items, largest estimate first, each with its current point estimate.
    pub fn top(&self) -> Vec<(Vec<u8>, Estimate)> {
        let mut out: Vec<(Vec<u8>, Estimate)> = self
            .best
            .keys()
            .map(|item| (item.clone(), self.sketch.point(item)))
            .collect();
        sort_by_estimate(&mut out);
        out
    }
}
