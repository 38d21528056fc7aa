//! Fixed blocks: the baseline the exponential histogram improves on.
//!
//! Cut time into blocks of `B = ⌈W/k⌉` arrivals (or ticks), count the ones in each, keep the
//! blocks that still overlap the window, and report the whole blocks plus the oldest block's
//! count scaled by the share of it still inside. The bracket is guaranteed: between none and
//! all of the oldest block's ones are inside. Its width is one block's count, so the error is
//! about `1/k` of a dense window, at a fixed cost of `⌈W/B⌉ + 1` counters however sparse the
//! stream — the histogram's buckets, by contrast, cost nothing for empty stretches.
//!
//! ```
//! use tidemark::window::BlockCounter;
//!
//! let mut b = BlockCounter::arrivals(100, 10).unwrap(); // blocks of 10 arrivals
//! for i in 0..1_000u32 {
//!     b.push(i % 2 == 0).unwrap();
//! }
//! assert!(b.estimate().contains(50.0));
//! ```

use std::collections::VecDeque;

use super::exp_histogram::ceil_log2;
use super::{ClockError, Window};
use crate::estimate::{Estimate, Method};
use crate::ParamError;

/// Counts of fixed blocks over a sliding window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockCounter {
    window: Window,
    block: u64,
    /// (block index, count), oldest first; index `i` covers times `[i·B, (i+1)·B)`.
    blocks: VecDeque<(u64, u64)>,
    now: u64,
    started: bool,
}

impl BlockCounter {
    /// Blocks of `⌈window/k⌉` arrivals over the last `window` arrivals.
    pub fn arrivals(window: u64, k: u32) -> Result<Self, ParamError> {
        Self::new(Window::Arrivals(window), k)
    }

    /// Blocks of `⌈window/k⌉` ticks over the last `window` ticks.
    pub fn ticks(window: u64, k: u32) -> Result<Self, ParamError> {
        Self::new(Window::Ticks(window), k)
    }

    /// Blocks of `⌈W/k⌉` over `window`.
    pub fn new(window: Window, k: u32) -> Result<Self, ParamError> {
        let window = window.validate()?;
        if k == 0 || k as u64 > window.length() {
            return Err(ParamError::new("k", "in 1..=window", k));
        }
        Self::with_block(window, window.length().div_ceil(k as u64))
    }

    /// Blocks of exactly `block` arrivals or ticks.
    pub fn with_block(window: Window, block: u64) -> Result<Self, ParamError> {
        let window = window.validate()?;
        if block == 0 || block > window.length() {
            return Err(ParamError::new("block", "in 1..=window", block));
        }
        Ok(BlockCounter {
            window,
            block,
            // Grown as blocks with events arrive (at most `max_blocks` of them): a window of
            // 2^60 one-tick blocks is a valid counter, not a 16 EiB reservation.
            blocks: VecDeque::new(),
            now: 0,
            started: false,
        })
    }

    /// The most blocks that can overlap a window.
    pub(crate) fn max_blocks(window: u64, block: u64) -> usize {
        usize::try_from(window.div_ceil(block).saturating_add(1)).unwrap_or(usize::MAX)
    }

    /// The window.
    pub fn window(&self) -> Window {
        self.window
    }

    /// The block length.
    pub fn block(&self) -> u64 {
        self.block
    }

    /// The clock.
    pub fn now(&self) -> u64 {
        self.now
    }

    pub(crate) fn started(&self) -> bool {
        self.started
    }

    /// (block index, count) pairs, oldest first.
    pub fn blocks(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.blocks.iter().copied()
    }

    pub(crate) fn restore(&mut self, now: u64, started: bool, blocks: &[(u64, u64)]) {
        self.now = now;
        self.started = started;
        self.blocks = blocks.iter().copied().collect();
    }

    /// One arrival of an arrivals window.
    pub fn push(&mut self, one: bool) -> Result<(), ClockError> {
        self.window.check_arrival()?;
        self.now += 1;
        self.started = true;
        self.expire();
        if one {
            self.add(self.now, 1);
        }
        Ok(())
    }

    /// An event at `tick` in a ticks window, carrying `value`.
    pub fn record_value(&mut self, tick: u64, value: u64) -> Result<(), ClockError> {
        self.window.check_tick(self.started, self.now, tick)?;
        self.now = tick;
        self.started = true;
        self.expire();
        self.add(tick, value);
        Ok(())
    }

    /// One event at `tick`.
    pub fn record(&mut self, tick: u64) -> Result<(), ClockError> {
        self.record_value(tick, 1)
    }

    fn add(&mut self, t: u64, value: u64) {
        if value == 0 {
            return;
        }
        let index = t / self.block;
        match self.blocks.back_mut() {
            Some((i, count)) if *i == index => *count += value,
            _ => self.blocks.push_back((index, value)),
        }
    }

    fn last_time(&self, index: u64) -> u64 {
        // The last block may end past 2^64 − 1; no tick does.
        (index * self.block).saturating_add(self.block - 1)
    }

    fn expire(&mut self) {
        while let Some(&(index, _)) = self.blocks.front() {
            if self.window.expired(self.last_time(index), self.now) {
                self.blocks.pop_front();
            } else {
                break;
            }
        }
    }

    /// Whole blocks plus the oldest block's share; the bracket holds none to all of it.
    pub fn estimate(&self) -> Estimate {
        let mut whole = 0u64;
        let mut partial = 0u64;
        let mut share = 0.0;
        for &(index, count) in &self.blocks {
            let first = index * self.block;
            if self.window.expired(first, self.now) {
                // Times inside are > now − W; this block's inside part is (now − W, last].
                let inside = self.last_time(index) - (self.now - self.window.length());
                partial = count;
                share = inside as f64 / self.block as f64;
            } else {
                whole += count;
            }
        }
        if partial == 0 {
            return Estimate::guaranteed(
                whole as f64,
                whole as f64,
                whole as f64,
                Method::BlockCounter,
            );
        }
        Estimate::guaranteed(
            whole as f64 + partial as f64 * share,
            whole as f64,
            (whole + partial) as f64,
            Method::BlockCounter,
        )
    }

    /// Bits held, as the design charges blocks: `⌈W/B⌉ + 1` counters of `⌈log2(W + 1)⌉`
    /// bits, whatever the density.
    pub fn bits(&self) -> u64 {
        (Self::max_blocks(self.window.length(), self.block) as u64)
            .saturating_mul(ceil_log2(self.window.length().saturating_add(1)).max(1) as u64)
    }
}
