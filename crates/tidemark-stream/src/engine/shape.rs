//! How a metric builds, decodes, merges, rolls up and bounds its summaries: [`MetricShape`],
//! a metric's kind with its bucket width, an empty bucket to clone and the prototype its
//! stored bodies omit. What differs between kinds is dispatched in [`crate::kinds`].

use tidemark::DecodeError;

use crate::config::{Config, MetricConfig};
use crate::kinds::{Kind, WindowModel};
use crate::rule::AlertRule;
use crate::store::CombineError;
use crate::stored::{self, Prototype, Stored};

pub use crate::kinds::Summary;

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

impl MetricShape {
    /// The shape of a configured metric.
    pub fn of(m: &MetricConfig) -> MetricShape {
        MetricShape::with_width(m.kind, m.bucket)
    }

    fn with_width(kind: Kind, width: u64) -> MetricShape {
        let empty = kind.empty(0, width);
        let prototype = Prototype::of(&empty.to_bytes());
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

    /// The metric's kind.
    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    /// Whether a window's merge is the same however its buckets are grouped first (a
    /// distinct sketch's registers take maxima; a frequency bucket's heavy candidates are
    /// pruned against the total at each merge, so grouping could change them).
    pub(crate) fn regroups(&self) -> bool {
        self.kind.regroups()
    }

    /// Whether the key's live window is a ring of closed buckets (else a histogram).
    pub(crate) fn rings(&self) -> bool {
        self.kind.window_model() == WindowModel::Ring
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
    ) -> Result<Summary, CombineError> {
        let mut acc = into.empty(start);
        for (s0, bytes) in parts {
            let s = self.decode(bytes, *s0).map_err(CombineError::Decode)?;
            acc.absorb(&s).map_err(CombineError::Merge)?;
        }
        Ok(acc)
    }

    /// An empty summary for the bucket starting at `start`.
    pub fn empty(&self, start: u64) -> Summary {
        if self.kind.clones_empty() {
            self.empty.clone()
        } else {
            self.kind.empty(start, self.width)
        }
    }

    /// `parts` — summaries of this shape — merged into an empty one starting at `start`, each
    /// as a window holds it ([`Summary::absorb`]: a count's buckets add): a window's summary,
    /// whose estimator is a merged sketch's however its buckets came (built here, or read
    /// back).
    pub(crate) fn merged<'a>(
        &self,
        start: u64,
        parts: impl IntoIterator<Item = &'a Summary>,
    ) -> Summary {
        let mut acc = self.empty(start);
        for s in parts {
            acc.absorb(s).expect(
                "a metric's summaries all have its shape: built by it, or decoded by it (which \
                 refuses another kind, precision, ε, δ or φ), and a count's buckets add \
                 without a check, so no input makes an absorb refuse",
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
                return self
                    .kind
                    .decode_count(start, self.width, n)
                    .ok_or(DecodeError::Invalid {
                        field: "stored tag",
                        offset: 0,
                        expected: "a summary's body: the metric is not a count",
                        got: 2,
                    });
            }
        };
        self.kind.decode(bytes, start, self.width)
    }

    /// What a rule compares its chosen end of the estimate with: the threshold plus the
    /// margin in standard errors at the threshold.
    pub fn limit(&self, rule: &AlertRule) -> f64 {
        rule.above + rule.margin * self.sigma_at(rule.above)
    }

    /// The smallest limit of `rules` (infinite for none): a window no larger cannot fire any.
    pub(crate) fn min_limit<'r>(&self, rules: impl IntoIterator<Item = &'r AlertRule>) -> f64 {
        rules
            .into_iter()
            .map(|r| self.limit(r))
            .fold(f64::INFINITY, f64::min)
    }

    /// The standard error of an estimate near `x` (0 for exact and guaranteed answers, and for
    /// Count-Min, whose error is one-sided and bounded, not normal: alert on `low` or `high`).
    pub fn sigma_at(&self, x: f64) -> f64 {
        self.kind.sigma_at(x)
    }
}
