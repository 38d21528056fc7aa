//! The timestamps of one size class of an exponential histogram, oldest first, in 32 bits
//! each when the window allows it.
//!
//! A bucket is held only while its newest arrival is inside the window, so every held stamp is
//! less than `W` before the newest stamp held. With `W ≤ 2^32` a stamp's low 32 bits and the
//! newest stamp (kept whole by the histogram) restore it exactly:
//! `t = newest − (newest mod 2^32 − t mod 2^32) mod 2^32`. Half the bytes of 64-bit stamps;
//! longer windows keep them whole.

use std::collections::VecDeque;

/// The most ticks (or arrivals) a window may span for its stamps to be kept in 32 bits.
pub(crate) const NARROW_SPAN: u64 = 1 << 32;

/// One class's stamps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stamps {
    /// The low 32 bits of each stamp.
    Narrow(VecDeque<u32>),
    /// Whole stamps (windows longer than 2^32).
    Wide(VecDeque<u64>),
}

/// The stamp whose low 32 bits are `low`, at most 2^32 − 1 before `newest`.
#[inline]
fn restore(newest: u64, low: u32) -> u64 {
    newest - (newest as u32).wrapping_sub(low) as u64
}

impl Stamps {
    /// Empty stamps for a window of `span` ticks or arrivals, room for `capacity`.
    pub(crate) fn new(span: u64, capacity: usize) -> Stamps {
        if span <= NARROW_SPAN {
            Stamps::Narrow(VecDeque::with_capacity(capacity))
        } else {
            Stamps::Wide(VecDeque::with_capacity(capacity))
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            Stamps::Narrow(s) => s.len(),
            Stamps::Wide(s) => s.len(),
        }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th oldest stamp, given the newest stamp held anywhere in the histogram.
    #[inline]
    pub(crate) fn get(&self, i: usize, newest: u64) -> u64 {
        match self {
            Stamps::Narrow(s) => restore(newest, s[i]),
            Stamps::Wide(s) => s[i],
        }
    }

    /// The oldest stamp.
    #[inline]
    pub(crate) fn front(&self, newest: u64) -> Option<u64> {
        (!self.is_empty()).then(|| self.get(0, newest))
    }

    /// Adds a stamp (newer than every one in the class, at most 2^32 − 1 before `newest`
    /// when narrow).
    #[inline]
    pub(crate) fn push_back(&mut self, t: u64) {
        match self {
            Stamps::Narrow(s) => s.push_back(t as u32),
            Stamps::Wide(s) => s.push_back(t),
        }
    }

    /// Removes and returns the oldest stamp.
    #[inline]
    pub(crate) fn pop_front(&mut self, newest: u64) -> Option<u64> {
        match self {
            Stamps::Narrow(s) => s.pop_front().map(|low| restore(newest, low)),
            Stamps::Wide(s) => s.pop_front(),
        }
    }

    /// Removes the `n` oldest stamps.
    pub(crate) fn drop_front(&mut self, n: usize) {
        match self {
            Stamps::Narrow(s) => drop(s.drain(..n)),
            Stamps::Wide(s) => drop(s.drain(..n)),
        }
    }

    /// The stamps, oldest first.
    pub(crate) fn iter(&self, newest: u64) -> impl Iterator<Item = u64> + '_ {
        let (narrow, wide) = match self {
            Stamps::Narrow(s) => (Some(s.iter().map(move |&low| restore(newest, low))), None),
            Stamps::Wide(s) => (None, Some(s.iter().copied())),
        };
        narrow
            .into_iter()
            .flatten()
            .chain(wide.into_iter().flatten())
    }

    /// Heap bytes: the deque's whole capacity.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Stamps::Narrow(s) => 4 * s.capacity(),
            Stamps::Wide(s) => 8 * s.capacity(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_stamps_restore_anywhere_in_the_clock() {
        // Stamps up to 2^32 − 1 before the newest restore exactly, across the wrap of the low
        // 32 bits and at the top of the clock.
        for newest in [5u64, 1 << 32, (1 << 32) + 3, 7 << 40, u64::MAX] {
            let mut s = Stamps::new(NARROW_SPAN, 4);
            let stamps: Vec<u64> = [NARROW_SPAN - 1, 1 << 31, 7, 1, 0]
                .iter()
                .filter_map(|&back| newest.checked_sub(back))
                .collect();
            for &t in &stamps {
                s.push_back(t);
            }
            assert_eq!(s.iter(newest).collect::<Vec<_>>(), stamps, "{newest}");
            assert_eq!(s.front(newest), stamps.first().copied());
            assert_eq!(s.pop_front(newest), stamps.first().copied());
            assert_eq!(s.len(), stamps.len() - 1);
        }
        assert!(matches!(Stamps::new(NARROW_SPAN + 1, 1), Stamps::Wide(_)));
    }
}
