//! [`QuantileRing`] in the envelope.
//!
//! ```text
//! QuantileRing (family 65), flags 0; hash id and seed: xxh3-64 with the default seed only
//!   params:  the buckets' sketch parameters (as family 64: mapping u8, alpha f64 or schema
//!            i8, bin limit u32), bucket width u64 (≥ 1), buckets u32 (1..=10^6)
//!   payload: has newest u8 (0/1), newest bucket u64 (0 when none), then for each slot i:
//!            present u8 (0/1, and 0 while the ring has no bucket); if present: bucket u64
//!            (≡ i mod buckets, at most the newest: one older than the ring reaches is a slot
//!            no newer bucket has reused yet), body length varint, and that many bytes: the
//!            bucket's sketch body as in family 64, holding at least one value, its minimum and
//!            maximum exact
//! ```
//!
//! The window aggregate is not stored: it is derived, and rebuilt by the first query.

use super::bits::{put_varint, read_varint};
use super::encoding::{check_envelope, read_params, write_params};
use super::ring::{QuantileRing, Slot};
use super::DdSketch;
use crate::codec::{self, Family, Reader, Writer};
use crate::{DecodeError, ItemHasher};

impl QuantileRing {
    /// Encodes the ring in the envelope; each bucket's sketch is nested as its body.
    pub fn to_bytes(&self) -> Vec<u8> {
        let empty = self.empty_sketch();
        let mut params = Writer::new();
        write_params(&mut params, empty.mapping(), empty.bin_limit());
        params.u64(self.width()).u32(self.buckets() as u32);
        let mut out = Vec::new();
        out.push(self.newest_bucket().is_some() as u8);
        out.extend_from_slice(&self.newest_bucket().unwrap_or(0).to_le_bytes());
        let mut body = Vec::new();
        for slot in self.slots() {
            match slot {
                None => out.push(0),
                Some(s) => {
                    out.push(1);
                    out.extend_from_slice(&s.bucket.to_le_bytes());
                    body.clear();
                    s.sketch.write_body(&mut body);
                    put_varint(&mut out, body.len() as u64);
                    out.extend_from_slice(&body);
                }
            }
        }
        codec::encode(
            Family::QuantileRing,
            0,
            ItemHasher::default(),
            params.bytes(),
            &out,
        )
    }

    /// Decodes a ring, checking every slot and nested sketch.
    pub fn from_bytes(bytes: &[u8]) -> Result<QuantileRing, DecodeError> {
        let env = codec::decode_family(bytes, Family::QuantileRing)?;
        check_envelope(env.flags, env.hasher)?;
        let mut params = env.params();
        let (mapping, limit) = read_params(&mut params)?;
        let woff = params.offset();
        let width = params.u64("bucket width")?;
        let boff = params.offset();
        let n = params.u32("buckets")?;
        params.finish()?;
        let empty =
            DdSketch::with_mapping(mapping, limit).expect("parameters checked by read_params");
        let mut ring = QuantileRing::of(empty, width, n).map_err(|e| {
            if e.name == "buckets" {
                Reader::invalid("buckets", boff, "in 1..=1000000", n as u64)
            } else {
                Reader::invalid("bucket width", woff, "at least 1", width)
            }
        })?;
        let n = n as u64;
        let mut r = env.payload();
        let has_newest = r.bool("has newest")?;
        let noff = r.offset();
        let newest = r.u64("newest bucket")?;
        if !has_newest && newest != 0 {
            return Err(Reader::invalid(
                "newest bucket",
                noff,
                "0 when the ring has no bucket",
                newest,
            ));
        }
        let newest = has_newest.then_some(newest);
        if (r.remaining() as u64) < n {
            return Err(DecodeError::Truncated {
                field: "slots",
                offset: r.offset(),
                needed: n,
                available: r.remaining(),
            });
        }
        let mut slots = Vec::with_capacity(n as usize);
        for i in 0..n {
            let poff = r.offset();
            if !r.bool("slot present")? {
                slots.push(None);
                continue;
            }
            let Some(nb) = newest else {
                return Err(Reader::invalid(
                    "slot present",
                    poff,
                    "0 while the ring has no bucket",
                    1,
                ));
            };
            let off = r.offset();
            let bucket = r.u64("bucket")?;
            if bucket > nb || bucket % n != i {
                return Err(Reader::invalid(
                    "bucket",
                    off,
                    "its slot's bucket, no newer than the newest",
                    bucket,
                ));
            }
            let len = read_varint(&mut r, "body length")?;
            let soff = r.offset();
            let body = r.bytes(len, "bucket sketch")?;
            let mut br = Reader::at(body, soff);
            let sketch = DdSketch::read_body(&mut br, mapping, limit)?;
            br.finish()?;
            let (_, _, _, min_exact, max_exact) = sketch.scalars();
            if sketch.is_empty() || !min_exact || !max_exact {
                return Err(Reader::invalid(
                    "bucket sketch",
                    soff,
                    "at least one value, its minimum and maximum exact",
                    sketch.count(),
                ));
            }
            slots.push(Some(Box::new(Slot { bucket, sketch })));
        }
        r.finish()?;
        ring.restore(newest, slots);
        Ok(ring)
    }
}
