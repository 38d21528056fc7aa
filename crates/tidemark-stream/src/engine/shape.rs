//! The one place a metric kind is dispatched on: [`Summary`] (one key's bucket of whichever
//! kind) and [`MetricShape`] (how a metric builds, decodes, merges, rolls up and bounds its
//! summaries). Adding a kind is a variant here and its bucket type in [`crate::summary`].

use tidemark::{DecodeError, Estimate};

use crate::config::{AlertRule, Config, Kind, MetricConfig};
use crate::stored::{self, Prototype, Stored};
use crate::summary::{BucketSummary, CountBucket, DistinctBucket, FrequencyBucket};

/// One key's summary of one bucket, of whichever kind its metric is.
#[derive(Clone, Debug)]
pub enum Summary {
    /// A count metric's bucket.
    Count(CountBucket),
    /// A distinct metric's bucket.
    Distinct(DistinctBucket),
    /// A frequency metric's bucket (boxed: it is large, and a summary is held per key).
    Frequency(Box<FrequencyBucket>),
}

impl Summary {
    fn kind_byte(&self) -> u64 {
        match self {
            Summary::Count(_) => 0,
            Summary::Distinct(_) => 1,
            Summary::Frequency(_) => 2,
        }
    }

    #[inline]
    pub(crate) fn add(&mut self, item: u64, bytes: &[u8]) {
        match self {
            Summary::Count(c) => c.add(item, bytes),
            Summary::Distinct(d) => d.add(item, bytes),
            Summary::Frequency(f) => f.add(item, bytes),
        }
    }

    /// Whether adding the item of hash `item` would change the summary. It reads what the
    /// add would (a distinct bucket's slot for the item), so asked ahead of a batch of adds
    /// it brings their memory into cache together (see [`super::batch`]); a count or
    /// frequency bucket answers true without reading.
    #[inline]
    pub(crate) fn would_change(&self, item: u64) -> bool {
        match self {
            Summary::Distinct(d) => d.would_change(item),
            Summary::Count(_) | Summary::Frequency(_) => true,
        }
    }

    /// Heap bytes the summary holds (its size in memory beyond the enum itself).
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Summary::Count(_) => 0,
            Summary::Distinct(d) => d.heap_bytes(),
            Summary::Frequency(f) => f.counts().bytes(),
        }
    }

    /// A bound no window holding this bucket can pass through it: a window made of buckets
    /// whose bounds sum to at most a rule's limit cannot fire that rule. Exact counts bound
    /// themselves; a distinct bucket only while exact (an estimate has no hard bound); a
    /// frequency bucket by its number of events (no item, nor φ of them, can count more).
    pub(crate) fn upper(&self) -> f64 {
        match self {
            Summary::Count(c) => c.count() as f64,
            Summary::Distinct(d) => {
                let e = d.estimate();
                if e.low == e.high {
                    e.high
                } else {
                    f64::INFINITY
                }
            }
            Summary::Frequency(f) => f.counts().total() as f64,
        }
    }

    /// The bytes the store keeps ([`crate::stored`]): a count, or the envelope's body.
    pub fn to_stored(&self) -> Vec<u8> {
        match self {
            Summary::Count(c) => stored::count(c.count()),
            other => stored::body(&other.envelope()),
        }
    }

    /// The summary's envelope.
    fn envelope(&self) -> Vec<u8> {
        match self {
            Summary::Count(c) => c.to_bytes(),
            Summary::Distinct(d) => d.to_bytes(),
            Summary::Frequency(f) => f.to_bytes(),
        }
    }

    /// The bucket's own answer.
    pub fn estimate(&self) -> Estimate {
        match self {
            Summary::Count(c) => c.estimate(),
            Summary::Distinct(d) => d.estimate(),
            Summary::Frequency(f) => f.estimate(),
        }
    }

    /// Adds a summary of another bucket of the same metric, as a window or a rollup of both
    /// holds them: counts add (a count bucket's own merge keeps its start), sketches merge.
    pub fn absorb(&mut self, other: &Summary) -> Result<(), tidemark::MergeError> {
        match (self, other) {
            (Summary::Count(a), Summary::Count(b)) => {
                a.add_count(b.count());
                Ok(())
            }
            (a, b) => a.merge(b),
        }
    }

    /// Merges another summary of the same metric and bucket.
    pub fn merge(&mut self, other: &Summary) -> Result<(), tidemark::MergeError> {
        match (self, other) {
            (Summary::Count(a), Summary::Count(b)) => a.merge(b),
            (Summary::Distinct(a), Summary::Distinct(b)) => a.merge(b),
            (Summary::Frequency(a), Summary::Frequency(b)) => a.merge(b),
            (a, b) => Err(tidemark::MergeError::Incompatible {
                field: "metric kind",
                ours: a.kind_byte(),
                theirs: b.kind_byte(),
            }),
        }
    }
}

/// How a metric builds and reads its summaries.
#[derive(Clone, Debug)]
pub struct MetricShape {
    kind: Kind,
    width: u64,
    /// An empty bucket to clone (a count bucket takes its start instead): building a
    /// HyperLogLog from scratch costs more than copying one.
    empty: Summary,
    /// What a stored body omits: the envelope fields of the metric's summaries.
    prototype: Prototype,
}

/// Summaries with a ring of closed buckets as their live window (merged at each close).
pub(crate) fn rings(kind: Kind) -> bool {
    matches!(kind, Kind::Distinct { .. } | Kind::Frequency { .. })
}

impl MetricShape {
    /// The shape of a configured metric.
    pub fn of(m: &MetricConfig) -> MetricShape {
        MetricShape::with_width(m.kind, m.bucket)
    }

    fn with_width(kind: Kind, width: u64) -> MetricShape {
        let empty = match kind {
            Kind::Count { .. } => Summary::Count(CountBucket::new(0, width)),
            Kind::Distinct { precision, sketch } => {
                Summary::Distinct(DistinctBucket::of(sketch, precision))
            }
            Kind::Frequency {
                epsilon,
                delta,
                phi,
            } => Summary::Frequency(Box::new(FrequencyBucket::new(epsilon, delta, phi))),
        };
        let prototype = Prototype::of(&empty.envelope());
        MetricShape {
            kind,
            width,
            empty,
            prototype,
        }
    }

    /// The shape of a metric's rollup buckets (the rollup width), if it has rollups.
    pub fn rollup_of(m: &MetricConfig) -> Option<MetricShape> {
        Some(MetricShape::with_width(m.kind, m.rollup?))
    }

    /// The metric and shape a stored name denotes: a metric's name, or its rollup name
    /// (`fanout@1h`).
    pub fn for_name(config: &Config, name: &str) -> Option<(usize, MetricShape)> {
        let (i, rollup) = MetricShape::metric_of(config, name)?;
        let m = &config.metrics[i];
        if rollup {
            MetricShape::rollup_of(m).map(|s| (i, s))
        } else {
            Some((i, MetricShape::of(m)))
        }
    }

    /// The metric a stored name denotes, and whether the name is its rollup's.
    pub(crate) fn metric_of(config: &Config, name: &str) -> Option<(usize, bool)> {
        config.metrics.iter().enumerate().find_map(|(i, m)| {
            if m.name == name {
                Some((i, false))
            } else if m.rollup_name().as_deref() == Some(name) {
                Some((i, true))
            } else {
                None
            }
        })
    }

    /// Whether a window's merge is the same however its buckets are grouped first: a
    /// distinct sketch's registers take maxima. (A frequency bucket's heavy candidates are
    /// pruned against the total at each merge, so grouping could change them.)
    pub(crate) fn merges_by_union(&self) -> bool {
        matches!(self.kind, Kind::Distinct { .. })
    }

    /// The bucket width, ms.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// Merges `parts` — `(start, bytes)` of buckets of this shape — into one bucket of the
    /// `into` shape starting at `start` (a rollup): counts add, sketches merge.
    pub fn roll(
        &self,
        into: &MetricShape,
        start: u64,
        parts: &[(u64, Vec<u8>)],
    ) -> Result<Summary, String> {
        let mut acc = into.empty(start);
        for (s0, bytes) in parts {
            let s = self.decode(bytes, *s0).map_err(|e| e.to_string())?;
            acc.absorb(&s).map_err(|e| e.to_string())?;
        }
        Ok(acc)
    }

    /// An empty summary for the bucket starting at `start`.
    pub fn empty(&self, start: u64) -> Summary {
        match &self.empty {
            Summary::Count(_) => Summary::Count(CountBucket::new(start, self.width)),
            other => other.clone(),
        }
    }

    /// `parts` — summaries of this shape — merged into an empty one starting at `start`: a
    /// window's summary, whose estimator is a merged sketch's however its buckets came (built
    /// here, or read back).
    pub(crate) fn merged<'a>(
        &self,
        start: u64,
        parts: impl IntoIterator<Item = &'a Summary>,
    ) -> Summary {
        let mut acc = self.empty(start);
        for s in parts {
            acc.merge(s).expect(
                "a metric's summaries all have its shape: built by it, or decoded by it (which \
                 refuses another kind, precision, ε, δ or φ), so no input makes a merge refuse",
            );
        }
        acc
    }

    /// Decodes a stored summary of the bucket starting at `start`: its stored form
    /// ([`crate::stored`]) or, from stores written before it, a whole envelope.
    pub fn decode(&self, bytes: &[u8], start: u64) -> Result<Summary, DecodeError> {
        let expanded;
        let bytes = match stored::read(bytes)? {
            Stored::Envelope(e) => e,
            Stored::Body(b) => {
                expanded = self.prototype.expand(b)?;
                &expanded
            }
            Stored::Exact(hashes) => {
                expanded = self.prototype.expand_exact(hashes)?;
                &expanded
            }
            Stored::Count(n) => {
                return match self.kind {
                    Kind::Count { .. } => {
                        Ok(Summary::Count(CountBucket::holding(start, self.width, n)))
                    }
                    _ => Err(DecodeError::Invalid {
                        field: "stored tag",
                        offset: 0,
                        expected: "a summary's body: the metric is not a count",
                        got: 2,
                    }),
                };
            }
        };
        match self.kind {
            Kind::Count { .. } => Ok(Summary::Count(CountBucket::from_bytes(
                bytes, start, self.width,
            )?)),
            Kind::Distinct { precision, sketch } => Ok(Summary::Distinct(
                DistinctBucket::from_bytes(bytes, sketch, precision)?,
            )),
            Kind::Frequency {
                epsilon,
                delta,
                phi,
            } => Ok(Summary::Frequency(Box::new(FrequencyBucket::from_bytes(
                bytes, epsilon, delta, phi,
            )?))),
        }
    }

    /// What a rule compares its chosen end of the estimate with: the threshold plus the
    /// margin in standard errors at the threshold.
    pub fn limit(&self, rule: &AlertRule) -> f64 {
        rule.above + rule.margin * self.sigma_at(rule.above)
    }

    /// The standard error of an estimate near `x` (0 for exact and guaranteed answers, and for
    /// Count-Min, whose error is one-sided and bounded, not normal: alert on `low` or `high`).
    pub fn sigma_at(&self, x: f64) -> f64 {
        match self.kind {
            Kind::Distinct { precision, sketch } => x.abs() * sketch.rse(precision),
            _ => 0.0,
        }
    }
}
