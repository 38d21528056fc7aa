//! Index mappings: which bin a value goes to, and each bin's bounds ([`Mapping`]'s
//! documentation carries the math).

use core::fmt;

use crate::ParamError;

/// The smallest magnitude a mapping indexes: the smallest normal `f64`, `2^−1022`. Values
/// of smaller magnitude (zero, and the subnormals) are counted in the zero bin.
pub const MIN_INDEXABLE: f64 = f64::MIN_POSITIVE;
/// The smallest relative accuracy α a cubic mapping accepts: below it, bins are too narrow
/// for their bounds to be resolved in `f64` with the margin the guarantee needs.
pub const MIN_ALPHA: f64 = 1e-9;
/// The coarsest schema (16 octaves a bin).
pub const MIN_SCHEMA: i8 = -4;
/// The finest schema (256 bins an octave).
pub const MAX_SCHEMA: i8 = 8;

const A: f64 = 6.0 / 35.0;
const B: f64 = -3.0 / 5.0;
const C: f64 = 10.0 / 7.0;
/// Relative widening of a cubic bin's bounds, covering rounding in the key and the bounds.
const DELTA: f64 = 1.0 / (1u64 << 40) as f64;
const MANTISSA: u64 = (1 << 52) - 1;
const ONE_BITS: u64 = 0x3ff0_0000_0000_0000;

/// Which mapping, and its parameter.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum MappingKind {
    /// The cubically interpolated logarithm, for relative accuracy `alpha`.
    Cubic {
        /// The relative accuracy α.
        alpha: f64,
    },
    /// Prometheus's native-histogram schema (OpenTelemetry's scale).
    Schema {
        /// The schema, `−4..=8`.
        schema: i8,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// `multiplier` is `m`; `poly` the cubic in `u = 1 + s` times `m`, its constant term
    /// less ½ (see [`Mapping::index_bits`]).
    Cubic {
        alpha: f64,
        multiplier: f64,
        poly: [f64; 4],
    },
    Schema {
        schema: i8,
    },
}

/// How values map to bins: which bin a value goes to, and each bin's bounds.
///
/// A mapping sends a value `x ≥ 2^−1022` (the smallest normal `f64`; anything smaller in
/// magnitude is counted as zero) to an integer key, so that every bin `(lower, upper]` has
/// `upper / lower ≤ γ`: the bin's representative `2·lower·upper / (lower + upper)` is then
/// within `α = (γ − 1)/(γ + 1)` of every value in it (Masson, Rim, Lee 2019, §2). Neither
/// mapping calls `ln` per value: both read the float's exponent and mantissa bits.
///
/// # Cubic: from α, in a few multiplications
///
/// Write `x = 2^e·(1 + s)` with `s ∈ [0, 1)`. The exact `log₂ x = e + log₂(1 + s)` is
/// approximated by `L(x) = e + P(s)`, `P(s) = A·s³ + B·s² + C·s` with `A = 6/35`, `B = −3/5`,
/// `C = 10/7` (the cubic interpolation of DataDog's sketches libraries): `P(0) = 0`,
/// `P(1) = 1`, so `L` is continuous and increasing, and a value goes to key `⌈m·L(x)⌉`
/// (one exactly on a bin bound may go to the bin above; both brackets hold it). A bin spans
/// `1/m` of `L`; in `ln x` it spans `1/(m·(1 + s)·P′(s)·ln 2)`, and `(1 + s)·P′(s) = (18s³ − 24s² + 8s + 50)/35` is smallest, `10/7 = C`, at `s = 0` and
/// `s = 2/3` (largest, `52/35`, at `s = 1`: bins are within 4% of even). The widest bin's
/// `ln(upper/lower)` is therefore `1/(C·m)`, and `m = 1/(C·(ln γ − η))` makes every bin's
/// ratio at most `γ·e^−η`. That costs `1/(C·ln 2) − 1 ≈ 1%` more bins than the exact
/// logarithm. The margin `η = 4δ(1 + γ)`, `δ = 2^−40`, absorbs rounding: the key and the
/// bounds are computed in `f64` with relative errors below `2.5·10^−13 < δ`, so bounds
/// widened by `δ` contain every value given their key, and the representative of the
/// widened bin is still within α. A bin's bounds invert `L` exactly: `P(s) = f` is solved
/// by Newton's method (`P` is increasing and concave on `[0, 1]`, so it converges from
/// `s = f` in a few steps).
///
/// # Schema: Prometheus native histograms, OpenTelemetry exponential histograms
///
/// Schema `s` (here `−4..=8`, Prometheus's range) has `γ = 2^(2^−s)`, and key `i` is exactly
/// `(γ^(i−1), γ^i]`: schema 5 has 32 bins an octave and `α = (γ − 1)/(γ + 1) ≈ 1.08%`. Key
/// `i` is Prometheus's bucket index `i` and OpenTelemetry's index `i − 1` (its bucket `j`
/// is `(γ^j, γ^(j+1)]`). For `s ≤ 0` a bin is `2^−s` whole octaves, so the key is the
/// exponent shifted: `⌊(e − [x = 2^e]) / 2^−s⌋ + 1`. For `s > 0`, with `x = 2^e·m` and
/// `m ∈ [1, 2)`, the key is `e·2^s + j`, `j` the number of sub-bucket bounds `2^(k/2^s)`,
/// `k < 2^s`, below `m`. The bounds are a table of the 256 mantissas
/// `⌊2^(k/256)·2^52⌋ − 2^52` (schema 8's; schema `s` uses every `2^(8−s)`-th), and since
/// each bound but `k = 0` is irrational, a float is above the true bound exactly when its
/// mantissa is above the floor's: the comparison is exact, powers of two land on the upper
/// bound of their bin, and the bracket `[⌊lower⌋, ⌊upper⌋]` holds every float of the bin.
/// A 512-cell table of the top nine mantissa bits gives `j` with one comparison (cells are
/// narrower than the gap between bounds).
///
/// ```
/// use tidemark::quantile::Mapping;
///
/// let m = Mapping::schema(5).unwrap();
/// assert!((m.alpha() - 0.0108).abs() < 1e-4);
/// // Powers of two are the upper bounds of their bins: 2 = 2^(32/32) is key 32's top.
/// assert_eq!(m.index(2.0), 32);
/// assert_eq!(m.bounds(32).1, 2.0);
/// assert_eq!(m.index(f64::from_bits(2f64.to_bits() + 1)), 33);
///
/// let c = Mapping::cubic(0.01).unwrap();
/// let key = c.index(123.4);
/// let (lo, hi) = c.bounds(key);
/// assert!(lo <= 123.4 && 123.4 <= hi && hi / lo <= 1.01 / 0.99);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mapping {
    kind: Kind,
    /// The lowest and highest keys: those of `2^−1022` and of `f64::MAX`.
    min_key: i64,
    max_key: i64,
}

impl Mapping {
    /// The cubic mapping of relative accuracy `alpha`, in `[1e-9, 1)`.
    pub fn cubic(alpha: f64) -> Result<Mapping, ParamError> {
        if !(MIN_ALPHA..1.0).contains(&alpha) {
            return Err(ParamError::new(
                "alpha",
                "a relative accuracy in [1e-9, 1)",
                alpha,
            ));
        }
        let gamma = (1.0 + alpha) / (1.0 - alpha);
        let ln_gamma = (2.0 * alpha / (1.0 - alpha)).ln_1p();
        let eta = 4.0 * DELTA * (1.0 + gamma);
        let m = 1.0 / (C * (ln_gamma - eta));
        // P(s) = A·s³ + B·s² + C·s in u = 1 + s: A·u³ + (B − 3A)·u² + (3A − 2B + C)·u
        // + (B − A − C), times m, and −½ so that rounding to nearest gives ⌈·⌉ − 1.
        let poly = [
            m * A,
            m * (B - 3.0 * A),
            m * (3.0 * A - 2.0 * B + C),
            m * (B - A - C) - 0.5,
        ];
        Ok(Mapping::of(Kind::Cubic {
            alpha,
            multiplier: m,
            poly,
        }))
    }

    /// The mapping of Prometheus native-histogram schema `schema` (`−4..=8`):
    /// `γ = 2^(2^−schema)`.
    pub fn schema(schema: i8) -> Result<Mapping, ParamError> {
        if !(MIN_SCHEMA..=MAX_SCHEMA).contains(&schema) {
            return Err(ParamError::new("schema", "in -4..=8", schema));
        }
        Ok(Mapping::of(Kind::Schema { schema }))
    }

    fn of(kind: Kind) -> Mapping {
        let mut m = Mapping {
            kind,
            min_key: 0,
            max_key: 0,
        };
        m.min_key = m.index(MIN_INDEXABLE);
        m.max_key = m.index(f64::MAX);
        m
    }

    /// Which mapping, and its parameter.
    pub fn kind(&self) -> MappingKind {
        match self.kind {
            Kind::Cubic { alpha, .. } => MappingKind::Cubic { alpha },
            Kind::Schema { schema } => MappingKind::Schema { schema },
        }
    }

    /// The relative accuracy every answer is within: the `alpha` asked for, or a schema's
    /// `(γ − 1)/(γ + 1)` raised by `2^−40` of itself for the rounding of its representative.
    pub fn alpha(&self) -> f64 {
        match self.kind {
            Kind::Cubic { alpha, .. } => alpha,
            Kind::Schema { .. } => {
                let g = self.gamma();
                (g - 1.0) / (g + 1.0) * (1.0 + DELTA)
            }
        }
    }

    /// γ: the largest ratio `upper / lower` of a bin, `(1 + α)/(1 − α)` (a cubic mapping's
    /// bins are all at most that, most a little less).
    pub fn gamma(&self) -> f64 {
        match self.kind {
            Kind::Cubic { alpha, .. } => (1.0 + alpha) / (1.0 - alpha),
            Kind::Schema { schema } => 2f64.powf(2f64.powi(-(schema as i32))),
        }
    }

    /// The lowest key (that of `2^−1022`).
    pub fn min_key(&self) -> i64 {
        self.min_key
    }

    /// The highest key (that of `f64::MAX`).
    pub fn max_key(&self) -> i64 {
        self.max_key
    }

    /// The key of `x`, which must be finite and at least [`MIN_INDEXABLE`] (checked in debug
    /// builds; the sketch routes everything else to its zero bin).
    #[inline(always)]
    pub fn index(&self, x: f64) -> i64 {
        debug_assert!((MIN_INDEXABLE..=f64::MAX).contains(&x), "{x}");
        self.index_bits(x.to_bits())
    }

    /// The key of the positive normal float of bits `bits`.
    ///
    /// The cubic key `⌈m·L(x)⌉` is computed as `round(m·L(x) − ½) + 1`, the rounding by
    /// adding `1.5·2^52` and reading the integer off the float's bits: no call to `ceil` and
    /// none of the saturation checks of `as`. The two agree except where `m·L(x)` is an
    /// integer — a value on a bin bound — which may go to the bin above: the brackets of
    /// both hold it.
    #[inline(always)]
    pub(crate) fn index_bits(&self, bits: u64) -> i64 {
        let exponent = (bits >> 52) as i64 - 1023;
        match self.kind {
            Kind::Cubic {
                multiplier, poly, ..
            } => {
                let u = f64::from_bits((bits & MANTISSA) | ONE_BITS);
                let p = ((poly[0] * u + poly[1]) * u + poly[2]) * u + poly[3];
                let r = (p + exponent as f64 * multiplier) + ROUNDER;
                (r.to_bits() as i64).wrapping_sub(ROUNDER.to_bits() as i64 - 1)
            }
            Kind::Schema { schema } => schema_index(exponent, bits & MANTISSA, schema),
        }
    }

    /// The closed bounds `[lower, upper]` of key `key`'s bin, within `[2^−1022, f64::MAX]`:
    /// every value of that key lies in them. A schema's are the floats at or below the exact
    /// bounds; a cubic mapping's are widened by `2^−40` of themselves for rounding.
    pub fn bounds(&self, key: i64) -> (f64, f64) {
        let (lo, hi) = match self.kind {
            Kind::Cubic { multiplier, .. } => (
                cubic_inverse((key - 1) as f64 / multiplier) * (1.0 - DELTA),
                cubic_inverse(key as f64 / multiplier) * (1.0 + DELTA),
            ),
            Kind::Schema { schema } => (schema_bound(key - 1, schema), schema_bound(key, schema)),
        };
        (lo.max(MIN_INDEXABLE), hi.min(f64::MAX))
    }

    /// The value that stands for key `key`'s bin: `2·lower·upper/(lower + upper)` of its
    /// bounds before widening, within α of every value in the bin.
    pub fn representative(&self, key: i64) -> f64 {
        let (lo, hi) = match self.kind {
            Kind::Cubic { multiplier, .. } => (
                cubic_inverse((key - 1) as f64 / multiplier),
                cubic_inverse(key as f64 / multiplier),
            ),
            Kind::Schema { schema } => (schema_bound(key - 1, schema), schema_bound(key, schema)),
        };
        let (lo, hi) = (lo.max(MIN_INDEXABLE), hi.min(f64::MAX));
        // As `upper·2ρ/(1 + ρ)`, ρ = lower/upper ≤ 1: no step overflows near `f64::MAX`.
        let rho = lo / hi;
        hi * (2.0 * rho / (1.0 + rho))
    }

    /// The parameters a merge must agree on, `(name, ours)`.
    pub(crate) fn shape(&self) -> [(&'static str, u64); 2] {
        match self.kind {
            Kind::Cubic { alpha, .. } => [
                ("index mapping (0 cubic, 1 schema)", 0),
                ("alpha (f64 bits)", alpha.to_bits()),
            ],
            Kind::Schema { schema } => [
                ("index mapping (0 cubic, 1 schema)", 1),
                ("schema + 4", (schema as i64 + 4) as u64),
            ],
        }
    }
}

impl fmt::Display for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Kind::Cubic { alpha, .. } => write!(f, "cubic, alpha {alpha}"),
            Kind::Schema { schema } => write!(f, "schema {schema}"),
        }
    }
}

/// `1.5·2^52`: added to `|t| < 2^51` (keys are below `2^39`), it leaves `t` rounded to an
/// integer in the float's low bits.
const ROUNDER: f64 = 6_755_399_441_055_744.0;

/// The key of `2^e·(1 + f/2^52)` under schema `s`.
#[inline(always)]
fn schema_index(e: i64, f: u64, s: i8) -> i64 {
    if s >= 0 {
        let cell = SCHEMA_CELLS[s as usize][(f >> 43) as usize];
        let j = (cell >> 52) as i64 + (f > cell & MANTISSA) as i64;
        (e << s) + j
    } else {
        ((e - (f == 0) as i64) >> (-s) as u32) + 1
    }
}

/// `⌊2^(i/2^s)⌋` in floats: the largest float at or below the bound (`f64::MAX` past it,
/// and 0 below the subnormals).
fn schema_bound(i: i64, s: i8) -> f64 {
    if s >= 0 {
        let q = i >> s;
        let r = (i - (q << s)) as usize;
        let m = f64::from_bits(ONE_BITS | SUB_BOUNDS[r << (8 - s as u32)]);
        scale(m, q)
    } else {
        scale(1.0, i.saturating_mul(1 << (-s) as u32))
    }
}

/// `v·2^e` for `v` in `[1, 2)`: `f64::MAX` when it overflows, rounded (to 0) below the
/// subnormals.
fn scale(v: f64, e: i64) -> f64 {
    if e > 1023 {
        f64::MAX
    } else if e >= -1022 {
        v * f64::from_bits(((e + 1023) as u64) << 52)
    } else if e >= -1022 - 60 {
        v * f64::from_bits(((e + 1023 + 60) as u64) << 52) * f64::from_bits((1023 - 60) << 52)
    } else {
        0.0
    }
}

/// `L⁻¹(t)`: the `x` with `e + P(s) = t`.
fn cubic_inverse(t: f64) -> f64 {
    let e = t.floor();
    let f = t - e;
    // P is increasing and concave on [0, 1] with P(s) ≥ s: from s = f Newton's steps fall
    // below the root once and then climb to it.
    let mut s = f;
    for _ in 0..6 {
        let p = ((A * s + B) * s + C) * s - f;
        let dp = (3.0 * A * s + 2.0 * B) * s + C;
        s = (s - p / dp).clamp(0.0, 1.0);
    }
    scale(1.0 + s, e as i64)
}

/// `⌊2^(k/256)·2^52⌋ − 2^52` for `k` in `0..256`: schema 8's sub-bucket bounds as mantissas
/// (computed by exact integer roots; a test checks each against `M^256 ≤ 2^(k + 52·256) <
/// (M + 1)^256`).
pub(crate) const SUB_BOUNDS: [u64; 256] = [
    0x0000000000000,
    0x00b1afa5abcbe,
    0x0163da9fb3335,
    0x02168143b0280,
    0x02c9a3e778060,
    0x037d42e11bbcc,
    0x04315e86e7f84,
    0x04e5f72f654b1,
    0x059b0d3158574,
    0x0650a0e3c1f88,
    0x0706b29ddf6dd,
    0x07bd42b72a836,
    0x0874518759bc8,
    0x092bdf66607df,
    0x09e3ecac6f383,
    0x0a9c79b1f3919,
    0x0b5586cf9890f,
    0x0c0f145e46c85,
    0x0cc922b7247f7,
    0x0d83b23395deb,
    0x0e3ec32d3d1a2,
    0x0efa55fdfa9c4,
    0x0fb66affed31a,
    0x1073028d7233e,
    0x11301d0125b50,
    0x11edbab5e2ab5,
    0x12abdc06c31cb,
    0x136a814f204aa,
    0x1429aaea92ddf,
    0x14e95934f312d,
    0x15a98c8a58e51,
    0x166a45471c3c2,
    0x172b83c7d517a,
    0x17ed48695bbc0,
    0x18af9388c8de9,
    0x1972658375d2f,
    0x1a35beb6fcb75,
    0x1af99f8138a1c,
    0x1bbe084045cd3,
    0x1c82f95281c6b,
    0x1d4873168b9aa,
    0x1e0e75eb44026,
    0x1ed5022fcd91c,
    0x1f9c18438ce4c,
    0x2063b88628cd6,
    0x212be3578a819,
    0x21f49917ddc96,
    0x22bdda27912d1,
    0x2387a6e756238,
    0x2451ffb82140a,
    0x251ce4fb2a63f,
    0x25e85711ece75,
    0x26b4565e27cdd,
    0x2780e341ddf29,
    0x284dfe1f56380,
    0x291ba7591bb6f,
    0x29e9df51fdee1,
    0x2ab8a66d10f12,
    0x2b87fd0dad98f,
    0x2c57e39771b2e,
    0x2d285a6e4030b,
    0x2df961f641589,
    0x2ecafa93e2f56,
    0x2f9d24abd886a,
    0x306fe0a31b715,
    0x31432edeeb2fd,
    0x32170fc4cd831,
    0x32eb83ba8ea31,
    0x33c08b26416ff,
    0x3496266e3fa2c,
    0x356c55f929ff0,
    0x36431a2de883a,
    0x371a7373aa9ca,
    0x37f26231e7549,
    0x38cae6d05d865,
    0x39a401b7140ee,
    0x3a7db34e59ff6,
    0x3b57fbfec6cf4,
    0x3c32dc313a8e4,
    0x3d0e544ede173,
    0x3dea64c123422,
    0x3ec70df1c5174,
    0x3fa4504ac801b,
    0x40822c367a024,
    0x4160a21f72e29,
    0x423fb27094689,
    0x431f5d950a896,
    0x43ffa3f84b9d4,
    0x44e086061892d,
    0x45c2042a7d231,
    0x46a41ed1d0057,
    0x4786d668b3236,
    0x486a2b5c13cd0,
    0x494e1e192aed1,
    0x4a32af0d7d3de,
    0x4b17dea6db7d6,
    0x4bfdad5362a27,
    0x4ce41b817c114,
    0x4dcb299fddd0d,
    0x4eb2d81d8abfe,
    0x4f9b2769d2ca6,
    0x508417f4531ee,
    0x516daa2cf6641,
    0x5257de83f4eee,
    0x5342b569d4f81,
    0x542e2f4f6ad27,
    0x551a4ca5d920e,
    0x56070dde910d1,
    0x56f4736b527da,
    0x57e27dbe2c4ce,
    0x58d12d497c7fd,
    0x59c0827ff07cb,
    0x5ab07dd485429,
    0x5ba11fba87a02,
    0x5c9268a5946b7,
    0x5d84590998b92,
    0x5e76f15ad2148,
    0x5f6a320dceb70,
    0x605e1b976dc08,
    0x6152ae6cdf6f4,
    0x6247eb03a5584,
    0x633dd1d1929fd,
    0x6434634ccc31f,
    0x652b9febc8fb6,
    0x6623882552224,
    0x671c1c70833f5,
    0x68155d44ca973,
    0x690f4b19e9538,
    0x6a09e667f3bcc,
    0x6b052fa75173e,
    0x6c012750bdabe,
    0x6cfdcddd47645,
    0x6dfb23c651a2e,
    0x6ef9298593ae4,
    0x6ff7df9519483,
    0x70f7466f42e87,
    0x71f75e8ec5f73,
    0x72f8286ead089,
    0x73f9a48a58173,
    0x74fbd35d7cbfd,
    0x75feb564267c8,
    0x77024b1ab6e09,
    0x780694fde5d3f,
    0x790b938ac1cf6,
    0x7a11473eb0186,
    0x7b17b0976cfda,
    0x7c1ed0130c132,
    0x7d26a62ff86f0,
    0x7e2f336cf4e62,
    0x7f3878491c490,
    0x80427543e1a11,
    0x814d2add106d9,
    0x82589994cce12,
    0x8364c1eb941f7,
    0x8471a4623c7ac,
    0x857f4179f5b20,
    0x868d99b4492ec,
    0x879cad931a436,
    0x88ac7d98a6699,
    0x89bd0a478580f,
    0x8ace5422aa0db,
    0x8be05bad61778,
    0x8cf3216b5448b,
    0x8e06a5e0866d8,
    0x8f1ae99157736,
    0x902fed0282c8a,
    0x9145b0b91ffc5,
    0x925c353aa2fe1,
    0x93737b0cdc5e4,
    0x948b82b5f98e4,
    0x95a44cbc8520e,
    0x96bdd9a7670b2,
    0x97d829fde4e4f,
    0x98f33e47a22a2,
    0x9a0f170ca07b9,
    0x9b2bb4d53fe0c,
    0x9c49182a3f090,
    0x9d674194bb8d4,
    0x9e86319e32323,
    0x9fa5e8d07f29d,
    0xa0c667b5de564,
    0xa1e7aed8eb8bb,
    0xa309bec4a2d33,
    0xa42c980460ad7,
    0xa5503b23e255c,
    0xa674a8af46052,
    0xa799e1330b358,
    0xa8bfe53c12e58,
    0xa9e6b5579fdbf,
    0xab0e521356eba,
    0xac36bbfd3f379,
    0xad5ff3a3c2774,
    0xae89f995ad3ad,
    0xafb4ce622f2fe,
    0xb0e07298db665,
    0xb20ce6c9a8952,
    0xb33a2b84f15fa,
    0xb468415b749b0,
    0xb59728de55939,
    0xb6c6e29f1c52a,
    0xb7f76f2fb5e46,
    0xb928cf22749e3,
    0xba5b030a10649,
    0xbb8e0b79a6f1e,
    0xbcc1e904bc1d2,
    0xbdf69c3f3a206,
    0xbf2c25bd71e08,
    0xc06286141b33c,
    0xc199bdd85529c,
    0xc2d1cd9fa652b,
    0xc40ab5fffd07a,
    0xc544778fafb22,
    0xc67f12e57d14b,
    0xc7ba88988c932,
    0xc8f6d9406e7b5,
    0xca3405751c4da,
    0xcb720dcef9069,
    0xccb0f2e6d1674,
    0xcdf0b555dc3f9,
    0xcf3155b5bab73,
    0xd072d4a07897b,
    0xd1b532b08c968,
    0xd2f87080d89f1,
    0xd43c8eacaa1d6,
    0xd5818dcfba487,
    0xd6c76e862e6d3,
    0xd80e316c98397,
    0xd955d71ff6075,
    0xda9e603db3285,
    0xdbe7cd63a8314,
    0xdd321f301b460,
    0xde7d5641c0657,
    0xdfc97337b9b5e,
    0xe11676b197d16,
    0xe264614f5a128,
    0xe3b333b16ee11,
    0xe502ee78b3ff6,
    0xe653924676d75,
    0xe7a51fbc74c83,
    0xe8f7977cdb73f,
    0xea4afa2a490d9,
    0xeb9f4867cca6e,
    0xecf482d8e67f0,
    0xee4aaa2188510,
    0xefa1bee615a27,
    0xf0f9c1cb64129,
    0xf252b376bba97,
    0xf3ac948dd7273,
    0xf50765b6e4540,
    0xf6632798844f8,
    0xf7bfdad9cbe13,
    0xf91d802243c88,
    0xfa7c1819e90d8,
    0xfbdba3692d513,
    0xfd3c22b8f71f1,
    0xfe9d96b2a23d9,
];

/// For each schema `s` in `0..=8` and each of the 512 cells of the mantissa's top nine bits:
/// how many of the schema's bounds (every `2^(8−s)`-th of [`SUB_BOUNDS`]) lie below the cell's
/// start, in the top 12 bits, and the mantissa of the one bound inside the cell in the low 52
/// (`2^52 − 1`, above every mantissa, when there is none). A cell is narrower than the gap
/// between two bounds (`2^43 < 2^52·(2^(1/256) − 1)`), so at most one lies in it, and a
/// key is one load and one comparison.
static SCHEMA_CELLS: [[u64; 512]; 9] = {
    let mut t = [[0u64; 512]; 9];
    let mut s = 0;
    while s <= 8 {
        let step = 1 << (8 - s);
        let mut cell = 0;
        let mut k = 0; // the schema's bounds below the cell's start
        while cell < 512 {
            let start = (cell as u64) << 43;
            while k < (1 << s) && SUB_BOUNDS[k * step] < start {
                k += 1;
            }
            let inside = if k < (1 << s) && SUB_BOUNDS[k * step] < start + (1 << 43) {
                SUB_BOUNDS[k * step]
            } else {
                MANTISSA
            };
            t[s][cell] = (k as u64) << 52 | inside;
            cell += 1;
        }
        s += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_pcg::Pcg64;

    /// `m^(2^squarings)` as little-endian 32-bit limbs.
    fn power(m: u64, squarings: u32) -> Vec<u32> {
        let mut x = vec![m as u32, (m >> 32) as u32];
        for _ in 0..squarings {
            let mut out = vec![0u64; 2 * x.len() + 1];
            for (i, &a) in x.iter().enumerate() {
                let mut carry = 0u64;
                for (j, &b) in x.iter().enumerate() {
                    let t = out[i + j] + a as u64 * b as u64 + carry;
                    out[i + j] = t & 0xffff_ffff;
                    carry = t >> 32;
                }
                let mut k = i + x.len();
                while carry > 0 {
                    let t = out[k] + carry;
                    out[k] = t & 0xffff_ffff;
                    carry = t >> 32;
                    k += 1;
                }
            }
            x = out.into_iter().map(|v| v as u32).collect();
            while x.len() > 1 && *x.last().unwrap() == 0 {
                x.pop();
            }
        }
        x
    }

    /// Whether the number is at most `2^e`.
    fn at_most_pow2(x: &[u32], e: u64) -> bool {
        let top = x.iter().rposition(|&l| l != 0).unwrap();
        let bits = 32 * top as u64 + (32 - x[top].leading_zeros()) as u64;
        let pow2 = x[..top].iter().all(|&l| l == 0) && x[top].is_power_of_two();
        bits <= e || (bits == e + 1 && pow2)
    }

    #[test]
    fn sub_bounds_are_the_exact_floors() {
        // M = ⌊2^(k/256)·2^52⌋ ⇔ M^256 ≤ 2^(k + 52·256) < (M + 1)^256.
        for (k, &f) in SUB_BOUNDS.iter().enumerate() {
            let m = (1u64 << 52) + f;
            let e = k as u64 + 52 * 256;
            assert!(at_most_pow2(&power(m, 8), e), "bound {k} too high");
            assert!(!at_most_pow2(&power(m + 1, 8), e), "bound {k} too low");
        }
    }

    #[test]
    fn cell_tables_count_the_bounds_below_every_mantissa() {
        for w in SUB_BOUNDS.windows(2) {
            assert!(w[1] - w[0] > 1 << 43);
        }
        let mut rng = Pcg64::seed_from_u64(3);
        for s in 0..=8usize {
            let bounds: Vec<u64> = (0..1 << s).map(|k| SUB_BOUNDS[k << (8 - s)]).collect();
            let probes = bounds
                .iter()
                .flat_map(|&b| [b.saturating_sub(1), b, b + 1])
                .chain((0..2_000).map(|_| rng.random::<u64>() & MANTISSA))
                .chain([0, MANTISSA]);
            for f in probes {
                let cell = SCHEMA_CELLS[s][(f >> 43) as usize];
                let j = (cell >> 52) as usize + (f > cell & MANTISSA) as usize;
                assert_eq!(
                    j,
                    bounds.iter().filter(|&&b| b < f).count(),
                    "s {s}, f {f:#x}"
                );
            }
        }
    }

    #[test]
    fn schema_keys_of_powers_of_two_and_their_neighbours() {
        for s in MIN_SCHEMA..=MAX_SCHEMA {
            let m = Mapping::schema(s).unwrap();
            for e in -1022..=1023i64 {
                let x = f64::from_bits(((e + 1023) as u64) << 52);
                // 2^e = γ^i exactly when e·2^s = i (s ≥ 0), or e a multiple of 2^−s.
                let expected = if s >= 0 {
                    e << s
                } else {
                    (e as f64 / (1i64 << -s) as f64).ceil() as i64
                };
                assert_eq!(m.index(x), expected, "2^{e} at schema {s}");
                if e < 1023 {
                    // Just above 2^e: the next bin when 2^e is a bound, else the same.
                    let above = f64::from_bits(x.to_bits() + 1);
                    let next = if s >= 0 {
                        expected + 1
                    } else {
                        e.div_euclid(1 << -s) + 1
                    };
                    assert_eq!(m.index(above), next, "above 2^{e} at schema {s}");
                }
            }
        }
    }

    #[test]
    fn every_schema_bound_is_the_float_at_its_key_and_the_next_float_the_next_key() {
        for s in MIN_SCHEMA..=MAX_SCHEMA {
            let m = Mapping::schema(s).unwrap();
            let per_octave = if s >= 0 { 1i64 << s } else { 1 };
            for i in (-3 * per_octave)..(3 * per_octave) {
                let (_, hi) = m.bounds(i);
                assert_eq!(m.index(hi), i, "schema {s} key {i}");
                let next = f64::from_bits(hi.to_bits() + 1);
                assert_eq!(m.index(next), i + 1, "schema {s} past key {i}");
                let exact = 2f64.powf(i as f64 * 2f64.powi(-(s as i32)));
                assert!(
                    (hi - exact).abs() <= 2.0 * f64::EPSILON * exact,
                    "{hi} {exact}"
                );
            }
            assert_eq!(m.bounds(m.max_key()).1, f64::MAX);
            assert_eq!(m.bounds(m.min_key()).0, MIN_INDEXABLE);
        }
    }

    fn random_value(rng: &mut Pcg64) -> f64 {
        // Every normal exponent, every mantissa.
        let e: u64 = rng.random_range(1..2047);
        f64::from_bits(e << 52 | (rng.random::<u64>() & MANTISSA))
    }

    #[test]
    fn values_lie_in_their_bins_and_representatives_are_within_alpha() {
        let mut rng = Pcg64::seed_from_u64(5);
        let mappings = [0.01, 0.001, 0.05, 0.5, 1e-9, 0.999]
            .map(|a| Mapping::cubic(a).unwrap())
            .into_iter()
            .chain((MIN_SCHEMA..=MAX_SCHEMA).map(|s| Mapping::schema(s).unwrap()));
        for m in mappings {
            for _ in 0..20_000 {
                let x = random_value(&mut rng);
                let key = m.index(x);
                let (lo, hi) = m.bounds(key);
                assert!(
                    lo <= x && x <= hi,
                    "{m}: {x} outside [{lo}, {hi}] of key {key}"
                );
                let y = m.representative(key);
                assert!((y - x).abs() <= m.alpha() * x, "{m}: {y} for {x}");
            }
        }
    }

    #[test]
    fn cubic_bins_are_at_most_gamma_and_keys_increase() {
        for alpha in [0.01, 0.02, 0.001, 0.3] {
            let m = Mapping::cubic(alpha).unwrap();
            let gamma = (1.0 + alpha) / (1.0 - alpha);
            let mut widest: f64 = 0.0;
            for key in (m.min_key() + 1).max(-2_000)..m.max_key().min(2_000) {
                let lo = cubic_inverse((key - 1) as f64 / m_of(&m));
                let hi = cubic_inverse(key as f64 / m_of(&m));
                widest = widest.max(hi / lo);
                assert!(hi / lo <= gamma, "key {key}: {}", hi / lo);
            }
            // The widest bins are nearly γ: the mapping wastes little.
            assert!(widest > gamma.powf(0.98), "{widest} vs {gamma}");
            let mut rng = Pcg64::seed_from_u64(9);
            let mut xs: Vec<f64> = (0..10_000).map(|_| rng.random_range(1e-3..1e3)).collect();
            xs.sort_by(f64::total_cmp);
            assert!(xs.windows(2).all(|w| m.index(w[0]) <= m.index(w[1])));
        }
    }

    fn m_of(m: &Mapping) -> f64 {
        match m.kind {
            Kind::Cubic { multiplier, .. } => multiplier,
            Kind::Schema { .. } => unreachable!(),
        }
    }

    #[test]
    fn parameters_out_of_their_domain_are_refused_by_name() {
        for a in [0.0, 1.0, -0.1, f64::NAN, 1e-10, f64::INFINITY] {
            assert_eq!(Mapping::cubic(a).unwrap_err().name, "alpha");
        }
        for s in [-5, 9, i8::MIN, i8::MAX] {
            assert_eq!(Mapping::schema(s).unwrap_err().name, "schema");
        }
        assert!((Mapping::schema(5).unwrap().alpha() - 0.010_830).abs() < 1e-6);
    }
}
