//! Sliding-window counts: the exponential histogram and the block counter it improves on.
//!
//! References: M. Datar, A. Gionis, P. Indyk, R. Motwani, *Maintaining Stream Statistics over
//! Sliding Windows*, SIAM Journal on Computing 31(6), 2002 (SODA 2002).
//!
//! # The problem
//!
//! "How many ones among the last `W` arrivals" (or "how many events in the last `T` ticks")
//! cannot be answered by a counter, a Count-Min sketch or a HyperLogLog: to forget an arrival
//! at time `t` they would have to know what arrived at `t − W`, and they discarded it. Keeping
//! the window costs `W` bits, which is optimal for an exact answer.
//!
//! # The exponential histogram (Datar, Gionis, Indyk, Motwani 2002)
//!
//! [`ExpHistogram`] keeps buckets, each with a size (a power of two) and the timestamp of the
//! newest arrival it covers. On a one: append a bucket of size 1; while more than `k + 1`
//! buckets share a size, merge the two oldest of that size into one of twice the size that
//! keeps the *newer* timestamp; drop buckets whose timestamp has left the window.
//!
//! Every bucket but the oldest lies wholly inside the window. The oldest straddles its edge:
//! between 1 and all of its `size` ones are still inside. So with `total` the sum of sizes,
//!
//! ```text
//! low   = total − size + 1        (only the oldest bucket's newest one is inside)
//! high  = total                   (all of it is inside: the one-sided answer for limits)
//! value = total − (size − 1) / 2  (the midpoint)
//! ```
//!
//! and the truth is always in `[low, high]`. The estimate subtracts `(size − 1)/2`, not the
//! textbook `size/2`: a bucket of size 1 is certain, and a window whose buckets all have size 1
//! is answered exactly. Since at least `k` buckets of every smaller size stand behind the
//! oldest, `total ≥ k·size`, so `|value − truth| ≤ (size − 1)/2 < truth/(2k)`: with
//! `k = ⌈1/ε⌉` the relative error is at most `ε/2`.
//!
//! Merges only ever combine two buckets of size `2^j` into one of `2^(j+1)`, so a stream of `N`
//! ones causes fewer than `N` merges (amortised below one per arrival); one arrival can cascade
//! through every size, `O(log N)` merges. The bucket count is about `k·log2(N/k)`.
//!
//! Keeping the *newer* timestamp on a merge makes the raw sum an over-count (buckets survive
//! until their last one expires), which is why [`ExpHistogram::upper_bound`] never
//! under-counts.
//!
//! # Interpolation
//!
//! The whole error is the oldest bucket, so tidemark also remembers the earliest time that
//! bucket's ones can have arrived (its first arrival, or just after the bucket dropped before
//! it) and can interpolate linearly over that span ([`ExpHistogram::interpolated`]). This is
//! not a bound — the ones may cluster at either end — so the bracket stays untouched.
//!
//! # Sums
//!
//! An arrival can carry a non-negative integer `v` ([`ExpHistogram::push_value`]): it acts as
//! `v` ones at the same timestamp. tidemark inserts the `v` ones in one pass per size, at
//! `O(k·log v)` cost rather than `O(v)`, leaving exactly the state `v` single insertions would.
//!
//! # Clocks
//!
//! A ticks window's clock is the caller's tick: it is set, never incremented, so any `u64` is
//! a clock (the arithmetic near 2^64 − 1 is written without overflow, and a histogram at the
//! last tick of time keeps counting there). An arrivals window's clock counts arrivals, so
//! it must have room for the next one: [`ExpHistogram::MAX_ARRIVALS`] = 2^62 bounds it
//! (146 years at a billion arrivals a second), an arrival past it is refused
//! ([`ClockError::ArrivalsExhausted`]) rather than wrapping the clock to zero, and the decoder
//! refuses an arrivals histogram whose clock reads more. An event whose value would carry a
//! window's total past 2^64 − 1 is refused too ([`ClockError::TotalOverflow`]). A refused
//! event leaves the histogram as it was.
//!
//! # Worked example
//!
//! The first twenty arrivals at `k = 2` (at most three buckets of a size):
//!
//! ```
//! use tidemark::window::ExpHistogram;
//!
//! let mut h = ExpHistogram::arrivals_with_k(1_000, 2).unwrap();
//! for _ in 0..20 {
//!     h.push(true);
//! }
//! let sizes: Vec<u64> = h.buckets().map(|b| b.size).collect();
//! assert_eq!(sizes, [4, 4, 4, 2, 2, 2, 1, 1]);
//! assert_eq!(h.stats().merges, 12);
//! assert_eq!(h.estimate().value, 20.0 - 1.5);
//! ```

mod block_counter;
mod encoding;
mod exp_histogram;
mod multi;
mod stamps;

pub use block_counter::BlockCounter;
pub use exp_histogram::{Bucket, ExpHistogram, HistogramStats};
pub use multi::MultiWindow;

use core::fmt;

/// The window a structure counts over, and its length: the last `W` arrivals or the last `T`
/// ticks ([`ExpHistogram::window`], [`BlockCounter::window`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Window {
    /// The last `W` arrivals of a bit stream (a 0 advances the clock by one).
    Arrivals(u64),
    /// The last `T` ticks: events at ticks `t` with `now − T < t ≤ now`, where `now` is the
    /// latest tick seen.
    Ticks(u64),
}

impl Window {
    /// The window length `W` or `T`.
    pub fn length(self) -> u64 {
        match self {
            Window::Arrivals(w) | Window::Ticks(w) => w,
        }
    }

    pub(crate) fn validate(self) -> Result<Window, crate::ParamError> {
        if self.length() == 0 {
            return Err(crate::ParamError::new("window", "at least 1", 0));
        }
        Ok(self)
    }

    /// Whether a window of this kind takes a bare arrival: an arrivals window does; a ticks
    /// window's events need their tick.
    #[inline]
    pub(crate) fn check_arrival(self) -> Result<(), ClockError> {
        match self {
            Window::Arrivals(_) => Ok(()),
            Window::Ticks(_) => Err(ClockError::NotAnArrivalWindow),
        }
    }

    /// Whether a window of this kind, whose clock reads `now`, may move its clock to `tick`
    /// (`started`: it has seen an event or a tick, tick 0 being a real one). Only a ticks
    /// window takes ticks, and its ticks never decrease: a tick before the latest is refused.
    #[inline]
    pub(crate) fn check_tick(self, started: bool, now: u64, tick: u64) -> Result<(), ClockError> {
        if let Window::Arrivals(_) = self {
            return Err(ClockError::NotATickWindow);
        }
        if started && tick < now {
            return Err(ClockError::Backwards { now, got: tick });
        }
        Ok(())
    }

    /// Whether timestamp `t` has left the window when the clock reads `now`.
    #[inline]
    pub(crate) fn expired(self, t: u64, now: u64) -> bool {
        // t ≤ now − W, written without underflow (and without saturating `t + W`, which
        // would call everything expired once the clock reads 2^64 − 1).
        now.checked_sub(self.length()).is_some_and(|edge| t <= edge)
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Window::Arrivals(w) => write!(f, "last {w} arrivals"),
            Window::Ticks(t) => write!(f, "last {t} ticks"),
        }
    }
}

/// A window refused an event: its clock was misused or has no room left, or the event's
/// value would overflow the window's total.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClockError {
    /// A tick earlier than the latest one seen: ticks never decrease.
    Backwards {
        /// The latest tick seen.
        now: u64,
        /// The tick given.
        got: u64,
    },
    /// Ticks given to an arrivals window, whose clock is the arrival count.
    NotATickWindow,
    /// A bare arrival given to a ticks window, whose events need their tick.
    NotAnArrivalWindow,
    /// An arrival to an arrivals window whose clock has reached its bound: counting it would
    /// take the clock past [`ExpHistogram::MAX_ARRIVALS`].
    ArrivalsExhausted {
        /// The bound, the clock's reading.
        limit: u64,
    },
    /// An event whose value would carry the window's total past 2^64 − 1.
    TotalOverflow {
        /// The window's total before the event.
        total: u64,
        /// The event's value.
        value: u64,
    },
}

impl fmt::Display for ClockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockError::Backwards { now, got } => {
                write!(f, "tick {got} is earlier than the latest tick seen, {now}")
            }
            ClockError::NotATickWindow => {
                write!(f, "this window counts arrivals; it takes no ticks")
            }
            ClockError::NotAnArrivalWindow => {
                write!(f, "this window counts ticks; each event needs its tick")
            }
            ClockError::ArrivalsExhausted { limit } => write!(
                f,
                "the arrivals clock has reached its bound of {limit} (2^62) arrivals; no \
                 further arrival can be counted"
            ),
            ClockError::TotalOverflow { total, value } => write!(
                f,
                "a value of {value} would carry the window's total of {total} past 2^64 - 1"
            ),
        }
    }
}

impl std::error::Error for ClockError {}

/// `k = ⌈1/ε⌉` for ε in (0, 1).
pub(crate) fn k_from_epsilon(epsilon: f64) -> Result<u32, crate::ParamError> {
    if !(epsilon > 0.0 && epsilon < 1.0) {
        return Err(crate::ParamError::new("epsilon", "in (0, 1)", epsilon));
    }
    let k = (1.0 / epsilon).ceil();
    if k > 1e6 {
        return Err(crate::ParamError::new(
            "epsilon",
            "at least 1e-6 (k = ⌈1/ε⌉ at most 10^6)",
            epsilon,
        ));
    }
    Ok(k as u32)
}
