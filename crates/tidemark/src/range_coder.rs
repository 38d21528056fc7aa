//! A binary range coder with adaptive bit models: entropy coding for summaries at rest.
//!
//! Arithmetic coding (Rissanen and Langdon 1979; the byte-wise "range coder" of G. N. N.
//! Martin, 1979) narrows an interval `[low, low + range)` at each binary decision: a 0 keeps
//! the share `P(0)` of the range, a 1 the rest. A decision of probability `q` thus costs
//! `−log₂ q` bits of output, plus at most a few bytes for the whole stream, so a sequence
//! coded with the probabilities it was drawn from comes out within a few bytes of its
//! entropy. Here the interval is 32 bits wide: whenever its width drops below 2^24, its top
//! byte is settled (or left pending while it reads 0xFF, since a later carry may still raise
//! it) and everything shifts left by a byte. Probabilities are 15-bit integers, so the coder
//! and the decoder compute bit for bit the same thing on every machine.
//!
//! [`BitModel`] learns the probability of its decision as it goes, from the counts of zeros
//! and ones seen so far with the Krichevsky–Trofimov estimator `P(0) = (zeros + ½)/(seen + 1)`:
//! for decisions that are independent draws of one unknown probability, the whole sequence
//! then costs at most its entropy plus about `½·log₂ seen + 1` bits a model. A coder and its
//! decoder that update the same models in the same order stay in step without ever writing a
//! probability down.
//!
//! A stream ends with a value inside the final interval whose low 24 bits are zero, and the
//! decoder reads zeros past its end, so trailing zero bytes are dropped. That is not always
//! the shortest ending (by a byte, or more when 0xFF bytes are held at the end), but it is
//! deterministic: the format is the coder's output, and [`Decoder`] never reads outside its
//! slice. Garbage decodes to some
//! sequence of decisions, never to an error; callers that must refuse damaged streams
//! encode what they decoded again and compare.

/// Probabilities are `P(0)·2^15`, in `1..2^15`.
const PROBABILITY_BITS: u32 = 15;
const ONE: u64 = 1 << PROBABILITY_BITS;
/// Below this width the interval's top byte is settled and shifted out.
const TOP: u32 = 1 << 24;

/// The part of `range` a 0 keeps: `range·P(0)`, in `1..range` since `range ≥ 2^24`.
fn share(range: u32, model: &BitModel) -> u32 {
    ((range as u64 * model.p_zero() as u64) >> PROBABILITY_BITS) as u32
}

/// One adaptive binary decision: the counts of each outcome so far.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BitModel {
    zeros: u32,
    seen: u32,
}

impl BitModel {
    /// `P(0)·2^15` by the Krichevsky–Trofimov estimator, `(2·zeros + 1)/(2·seen + 2)`, kept
    /// off 0 and 2^15 so that either outcome still has a non-empty share of the range.
    fn p_zero(&self) -> u32 {
        let p = ((2 * self.zeros as u64 + 1) << PROBABILITY_BITS) / (2 * self.seen as u64 + 2);
        p.clamp(1, ONE - 1) as u32
    }

    fn update(&mut self, bit: bool) {
        if self.seen == u32::MAX {
            // Both halved: the ratio stays.
            self.zeros /= 2;
            self.seen /= 2;
        }
        self.zeros += u32::from(!bit);
        self.seen += 1;
    }
}

/// Writes decisions into a byte stream.
#[derive(Debug)]
pub(crate) struct Encoder {
    /// The interval's lower end in bits 0..32, and a carry into the bytes already settled in
    /// bit 32.
    low: u64,
    range: u32,
    /// The last settled byte, still open to a carry; `None` before the first.
    cache: Option<u8>,
    /// Bytes of 0xFF settled after `cache`, all open to the same carry.
    pending_ff: u64,
    out: Vec<u8>,
    /// Carries that went through at least one pending 0xFF byte (for the tests).
    #[cfg(test)]
    carries_through_ff: u32,
}

impl Encoder {
    pub(crate) fn new() -> Encoder {
        Encoder {
            low: 0,
            range: u32::MAX,
            cache: None,
            pending_ff: 0,
            out: Vec::new(),
            #[cfg(test)]
            carries_through_ff: 0,
        }
    }

    /// Codes `bit` with the probability `model` gives it, then lets the model learn it.
    pub(crate) fn encode(&mut self, model: &mut BitModel, bit: bool) {
        let bound = share(self.range, model);
        if bit {
            self.low += bound as u64;
            self.range -= bound;
        } else {
            self.range = bound;
        }
        model.update(bit);
        while self.range < TOP {
            self.range <<= 8;
            self.shift_byte();
        }
    }

    /// Settles the top byte of `low` (bits 24..32) and shifts the rest up.
    fn shift_byte(&mut self) {
        let top = (self.low >> 24) as u8;
        if self.low < 0xFF00_0000 || self.low >= 1 << 32 {
            // The byte and all pending ones are final: a carry can no longer pass through
            // a byte below 0xFF, and one that happened is added now.
            let carry = (self.low >> 32) as u8;
            #[cfg(test)]
            {
                self.carries_through_ff += u32::from(carry == 1 && self.pending_ff > 0);
            }
            if let Some(c) = self.cache {
                self.out.push(c.wrapping_add(carry));
            }
            for _ in 0..self.pending_ff {
                self.out.push(0xFFu8.wrapping_add(carry));
            }
            self.pending_ff = 0;
            self.cache = Some(top);
        } else {
            self.pending_ff += 1;
        }
        self.low = (self.low & 0x00FF_FFFF) << 8;
    }

    /// Ends the stream: a value inside the final interval whose low 24 bits are zero (the
    /// width is at least 2^24, so rounding `low` up to one stays inside), its bytes settled,
    /// trailing zeros dropped.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.low = (self.low + (TOP as u64 - 1)) & !(TOP as u64 - 1);
        for _ in 0..4 {
            self.shift_byte();
        }
        if let Some(c) = self.cache {
            self.out.push(c);
        }
        for _ in 0..self.pending_ff {
            self.out.push(0xFF);
        }
        while self.out.last() == Some(&0) {
            self.out.pop();
        }
        self.out
    }
}

/// Reads decisions back from a stream, with the same models in the same order.
#[derive(Debug)]
pub(crate) struct Decoder<'a> {
    bytes: &'a [u8],
    next: usize,
    /// The stream's value minus the interval's lower end.
    code: u32,
    range: u32,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Decoder<'a> {
        let mut d = Decoder {
            bytes,
            next: 0,
            code: 0,
            range: u32::MAX,
        };
        for _ in 0..4 {
            d.code = (d.code << 8) | d.byte() as u32;
        }
        d
    }

    /// The next byte of the stream; zeros past its end.
    fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        b
    }

    pub(crate) fn decode(&mut self, model: &mut BitModel) -> bool {
        let bound = share(self.range, model);
        let bit = self.code >= bound;
        if bit {
            self.code -= bound;
            self.range -= bound;
        } else {
            self.range = bound;
        }
        model.update(bit);
        while self.range < TOP {
            self.range <<= 8;
            self.code = (self.code << 8) | self.byte() as u32;
        }
        bit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64, for reproducible test decisions.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `n` decisions in `contexts` models, context `i % contexts` drawing 1 with
    /// probability `q[i % contexts]`.
    fn decisions(n: usize, q: &[f64], seed: u64) -> Vec<bool> {
        let mut s = seed;
        (0..n)
            .map(|i| (next(&mut s) >> 11) as f64 / (1u64 << 53) as f64 <= q[i % q.len()])
            .collect()
    }

    fn encode_all(bits: &[bool], contexts: usize) -> Vec<u8> {
        let mut models = vec![BitModel::default(); contexts];
        let mut e = Encoder::new();
        for (i, &b) in bits.iter().enumerate() {
            e.encode(&mut models[i % contexts], b);
        }
        e.finish()
    }

    fn decode_all(bytes: &[u8], n: usize, contexts: usize) -> Vec<bool> {
        let mut models = vec![BitModel::default(); contexts];
        let mut d = Decoder::new(bytes);
        (0..n)
            .map(|i| d.decode(&mut models[i % contexts]))
            .collect()
    }

    #[test]
    fn streams_decode_to_what_was_coded() {
        let q = [0.5, 0.01, 0.99, 0.3, 0.0, 1.0, 0.9999, 0.07];
        for (seed, n) in [
            (1u64, 0usize),
            (2, 1),
            (3, 7),
            (4, 100),
            (5, 5_000),
            (6, 100_000),
        ] {
            for contexts in [1, 3, 8] {
                let bits = decisions(n, &q[..contexts], seed);
                let bytes = encode_all(&bits, contexts);
                assert_eq!(decode_all(&bytes, n, contexts), bits, "seed {seed} n {n}");
                assert_ne!(bytes.last(), Some(&0), "trailing zeros are dropped");
            }
        }
    }

    #[test]
    fn carries_through_pending_ff_bytes_decode() {
        // A carry reaches settled bytes when a 1 moves `low` past 2^32; it passes through the
        // 0xFF bytes held back for it only when such bytes are pending. Short random streams
        // of fair and skewed decisions hit that path now and then: count the streams whose
        // encoding did, and check each of them (and every other) decodes.
        let mut through = 0;
        for seed in 0..20_000u64 {
            let q = [0.5, 0.2, 0.9][seed as usize % 3];
            let bits = decisions(96, &[q, 0.5], seed);
            let mut models = [BitModel::default(); 2];
            let mut e = Encoder::new();
            for (i, &b) in bits.iter().enumerate() {
                e.encode(&mut models[i % 2], b);
            }
            through += (e.carries_through_ff > 0) as u32;
            let bytes = e.finish();
            assert_eq!(decode_all(&bytes, bits.len(), 2), bits, "seed {seed}");
        }
        assert!(
            through >= 20,
            "only {through} streams carried through a pending 0xFF"
        );
    }

    /// The binary entropy of a sequence drawn with probability `q` of a one, in bits.
    fn entropy_bits(n: usize, q: f64) -> f64 {
        if q <= 0.0 || q >= 1.0 {
            return 0.0;
        }
        n as f64 * -(q * q.log2() + (1.0 - q) * (1.0 - q).log2())
    }

    #[test]
    fn output_is_within_the_learning_cost_of_the_entropy() {
        // For one model the coded length exceeds the sequence's empirical entropy by at
        // most ½·log₂ n + 1 bits (the Krichevsky–Trofimov bound), plus the rounding of 15-bit
        // probabilities and 32-bit ranges (well under 0.1% here) and the final bytes.
        for (q, n) in [
            (0.5, 50_000usize),
            (0.1, 50_000),
            (0.01, 200_000),
            (0.3, 1_000),
        ] {
            let bits = decisions(n, &[q], 11);
            let ones = bits.iter().filter(|&&b| b).count();
            let h = entropy_bits(n, ones as f64 / n as f64);
            let bound = h * 1.001 + 0.5 * (n as f64).log2() + 1.0 + 2.0 * 8.0;
            let got = 8.0 * encode_all(&bits, 1).len() as f64;
            assert!(got <= bound, "q {q}: {got} bits against entropy {h:.1}");
            // And no coder beats the entropy by more than the last byte's rounding.
            assert!(got >= h - 8.0, "q {q}: {got} bits below entropy {h:.1}");
        }
    }

    #[test]
    fn certain_decisions_cost_almost_nothing() {
        let bits = vec![false; 100_000];
        assert!(encode_all(&bits, 1).len() <= 4);
    }

    #[test]
    fn garbage_decodes_without_reading_outside_the_slice() {
        let mut s = 3u64;
        for len in [0usize, 1, 3, 4, 5, 64] {
            let bytes: Vec<u8> = (0..len).map(|_| next(&mut s) as u8).collect();
            let mut models = [BitModel::default(); 4];
            let mut d = Decoder::new(&bytes);
            for i in 0..10_000 {
                d.decode(&mut models[i % 4]);
            }
        }
    }
}
