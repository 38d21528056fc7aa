//! A bucket's bytes at rest: a summary without what its metric's shape already says.
//!
//! A summary travels as an envelope ([`tidemark::codec`]): 28 bytes of header, the family's
//! parameters and an 8-byte checksum around the payload. In the store every bucket of a metric
//! shares all of that but the flags and the payload, and a p = 10 distinct bucket holds five
//! items on average (40 bytes), so the envelope was most of the value. Store format 3 keeps:
//!
//! ```text
//! tag u8 = 1 (a summary's body):  family u8, flags u8, payload (the family's, FORMAT.md)
//! tag u8 = 2 (a count bucket):    count, LEB128 (at most 2^48)
//! tag u8 = 3 (an exact distinct): n, LEB128; then n item hashes, u64 LE (HyperLogLog or
//!                                  ExaLogLog, as the metric's prototype says)
//! then u32 LE: the low 32 bits of xxh3-64 of every byte before it
//! ```
//!
//! Tag 3 is the commonest bucket of all, a HyperLogLog (or ExaLogLog) still in its exact form
//! with its HIP (martingale) estimate, which then equals n: the body would repeat n as the HIP value and as a `u64`
//! count, 16 bytes beside five hashes. It reads back as exactly that envelope.
//!
//! Reading rebuilds the envelope from the metric's prototype (its hash, seed and parameters),
//! so the family's decoder checks every field as before. Values that start with the
//! envelope's magic `TDMK` (every value of a store written before format 3) are read as
//! envelopes: a store mixes both once an older one is resumed. The checksum is narrower than
//! the envelope's, but a value is never the only guard: scans recompute the per-start digests
//! and redb verifies its pages at a writer's open.
//!
//! ```
//! use tidemark_stream::stored::{self, Stored};
//!
//! // A count bucket of 300 events: a tag, two LEB128 bytes and the check, where the
//! // envelope took 86 bytes.
//! let at_rest = stored::count(300);
//! assert_eq!(at_rest.len(), 1 + 2 + 4);
//! assert!(matches!(stored::read(&at_rest), Ok(Stored::Count(300))));
//! let mut bad = at_rest.clone();
//! bad[1] ^= 1;
//! assert!(stored::read(&bad).is_err());
//! ```
//!
//! Only the pipeline makes bodies (`body`, `Prototype::of`): they take the envelope a summary
//! just encoded, never bytes from outside.

use tidemark::codec::{self, Family, Reader, MAGIC};
use tidemark::hash::ItemHasher;
use tidemark::DecodeError;

/// The most events a stored count bucket may claim (2^48): far above any real bucket, far
/// below where window sums could overflow.
pub const MAX_BUCKET_COUNT: u64 = 1 << 48;

/// The tag of a summary's body (family, flags, payload).
const TAG_BODY: u8 = 1;
/// The tag of a count bucket's count.
const TAG_COUNT: u8 = 2;
/// The tag of a HyperLogLog's exact form (with its HIP value).
const TAG_EXACT: u8 = 3;
/// The flags of an exact distinct sketch with its running estimate, by family (FORMAT.md):
/// HyperLogLog's HIP bit, ExaLogLog's martingale bit. Both payloads then read
/// `representation 0 (exact), estimate f64, count u64, hashes`.
fn exact_flags(family: Family) -> Option<u8> {
    match family {
        Family::Hll => Some(2),
        Family::ExaLogLog => Some(1),
        _ => None,
    }
}
/// The representation byte of the exact form, in both families.
const EXACT_REPR: u8 = 0;
/// The trailing checksum's width.
const CHECK_LEN: usize = 4;

/// What a stored value holds, once its tag and checksum are checked.
pub enum Stored<'a> {
    /// A whole envelope (stores written before format 3).
    Envelope(&'a [u8]),
    /// A count bucket's count.
    Count(u64),
    /// A summary's body, to expand with its metric's [`Prototype`].
    Body(&'a [u8]),
    /// The item hashes of an exact HyperLogLog (`8·n` bytes), to expand likewise.
    Exact(&'a [u8]),
}

/// The envelope fields every bucket of one metric shares: what a body omits.
#[derive(Clone, Debug)]
pub struct Prototype {
    family: Family,
    hasher: ItemHasher,
    params: Vec<u8>,
}

impl Prototype {
    /// The shared fields of `envelope`, a summary of the metric (its empty prototype).
    ///
    /// # Panics
    /// If `envelope` is not a valid envelope: callers pass bytes they just encoded.
    pub(crate) fn of(envelope: &[u8]) -> Prototype {
        let e = codec::decode(envelope).expect(
            "callers pass a summary's own to_bytes (the metric's prototype), which codec::encode \
             wrote whole: no input reaches this decode",
        );
        Prototype {
            family: e.family,
            hasher: e.hasher,
            params: e.params.to_vec(),
        }
    }

    /// The envelope of a stored exact distinct sketch (from [`read`]): its running estimate
    /// and count are the number of hashes. Refuses it for a metric of another family.
    pub fn expand_exact(&self, hashes: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let n = (hashes.len() / 8) as u64;
        // Tag 3 is an exact distinct bucket (HyperLogLog or ExaLogLog): another metric's
        // values never carry it.
        let flags = exact_flags(self.family).ok_or_else(|| {
            Reader::invalid(
                "stored tag",
                0,
                "1 (body) or 2 (count): tag 3 is an exact distinct bucket",
                3,
            )
        })?;
        let mut body = Vec::with_capacity(2 + 17 + hashes.len());
        body.extend_from_slice(&[self.family as u8, flags, EXACT_REPR]);
        body.extend_from_slice(&(n as f64).to_le_bytes());
        body.extend_from_slice(&n.to_le_bytes());
        body.extend_from_slice(hashes);
        self.expand(&body)
    }

    /// The envelope of a stored body (from [`read`]): the prototype's header and parameters
    /// around the body's flags and payload. Refuses a body of another family.
    pub fn expand(&self, body: &[u8]) -> Result<Vec<u8>, DecodeError> {
        let (&[family, flags], payload) =
            body.split_first_chunk::<2>()
                .ok_or(DecodeError::Truncated {
                    field: "stored body",
                    offset: 1,
                    needed: 2,
                    available: body.len(),
                })?;
        let family = Family::from_byte(family).ok_or(DecodeError::UnknownFamily { got: family })?;
        if family != self.family {
            return Err(DecodeError::WrongFamily {
                expected: self.family,
                got: family,
            });
        }
        Ok(codec::encode(
            family,
            flags,
            self.hasher,
            &self.params,
            payload,
        ))
    }
}

/// The stored form of a summary's envelope: an exact distinct sketch's hashes, or its body.
pub(crate) fn body(envelope: &[u8]) -> Vec<u8> {
    let e = codec::decode(envelope).expect(
        "callers pass a summary's own to_bytes, which codec::encode wrote whole: no input \
         reaches this decode",
    );
    if let Some(hashes) = exact_hashes(&e) {
        // Tag, count (at most 10 LEB128 bytes), hashes, check: one allocation.
        let mut out = Vec::with_capacity(1 + 10 + hashes.len() + CHECK_LEN);
        out.push(TAG_EXACT);
        leb128(&mut out, (hashes.len() / 8) as u64);
        out.extend_from_slice(hashes);
        return seal(out);
    }
    let mut out = Vec::with_capacity(3 + e.payload.len() + CHECK_LEN);
    out.extend_from_slice(&[TAG_BODY, e.family as u8, e.flags]);
    out.extend_from_slice(e.payload);
    seal(out)
}

/// The hashes of an exact distinct sketch whose running estimate is its count (as every one
/// the pipeline builds by inserting is), which [`Prototype::expand_exact`] rebuilds byte for
/// byte.
fn exact_hashes<'a>(e: &codec::Envelope<'a>) -> Option<&'a [u8]> {
    if exact_flags(e.family) != Some(e.flags) {
        return None;
    }
    let (&[rep], rest) = e.payload.split_first_chunk::<1>()?;
    let (hip, rest) = rest.split_first_chunk::<8>()?;
    let (n, hashes) = rest.split_first_chunk::<8>()?;
    let n = u64::from_le_bytes(*n);
    let whole = rep == EXACT_REPR
        && hashes.len() as u64 == n.checked_mul(8)?
        // Bits, not values: a HIP of −0.0 (which decoders accept) must not come back as +0.0.
        && f64::from_le_bytes(*hip).to_bits() == (n as f64).to_bits();
    whole.then_some(hashes)
}

/// The stored form of a count bucket holding `count` events.
pub fn count(count: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 10 + CHECK_LEN);
    out.push(TAG_COUNT);
    leb128(&mut out, count);
    seal(out)
}

fn leb128(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let low = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(low);
            break;
        }
        out.push(low | 0x80);
    }
}

fn seal(mut out: Vec<u8>) -> Vec<u8> {
    let sum = check(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn check(bytes: &[u8]) -> u32 {
    xxhash_rust::xxh3::xxh3_64(bytes) as u32
}

/// Reads a stored value's tag and checksum: an envelope (by its magic), a count or a body
/// (at least its family and flags bytes).
pub fn read(stored: &[u8]) -> Result<Stored<'_>, DecodeError> {
    if stored.starts_with(&MAGIC) {
        return Ok(Stored::Envelope(stored));
    }
    let truncated = |needed: u64| DecodeError::Truncated {
        field: "stored value",
        offset: 0,
        needed,
        available: stored.len(),
    };
    let Some(split) = stored.len().checked_sub(CHECK_LEN).filter(|&n| n >= 1) else {
        return Err(truncated(1 + CHECK_LEN as u64));
    };
    let (value, sum) = stored.split_at(split);
    let stored_sum = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
    let computed = check(value);
    if stored_sum != computed {
        return Err(DecodeError::ChecksumMismatch {
            stored: stored_sum as u64,
            computed: computed as u64,
        });
    }
    match value[0] {
        TAG_BODY => Ok(Stored::Body(&value[1..])),
        TAG_COUNT => {
            let (n, used) = read_leb128(&value[1..], MAX_BUCKET_COUNT, "stored count")?;
            if used != value.len() - 1 {
                return Err(DecodeError::TrailingBytes {
                    offset: 1 + used,
                    extra: value.len() - 1 - used,
                });
            }
            Ok(Stored::Count(n))
        }
        TAG_EXACT => {
            // No exact form holds more hashes than fit in the value.
            let most = (value.len() / 8) as u64;
            let (n, used) = read_leb128(&value[1..], most, "stored exact hashes")?;
            let hashes = &value[1 + used..];
            if hashes.len() as u64 != n * 8 {
                return Err(Reader::invalid(
                    "stored exact hashes",
                    1,
                    "8 bytes for each of the n hashes",
                    hashes.len() as u64,
                ));
            }
            Ok(Stored::Exact(hashes))
        }
        tag => Err(Reader::invalid(
            "stored tag",
            0,
            "1 (body), 2 (count) or 3 (exact)",
            tag as u64,
        )),
    }
}

/// A LEB128 number at the start of `bytes`, canonical (no trailing zero group), at most
/// `most`: the number and the bytes it took.
fn read_leb128(bytes: &[u8], most: u64, field: &'static str) -> Result<(u64, usize), DecodeError> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate() {
        // Nine groups hold 63 bits; no bound here is larger.
        if i == 9 {
            return Err(Reader::invalid(
                field,
                1,
                "a LEB128 number of at most nine bytes",
                10,
            ));
        }
        v |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            if b == 0 && i > 0 {
                return Err(Reader::invalid(field, 1 + i, "no trailing zero group", 0));
            }
            if v > most {
                return Err(Reader::invalid(field, 1, "a number within its bound", v));
            }
            return Ok((v, i + 1));
        }
    }
    Err(DecodeError::Truncated {
        field,
        offset: 1 + bytes.len(),
        needed: 1,
        available: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidemark::cardinality::Hll;

    #[test]
    fn counts_round_trip_at_every_group_boundary() {
        for c in [
            0u64,
            1,
            127,
            128,
            16_383,
            16_384,
            (1 << 21) - 1,
            MAX_BUCKET_COUNT,
        ] {
            let s = count(c);
            match read(&s).expect("a count this module just stored reads back") {
                Stored::Count(back) => assert_eq!(back, c),
                _ => panic!("a count read as something else"),
            }
        }
        assert_eq!(count(5).len(), 1 + 1 + CHECK_LEN);
    }

    #[test]
    fn counts_past_the_bound_or_not_canonical_are_refused() {
        assert!(read(&seal(vec![
            TAG_COUNT, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01
        ]))
        .is_err());
        let past = count(MAX_BUCKET_COUNT + 1);
        assert!(
            matches!(read(&past), Err(DecodeError::Invalid { got, .. }) if got == MAX_BUCKET_COUNT + 1)
        );
        // 5 spelled with a trailing zero group.
        assert!(read(&seal(vec![TAG_COUNT, 0x85, 0x00])).is_err());
        assert!(read(&seal(vec![TAG_COUNT, 0x85])).is_err());
        assert!(matches!(
            read(&seal(vec![TAG_COUNT, 0x05, 0x01])),
            Err(DecodeError::TrailingBytes { extra: 1, .. })
        ));
    }

    #[test]
    fn every_flipped_bit_and_every_cut_is_refused() {
        let mut h = Hll::new(10).unwrap();
        for i in 0..20u64 {
            h.insert_u64(i);
        }
        for s in [body(&h.to_bytes()), count(300)] {
            for i in 0..s.len() {
                for bit in 0..8 {
                    let mut bad = s.clone();
                    bad[i] ^= 1 << bit;
                    assert!(read(&bad).is_err(), "byte {i} bit {bit}");
                }
            }
            for cut in 0..s.len() {
                assert!(read(&s[..cut]).is_err(), "cut at {cut}");
            }
        }
    }

    #[test]
    fn a_body_of_another_family_or_unknown_tag_is_refused() {
        let proto = Prototype::of(&Hll::new(10).unwrap().to_bytes());
        let other =
            tidemark::window::BlockCounter::with_block(tidemark::window::Window::Ticks(60), 60)
                .unwrap()
                .to_bytes();
        let other = body(&other);
        let Ok(Stored::Body(b)) = read(&other) else {
            panic!("a body reads as a body")
        };
        assert!(matches!(
            proto.expand(b),
            Err(DecodeError::WrongFamily { .. })
        ));
        assert!(matches!(
            proto.expand(&[16]),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            proto.expand(&[99, 0]),
            Err(DecodeError::UnknownFamily { got: 99 })
        ));
        assert!(matches!(
            read(&seal(vec![9, 1, 2])),
            Err(DecodeError::Invalid { got: 9, .. })
        ));
    }

    /// Every form a bucket takes comes back as the envelope it was made from, and the common
    /// ones take their short forms.
    #[test]
    fn summaries_round_trip_through_their_stored_forms() {
        let proto = Prototype::of(&Hll::new(10).unwrap().to_bytes());
        let mut merged = Hll::new(10).unwrap();
        for n in [0u64, 1, 5, 60, 200, 5_000] {
            let mut h = Hll::new(10).unwrap();
            for i in 0..n {
                h.insert_u64(i * 7_919);
            }
            merged.merge(&h).unwrap();
            // Whether the short form is expected: for a merged sketch either may be right.
            for (sketch, exact_form) in [(&h, Some(n <= 60)), (&merged, None)] {
                let envelope = sketch.to_bytes();
                let stored = body(&envelope);
                let back = match read(&stored).unwrap() {
                    Stored::Exact(hashes) => {
                        assert_ne!(
                            exact_form,
                            Some(false),
                            "n = {n}: a non-exact form is short"
                        );
                        assert_eq!(stored.len(), 1 + 1 + 8 * n as usize + CHECK_LEN);
                        // The envelope around the same hashes: 28 bytes of header, 10 of
                        // parameters, representation, HIP and count (17), a checksum (8).
                        assert_eq!(envelope.len(), 28 + 10 + 17 + 8 * n as usize + 8);
                        proto.expand_exact(hashes).unwrap()
                    }
                    Stored::Body(b) => {
                        assert_ne!(
                            exact_form,
                            Some(true),
                            "n = {n}: an exact form took the body"
                        );
                        assert_eq!(stored.len(), envelope.len() - 28 - 10 - 8 + 3 + CHECK_LEN);
                        proto.expand(b).unwrap()
                    }
                    _ => panic!("a sketch read as a count or an envelope"),
                };
                assert_eq!(back, envelope, "n = {n}");
            }
        }
    }

    #[test]
    fn exact_hashes_must_fill_the_value() {
        let mut h = Hll::new(10).unwrap();
        h.insert_u64(1);
        h.insert_u64(2);
        let stored = body(&h.to_bytes());
        assert_eq!(stored[0], TAG_EXACT);
        // n = 3 with two hashes, and n = 1 with two.
        for n in [3u8, 1] {
            let mut bad = stored[..stored.len() - CHECK_LEN].to_vec();
            bad[1] = n;
            assert!(
                matches!(read(&seal(bad)), Err(DecodeError::Invalid { .. })),
                "n = {n}"
            );
        }
    }

    #[test]
    fn an_envelope_reads_as_itself() {
        let e = Hll::new(10).unwrap().to_bytes();
        assert!(matches!(read(&e), Ok(Stored::Envelope(b)) if b == e.as_slice()));
    }
}
