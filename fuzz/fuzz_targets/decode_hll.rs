//! Any bytes given to the HyperLogLog decoders (the tidemark envelope and Redis `HYLL`
//! values): an error or a sketch, never a panic. Whatever decodes must answer, re-encode, and
//! decode again to an equal sketch. Valid samples with edited bodies, sealed again in valid
//! envelopes, reach the family decoder's field checks.
#![no_main]

mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tidemark::cardinality::Hll;

fn samples() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let mut out = Vec::new();
        for n in [0u64, 100, 400, 5_000] {
            let mut h = Hll::new(12).unwrap();
            for i in 0..n {
                h.insert_u64(i);
            }
            out.push(h.to_bytes());
        }
        let mut r = Hll::redis();
        for i in 0..2_000u64 {
            r.insert(format!("item:{i}").as_bytes());
        }
        out.push(r.to_bytes());
        out
    })
}

fuzz_target!(|data: &[u8]| {
    if let Some(b) = common::mutate_sample(samples(), data) {
        if let Ok(h) = Hll::from_bytes(&b) {
            let e = h.estimate();
            assert!(e.low <= e.value && e.value <= e.high);
            let again = Hll::from_bytes(&h.to_bytes()).expect("re-encoding decodes");
            assert_eq!(again, h);
        }
    }
    if let Ok(h) = Hll::from_bytes(data) {
        let e = h.estimate();
        assert!(e.low <= e.value && e.value <= e.high);
        let again = Hll::from_bytes(&h.to_bytes()).expect("re-encoding decodes");
        assert_eq!(again, h);
    }
    if let Ok(h) = Hll::from_redis(data) {
        let _ = h.pfcount();
        let v = h.to_redis().expect("an imported value is Redis-compatible");
        let again = Hll::from_redis(&v).expect("re-export imports");
        assert_eq!(again.registers(), h.registers());
    }
});
