//! `would_change` against what an insert does: in every form of both sketches (exact,
//! sparse, dense), asking whether a hash would change the sketch answers exactly whether
//! inserting it changes the sketch's bytes.

use std::collections::HashSet;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use tidemark::cardinality::{DistinctSketch, ExaLogLog, Hll, Representation};

fn sketch(exaloglog: bool, p: u8) -> DistinctSketch {
    if exaloglog {
        DistinctSketch::ExaLogLog(ExaLogLog::new(p).unwrap())
    } else {
        DistinctSketch::Hll(Hll::new(p).unwrap())
    }
}

/// Inserts `n` hashes (a share of them repeated), checking `would_change` before each;
/// returns the (form, answer) pairs seen.
fn check(
    s: &mut DistinctSketch,
    seed: u64,
    n: usize,
    repeat: u32,
) -> Result<HashSet<(Representation, bool)>, TestCaseError> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut seen = Vec::new();
    let mut answers = HashSet::new();
    for _ in 0..n {
        // Hashes again, so that "no" comes up in the exact form too; new ones often hit a
        // dense register already at or above their rank.
        let h = if !seen.is_empty() && rng.random_ratio(repeat, 4) {
            seen[rng.random_range(0..seen.len())]
        } else {
            rng.random::<u64>()
        };
        let before = s.to_bytes();
        let form = s.representation();
        let asked = s.would_change(h);
        s.insert_hash(h);
        prop_assert_eq!(asked, s.to_bytes() != before, "{:?}, hash {:#x}", form, h);
        answers.insert((form, asked));
        seen.push(h);
    }
    Ok(answers)
}

#[test]
fn both_answers_come_up_in_every_form() {
    for exaloglog in [false, true] {
        let mut s = sketch(exaloglog, 8);
        let answers = check(&mut s, 7, 6_000, 2).unwrap();
        let forms: &[Representation] = if exaloglog {
            &[Representation::Exact, Representation::Dense]
        } else {
            &[
                Representation::Exact,
                Representation::Sparse,
                Representation::Dense,
            ]
        };
        for &form in forms {
            for answer in [false, true] {
                assert!(
                    answers.contains(&(form, answer)),
                    "exaloglog {exaloglog}: {form:?} never answered {answer}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn would_change_is_what_an_insert_does(
        exaloglog in any::<bool>(),
        p in 4u8..=12,
        seed in any::<u64>(),
        n in 1usize..3_000,
        repeat in 0u32..4,
    ) {
        check(&mut sketch(exaloglog, p), seed, n, repeat)?;
    }
}
