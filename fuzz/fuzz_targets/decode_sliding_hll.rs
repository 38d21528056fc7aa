//! The sliding HyperLogLog (family 18): any bytes, and valid samples with edited bodies in
//! valid envelopes, give an error or a sketch, never a panic. Whatever decodes must re-encode
//! to the same bytes, answer a window count and decode again to an equal sketch.
#![no_main]

mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tidemark::cardinality::SlidingHll;

fn samples() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let mut out = Vec::new();
        for (p, retention, items) in [(4u8, 50u64, 0u64), (4, 50, 300), (6, 200, 3_000)] {
            let mut s = SlidingHll::new(p, retention).unwrap();
            for i in 0..items {
                let _ = s.insert_u64(i % 997, i / 7);
            }
            out.push(s.to_bytes());
        }
        out
    })
}

fn check(data: &[u8]) {
    if let Ok(s) = SlidingHll::from_bytes(data) {
        let bytes = s.to_bytes();
        assert_eq!(bytes, data, "a decoded sketch re-encodes to its bytes");
        if let Some(n) = s.newest() {
            let _ = s.count(n, 10);
        }
        let again = SlidingHll::from_bytes(&bytes).expect("re-encoding decodes");
        assert_eq!(again, s);
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(b) = common::mutate_sample(samples(), data) {
        check(&b);
    }
});
