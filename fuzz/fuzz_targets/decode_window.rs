//! Any bytes given to the window decoders: an error or a summary, never a panic. Whatever
//! decodes must answer, re-encode, and decode again to the same answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidemark::window::{BlockCounter, ExpHistogram};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = ExpHistogram::from_bytes(data) {
        let e = h.estimate();
        assert!(e.low <= e.value && e.value <= e.high);
        let again = ExpHistogram::from_bytes(&h.to_bytes()).expect("re-encoding decodes");
        assert_eq!(again.estimate(), e);
    }
    if let Ok(b) = BlockCounter::from_bytes(data) {
        let again = BlockCounter::from_bytes(&b.to_bytes()).expect("re-encoding decodes");
        assert_eq!(again, b);
    }
});
