//! Any bytes given to the ExaLogLog decoder: an error or a sketch, never a panic. Whatever
//! decodes must answer, re-encode, and decode again to an equal sketch. Valid samples with
//! edited bodies, sealed again in valid envelopes, reach the family decoder's field checks.
#![no_main]

mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tidemark::cardinality::ExaLogLog;

fn samples() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let mut out = Vec::new();
        for (t, d, p, n) in [(2u8, 20u8, 8u8, 0u64), (2, 20, 8, 40), (2, 20, 8, 5_000), (1, 9, 4, 300)] {
            let mut s = ExaLogLog::with_params(t, d, p).unwrap();
            for i in 0..n {
                s.insert_u64(i);
            }
            out.push(s.to_bytes());
        }
        out
    })
}

fn check(bytes: &[u8]) {
    if let Ok(s) = ExaLogLog::from_bytes(bytes) {
        let e = s.estimate();
        assert!(e.low <= e.value && e.value <= e.high);
        let ml = s.estimate_ml();
        assert!(ml.low <= ml.value && ml.value <= ml.high);
        let again = ExaLogLog::from_bytes(&s.to_bytes()).expect("re-encoding decodes");
        assert_eq!(again, s);
    }
}

fuzz_target!(|data: &[u8]| {
    if let Some(b) = common::mutate_sample(samples(), data) {
        check(&b);
    }
    check(data);
});
