//! The binary envelope every summary is stored in.
//!
//! A store outlives the code that wrote it, so every serialized summary says what it is,
//! which hash built it, and whether its bytes are intact. The layout, little-endian
//! throughout (format version 1):
//!
//! ```text
//! offset      size  field
//! 0           4     magic, the bytes "TDMK"
//! 4           1     format version (1)
//! 5           1     family (see `Family`)
//! 6           1     flags, defined by the family
//! 7           1     hash id (see `HashId`)
//! 8           8     hash seed, u64
//! 16          4     P = length of the family parameters, u32
//! 20          8     L = length of the payload, u64
//! 28          P     family parameters
//! 28+P        L     payload
//! 28+P+L      8     checksum: xxh3-64 (seed 0) of bytes [0, 28+P+L)
//! ```
//!
//! [`decode`] checks, in order: magic, version, family, hash id, both lengths (checked
//! arithmetic against the bytes actually present, so a forged length cannot make anyone
//! allocate), the total length, and then the checksum — all before a family's decoder reads a
//! field. Family decoders then read their parameters and payload through a [`Reader`], whose
//! every read is bounds-checked and whose errors carry the absolute byte offset.
//!
//! `FORMAT.md` at the repository root keeps the version log and each family's layout.
//!
//! ```
//! use tidemark::codec::{self, Family, Writer};
//! use tidemark::hash::ItemHasher;
//!
//! let mut params = Writer::new();
//! params.u32(7);
//! let bytes = codec::encode(Family::ExpHistogram, 0, ItemHasher::default(), params.bytes(), &[1, 2]);
//! let env = codec::decode_family(&bytes, Family::ExpHistogram).unwrap();
//! assert_eq!(env.params().u32("k").unwrap(), 7);
//! assert_eq!(env.payload, &[1, 2]);
//!
//! // One flipped bit anywhere is caught.
//! let mut bad = bytes.clone();
//! bad[29] ^= 1;
//! assert!(codec::decode(&bad).is_err());
//! ```

use core::ops::RangeBounds;

use crate::error::DecodeError;
pub use crate::family::Family;
use crate::hash::{HashId, ItemHasher};

/// The first four bytes of every summary.
pub const MAGIC: [u8; 4] = *b"TDMK";
/// The format version this build writes (and the newest it reads).
pub const FORMAT_VERSION: u8 = 1;
/// Bytes before the parameters.
pub const HEADER_LEN: usize = 28;
/// Bytes of the trailing checksum.
pub const CHECKSUM_LEN: usize = 8;

const OFF_VERSION: usize = 4;
const OFF_FAMILY: usize = 5;
const OFF_FLAGS: usize = 6;
const OFF_HASH_ID: usize = 7;
const OFF_SEED: usize = 8;
const OFF_PARAMS_LEN: usize = 16;
const OFF_PAYLOAD_LEN: usize = 20;

/// A decoded envelope: header fields and borrowed views of the parameters and payload.
#[derive(Clone, Debug)]
pub struct Envelope<'a> {
    /// The family.
    pub family: Family,
    /// The family-defined flags byte.
    pub flags: u8,
    /// The hash and seed the summary was built with.
    pub hasher: ItemHasher,
    /// The family parameters.
    pub params: &'a [u8],
    /// The payload.
    pub payload: &'a [u8],
}

impl<'a> Envelope<'a> {
    /// A reader over the parameters, reporting offsets within the whole encoding.
    pub fn params(&self) -> Reader<'a> {
        Reader::at(self.params, HEADER_LEN)
    }

    /// A reader over the payload, reporting offsets within the whole encoding.
    pub fn payload(&self) -> Reader<'a> {
        Reader::at(self.payload, HEADER_LEN + self.params.len())
    }

    /// The flags, if they set no bit outside `allowed` (0: no flag at all); otherwise
    /// [`DecodeError::Invalid`] naming the flags byte and `expected`.
    pub fn flags_within(&self, allowed: u8, expected: &'static str) -> Result<u8, DecodeError> {
        Reader::ensure(
            self.flags & !allowed == 0,
            "flags",
            OFF_FLAGS,
            expected,
            self.flags as u64,
        )?;
        Ok(self.flags)
    }
}

/// Encodes a summary into the envelope.
pub fn encode(
    family: Family,
    flags: u8,
    hasher: ItemHasher,
    params: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + params.len() + payload.len() + CHECKSUM_LEN);
    put_header(
        &mut out,
        family,
        flags,
        hasher,
        params,
        payload.len() as u64,
    );
    out.extend_from_slice(payload);
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Encodes a summary whose payload `write` appends straight to the output, which is reserved
/// once for `payload_len` payload bytes: a large payload is never built separately and
/// copied, and a size the system refuses is an error, not an abort. The payload length in
/// the header is what `write` wrote (`payload_len` only sizes the reservation).
///
/// ```
/// use tidemark::codec::{self, Family};
/// use tidemark::hash::ItemHasher;
///
/// let h = ItemHasher::default();
/// let direct = codec::encode(Family::Hll, 0, h, &[1], &[2, 3]);
/// let written = codec::try_encode_with(Family::Hll, 0, h, &[1], 2, |out| {
///     out.extend_from_slice(&[2, 3])
/// })
/// .unwrap();
/// assert_eq!(written, direct);
/// ```
pub fn try_encode_with(
    family: Family,
    flags: u8,
    hasher: ItemHasher,
    params: &[u8],
    payload_len: usize,
    write: impl FnOnce(&mut Vec<u8>),
) -> Result<Vec<u8>, std::collections::TryReserveError> {
    let mut out = Vec::new();
    let total = (HEADER_LEN + params.len() + CHECKSUM_LEN).saturating_add(payload_len);
    out.try_reserve_exact(total)?;
    put_header(&mut out, family, flags, hasher, params, 0);
    let start = out.len();
    write(&mut out);
    let written = (out.len() - start) as u64;
    out[OFF_PAYLOAD_LEN..OFF_PAYLOAD_LEN + 8].copy_from_slice(&written.to_le_bytes());
    let sum = checksum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    Ok(out)
}

/// Appends the fixed header and the family parameters: everything before the payload, whose
/// length is `payload_len`.
fn put_header(
    out: &mut Vec<u8>,
    family: Family,
    flags: u8,
    hasher: ItemHasher,
    params: &[u8],
    payload_len: u64,
) {
    let params_len = u32::try_from(params.len()).expect("family parameters fit in 4 GiB");
    out.extend_from_slice(&MAGIC);
    out.push(FORMAT_VERSION);
    out.push(family as u8);
    out.push(flags);
    out.push(hasher.id().to_byte());
    out.extend_from_slice(&hasher.seed().to_le_bytes());
    out.extend_from_slice(&params_len.to_le_bytes());
    out.extend_from_slice(&payload_len.to_le_bytes());
    out.extend_from_slice(params);
}

/// The checksum of the envelope's bytes before the checksum field.
fn checksum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// The checksum the envelope stores for `bytes` (everything before the checksum field):
/// for tests and fuzzers that re-seal altered bytes to reach a family's own checks.
pub fn checksum_of(bytes: &[u8]) -> u64 {
    checksum(bytes)
}

/// The family of an encoding, after checking only magic, version and family: enough to route
/// a file to the right decoder.
pub fn peek_family(bytes: &[u8]) -> Result<Family, DecodeError> {
    let mut r = Reader::new(bytes);
    let magic = r.array::<4>("magic")?;
    if magic != MAGIC {
        return Err(DecodeError::BadMagic { got: magic });
    }
    let version = r.u8("format version")?;
    if version != FORMAT_VERSION {
        return Err(DecodeError::UnsupportedVersion {
            got: version,
            newest: FORMAT_VERSION,
        });
    }
    let family = r.u8("family")?;
    Family::from_byte(family).ok_or(DecodeError::UnknownFamily { got: family })
}

/// What the fixed header declares, read from the first [`HEADER_LEN`] bytes alone (magic,
/// version, family, hash id and both lengths checked): the family, and the total length the
/// whole encoding must have — header, parameters, payload and checksum. A reader of files
/// compares it with the file's size before it reads, or allocates for, the body.
///
/// ```
/// use tidemark::codec::{self, Family};
/// use tidemark::hash::ItemHasher;
///
/// let bytes = codec::encode(Family::Hll, 0, ItemHasher::default(), &[1], &[2, 3]);
/// let header = &bytes[..codec::HEADER_LEN];
/// assert_eq!(codec::declared_len(header).unwrap(), (Family::Hll, bytes.len() as u64));
/// ```
pub fn declared_len(header: &[u8]) -> Result<(Family, u64), DecodeError> {
    let family = peek_family(header)?;
    let mut r = Reader::new(header);
    r.skip(OFF_HASH_ID);
    let hash_byte = r.u8("hash id")?;
    HashId::from_byte(hash_byte).ok_or(DecodeError::UnknownHash { got: hash_byte })?;
    let _seed = r.u64("hash seed")?;
    let params_len = u64::from(r.u32("parameters length")?);
    let payload_len = r.u64("payload length")?;
    let total = (HEADER_LEN + CHECKSUM_LEN) as u64 + params_len;
    let total = total.checked_add(payload_len).ok_or(Reader::invalid(
        "payload length",
        OFF_PAYLOAD_LEN,
        "a length whose envelope fits in 64 bits",
        payload_len,
    ))?;
    Ok((family, total))
}

/// Decodes and validates an envelope (everything but the family's own fields).
pub fn decode(bytes: &[u8]) -> Result<Envelope<'_>, DecodeError> {
    let family = peek_family(bytes)?;
    let mut r = Reader::new(bytes);
    r.skip(OFF_FLAGS);
    let flags = r.u8("flags")?;
    debug_assert_eq!(r.offset(), OFF_HASH_ID);
    let hash_byte = r.u8("hash id")?;
    let hash_id =
        HashId::from_byte(hash_byte).ok_or(DecodeError::UnknownHash { got: hash_byte })?;
    debug_assert_eq!(r.offset(), OFF_SEED);
    let seed = r.u64("hash seed")?;
    debug_assert_eq!(r.offset(), OFF_PARAMS_LEN);
    let params_len = r.u32("parameters length")? as u64;
    debug_assert_eq!(r.offset(), OFF_PAYLOAD_LEN);
    let payload_len = r.u64("payload length")?;
    let params = r.bytes(params_len, "parameters")?;
    let payload = r.bytes(payload_len, "payload")?;
    let body_end = r.offset();
    let stored = r.u64("checksum")?;
    r.finish()?;
    let computed = checksum(&bytes[..body_end]);
    if stored != computed {
        return Err(DecodeError::ChecksumMismatch { stored, computed });
    }
    let _ = (OFF_VERSION, OFF_FAMILY);
    Ok(Envelope {
        family,
        flags,
        hasher: ItemHasher::new(hash_id, seed),
        params,
        payload,
    })
}

/// Decodes an envelope that must hold the given family.
pub fn decode_family(bytes: &[u8], expected: Family) -> Result<Envelope<'_>, DecodeError> {
    let env = decode(bytes)?;
    if env.family != expected {
        return Err(DecodeError::WrongFamily {
            expected,
            got: env.family,
        });
    }
    Ok(env)
}

/// A bounds-checked little-endian cursor. Every error names the field and its absolute
/// offset in the whole encoding.
///
/// Besides the plain reads, a decoder reads each field it can check on the spot through a
/// checked reader, one call a field: a value in a range (`u8_in`, `u32_in`, `u64_in`, …), a
/// value a condition accepts (`u8_if`, `u64_if`, `f64_if`, …), a byte naming one of a few
/// values ([`Reader::u8_as`], [`Reader::bool`]), a count whose elements must fit in the
/// bytes left ([`Reader::count`], [`Reader::expect_left`]). A check across fields already
/// read is [`Reader::ensure`].
///
/// ```
/// use tidemark::codec::Reader;
/// use tidemark::DecodeError;
///
/// let mut r = Reader::at(&[14, 30, 7, 0, 0, 0, 0, 0, 0, 0], 28);
/// assert_eq!(r.u8_in("precision", 4..=18, "in 4..=18"), Ok(14));
/// assert_eq!(
///     r.u8_in("precision", 4..=18, "in 4..=18"),
///     Err(DecodeError::Invalid { field: "precision", offset: 29, expected: "in 4..=18", got: 30 })
/// );
/// let odd = |r: &mut Reader<'_>| r.u64_if("count", "odd", |n| n % 2 == 1);
/// assert_eq!(odd(&mut r), Ok(7));
/// ```
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    base: usize,
}

/// The checked readers of one field type: `$in` (a value in a range) and `$if` (a value a
/// predicate accepts), both through [`Reader::checked`], an error showing the value as
/// `$got` gives it.
macro_rules! checked_readers {
    ($($ty:ident, $in:ident, $if:ident, $got:expr;)*) => {$(
        #[doc = concat!("A little-endian `", stringify!($ty), "` in `range`; any other value is")]
        /// [`DecodeError::Invalid`] naming `field`, its offset and `expected` (the range in
        /// words). `..=max` bounds it above, `min..` below.
        #[inline]
        pub fn $in(
            &mut self,
            field: &'static str,
            range: impl RangeBounds<$ty>,
            expected: &'static str,
        ) -> Result<$ty, DecodeError> {
            self.$if(field, expected, |v| range.contains(&v))
        }

        #[doc = concat!("A little-endian `", stringify!($ty), "` that `ok` accepts, for a")]
        /// condition no range states (an order, a bound set by another field); otherwise
        /// [`DecodeError::Invalid`] naming `field`, its offset and `expected`.
        #[inline]
        pub fn $if(
            &mut self,
            field: &'static str,
            expected: &'static str,
            ok: impl FnOnce($ty) -> bool,
        ) -> Result<$ty, DecodeError> {
            self.checked(field, expected, Self::$ty, ok, $got)
        }
    )*};
}

impl<'a> Reader<'a> {
    /// A reader over `bytes`, which start at offset 0 of the encoding.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader::at(bytes, 0)
    }

    /// A reader over `bytes`, which start at offset `base` of the encoding.
    pub fn at(bytes: &'a [u8], base: usize) -> Self {
        Reader {
            bytes,
            pos: 0,
            base,
        }
    }

    /// The absolute offset of the next byte.
    pub fn offset(&self) -> usize {
        self.base + self.pos
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn skip(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.bytes.len());
    }

    /// The next `n` bytes, if there are that many.
    pub fn bytes(&mut self, n: u64, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let available = self.remaining();
        if n > available as u64 {
            return Err(DecodeError::Truncated {
                field,
                offset: self.offset(),
                needed: n,
                available,
            });
        }
        let n = n as usize;
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let b = self.bytes(N as u64, field)?;
        Ok(b.try_into().expect("bytes() returned N bytes"))
    }

    /// A `u8`.
    pub fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self, field: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_le_bytes(self.array(field)?))
    }

    /// A LEB128 varint (7 bits a byte, low first): at most 10 bytes, no bits past 64, and in
    /// its shortest form (no trailing zero byte), so that each value has one encoding.
    pub fn varint(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let offset = self.offset();
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8(field)?;
            if i == 9 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                if b == 0 && i > 0 {
                    return Err(Reader::invalid(
                        field,
                        offset,
                        "a varint in its shortest form",
                        v,
                    ));
                }
                return Ok(v);
            }
        }
        Err(Reader::invalid(
            field,
            offset,
            "a varint of at most 64 bits",
            v,
        ))
    }

    /// A boolean stored as one byte, 0 or 1 (anything else is an error naming the field).
    pub fn bool(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        self.u8_as(field, "0 or 1", |b| match b {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        })
    }

    /// A little-endian IEEE-754 `f64`.
    pub fn f64(&mut self, field: &'static str) -> Result<f64, DecodeError> {
        Ok(f64::from_le_bytes(self.array(field)?))
    }

    /// A count of `elem_size`-byte elements that must fit in the bytes left: checked before
    /// anyone allocates `count` of anything.
    pub fn count(
        &mut self,
        field: &'static str,
        elem_size: u64,
        max: u64,
    ) -> Result<usize, DecodeError> {
        let offset = self.offset();
        let n = self.u64_in(field, ..=max, "a count within the summary's limits")?;
        if n.checked_mul(elem_size).is_none() {
            return Err(Reader::invalid(
                field,
                offset,
                "a count whose byte length fits in 64 bits",
                n,
            ));
        }
        self.expect_left(field, n, elem_size)?;
        Ok(n as usize)
    }

    /// Reads a field with `read` and keeps it if `ok` accepts it; otherwise the error names
    /// the field, the offset it started at, `expected`, and the value as `got` shows it.
    #[inline]
    fn checked<T: Copy>(
        &mut self,
        field: &'static str,
        expected: &'static str,
        read: impl FnOnce(&mut Self, &'static str) -> Result<T, DecodeError>,
        ok: impl FnOnce(T) -> bool,
        got: impl FnOnce(T) -> u64,
    ) -> Result<T, DecodeError> {
        let offset = self.offset();
        let v = read(self, field)?;
        if ok(v) {
            Ok(v)
        } else {
            Err(Reader::invalid(field, offset, expected, got(v)))
        }
    }

    checked_readers! {
        u8, u8_in, u8_if, u64::from;
        u16, u16_in, u16_if, u64::from;
        u32, u32_in, u32_if, u64::from;
        u64, u64_in, u64_if, |v| v;
        i64, i64_in, i64_if, |v| v as u64;
        f64, f64_in, f64_if, f64::to_bits;
    }

    /// A byte that names one of a few values (a kind, a model, a flag): `from_byte` gives the
    /// value, or `None` for a byte no encoder writes, which is [`DecodeError::Invalid`] naming
    /// `field`, its offset and `expected`.
    ///
    /// ```
    /// use tidemark::codec::Reader;
    /// use tidemark::frequency::Model;
    ///
    /// let mut r = Reader::new(&[1, 7]);
    /// let model = |r: &mut Reader<'_>| r.u8_as("model", "0, 1 or 2", Model::from_byte);
    /// assert_eq!(model(&mut r), Ok(Model::NonNegativeTurnstile));
    /// assert!(model(&mut r).is_err());
    /// ```
    #[inline]
    pub fn u8_as<T>(
        &mut self,
        field: &'static str,
        expected: &'static str,
        from_byte: impl FnOnce(u8) -> Option<T>,
    ) -> Result<T, DecodeError> {
        let offset = self.offset();
        let b = self.u8(field)?;
        from_byte(b).ok_or(Reader::invalid(field, offset, expected, b as u64))
    }

    /// Checks, reading nothing, that `n` elements of `size` bytes each are left: the check
    /// before a decoder allocates for a count it read earlier (or knows from its parameters).
    /// Too few is [`DecodeError::Truncated`] naming `field` at the next byte.
    #[inline]
    pub fn expect_left(&self, field: &'static str, n: u64, size: u64) -> Result<(), DecodeError> {
        let needed = n.saturating_mul(size);
        if needed > self.remaining() as u64 {
            return Err(DecodeError::Truncated {
                field,
                offset: self.offset(),
                needed,
                available: self.remaining(),
            });
        }
        Ok(())
    }

    /// `Ok` if `ok`, else [`Reader::invalid`]: a check across fields already read (a sum, an
    /// order, one field against another), reported at the field that breaks it.
    #[inline]
    pub fn ensure(
        ok: bool,
        field: &'static str,
        offset: usize,
        expected: &'static str,
        got: u64,
    ) -> Result<(), DecodeError> {
        if ok {
            Ok(())
        } else {
            Err(Reader::invalid(field, offset, expected, got))
        }
    }

    /// An error for a field just read at `offset` whose value is impossible.
    pub fn invalid(
        field: &'static str,
        offset: usize,
        expected: &'static str,
        got: u64,
    ) -> DecodeError {
        DecodeError::Invalid {
            field,
            offset,
            expected,
            got,
        }
    }

    /// Checks that every byte was read.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes {
                offset: self.offset(),
                extra: self.remaining(),
            })
        }
    }
}

/// A `Writer` method per number type, appending the value's little-endian bytes.
macro_rules! le_writers {
    ($($ty:ident),*) => {$(
        #[doc = concat!("Appends a little-endian `", stringify!($ty), "`.")]
        pub fn $ty(&mut self, v: $ty) -> &mut Self {
            self.buf.extend_from_slice(&v.to_le_bytes());
            self
        }
    )*};
}

/// A little-endian byte writer, the mirror of [`Reader`].
#[derive(Clone, Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Writer::default()
    }

    /// An empty writer with room for `n` bytes: a writer whose length is known up front
    /// grows its buffer once, not a doubling at a time.
    pub fn with_capacity(n: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(n),
        }
    }

    /// Appends a `u8`.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    le_writers!(u16, u32, u64, i64, f64);

    /// Appends `v` as a LEB128 varint (7 bits a byte, low first; [`Reader::varint`]).
    pub fn varint(&mut self, v: u64) -> &mut Self {
        Writer::put_varint(&mut self.buf, v);
        self
    }

    /// Appends `v` to `out` as a LEB128 varint.
    pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// Appends raw bytes.
    pub fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }

    /// The bytes written so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The bytes, consuming the writer.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Vec<u8> {
        encode(
            Family::BlockCounter,
            3,
            ItemHasher::redis(),
            &[9, 8, 7],
            &[1, 2, 3, 4, 5],
        )
    }

    #[test]
    fn round_trip_keeps_every_header_field() {
        let bytes = sample();
        assert_eq!(bytes.len(), HEADER_LEN + 3 + 5 + CHECKSUM_LEN);
        let env = decode(&bytes).unwrap();
        assert_eq!(env.family, Family::BlockCounter);
        assert_eq!(env.flags, 3);
        assert_eq!(env.hasher, ItemHasher::redis());
        assert_eq!(env.params, &[9, 8, 7]);
        assert_eq!(env.payload, &[1, 2, 3, 4, 5]);
    }

    #[test]
    fn each_header_check_names_its_field() {
        let good = sample();
        let mut b = good.clone();
        b[0] = b'X';
        assert!(matches!(decode(&b), Err(DecodeError::BadMagic { .. })));
        let mut b = good.clone();
        b[OFF_VERSION] = 2;
        assert_eq!(
            decode(&b).unwrap_err(),
            DecodeError::UnsupportedVersion { got: 2, newest: 1 }
        );
        let mut b = good.clone();
        b[OFF_FAMILY] = 200;
        assert_eq!(
            decode(&b).unwrap_err(),
            DecodeError::UnknownFamily { got: 200 }
        );
        let mut b = good.clone();
        b[OFF_HASH_ID] = 0;
        assert_eq!(decode(&b).unwrap_err(), DecodeError::UnknownHash { got: 0 });
        let mut b = good.clone();
        b[OFF_PAYLOAD_LEN..OFF_PAYLOAD_LEN + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            decode(&b),
            Err(DecodeError::Truncated {
                field: "payload",
                ..
            })
        ));
        let mut b = good.clone();
        b.push(0);
        assert!(matches!(
            decode(&b),
            Err(DecodeError::TrailingBytes { extra: 1, .. })
        ));
        assert!(matches!(
            decode_family(&good, Family::Hll),
            Err(DecodeError::WrongFamily {
                expected: Family::Hll,
                got: Family::BlockCounter
            })
        ));
    }

    #[test]
    fn declared_len_reads_the_header_alone() {
        let good = sample();
        let total = good.len() as u64;
        assert_eq!(
            declared_len(&good[..HEADER_LEN]).unwrap(),
            (Family::BlockCounter, total)
        );
        assert_eq!(declared_len(&good).unwrap(), (Family::BlockCounter, total));
        assert!(matches!(
            declared_len(&good[..HEADER_LEN - 1]),
            Err(DecodeError::Truncated { .. })
        ));
        let mut b = good.clone();
        b[OFF_PAYLOAD_LEN..OFF_PAYLOAD_LEN + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            declared_len(&b),
            Err(DecodeError::Invalid {
                field: "payload length",
                ..
            })
        ));
        assert!(matches!(
            declared_len(&[0u8; HEADER_LEN]),
            Err(DecodeError::BadMagic { .. })
        ));
    }

    #[test]
    fn every_single_bit_flip_is_rejected() {
        let good = sample();
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut b = good.clone();
                b[i] ^= 1 << bit;
                assert!(
                    decode(&b).is_err(),
                    "flip of bit {bit} in byte {i} accepted"
                );
            }
        }
    }

    #[test]
    fn every_truncation_is_rejected() {
        let good = sample();
        for n in 0..good.len() {
            assert!(decode(&good[..n]).is_err(), "prefix of {n} bytes accepted");
        }
    }

    #[test]
    fn reader_count_refuses_before_allocating() {
        let mut w = Writer::new();
        w.u64(1 << 40);
        let mut r = Reader::new(w.bytes());
        assert!(matches!(
            r.count("buckets", 8, u64::MAX),
            Err(DecodeError::Truncated { .. })
        ));
        let mut r = Reader::new(w.bytes());
        assert!(matches!(
            r.count("buckets", 8, 10),
            Err(DecodeError::Invalid { .. })
        ));
        let mut w = Writer::new();
        w.u64(u64::MAX);
        let mut r = Reader::new(w.bytes());
        assert!(matches!(
            r.count("buckets", 16, u64::MAX),
            Err(DecodeError::Invalid { .. })
        ));
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn decode_never_panics_on_a_valid_header(tail in proptest::collection::vec(any::<u8>(), 0..100)) {
            let mut bytes = sample()[..HEADER_LEN].to_vec();
            bytes.extend_from_slice(&tail);
            let _ = decode(&bytes);
        }
    }
}
