//! Any bytes given to the membership decoders: an error or a filter, never a panic. Whatever
//! decodes must answer lookups, keep taking keys without a false negative, re-encode, and
//! decode again to the same filter.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidemark::membership::{LengtheningFilter, QuotientFilter, StackedFilter};

fuzz_target!(|data: &[u8]| {
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
});
