//! The quantile ring against exact windows: every window answer within α of the exact
//! nearest-rank quantile of the values whose bucket is in the window, bracket holding it;
//! the sliding aggregate equal to a fresh merge of the window's buckets; late events in
//! their own buckets; events older than the ring refused.

mod quantile_data;

use quantile_data::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::quantile::{DdSketch, QuantileError, QuantileRing};

/// Events `(tick, value)`: ticks mostly increasing, a share late by up to `late` ticks.
fn events(seed: u64, n: usize, per_tick: f64, late: u64) -> Vec<(u64, f64)> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let values = bimodal(seed, n);
    let mut t = 0.0f64;
    values
        .into_iter()
        .map(|v| {
            t += rng.random::<f64>() * 2.0 / per_tick;
            let tick = t as u64;
            let tick = if rng.random_bool(0.05) {
                tick.saturating_sub(rng.random_range(0..=late))
            } else {
                tick
            };
            (tick, v)
        })
        .collect()
}

/// The values whose bucket lies in the `window` buckets ending at `now`'s.
fn exact_window(seen: &[(u64, f64)], width: u64, now: u64, window: u64) -> Vec<f64> {
    let nb = now / width;
    let mut v: Vec<f64> = seen
        .iter()
        .filter(|(t, _)| t / width <= nb && t / width + window > nb)
        .map(|&(_, v)| v)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

fn fresh_merge(ring: &QuantileRing, now: u64, window: u64) -> DdSketch {
    let nb = now / ring.width();
    let mut out = ring.empty_sketch().clone();
    for b in nb.saturating_sub(window - 1)..=nb {
        if let Some(s) = ring.bucket(b) {
            out.merge(s).unwrap();
        }
    }
    out
}

#[test]
fn windows_match_exact_windows_as_time_goes_by() {
    let width = 60;
    for (window, buckets) in [(1u64, 4u32), (5, 5), (60, 60), (60, 90)] {
        let mut ring = QuantileRing::new(0.01, width, buckets).unwrap();
        let mut seen = Vec::new();
        let evs = events(window, 60_000, 5.0, 150);
        for (i, &(tick, v)) in evs.iter().enumerate() {
            ring.insert(v, tick).unwrap();
            seen.push((tick, v));
            if i % 997 == 0 || i + 1 == evs.len() {
                let now = seen.iter().map(|e| e.0).max().unwrap();
                let truth = exact_window(&seen, width, now, window);
                let w = ring.window(now, window).unwrap();
                assert_eq!(w.count(), truth.len() as u64, "window {window} at {now}");
                // The sliding aggregate is the merge of the buckets, bin for bin.
                let fresh = fresh_merge(&ring, now, window);
                assert_eq!(w, fresh, "window {window} at {now}");
                for q in QS {
                    let a = ring.quantile(now, window, q).unwrap();
                    assert_within(&a, exact(&truth, q), 0.01, &format!("W {window} q {q}"));
                }
            }
        }
    }
}

#[test]
fn a_day_of_minute_buckets_answers_the_last_hour_and_the_whole_day() {
    // Second ticks, minute buckets, 1,440 of them; queries every ten minutes for the last
    // 60 and the last 1,440 buckets.
    let width = 60;
    let mut ring = QuantileRing::new(0.01, width, 1_440).unwrap();
    let values = lognormal(41, 2 * 86_400, 3.0, 1.0);
    let mut seen = Vec::new();
    for (second, &v) in values.iter().enumerate() {
        let tick = second as u64;
        ring.insert(v, tick).unwrap();
        seen.push((tick, v));
        if tick % 600 == 599 && tick > 80_000 {
            for window in [60, 1_440] {
                let truth = exact_window(&seen, width, tick, window);
                for q in QS {
                    let a = ring.quantile(tick, window, q).unwrap();
                    assert_within(&a, exact(&truth, q), 0.01, &format!("W {window} at {tick}"));
                }
            }
        }
    }
}

#[test]
fn windows_in_the_past_and_the_future_merge_what_they_cover() {
    let mut ring = QuantileRing::new(0.01, 10, 20).unwrap();
    let mut seen = Vec::new();
    for tick in 0..200u64 {
        let v = (tick % 37) as f64 + 1.0;
        ring.insert(v, tick).unwrap();
        seen.push((tick, v));
    }
    // In the past (the aggregate untouched), the present, the future (a quiet stretch).
    for now in [150u64, 199, 205, 260, 199, 150] {
        for window in [1u64, 3, 20] {
            let truth = exact_window(&seen, 10, now, window);
            let w = ring.window(now, window).unwrap();
            assert_eq!(w, fresh_merge(&ring, now, window), "{now} {window}");
            assert_eq!(w.count(), truth.len() as u64);
        }
    }
    // Later events after a query in the future still land in the aggregate correctly.
    ring.window(260, 20).unwrap();
    for tick in 200..240u64 {
        ring.insert(1.0, tick).unwrap();
        seen.push((tick, 1.0));
    }
    for now in [239u64, 260, 300] {
        let w = ring.window(now, 20).unwrap();
        assert_eq!(w, fresh_merge(&ring, now, 20), "{now}");
        assert_eq!(w.count(), exact_window(&seen, 10, now, 20).len() as u64);
    }
}

#[test]
fn old_events_and_bad_windows_are_refused() {
    let mut ring = QuantileRing::new(0.01, 10, 6).unwrap();
    ring.insert(1.0, 100).unwrap(); // bucket 10
    ring.insert(2.0, 50).unwrap(); // bucket 5, the oldest the ring holds
    assert_eq!(
        ring.insert(3.0, 49),
        Err(QuantileError::TooOld {
            bucket: 4,
            oldest: 5
        })
    );
    assert!(matches!(
        ring.insert(f64::NAN, 100),
        Err(QuantileError::NotFinite { .. })
    ));
    assert!(matches!(
        ring.insert(f64::INFINITY, 100),
        Err(QuantileError::NotFinite { .. })
    ));
    assert_eq!(
        ring.window(100, 0).unwrap_err(),
        QuantileError::Window {
            window: 0,
            buckets: 6
        }
    );
    assert!(ring.window(100, 7).is_err());
    assert!(ring.quantile(100, 6, 2.0).is_err());
    assert_eq!(ring.window(100, 6).unwrap().count(), 2);
    assert_eq!(
        QuantileRing::new(0.01, 0, 6).unwrap_err().name,
        "bucket width"
    );
    assert_eq!(QuantileRing::new(0.01, 10, 0).unwrap_err().name, "buckets");
    assert_eq!(
        QuantileRing::new(0.01, 10, 1_000_001).unwrap_err().name,
        "buckets"
    );
    assert_eq!(QuantileRing::new(1.5, 10, 6).unwrap_err().name, "alpha");
    // An empty window answers Empty, not a panic.
    let mut empty = QuantileRing::new(0.01, 10, 6).unwrap();
    assert_eq!(empty.quantile(0, 6, 0.5), Err(QuantileError::Empty));
    assert_eq!(ring.quantile(10_000, 2, 0.5), Err(QuantileError::Empty));
}

#[test]
fn a_collapsing_window_is_rebuilt_not_left_collapsed() {
    // Buckets alternate between two far-apart ranges; a window of two buckets spans both
    // and collapses, a window of one does not: the slid aggregate must match the merge.
    let m = tidemark::quantile::Mapping::cubic(0.01).unwrap();
    let empty = DdSketch::with_mapping(m, 300).unwrap();
    let mut ring = QuantileRing::of(empty, 10, 8).unwrap();
    for tick in 0..400u64 {
        let v = if (tick / 10) % 4 == 0 {
            1e6
        } else {
            1.0 + (tick % 7) as f64
        };
        ring.insert(v, tick).unwrap();
        if tick % 10 == 9 {
            for window in [3u64, 8] {
                let w = ring.window(tick, window).unwrap();
                assert_eq!(w, fresh_merge(&ring, tick, window), "{tick} {window}");
            }
        }
    }
}

#[test]
fn the_last_ticks_of_time_do_not_overflow() {
    let mut ring = QuantileRing::new(0.01, 1, 4).unwrap();
    for t in (u64::MAX - 10)..=u64::MAX {
        ring.insert(1.0, t).unwrap();
        ring.quantile(t, 4, 0.5).unwrap();
        ring.quantile(t, 1, 0.5).unwrap();
    }
    ring.insert(2.0, u64::MAX - 2).unwrap(); // late: into its bucket and the aggregate
    let w = ring.window(u64::MAX, 4).unwrap();
    assert_eq!(w.count(), 5);
    assert_eq!(w, fresh_merge(&ring, u64::MAX, 4));
    let mut wide = QuantileRing::new(0.01, u64::MAX, 3).unwrap();
    wide.insert(1.0, u64::MAX).unwrap();
    wide.insert(1.0, 0).unwrap();
    assert_eq!(wide.window(u64::MAX, 3).unwrap().count(), 2);
}
