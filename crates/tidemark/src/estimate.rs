//! [`Estimate`]: every answer tidemark gives, with its error bar (see the crate docs for
//! what a [`Bracket`] promises).

use core::fmt;

/// What the bracket `[low, high]` of an [`Estimate`] promises.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Bracket {
    /// The truth always lies in `[low, high]`.
    Guaranteed,
    /// The truth lies in `[low, high]` with probability at least `confidence` (in (0, 1)).
    Probabilistic {
        /// The probability that the bracket holds the truth.
        confidence: f64,
    },
}

/// How an estimate's point value was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Method {
    /// Counted exactly: `value == low == high`.
    Exact,
    /// The exponential histogram's centred estimate, total − (oldest − 1)/2.
    ExpHistogram,
    /// The exponential histogram's interpolation over the oldest bucket's time span.
    Interpolated,
    /// Fixed blocks: whole blocks plus a proportional share of the oldest.
    BlockCounter,
    /// HyperLogLog: Ertl's improved estimator over the register histogram (any sketch,
    /// merged or not).
    HllErtl,
    /// HyperLogLog: the martingale estimator of a sketch fed by one stream, unmerged (shown
    /// as `hll-hip`, the name its outputs have always carried).
    HllMartingale,
    /// HyperLogLog in Redis mode: counted exactly as Redis's PFCOUNT does.
    RedisPfcount,
    /// ExaLogLog: the bias-corrected maximum-likelihood estimate (any sketch, merged or not).
    ExaLogLogMl,
    /// ExaLogLog: the martingale estimate of a sketch fed by one stream, unmerged.
    ExaLogLogMartingale,
    /// Count-Min point query: the minimum over the rows (non-negative streams).
    CountMinMin,
    /// Count-Min point query: the median over the rows (general turnstile streams).
    CountMinMedian,
    /// Count-Min inner product: the minimum over the rows of the row-wise dot products.
    CountMinInnerProduct,
    /// Count-Min range sum: point queries over the dyadic intervals that cover the range.
    CountMinDyadic,
    /// A quotient filter's membership answer.
    QuotientFilter,
    /// A stack of quotient filters' membership answer.
    StackedFilter,
    /// The experimental lengthening filter's membership answer.
    LengtheningFilter,
    /// DDSketch: the representative of the bin holding the answer, within the sketch's
    /// relative accuracy α; the bracket is the bin's bounds, clamped to the minimum and
    /// maximum.
    QuantileBin,
    /// DDSketch: the answer fell in the bin a store's lowest bins collapsed into under its bin
    /// limit. The α bound does not hold for it; the bracket reaches down to the minimum.
    QuantileCollapsed,
    /// DDSketch rank: the values in lower bins plus half of those in the value's bin; the
    /// bracket counts the bin's values out and in.
    QuantileRank,
    /// DDSketch sum: the running sum of the values; the bracket sums each bin's bounds times
    /// its count.
    QuantileSum,
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Exact => "exact",
            Method::ExpHistogram => "exp-histogram",
            Method::Interpolated => "interpolated",
            Method::BlockCounter => "block-counter",
            Method::HllErtl => "hll-ertl",
            Method::HllMartingale => "hll-hip",
            Method::ExaLogLogMl => "exaloglog-ml",
            Method::ExaLogLogMartingale => "exaloglog-martingale",
            Method::RedisPfcount => "redis-pfcount",
            Method::CountMinMin => "count-min",
            Method::CountMinMedian => "count-min-median",
            Method::CountMinInnerProduct => "count-min-inner-product",
            Method::CountMinDyadic => "count-min-dyadic",
            Method::QuotientFilter => "quotient-filter",
            Method::StackedFilter => "stacked-filter",
            Method::LengtheningFilter => "lengthening-filter",
            Method::QuantileBin => "ddsketch",
            Method::QuantileCollapsed => "ddsketch-collapsed",
            Method::QuantileRank => "ddsketch-rank",
            Method::QuantileSum => "ddsketch-sum",
        })
    }
}

/// An answer: point value, bracket, what the bracket means and how the value was computed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The point estimate.
    pub value: f64,
    /// The bracket's lower end.
    pub low: f64,
    /// The bracket's upper end: for one-sided structures, the answer that never under-counts.
    pub high: f64,
    /// What `[low, high]` promises.
    pub bracket: Bracket,
    /// How `value` was computed.
    pub method: Method,
}

impl Estimate {
    /// An exact answer: the bracket is the point.
    pub fn exact(value: f64) -> Estimate {
        Estimate {
            value,
            low: value,
            high: value,
            bracket: Bracket::Guaranteed,
            method: Method::Exact,
        }
    }

    /// An answer whose bracket always holds the truth.
    pub fn guaranteed(value: f64, low: f64, high: f64, method: Method) -> Estimate {
        debug_assert!(low <= value && value <= high, "{low} <= {value} <= {high}");
        Estimate {
            value,
            low,
            high,
            bracket: Bracket::Guaranteed,
            method,
        }
    }

    /// An answer whose bracket holds the truth with probability `confidence`.
    pub fn probabilistic(
        value: f64,
        low: f64,
        high: f64,
        confidence: f64,
        method: Method,
    ) -> Estimate {
        debug_assert!(low <= value && value <= high, "{low} <= {value} <= {high}");
        Estimate {
            value,
            low,
            high,
            bracket: Bracket::Probabilistic { confidence },
            method,
        }
    }

    /// Whether `truth` lies in `[low, high]`.
    pub fn contains(&self, truth: f64) -> bool {
        self.low <= truth && truth <= self.high
    }

    /// `high − low`.
    pub fn width(&self) -> f64 {
        self.high - self.low
    }

    /// The probability the bracket holds: 1 for a guaranteed bracket.
    pub fn confidence(&self) -> f64 {
        match self.bracket {
            Bracket::Guaranteed => 1.0,
            Bracket::Probabilistic { confidence } => confidence,
        }
    }
}

impl fmt::Display for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [{}, {}]", self.value, self.low, self.high)?;
        match self.bracket {
            Bracket::Guaranteed => write!(f, " guaranteed"),
            Bracket::Probabilistic { confidence } => write!(f, " at {:.0}%", confidence * 100.0),
        }
    }
}
