//! Keys in the engine's tables: a fast hasher and a key held inline when short.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A fast hasher for byte-string keys: xxh3 over each write.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.0 = xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.0);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<KeyHasher>>;

const INLINE_KEY: usize = 22;

/// A key's bytes, held inline when short (an IP address, a user id) so that finding a key in
/// a bucket's table does not chase a pointer per event. Hashes, compares and orders exactly as
/// its bytes do, so tables are looked up by `&[u8]`.
#[derive(Clone)]
pub(crate) enum Key {
    Inline { len: u8, bytes: [u8; INLINE_KEY] },
    Heap(Box<[u8]>),
}

impl Key {
    #[inline]
    pub(crate) fn new(b: &[u8]) -> Key {
        if b.len() <= INLINE_KEY {
            let mut bytes = [0u8; INLINE_KEY];
            bytes[..b.len()].copy_from_slice(b);
            Key::Inline {
                len: b.len() as u8,
                bytes,
            }
        } else {
            Key::Heap(b.into())
        }
    }

    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            Key::Inline { len, bytes } => &bytes[..*len as usize],
            Key::Heap(b) => b,
        }
    }
}

impl std::borrow::Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state)
    }
}
