//! A sketch's bytes straight from a few values: [`DdSketch::to_bytes_inserting`].
//!
//! Why: a streaming bucket of a quantile metric (one key's values in one minute) holds a few
//! values — 14 on average in the latency demo, over about 50 bins at α = 1% — yet a sketch of
//! them allocates a store of 64 zeroed bins, often grows and moves it, and every insert
//! reaches that store through the sketch: in a keyed pipeline, two cache misses a value and
//! most of what a quantile metric cost beyond a count. A bucket can instead keep its values
//! in arrival order and encode them once, at its close: their keys computed in one loop,
//! sorted, and the bins coded from the sorted run, with no store at all.
//!
//! The bytes are exactly those of the plain path — an empty sketch, each value
//! [`inserted`](DdSketch::insert) in order, then [`DdSketch::to_bytes`]: the sum is added
//! in the values' order (floating-point addition is not associative), the extremes are kept
//! by the same comparisons, and the bins are the same counts. Anything the fast path does
//! not cover — more than [`MAX_FEW_VALUES`] values, a sketch that is not empty, a value that
//! is zero, subnormal or not finite, a span of keys past the bin limit (a collapse) — takes
//! the plain path. A property test holds the two to the same bytes.

use super::bits::{put_varint, write_narrow_counts};
use super::encoding::{envelope, write_bins, write_head};
use super::mapping::MIN_INDEXABLE;
use super::sketch::DdSketch;

/// The most values [`DdSketch::to_bytes_inserting`] encodes without building a sketch.
pub const MAX_FEW_VALUES: usize = 64;

/// Spans of keys up to this are counted in an array on the stack, wider ones sorted (at
/// α = 1%, 256 bins span a factor of 170 between a bucket's smallest and largest value).
const DENSE_SPAN: usize = 256;

const SIGN: u64 = 1 << 63;
const MIN_BITS: u64 = MIN_INDEXABLE.to_bits();
const INFINITY_BITS: u64 = f64::INFINITY.to_bits();

impl DdSketch {
    /// The bytes of this sketch after [`DdSketch::insert`] of each of `values` in order (a
    /// value insert refuses is skipped, as there), leaving this sketch as it is:
    ///
    /// ```
    /// use tidemark::quantile::DdSketch;
    ///
    /// let empty = DdSketch::new(0.01).unwrap();
    /// let values = [12.5, 3.0, 40.25, 12.0, -7.5];
    /// let mut plain = empty.clone();
    /// for &v in &values {
    ///     plain.insert(v).unwrap();
    /// }
    /// assert_eq!(empty.to_bytes_inserting(&values), plain.to_bytes());
    /// ```
    ///
    /// For an empty sketch and up to [`MAX_FEW_VALUES`] values it builds no store (see the
    /// module documentation): what a bucket that keeps its few values calls at its close.
    pub fn to_bytes_inserting(&self, values: &[f64]) -> Vec<u8> {
        match self.few_body(values) {
            Some(body) => envelope(self.mapping(), self.bin_limit(), &body),
            None => {
                let mut s = self.clone();
                for &v in values {
                    let _ = s.insert(v);
                }
                s.to_bytes()
            }
        }
    }

    /// The body of this (empty) sketch with `values` inserted, or `None` where the fast path
    /// does not apply.
    fn few_body(&self, values: &[f64]) -> Option<Vec<u8>> {
        let (min, max, sum, min_exact, max_exact) = self.scalars();
        let pristine = self.count() == 0
            && sum.to_bits() == 0
            && min_exact
            && max_exact
            && !self.is_collapsed();
        if values.len() > MAX_FEW_VALUES || !pristine {
            return None;
        }
        let mapping = self.mapping();
        // Store keys by sign: the negative store's are the negated keys of |x|.
        let mut negative = [0i64; MAX_FEW_VALUES];
        let mut positive = [0i64; MAX_FEW_VALUES];
        let (mut n_neg, mut n_pos) = (0, 0);
        let (mut sum, mut min, mut max) = (sum, min, max);
        for &value in values {
            let bits = value.to_bits();
            let magnitude = bits & !SIGN;
            // Normal and finite, as `insert`'s fast path.
            if magnitude.wrapping_sub(MIN_BITS) >= INFINITY_BITS - MIN_BITS {
                return None;
            }
            sum += value;
            if value < min {
                min = value;
            }
            if value > max {
                max = value;
            }
            let key = mapping.index_bits(magnitude);
            if (bits as i64) >= 0 {
                positive[n_pos] = key;
                n_pos += 1;
            } else {
                negative[n_neg] = -key;
                n_neg += 1;
            }
        }
        let negative = &mut negative[..n_neg];
        let positive = &mut positive[..n_pos];
        let limit = self.bin_limit() as i64;
        let span = |keys: &[i64]| {
            let lo = keys.iter().copied().min()?;
            let hi = keys.iter().copied().max()?;
            Some((lo, hi))
        };
        let spans = [span(negative), span(positive)];
        if spans.iter().flatten().any(|&(lo, hi)| hi - lo >= limit) {
            return None;
        }
        let mut out = Vec::with_capacity(64 + 2 * values.len());
        write_head(
            &mut out,
            (true, true),
            values.len() as u64,
            (min, max, sum),
            0,
        );
        for (keys, span) in [negative, positive].into_iter().zip(spans) {
            let Some((lo, hi)) = span else {
                put_varint(&mut out, 0);
                continue;
            };
            if hi - lo < DENSE_SPAN as i64 {
                // The bins counted in place: no sort.
                let mut counts = [0u32; DENSE_SPAN];
                for &k in keys.iter() {
                    counts[(k - lo) as usize] += 1;
                }
                let counts = &counts[..(hi - lo + 1) as usize];
                write_bins(&mut out, (lo, hi), None, |out| {
                    write_narrow_counts(out, counts.iter().copied())
                });
                continue;
            }
            // A wide span: the keys sorted, and the non-empty bins as (key, count).
            keys.sort_unstable();
            let mut bins = [(0i64, 0u32); MAX_FEW_VALUES];
            let mut held = 0;
            for &k in keys.iter() {
                if held > 0 && bins[held - 1].0 == k {
                    bins[held - 1].1 += 1;
                } else {
                    bins[held] = (k, 1);
                    held += 1;
                }
            }
            let run = Run {
                bins: &bins[..held],
                next: lo,
            };
            write_bins(&mut out, (lo, hi), None, |out| {
                write_narrow_counts(out, run)
            });
        }
        Some(out)
    }
}

/// The counts of every key from the first of `bins` (non-empty bins by increasing key) to
/// the last, zeros between.
struct Run<'a> {
    bins: &'a [(i64, u32)],
    /// The next key; at most the first of `bins`.
    next: i64,
}

impl Iterator for Run<'_> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        let (&(key, count), rest) = self.bins.split_first()?;
        self.next += 1;
        if self.next <= key {
            return Some(0);
        }
        self.bins = rest;
        Some(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantile::{BinLimit, Mapping};
    use proptest::prelude::*;

    /// The plain path: an empty sketch, each value inserted in order.
    fn plain(empty: &DdSketch, values: &[f64]) -> DdSketch {
        let mut s = empty.clone();
        for &v in values {
            let _ = s.insert(v);
        }
        s
    }

    fn empty(schema: Option<i8>, alpha: f64, limit: u64) -> DdSketch {
        let mapping = match schema {
            Some(s) => Mapping::schema(s).unwrap(),
            None => Mapping::cubic(alpha).unwrap(),
        };
        DdSketch::with_limit(mapping, BinLimit::new(limit).unwrap())
    }

    /// Values of every kind the fast path meets or refuses: latencies, both signs, wide
    /// spans (a collapse at a small limit), zeros, subnormals, repeats, ±∞ and NaN.
    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            8 => 0.1f64..500.0,
            2 => -1e3f64..1e3,
            2 => (1u32..40).prop_map(|k| k as f64 * 0.5),
            1 => -1e300f64..1e300,
            1 => prop_oneof![
                Just(0.0),
                Just(-0.0),
                Just(5e-324),
                Just(-2.2e-308),
                Just(f64::MIN_POSITIVE),
                Just(f64::MAX),
                Just(f64::INFINITY),
                Just(f64::NAN),
            ],
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2_000,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x007D_F3A1),
            ..ProptestConfig::default()
        })]

        /// The same bytes as the plain path, and so the same sketch read back (the same
        /// answers), for any values, mapping and bin limit.
        #[test]
        fn the_bytes_of_the_plain_path(
            values in proptest::collection::vec(value(), 0..80),
            schema in prop_oneof![Just(None), (-4i8..=8).prop_map(Some)],
            alpha in prop_oneof![Just(0.01), 0.0005f64..0.2],
            limit in prop_oneof![Just(4_096u64), 1u64..80],
        ) {
            let empty = empty(schema, alpha, limit);
            let want = plain(&empty, &values);
            let got = empty.to_bytes_inserting(&values);
            prop_assert_eq!(&got, &want.to_bytes());
            let back = DdSketch::from_bytes(&got).unwrap();
            prop_assert!(back == want);
            for q in [0.0, 0.25, 0.5, 0.9, 0.99, 1.0] {
                prop_assert_eq!(back.quantile(q).ok(), want.quantile(q).ok());
            }
        }

        /// Latencies of either sign, up to the most values: the fast path, and its bytes.
        #[test]
        fn latencies_take_the_fast_path(
            values in proptest::collection::vec(
                prop_oneof![4 => 0.05f64..2_000.0, 1 => -50.0f64..-0.001],
                0..=MAX_FEW_VALUES,
            ),
            alpha in prop_oneof![Just(0.01), 0.001f64..0.1],
        ) {
            let empty = empty(None, alpha, 4_096);
            let body = empty.few_body(&values);
            prop_assert!(body.is_some());
            prop_assert_eq!(empty.to_bytes_inserting(&values), plain(&empty, &values).to_bytes());
        }

        /// A sketch that is not empty takes the plain path: the bytes of it and the values.
        #[test]
        fn a_sketch_holding_values_takes_the_plain_path(
            before in proptest::collection::vec(value(), 0..10),
            values in proptest::collection::vec(value(), 0..20),
        ) {
            let start = plain(&empty(None, 0.01, 4_096), &before);
            prop_assert_eq!(start.to_bytes_inserting(&values), plain(&start, &values).to_bytes());
        }
    }

    #[test]
    fn no_values_are_the_empty_sketch() {
        let e = empty(None, 0.01, 4_096);
        assert_eq!(e.to_bytes_inserting(&[]), e.to_bytes());
        assert!(e.few_body(&[]).is_some());
        // Past the fast path's reach: still the plain path's bytes.
        let many: Vec<f64> = (0..200).map(|i| 1.0 + i as f64).collect();
        assert!(e.few_body(&many).is_none());
        assert_eq!(e.to_bytes_inserting(&many), plain(&e, &many).to_bytes());
    }
}
