//! Fuzz the Count-Min and item counts decoders: no bytes may panic them, and whatever decodes
//! must re-encode to the same bytes and answer queries (and merge with itself) without
//! panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidemark::frequency::{self, Decoded, ItemCounts};

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = ItemCounts::from_bytes(data) {
        assert_eq!(s.to_bytes(), data);
        let _ = s.point(b"fuzz");
        let _ = s.heavy_hitters();
        let _ = s.heaviest_count();
        let mut twice = s.clone();
        twice.merge(&s).expect("a summary merges with itself");
    }
    if let Ok(decoded) = frequency::decode(data) {
        match decoded {
            Decoded::CountMin(cm) => {
                assert_eq!(cm.to_bytes(), data);
                let _ = cm.point(b"fuzz");
            }
            Decoded::Dyadic(s) => {
                assert_eq!(s.to_bytes(), data);
                let _ = s.point(0);
                let _ = s.quantile(0.5);
                let _ = s.heavy_hitters(0.1);
                let _ = s.top_k(3);
            }
        }
    }
});
