//! Fuzz the Count-Min and item counts decoders: no bytes may panic them, and whatever decodes
//! must re-encode to the same bytes and answer queries (and merge with itself) without
//! panicking. Valid samples with edited bodies, sealed again in valid envelopes, reach the
//! family decoders' field checks.
#![no_main]

mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tidemark::frequency::{AnyCountMin, CountMin, DyadicCountMin, ItemCounts, Model};

fn samples() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let mut cm = CountMin::with_dimensions(16, 3, Model::CashRegister).unwrap();
        let mut dy = DyadicCountMin::with_dimensions(8, 2, 8, Model::NonNegativeTurnstile).unwrap();
        let mut small = ItemCounts::new(0.1, 0.1, 0.2).unwrap();
        let mut big = ItemCounts::new(0.1, 0.1, 0.2).unwrap();
        for i in 0..200u64 {
            cm.update(&i.to_le_bytes(), 1 + (i % 5) as i64).unwrap();
            dy.update(i % 256, 1).unwrap();
            small.insert(format!("s{}", i % 4).as_bytes());
            big.insert(format!("b{}", i % 50).as_bytes());
        }
        vec![cm.to_bytes(), dy.to_bytes(), small.to_bytes(), big.to_bytes()]
    })
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(b) = common::mutate_sample(samples(), data) {
        check(&b);
    }
});

fn check(data: &[u8]) {
    if let Ok(s) = ItemCounts::from_bytes(data) {
        assert_eq!(s.to_bytes(), data);
        let _ = s.point(b"fuzz");
        let _ = s.heavy_hitters();
        let _ = s.heaviest_count();
        let mut twice = s.clone();
        twice.merge(&s).expect("a summary merges with itself");
    }
    if let Ok(decoded) = AnyCountMin::from_bytes(data) {
        match decoded {
            AnyCountMin::CountMin(cm) => {
                assert_eq!(cm.to_bytes(), data);
                let _ = cm.point(b"fuzz");
            }
            AnyCountMin::Dyadic(s) => {
                assert_eq!(s.to_bytes(), data);
                let _ = s.point(0);
                let _ = s.quantile(0.5);
                let _ = s.heavy_hitters(0.1);
                let _ = s.top_k(3);
            }
        }
    }
}
