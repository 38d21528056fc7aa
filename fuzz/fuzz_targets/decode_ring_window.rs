//! The ring windows (families 17 and 20, of HyperLogLogs and of ExaLogLogs): any bytes, and
//! valid samples with edited bodies in valid envelopes, give an error or a ring, never a panic.
//! Whatever decodes must answer a window count and decode again; a HyperLogLog ring re-encodes
//! to its very bytes, an ExaLogLog ring to bytes that decode to the same ring (a slot read
//! packed, as older builds wrote it, is written coded).
#![no_main]

mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tidemark::cardinality::{ExaLogLog, RingWindow};
use tidemark::hash::ItemHasher;

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
        for (p, width, n, items) in [(4u8, 5u64, 4u32, 300u64), (7, 10, 6, 5_000)] {
            let mut r = RingWindow::exaloglog(2, 20, p, width, n, ItemHasher::default()).unwrap();
            for i in 0..items {
                let _ = r.insert_u64(i % 4_999, i / 50);
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
    if let Ok(mut r) = RingWindow::<ExaLogLog>::decode(data) {
        let bytes = r.to_bytes();
        if let Some(b) = r.newest_bucket() {
            let _ = r.count(b.saturating_mul(5), 4);
        }
        let again = RingWindow::<ExaLogLog>::decode(&bytes).expect("re-encoding decodes");
        assert_eq!(again.to_bytes(), bytes, "a re-encoded ring is a fixed point");
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(b) = common::mutate_sample(samples(), data) {
        check(&b);
    }
});
