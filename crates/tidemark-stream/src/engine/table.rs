//! The keys of a metric held in memory: their states side by side in one vector, found by an
//! index from key to position. Keeping the states contiguous (rather than each in its own
//! allocation) keeps an event's probe within few memory pages: the states of twenty thousand
//! keys span a few megabytes, not the whole heap.

use super::key::{FastMap, Key};
use super::KeyState;

/// A map from key to [`KeyState`], with the states in one vector. A removal moves the last
/// state into the hole, so the vector has none.
#[derive(Default)]
pub(super) struct KeyTable {
    /// Key → position in `states`.
    index: FastMap<Key, usize>,
    states: Vec<(Key, KeyState)>,
}

impl KeyTable {
    /// Bytes a key costs in the table: its index entry (with the index's spare capacity at
    /// its load factor) and its place in the vector.
    pub(super) const KEY_BYTES: usize =
        (std::mem::size_of::<(Key, usize)>() + 1) * 8 / 7 + std::mem::size_of::<(Key, KeyState)>();

    pub(super) fn len(&self) -> usize {
        self.states.len()
    }

    pub(super) fn contains_key(&self, key: &[u8]) -> bool {
        self.index.contains_key(key)
    }

    /// The key's state, made by `make` if the key is not in the table; whether it was made.
    #[inline]
    pub(super) fn get_or_insert_with(
        &mut self,
        key: &[u8],
        make: impl FnOnce() -> KeyState,
    ) -> (&mut KeyState, bool) {
        let (i, made) = match self.index.get(key) {
            Some(&i) => (i, false),
            None => {
                self.states.push((Key::new(key), make()));
                self.index.insert(Key::new(key), self.states.len() - 1);
                (self.states.len() - 1, true)
            }
        };
        (&mut self.states[i].1, made)
    }

    /// Inserts a key's state (replacing the one it had).
    pub(super) fn insert(&mut self, key: Key, ks: KeyState) {
        match self.index.get(key.as_bytes()) {
            Some(&i) => self.states[i].1 = ks,
            None => {
                self.index.insert(key.clone(), self.states.len());
                self.states.push((key, ks));
            }
        }
    }

    pub(super) fn remove(&mut self, key: &[u8]) -> Option<KeyState> {
        let i = self.index.remove(key)?;
        let (_, ks) = self.states.swap_remove(i);
        // The last state moved into the hole: its index follows it.
        if let Some((moved, _)) = self.states.get(i) {
            if let Some(at) = self.index.get_mut(moved.as_bytes()) {
                *at = i;
            }
        }
        Some(ks)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&Key, &KeyState)> {
        self.states.iter().map(|(k, ks)| (k, ks))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&Key, &mut KeyState)> {
        self.states.iter_mut().map(|(k, ks)| (&*k, ks))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &KeyState> {
        self.states.iter().map(|(_, ks)| ks)
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut KeyState> {
        self.states.iter_mut().map(|(_, ks)| ks)
    }

    /// Bytes held beyond the keys' own ([`KeyTable::KEY_BYTES`] each): the spare capacity of
    /// the index and of the vector.
    pub(super) fn spare_bytes(&self) -> usize {
        let index = self.index.capacity().saturating_sub(self.index.len())
            * (std::mem::size_of::<(Key, usize)>() + 1);
        let states =
            (self.states.capacity() - self.states.len()) * std::mem::size_of::<(Key, KeyState)>();
        index + states
    }

    /// Gives spare capacity back (after many keys left).
    pub(super) fn compact(&mut self) {
        self.states.shrink_to_fit();
        self.index.shrink_to_fit();
    }
}
