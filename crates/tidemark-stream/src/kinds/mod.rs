//! Metric kinds: what a metric keeps per key and bucket, each kind in a folder of its own.
//!
//! A kind is two types. Its parameters implement [`MetricKind`]: the config keys it reads and
//! their validation, what an event gives it (nothing, an item, or a numeric value), its
//! fingerprint, how its buckets are built and decoded, the standard error its alert margins
//! use, the estimate an alert rule compares and the labelled answers of a query row. Its
//! bucket implements [`BucketSummary`]: adding an event, merging, encoding, the bucket's own
//! answer, its heap and the bound no window holding it can pass.
//!
//! The list at the end of this file is the one place kinds are registered: it makes [`Kind`]
//! (a metric's validated parameters, of whichever kind) and [`Summary`] (one key's bucket, of
//! whichever kind) and dispatches their methods. The engine, the config, the query and the
//! store's readers use those two alone.
//!
//! - [`count`]: exact events per bucket; the live window an exponential histogram.
//! - [`distinct`]: a HyperLogLog or ExaLogLog per bucket; the window a ring of buckets.
//! - [`frequency`]: item counts (exact, then Count-Min with the heavy items named).
//! - [`quantile`]: a numeric value's distribution, a DDSketch per bucket (answers within α).
//!
//! ```
//! use tidemark_stream::config::Config;
//! use tidemark_stream::engine::MetricShape;
//!
//! let config = Config::from_toml(
//!     "[input]\ntime_field = \"t\"\n[[metric]]\nname = \"users\"\nkind = \"distinct\"\n\
//!      key = []\nitem = [\"user\"]\nbucket = \"1m\"\nwindow = \"1h\"\n",
//! )
//! .unwrap();
//! let m = &config.metrics[0];
//! assert_eq!(m.kind.name(), "distinct");
//! // A bucket of the metric, two items added, answers exactly while small.
//! let shape = MetricShape::of(m);
//! let mut bucket = shape.empty(0);
//! bucket.add(1, b"");
//! bucket.add(2, b"");
//! assert_eq!(bucket.estimate().value, 2.0);
//! ```

use core::fmt;

use tidemark::{DecodeError, Estimate, MergeError};

use crate::error::ConfigError;
use crate::rule::AlertRule;

pub mod count;
pub mod distinct;
pub mod frequency;
pub mod keys;
pub mod quantile;

pub use count::{CountBucket, CountParams, CountWindow};
pub use distinct::{DistinctBucket, DistinctParams, SketchKind};
pub use frequency::{FrequencyBucket, FrequencyParams};
pub use keys::KindKeys;
pub use quantile::{QuantileBucket, QuantileParams};

/// What an event gives a metric besides its time and key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Nothing: the metric counts events (`item` must be empty).
    Events,
    /// An item: the `item` fields joined and hashed; `named` kinds keep the item's bytes too
    /// (to name their heavy items).
    Items {
        /// Whether the item's bytes are kept.
        named: bool,
    },
    /// A number: the `value` field, parsed as a finite 64-bit float (passed as its bits).
    Value,
}

/// How a metric keeps a key's live window (what a close evaluates).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WindowModel {
    /// An exponential histogram of the closed buckets' counts, within relative error ε/2.
    Histogram {
        /// The histogram's ε.
        epsilon: f64,
    },
    /// A ring of the closed bucket summaries, merged at each close.
    Ring,
}

/// What a query asks of a row beyond its estimate: the quantiles of a quantile metric
/// (`None`: the metric's own list).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ask<'a> {
    /// The quantiles a quantile metric's row answers.
    pub quantiles: Option<&'a [f64]>,
}

/// The label of one of a row's answers: an item's name, or a quantile.
#[derive(Clone, Debug, PartialEq)]
pub enum Label {
    /// A name (a frequency metric's item, lossy UTF-8).
    Text(String),
    /// A number (a quantile in (0, 1]).
    Number(f64),
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Label::Text(t) => f.write_str(t),
            Label::Number(n) => write!(f, "{n}"),
        }
    }
}

/// The subjects an alert tracks one by one within a key's window (a frequency window's named
/// items), and the bound of the rest (the items its sketch does not name).
#[derive(Clone, Debug)]
pub struct NamedSubjects {
    /// Each named subject with its window estimate.
    pub named: Vec<(Vec<u8>, Estimate)>,
    /// What any subject not named can reach.
    pub rest: Estimate,
}

/// What a metric keeps per key and bucket.
pub trait BucketSummary: Clone + fmt::Debug {
    /// Adds one event: its item's 64-bit hash and bytes (a count ignores both, a distinct
    /// summary the bytes, a frequency summary keeps the bytes of its heavy items), or for a
    /// kind over values the value's bits.
    fn add(&mut self, item: u64, bytes: &[u8]);
    /// Whether adding the item of hash `item` would change the summary. It reads what the
    /// add would, so asked ahead of a batch of adds it brings their memory into cache
    /// together (see [`crate::engine`]'s batches); the default answers true unread.
    #[inline]
    fn would_change(&self, _item: u64) -> bool {
        true
    }
    /// Merges another summary of the same bucket and shape into this one.
    fn merge(&mut self, other: &Self) -> Result<(), MergeError>;
    /// Adds a summary of another bucket of the same metric, as a window or a rollup of both
    /// holds them (a count bucket's own merge refuses another start; this adds).
    fn absorb(&mut self, other: &Self) -> Result<(), MergeError> {
        self.merge(other)
    }
    /// Encodes into the envelope.
    fn to_bytes(&self) -> Vec<u8>;
    /// The bytes the store keeps ([`crate::stored`]): by default the envelope's body.
    fn to_stored(&self) -> Vec<u8> {
        crate::stored::body(&self.to_bytes())
    }
    /// The summary's answer for its own bucket (or window, once merged).
    fn estimate(&self) -> Estimate;
    /// Heap bytes held (beyond the summary's own size).
    fn heap_bytes(&self) -> usize;
    /// A bound no window holding this bucket can pass through it, for any rule: a window
    /// made of buckets whose bounds sum to at most a rule's limit cannot fire that rule
    /// (`f64::INFINITY`: none).
    fn upper(&self) -> f64;
    /// The exact number of events summarised, if the summary keeps it.
    fn events(&self) -> Option<u64> {
        None
    }
    /// Subjects an alert tracks one by one within the window (`None`: the window is one).
    fn named_subjects(&self) -> Option<NamedSubjects> {
        None
    }
}

/// A metric kind: its validated parameters, and what they make.
pub trait MetricKind: Copy + PartialEq + fmt::Debug {
    /// The bucket summary it keeps per key.
    type Bucket: BucketSummary;
    /// Its name in the config (`kind = "…"`).
    const NAME: &'static str;
    /// The config keys of its own (besides those every metric has).
    const KEYS: &'static [&'static str];
    /// What an event gives it.
    const INPUT: Input;
    /// Whether an alert rule on it may fire early (before the close it aims at): a running
    /// bound on its window must exist.
    const EARLY_ALERTS: bool = true;
    /// Whether a window's merge is the same however its buckets are grouped first (so a
    /// ring may keep partial merges of them).
    const REGROUPS: bool = false;
    /// Whether a merge of a key's buckets answers at least what any window of them does
    /// (registers taking maxima), so a whole key under half a limit stays under it.
    const MONOTONE: bool = false;
    /// Whether an empty bucket is made by copying one (building a sketch costs more than a
    /// copy); a bucket that holds its start is built.
    const CLONES_EMPTY: bool = true;
    /// The field a row's labelled answers go under (`item`, `quantile`), if it has them.
    const PART: Option<&'static str> = None;

    /// Reads and validates its keys.
    fn parse(keys: &KindKeys<'_>) -> Result<Self, ConfigError>;
    /// Its parameters as the config fingerprint spells them (a store's config must match).
    fn fingerprint(&self) -> String;
    /// Refuses what a rule may not ask of this kind (the rule's keys named by `at`).
    fn check_rule(&self, rule: &AlertRule, at: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
        if rule.early && !Self::EARLY_ALERTS {
            return Err(ConfigError::invalid(
                at("early"),
                format!(
                    "false for a {} metric (its window has no running bound to alert on \
                     before a close)",
                    Self::NAME
                ),
                rule.early,
            ));
        }
        if let Some(q) = rule.quantile {
            return Err(ConfigError::invalid(
                at("quantile"),
                format!("no quantile for a {} metric", Self::NAME),
                q,
            ));
        }
        Ok(())
    }
    /// An empty bucket `[start, start + width)`.
    fn empty(&self, start: u64, width: u64) -> Self::Bucket;
    /// A bucket from its envelope, refusing one of other parameters.
    fn decode(&self, envelope: &[u8], start: u64, width: u64) -> Result<Self::Bucket, DecodeError>;
    /// A bucket from a stored count (`None`: the kind stores none).
    fn decode_count(&self, _start: u64, _width: u64, _count: u64) -> Option<Self::Bucket> {
        None
    }
    /// How a key's live window is kept.
    fn window_model(&self) -> WindowModel {
        WindowModel::Ring
    }
    /// The standard error of a window estimate near `x` (0 for exact and guaranteed answers).
    fn sigma_at(&self, _x: f64) -> f64 {
        0.0
    }
    /// The estimate of a window that `rule` compares.
    fn rule_estimate(&self, window: &Self::Bucket, _rule: &AlertRule) -> Estimate {
        window.estimate()
    }
    /// A window's answer in a query row (what `top` ranks by).
    fn rank(&self, window: &Self::Bucket, _ask: &Ask<'_>) -> Estimate {
        window.estimate()
    }
    /// A window's labelled answers in a query row (under [`MetricKind::PART`]).
    fn parts(&self, _window: &Self::Bucket, _ask: &Ask<'_>) -> Vec<(Label, Estimate)> {
        Vec::new()
    }
}

/// Makes [`Kind`] and [`Summary`] from the list of kinds, and dispatches their methods.
macro_rules! kinds {
    ($($(#[$doc:meta])* $variant:ident($params:ty, $bucket:ty)),+ $(,)?) => {
        /// What a metric summarises per key and bucket: its kind and validated parameters.
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum Kind {
            $($(#[$doc])* $variant($params),)+
        }

        /// One key's summary of one bucket (or of a window of them), of whichever kind its
        /// metric is.
        #[derive(Clone, Debug)]
        pub enum Summary {
            $($(#[$doc])* $variant($bucket),)+
        }

        /// Every kind's config name, in the list's order.
        pub const KIND_NAMES: &[&str] = &[$(<$params as MetricKind>::NAME),+];

        /// Every kind's own config keys, with the kind's name.
        const KIND_KEYS: &[(&str, &[&str])] =
            &[$((<$params as MetricKind>::NAME, <$params as MetricKind>::KEYS)),+];

        impl Kind {
            /// Parses the kind called `name` from its keys (`None`: no such kind).
            pub(crate) fn parse(
                name: &str,
                keys: &KindKeys<'_>,
            ) -> Option<Result<Kind, ConfigError>> {
                $(if name == <$params as MetricKind>::NAME {
                    return Some(<$params as MetricKind>::parse(keys).map(Kind::$variant));
                })+
                None
            }

            /// Its config name.
            pub fn name(&self) -> &'static str {
                match self { $(Kind::$variant(_) => <$params as MetricKind>::NAME,)+ }
            }

            /// Its parameters as the config fingerprint spells them.
            pub(crate) fn fingerprint(&self) -> String {
                match self { $(Kind::$variant(k) => k.fingerprint(),)+ }
            }

            /// What an event gives it.
            pub fn input(&self) -> Input {
                match self { $(Kind::$variant(_) => <$params as MetricKind>::INPUT,)+ }
            }

            /// The field its rows' labelled answers go under, if any.
            pub fn part(&self) -> Option<&'static str> {
                match self { $(Kind::$variant(_) => <$params as MetricKind>::PART,)+ }
            }

            pub(crate) fn regroups(&self) -> bool {
                match self { $(Kind::$variant(_) => <$params as MetricKind>::REGROUPS,)+ }
            }

            pub(crate) fn clones_empty(&self) -> bool {
                match self { $(Kind::$variant(_) => <$params as MetricKind>::CLONES_EMPTY,)+ }
            }

            pub(crate) fn monotone(&self) -> bool {
                match self { $(Kind::$variant(_) => <$params as MetricKind>::MONOTONE,)+ }
            }

            pub(crate) fn check_rule(
                &self,
                rule: &AlertRule,
                at: &dyn Fn(&str) -> String,
            ) -> Result<(), ConfigError> {
                match self { $(Kind::$variant(k) => k.check_rule(rule, at),)+ }
            }

            pub(crate) fn window_model(&self) -> WindowModel {
                match self { $(Kind::$variant(k) => k.window_model(),)+ }
            }

            pub(crate) fn sigma_at(&self, x: f64) -> f64 {
                match self { $(Kind::$variant(k) => k.sigma_at(x),)+ }
            }

            pub(crate) fn empty(&self, start: u64, width: u64) -> Summary {
                match self { $(Kind::$variant(k) => Summary::$variant(k.empty(start, width)),)+ }
            }

            pub(crate) fn decode(
                &self,
                envelope: &[u8],
                start: u64,
                width: u64,
            ) -> Result<Summary, DecodeError> {
                match self {
                    $(Kind::$variant(k) => k.decode(envelope, start, width).map(Summary::$variant),)+
                }
            }

            pub(crate) fn decode_count(&self, start: u64, width: u64, n: u64) -> Option<Summary> {
                match self {
                    $(Kind::$variant(k) => k.decode_count(start, width, n).map(Summary::$variant),)+
                }
            }

            /// `(estimate, labelled answers)` of a window summary of this kind, or what the
            /// summary itself says if it is of another kind (it cannot be: a metric's
            /// summaries are built and decoded by its kind).
            pub(crate) fn rule_estimate(&self, s: &Summary, rule: &AlertRule) -> Estimate {
                match (self, s) {
                    $((Kind::$variant(k), Summary::$variant(b)) => k.rule_estimate(b, rule),)+
                    #[allow(unreachable_patterns)]
                    (_, s) => s.estimate(),
                }
            }

            pub(crate) fn rank(&self, s: &Summary, ask: &Ask<'_>) -> Estimate {
                match (self, s) {
                    $((Kind::$variant(k), Summary::$variant(b)) => k.rank(b, ask),)+
                    #[allow(unreachable_patterns)]
                    (_, s) => s.estimate(),
                }
            }

            pub(crate) fn parts(&self, s: &Summary, ask: &Ask<'_>) -> Vec<(Label, Estimate)> {
                match (self, s) {
                    $((Kind::$variant(k), Summary::$variant(b)) => k.parts(b, ask),)+
                    #[allow(unreachable_patterns)]
                    _ => Vec::new(),
                }
            }
        }

        impl Summary {
            /// The kind's place in the list (what a refused merge reports).
            fn kind_index(&self) -> u64 {
                let mut i = 0u64;
                $(if let Summary::$variant(_) = self { return i; } i += 1;)+
                i
            }

            /// Adds one event (see [`BucketSummary::add`]).
            #[inline]
            pub fn add(&mut self, item: u64, bytes: &[u8]) {
                match self { $(Summary::$variant(b) => b.add(item, bytes),)+ }
            }

            /// Whether adding the item of hash `item` would change it (read-only).
            #[inline]
            pub(crate) fn would_change(&self, item: u64) -> bool {
                match self { $(Summary::$variant(b) => b.would_change(item),)+ }
            }

            /// Heap bytes held.
            pub(crate) fn heap_bytes(&self) -> usize {
                match self { $(Summary::$variant(b) => b.heap_bytes(),)+ }
            }

            /// The bound no window holding it can pass through it ([`BucketSummary::upper`]).
            pub(crate) fn upper(&self) -> f64 {
                match self { $(Summary::$variant(b) => b.upper(),)+ }
            }

            /// The bytes the store keeps.
            pub fn to_stored(&self) -> Vec<u8> {
                match self { $(Summary::$variant(b) => b.to_stored(),)+ }
            }

            /// The envelope.
            pub fn to_bytes(&self) -> Vec<u8> {
                match self { $(Summary::$variant(b) => b.to_bytes(),)+ }
            }

            /// The summary's own answer.
            pub fn estimate(&self) -> Estimate {
                match self { $(Summary::$variant(b) => b.estimate(),)+ }
            }

            /// The exact number of events summarised, if kept.
            pub fn events(&self) -> Option<u64> {
                match self { $(Summary::$variant(b) => b.events(),)+ }
            }

            /// Subjects an alert tracks one by one (see [`BucketSummary::named_subjects`]).
            pub(crate) fn named_subjects(&self) -> Option<NamedSubjects> {
                match self { $(Summary::$variant(b) => b.named_subjects(),)+ }
            }

            /// Adds a summary of another bucket of the same metric, as a window or a rollup
            /// of both holds them.
            pub fn absorb(&mut self, other: &Summary) -> Result<(), MergeError> {
                match (self, other) {
                    $((Summary::$variant(a), Summary::$variant(b)) => a.absorb(b),)+
                    #[allow(unreachable_patterns)]
                    (a, b) => Err(a.refuse(b)),
                }
            }

            /// Merges another summary of the same metric and bucket.
            pub fn merge(&mut self, other: &Summary) -> Result<(), MergeError> {
                match (self, other) {
                    $((Summary::$variant(a), Summary::$variant(b)) => a.merge(b),)+
                    #[allow(unreachable_patterns)]
                    (a, b) => Err(a.refuse(b)),
                }
            }

            fn refuse(&self, other: &Summary) -> MergeError {
                MergeError::Incompatible {
                    field: "metric kind",
                    ours: self.kind_index(),
                    theirs: other.kind_index(),
                }
            }
        }
    };
}

kinds! {
    /// Events: exact per bucket, an exponential histogram per key over the window.
    Count(CountParams, CountBucket),
    /// Distinct items: a HyperLogLog or ExaLogLog per bucket.
    Distinct(DistinctParams, DistinctBucket),
    /// Item frequencies: exact item counts while few, then Count-Min with the heavy items.
    Frequency(FrequencyParams, FrequencyBucket),
    /// The distribution of a numeric value: a DDSketch per bucket, answers within α.
    Quantile(QuantileParams, QuantileBucket),
}

impl Kind {
    /// The kinds that read config key `key`, joined by "or" (empty: none does).
    pub(crate) fn kinds_reading(key: &str) -> String {
        let names: Vec<&str> = KIND_KEYS
            .iter()
            .filter(|(_, keys)| keys.contains(&key))
            .map(|(name, _)| *name)
            .collect();
        names.join(" or ")
    }
}
