//! [`DdSketch`] in the envelope.
//!
//! ```text
//! DdSketch (family 64), flags 0; hash id and seed: xxh3-64 with tidemark's default seed
//!   (the sketch hashes nothing; any other is refused, so equal sketches have equal bytes)
//!   params:  mapping u8 (0 cubic, 1 schema), then
//!              cubic:  alpha f64, in [1e-9, 1)
//!              schema: schema i8, in −4..=8
//!            bin limit u32, in 1..=2^24
//!   payload: the body (a ring's slots nest the same body):
//!     state u8: bit 0 the minimum is a bound (after a subtraction), bit 1 the maximum is;
//!               other bits 0, and 0 when the count is 0
//!     count varint, at most 2^63 − 1
//!     [min f64, max f64, sum f64]   when the count is not 0: min ≤ max, both finite and
//!                                   within the bounds of the lowest (highest) non-empty bin;
//!                                   the sum any f64 (it may have overflowed)
//!     zero count varint
//!     negative store, then positive store (negative keys are the negated keys of |x|), each:
//!       bins varint B, at most the bin limit: from the lowest to the highest non-empty bin
//!       when B > 0:
//!         lowest key, zigzag varint; lowest + B − 1 within the mapping's keys
//!         collapse varint: 0 none; c > 0 when the bins at and below key lowest − (c − 1)
//!           collapsed into it (that key within the mapping's, and the span from it to
//!           the highest key at most the bin limit)
//!         coded length varint L, then L bytes: the B counts Rice-coded (`bits.rs`); the
//!           first and last not 0, each at most 2^63 − 1
//!   The zero count and every store's counts sum to the count.
//! ```
//!
//! The decoder checks each field in this order, and the bytes a length claims before it
//! allocates for them (`B ≤ 8·L`: a count takes at least a bit). Varints have one form and
//! bins are trimmed to the non-empty ends, so the encoding is canonical: equal sketches
//! encode to equal bytes.

use super::bits::{
    put_varint, read_counts, read_varint, unzigzag, write_counts, write_narrow_counts, zigzag,
};
use super::mapping::{Mapping, MappingKind};
use super::sketch::{DdSketch, MAX_BIN_LIMIT, MAX_COUNT};
use super::store::{Counts, Store};
use crate::codec::{self, Family, Reader, Writer};
use crate::{DecodeError, ItemHasher};

const MAPPING_CUBIC: u8 = 0;
const MAPPING_SCHEMA: u8 = 1;
const MIN_IS_BOUND: u8 = 1;
const MAX_IS_BOUND: u8 = 2;

/// Writes the mapping and bin limit (the sketch's parameters, and a ring's first).
pub(crate) fn write_params(w: &mut Writer, mapping: Mapping, bin_limit: u64) {
    match mapping.kind() {
        MappingKind::Cubic { alpha } => w.u8(MAPPING_CUBIC).f64(alpha),
        MappingKind::Schema { schema } => w.u8(MAPPING_SCHEMA).u8(schema as u8),
    };
    w.u32(bin_limit as u32);
}

/// Reads what [`write_params`] wrote, checking each field.
pub(crate) fn read_params(r: &mut Reader<'_>) -> Result<(Mapping, u64), DecodeError> {
    let off = r.offset();
    let mapping = match r.u8("mapping")? {
        MAPPING_CUBIC => {
            let aoff = r.offset();
            let alpha = r.f64("alpha")?;
            Mapping::cubic(alpha)
                .map_err(|_| Reader::invalid("alpha", aoff, "in [1e-9, 1)", alpha.to_bits()))?
        }
        MAPPING_SCHEMA => {
            let soff = r.offset();
            let schema = r.u8("schema")?;
            Mapping::schema(schema as i8)
                .map_err(|_| Reader::invalid("schema", soff, "in -4..=8", schema as u64))?
        }
        other => {
            return Err(Reader::invalid(
                "mapping",
                off,
                "0 (cubic) or 1 (schema)",
                other as u64,
            ))
        }
    };
    let loff = r.offset();
    let limit = r.u32("bin limit")? as u64;
    if !(1..=MAX_BIN_LIMIT).contains(&limit) {
        return Err(Reader::invalid("bin limit", loff, "in 1..=2^24", limit));
    }
    Ok((mapping, limit))
}

impl DdSketch {
    /// Encodes the sketch in the envelope (see `FORMAT.md`).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut body = Vec::new();
        self.write_body(&mut body);
        envelope(self.mapping(), self.bin_limit(), &body)
    }

    /// Decodes a sketch, checking every field before building it.
    pub fn from_bytes(bytes: &[u8]) -> Result<DdSketch, DecodeError> {
        let env = codec::decode_family(bytes, Family::Quantiles)?;
        check_envelope(env.flags, env.hasher)?;
        let mut params = env.params();
        let (mapping, limit) = read_params(&mut params)?;
        params.finish()?;
        let mut r = env.payload();
        let sketch = DdSketch::read_body(&mut r, mapping, limit)?;
        r.finish()?;
        Ok(sketch)
    }

    /// Appends the body: everything but the mapping and bin limit.
    pub(crate) fn write_body(&self, out: &mut Vec<u8>) {
        let (min, max, sum, min_exact, max_exact) = self.scalars();
        write_head(
            out,
            (min_exact, max_exact),
            self.count(),
            (min, max, sum),
            self.zero_count(),
        );
        let (negative, positive) = self.stores();
        for store in [negative, positive] {
            write_store(out, store);
        }
    }

    /// Reads a body written by [`DdSketch::write_body`] for `mapping` and `limit`.
    pub(crate) fn read_body(
        r: &mut Reader<'_>,
        mapping: Mapping,
        limit: u64,
    ) -> Result<DdSketch, DecodeError> {
        let soff = r.offset();
        let state = r.u8("state")?;
        let coff = r.offset();
        let count = read_varint(r, "count")?;
        if count > MAX_COUNT {
            return Err(Reader::invalid("count", coff, "at most 2^63 - 1", count));
        }
        if state & !(MIN_IS_BOUND | MAX_IS_BOUND) != 0 || (count == 0 && state != 0) {
            return Err(Reader::invalid(
                "state",
                soff,
                "bits 0 and 1 only, and none when empty",
                state as u64,
            ));
        }
        let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0);
        let moff = r.offset();
        if count > 0 {
            min = r.f64("min")?;
            max = r.f64("max")?;
            sum = r.f64("sum")?;
            if !(min.is_finite() && max.is_finite() && min <= max) {
                return Err(Reader::invalid(
                    "min",
                    moff,
                    "a finite minimum at most the finite maximum",
                    min.to_bits(),
                ));
            }
        }
        let zoff = r.offset();
        let zero = read_varint(r, "zero count")?;
        let mut total = zero;
        let lo_key = mapping.min_key();
        let hi_key = mapping.max_key();
        let negative = read_store(r, limit, (-hi_key, -lo_key), &mut total)?;
        let positive = read_store(r, limit, (lo_key, hi_key), &mut total)?;
        if total != count {
            return Err(Reader::invalid(
                "zero count",
                zoff,
                "bins that sum to the count",
                total,
            ));
        }
        let sketch = DdSketch::from_parts(
            mapping,
            negative,
            positive,
            zero,
            count,
            (min, max, sum),
            state & MIN_IS_BOUND == 0,
            state & MAX_IS_BOUND == 0,
        );
        if let Some(((low_lo, low_hi), (high_lo, high_hi))) = sketch.extreme_bounds() {
            if !(low_lo <= min && min <= low_hi && high_lo <= max && max <= high_hi) {
                return Err(Reader::invalid(
                    "min",
                    moff,
                    "a minimum and maximum within the lowest and highest bins",
                    min.to_bits(),
                ));
            }
        }
        Ok(sketch)
    }
}

/// The envelope fields a quantile summary fixes: no flags, the default hash.
pub(crate) fn check_envelope(flags: u8, hasher: ItemHasher) -> Result<(), DecodeError> {
    if flags != 0 {
        return Err(Reader::invalid("flags", 6, "0", flags as u64));
    }
    if hasher != ItemHasher::default() {
        return Err(Reader::invalid(
            "hash seed",
            8,
            "xxh3-64 with the default seed: a quantile summary hashes nothing",
            hasher.seed(),
        ));
    }
    Ok(())
}

/// The envelope of a sketch of `mapping` and `bin_limit` around `body`.
pub(crate) fn envelope(mapping: Mapping, bin_limit: u64, body: &[u8]) -> Vec<u8> {
    let mut params = Writer::with_capacity(13);
    write_params(&mut params, mapping, bin_limit);
    codec::encode(
        Family::Quantiles,
        0,
        ItemHasher::default(),
        params.bytes(),
        body,
    )
}

/// Appends the body's fields before the stores: the state (whether the minimum and maximum
/// are exact), the count, the minimum, maximum and sum if the count is not 0, and the zero
/// count.
pub(crate) fn write_head(
    out: &mut Vec<u8>,
    (min_exact, max_exact): (bool, bool),
    count: u64,
    (min, max, sum): (f64, f64, f64),
    zero: u64,
) {
    let mut state = 0;
    if !min_exact {
        state |= MIN_IS_BOUND;
    }
    if !max_exact {
        state |= MAX_IS_BOUND;
    }
    out.push(state);
    put_varint(out, count);
    if count > 0 {
        out.extend_from_slice(&min.to_le_bytes());
        out.extend_from_slice(&max.to_le_bytes());
        out.extend_from_slice(&sum.to_le_bytes());
    }
    put_varint(out, zero);
}

fn write_store(out: &mut Vec<u8>, store: &Store) {
    let Some((lowest, highest)) = store.occupied() else {
        put_varint(out, 0);
        return;
    };
    let collapsed = store.collapsed();
    match store.counts(lowest, highest) {
        Counts::Narrow(c) => write_bins(out, (lowest, highest), collapsed, |out| {
            write_narrow_counts(out, c.iter().copied())
        }),
        Counts::Wide(c) => write_bins(out, (lowest, highest), collapsed, |out| {
            write_counts(out, c.iter().copied())
        }),
    }
}

/// Appends a non-empty store: its bins from `lowest` to `highest` (both non-empty), collapsed
/// at `collapsed`, whose counts `code` appends ([`write_counts`] or [`write_narrow_counts`]).
pub(crate) fn write_bins(
    out: &mut Vec<u8>,
    (lowest, highest): (i64, i64),
    collapsed: Option<i64>,
    code: impl FnOnce(&mut Vec<u8>),
) {
    put_varint(out, (highest - lowest + 1) as u64);
    put_varint(out, zigzag(lowest));
    put_varint(out, collapsed.map_or(0, |c| (lowest - c) as u64 + 1));
    // The counts' code is written after the bytes held, then its length put before it.
    let start = out.len();
    code(out);
    let coded = out.len() - start;
    put_varint(out, coded as u64);
    let length = out.len() - start - coded;
    out[start..].rotate_right(length);
}

/// Reads a store whose keys must lie in `keys`, adding its counts to `total`.
fn read_store(
    r: &mut Reader<'_>,
    limit: u64,
    keys: (i64, i64),
    total: &mut u64,
) -> Result<Store, DecodeError> {
    let boff = r.offset();
    let bins = read_varint(r, "bins")?;
    if bins > limit {
        return Err(Reader::invalid("bins", boff, "at most the bin limit", bins));
    }
    if bins == 0 {
        return Ok(Store::new(limit as u32));
    }
    let koff = r.offset();
    let lowest = unzigzag(read_varint(r, "lowest key")?);
    let highest = lowest.checked_add(bins as i64 - 1);
    if lowest < keys.0 || highest.is_none_or(|h| h > keys.1) {
        return Err(Reader::invalid(
            "lowest key",
            koff,
            "bins within the mapping's keys",
            lowest as u64,
        ));
    }
    let highest = highest.expect("checked just above");
    let coff = r.offset();
    let collapse = read_varint(r, "collapse")?;
    let collapsed = match collapse {
        0 => None,
        c => {
            let below = c - 1;
            let key = (lowest as i128) - below as i128;
            let span = highest as i128 - key + 1;
            if key < keys.0 as i128 || span > limit as i128 {
                return Err(Reader::invalid(
                    "collapse",
                    coff,
                    "a collapsed key within the mapping's keys and the bin limit",
                    c,
                ));
            }
            Some(key as i64)
        }
    };
    let loff = r.offset();
    let len = read_varint(r, "coded length")?;
    if bins > len.saturating_mul(8) {
        return Err(Reader::invalid(
            "coded length",
            loff,
            "a byte for every 8 bins at least",
            len,
        ));
    }
    let start = r.offset();
    let coded = r.bytes(len, "bin counts")?;
    let counts = read_counts(coded, bins as usize, start)?;
    if counts[0] == 0 || counts[counts.len() - 1] == 0 {
        return Err(Reader::invalid(
            "bin counts",
            start,
            "non-empty first and last bins",
            0,
        ));
    }
    for &c in &counts {
        *total = total
            .checked_add(c)
            .filter(|&t| t <= MAX_COUNT)
            .ok_or(Reader::invalid(
                "bin counts",
                start,
                "counts that sum to at most 2^63 - 1",
                c,
            ))?;
    }
    Ok(Store::from_parts(limit as u32, lowest, counts, collapsed))
}
