//! The exponential histogram itself; the theory is in the [module docs](super).

use super::stamps::Stamps;
use super::{k_from_epsilon, ClockError, Window};
use crate::estimate::{Estimate, Method};
use crate::ParamError;

/// The most size classes a histogram can hold: sizes 2^0 … 2^63.
pub(crate) const MAX_CLASSES: usize = 64;

/// A sliding-window counter of ones (or sum of non-negative integers) over the last `W`
/// arrivals or `T` ticks, within relative error `ε/2` and with a guaranteed bracket.
///
/// Buckets are kept by size class: class `j` holds the timestamps of its buckets of size
/// `2^j`, oldest first. Timestamps never decrease from the highest class down to class 0, so
/// the oldest bucket is the front of the highest non-empty class.
///
/// ```
/// use tidemark::window::ExpHistogram;
///
/// // Events in the last 60 ticks (seconds, say), within ε = 0.1.
/// let mut h = ExpHistogram::ticks(60, 0.1).unwrap();
/// for t in 0..600u64 {
///     h.record(t).unwrap();
///     h.record(t).unwrap(); // two events a tick
/// }
/// let e = h.estimate();
/// assert!(e.contains(120.0));
/// assert!(h.upper_bound() >= 120);
/// // A decreasing tick is refused, and nothing already counted is lost.
/// assert!(h.record(5).is_err());
/// assert!(h.estimate().contains(120.0));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpHistogram {
    window: Window,
    k: u32,
    interpolate: bool,
    /// `classes[j]`: timestamps of the buckets of size 2^j, oldest first (32 bits each for
    /// windows of at most 2^32, restored with `newest`). Only the first `used` entries
    /// matter; emptied classes keep their allocation.
    classes: Vec<Stamps>,
    /// The newest timestamp held (the last one added) while any bucket is held, else 0: the
    /// reference that restores 32-bit stamps.
    newest: u64,
    /// One more than the highest non-empty class; 0 when there are no buckets.
    used: usize,
    /// The clock: the arrival count, or the latest tick seen.
    now: u64,
    /// Whether any event (or tick) has been seen: tick 0 is a real tick.
    started: bool,
    /// Sum of bucket sizes.
    total: u64,
    merges: u64,
    worst_merges: u64,
    /// The earliest time the oldest bucket's ones can have arrived.
    span_start: u64,
    /// The clock reading at which the oldest bucket leaves the window (`u64::MAX` with no
    /// buckets): a zero or a quiet tick costs one comparison against it.
    expires_at: u64,
}

/// One bucket, as [`ExpHistogram::buckets`] lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// How many ones (or how much value) it holds: a power of two.
    pub size: u64,
    /// The time of its newest arrival.
    pub timestamp: u64,
}

/// What a histogram holds and has done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistogramStats {
    /// Buckets held.
    pub buckets: usize,
    /// Merges since it was built.
    pub merges: u64,
    /// The most merges one insertion caused (a unit arrival's cascade is `O(log N)`).
    pub worst_merges: u64,
    /// Bits held, by DGIM's accounting: each bucket is charged a timestamp modulo the window
    /// (`⌈log2 W⌉` bits) and a size exponent (`⌈log2(e + 1)⌉` bits, `e` the largest exponent
    /// in the window, at least `⌈log2 W⌉`); with interpolation on, one more timestamp. The
    /// clock and the running total are not charged (the design's comparison with the block
    /// counter does not charge them either).
    pub bits: u64,
}

/// `⌈log2 x⌉` for x ≥ 1.
pub(crate) fn ceil_log2(x: u64) -> u32 {
    if x <= 1 {
        0
    } else {
        64 - (x - 1).leading_zeros()
    }
}

impl ExpHistogram {
    /// The most arrivals an arrivals window's clock counts, 2^62: the next arrival is refused
    /// ([`ClockError::ArrivalsExhausted`]) instead of wrapping the clock, and the decoder
    /// refuses a clock past it. A ticks window's clock is the caller's tick and takes any
    /// `u64` (see the [module docs](super#clocks)).
    pub const MAX_ARRIVALS: u64 = 1 << 62;

    /// A histogram over the last `window` arrivals, within relative error `epsilon / 2`
    /// (`k = ⌈1/ε⌉`).
    pub fn arrivals(window: u64, epsilon: f64) -> Result<Self, ParamError> {
        Self::new(Window::Arrivals(window), k_from_epsilon(epsilon)?)
    }

    /// A histogram over the last `window` ticks, within relative error `epsilon / 2`.
    pub fn ticks(window: u64, epsilon: f64) -> Result<Self, ParamError> {
        Self::new(Window::Ticks(window), k_from_epsilon(epsilon)?)
    }

    /// A histogram over the last `window` arrivals with `k` given directly (at most `k + 1`
    /// buckets of a size).
    pub fn arrivals_with_k(window: u64, k: u32) -> Result<Self, ParamError> {
        Self::new(Window::Arrivals(window), k)
    }

    /// A histogram over `window` with `k` given directly.
    pub fn new(window: Window, k: u32) -> Result<Self, ParamError> {
        let window = window.validate()?;
        if !(1..=1_000_000).contains(&k) {
            return Err(ParamError::new("k", "in 1..=1000000", k));
        }
        Ok(ExpHistogram {
            window,
            k,
            interpolate: false,
            classes: Vec::new(),
            newest: 0,
            used: 0,
            now: 0,
            started: false,
            total: 0,
            merges: 0,
            worst_merges: 0,
            span_start: 0,
            expires_at: u64::MAX,
        })
    }

    /// Also report the interpolated point estimate ([`Self::interpolated`]), charging one
    /// more timestamp in [`HistogramStats::bits`].
    pub fn with_interpolation(mut self) -> Self {
        self.interpolate = true;
        self
    }

    /// The window.
    pub fn window(&self) -> Window {
        self.window
    }

    /// `k`: at most `k + 1` buckets share a size.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Whether interpolation is reported.
    pub fn interpolation(&self) -> bool {
        self.interpolate
    }

    /// The clock: arrivals so far, or the latest tick seen.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// One arrival of an arrivals window: a one (`true`) or a zero, which only advances the
    /// clock.
    ///
    /// On a ticks window this is an error: its events need their tick ([`Self::record`]).
    #[inline]
    pub fn push(&mut self, one: bool) -> Result<(), ClockError> {
        self.push_value(one as u64)
    }

    /// One arrival of an arrivals window carrying a non-negative value (DGIM's sums).
    ///
    /// Refused, leaving the histogram unchanged, once the clock has reached
    /// [`Self::MAX_ARRIVALS`], or when `value` would carry the total past 2^64 − 1.
    #[inline]
    pub fn push_value(&mut self, value: u64) -> Result<(), ClockError> {
        self.window.check_arrival()?;
        if self.now >= Self::MAX_ARRIVALS {
            return Err(ClockError::ArrivalsExhausted {
                limit: Self::MAX_ARRIVALS,
            });
        }
        self.check_total(value)?;
        self.now += 1;
        self.started = true;
        if self.now >= self.expires_at {
            self.expire();
        }
        self.add(self.now, value);
        Ok(())
    }

    /// One event at `tick` in a ticks window. Several events may share a tick; ticks never
    /// decrease.
    #[inline]
    pub fn record(&mut self, tick: u64) -> Result<(), ClockError> {
        self.record_value(tick, 1)
    }

    /// An event at `tick` carrying a non-negative value.
    ///
    /// Refused, leaving the histogram unchanged, when `tick` is earlier than the latest one
    /// seen or `value` would carry the total past 2^64 − 1.
    #[inline]
    pub fn record_value(&mut self, tick: u64, value: u64) -> Result<(), ClockError> {
        self.check_tick(tick)?;
        self.check_total(value)?;
        self.move_clock(tick);
        self.add(tick, value);
        Ok(())
    }

    /// Moves a ticks window's clock to `tick` with no event, expiring what left the window.
    pub fn advance_to(&mut self, tick: u64) -> Result<(), ClockError> {
        self.check_tick(tick)?;
        self.move_clock(tick);
        Ok(())
    }

    /// Whether a ticks window's clock may move to `tick`.
    #[inline]
    fn check_tick(&self, tick: u64) -> Result<(), ClockError> {
        self.window.check_tick(self.started, self.now, tick)
    }

    /// Whether `value` more fits the total. Checked against the total before the event's
    /// expiry, so that a refused event changes nothing: it may refuse a value the expiry
    /// would have made room for, but only when total and value together pass 2^64 − 1.
    #[inline]
    fn check_total(&self, value: u64) -> Result<(), ClockError> {
        match self.total.checked_add(value) {
            Some(_) => Ok(()),
            None => Err(ClockError::TotalOverflow {
                total: self.total,
                value,
            }),
        }
    }

    /// Moves a ticks window's clock to `tick` (checked by [`Self::check_tick`]).
    #[inline]
    fn move_clock(&mut self, tick: u64) {
        self.now = tick;
        self.started = true;
        if self.now >= self.expires_at {
            self.expire();
        }
    }

    /// Drops buckets whose timestamp has left the window: only ever the oldest ones.
    #[inline]
    fn expire(&mut self) {
        while self.used > 0 {
            let top = self.used - 1;
            let newest = self.newest;
            let class = &mut self.classes[top];
            match class.front(newest) {
                Some(t) if self.window.expired(t, self.now) => {
                    class.pop_front(newest);
                    self.total -= 1 << top;
                    // The next oldest bucket's ones all came after this one's newest (in an
                    // arrivals window, strictly after).
                    self.span_start = match self.window {
                        Window::Arrivals(_) => t + 1,
                        Window::Ticks(_) => t,
                    };
                    if class.is_empty() {
                        self.drop_empty_top();
                    }
                }
                _ => break,
            }
        }
        if self.used == 0 {
            self.newest = 0;
        }
        self.update_expiry();
    }

    /// Recomputes when the oldest bucket leaves the window.
    #[inline]
    fn update_expiry(&mut self) {
        self.expires_at = match self.used {
            0 => u64::MAX,
            used => self.classes[used - 1]
                .front(self.newest)
                .map_or(u64::MAX, |t| t.saturating_add(self.window.length())),
        };
    }

    fn drop_empty_top(&mut self) {
        while self.used > 0 && self.classes[self.used - 1].is_empty() {
            self.used -= 1;
        }
    }

    #[inline]
    fn class_mut(&mut self, j: usize) -> &mut Stamps {
        if j >= self.classes.len() {
            let (cap, length) = (self.k as usize + 2, self.window.length());
            self.classes.resize_with(j + 1, || Stamps::new(length, cap));
        }
        if j >= self.used {
            self.used = j + 1;
        }
        &mut self.classes[j]
    }

    /// Adds `value` ones stamped `t` (t ≥ every timestamp held), merging as `value` single
    /// insertions would.
    #[inline]
    fn add(&mut self, t: u64, value: u64) {
        if value == 0 {
            return;
        }
        if self.total == 0 {
            self.span_start = t;
        }
        // Every stamp held is at most `t`, and within the window of it.
        self.newest = t;
        let merges = if value == 1 {
            self.add_one(t)
        } else {
            self.add_many(t, value)
        };
        self.total = self
            .total
            .checked_add(value)
            .expect("the callers check the total first");
        // A decoded histogram may carry any count of merges: a statistic, so it saturates.
        self.merges = self.merges.saturating_add(merges);
        self.worst_merges = self.worst_merges.max(merges);
        // The oldest bucket changes when the first one arrives or a merge reaches the top.
        self.update_expiry();
    }

    /// The common case: one one, and the cascade it may start.
    #[inline]
    fn add_one(&mut self, t: u64) -> u64 {
        let limit = self.k as usize + 1;
        let newest = self.newest;
        let mut stamp = t;
        let mut j = 0;
        loop {
            let class = self.class_mut(j);
            class.push_back(stamp);
            if class.len() <= limit {
                return j as u64;
            }
            // Merge the two oldest of this size; the merged bucket keeps the newer stamp.
            class.pop_front(newest);
            stamp = class
                .pop_front(newest)
                .expect("an overflowing class holds k + 2 buckets");
            j += 1;
            assert!(j < MAX_CLASSES, "bucket sizes beyond 2^63");
        }
    }

    /// `value` ones stamped `t` at once. In each class the incoming buckets are a few
    /// explicit stamps (carried from below, possibly older than `t`) followed by `c` buckets
    /// stamped `t`. Sequential insertion would merge the two oldest whenever `k + 2` buckets
    /// stand, so with `n` buckets in all it makes `m = ⌊(n − k)/2⌋` merges (when `n > k + 1`),
    /// pairing positions (0,1), (2,3), … of the class's sequence and carrying each pair's newer
    /// stamp (positions 1, 3, …) up; positions `2m..` stay.
    fn add_many(&mut self, t: u64, value: u64) -> u64 {
        let k = self.k as u64;
        let newest = self.newest;
        let mut explicit: Vec<u64> = Vec::new();
        let mut c = value;
        let mut merges = 0u64;
        let mut j = 0usize;
        while c > 0 || !explicit.is_empty() {
            assert!(j < MAX_CLASSES, "bucket sizes beyond 2^63");
            let class = self.class_mut(j);
            let held = class.len() as u64;
            let fixed = held + explicit.len() as u64; // positions before the t-run
            let n = fixed + c;
            if n <= k + 1 {
                explicit.drain(..).for_each(|e| class.push_back(e));
                (0..c).for_each(|_| class.push_back(t));
                break;
            }
            let m = (n - k) / 2;
            let at = |pos: u64, class: &Stamps, explicit: &[u64]| -> u64 {
                if pos < held {
                    class.get(pos as usize, newest)
                } else {
                    explicit[(pos - held) as usize]
                }
            };
            let mut carried = Vec::new();
            let mut carried_t = 0u64;
            for i in 0..m {
                let pos = 2 * i + 1;
                if pos < fixed {
                    carried.push(at(pos, class, &explicit));
                } else {
                    carried_t = m - i;
                    break;
                }
            }
            let dropped = 2 * m;
            let keep_explicit: Vec<u64> = if dropped <= held {
                class.drop_front(dropped as usize);
                explicit.clone()
            } else {
                class.drop_front(held as usize);
                explicit
                    .get((dropped - held) as usize..)
                    .map(<[u64]>::to_vec)
                    .unwrap_or_default()
            };
            let t_kept = n - dropped - class.len() as u64 - keep_explicit.len() as u64;
            keep_explicit.into_iter().for_each(|e| class.push_back(e));
            (0..t_kept).for_each(|_| class.push_back(t));
            merges += m;
            explicit = carried;
            c = carried_t;
            j += 1;
        }
        merges
    }

    /// The window's count: value `total − (size − 1)/2`, bracket `[total − size + 1, total]`
    /// where `size` is the oldest bucket's, guaranteed. With only size-1 buckets the answer is
    /// exact.
    pub fn estimate(&self) -> Estimate {
        let total = self.total as f64;
        if self.used <= 1 {
            return Estimate::exact(total);
        }
        let size = (1u64 << (self.used - 1)) as f64;
        Estimate::guaranteed(
            total - (size - 1.0) / 2.0,
            total - size + 1.0,
            total,
            Method::ExpHistogram,
        )
    }

    /// The one-sided answer: never below the true count (rate limits, quotas, alarms).
    pub fn upper_bound(&self) -> u64 {
        self.total
    }

    /// The interpolated point estimate over the oldest bucket's time span, when interpolation
    /// is on; the bracket is [`Self::estimate`]'s, unchanged.
    pub fn interpolated(&self) -> Option<Estimate> {
        if !self.interpolate {
            return None;
        }
        let plain = self.estimate();
        if self.used <= 1 {
            return Some(plain);
        }
        let size = 1u64 << (self.used - 1);
        let newest = self.classes[self.used - 1]
            .front(self.newest)
            .expect("the top class is not empty");
        // Times inside the window are > edge.
        let edge = self.now.saturating_sub(self.window.length());
        let start = self.span_start.min(newest);
        let inside_share = if self.now < self.window.length() || start > edge {
            1.0
        } else {
            let covered = (newest - start) as f64 + 1.0;
            (newest.saturating_sub(edge)) as f64 / covered
        };
        let inside = (size as f64 * inside_share).clamp(1.0, size as f64);
        let value = (self.total - size) as f64 + inside;
        Some(Estimate {
            value: value.clamp(plain.low, plain.high),
            method: Method::Interpolated,
            ..plain
        })
    }

    /// The buckets, oldest first.
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        self.classes[..self.used]
            .iter()
            .enumerate()
            .rev()
            .flat_map(move |(j, class)| {
                class.iter(self.newest).map(move |t| Bucket {
                    size: 1 << j,
                    timestamp: t,
                })
            })
    }

    /// Buckets held.
    pub fn bucket_count(&self) -> usize {
        self.classes[..self.used].iter().map(Stamps::len).sum()
    }

    /// Heap bytes held: every class's deque at its capacity (emptied classes keep
    /// theirs), and the list of classes.
    pub fn heap_bytes(&self) -> usize {
        self.classes.iter().map(Stamps::heap_bytes).sum::<usize>()
            + self.classes.capacity() * core::mem::size_of::<Stamps>()
    }

    /// Buckets, merges and bits held.
    pub fn stats(&self) -> HistogramStats {
        let buckets = self.bucket_count();
        let ts_bits = ceil_log2(self.window.length()).max(1) as u64;
        let max_exponent = (ceil_log2(self.window.length()) as u64).max(self.used as u64);
        let size_bits = ceil_log2(max_exponent + 1).max(1) as u64;
        let extra = if self.interpolate { ts_bits } else { 0 };
        HistogramStats {
            buckets,
            merges: self.merges,
            worst_merges: self.worst_merges,
            bits: buckets as u64 * (ts_bits + size_bits) + extra,
        }
    }

    // --- pieces for the encoding module ---

    pub(crate) fn parts(&self) -> Parts {
        Parts {
            window: self.window,
            k: self.k,
            interpolate: self.interpolate,
            now: self.now,
            started: self.started,
            merges: self.merges,
            worst_merges: self.worst_merges,
            span_start: self.span_start,
            classes: self.classes[..self.used]
                .iter()
                .map(|c| c.iter(self.newest).collect())
                .collect(),
        }
    }

    pub(crate) fn from_parts(parts: Parts) -> Self {
        let used = parts.classes.len();
        let total = parts
            .classes
            .iter()
            .enumerate()
            .map(|(j, c)| (c.len() as u64) << j)
            .sum();
        let newest = parts.classes.iter().flatten().copied().max().unwrap_or(0);
        let length = parts.window.length();
        let classes = parts
            .classes
            .iter()
            .map(|c| {
                // What the class holds, not the k + 2 it may hold: a short envelope naming a
                // large k does not reserve for buckets it does not carry.
                let mut stamps = Stamps::new(length, c.len());
                c.iter().for_each(|&t| stamps.push_back(t));
                stamps
            })
            .collect();
        ExpHistogram {
            window: parts.window,
            k: parts.k,
            interpolate: parts.interpolate,
            classes,
            newest,
            used,
            now: parts.now,
            started: parts.started,
            total,
            merges: parts.merges,
            worst_merges: parts.worst_merges,
            span_start: parts.span_start,
            expires_at: u64::MAX,
        }
        .with_expiry()
    }

    fn with_expiry(mut self) -> Self {
        self.update_expiry();
        self
    }
}

/// The state as the encoding keeps it: what [`ExpHistogram::parts`] gives the encoder, and
/// what the decoder hands [`ExpHistogram::from_parts`] once it has validated it.
pub(crate) struct Parts {
    pub window: Window,
    pub k: u32,
    pub interpolate: bool,
    pub now: u64,
    pub started: bool,
    pub merges: u64,
    pub worst_merges: u64,
    pub span_start: u64,
    /// Each class's stamps, whole, oldest first (when decoded, validated: within the window,
    /// in order).
    pub classes: Vec<Vec<u64>>,
}
