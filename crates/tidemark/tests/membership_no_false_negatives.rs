//! No false negative, ever: seeded sweeps against exact models through many doublings,
//! deletes and re-inserts, for the single table, the stack and a rebuild.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::membership::{QuotientFilter, StackedFilter};

#[test]
fn quotient_filter_through_doublings_deletes_and_reinserts() {
    let mut rng = Pcg64::seed_from_u64(11);
    for reserve in [0u32, 3] {
        let mut f = QuotientFilter::with_reserve(50, 0.01, reserve).unwrap();
        let mut model: HashMap<u64, u64> = HashMap::new();
        let mut doublings = 0;
        let mut last_q = f.quotient_bits();
        for step in 0..60_000u64 {
            let k = rng.random_range(0..20_000u64);
            if rng.random_bool(0.7) {
                if f.insert(&k.to_le_bytes()).is_ok() {
                    *model.entry(k).or_default() += 1;
                }
            } else if let Some(c) = model.get_mut(&k) {
                assert!(f.remove(&k.to_le_bytes()), "remove of a held key {k}");
                *c -= 1;
                if *c == 0 {
                    model.remove(&k);
                }
            }
            if f.quotient_bits() != last_q {
                doublings += 1;
                last_q = f.quotient_bits();
            }
            if step % 5_000 == 0 {
                assert!(model.keys().all(|k| f.contains(&k.to_le_bytes())));
            }
        }
        assert_eq!(f.len(), model.values().sum::<u64>());
        assert!(model.keys().all(|k| f.contains(&k.to_le_bytes())));
        assert!(
            doublings >= 5,
            "reserve {reserve}: only {doublings} doublings"
        );
    }
}

#[test]
fn stacked_filter_never_refuses_and_never_forgets() {
    let mut rng = Pcg64::seed_from_u64(12);
    let mut s = StackedFilter::with_schedule(30, 0.01, 1.5, 0.7).unwrap();
    let mut model: HashMap<u64, u64> = HashMap::new();
    for _ in 0..30_000 {
        let k = rng.random_range(0..10_000u64);
        if rng.random_bool(0.8) {
            s.insert(&k.to_le_bytes());
            *model.entry(k).or_default() += 1;
        } else if let Some(c) = model.get_mut(&k) {
            assert!(s.remove(&k.to_le_bytes()));
            *c -= 1;
            if *c == 0 {
                model.remove(&k);
            }
        }
    }
    assert_eq!(s.len(), model.values().sum::<u64>());
    assert!(model.keys().all(|k| s.contains(&k.to_le_bytes())));
    assert!(s.layers() > 5);
}

#[test]
fn a_rebuild_from_the_store_keeps_every_key_and_reports_the_reads() {
    let keys: Vec<[u8; 8]> = (0..40_000u64).map(|i| (i * 7919).to_le_bytes()).collect();
    let mut f = QuotientFilter::new(500, 0.01).unwrap();
    let held = keys
        .iter()
        .position(|k| f.insert(k).is_err())
        .expect("a 500-key table with no reserve dies before 40,000");
    assert_eq!(held as u64, f.len());
    // The store gives back all keys, including those the old filter refused.
    let r = f.rebuild(keys.iter(), 0.01, 1).unwrap();
    assert_eq!(r.keys_reread, 40_000);
    assert!(keys.iter().all(|k| r.filter.contains(k)));
    assert!(r.filter.fingerprint_bits() > f.fingerprint_bits());
    assert!(r.filter.fpr() < f.fpr() * 2.0);
}
