//! A quantile metric's bucket: a DDSketch (Masson, Rim, Lee, PVLDB 2019) of the key's values
//! in the bucket. Merging adds bin counts, exactly, in any order; so does a window of
//! buckets. Every answer is within α of the true value of its rank (unless the sketch's bin
//! limit collapsed that rank's bin, which the estimate's method says), with the bin's bounds
//! as a guaranteed bracket.
//!
//! A bucket keeps its first values as they came and builds the sketch only past
//! [`LARGE`] of them, or when merged: most buckets close holding a few values and are encoded
//! straight from them. Why, and what it keeps equal, on [`QuantileBucket`].

use std::borrow::Cow;
use std::sync::Arc;

use tidemark::quantile::{DdSketch, QuantileError, MAX_FEW_VALUES};
use tidemark::{DecodeError, Estimate, MergeError};

use crate::kinds::BucketSummary;

/// Values a bucket holds in its first, smallest form (two thirds of the latency demo's
/// buckets fit).
const SMALL: usize = 16;
/// Values it holds in its second before it builds the sketch (98% of the demo's fit).
const LARGE: usize = 64;
const _: () = assert!(SMALL < LARGE && LARGE <= MAX_FEW_VALUES);

/// The values of one key in one bucket (or a window of buckets).
///
/// A bucket holds its first values as they came, in one small allocation, and builds the
/// sketch only when they pass [`LARGE`] or when it is merged; at its close it encodes
/// straight from them ([`DdSketch::to_bytes_inserting`]: the bytes a sketch of them, filled
/// in order, would give). Why: most buckets hold a few values (14 on average in the latency
/// demo, over about 50 bins at α = 1%), and a sketch of them allocated, zeroed and grew a
/// store of bins and reached it through two pointers at every value, which cost a quantile
/// metric most of what it cost beyond a count. The few values take less memory than the
/// sketch, too. Answers and bytes are those of the sketch, always.
///
/// Three words, within the size a summary has for other kinds.
#[derive(Clone, Debug)]
pub struct QuantileBucket {
    /// The metric's empty sketch (its mapping and bin limit), shared by its buckets; here,
    /// not in the values' allocation, so that dropping an old bucket frees it unread.
    empty: Arc<DdSketch>,
    form: Form,
}

/// A bucket's form: one pointer.
#[derive(Clone, Debug)]
enum Form {
    Small(Box<Few<SMALL>>),
    Large(Box<Few<LARGE>>),
    Sketch(Box<DdSketch>),
}

/// Up to `N` values, in arrival order.
#[derive(Clone, Debug)]
struct Few<const N: usize> {
    len: usize,
    values: [f64; N],
}

impl<const N: usize> Few<N> {
    fn new() -> Few<N> {
        Few {
            len: 0,
            values: [0.0; N],
        }
    }

    fn values(&self) -> &[f64] {
        &self.values[..self.len.min(N)]
    }

    /// The values in a larger form (`M ≥ N`).
    fn grown<const M: usize>(&self) -> Few<M> {
        let mut f = Few::new();
        for (x, &v) in f.values.iter_mut().zip(self.values()) {
            *x = v;
        }
        f.len = self.len.min(N);
        f
    }

    /// The sketch of the values inserted in order into `empty`.
    fn sketch(&self, empty: &DdSketch) -> DdSketch {
        let mut s = empty.clone();
        for &v in self.values() {
            let _ = s.insert(v);
        }
        s
    }
}

impl QuantileBucket {
    /// An empty bucket of the metric's mapping and bin limit (`empty`'s).
    pub fn new(empty: DdSketch) -> QuantileBucket {
        QuantileBucket {
            form: Form::Small(Box::new(Few::new())),
            empty: Arc::new(empty),
        }
    }

    /// Decodes a stored bucket, refusing one of another mapping or bin limit (its bins would
    /// mean other intervals, or collapse otherwise).
    pub fn from_bytes(bytes: &[u8], like: &DdSketch) -> Result<QuantileBucket, DecodeError> {
        let sketch = DdSketch::from_bytes(bytes)?;
        if sketch.mapping() != like.mapping() {
            return Err(DecodeError::Invalid {
                field: "quantile mapping",
                offset: tidemark::codec::HEADER_LEN,
                expected: "the metric's alpha or schema",
                got: sketch.alpha().to_bits(),
            });
        }
        if sketch.bin_limit() != like.bin_limit() {
            return Err(DecodeError::Invalid {
                field: "bin limit",
                offset: tidemark::codec::HEADER_LEN,
                expected: "the metric's bin_limit",
                got: sketch.bin_limit(),
            });
        }
        Ok(QuantileBucket {
            empty: Arc::new(like.clone()),
            form: Form::Sketch(Box::new(sketch)),
        })
    }

    /// The sketch: held, or built from the values held.
    pub fn sketch(&self) -> Cow<'_, DdSketch> {
        match &self.form {
            Form::Small(f) => Cow::Owned(f.sketch(&self.empty)),
            Form::Large(f) => Cow::Owned(f.sketch(&self.empty)),
            Form::Sketch(s) => Cow::Borrowed(s),
        }
    }

    /// Runs `f` on the sketch, built first (and held from then on) if the bucket holds values.
    fn with_sketch<R>(&mut self, f: impl FnOnce(&mut DdSketch) -> R) -> R {
        if let Form::Sketch(s) = &mut self.form {
            return f(s);
        }
        let mut s = Box::new(self.sketch().into_owned());
        let r = f(&mut s);
        self.form = Form::Sketch(s);
        r
    }

    /// The value at quantile `q` (in `[0, 1]`), or `None` for an empty bucket.
    pub fn quantile(&self, q: f64) -> Option<Estimate> {
        self.sketch().quantile(q).ok().map(|a| a.estimate)
    }

    /// A value that did not fit the form holding the bucket: the next form, or the sketch.
    #[cold]
    #[inline(never)]
    fn add_grown(&mut self, value: f64) {
        match &mut self.form {
            Form::Small(f) => {
                let mut g: Few<LARGE> = f.grown();
                g.values[g.len] = value;
                g.len += 1;
                self.form = Form::Large(Box::new(g));
            }
            Form::Large(_) | Form::Sketch(_) => {
                let _ = self.with_sketch(|s| s.insert(value));
            }
        }
    }
}
/// A merge the sketch refused, as the pipeline's merge error.
fn merge_error(e: QuantileError, ours: &DdSketch, theirs: &DdSketch) -> MergeError {
    match e {
        QuantileError::Incompatible(e) => e,
        // Only a count past 2^63 − 1 is left.
        _ => MergeError::Incompatible {
            field: "count (at most 2^63 - 1 values)",
            ours: ours.count(),
            theirs: theirs.count(),
        },
    }
}

impl BucketSummary for QuantileBucket {
    /// Adds the value whose bits `item` is (the record reader passes only finite values; a
    /// count past 2^63 − 1 values is refused by the sketch and cannot be reached). A value
    /// the sketch would refuse changes nothing, as there.
    #[inline]
    fn add(&mut self, item: u64, _bytes: &[u8]) {
        let value = f64::from_bits(item);
        if !value.is_finite() {
            return;
        }
        match &mut self.form {
            Form::Small(f) => {
                if let Some(x) = f.values.get_mut(f.len) {
                    *x = value;
                    f.len += 1;
                    return;
                }
            }
            Form::Large(f) => {
                if let Some(x) = f.values.get_mut(f.len) {
                    *x = value;
                    f.len += 1;
                    return;
                }
            }
            Form::Sketch(s) => {
                let _ = s.insert(value);
                return;
            }
        }
        self.add_grown(value);
    }

    /// Reads where the next value goes (the engine asks ahead of a batch of adds, so that
    /// their cache misses overlap); always true.
    #[inline]
    fn would_change(&self, _item: u64) -> bool {
        match &self.form {
            Form::Small(f) => std::hint::black_box(f.values.get(f.len).is_some_and(|v| v.is_nan())),
            Form::Large(f) => std::hint::black_box(f.values.get(f.len).is_some_and(|v| v.is_nan())),
            Form::Sketch(s) => std::hint::black_box(s.is_empty()),
        };
        true
    }

    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        let theirs = other.sketch();
        self.with_sketch(|ours| {
            ours.merge(&theirs)
                .map_err(|e| merge_error(e, ours, &theirs))
        })
    }

    fn to_bytes(&self) -> Vec<u8> {
        match &self.form {
            Form::Small(f) => self.empty.to_bytes_inserting(f.values()),
            Form::Large(f) => self.empty.to_bytes_inserting(f.values()),
            Form::Sketch(s) => s.to_bytes(),
        }
    }

    /// The median (a metric's rows and rules ask for their own quantiles); exactly 0 when
    /// empty.
    fn estimate(&self) -> Estimate {
        self.quantile(0.5).unwrap_or(Estimate::exact(0.0))
    }

    /// The form's allocation (the metric's empty sketch is shared, and counted nowhere); read
    /// off the form, so that dropping old buckets does not touch them to count them.
    fn heap_bytes(&self) -> usize {
        match &self.form {
            Form::Small(_) => std::mem::size_of::<Few<SMALL>>(),
            Form::Large(_) => std::mem::size_of::<Few<LARGE>>(),
            Form::Sketch(s) => s.bytes(),
        }
    }

    /// None: a quantile is not bounded by a count.
    fn upper(&self) -> f64 {
        f64::INFINITY
    }

    fn events(&self) -> Option<u64> {
        Some(match &self.form {
            Form::Small(f) => f.values().len() as u64,
            Form::Large(f) => f.values().len() as u64,
            Form::Sketch(s) => s.count(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tidemark::quantile::{BinLimit, Mapping};

    /// A quantile bucket is three words, within a summary's size (a distinct bucket's, inline,
    /// is larger).
    #[test]
    fn three_words() {
        assert!(std::mem::size_of::<QuantileBucket>() <= 3 * std::mem::size_of::<u64>());
        assert!(
            std::mem::size_of::<QuantileBucket>() < std::mem::size_of::<crate::kinds::Summary>()
        );
    }

    fn empty(limit: u64) -> DdSketch {
        DdSketch::with_limit(Mapping::cubic(0.01).unwrap(), BinLimit::new(limit).unwrap())
    }

    fn bucket(limit: u64, values: &[f64]) -> QuantileBucket {
        let mut b = QuantileBucket::new(empty(limit));
        for &v in values {
            b.add(v.to_bits(), b"");
        }
        b
    }

    /// The plain path: the sketch, each value inserted in order.
    fn plain(limit: u64, values: &[f64]) -> DdSketch {
        let mut s = empty(limit);
        for &v in values {
            let _ = s.insert(v);
        }
        s
    }

    fn values(most: usize) -> impl Strategy<Value = Vec<f64>> {
        proptest::collection::vec(
            prop_oneof![
                8 => 0.05f64..3_000.0,
                1 => -100.0f64..100.0,
                1 => prop_oneof![Just(0.0), Just(5e-324), Just(f64::NAN), Just(f64::INFINITY)],
            ],
            0..most,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 500,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x0051_A7E5),
            ..ProptestConfig::default()
        })]

        /// In every form (a few values, more, past the most kept: a sketch), a bucket's
        /// bytes, answers and events are the sketch's of the same values; so are a merge's,
        /// and a merge's of buckets read back.
        #[test]
        fn a_bucket_is_its_sketch(
            a in values(150),
            b in values(80),
            limit in prop_oneof![Just(4_096u64), 1u64..60],
        ) {
            let (x, y) = (bucket(limit, &a), bucket(limit, &b));
            let (px, py) = (plain(limit, &a), plain(limit, &b));
            prop_assert_eq!(x.to_bytes(), px.to_bytes());
            prop_assert_eq!(x.events(), Some(px.count()));
            for q in [0.0, 0.5, 0.99, 1.0] {
                prop_assert_eq!(x.quantile(q), px.quantile(q).ok().map(|e| e.estimate));
            }
            prop_assert_eq!(x.estimate(), BucketSummary::estimate(&bucket(limit, &a)));
            let mut m = x.clone();
            m.merge(&y).unwrap();
            let mut pm = px.clone();
            pm.merge(&py).unwrap();
            prop_assert_eq!(m.to_bytes(), pm.to_bytes());
            // A window's merge: into an empty bucket, each part in turn.
            let mut w = QuantileBucket::new(empty(limit));
            w.merge(&x).unwrap();
            w.merge(&QuantileBucket::from_bytes(&y.to_bytes(), &empty(limit)).unwrap()).unwrap();
            let mut pw = empty(limit);
            pw.merge(&px).unwrap();
            pw.merge(&py).unwrap();
            prop_assert_eq!(w.to_bytes(), pw.to_bytes());
            // Values after a merge go into the sketch.
            let mut late = x.clone();
            late.merge(&y).unwrap();
            late.add(12.5f64.to_bits(), b"");
            pm.insert(12.5).unwrap();
            prop_assert_eq!(late.to_bytes(), pm.to_bytes());
        }
    }
}
