//! Several windows over one stream — the last minute, hour and day — as one value.
//!
//! A histogram's window is baked into its expiry rule and a coarse histogram has merged away
//! the detail a fine one needs, so there is nothing worth sharing: this is one
//! [`ExpHistogram`] per window, fed together.
//!
//! ```
//! use tidemark::window::MultiWindow;
//!
//! let mut w = MultiWindow::ticks(&[60, 3_600, 86_400], 0.1).unwrap();
//! for second in 0..7_200u64 {
//!     w.record(second).unwrap();
//! }
//! let e = w.estimates();
//! assert!(e[0].contains(60.0) && e[1].contains(3_600.0) && e[2].contains(7_200.0));
//! ```

use super::{k_from_epsilon, ClockError, ExpHistogram, Window};
use crate::estimate::Estimate;
use crate::ParamError;

/// One exponential histogram per window, all fed by the same stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiWindow {
    windows: Vec<ExpHistogram>,
}

impl MultiWindow {
    /// Tick windows of the given lengths, each within `epsilon / 2`.
    pub fn ticks(lengths: &[u64], epsilon: f64) -> Result<Self, ParamError> {
        Self::new(lengths.iter().map(|&t| Window::Ticks(t)), epsilon)
    }

    /// Arrival windows of the given lengths, each within `epsilon / 2`.
    pub fn arrivals(lengths: &[u64], epsilon: f64) -> Result<Self, ParamError> {
        Self::new(lengths.iter().map(|&w| Window::Arrivals(w)), epsilon)
    }

    fn new(windows: impl Iterator<Item = Window>, epsilon: f64) -> Result<Self, ParamError> {
        let k = k_from_epsilon(epsilon)?;
        let windows = windows
            .map(|s| ExpHistogram::new(s, k))
            .collect::<Result<Vec<_>, _>>()?;
        if windows.is_empty() {
            return Err(ParamError::new("windows", "at least one window", 0));
        }
        Ok(MultiWindow { windows })
    }

    /// One arrival, to every arrivals window.
    pub fn push(&mut self, one: bool) -> Result<(), ClockError> {
        self.windows.iter_mut().try_for_each(|h| h.push(one))
    }

    /// One event at `tick`, to every ticks window. A backwards tick is refused by the first
    /// window, before any is changed.
    pub fn record(&mut self, tick: u64) -> Result<(), ClockError> {
        self.windows.iter_mut().try_for_each(|h| h.record(tick))
    }

    /// Moves every ticks window's clock to `tick` with no event.
    pub fn advance_to(&mut self, tick: u64) -> Result<(), ClockError> {
        self.windows.iter_mut().try_for_each(|h| h.advance_to(tick))
    }

    /// Each window's estimate, in the order given.
    pub fn estimates(&self) -> Vec<Estimate> {
        self.windows.iter().map(ExpHistogram::estimate).collect()
    }

    /// The histograms.
    pub fn windows(&self) -> &[ExpHistogram] {
        &self.windows
    }
}
