//! Membership: resizable quotient filters, their stacks, their rebuild.
//!
//! References: M. A. Bender et al., *Don't Thrash: How to Cache Your Hash on Flash*, PVLDB
//! 5(11), 2012 (the quotient filter); P. Pandey, M. A. Bender, R. Johnson, R. Patro, *A
//! General-Purpose Counting Filter: Making Every Bit Count*, SIGMOD 2017; N. Dayan, I. Bercea,
//! P. Reviriego, R. Pagh, *InfiniFilter: Expanding Filters to Infinity and Beyond*, SIGMOD
//! 2023 (growth by moving a remainder bit to the quotient; fingerprints per generation).
//!
//! # The quotient filter (Bender, Farach-Colton, Johnson, et al. 2012)
//!
//! An item's 64-bit hash gives a fingerprint `f` of `p` bits (its top `p` bits). The table
//! has `2^q` slots; the fingerprint's top `q` bits are its *quotient* (its home slot) and the
//! other `r = p − q` bits its *remainder*, the only part stored. Fingerprints with one
//! quotient sit in a *run* of consecutive slots, kept sorted; runs of neighbouring quotients
//! abut in a *cluster*, and a run pushed out of its home slot by an earlier run is *shifted*
//! right, linear-probing style. Three metadata bits a slot make the layout decodable:
//!
//! - `is_occupied` (slot `i`): some fingerprint has quotient `i` (a property of the quotient,
//!   not of what the slot holds);
//! - `is_continuation`: the slot holds a remainder that is not its run's first;
//! - `is_shifted`: the slot's remainder is not in its home slot.
//!
//! A lookup walks back from the home slot to the cluster's start (the first unshifted slot),
//! then forward counting runs against occupied quotients until it reaches the run of its
//! quotient, and scans that run. Insert shifts the rest of the cluster right by one; delete
//! shifts it left, re-deriving each moved run head's shifted bit from its quotient. A lookup
//! is never wrong about a stored fingerprint, so there are **no false negatives**; an absent
//! item is reported present exactly when its `p`-bit fingerprint equals a stored one, with
//! probability `1 − (1 − 2^−p)^n ≈ n/2^p` for `n` stored fingerprints
//! ([`QuotientFilter::fpr`]).
//!
//! # Sizing, growth in place, and the life of a table (after Dayan et al. 2023)
//!
//! For a forecast of `n` keys at rate `ε`: `p = ⌈log2(n/ε)⌉` and `q = ⌈log2(n/λ)⌉` with load
//! factor `λ = 3/4`. A forecast of 2,000 at 1% gives `p = 18`, `q = 12`: 4,096 slots of 6-bit
//! remainders. When an insert would bring the load to λ the table **doubles in place**: every
//! fingerprint keeps its `p` bits but gives the top bit of its remainder to its quotient; the
//! new slot array is written from the old one by walking its runs in order (no keys needed).
//! Because `p` is fixed, the rate grows with the keys: it doubles with every doubling.
//!
//! The table cannot double once remainders would have zero bits: an insert that needs that
//! doubling returns [`Exhausted`], and the filter stays valid for lookups. The table's
//! **life** is `2^(p − q)` at build ([`QuotientFilter::life`]): for 2,000 at 1% that is 64,
//! and the table refuses its 98,304th key (`λ·2^17`), the doubling that would take `q` to 18.
//! A **reserve** of `b` bits raises `p` by `b`: `2^b` times the life and `2^−b` times the
//! rate, paid as `b` more bits in every slot at first and spent down one per doubling.
//!
//! Bits held are charged as the original quotient filter lays them out: `slots × (r + 3)`
//! ([`QuotientFilter::bits`]).
//!
//! # Beyond one table
//!
//! - [`StackedFilter`]: layers of quotient filters, each for `growth×` the keys at
//!   `tightening×` the rate of the one before (×2, ×½ by default). Never exhausted; a lookup
//!   consults every layer, and the rate is bounded by the geometric sum, `2ε` by default.
//! - [`QuotientFilter::rebuild`]: a new table with a fingerprint chosen for the size reached,
//!   fed from the caller's keys, reporting the keys re-read.
//! - [`LengtheningFilter`] (**experimental**, a model): InfiniFilter's idea — keys inserted
//!   after a doubling get 1 or 2 bits longer fingerprints. It buys rate but not life: the
//!   table dies on the same key as the table with no reserve, because the first generation's
//!   fingerprint is still the shortest.
//!
//! # Worked example
//!
//! ```
//! use tidemark::membership::QuotientFilter;
//!
//! let mut f = QuotientFilter::new(2_000, 0.01).unwrap();
//! assert_eq!((f.fingerprint_bits(), f.slots()), (18, 4_096));
//! assert_eq!(f.life(), 64);
//! let mut refused = None;
//! for i in 0..100_000u64 {
//!     if let Err(e) = f.insert(&i.to_le_bytes()) {
//!         refused = Some((i + 1, e));
//!         break;
//!     }
//! }
//! let (key, err) = refused.unwrap();
//! assert_eq!(key, 98_304);
//! assert_eq!(err.keys, 98_303);
//! assert_eq!(f.remaining_doublings(), 0);
//! assert!(f.contains(&7u64.to_le_bytes())); // still answers after refusing
//! ```

mod bits;
mod encoding;
mod lengthening;
mod quotient;
mod rebuild;
mod stacked;

pub use lengthening::LengtheningFilter;
pub use quotient::{Exhausted, QuotientFilter};
pub use rebuild::{RebuildError, Rebuilt};
pub use stacked::StackedFilter;
