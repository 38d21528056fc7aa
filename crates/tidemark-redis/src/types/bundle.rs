//! The module bundle: the bytes of a value that is several core summaries (a ring of item
//! counts, generations of filters), each part a core envelope.
//!
//! ```text
//! offset  size  field
//! 0       4     magic "TMRB"
//! 4       1     bundle version (1)
//! 5       1     kind: 1 frequency ring, 2 expiring filter, 3 published window
//! 6       …     kind parameters (each kind's file)
//! …       4     parts, u32
//!   per part: index u64 (bucket or generation number), length u64, a core envelope
//! …       8     checksum: xxh3-64 of every preceding byte
//! ```
//!
//! The checksum is checked before anything is read; every length is checked against the
//! bytes left before a part is sliced.

use tidemark::codec::{self, Reader, Writer};
use tidemark::DecodeError;

use super::LoadError;

/// The first four bytes of a bundle.
pub const MAGIC: &[u8; 4] = b"TMRB";
const VERSION: u8 = 1;
/// A frequency ring ([`super::freq`]).
pub const KIND_FREQ: u8 = 1;
/// An expiring filter ([`super::filter`]).
pub const KIND_FILTER: u8 = 2;
/// A published window ([`super::window`]): its parts are entries, a partition's place and a
/// bucket's stored bytes, not envelopes.
pub const KIND_WINDOW: u8 = 3;

/// A bundle of `kind`: its parameters' bytes, then `(index, envelope)` parts.
pub fn encode(kind: u8, params: &[u8], parts: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = Writer::new();
    w.raw(MAGIC).u8(VERSION).u8(kind).raw(params);
    w.u32(parts.len() as u32);
    for (index, bytes) in parts {
        w.u64(*index).u64(bytes.len() as u64).raw(bytes);
    }
    let sum = codec::checksum_of(w.bytes());
    w.u64(sum);
    w.into_bytes()
}

/// Checks a bundle's checksum, magic and version; returns its kind and a reader at its
/// parameters (the checksum left out).
pub fn open(bytes: &[u8]) -> Result<(u8, Reader<'_>), DecodeError> {
    if bytes.len() < 4 + 2 + 8 {
        return Err(DecodeError::Truncated {
            field: "bundle header",
            offset: 0,
            needed: 14,
            available: bytes.len(),
        });
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let stored = Reader::at(sum, body.len()).u64("checksum")?;
    let computed = codec::checksum_of(body);
    if stored != computed {
        return Err(DecodeError::ChecksumMismatch { stored, computed });
    }
    let mut r = Reader::new(body);
    r.bytes(4, "magic")?;
    let version = r.u8("bundle version")?;
    if version != VERSION {
        return Err(DecodeError::UnsupportedVersion {
            got: version,
            newest: VERSION,
        });
    }
    let kind = r.u8("bundle kind")?;
    Ok((kind, r))
}

/// Reads the part count (at most `max`), then hands each part's index and envelope to `f`, in
/// order; checks that nothing follows the last.
pub fn read_parts(
    r: &mut Reader<'_>,
    max: u64,
    what: &'static str,
    mut f: impl FnMut(&Reader<'_>, u64, &[u8]) -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    let d = LoadError::Decode;
    let parts = r.u32("parts").map_err(d)? as u64;
    if parts > max {
        return Err(invalid(r, "parts", what, parts));
    }
    for _ in 0..parts {
        let index = r.u64("part index").map_err(d)?;
        let len = r.u64("part length").map_err(d)?;
        let part = r.bytes(len, "part").map_err(d)?;
        f(r, index, part)?;
    }
    r.finish().map_err(d)
}

/// A field just read that holds an impossible value.
pub fn invalid(r: &Reader<'_>, field: &'static str, expected: &'static str, got: u64) -> LoadError {
    LoadError::Decode(Reader::invalid(field, r.offset(), expected, got))
}
