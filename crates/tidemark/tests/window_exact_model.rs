//! The exponential histogram against an exact window (a `VecDeque`): the bracket always holds
//! the truth, the point estimate is within ε/2 of it, and a window of size-1 buckets is exact.

use std::collections::VecDeque;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::window::{BlockCounter, ExpHistogram, MultiWindow};
use tidemark::Method;

/// Checks one answer against the truth.
fn check(h: &ExpHistogram, truth: u64, eps: f64, at: u64) {
    let e = h.estimate();
    let t = truth as f64;
    assert!(
        e.contains(t),
        "at {at}: bracket [{}, {}] misses {t}",
        e.low,
        e.high
    );
    assert!(
        (e.value - t).abs() <= eps / 2.0 * t + 1e-9,
        "at {at}: estimate {} is more than ε/2 = {} from {t}",
        e.value,
        eps / 2.0
    );
    assert_eq!(h.upper_bound() as f64, e.high);
    if h.buckets().all(|b| b.size == 1) {
        assert_eq!(e.value, t, "at {at}: size-1 buckets must be exact");
        assert_eq!(e.method, Method::Exact);
    }
    if let Some(i) = h.interpolated() {
        assert!(
            e.low <= i.value && i.value <= e.high,
            "interpolation leaves the bracket"
        );
    }
}

/// An arrivals window fed a Bernoulli stream, checked after every arrival.
fn run_arrivals(window: u64, eps: f64, density: f64, len: u64, seed: u64) {
    let mut h = ExpHistogram::arrivals(window, eps)
        .unwrap()
        .with_interpolation();
    let mut exact: VecDeque<bool> = VecDeque::new();
    let mut ones = 0u64;
    let mut rng = Pcg64::seed_from_u64(seed);
    for i in 1..=len {
        let bit = rng.random_bool(density);
        h.push(bit).unwrap();
        exact.push_back(bit);
        ones += bit as u64;
        if exact.len() as u64 > window {
            ones -= exact.pop_front().unwrap() as u64;
        }
        check(&h, ones, eps, i);
    }
}

/// A ticks window fed 0..=3 events a tick (with idle stretches), checked after every tick.
fn run_ticks(window: u64, eps: f64, density: f64, len: u64, seed: u64) {
    let mut h = ExpHistogram::ticks(window, eps)
        .unwrap()
        .with_interpolation();
    let mut exact: VecDeque<u64> = VecDeque::new();
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut tick = 0u64;
    for _ in 0..len {
        // Mostly one tick at a time, sometimes a long idle gap.
        tick += if rng.random_bool(0.01) {
            rng.random_range(0..=2 * window)
        } else {
            1
        };
        h.advance_to(tick).unwrap();
        let events = (0..3).filter(|_| rng.random_bool(density)).count();
        for _ in 0..events {
            h.record(tick).unwrap();
            exact.push_back(tick);
        }
        while exact.front().is_some_and(|&t| t + window <= tick) {
            exact.pop_front();
        }
        check(&h, exact.len() as u64, eps, tick);
    }
}

fn log_uniform(rng: &mut Pcg64, lo: f64, hi: f64) -> f64 {
    (rng.random_range(lo.ln()..=hi.ln())).exp()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn arrivals_window_bracket_and_bound(seed in any::<u64>()) {
        let mut rng = Pcg64::seed_from_u64(seed);
        let window = log_uniform(&mut rng, 1.0, 1e5).round() as u64;
        let eps = log_uniform(&mut rng, 0.01, 0.5);
        let density = log_uniform(&mut rng, 0.001, 1.0);
        let len = (3 * window + 100).min(150_000);
        run_arrivals(window, eps, density, len, seed);
    }

    #[test]
    fn ticks_window_bracket_and_bound(seed in any::<u64>()) {
        let mut rng = Pcg64::seed_from_u64(seed);
        let window = log_uniform(&mut rng, 1.0, 1e5).round() as u64;
        let eps = log_uniform(&mut rng, 0.01, 0.5);
        let density = log_uniform(&mut rng, 0.001, 1.0);
        let len = (3 * window + 100).min(100_000);
        run_ticks(window, eps, density, len, seed);
    }
}

#[test]
fn corners_of_the_parameter_space() {
    // The extremes the property test samples only rarely.
    for (w, eps, density) in [
        (1, 0.5, 1.0),
        (1, 0.01, 0.5),
        (2, 0.5, 1.0),
        (100_000, 0.01, 1.0),
        (100_000, 0.5, 0.001),
        (1_000, 0.5, 1.0),
    ] {
        run_arrivals(w, eps, density, 3 * w + 50, 11);
        run_ticks(w, eps, density, (3 * w + 50).min(50_000), 12);
    }
}

#[test]
fn a_quiet_window_is_exact() {
    // Five ones in a long window: all in size-1 buckets, so the answer is exactly 5, not the
    // textbook 4.5 (tidemark's correction to Datar et al.'s estimate: subtract (size − 1)/2,
    // not size/2).
    let mut h = ExpHistogram::arrivals(1_000, 0.1).unwrap();
    for i in 0..500 {
        h.push(i % 100 == 0).unwrap();
    }
    let e = h.estimate();
    assert_eq!((e.value, e.low, e.high), (5.0, 5.0, 5.0));
}

#[test]
fn the_worked_example_of_twenty_arrivals() {
    // The design's worked example: at k = 2 the first twenty ones make twelve merges and
    // 4 4 4 2 2 2 1 1; the fourth arrival makes the first merge and the tenth cascades twice.
    let mut h = ExpHistogram::arrivals_with_k(1_000, 2).unwrap();
    let mut per_arrival = Vec::new();
    for _ in 0..20 {
        let before = h.stats().merges;
        h.push(true).unwrap();
        per_arrival.push(h.stats().merges - before);
    }
    let sizes: Vec<u64> = h.buckets().map(|b| b.size).collect();
    assert_eq!(sizes, [4, 4, 4, 2, 2, 2, 1, 1]);
    assert_eq!(h.stats().merges, 12);
    assert_eq!(per_arrival[2], 0);
    assert_eq!(per_arrival[3], 1);
    assert_eq!(per_arrival[9], 2);
    // Timestamps, oldest first, are those of each bucket's newest arrival.
    let stamps: Vec<u64> = h.buckets().map(|b| b.timestamp).collect();
    assert_eq!(stamps, [4, 8, 12, 14, 16, 18, 19, 20]);
}

#[test]
fn merges_amortise_below_one_and_cascades_stay_logarithmic() {
    for &(eps, density, window) in &[
        (0.5, 1.0, 1u64 << 20),
        (0.1, 1.0, 1 << 20),
        (0.1, 0.3, 1 << 20),
        (0.01, 1.0, 1 << 20),
        (0.1, 0.5, 1 << 21),
    ] {
        let mut h = ExpHistogram::arrivals(window, eps).unwrap();
        let mut rng = Pcg64::seed_from_u64(5);
        let mut ones = 0u64;
        for _ in 0..2_000_000 {
            let bit = rng.random_bool(density);
            ones += bit as u64;
            h.push(bit).unwrap();
        }
        let s = h.stats();
        // Each one opens a bucket; each merge turns two buckets into one; expiry drops
        // buckets. So merges = ones − held − expired ≤ ones − held, with equality when
        // nothing has expired (the second window holds the whole stream): a miscounted merge
        // fails here. (Merges below the ones is true by construction, so not worth a check.)
        let held = s.buckets as u64;
        if window >= 2_000_000 {
            assert_eq!(
                s.merges,
                ones - held,
                "no expiry: every one not held was merged"
            );
        } else {
            assert!(
                s.merges <= ones - held,
                "{} merges for {ones} ones with {held} held",
                s.merges
            );
        }
        // One arrival merges at most once per size class: ⌈log2 N⌉ + 1 classes.
        let max_classes = (ones as f64).log2().ceil() as u64 + 1;
        assert!(
            s.worst_merges <= max_classes,
            "worst arrival made {} merges, more than {max_classes}",
            s.worst_merges
        );
        // And the bucket count is about k·log2(N/k): at most (k + 1) per class.
        let k = (1.0 / eps).ceil();
        let n = h.estimate().high;
        let bound = (k + 1.0) * ((n / k).log2().ceil() + 1.0);
        assert!(
            (s.buckets as f64) <= bound,
            "{} buckets > {bound}",
            s.buckets
        );
    }
}

#[test]
fn sums_equal_as_many_single_events() {
    // A value v at tick t must leave exactly the state of v single events at t.
    let mut rng = Pcg64::seed_from_u64(99);
    for &k in &[1u32, 2, 3, 10] {
        let mut batched = ExpHistogram::new(tidemark::window::Window::Ticks(500), k).unwrap();
        let mut single = batched.clone();
        for tick in 0..3_000u64 {
            let v = match rng.random_range(0..4) {
                0 => 0,
                1 => rng.random_range(1..5),
                2 => rng.random_range(5..200),
                _ => rng.random_range(200..5_000),
            };
            batched.record_value(tick, v).unwrap();
            single.advance_to(tick).unwrap();
            for _ in 0..v {
                single.record(tick).unwrap();
            }
            let a: Vec<_> = batched.buckets().collect();
            let b: Vec<_> = single.buckets().collect();
            assert_eq!(a, b, "k = {k}, tick {tick}, value {v}");
            assert_eq!(batched.stats().merges, single.stats().merges);
            assert_eq!(batched.estimate(), single.estimate());
        }
    }
}

#[test]
fn clock_misuse_is_refused_and_loses_nothing() {
    let mut h = ExpHistogram::ticks(10, 0.1).unwrap();
    h.record(5).unwrap();
    h.record(7).unwrap();
    let before = h.estimate();
    assert_eq!(
        h.record(6),
        Err(tidemark::window::ClockError::Backwards { now: 7, got: 6 })
    );
    assert_eq!(h.estimate(), before);
    assert!(h.push(true).is_err());
    let mut a = ExpHistogram::arrivals(10, 0.1).unwrap();
    assert!(a.record(3).is_err());
    assert!(ExpHistogram::arrivals(0, 0.1).is_err());
    for eps in [0.0, 1.0, -0.1, f64::NAN, 2.0] {
        assert!(
            ExpHistogram::arrivals(10, eps).is_err(),
            "ε = {eps} accepted"
        );
    }
}

#[test]
fn block_counter_brackets_the_truth() {
    let mut rng = Pcg64::seed_from_u64(3);
    for &(w, k) in &[(100u64, 10u32), (1_000, 7), (10, 10), (37, 5)] {
        let mut b = BlockCounter::arrivals(w, k).unwrap();
        let mut exact = VecDeque::new();
        let mut ones = 0u64;
        for i in 0..20 * w {
            let bit = rng.random_bool(0.3);
            b.push(bit).unwrap();
            exact.push_back(bit);
            ones += bit as u64;
            if exact.len() as u64 > w {
                ones -= exact.pop_front().unwrap() as u64;
            }
            let e = b.estimate();
            assert!(e.contains(ones as f64), "w {w} k {k} at {i}: {e} vs {ones}");
        }
    }
    let mut t = BlockCounter::ticks(60, 6).unwrap();
    let mut exact = VecDeque::new();
    for tick in (0..2_000u64).step_by(3) {
        t.record(tick).unwrap();
        exact.push_back(tick);
        while exact.front().is_some_and(|&x| x + 60 <= tick) {
            exact.pop_front();
        }
        assert!(t.estimate().contains(exact.len() as f64));
    }
}

#[test]
fn multi_window_answers_each_window() {
    let mut m = MultiWindow::ticks(&[10, 100, 1_000], 0.05).unwrap();
    let mut exact = Vec::new();
    let mut rng = Pcg64::seed_from_u64(8);
    for tick in 0..5_000u64 {
        m.advance_to(tick).unwrap();
        if rng.random_bool(0.4) {
            m.record(tick).unwrap();
            exact.push(tick);
        }
        if tick % 97 == 0 {
            let e = m.estimates();
            for (i, &w) in [10u64, 100, 1_000].iter().enumerate() {
                let truth = exact.iter().filter(|&&t| t + w > tick).count() as f64;
                assert!(e[i].contains(truth), "window {w} at {tick}");
            }
        }
    }
    assert!(m.record(1).is_err());
}

/// A block counter over the longest windows holds only the blocks its events fill (it used
/// to reserve every block of the window at construction), and one at the last ticks of time
/// counts there as anywhere.
#[test]
fn block_counters_at_the_extremes_of_windows_and_time() {
    let mut c = BlockCounter::with_block(tidemark::window::Window::Ticks(u64::MAX), 1).unwrap();
    assert!(c.bits() > 0);
    for t in [5u64, 6, 6, 1_000] {
        c.record(t).unwrap();
    }
    assert_eq!(c.blocks().count(), 3);
    let e = c.estimate();
    assert_eq!((e.low, e.value, e.high), (4.0, 4.0, 4.0));
    let mut late = BlockCounter::ticks(100, 10).unwrap();
    late.record(u64::MAX - 5).unwrap();
    late.record(u64::MAX).unwrap();
    let e = late.estimate();
    assert!(e.low <= 2.0 && 2.0 <= e.high, "{e:?}");
}

/// An exponential histogram whose clock reaches the last tick of time still holds the events
/// inside its window, and its encoding reads back.
#[test]
fn an_exponential_histogram_at_the_end_of_time_keeps_its_window() {
    let mut h = ExpHistogram::ticks(10, 0.5).unwrap();
    h.record(u64::MAX - 5).unwrap();
    h.record(u64::MAX).unwrap();
    let e = h.estimate();
    assert!(e.low <= 2.0 && 2.0 <= e.high, "{e:?}");
    assert_eq!(e.high, 2.0);
    let back = ExpHistogram::from_bytes(&h.to_bytes()).unwrap();
    assert_eq!(back.estimate(), e);
    // The window's oldest tick is now − 9: an event at now − 10 has left it.
    let mut edge = ExpHistogram::ticks(10, 0.5).unwrap();
    edge.record(u64::MAX - 10).unwrap();
    edge.record(u64::MAX).unwrap();
    assert_eq!(edge.estimate().high, 1.0);
}

#[test]
fn stamps_kept_in_32_bits_restore_across_wraps_long_gaps_and_long_windows() {
    // Windows at and past 2^32 ticks (32-bit stamps up to 2^32, whole ones past it), ticks
    // striding across multiples of 2^32 and idle gaps longer than 2^32: every answer and every
    // bucket against the exact window, and through an encode and decode.
    for window in [1_000u64, 1 << 32, (1 << 32) + 1, 3 << 33] {
        let mut h = ExpHistogram::ticks(window, 0.25).unwrap();
        let mut exact: VecDeque<u64> = VecDeque::new();
        let mut rng = Pcg64::seed_from_u64(window);
        let mut tick = (1u64 << 32) - 50;
        for step in 0..3_000 {
            tick += match rng.random_range(0..10) {
                0 => window / 3 + 1,
                1 => window.saturating_sub(1).max(1),
                2 => (1 << 32) + 5,
                _ => rng.random_range(1..=40),
            };
            for _ in 0..rng.random_range(0..4) {
                h.record(tick).unwrap();
                exact.push_back(tick);
            }
            h.advance_to(tick).unwrap();
            while exact.front().is_some_and(|&t| t + window <= tick) {
                exact.pop_front();
            }
            check(&h, exact.len() as u64, 0.25, tick);
            // Every bucket's stamp is one of the window's events, newest last.
            let stamps: Vec<u64> = h.buckets().map(|b| b.timestamp).collect();
            assert!(
                stamps.windows(2).all(|w| w[0] <= w[1]),
                "{window} at {step}"
            );
            assert!(
                stamps.iter().all(|t| exact.contains(t)),
                "{window} at {step}"
            );
            if step % 97 == 0 {
                let back = ExpHistogram::from_bytes(&h.to_bytes()).unwrap();
                assert_eq!(
                    back.buckets().collect::<Vec<_>>(),
                    h.buckets().collect::<Vec<_>>()
                );
                assert_eq!(back.estimate(), h.estimate());
            }
        }
    }
}
