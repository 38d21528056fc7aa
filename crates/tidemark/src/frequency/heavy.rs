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

    /// The candidates held now, in no order: with [`Self::sketch`], [`Self::phi`] and
    /// [`Self::next_sweep`], the whole state ([`Self::from_parts`] rebuilds it).
    pub fn candidate_items(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.candidates.keys().map(Vec::as_slice)
    }

    /// How many candidates trigger the next sweep. A candidate a sweep drops can come back
    /// only by its own update, so when sweeps run is part of the state.
    pub fn next_sweep(&self) -> usize {
        self.sweep_at
    }

    /// Heavy hitters rebuilt from their parts ([`Self::sketch`], [`Self::candidate_items`],
    /// [`Self::next_sweep`]): the same answers, now and after any further inserts, as the
    /// heavy hitters they were taken from.
    ///
    /// Refused (naming the part) when `phi` is outside (0, 1], the sketch is not a cash
    /// register, or the sweep point is not past the candidates held and at least the
    /// smallest one `phi` gives: parts no heavy hitters could have held.
    ///
    /// ```
    /// use tidemark::frequency::HeavyHitters;
    ///
    /// let mut hh = HeavyHitters::new(0.2, 0.01, 0.01).unwrap();
    /// for item in ["a", "a", "a", "b", "c"] {
    ///     hh.insert(item.as_bytes(), 1).unwrap();
    /// }
    /// let items: Vec<Vec<u8>> = hh.candidate_items().map(<[u8]>::to_vec).collect();
    /// let back =
    ///     HeavyHitters::from_parts(hh.phi(), hh.sketch().clone(), items, hh.next_sweep()).unwrap();
    /// assert_eq!(back.heavy_hitters(), hh.heavy_hitters());
    /// ```
    pub fn from_parts(
        phi: f64,
        sketch: CountMin,
        candidates: impl IntoIterator<Item = Vec<u8>>,
        next_sweep: usize,
    ) -> Result<HeavyHitters, ParamError> {
        if !(phi > 0.0 && phi <= 1.0) {
            return Err(ParamError::new("phi", "in (0, 1]", phi));
        }
        if sketch.model() != Model::CashRegister {
            return Err(ParamError::new("model", "cash register", sketch.model()));
        }
        let candidates: HashMap<Vec<u8>, ()> = candidates.into_iter().map(|c| (c, ())).collect();
        // After every insert the candidates are fewer than the sweep point, which is never
        // below the floor φ sets.
        if next_sweep < sweep_floor(phi) || next_sweep <= candidates.len() {
            return Err(ParamError::new(
                "next sweep",
                "more than the candidates held, and at least ⌈4/φ⌉ (at most 10^6)",
                next_sweep,
            ));
        }
        Ok(HeavyHitters {
            sketch,
            phi,
            candidates,
            sweep_at: next_sweep,
        })
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

    /// How many items are kept.
    pub fn k(&self) -> usize {
        self.k
    }

    /// The items held, each with the estimate it had at its last update (what a newcomer
    /// must beat), in no order: with [`Self::sketch`] and [`Self::k`], the whole state
    /// ([`Self::from_parts`] rebuilds it).
    pub fn held(&self) -> impl Iterator<Item = (&[u8], i64)> + '_ {
        self.best.iter().map(|(item, &v)| (item.as_slice(), v))
    }

    /// A top-k rebuilt from its parts ([`Self::k`], [`Self::sketch`], [`Self::held`]): the
    /// same answers, now and after further inserts, as the top-k they were taken from.
    ///
    /// Refused (naming the part) when `k` is 0, the sketch is not a cash register, more than
    /// `k` items are held or one twice, or a held estimate is negative or above the item's
    /// estimate in the sketch (estimates only grow in a cash register): parts no top-k could
    /// have held.
    ///
    /// ```
    /// use tidemark::frequency::TopK;
    ///
    /// let mut top = TopK::new(2, 0.01, 0.01).unwrap();
    /// for (item, n) in [("a", 5), ("b", 3), ("c", 1)] {
    ///     top.insert(item.as_bytes(), n).unwrap();
    /// }
    /// let held: Vec<(Vec<u8>, i64)> = top.held().map(|(i, v)| (i.to_vec(), v)).collect();
    /// let back = TopK::from_parts(top.k(), top.sketch().clone(), held).unwrap();
    /// assert_eq!(back.top(), top.top());
    /// ```
    pub fn from_parts(
        k: usize,
        sketch: CountMin,
        held: impl IntoIterator<Item = (Vec<u8>, i64)>,
    ) -> Result<TopK, ParamError> {
        if k == 0 {
            return Err(ParamError::new("k", "at least 1", k));
        }
        if sketch.model() != Model::CashRegister {
            return Err(ParamError::new(
                "sketch",
                "a cash-register sketch",
                sketch.model(),
            ));
        }
        let mut best = HashMap::new();
        for (item, v) in held {
            if !(0.0..=sketch.point(&item).value).contains(&(v as f64)) {
                return Err(ParamError::new(
                    "held",
                    "estimates in [0, the item's estimate in the sketch]",
                    v,
                ));
            }
            if best.insert(item, v).is_some() || best.len() > k {
                return Err(ParamError::new(
                    "held",
                    "at most k distinct items",
                    best.len(),
                ));
            }
        }
        Ok(TopK {
            sketch,
            k,
            best,
            worst: None,
        })
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
