//! The ring window (family 17): any bytes, and valid samples with edited bodies in valid
//! envelopes, give an error or a ring, never a panic. Whatever decodes must re-encode to the
//! same bytes, answer a window count and decode again to the same bytes.
#![no_main]

mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tidemark::cardinality::RingWindow;

fn samples() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let mut out = Vec::new();
        for (p, width, n, items) in [(4u8, 5u64, 4u32, 0u64), (4, 5, 4, 300), (6, 10, 6, 3_000)] {
            let mut r = RingWindow::new(p, width, n).unwrap();
            for i in 0..items {
                let _ = r.insert_u64(i % 997, i / 7);
            }
            out.push(r.to_bytes());
        }
        out
    })
}

fn check(data: &[u8]) {
    if let Ok(mut r) = RingWindow::from_bytes(data) {
        let bytes = r.to_bytes();
        assert_eq!(bytes, data, "a decoded ring re-encodes to its bytes");
        if let Some(b) = r.newest_bucket() {
            let _ = r.count(b.saturating_mul(5), 4);
        }
        let again = RingWindow::from_bytes(&bytes).expect("re-encoding decodes");
        assert_eq!(again.to_bytes(), bytes);
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(b) = common::mutate_sample(samples(), data) {
        check(&b);
    }
});
