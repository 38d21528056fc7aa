//! DDSketch (family 64) and the quantile ring (family 65): any bytes, and valid samples with
//! edited bodies sealed again in valid envelopes, give an error or a summary, never a panic.
//! Whatever decodes is canonical (it re-encodes to its very bytes), answers every query, and
//! merges with and subtracts itself.
#![no_main]

mod common;

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use tidemark::quantile::{DdSketch, Mapping, QuantileRing};

fn samples() -> &'static [Vec<u8>] {
    static S: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    S.get_or_init(|| {
        let values: Vec<f64> = (1..=2_000u64)
            .map(|i| {
                let x = ((i * 7_919) % 1_000 + 1) as f64 * 0.37;
                match i % 11 {
                    0 => -x,
                    1 => 0.0,
                    _ => x * (1 + i % 5) as f64,
                }
            })
            .collect();
        let mut out = Vec::new();
        for (mapping, limit, n) in [
            (Mapping::cubic(0.01).unwrap(), 4_096u64, 0usize),
            (Mapping::cubic(0.01).unwrap(), 4_096, 2_000),
            (Mapping::cubic(0.05).unwrap(), 20, 2_000),
            (Mapping::schema(3).unwrap(), 64, 500),
            (Mapping::schema(-2).unwrap(), 8, 50),
        ] {
            let mut s = DdSketch::with_mapping(mapping, limit).unwrap();
            for &v in &values[..n] {
                s.insert(v).unwrap();
            }
            out.push(s.to_bytes());
        }
        let mut big = DdSketch::default();
        big.insert_n(3.0, 1 << 40).unwrap();
        out.push(big.to_bytes());
        let mut ring = QuantileRing::new(0.02, 10, 6).unwrap();
        for (i, &v) in values[..300].iter().enumerate() {
            let _ = ring.insert(v, i as u64 / 4);
        }
        out.push(ring.to_bytes());
        out.push(QuantileRing::new(0.01, 5, 3).unwrap().to_bytes());
        out
    })
}

fn check(data: &[u8]) {
    if let Ok(s) = DdSketch::from_bytes(data) {
        assert_eq!(
            s.to_bytes(),
            data,
            "a decoded sketch re-encodes to its bytes"
        );
        for q in [0.0, 0.01, 0.5, 0.99, 1.0] {
            if let Ok(a) = s.quantile(q) {
                let e = a.estimate;
                assert!(e.low <= e.value && e.value <= e.high, "{e}");
            }
        }
        let _ = (
            s.min(),
            s.max(),
            s.sum(),
            s.rank(1.0),
            s.cdf(-1.0),
            s.rank(f64::INFINITY),
        );
        let mut m = s.clone();
        if m.merge(&s).is_ok() {
            m.subtract(&s)
                .expect("a sketch merged with itself contains itself");
            assert_eq!(m.count(), s.count());
        }
        let again = DdSketch::from_bytes(&s.to_bytes()).expect("re-encoding decodes");
        assert_eq!(again, s);
    }
    if let Ok(mut r) = QuantileRing::from_bytes(data) {
        assert_eq!(r.to_bytes(), data, "a decoded ring re-encodes to its bytes");
        if let Some(b) = r.newest_bucket() {
            let now = b.saturating_mul(r.width());
            let _ = r.quantile(now, r.buckets(), 0.5);
            let _ = r.insert(1.0, now.saturating_add(r.width()));
            let _ = r.quantile(now.saturating_add(r.width()), r.buckets(), 0.9);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(b) = common::mutate_sample(samples(), data) {
        check(&b);
    }
});
