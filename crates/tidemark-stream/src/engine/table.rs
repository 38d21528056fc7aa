//! The keys of a metric held in memory: their states side by side in one vector, found by an
//! index from key to slot. Keeping the states contiguous (rather than each in its own
//! allocation) keeps an event's probe within few memory pages: the states of twenty thousand
//! keys span a few megabytes, not the whole heap.

use super::key::{FastMap, Key};
use super::KeyState;

/// A map from key to [`KeyState`], with the states in one vector.
#[derive(Default)]
pub(super) struct KeyTable {
    /// Key → slot.
    index: FastMap<Key, u32>,
    /// The states; `None` in a slot freed and not yet reused.
    slots: Vec<Option<(Key, KeyState)>>,
    /// Freed slots.
    free: Vec<u32>,
}

impl KeyTable {
    /// Bytes a key costs in the table: its index entry (with the index's spare capacity at
    /// its load factor) and its slot.
    pub(super) const KEY_BYTES: usize = (std::mem::size_of::<(Key, u32)>() + 1) * 8 / 7
        + std::mem::size_of::<Option<(Key, KeyState)>>();

    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    pub(super) fn contains_key(&self, key: &[u8]) -> bool {
        self.index.contains_key(key)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, key: &[u8]) -> Option<&mut KeyState> {
        let &i = self.index.get(key)?;
        self.slots[i as usize].as_mut().map(|(_, ks)| ks)
    }

    /// Inserts a key not in the table (one that is replaces its state).
    pub(super) fn insert(&mut self, key: Key, ks: KeyState) {
        if let Some(&i) = self.index.get(key.as_bytes()) {
            self.slots[i as usize] = Some((key, ks));
            return;
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 keys in memory")
            }
        };
        self.slots[i as usize] = Some((key.clone(), ks));
        self.index.insert(key, i);
    }

    pub(super) fn remove(&mut self, key: &[u8]) -> Option<KeyState> {
        let i = self.index.remove(key)?;
        self.free.push(i);
        self.slots[i as usize].take().map(|(_, ks)| ks)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&Key, &KeyState)> {
        self.slots.iter().flatten().map(|(k, ks)| (k, ks))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&Key, &mut KeyState)> {
        self.slots.iter_mut().flatten().map(|(k, ks)| (&*k, ks))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &KeyState> {
        self.iter().map(|(_, ks)| ks)
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut KeyState> {
        self.iter_mut().map(|(_, ks)| ks)
    }

    /// Bytes held beyond the keys' own ([`KeyTable::KEY_BYTES`] each): spare capacity of
    /// the index and of the slots, and freed slots.
    pub(super) fn spare_bytes(&self) -> usize {
        let index = self.index.capacity().saturating_sub(self.index.len())
            * (std::mem::size_of::<(Key, u32)>() + 1);
        let slots = (self.slots.capacity() - self.index.len())
            * std::mem::size_of::<Option<(Key, KeyState)>>();
        index + slots
    }

    /// Closes the holes freed slots left and gives spare capacity back (after many keys left).
    pub(super) fn compact(&mut self) {
        if self.free.is_empty() && self.slots.capacity() == self.slots.len() {
            return;
        }
        let live: Vec<(Key, KeyState)> = self.slots.drain(..).flatten().collect();
        self.free = Vec::new();
        self.index = FastMap::default();
        self.index.reserve(live.len());
        let mut slots = Vec::with_capacity(live.len());
        for (i, (k, ks)) in live.into_iter().enumerate() {
            self.index.insert(k.clone(), i as u32);
            slots.push(Some((k, ks)));
        }
        self.slots = slots;
    }
}
