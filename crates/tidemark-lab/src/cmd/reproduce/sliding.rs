//! The reference run: the ring of per-minute sketches and the sliding HyperLogLog (Chabchoub
//! and Hébrail, IEEE ICDM Workshops 2010) side by side against the exact count.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::cardinality::{Hll, RingWindow, SlidingHll};

use tidemark_cli::output::{Output, Record};

/// p = 12, 2,000 events a minute for 180 minutes (ticks are seconds), the population of users
/// 50,000 until minute 120 and 10,000 after; a 60-minute window checked every ten minutes.
pub fn run(out: &mut Output) -> anyhow::Result<()> {
    let (p, per_minute, minutes, window_minutes) = (12u8, 2_000u64, 180u64, 60u64);
    let mut ring = RingWindow::new(p, 60, window_minutes as u32)?;
    let mut sliding = SlidingHll::new(p, window_minutes * 60)?;
    let mut last_seen: HashMap<u64, u64> = HashMap::new();
    let mut rng = Pcg64::seed_from_u64(3);
    let dense = {
        let mut h = Hll::new(p)?;
        (0..100_000u64).for_each(|i| h.insert_u64(i));
        h.bytes()
    };
    for minute in 0..minutes {
        let population = if minute < 120 { 50_000 } else { 10_000 };
        let mut seconds: Vec<u64> = (0..per_minute)
            .map(|_| minute * 60 + rng.random_range(0..60))
            .collect();
        seconds.sort_unstable();
        for tick in seconds {
            let user = rng.random_range(0..population);
            ring.insert_u64(user, tick)?;
            sliding.insert_u64(user, tick)?;
            last_seen.insert(user, tick);
        }
        if (minute + 1) % 10 == 0 {
            let now = (minute + 1) * 60 - 1;
            let from = (now + 1).saturating_sub(window_minutes * 60);
            let exact = last_seen.values().filter(|&&t| t >= from).count() as f64;
            let ring_sketch = ring.window_sketch(now, window_minutes)?;
            let identical =
                ring_sketch.registers() == sliding.registers(now, window_minutes * 60)?;
            let r = ring_sketch.estimate();
            let s = sliding.count(now, window_minutes * 60)?;
            let stats = sliding.stats();
            out.emit(
                &Record::new()
                    .field("minute", minute + 1)
                    .field("exact", exact as u64)
                    .field("ring", r.value.round())
                    .field("sliding", s.value.round())
                    .field("identical", identical)
                    .field("rel_error", (s.value - exact) / exact)
                    .field("sliding_low", s.low.round())
                    .field("sliding_high", s.high.round())
                    .field("pairs", stats.pairs as u64)
                    .field("pairs_per_reg", stats.pairs_per_register)
                    .field("sliding_bytes", stats.bytes as u64)
                    .field("ring_bytes", ring.bytes() as u64)
                    .field("dense_bytes", dense as u64),
            )?;
        }
    }
    Ok(())
}

/// Memory of the sliding sketch against its retention, beside a ring of minute buckets
/// covering the same retention and one dense sketch: p = 12, the reference run's 2,000 a minute
/// (ticks are seconds) from 50,000 users, after twice the retention.
pub fn memory(out: &mut Output) -> anyhow::Result<()> {
    let p = 12u8;
    let dense = {
        let mut h = Hll::new(p)?;
        (0..100_000u64).for_each(|i| h.insert_u64(i));
        h.bytes()
    };
    for retention in [600u64, 3_600, 21_600, 86_400] {
        let mut sliding = SlidingHll::new(p, retention)?;
        let mut ring = RingWindow::new(p, 60, (retention / 60) as u32)?;
        let mut rng = Pcg64::seed_from_u64(retention);
        let seconds = 2 * retention;
        for second in 0..seconds {
            // 2,000 a minute: 33 or 34 a second.
            let n = 2_000 * (second + 1) / 60 - 2_000 * second / 60;
            for _ in 0..n {
                let user = rng.random_range(0..50_000u64);
                sliding.insert_u64(user, second)?;
                ring.insert_u64(user, second)?;
            }
            if second % 600 == 599 {
                sliding.expire((second + 1).saturating_sub(retention));
            }
        }
        let stats = sliding.stats();
        out.emit(
            &Record::new()
                .field("retention_s", retention)
                .field("pairs", stats.pairs as u64)
                .field("pairs_per_reg", stats.pairs_per_register)
                .field("longest", stats.longest as u64)
                .field("sliding_bytes", stats.bytes as u64)
                .field("encoded_bytes", sliding.to_bytes().len() as u64)
                .field("ring_bytes", ring.bytes() as u64)
                .field("dense_bytes", dense as u64)
                .field("sliding_over_dense", stats.bytes as f64 / dense as f64),
        )?;
    }
    Ok(())
}
