//! The membership structures in the envelope.
//!
//! ```text
//! QuotientFilter (family 48), flags 0
//!   params:  p u8 (fingerprint bits, 2..=64), q0 u8 (quotient bits at build, 1..=40),
//!            reserve u8 (≤ p)
//!   payload: q u8 (q0 ≤ q < p, p − q ≤ 58, q ≤ 40), len u64 (< ⌈3·2^q/4⌉),
//!            occupied, continuation, shifted: ⌈2^q/64⌉ u64 words each (bit i = slot i),
//!            remainders: ⌈2^q·(p−q)/64⌉ + 1 u64 words, field i at bit i·(p−q)
//!   The table must pass the structural check (runs, clusters, sorted runs, one empty slot,
//!   len = slots in use) and every bit past the last slot must be zero.
//! StackedFilter (family 49), flags 0
//!   params:  capacity u64, fpr f64, growth f64, tightening f64
//!   payload: layers u64 (≥ 1), then per layer: forecast u64 (= round(capacity·growth^i)),
//!            length u64 and that many bytes: the layer's own QuotientFilter encoding,
//!            whose hash must be the stack's
//! LengtheningFilter (family 50, experimental), flags 0
//!   params:  p0 u8, q0 u8, step u8 (1 or 2)
//!   payload: q u8 (q0 ≤ q < p0), len u64 (< ⌈3·2^q/4⌉), generations u64 (= q − q0 + 1),
//!            then per generation: keys u64, distinct u64 (≤ keys) and that many
//!            fingerprints u64, strictly increasing, each below 2^(p0 + step·g);
//!            the keys sum to len
//! ```

use std::collections::HashSet;

use super::bits::{Meta, PackedArray, MAX_WIDTH};
use super::lengthening::LengtheningFilter;
use super::quotient::{grow_at, QuotientFilter, MAX_QUOTIENT_BITS};
use super::stacked::StackedFilter;
use crate::codec::{self, Family, Reader, Writer};
use crate::DecodeError;

fn read_words(r: &mut Reader<'_>, n: usize, field: &'static str) -> Result<Vec<u64>, DecodeError> {
    let bytes = r.bytes(n as u64 * 8, field)?;
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
        .collect())
}

impl QuotientFilter {
    /// Encodes the filter in the envelope.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self.try_to_bytes() {
            Ok(bytes) => bytes,
            // As any other allocation failure: the table itself already fit in memory.
            Err(_) => std::alloc::handle_alloc_error(
                std::alloc::Layout::array::<u8>(self.encoded_payload_len())
                    .unwrap_or(std::alloc::Layout::new::<u8>()),
            ),
        }
    }

    /// Encodes the filter in the envelope, or says that its bytes cannot be allocated. The
    /// payload is written once, straight into the envelope (a table of gigabytes costs its
    /// own size once more, not two or three times).
    pub fn try_to_bytes(&self) -> Result<Vec<u8>, std::collections::TryReserveError> {
        let mut params = Writer::new();
        params
            .u8(self.p as u8)
            .u8(self.q0 as u8)
            .u8(self.reserve as u8);
        codec::try_encode_with(
            Family::QuotientFilter,
            0,
            self.hasher,
            params.bytes(),
            self.encoded_payload_len(),
            |out| {
                out.push(self.q as u8);
                out.extend_from_slice(&self.len.to_le_bytes());
                for field in 0..3 {
                    for w in self.meta.field_words(field) {
                        out.extend_from_slice(&w.to_le_bytes());
                    }
                }
                for &w in self.rems.words() {
                    out.extend_from_slice(&w.to_le_bytes());
                }
            },
        )
    }

    /// The payload's length: q, len, the three flag fields and the remainder words.
    fn encoded_payload_len(&self) -> usize {
        let flag_words = 3 * Meta::word_count(1usize << self.q);
        1 + 8 + 8 * (flag_words + self.rems.words().len())
    }

    /// Decodes a filter, checking every field and the whole table's structure.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let env = codec::decode_family(bytes, Family::QuotientFilter)?;
        env.flags_within(0, "0")?;
        let mut params = env.params();
        let p = params.u8_in("fingerprint bits", 2..=64, "in 2..=64")? as u32;
        let q0 = params.u8_if(
            "initial quotient bits",
            "in 1..=40, below p, at most 58 below p",
            |q0| {
                let q0 = q0 as u32;
                (1..=MAX_QUOTIENT_BITS).contains(&q0) && q0 < p && p - q0 <= MAX_WIDTH
            },
        )? as u32;
        let reserve = params.u8_in("reserve", ..=p as u8, "at most p")? as u32;
        params.finish()?;

        let mut r = env.payload();
        let q = r.u8_if("quotient bits", "between q0 and p − 1, at most 40", |q| {
            (q0..p).contains(&(q as u32)) && q as u32 <= MAX_QUOTIENT_BITS
        })? as u32;
        let len = r.u64_in(
            "keys",
            ..grow_at(q),
            "below the table's load limit ⌈3·2^q/4⌉",
        )?;
        let slots = 1usize << q;
        let width = p - q;
        let flag_words = Meta::word_count(slots);
        let rem_words = PackedArray::word_count(width, slots);
        let needed = (3 * flag_words + rem_words) as u64 * 8;
        if needed != r.remaining() as u64 {
            return Err(DecodeError::Truncated {
                field: "table",
                offset: r.offset(),
                needed,
                available: r.remaining(),
            });
        }
        let toff = r.offset();
        let bad_tail = |field| Reader::invalid(field, toff, "no bits past the last slot", 1);
        let occupied = read_words(&mut r, flag_words, "occupied")?;
        let continuation = read_words(&mut r, flag_words, "continuation")?;
        let shifted = read_words(&mut r, flag_words, "shifted")?;
        let meta = Meta::from_fields(slots, [occupied, continuation, shifted])
            .ok_or_else(|| bad_tail("metadata"))?;
        let rems =
            PackedArray::from_words(width, slots, read_words(&mut r, rem_words, "remainders")?)
                .ok_or_else(|| bad_tail("remainders"))?;
        r.finish()?;
        let f = QuotientFilter {
            hasher: env.hasher,
            p,
            q0,
            q,
            reserve,
            len,
            meta,
            rems,
        };
        f.validate()
            .map_err(|what| Reader::invalid("table", toff, what, len))?;
        Ok(f)
    }
}

impl StackedFilter {
    /// Encodes the stack in the envelope (each layer as its own quotient-filter encoding).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut params = Writer::new();
        params
            .u64(self.capacity)
            .f64(self.fpr)
            .f64(self.growth)
            .f64(self.tightening);
        let mut payload = Writer::new();
        payload.u64(self.layers.len() as u64);
        for (layer, &n) in self.layers.iter().zip(&self.forecasts) {
            let b = layer.to_bytes();
            payload.u64(n).u64(b.len() as u64);
            payload.raw(&b);
        }
        codec::encode(
            Family::StackedFilter,
            0,
            self.hasher,
            params.bytes(),
            payload.bytes(),
        )
    }

    /// Decodes a stack, checking its schedule and every layer.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let env = codec::decode_family(bytes, Family::StackedFilter)?;
        env.flags_within(0, "0")?;
        let mut params = env.params();
        let off = params.offset();
        let capacity = params.u64("capacity")?;
        let fpr = params.f64("fpr")?;
        let growth = params.f64("growth")?;
        let tightening = params.f64("tightening")?;
        params.finish()?;
        // The schedule is checked without building a layer: a forged capacity must not make
        // the decoder allocate its table.
        let mut s = StackedFilter::schedule(capacity, fpr, growth, tightening)
            .map_err(|_| Reader::invalid("parameters", off, "a valid stack schedule", capacity))?;
        s.hasher = env.hasher;
        let mut r = env.payload();
        let coff = r.offset();
        // Each layer takes at least its two u64 headers.
        let n = r.count("layers", 16, u64::MAX)?;
        Reader::ensure(n > 0, "layers", coff, "at least 1", 0)?;
        for i in 0..n {
            let scheduled = s.layer_params(i).0;
            let forecast =
                r.u64_if("layer forecast", "capacity · growth^i", |f| f == scheduled)?;
            let blen = r.u64("layer length")?;
            let boff = r.offset();
            let b = r.bytes(blen, "layer")?;
            let layer = QuotientFilter::from_bytes(b)
                .map_err(|_| Reader::invalid("layer", boff, "a valid quotient filter", i as u64))?;
            Reader::ensure(
                layer.hasher == env.hasher,
                "layer",
                boff,
                "the stack's hash",
                i as u64,
            )?;
            s.layers.push(layer);
            s.forecasts.push(forecast);
        }
        r.finish()?;
        Ok(s)
    }
}

impl LengtheningFilter {
    /// Encodes the model in the envelope.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut params = Writer::new();
        params
            .u8(self.p0 as u8)
            .u8(self.q0 as u8)
            .u8(self.step as u8);
        let mut payload = Writer::new();
        payload
            .u8(self.q as u8)
            .u64(self.len)
            .u64(self.gens.len() as u64);
        for (set, &count) in self.gens.iter().zip(&self.counts) {
            let mut fps: Vec<u64> = set.iter().copied().collect();
            fps.sort_unstable();
            payload.u64(count).u64(fps.len() as u64);
            for fp in fps {
                payload.u64(fp);
            }
        }
        codec::encode(
            Family::LengtheningFilter,
            0,
            self.hasher,
            params.bytes(),
            payload.bytes(),
        )
    }

    /// Decodes the model, checking every field.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let env = codec::decode_family(bytes, Family::LengtheningFilter)?;
        env.flags_within(0, "0")?;
        let mut params = env.params();
        let off = params.offset();
        let p0 = params.u8("fingerprint bits")? as u32;
        let q0 = params.u8("quotient bits")? as u32;
        let step = params.u8("step")? as u32;
        params.finish()?;
        Reader::ensure(
            (1..=2).contains(&step),
            "step",
            off + 2,
            "1 or 2",
            step as u64,
        )?;
        let mut t = LengtheningFilter::with_bits(p0, q0, step).map_err(|_| {
            Reader::invalid("fingerprint bits", off, "a valid table shape", p0 as u64)
        })?;
        t.hasher = env.hasher;
        let mut r = env.payload();
        let q = r.u8_if("quotient bits", "in q0..p0", |q| {
            (q0..p0).contains(&(q as u32))
        })? as u32;
        let loff = r.offset();
        let len = r.u64_in("keys", ..grow_at(q), "below the load limit")?;
        let gens = r.u64_if("generations", "q − q0 + 1", |g| g == (q - q0 + 1) as u64)?;
        t.q = q;
        t.gens.clear();
        t.counts.clear();
        let mut total = 0u64;
        for g in 0..gens as usize {
            let coff = r.offset();
            let count = r.u64("generation keys")?;
            total = total.checked_add(count).ok_or(Reader::invalid(
                "generation keys",
                coff,
                "a sum within u64",
                count,
            ))?;
            let n = r.count("fingerprints", 8, count)?;
            let bits = t.generation_bits(g);
            let mut set = HashSet::with_capacity(n);
            let mut prev: Option<u64> = None;
            for _ in 0..n {
                let fp = r.u64_if(
                    "fingerprint",
                    "increasing and within the generation's bits",
                    |fp| prev.is_none_or(|p| fp > p) && (bits >= 64 || fp >> bits == 0),
                )?;
                prev = Some(fp);
                set.insert(fp);
            }
            t.gens.push(set);
            t.counts.push(count);
        }
        Reader::ensure(total == len, "keys", loff, "the generations' sum", len)?;
        r.finish()?;
        t.len = len;
        Ok(t)
    }
}
