//! The keys of a metric held in memory: their states side by side in one vector, found by an
//! index of positions. Keeping the states contiguous (rather than each in its own allocation)
//! keeps an event's probe within few memory pages: the states of twenty thousand keys span a
//! few megabytes, not the whole heap. The index holds positions only (8 bytes an entry, 160 KB
//! for twenty thousand keys, within a core's cache) and compares a key against the state's own
//! copy of it, so finding a key touches the index and the state it reads next anyway, not a
//! third place holding the key again.

use hashbrown::HashTable;

use super::key::Key;
use super::KeyState;

/// The hash of a key's bytes in the index.
#[inline]
fn hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// A map from key to [`KeyState`], with the states in one vector. A removal moves the last
/// state into the hole, so the vector has none.
#[derive(Default)]
pub(super) struct KeyTable {
    /// Positions in `states`, by the hash of their key.
    index: HashTable<usize>,
    states: Vec<(Key, KeyState)>,
}

impl KeyTable {
    /// Bytes a key costs in the table: its index entry (with the index's spare capacity at
    /// its load factor, and its control byte) and its place in the vector.
    pub(super) const KEY_BYTES: usize =
        (std::mem::size_of::<usize>() + 1) * 8 / 7 + std::mem::size_of::<(Key, KeyState)>();

    pub(super) fn len(&self) -> usize {
        self.states.len()
    }

    /// The position of `key`'s state.
    #[inline]
    fn position(&self, h: u64, key: &[u8]) -> Option<usize> {
        let states = &self.states;
        self.index
            .find(h, |&i| states[i].0.as_bytes() == key)
            .copied()
    }

    /// The position the index gives first for `key`'s hash: the key's, unless another
    /// key's index entry shares its control bits. It reads the index alone, not the states
    /// (the first of a batch's lookups; see [`super::batch`]).
    #[inline]
    pub(super) fn candidate(&self, key: &[u8]) -> Option<usize> {
        self.index.find(hash(key), |_| true).copied()
    }

    /// The state at position `i`, if it is `key`'s.
    #[inline]
    pub(super) fn state_at(&self, i: usize, key: &[u8]) -> Option<&KeyState> {
        self.states
            .get(i)
            .filter(|(k, _)| k.as_bytes() == key)
            .map(|(_, ks)| ks)
    }

    pub(super) fn contains_key(&self, key: &[u8]) -> bool {
        self.position(hash(key), key).is_some()
    }

    /// The key's state, made by `make` if the key is not in the table; whether it was made.
    #[inline]
    pub(super) fn get_or_insert_with(
        &mut self,
        key: &[u8],
        make: impl FnOnce() -> KeyState,
    ) -> (&mut KeyState, bool) {
        let h = hash(key);
        let (i, made) = match self.position(h, key) {
            Some(i) => (i, false),
            None => (self.push(h, Key::new(key), make()), true),
        };
        (&mut self.states[i].1, made)
    }

    /// The state at position `i` (a position [`KeyTable::state_at`] found).
    #[inline]
    pub(super) fn state(&self, i: usize) -> &KeyState {
        &self.states[i].1
    }

    /// [`KeyTable::get_or_insert_with`], given `key`'s position if known (`at`, from
    /// [`KeyTable::state_at`] since the table last lost a key).
    #[inline]
    pub(super) fn get_or_insert_at(
        &mut self,
        key: &[u8],
        at: Option<usize>,
        make: impl FnOnce() -> KeyState,
    ) -> (&mut KeyState, bool) {
        match at {
            Some(i) => {
                debug_assert!(self.states[i].0.as_bytes() == key, "a stale position");
                (&mut self.states[i].1, false)
            }
            None => self.get_or_insert_with(key, make),
        }
    }

    /// Appends a key known not to be in the table; its position.
    fn push(&mut self, h: u64, key: Key, ks: KeyState) -> usize {
        let i = self.states.len();
        self.states.push((key, ks));
        let states = &self.states;
        self.index
            .insert_unique(h, i, |&j| hash(states[j].0.as_bytes()));
        i
    }

    /// Inserts a key's state (replacing the one it had).
    pub(super) fn insert(&mut self, key: Key, ks: KeyState) {
        let h = hash(key.as_bytes());
        match self.position(h, key.as_bytes()) {
            Some(i) => self.states[i].1 = ks,
            None => {
                self.push(h, key, ks);
            }
        }
    }

    pub(super) fn remove(&mut self, key: &[u8]) -> Option<KeyState> {
        let states = &self.states;
        let entry = self
            .index
            .find_entry(hash(key), |&i| states[i].0.as_bytes() == key)
            .ok()?;
        let (i, _) = entry.remove();
        let last = self.states.len() - 1;
        let (_, ks) = self.states.swap_remove(i);
        // The last state moved into the hole: its index entry follows it.
        if i != last {
            let moved = hash(self.states[i].0.as_bytes());
            if let Some(at) = self.index.find_mut(moved, |&j| j == last) {
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

    /// The keys and their states, in the table's order (a close splits them between threads).
    pub(super) fn states_mut(&mut self) -> &mut [(Key, KeyState)] {
        &mut self.states
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
            * (std::mem::size_of::<usize>() + 1);
        let states =
            (self.states.capacity() - self.states.len()) * std::mem::size_of::<(Key, KeyState)>();
        index + states
    }

    /// Gives spare capacity back (after many keys left).
    pub(super) fn compact(&mut self) {
        self.states.shrink_to_fit();
        let states = &self.states;
        self.index.shrink_to_fit(|&j| hash(states[j].0.as_bytes()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn seen_keys(table: &KeyTable) -> Vec<(Vec<u8>, u64)> {
        table
            .iter()
            .map(|(k, ks)| (k.as_bytes().to_vec(), ks.early_end))
            .collect()
    }

    proptest! {
        /// Against a map: inserts, lookups and removals (which move the last state into the
        /// hole) keep every key's state and nothing else.
        #[test]
        fn the_table_is_a_map(ops in proptest::collection::vec((0u8..3, 0u16..40), 0..400)) {
            let mut table = KeyTable::default();
            let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
            for (n, (op, k)) in ops.into_iter().enumerate() {
                let key = format!("key-{k}").into_bytes();
                match op {
                    0 => {
                        let (ks, made) = table.get_or_insert_with(&key, || KeyState::new(0));
                        prop_assert_eq!(made, !model.contains_key(&key));
                        if made {
                            ks.early_end = n as u64;
                            model.insert(key, n as u64);
                        }
                        prop_assert_eq!(ks.early_end, model[&format!("key-{k}").into_bytes()]);
                    }
                    1 => {
                        let got = table.remove(&key).map(|ks| ks.early_end);
                        prop_assert_eq!(got, model.remove(&key));
                    }
                    _ => prop_assert_eq!(table.contains_key(&key), model.contains_key(&key)),
                }
                prop_assert_eq!(table.len(), model.len());
            }
            let mut seen = seen_keys(&table);
            seen.sort();
            prop_assert_eq!(seen, model.into_iter().collect::<Vec<_>>());
            table.compact();
            prop_assert_eq!(table.iter().count(), table.len());
            for (k, _) in seen_keys(&table) {
                prop_assert!(table.contains_key(&k), "found after compacting");
            }
        }
    }
}
