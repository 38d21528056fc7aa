//! Top-k against an exact model: when the k-th and (k+1)-th true counts are more than
//! 2ε‖a‖₁ apart, every estimate within ε‖a‖₁ of its truth (probability ≥ 1 − δ per item)
//! cannot reorder them, so both top-k methods must return exactly the true top k.

mod common;

use common::{counts, stream, Dist};
use tidemark::frequency::{DyadicCountMin, Model, TopK};

#[test]
fn top_k_matches_the_exact_top_k_when_separated() {
    let k = 10;
    let mut checked = 0;
    for seed in 0..20u64 {
        let items = stream(Dist::Zipf(1.5), 4_096, 50_000, 500 + seed);
        let exact = counts(&items);
        let mut by_count: Vec<(i64, u64)> = exact.iter().map(|(&x, &c)| (c, x)).collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        let mut top = TopK::new(k, 0.001, 0.001).unwrap();
        let mut dy = DyadicCountMin::new(0.001, 0.001, 12, Model::CashRegister).unwrap();
        for &x in &items {
            top.insert(&x.to_le_bytes(), 1).unwrap();
            dy.update(x, 1).unwrap();
        }
        let eps_n = top.sketch().epsilon() * items.len() as f64;
        if ((by_count[k - 1].0 - by_count[k].0) as f64) <= 2.0 * eps_n {
            continue;
        }
        checked += 1;
        let mut want: Vec<u64> = by_count[..k].iter().map(|&(_, x)| x).collect();
        want.sort_unstable();
        let mut got: Vec<u64> = top
            .top()
            .into_iter()
            .map(|(b, _)| u64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        got.sort_unstable();
        assert_eq!(got, want, "seed {seed}: TopK");
        let mut got: Vec<u64> = dy.top_k(k).into_iter().map(|(x, _)| x).collect();
        got.sort_unstable();
        assert_eq!(got, want, "seed {seed}: dyadic top_k");
    }
    assert!(
        checked >= 5,
        "only {checked} seeds had separated top-k counts"
    );
}
