//! Any bytes given to the window decoders: an error or a summary, never a panic. Whatever
//! decodes must answer, re-encode, and decode again to the same answer.
//!
//! Random bytes rarely pass the envelope's checksum, so the input is also wrapped, as a
//! payload, in a valid envelope with valid parameters: that reaches the family decoders' own
//! field checks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tidemark::codec::{self, Family, Writer};
use tidemark::hash::ItemHasher;
use tidemark::window::{BlockCounter, ExpHistogram};

fn check(data: &[u8]) {
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
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let Some((&sel, payload)) = data.split_first() else {
        return;
    };
    let window = 1 + (sel >> 2) as u64;
    let mut params = Writer::new();
    params.u8(sel & 1).u64(window).u32(1 + (sel >> 6) as u32);
    let h = codec::encode(
        Family::ExpHistogram,
        (sel >> 1) & 1,
        ItemHasher::default(),
        params.bytes(),
        payload,
    );
    check(&h);
    let mut params = Writer::new();
    params.u8(sel & 1).u64(window).u64(1 + (sel >> 6) as u64 % window);
    let b = codec::encode(
        Family::BlockCounter,
        0,
        ItemHasher::default(),
        params.bytes(),
        payload,
    );
    check(&b);
});
