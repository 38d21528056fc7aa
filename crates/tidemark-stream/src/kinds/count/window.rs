//! A count metric's live window for one key: an exponential histogram (Datar, Gionis,
//! Indyk, Motwani, SODA 2002) over the window's ticks, fed one closed bucket at a time:
//! `O(k log N)` state per key instead of one counter per bucket in the window, a guaranteed
//! bracket, and the histogram's upper bound as the one-sided answer for limits.

use tidemark::window::{ExpHistogram, Window};
use tidemark::{DecodeError, Estimate, Method};

/// A count metric's live window for one key: an exponential histogram over the window,
/// fed with each closed bucket's count stamped at the bucket's last tick.
#[derive(Clone, Debug)]
pub struct CountWindow {
    hist: ExpHistogram,
}

impl CountWindow {
    /// A window of `window` ms within relative error ε/2.
    pub(crate) fn new(window: u64, epsilon: f64) -> CountWindow {
        CountWindow {
            hist: ExpHistogram::ticks(window, epsilon).expect(
                "a count metric's window and ε come from Config::from_toml, which refuses what \
                 ExpHistogram::ticks would",
            ),
        }
    }

    /// Restores a window from its histogram bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<CountWindow, DecodeError> {
        Ok(CountWindow {
            hist: ExpHistogram::from_bytes(bytes)?,
        })
    }

    /// Whether this window is over `window` ms with the `k` that ε gives.
    pub fn matches(&self, window: u64, epsilon: f64) -> bool {
        self.hist.window() == Window::Ticks(window)
            && ExpHistogram::ticks(window, epsilon).is_ok_and(|h| h.k() == self.hist.k())
    }

    /// The histogram's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.hist.to_bytes()
    }

    /// The histogram's compact payload, without its envelope (what a key row holds: the
    /// metric's config gives the window and ε, the row its checksum).
    pub fn to_payload(&self) -> Vec<u8> {
        self.hist.to_compact_payload()
    }

    /// Restores a window of `window` ms at `epsilon` from [`CountWindow::to_payload`]'s
    /// bytes.
    pub fn from_payload(
        window: u64,
        epsilon: f64,
        bytes: &[u8],
    ) -> Result<CountWindow, DecodeError> {
        let k = CountWindow::new(window, epsilon).hist.k();
        Ok(CountWindow {
            hist: ExpHistogram::from_compact_payload(Window::Ticks(window), k, false, bytes)?,
        })
    }

    /// Adds a closed bucket `[start, end)` holding `count` events. Buckets come in order.
    pub fn add_bucket(&mut self, end: u64, count: u64) {
        // Buckets close in increasing order, so the stamp never goes backwards.
        let _ = self.hist.record_value(end - 1, count);
    }

    /// Moves the window's edge to the end of the bucket just closed.
    pub fn advance(&mut self, end: u64) {
        let _ = self.hist.advance_to(end - 1);
    }

    /// The window's count: guaranteed bracket, `high` never below the truth.
    pub fn estimate(&self) -> Estimate {
        self.hist.estimate()
    }

    /// The count of the closed buckets ending after `from`: what the window starting at `from`
    /// (a later edge than the last close's) holds of them, for an early alert between closes.
    /// The bracket is [`CountWindow::estimate`]'s: the oldest histogram bucket counted may
    /// straddle the edge, and holds at least its newest arrival inside.
    pub fn estimate_from(&self, from: u64) -> Estimate {
        // Buckets are stamped at their last tick (`end − 1`), so one ending after `from` is
        // stamped at or after it.
        let mut total = 0u64;
        let mut oldest = None;
        for b in self.hist.buckets().filter(|b| b.timestamp >= from) {
            oldest.get_or_insert(b.size);
            total += b.size;
        }
        let total_f = total as f64;
        match oldest {
            Some(size) if size > 1 => Estimate::guaranteed(
                total_f - (size - 1) as f64 / 2.0,
                total_f - size as f64 + 1.0,
                total_f,
                Method::ExpHistogram,
            ),
            _ => Estimate::exact(total_f),
        }
    }

    /// Whether nothing is left in the window.
    pub fn is_empty(&self) -> bool {
        self.hist.upper_bound() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_window_holds_the_truth_of_the_last_buckets() {
        // 3-bucket window of 10 ms buckets; counts 1..=20: the last three at each step.
        let mut w = CountWindow::new(30, 0.1);
        let counts: Vec<u64> = (1..=20).collect();
        for (i, &c) in counts.iter().enumerate() {
            let end = (i as u64 + 1) * 10;
            w.add_bucket(end, c);
            let truth: u64 = counts[i.saturating_sub(2)..=i].iter().sum();
            let e = w.estimate();
            assert!(e.contains(truth as f64), "{e} misses {truth} at {i}");
            assert!(e.high >= truth as f64);
        }
        w.advance(1_000);
        assert!(w.is_empty());
    }
}
