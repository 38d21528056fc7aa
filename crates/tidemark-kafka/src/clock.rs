//! Event time across partitions: the watermark is the minimum over the assigned partitions of
//! the largest event time each has shown, skipping partitions idle for longer than a timeout.
//!
//! # The rule
//!
//! Kafka orders messages within a partition, never across partitions: one partition may be an
//! hour behind another (a slow producer, a backlog being read). A watermark taken as the largest
//! time seen over all partitions would close windows that the lagging partition still has
//! records for, and those records would all be late. The rule Flink's Kafka source uses
//! (per-partition watermarks, "watermark alignment" of splits) is the safe one:
//!
//! ```text
//! watermark = min over active partitions p of max_time(p)
//! ```
//!
//! where `max_time(p)` is the largest event time the caller reported for a record of `p`. The
//! watermark never moves back: it is the largest value this rule has produced so far.
//!
//! A partition that receives nothing would hold the minimum, and so every window, forever.
//! Flink's `withIdleness(timeout)` answers that with wall time: a partition that has delivered no
//! message for `idle_timeout` (default [`PartitionClock::DEFAULT_IDLE_TIMEOUT`], 10 s of wall
//! time) is idle and is left out of the minimum until its next message. The price is stated:
//! when an idle partition comes back with older times, those records are behind the watermark
//! and follow the metric's `late` policy.
//!
//! The other cases:
//! - an active partition with no event time yet (just assigned, or its records carry no
//!   usable time) holds the watermark where it is, as Flink's splits without a watermark do:
//!   its first records may be older than anything seen;
//! - when every partition is idle, none is left out: the watermark is the minimum over all of
//!   them (a quiet stream does not advance event time by itself);
//! - a partition read to its end ([`PartitionClock::finish`], under `until_end`) can hold
//!   nothing back: when every partition is finished the watermark is the largest time seen, the
//!   input being complete;
//! - a revoked partition leaves the clock; its records are another consumer's now.
//!
//! The clock reads no clock: the caller passes `now` (an [`Instant`]), so the rule is tested
//! without sleeping.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use tidemark_kafka::{Partition, PartitionClock};
//!
//! let (a, b) = (Partition::new("t", 0), Partition::new("t", 1));
//! let t0 = Instant::now();
//! let mut clock = PartitionClock::new(Duration::from_secs(10));
//! clock.assign(a.clone(), t0);
//! clock.assign(b.clone(), t0);
//! clock.record(&a, Some(5_000), t0);
//! assert_eq!(clock.watermark(t0), None); // b has shown no time yet
//! clock.record(&b, Some(2_000), t0);
//! assert_eq!(clock.watermark(t0), Some(2_000)); // the minimum
//! // b falls silent; 11 s later only a holds the watermark.
//! let later = t0 + Duration::from_secs(11);
//! clock.record(&a, Some(9_000), later);
//! assert_eq!(clock.watermark(later), Some(9_000));
//! ```

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::Partition;

/// Per-partition event time and the watermark over them (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct PartitionClock {
    idle_timeout: Duration,
    lanes: BTreeMap<Partition, Lane>,
    watermark: Option<u64>,
}

#[derive(Clone, Copy, Debug)]
struct Lane {
    /// The largest event time reported for this partition.
    time: Option<u64>,
    /// When the partition last delivered a message (or was assigned).
    active_at: Instant,
    /// Read to its end: holds nothing back.
    finished: bool,
}

impl PartitionClock {
    /// The default idle timeout: a partition silent for 10 s of wall time stops holding the
    /// watermark back (Flink leaves idleness off by default and users commonly pick seconds to a
    /// minute; 10 s keeps a quiet partition's cost to about one short window).
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

    /// A clock with no partitions and no watermark.
    pub fn new(idle_timeout: Duration) -> PartitionClock {
        PartitionClock {
            idle_timeout,
            lanes: BTreeMap::new(),
            watermark: None,
        }
    }

    /// The idle timeout.
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// A partition was assigned at `now`: it holds the watermark until it shows a time or goes
    /// idle. Assigning a partition the clock has keeps what it knows.
    pub fn assign(&mut self, partition: Partition, now: Instant) {
        self.lanes.entry(partition).or_insert(Lane {
            time: None,
            active_at: now,
            finished: false,
        });
    }

    /// A partition was revoked: it leaves the minimum.
    pub fn revoke(&mut self, partition: &Partition) {
        self.lanes.remove(partition);
    }

    /// A partition was read to its end: it holds nothing back any more.
    pub fn finish(&mut self, partition: &Partition) {
        if let Some(lane) = self.lanes.get_mut(partition) {
            lane.finished = true;
        }
    }

    /// A message of `partition` arrived at `now`, with the event time the caller read from it
    /// (`None` when it has none, or when only the arrival is known yet). A partition the clock
    /// does not know is assigned first.
    pub fn record(&mut self, partition: &Partition, time: Option<u64>, now: Instant) {
        let lane = match self.lanes.get_mut(partition) {
            Some(lane) => lane,
            None => self.lanes.entry(partition.clone()).or_insert(Lane {
                time: None,
                active_at: now,
                finished: false,
            }),
        };
        lane.active_at = lane.active_at.max(now);
        if let Some(t) = time {
            lane.time = Some(lane.time.map_or(t, |old| old.max(t)));
        }
    }

    /// The largest event time reported for `partition`.
    pub fn partition_time(&self, partition: &Partition) -> Option<u64> {
        self.lanes.get(partition).and_then(|lane| lane.time)
    }

    /// Whether `partition` has delivered nothing for the idle timeout, as of `now`.
    pub fn is_idle(&self, partition: &Partition, now: Instant) -> bool {
        self.lanes
            .get(partition)
            .is_some_and(|lane| self.lane_idle(lane, now))
    }

    /// The partitions the clock follows.
    pub fn partitions(&self) -> impl Iterator<Item = &Partition> {
        self.lanes.keys()
    }

    /// The watermark as of `now`: the minimum over active partitions of their largest event
    /// time, never less than a watermark returned before; `None` until there is one.
    pub fn watermark(&mut self, now: Instant) -> Option<u64> {
        if let Some(candidate) = self.candidate(now) {
            self.watermark = Some(self.watermark.map_or(candidate, |w| w.max(candidate)));
        }
        self.watermark
    }

    /// The rule's value before the never-back clamp; `None` when it holds.
    fn candidate(&self, now: Instant) -> Option<u64> {
        let open = || self.lanes.values().filter(|lane| !lane.finished);
        if open().next().is_none() {
            // Everything read to its end (or nothing assigned): the input up to here is complete.
            return self.lanes.values().filter_map(|lane| lane.time).max();
        }
        let any_active = open().any(|lane| !self.lane_idle(lane, now));
        let mut min: Option<u64> = None;
        for lane in open() {
            if any_active && self.lane_idle(lane, now) {
                continue;
            }
            match lane.time {
                // An active partition without a time yet could still bring anything.
                None if !self.lane_idle(lane, now) => return None,
                None => {}
                Some(t) => min = Some(min.map_or(t, |m| m.min(t))),
            }
        }
        min
    }

    fn lane_idle(&self, lane: &Lane, now: Instant) -> bool {
        now.saturating_duration_since(lane.active_at) >= self.idle_timeout
    }
}

impl Default for PartitionClock {
    fn default() -> PartitionClock {
        PartitionClock::new(PartitionClock::DEFAULT_IDLE_TIMEOUT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: i32) -> Partition {
        Partition::new("t", n)
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn watermark_is_the_minimum_over_partitions() {
        let t0 = Instant::now();
        let mut clock = PartitionClock::new(secs(10));
        for n in 0..4 {
            clock.assign(p(n), t0);
        }
        for (n, time) in [(0, 400), (1, 100), (2, 300)] {
            clock.record(&p(n), Some(time), t0);
        }
        assert_eq!(clock.watermark(t0), None, "partition 3 has no time yet");
        clock.record(&p(3), Some(200), t0);
        assert_eq!(clock.watermark(t0), Some(100));
        clock.record(&p(1), Some(250), t0);
        assert_eq!(clock.watermark(t0), Some(200));
        // A partition's time is its largest: an older record does not pull it back.
        clock.record(&p(3), Some(50), t0);
        assert_eq!(clock.partition_time(&p(3)), Some(200));
        assert_eq!(clock.watermark(t0), Some(200));
    }

    #[test]
    fn watermark_equals_exact_model_over_a_seeded_sequence() {
        // The rule restated as a brute force over every step of a fixed pseudo-random schedule,
        // with no partition ever idle.
        let t0 = Instant::now();
        let mut clock = PartitionClock::new(secs(3600));
        let mut max = [None::<u64>; 5];
        for n in 0..5 {
            clock.assign(p(n), t0);
        }
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut model_last: Option<u64> = None;
        for _ in 0..2_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let n = (state % 5) as usize;
            let time = (state >> 8) % 10_000;
            clock.record(&p(n as i32), Some(time), t0);
            max[n] = Some(max[n].map_or(time, |m: u64| m.max(time)));
            let min = if max.iter().all(Option::is_some) {
                max.iter().flatten().min().copied()
            } else {
                None
            };
            if let Some(m) = min {
                model_last = Some(model_last.map_or(m, |w| w.max(m)));
            }
            assert_eq!(clock.watermark(t0), model_last);
        }
    }

    #[test]
    fn an_idle_partition_stops_holding_the_watermark() {
        let t0 = Instant::now();
        let mut clock = PartitionClock::new(secs(10));
        clock.assign(p(0), t0);
        clock.assign(p(1), t0);
        clock.record(&p(0), Some(1_000), t0);
        clock.record(&p(1), Some(500), t0);
        assert_eq!(clock.watermark(t0), Some(500));

        // Partition 0 keeps delivering; partition 1 falls silent.
        let t9 = t0 + secs(9);
        clock.record(&p(0), Some(2_000), t9);
        assert_eq!(clock.watermark(t9), Some(500), "9 s: not idle yet");
        assert!(!clock.is_idle(&p(1), t9));
        let t10 = t0 + secs(10);
        assert!(clock.is_idle(&p(1), t10));
        assert_eq!(clock.watermark(t10), Some(2_000), "10 s: idle, left out");

        // It comes back with an old time: the watermark does not move back.
        let t11 = t0 + secs(11);
        clock.record(&p(1), Some(700), t11);
        assert!(!clock.is_idle(&p(1), t11));
        assert_eq!(clock.watermark(t11), Some(2_000));
        // And holds it again until it catches up.
        clock.record(&p(0), Some(5_000), t11);
        assert_eq!(clock.watermark(t11), Some(2_000));
        clock.record(&p(1), Some(4_000), t11);
        assert_eq!(clock.watermark(t11), Some(4_000));
    }

    #[test]
    fn an_assigned_partition_without_time_holds_until_idle() {
        let t0 = Instant::now();
        let mut clock = PartitionClock::new(secs(10));
        clock.assign(p(0), t0);
        clock.record(&p(0), Some(1_000), t0);
        assert_eq!(clock.watermark(t0), Some(1_000));
        clock.assign(p(1), t0 + secs(1));
        clock.record(&p(0), Some(3_000), t0 + secs(2));
        assert_eq!(clock.watermark(t0 + secs(2)), Some(1_000), "held by p1");
        // Arrivals without a time keep it active but give it no time.
        clock.record(&p(1), None, t0 + secs(5));
        clock.record(&p(0), Some(3_500), t0 + secs(14));
        assert_eq!(clock.watermark(t0 + secs(14)), Some(1_000));
        clock.record(&p(0), Some(3_600), t0 + secs(15));
        assert_eq!(
            clock.watermark(t0 + secs(15)),
            Some(3_600),
            "p1 idle at 15 s"
        );
    }

    #[test]
    fn when_every_partition_is_idle_all_count() {
        let t0 = Instant::now();
        let mut clock = PartitionClock::new(secs(10));
        clock.assign(p(0), t0);
        clock.assign(p(1), t0);
        clock.record(&p(0), Some(9_000), t0);
        clock.record(&p(1), Some(3_000), t0);
        let quiet = t0 + secs(60);
        assert!(clock.is_idle(&p(0), quiet) && clock.is_idle(&p(1), quiet));
        assert_eq!(clock.watermark(quiet), Some(3_000));
        // One wakes: it alone counts.
        clock.record(&p(0), Some(9_500), quiet);
        assert_eq!(clock.watermark(quiet), Some(9_500));
    }

    #[test]
    fn finished_and_revoked_partitions_hold_nothing() {
        let t0 = Instant::now();
        let mut clock = PartitionClock::new(secs(10));
        for n in 0..3 {
            clock.assign(p(n), t0);
        }
        clock.record(&p(0), Some(100), t0);
        clock.record(&p(1), Some(700), t0);
        assert_eq!(clock.watermark(t0), None, "p2 has no time");
        clock.revoke(&p(2));
        assert_eq!(clock.watermark(t0), Some(100));
        clock.finish(&p(0));
        assert_eq!(clock.watermark(t0), Some(700));
        clock.record(&p(1), Some(900), t0);
        clock.finish(&p(1));
        assert_eq!(
            clock.watermark(t0),
            Some(900),
            "all finished: the largest time"
        );
        assert_eq!(clock.partitions().count(), 2);
    }

    #[test]
    fn no_partitions_no_watermark_and_unknown_partitions_join() {
        let t0 = Instant::now();
        let mut clock = PartitionClock::default();
        assert_eq!(clock.idle_timeout(), PartitionClock::DEFAULT_IDLE_TIMEOUT);
        assert_eq!(clock.watermark(t0), None);
        clock.record(&p(7), Some(42), t0);
        assert_eq!(clock.watermark(t0), Some(42));
        assert!(
            !clock.is_idle(&p(8), t0),
            "an unknown partition is not idle"
        );
    }
}
