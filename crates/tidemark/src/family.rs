//! The families of summaries: the byte at offset 5 of every encoding (FORMAT.md), which says
//! what the envelope holds. Its own module so that both the codec and the errors that name a
//! family can use it without depending on each other.

use core::fmt;

/// Which kind of summary an envelope holds. The discriminant is the stored byte; numbers are
/// assigned once and never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Family {
    /// [`crate::window::ExpHistogram`].
    ExpHistogram = 1,
    /// [`crate::window::BlockCounter`].
    BlockCounter = 2,
    /// HyperLogLog (any representation).
    Hll = 16,
    /// A ring of per-bucket HyperLogLogs.
    RingWindow = 17,
    /// The sliding HyperLogLog.
    SlidingHll = 18,
    /// ExaLogLog (any representation).
    ExaLogLog = 19,
    /// A ring of per-bucket ExaLogLogs.
    ExaLogLogRing = 20,
    /// Count-Min sketch.
    CountMin = 32,
    /// Exact item counts promoted to Count-Min with heavy-hitter candidates.
    ItemCounts = 33,
    /// Quotient filter.
    QuotientFilter = 48,
    /// Stack of quotient filters.
    StackedFilter = 49,
    /// Quotient filter with lengthening fingerprints (experimental).
    LengtheningFilter = 50,
    /// [`crate::quantile::DdSketch`].
    Quantiles = 64,
    /// A ring of per-bucket DDSketches ([`crate::quantile::QuantileRing`]).
    QuantileRing = 65,
}

impl Family {
    /// Every family, for lookups by byte.
    pub const ALL: [Family; 14] = [
        Family::ExpHistogram,
        Family::BlockCounter,
        Family::Hll,
        Family::RingWindow,
        Family::SlidingHll,
        Family::ExaLogLog,
        Family::ExaLogLogRing,
        Family::CountMin,
        Family::ItemCounts,
        Family::QuotientFilter,
        Family::StackedFilter,
        Family::LengtheningFilter,
        Family::Quantiles,
        Family::QuantileRing,
    ];

    /// The family of a stored byte, or `None` for a byte no version ever wrote.
    pub fn from_byte(b: u8) -> Option<Family> {
        Family::ALL.iter().copied().find(|f| *f as u8 == b)
    }

    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Family::ExpHistogram => "exponential histogram",
            Family::BlockCounter => "block counter",
            Family::Hll => "HyperLogLog",
            Family::RingWindow => "ring window",
            Family::SlidingHll => "sliding HyperLogLog",
            Family::ExaLogLog => "ExaLogLog",
            Family::ExaLogLogRing => "ExaLogLog ring",
            Family::CountMin => "Count-Min",
            Family::ItemCounts => "item counts",
            Family::QuotientFilter => "quotient filter",
            Family::StackedFilter => "stacked filter",
            Family::LengtheningFilter => "lengthening filter",
            Family::Quantiles => "DDSketch",
            Family::QuantileRing => "quantile ring",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
