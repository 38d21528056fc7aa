//! Window structures in the envelope: round trips are identity, no byte string makes the
//! decoder panic, and the committed test vectors still decode (a format change that breaks
//! old files fails here).

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::codec::{self, Family};
use tidemark::hash::ItemHasher;
use tidemark::window::{BlockCounter, ExpHistogram, Window};
use tidemark::DecodeError;

fn sample_histograms() -> Vec<ExpHistogram> {
    let mut out = vec![
        ExpHistogram::arrivals(100, 0.1).unwrap(),
        ExpHistogram::ticks(60, 0.5).unwrap().with_interpolation(),
    ];
    let mut rng = Pcg64::seed_from_u64(1);
    for &(span, k) in &[
        (Window::Arrivals(1_000), 10u32),
        (Window::Arrivals(7), 1),
        (Window::Ticks(500), 3),
        (Window::Ticks(1), 2),
    ] {
        let mut h = ExpHistogram::new(span, k).unwrap();
        for tick in 0..5_000u64 {
            match span {
                Window::Arrivals(_) => h.push(rng.random_bool(0.6)).unwrap(),
                Window::Ticks(_) => h.record_value(tick, rng.random_range(0..4)).unwrap(),
            }
        }
        out.push(h.clone());
        out.push(h.with_interpolation());
    }
    out
}

/// `back`, decoded, is `h`: its buckets, answers, counters and clock.
fn assert_same_histogram(back: &ExpHistogram, h: &ExpHistogram) {
    assert_eq!(
        back.buckets().collect::<Vec<_>>(),
        h.buckets().collect::<Vec<_>>()
    );
    assert_eq!(back.estimate(), h.estimate());
    assert_eq!(back.interpolated(), h.interpolated());
    assert_eq!(back.stats(), h.stats());
    assert_eq!(back.now(), h.now());
}

#[test]
fn histogram_round_trips() {
    for h in sample_histograms() {
        let bytes = h.to_bytes();
        let back = ExpHistogram::from_bytes(&bytes).unwrap();
        assert_same_histogram(&back, &h);
        assert_eq!(back.to_bytes(), bytes, "re-encoding differs");
    }
}

/// The compact payload of a histogram, read back with its window, k and interpolation.
fn from_compact(h: &ExpHistogram, payload: &[u8]) -> Result<ExpHistogram, DecodeError> {
    ExpHistogram::from_compact_payload(h.window(), h.k(), h.interpolated().is_some(), payload)
}

/// The compact payload holds the same histogram: read back with the parameters it was made
/// with, it is the histogram the fixed envelope holds, it re-encodes to its own bytes, and it
/// is smaller wherever there are buckets.
#[test]
fn compact_payloads_round_trip_and_are_smaller() {
    for h in sample_histograms() {
        let fixed = h.to_bytes();
        let compact = h.to_compact_payload();
        let back = from_compact(&h, &compact).unwrap();
        assert_same_histogram(&back, &h);
        assert_eq!(back.to_compact_payload(), compact, "re-encoding differs");
        assert_eq!(
            back.to_bytes(),
            fixed,
            "the fixed envelope of the same histogram"
        );
        if h.buckets().count() > 0 {
            let payload = codec::decode(&fixed).unwrap().payload.len();
            assert!(
                compact.len() < payload,
                "{} against {payload} bytes",
                compact.len()
            );
        }
        // With other parameters: refused, or read as theirs, never a panic.
        for (window, k) in [
            (Window::Ticks(1), 1),
            (Window::Arrivals(3), 2),
            (Window::Ticks(0), 3),
            (h.window(), 0),
            (h.window(), 2_000_000),
        ] {
            if let Ok(other) = ExpHistogram::from_compact_payload(window, k, false, &compact) {
                let e = other.estimate();
                assert!(e.low <= e.value && e.value <= e.high);
            }
        }
    }
    // A count metric's window: ten minutes of one-minute buckets at ε = 0.05, each bucket
    // stamped at its last tick with its count (about 150 events a minute).
    let mut h = ExpHistogram::ticks(600_000, 0.05).unwrap();
    for minute in 1..=30u64 {
        h.record_value(minute * 60_000 - 1, 140 + minute % 20)
            .unwrap();
    }
    let (fixed, compact) = (h.to_bytes().len(), h.to_compact_payload().len());
    assert!(
        compact * 5 < fixed,
        "a count window: {compact} compact bytes against {fixed}"
    );
}

/// An envelope never carries the compact payload: its flag is refused by name.
#[test]
fn an_envelope_with_the_compact_flag_is_refused() {
    let h = ExpHistogram::ticks(100, 0.5).unwrap();
    let env_bytes = h.to_bytes();
    let env = codec::decode(&env_bytes).unwrap();
    let flagged = codec::encode(
        Family::ExpHistogram,
        env.flags | 2,
        env.hasher,
        env.params,
        &h.to_compact_payload(),
    );
    assert!(matches!(
        ExpHistogram::from_bytes(&flagged),
        Err(DecodeError::Invalid { field: "flags", .. })
    ));
}

/// A compact timestamp's distance that leads outside the window (before time 0, after the
/// clock, out of order) is refused, naming the field and its offset.
#[test]
fn compact_distances_outside_the_window_are_refused() {
    let mut h = ExpHistogram::ticks(100, 0.5).unwrap();
    h.record_value(50, 3).unwrap();
    h.record_value(60, 1).unwrap();
    // The payload ends with the highest class's one run: its timestamp (the size-2 bucket at
    // 50) as its distance from the clock, 60 − 50 = 10, and no repeats. Make the distance
    // 61: before time 0.
    let mut payload = h.to_compact_payload();
    assert_eq!(payload.first(), Some(&60), "the clock, a one-byte varint");
    let at = payload.len() - 2;
    assert_eq!(payload[at..], [10, 0], "the last run");
    payload[at] = 61;
    match from_compact(&h, &payload) {
        Err(DecodeError::Invalid { field, offset, .. }) => {
            assert_eq!(field, "timestamp");
            assert!(offset > 0);
        }
        other => panic!("expected the timestamp refused, got {other:?}"),
    }
    // 5: time 55, after the oldest bucket of the class below it (50): out of order.
    payload[at] = 5;
    let stamps: Vec<u64> = h.buckets().map(|b| b.timestamp).collect();
    assert!(
        matches!(
            from_compact(&h, &payload),
            Err(DecodeError::Invalid {
                field: "timestamp",
                ..
            })
        ),
        "a higher class's bucket newer than a lower class's oldest (buckets at {stamps:?})"
    );
}

/// A histogram at the largest k with few buckets round-trips (the decoder reserves for the
/// buckets an envelope carries, not for the k + 2 a class may hold; the class grows as the
/// histogram counts on).
#[test]
fn a_large_k_with_few_buckets_round_trips() {
    let mut h = ExpHistogram::new(Window::Ticks(1_000), 1_000_000).unwrap();
    for t in 0..100 {
        h.record(t).unwrap();
    }
    let bytes = h.to_bytes();
    assert!(bytes.len() < 2_000);
    let mut back = ExpHistogram::from_bytes(&bytes).unwrap();
    assert_eq!(back.estimate(), h.estimate());
    for t in 100..5_000 {
        h.record(t).unwrap();
        back.record(t).unwrap();
    }
    assert_eq!(back.to_bytes(), h.to_bytes());
}

#[test]
fn decoded_histogram_keeps_counting_like_the_original() {
    let mut a = ExpHistogram::ticks(100, 0.2).unwrap();
    for t in 0..1_000 {
        a.record(t).unwrap();
    }
    let mut b = ExpHistogram::from_bytes(&a.to_bytes()).unwrap();
    for t in 1_000..1_500 {
        a.record(t).unwrap();
        b.record(t).unwrap();
    }
    assert_eq!(
        a.buckets().collect::<Vec<_>>(),
        b.buckets().collect::<Vec<_>>()
    );
    assert!(
        b.record(3).is_err(),
        "the decoded clock must remember its latest tick"
    );
}

#[test]
fn block_counter_round_trips() {
    let mut b = BlockCounter::arrivals(100, 10).unwrap();
    let mut rng = Pcg64::seed_from_u64(2);
    for _ in 0..1_234 {
        b.push(rng.random_bool(0.5)).unwrap();
    }
    let back = BlockCounter::from_bytes(&b.to_bytes()).unwrap();
    assert_eq!(back, b);
    let empty = BlockCounter::ticks(60, 6).unwrap();
    assert_eq!(BlockCounter::from_bytes(&empty.to_bytes()).unwrap(), empty);
}

#[test]
fn wrong_family_is_named() {
    let b = BlockCounter::arrivals(100, 10).unwrap().to_bytes();
    assert_eq!(
        ExpHistogram::from_bytes(&b).unwrap_err(),
        DecodeError::WrongFamily {
            expected: Family::ExpHistogram,
            got: Family::BlockCounter
        }
    );
}

#[test]
fn impossible_fields_are_rejected_with_their_offset() {
    // A valid envelope whose payload breaks the histogram's invariants.
    let h = ExpHistogram::arrivals_with_k(1_000, 2).unwrap();
    let valid = h.to_bytes();
    let env = codec::decode(&valid).unwrap();
    let params = env.params.to_vec();
    let rewrap = |payload: &[u8]| {
        codec::encode(
            Family::ExpHistogram,
            0,
            ItemHasher::default(),
            &params,
            payload,
        )
    };
    // now=10, started, merges, worst, span_start=0, one class with 4 buckets (k + 1 = 3 max).
    let mut p = Vec::new();
    p.extend_from_slice(&10u64.to_le_bytes());
    p.push(1);
    p.extend_from_slice(&0u64.to_le_bytes());
    p.extend_from_slice(&0u64.to_le_bytes());
    p.extend_from_slice(&0u64.to_le_bytes());
    p.push(1);
    p.extend_from_slice(&4u32.to_le_bytes());
    for t in [1u64, 2, 3, 4] {
        p.extend_from_slice(&t.to_le_bytes());
    }
    match ExpHistogram::from_bytes(&rewrap(&p)) {
        Err(DecodeError::Invalid {
            field: "class length",
            got: 4,
            ..
        }) => {}
        other => panic!("expected a class-length error, got {other:?}"),
    }
    // Timestamps out of order.
    let mut q = p.clone();
    let len_at = q.len() - 4 * 8 - 4;
    q[len_at..len_at + 4].copy_from_slice(&2u32.to_le_bytes());
    q.truncate(len_at + 4);
    q.extend_from_slice(&5u64.to_le_bytes());
    q.extend_from_slice(&3u64.to_le_bytes());
    assert!(matches!(
        ExpHistogram::from_bytes(&rewrap(&q)),
        Err(DecodeError::Invalid {
            field: "timestamp",
            got: 3,
            ..
        })
    ));
}

proptest! {
    /// Random parameters and payloads in valid envelopes (random bytes alone would die at
    /// the magic): both window decoders' parameter checks are attacked.
    #[test]
    fn random_bodies_in_valid_envelopes_never_panic(
        params in proptest::collection::vec(any::<u8>(), 0..40),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        flags in 0u8..4,
    ) {
        for family in [Family::ExpHistogram, Family::BlockCounter] {
            let b = codec::encode(family, flags, ItemHasher::default(), &params, &payload);
            if let Ok(h) = ExpHistogram::from_bytes(&b) {
                let e = h.estimate();
                prop_assert!(e.low <= e.value && e.value <= e.high);
            }
            if let Ok(c) = BlockCounter::from_bytes(&b) {
                let e = c.estimate();
                prop_assert!(e.low <= e.value && e.value <= e.high);
            }
        }
    }

    /// Random payloads inside a valid envelope reach the family decoders' own checks.
    #[test]
    fn random_payloads_never_panic(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        k in 1u32..5,
        window in 1u64..50,
        ticks in any::<bool>(),
    ) {
        let span = if ticks { Window::Ticks(window) } else { Window::Arrivals(window) };
        let params = {
            let h = ExpHistogram::new(span, k).unwrap().to_bytes();
            codec::decode(&h).unwrap().params.to_vec()
        };
        let bytes = codec::encode(Family::ExpHistogram, 0, ItemHasher::default(), &params, &payload);
        if let Ok(h) = ExpHistogram::from_bytes(&bytes) {
            // Whatever decodes must answer without panicking and keep its bracket ordered.
            let e = h.estimate();
            prop_assert!(e.low <= e.value && e.value <= e.high);
        }
        let bparams = {
            let b = BlockCounter::new(span, 1).unwrap().to_bytes();
            codec::decode(&b).unwrap().params.to_vec()
        };
        let bytes = codec::encode(Family::BlockCounter, 0, ItemHasher::default(), &bparams, &payload);
        if let Ok(b) = BlockCounter::from_bytes(&bytes) {
            let e = b.estimate();
            prop_assert!(e.low <= e.value && e.value <= e.high);
        }
    }

    /// Random bytes read as a compact payload never panic.
    #[test]
    fn random_compact_payloads_never_panic(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        k in 1u32..5,
        window in 1u64..5_000,
        ticks in any::<bool>(),
    ) {
        let span = if ticks { Window::Ticks(window) } else { Window::Arrivals(window) };
        if let Ok(h) = ExpHistogram::from_compact_payload(span, k, false, &payload) {
            let e = h.estimate();
            prop_assert!(e.low <= e.value && e.value <= e.high);
        }
    }

    /// Mutating a real encoding's payload (and fixing the checksum) never panics.
    #[test]
    fn mutated_payloads_never_panic(idx in any::<usize>(), byte in any::<u8>(), cut in any::<usize>()) {
        for h in sample_histograms().into_iter().take(4) {
            // The compact payload, damaged the same way, read with its own parameters.
            let mut compact = h.to_compact_payload();
            if !compact.is_empty() {
                let i = idx % compact.len();
                compact[i] = byte;
                compact.truncate(compact.len() - cut % 3);
            }
            if let Ok(h) = from_compact(&h, &compact) {
                let e = h.estimate();
                prop_assert!(e.low <= e.value && e.value <= e.high);
            }
            let bytes = h.to_bytes();
            let env = codec::decode(&bytes).unwrap();
            let mut payload = env.payload.to_vec();
            if !payload.is_empty() {
                let i = idx % payload.len();
                payload[i] = byte;
                payload.truncate(payload.len() - cut % 3);
            }
            let again = codec::encode(Family::ExpHistogram, env.flags, env.hasher, env.params, &payload);
            if let Ok(h) = ExpHistogram::from_bytes(&again) {
                let e = h.estimate();
                prop_assert!(e.low <= e.value && e.value <= e.high);
            }
        }
    }
}

/// The committed vector: an arrivals window of 100 at k = 3 after 1,000 arrivals of a fixed
/// pattern, interpolation on. Its bytes must decode and re-encode unchanged.
#[test]
fn committed_vector_decodes() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/vectors/exp_histogram_v1.bin"
    );
    let bytes = std::fs::read(path).expect("testdata/vectors/exp_histogram_v1.bin is committed");
    let h = ExpHistogram::from_bytes(&bytes).unwrap();
    // The pattern: a one at every arrival i with i % 3 != 0, for i in 0..1000.
    let ones_in_window = (900..1_000).filter(|i| i % 3 != 0).count() as f64;
    assert!(h.estimate().contains(ones_in_window));
    assert_eq!(h.window(), Window::Arrivals(100));
    assert_eq!(h.k(), 3);
    assert!(h.interpolation());
    let mut rebuilt = ExpHistogram::arrivals_with_k(100, 3)
        .unwrap()
        .with_interpolation();
    for i in 0..1_000 {
        rebuilt.push(i % 3 != 0).unwrap();
    }
    assert_eq!(
        rebuilt.to_bytes(),
        bytes,
        "format v1 changed: bump the version"
    );
}

/// An arrivals histogram (window 10, k = 2) whose clock reads `now`, holding one bucket of
/// size 1 for each of `stamps`, in a valid envelope.
fn arrivals_at(now: u64, stamps: &[u64]) -> Vec<u8> {
    let params = codec::decode(&ExpHistogram::arrivals_with_k(10, 2).unwrap().to_bytes())
        .unwrap()
        .params
        .to_vec();
    let mut p = Vec::new();
    p.extend_from_slice(&now.to_le_bytes());
    p.push(1); // started
    p.extend_from_slice(&0u64.to_le_bytes()); // merges
    p.extend_from_slice(&0u64.to_le_bytes()); // worst merges
    p.extend_from_slice(&stamps[0].to_le_bytes()); // span start
    p.push(1); // one class: size 1
    p.extend_from_slice(&(stamps.len() as u32).to_le_bytes());
    for t in stamps {
        p.extend_from_slice(&t.to_le_bytes());
    }
    codec::encode(Family::ExpHistogram, 0, ItemHasher::default(), &params, &p)
}

/// A clock past 2^62 in an arrivals window is refused by name and offset (the payload's first
/// field: 28 header bytes and 13 of parameters), however valid the rest: at 2^64 − 1 the next
/// arrival used to wrap the clock to 0 and leave bytes the decoder refused.
#[test]
fn an_arrivals_clock_past_its_bound_is_refused_with_its_offset() {
    let bound = ExpHistogram::MAX_ARRIVALS;
    assert_eq!(bound, 1 << 62);
    for now in [bound + 1, u64::MAX - 1, u64::MAX] {
        assert_eq!(
            ExpHistogram::from_bytes(&arrivals_at(now, &[now - 2, now - 1, now])),
            Err(DecodeError::Invalid {
                field: "now",
                offset: 41,
                expected: "at most 2^62 (the arrivals clock's bound)",
                got: now,
            }),
            "now = {now}"
        );
    }
    let at_bound =
        ExpHistogram::from_bytes(&arrivals_at(bound, &[bound - 2, bound - 1, bound])).unwrap();
    assert_eq!(at_bound.now(), bound);
    assert_eq!(at_bound.estimate().value, 3.0);
    // A ticks window's clock is the caller's tick: any u64, the last one included.
    let mut ticks = ExpHistogram::ticks(10, 0.5).unwrap();
    ticks.record(u64::MAX).unwrap();
    assert_eq!(
        ExpHistogram::from_bytes(&ticks.to_bytes()).unwrap().now(),
        u64::MAX
    );
}

/// At its bound an arrivals histogram refuses the next arrival, a one or a zero, and stays
/// as it was: its answers and its bytes, which still decode.
#[test]
fn an_arrivals_clock_at_its_bound_refuses_the_next_arrival_and_changes_nothing() {
    let bound = ExpHistogram::MAX_ARRIVALS;
    let bytes = arrivals_at(bound, &[bound - 2, bound - 1, bound]);
    let mut h = ExpHistogram::from_bytes(&bytes).unwrap();
    for one in [true, false] {
        assert_eq!(
            h.push(one),
            Err(tidemark::window::ClockError::ArrivalsExhausted { limit: bound })
        );
    }
    assert_eq!(
        h.push_value(5),
        Err(tidemark::window::ClockError::ArrivalsExhausted { limit: bound })
    );
    assert_eq!(h.to_bytes(), bytes);
    assert_eq!(h.now(), bound);
    // One arrival short of the bound, the next is counted and the one after refused.
    let mut short = ExpHistogram::from_bytes(&arrivals_at(bound - 1, &[bound - 1])).unwrap();
    short.push(true).unwrap();
    assert_eq!(short.now(), bound);
    assert_eq!(short.estimate().value, 2.0);
    assert!(short.push(true).is_err());
    assert_eq!(ExpHistogram::from_bytes(&short.to_bytes()).unwrap(), short);
}

/// A value that would carry the total past 2^64 − 1 is an error in both kinds of window, at
/// any clock (the last tick of time included), and changes nothing; it used to panic.
#[test]
fn values_that_would_overflow_the_total_are_refused() {
    let mut a = ExpHistogram::arrivals(1_000, 0.1).unwrap();
    a.push_value(u64::MAX - 1).unwrap();
    let before = a.to_bytes();
    assert_eq!(
        a.push_value(2),
        Err(tidemark::window::ClockError::TotalOverflow {
            total: u64::MAX - 1,
            value: 2
        })
    );
    assert_eq!(a.to_bytes(), before);
    a.push_value(1).unwrap();
    assert_eq!(a.upper_bound(), u64::MAX);
    assert!(a.push(true).is_err());
    // A zero still advances the clock (it adds nothing).
    a.push(false).unwrap();
    assert_eq!(a.now(), 3);

    for start in [0, u64::MAX - 3] {
        let mut t = ExpHistogram::ticks(100, 0.25).unwrap();
        t.record_value(start, u64::MAX).unwrap();
        let before = t.to_bytes();
        assert_eq!(
            t.record_value(start + 1, 1),
            Err(tidemark::window::ClockError::TotalOverflow {
                total: u64::MAX,
                value: 1
            })
        );
        // Refused whole: the clock did not move either.
        assert_eq!(t.to_bytes(), before);
        assert_eq!(t.now(), start);
        t.record_value(start + 3, 0).unwrap();
        assert_eq!(t.now(), start + 3);
        let e = t.estimate();
        assert!(e.low <= e.value && e.value <= e.high);
    }
}

/// The merge count read from bytes is a statistic: at 2^64 − 1 it saturates on the next
/// merge instead of overflowing.
#[test]
fn a_merge_count_read_from_bytes_saturates() {
    let mut p = Vec::new();
    let h = ExpHistogram::arrivals_with_k(10, 2).unwrap();
    let params = codec::decode(&h.to_bytes()).unwrap().params.to_vec();
    p.extend_from_slice(&3u64.to_le_bytes()); // now
    p.push(1);
    p.extend_from_slice(&u64::MAX.to_le_bytes()); // merges
    p.extend_from_slice(&u64::MAX.to_le_bytes()); // worst merges
    p.extend_from_slice(&1u64.to_le_bytes()); // span start
    p.push(1);
    p.extend_from_slice(&3u32.to_le_bytes());
    for t in [1u64, 2, 3] {
        p.extend_from_slice(&t.to_le_bytes());
    }
    let bytes = codec::encode(Family::ExpHistogram, 0, ItemHasher::default(), &params, &p);
    let mut h = ExpHistogram::from_bytes(&bytes).unwrap();
    h.push(true).unwrap(); // four of size 1: a merge
    assert_eq!(h.stats().merges, u64::MAX);
    assert_eq!(h.estimate().high, 4.0);
}
