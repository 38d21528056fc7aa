//! Error enums, one per kind of operation, each variant carrying its evidence.
//!
//! - [`ParamError`]: a constructor was given a parameter outside its domain.
//! - [`MergeError`]: two summaries cannot be combined (different hashes, seeds or shapes).
//! - [`DecodeError`]: bytes are not a valid summary; says what was wrong and at which offset.
//!
//! None of them is ever a panic: a panic in tidemark means a broken internal invariant.

use core::fmt;

use crate::family::Family;
use crate::hash::ItemHasher;

/// A parameter outside its domain.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ParamError {
    /// The parameter's name, as the constructor spells it (`epsilon`, `window`, …).
    pub name: &'static str,
    /// What it must be, in words (`in (0, 1)`).
    pub expected: &'static str,
    /// What it was.
    pub got: String,
    /// When the value is in its domain but the structure it asks for cannot be allocated:
    /// the bytes it would need (the allocator refused them, or they exceed the address
    /// space). `None` for a value outside its domain.
    pub needed_bytes: Option<u64>,
}

impl ParamError {
    /// A parameter `name` that should have been `expected` but was `got`.
    pub fn new(name: &'static str, expected: &'static str, got: impl fmt::Display) -> Self {
        ParamError {
            name,
            expected,
            got: shown(got.to_string()),
            needed_bytes: None,
        }
    }

    /// A parameter `name` of value `got` whose structure needs `bytes` bytes that cannot be
    /// allocated: refused as an error, never an abort.
    pub fn unallocatable(name: &'static str, got: impl fmt::Display, bytes: u64) -> Self {
        ParamError {
            name,
            expected: "a size whose memory can be allocated",
            got: shown(got.to_string()),
            needed_bytes: Some(bytes),
        }
    }
}

/// A value as an error shows it: a number whose decimal form is long (`1e-300` displays as
/// 300 digits) in exponent form instead.
fn shown(got: String) -> String {
    match got.parse::<f64>() {
        Ok(v) if got.len() > 24 => format!("{v:e}"),
        _ => got,
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(bytes) = self.needed_bytes {
            return write!(
                f,
                "invalid {}: {} needs {bytes} bytes, which cannot be allocated",
                self.name, self.got
            );
        }
        write!(
            f,
            "invalid {}: expected {}, got {}",
            self.name, self.expected, self.got
        )
    }
}

impl std::error::Error for ParamError {}

/// Two summaries that cannot be merged (or compared, or joined).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MergeError {
    /// Built with different hash functions or seeds: merging would silently give garbage.
    HashMismatch {
        /// This summary's hash.
        ours: ItemHasher,
        /// The other summary's hash.
        theirs: ItemHasher,
    },
    /// A shape parameter differs (width, depth, precision, window, …).
    Incompatible {
        /// The parameter's name.
        field: &'static str,
        /// This summary's value.
        ours: u64,
        /// The other summary's value.
        theirs: u64,
    },
}

impl MergeError {
    /// The check every merge starts with: the same hash and seed, then each named shape
    /// parameter `(name, ours, theirs)` equal. The first difference is the error.
    pub fn check(
        ours: ItemHasher,
        theirs: ItemHasher,
        fields: &[(&'static str, u64, u64)],
    ) -> Result<(), MergeError> {
        if ours != theirs {
            return Err(MergeError::HashMismatch { ours, theirs });
        }
        match fields.iter().find(|(_, a, b)| a != b) {
            Some(&(field, ours, theirs)) => Err(MergeError::Incompatible {
                field,
                ours,
                theirs,
            }),
            None => Ok(()),
        }
    }
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MergeError::HashMismatch { ours, theirs } => write!(
                f,
                "cannot merge summaries of different hashes: {} seed {:#x} and {} seed {:#x}",
                ours.id(),
                ours.seed(),
                theirs.id(),
                theirs.seed()
            ),
            MergeError::Incompatible {
                field,
                ours,
                theirs,
            } => write!(f, "cannot merge: {field} differs ({ours} and {theirs})"),
        }
    }
}

impl std::error::Error for MergeError {}

/// Bytes that are not a valid summary. Offsets are from the start of the whole encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes end before a field does.
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// How many bytes it needs.
        needed: u64,
        /// How many were left.
        available: usize,
    },
    /// The first four bytes are not `TDMK`.
    BadMagic {
        /// What they were.
        got: [u8; 4],
    },
    /// A format version this build cannot read (an older one it no longer reads, or a
    /// newer one it does not know).
    UnsupportedVersion {
        /// The stored version.
        got: u8,
        /// The newest version this build reads.
        newest: u8,
    },
    /// A family byte no version ever wrote.
    UnknownFamily {
        /// The stored byte.
        got: u8,
    },
    /// A valid summary, but of another family than the caller asked for.
    WrongFamily {
        /// The family asked for.
        expected: Family,
        /// The family stored.
        got: Family,
    },
    /// A hash id byte no version ever wrote.
    UnknownHash {
        /// The stored byte.
        got: u8,
    },
    /// The checksum over the preceding bytes does not match: the bytes were altered.
    ChecksumMismatch {
        /// The checksum stored in the bytes.
        stored: u64,
        /// The checksum of the bytes as read.
        computed: u64,
    },
    /// A field whose value is impossible for this summary.
    Invalid {
        /// The field.
        field: &'static str,
        /// Where it starts.
        offset: usize,
        /// What it must be, in words.
        expected: &'static str,
        /// What it was.
        got: u64,
    },
    /// Bytes left over after the last field.
    TrailingBytes {
        /// Where the leftover bytes start.
        offset: usize,
        /// How many there are.
        extra: usize,
    },
}

impl DecodeError {
    /// The error of an encoding nested at `base` in another, as the outer one reports it:
    /// an impossible field's offset counts from the outer encoding's start. (Other errors
    /// keep the nested envelope's own account of itself.)
    pub(crate) fn nested_at(self, base: usize) -> DecodeError {
        match self {
            DecodeError::Invalid {
                field,
                offset,
                expected,
                got,
            } => DecodeError::Invalid {
                field,
                offset: offset + base,
                expected,
                got,
            },
            e => e,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated {
                field,
                offset,
                needed,
                available,
            } => write!(
                f,
                "truncated at byte {offset}: {field} needs {needed} bytes, {available} left"
            ),
            DecodeError::BadMagic { got } => {
                write!(
                    f,
                    "not a tidemark summary: magic is {got:?}, expected b\"TDMK\""
                )
            }
            DecodeError::UnsupportedVersion { got, newest } => write!(
                f,
                "unsupported format version {got} at byte 4 (this build reads up to {newest})"
            ),
            DecodeError::UnknownFamily { got } => write!(f, "unknown family {got} at byte 5"),
            DecodeError::WrongFamily { expected, got } => {
                write!(f, "expected a {expected} summary, got a {got} summary")
            }
            DecodeError::UnknownHash { got } => write!(f, "unknown hash id {got} at byte 7"),
            DecodeError::ChecksumMismatch { stored, computed } => write!(
                f,
                "checksum mismatch: stored {stored:#018x}, computed {computed:#018x}"
            ),
            DecodeError::Invalid {
                field,
                offset,
                expected,
                got,
            } => write!(
                f,
                "invalid {field} at byte {offset}: expected {expected}, got {got}"
            ),
            DecodeError::TrailingBytes { offset, extra } => {
                write!(
                    f,
                    "{extra} unexpected bytes after the last field, at byte {offset}"
                )
            }
        }
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_numbers_show_in_exponent_form_short_ones_as_given() {
        let e = ParamError::new("epsilon", "a number in (1e-6, 1)", 1e-300_f64).to_string();
        assert!(e.ends_with("got 1e-300"), "{e}");
        let e = ParamError::new("fpr", "a number in (0, 1)", 1.5_f64).to_string();
        assert!(e.ends_with("got 1.5"), "{e}");
        let e = ParamError::new("name", "a name", "x".repeat(30)).to_string();
        assert!(e.ends_with(&"x".repeat(30)), "{e}");
    }
}
