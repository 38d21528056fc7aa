//! Shared by the targets: random bytes rarely pass the envelope (magic, lengths, checksum), so
//! each target also takes a valid sample of its family, edits its body (family parameters and
//! payload) as the fuzz input says, and seals it again in a valid envelope with a valid
//! checksum. That input reaches the family decoder's own field checks.
#![allow(dead_code)]

use tidemark::codec;

/// `data[0]` picks one of `samples`; the rest edits it (see [`reseal_mutated`]).
pub fn mutate_sample(samples: &[Vec<u8>], data: &[u8]) -> Option<Vec<u8>> {
    let (&which, rest) = data.split_first()?;
    let valid = &samples[which as usize % samples.len()];
    Some(reseal_mutated(valid, rest))
}

/// The body of `valid` edited, in a valid envelope: `data[0]`'s low 3 bits are bytes cut off
/// the payload's end, bit 3 flips flags by its high nibble, bits 4..7 are bytes appended to
/// the payload; then each 3 bytes `(offset lo, offset hi, x)` XOR `x` into the body (params
/// followed by payload) at `offset mod length`.
pub fn reseal_mutated(valid: &[u8], data: &[u8]) -> Vec<u8> {
    let env = codec::decode(valid).expect("samples are valid encodings");
    let mut params = env.params.to_vec();
    let mut payload = env.payload.to_vec();
    let (ctl, edits) = match data.split_first() {
        Some((&c, rest)) => (c, rest),
        None => (0, data),
    };
    for e in edits.chunks_exact(3) {
        let n = params.len() + payload.len();
        if n == 0 {
            break;
        }
        let i = u16::from_le_bytes([e[0], e[1]]) as usize % n;
        if i < params.len() {
            params[i] ^= e[2];
        } else {
            payload[i - params.len()] ^= e[2];
        }
    }
    payload.truncate(payload.len().saturating_sub((ctl & 7) as usize));
    payload.extend(std::iter::repeat_n(0xa5, (ctl >> 4) as usize & 7));
    let flags = if ctl & 8 != 0 {
        env.flags ^ (ctl >> 4)
    } else {
        env.flags
    };
    codec::encode(env.family, flags, env.hasher, &params, &payload)
}
