//! A frequency metric's bucket: the key's item counts ([`ItemCounts`]) — exact while few,
//! then a Count-Min sketch (Cormode, Muthukrishnan, J. Algorithms 2005) with the items
//! reaching φ of the key's events kept by name. Merging adds counters and unites the named
//! items, so a window still names every item reaching φ of it. Its single answer, for alerts
//! and top keys, is the count of the key's most frequent item.

use tidemark::frequency::ItemCounts;
use tidemark::{DecodeError, Estimate, MergeError, Method};

use crate::kinds::{BucketSummary, NamedSubjects};

/// The item counts of one key in one bucket (see [`ItemCounts`]).
#[derive(Clone, Debug)]
pub struct FrequencyBucket {
    /// Boxed: the counts are large, and a summary is held per key.
    counts: Box<ItemCounts>,
}

impl FrequencyBucket {
    /// An empty bucket of the metric's ε, δ and φ (validated by the config).
    pub(crate) fn new(epsilon: f64, delta: f64, phi: f64) -> FrequencyBucket {
        FrequencyBucket {
            counts: Box::new(ItemCounts::new(epsilon, delta, phi).expect(
                "a frequency metric's ε, δ and φ come from Config::from_toml, which refuses what \
                 ItemCounts::new would",
            )),
        }
    }

    /// Decodes a stored bucket, refusing one of other parameters (it would not merge).
    pub fn from_bytes(
        bytes: &[u8],
        epsilon: f64,
        delta: f64,
        phi: f64,
    ) -> Result<FrequencyBucket, DecodeError> {
        let counts = ItemCounts::from_bytes(bytes)?;
        if (counts.epsilon(), counts.delta(), counts.phi()) != (epsilon, delta, phi) {
            return Err(DecodeError::Invalid {
                field: "item counts parameters",
                offset: tidemark::codec::HEADER_LEN,
                expected: "the metric's epsilon, delta and phi",
                got: counts.epsilon().to_bits(),
            });
        }
        Ok(FrequencyBucket {
            counts: Box::new(counts),
        })
    }

    /// The counts.
    pub fn counts(&self) -> &ItemCounts {
        &self.counts
    }
}

impl BucketSummary for FrequencyBucket {
    #[inline]
    fn add(&mut self, item: u64, bytes: &[u8]) {
        self.counts.insert_hashed(item, bytes, 1);
    }

    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        self.counts.merge(&other.counts)
    }

    fn to_bytes(&self) -> Vec<u8> {
        self.counts.to_bytes()
    }

    /// The count of the key's most frequent item.
    fn estimate(&self) -> Estimate {
        self.counts.heaviest_count()
    }

    fn heap_bytes(&self) -> usize {
        self.counts.bytes()
    }

    /// Its number of events: no item, nor φ of them, counts more.
    fn upper(&self) -> f64 {
        self.counts.total() as f64
    }

    fn events(&self) -> Option<u64> {
        Some(self.counts.total())
    }

    /// Each item the window names is its own subject (a second source hammering a host
    /// while the first still is raises its own alert); the items the sketch does not name
    /// each count below φN: one more subject, `[0, φN]`.
    fn named_subjects(&self) -> Option<NamedSubjects> {
        let rest = self
            .counts
            .unnamed_bound()
            .map_or(Estimate::exact(0.0), |b| {
                Estimate::guaranteed(0.0, 0.0, b, Method::CountMinMin)
            });
        Some(NamedSubjects {
            named: self.counts.named(),
            rest,
        })
    }
}
