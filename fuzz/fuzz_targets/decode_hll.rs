//! Any bytes given to the HyperLogLog decoders (the tidemark envelope and Redis `HYLL`
//! values): an error or a sketch, never a panic. Whatever decodes must answer, re-encode, and
//! decode again to an equal sketch.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidemark::cardinality::Hll;

fuzz_target!(|data: &[u8]| {
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
