//! Any bytes given to the membership decoders: an error or a filter, never a panic. Whatever
//! decodes must answer lookups, keep taking keys without a false negative, re-encode, and
//! decode again to the same filter. Valid samples with edited bodies, sealed again in valid
//! envelopes, reach the family decoders' field checks.
#![no_main]

mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tidemark::membership::{LengtheningFilter, QuotientFilter, StackedFilter};

fn samples() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let mut q = QuotientFilter::with_reserve(40, 0.02, 2).unwrap();
        let mut s = StackedFilter::new(20, 0.05).unwrap();
        let mut l = LengtheningFilter::new(20, 0.05, 2).unwrap();
        for i in 0..60u64 {
            q.insert(&i.to_le_bytes()).unwrap();
            s.insert(&i.to_le_bytes());
            l.insert(&i.to_le_bytes()).unwrap();
        }
        for i in (0..60u64).step_by(7) {
            q.remove(&i.to_le_bytes());
        }
        vec![q.to_bytes(), s.to_bytes(), l.to_bytes()]
    })
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(b) = common::mutate_sample(samples(), data) {
        check(&b);
    }
});

fn check(data: &[u8]) {
    if let Ok(f) = QuotientFilter::from_bytes(data) {
        let again = QuotientFilter::from_bytes(&f.to_bytes()).expect("re-encoding decodes");
        assert_eq!(again, f);
        let mut g = f;
        for i in 0..64u64 {
            if g.insert(&i.to_le_bytes()).is_ok() {
                assert!(g.contains(&i.to_le_bytes()));
            }
        }
    }
    if let Ok(s) = StackedFilter::from_bytes(data) {
        let again = StackedFilter::from_bytes(&s.to_bytes()).expect("re-encoding decodes");
        assert_eq!(again, s);
        let mut t = s;
        for i in 0..64u64 {
            t.insert(&i.to_le_bytes());
            assert!(t.contains(&i.to_le_bytes()));
        }
    }
    if let Ok(l) = LengtheningFilter::from_bytes(data) {
        let again = LengtheningFilter::from_bytes(&l.to_bytes()).expect("re-encoding decodes");
        assert_eq!(again, l);
        let _ = l.fpr();
    }
}
