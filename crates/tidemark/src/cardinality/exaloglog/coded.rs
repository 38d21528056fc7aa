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
//! - `u` as its `b` bits (`b` the bits `u` needs, at most 9), most significant first, down a
//!   binary tree: each bit's model is the node it leaves from, so the tree's `2^b − 1` models
//!   learn `u`'s whole distribution, which is the same for every register. Always `b`
//!   decisions, whatever the bytes say.
//! - then each history bit a value `k ≥ 1` below `u` can have, one adaptive model per
//!   **level** `⌊(k − 1)/2^t⌋` of the value: in the Poisson model the values below the
//!   maximum are seen independently of it, each with a probability that depends only on
//!   `P(k)`, which is the same across a level. Bits for values below 1 do not exist and are
//!   not coded.
//!
//! So a register costs at most `b + d ≤ 32` decisions to read (`b ≤ 6 + t`, `d ≤ 26 − t`). Every decision's model is
//! learned as the stream goes (no table written down), so the format does not depend on
//! floating point. The decoder refuses a `u` above the largest value and builds every other
//! register from decisions (so it is always a valid register); the caller codes what was
//! decoded again and compares, which refuses any stream that is not exactly the coder's output
//! for its registers.
//!
//! **Bounds.** A stream may only be used when it is shorter than the packed registers and at
//! least one byte per eight registers long ([`fits`]): a real sketch's registers carry more
//! than a bit each (the dense form begins at `n ≈ m/4`, where a register's entropy is already
//! above one bit), and the floor keeps what a reader allocates and decodes within 32 bytes of
//! registers per byte of input (packing: 1 to about 5, by shape), so that a ring of many slots cannot
//! turn a small input into a large allocation. Registers that code below the floor (all zero,
//! say, which `from_bytes` of a packed form can give) are written packed.

use super::register::Shape;
use crate::range_coder::{BitModel, Decoder, Encoder};

/// `u` models: the nodes of a binary tree over at most 9 bits (node 1 the root, node `i`'s
/// children `2i` and `2i + 1`).
const U_MODELS: usize = 1 << 9;
/// History models: one per level; levels reach `64 − p − t ≤ 60`.
const LEVEL_MODELS: usize = 64;

/// The adaptive models of one stream.
struct Models {
    u: [BitModel; U_MODELS],
    seen: [BitModel; LEVEL_MODELS],
}

impl Models {
    fn new() -> Models {
        Models {
            u: [BitModel::default(); U_MODELS],
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

/// Whether a stream of `len` bytes may stand for the registers of `shape`: shorter than they
/// take packed, and at least a byte per 8 of them (the bounds above).
pub(super) fn fits(shape: Shape, len: usize) -> bool {
    len < shape.packed_bytes() && len >= (1usize << shape.p).div_ceil(8)
}

/// The coded stream of `registers`.
pub(super) fn encode(shape: Shape, registers: &[u32]) -> Vec<u8> {
    let d = shape.d as u32;
    let bits = shape.value_bits();
    let mut models = Models::new();
    let mut e = Encoder::new();
    for &r in registers {
        let u = r >> d;
        let mut node = 1;
        for i in (0..bits).rev() {
            let bit = u >> i & 1;
            e.encode(&mut models.u[node], bit == 1);
            node = 2 * node + bit as usize;
        }
        for (bit, k) in history_values(shape, u) {
            e.encode(&mut models.seen[level_model(shape, k)], r >> bit & 1 == 1);
        }
    }
    e.finish()
}

/// The `2^p` registers of a coded stream, or `None` when one's `u` is above the largest value.
/// Every register returned is valid; whether `stream` is the coder's own output for them is
/// for the caller to check by encoding them again.
pub(super) fn decode(shape: Shape, stream: &[u8]) -> Option<Vec<u32>> {
    let m = 1usize << shape.p;
    let d = shape.d as u32;
    let bits = shape.value_bits();
    let mut models = Models::new();
    let mut dec = Decoder::new(stream);
    let mut registers = Vec::with_capacity(m);
    for _ in 0..m {
        let mut node = 1;
        for _ in 0..bits {
            node = 2 * node + dec.decode(&mut models.u[node]) as usize;
        }
        let u = (node - (1 << bits)) as u32;
        if u > shape.max_value() {
            return None;
        }
        let mut r = u << d;
        for (bit, k) in history_values(shape, u) {
            if dec.decode(&mut models.seen[level_model(shape, k)]) {
                r |= 1 << bit;
            }
        }
        registers.push(r);
    }
    Some(registers)
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
