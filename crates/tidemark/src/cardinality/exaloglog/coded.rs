//! Dense registers entropy-coded at rest: about 40% fewer bytes than packing them.
//!
//! A register holds `6 + t + d` bits but far less information: after `n` distinct items,
//! value `k` has reached a register with probability `1 − e^(−λ·P(k))` (`λ = n/m`,
//! Poisson model), so values well below the register's largest were almost surely seen,
//! values of about `λ`'s scale are a coin toss, and `u` itself spreads over a few levels
//! only. A (2, 20) register's entropy, averaged over a doubling of n, is 16.75 bits of its 28
//! (`scripts/exaloglog_register_entropy.py`). CPC (K. Lang, *Back to the Future: an Even
//! More Nearly Optimal Cardinality Estimation Algorithm*, arXiv 1708.06839, 2017) keeps its
//! state near its entropy at rest the same way.
//!
//! The model, register by register with the [`range_coder`](crate::range_coder):
//!
//! - `u` as a run of decisions "is `u` above `base + j`?", `j = 0, 1, …`, one adaptive model
//!   per `j` (the last shared past 63), `base` the smallest `u` of the sketch. These are the
//!   hazard rates of `u`'s distribution, which is the same for every register.
//! - then each history bit a value `k ≥ 1` below `u` can have, one adaptive model per
//!   **level** `⌊(k − 1)/2^t⌋` of the value: in the Poisson model the values below the
//!   maximum are seen independently of it, each with a probability that depends only on
//!   `P(k)`, which is the same across a level. Bits for values below 1 do not exist and are
//!   not coded.
//!
//! Every decision's model is learned as the stream goes (no table written down), so the
//! format does not depend on floating point. The decoder builds each register from decisions
//! (so it is always a valid register) and the caller re-encodes what it decoded and compares,
//! which refuses any stream that is not exactly the coder's output for its registers.

use super::register::Shape;
use crate::range_coder::{BitModel, Decoder, Encoder};

/// `u` models: one per step above the base, the last shared by every step past it.
const U_MODELS: usize = 64;
/// History models: one per level; levels reach `64 − p − t ≤ 60`.
const LEVEL_MODELS: usize = 64;

/// The adaptive models of one stream.
struct Models {
    above: [BitModel; U_MODELS],
    seen: [BitModel; LEVEL_MODELS],
}

impl Models {
    fn new() -> Models {
        Models {
            above: [BitModel::default(); U_MODELS],
            seen: [BitModel::default(); LEVEL_MODELS],
        }
    }
}

/// The history bit for value `u − δ` sits at bit `d − δ`; values from `u − 1` down to
/// `max(1, u − d)` have one.
fn history_values(shape: Shape, u: u32) -> impl Iterator<Item = (u32, u32)> {
    let d = shape.d as u32;
    (1..=d.min(u.saturating_sub(1))).map(move |delta| (d - delta, u - delta))
}

/// The model of a history bit for value `k`: its level.
fn level_model(shape: Shape, k: u32) -> usize {
    (((k - 1) >> shape.t) as usize).min(LEVEL_MODELS - 1)
}

/// The smallest `u` of `registers`, and their coded stream.
pub(super) fn encode(shape: Shape, registers: &[u32]) -> (u32, Vec<u8>) {
    let d = shape.d as u32;
    let max = shape.max_value();
    let base = registers.iter().map(|&r| r >> d).min().unwrap_or(0);
    let mut models = Models::new();
    let mut e = Encoder::new();
    for &r in registers {
        let u = r >> d;
        let mut v = base;
        while v < max {
            let above = u > v;
            e.encode(
                &mut models.above[((v - base) as usize).min(U_MODELS - 1)],
                above,
            );
            if !above {
                break;
            }
            v += 1;
        }
        for (bit, k) in history_values(shape, u) {
            e.encode(&mut models.seen[level_model(shape, k)], r >> bit & 1 == 1);
        }
    }
    (base, e.finish())
}

/// `m` registers from a stream coded with `base` (at most the shape's largest value).
/// Always valid registers; whether `stream` is the coder's own output for them is for the
/// caller to check by encoding them again.
pub(super) fn decode(shape: Shape, m: usize, base: u32, stream: &[u8]) -> Vec<u32> {
    debug_assert!(base <= shape.max_value());
    let d = shape.d as u32;
    let max = shape.max_value();
    let mut models = Models::new();
    let mut dec = Decoder::new(stream);
    let mut registers = Vec::with_capacity(m);
    for _ in 0..m {
        let mut u = base;
        while u < max && dec.decode(&mut models.above[((u - base) as usize).min(U_MODELS - 1)]) {
            u += 1;
        }
        let mut r = u << d;
        for (bit, k) in history_values(shape, u) {
            if dec.decode(&mut models.seen[level_model(shape, k)]) {
                r |= 1 << bit;
            }
        }
        registers.push(r);
    }
    registers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_values_are_the_values_from_u_minus_1_down_to_1_or_u_minus_d() {
        let s = Shape::new(2, 20, 10);
        assert_eq!(history_values(s, 0).count(), 0);
        assert_eq!(history_values(s, 1).count(), 0);
        assert_eq!(history_values(s, 2).collect::<Vec<_>>(), vec![(19, 1)]);
        let far: Vec<_> = history_values(s, 100).collect();
        assert_eq!(far.len(), 20);
        assert_eq!(far[0], (19, 99));
        assert_eq!(far[19], (0, 80));
    }
}
