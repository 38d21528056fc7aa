//! An in-memory store with the redb store's semantics, for tests and for users of the engine
//! who bring their own persistence.

use std::borrow::Borrow;
use std::collections::BTreeMap;

use super::{ReadTxn, Store, StoreError, Txn, Visit};

type Table = BTreeMap<(String, u64, Vec<u8>), Vec<u8>>;

/// An in-memory store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemStore {
    /// `(metric, start, key)` → bytes: the buckets.
    pub buckets: Table,
    /// What the store keeps for itself (digests), apart so that `buckets` holds only buckets.
    own: Table,
    /// Metadata.
    meta: BTreeMap<String, Vec<u8>>,
}

impl MemStore {
    fn table(&self, name: &str) -> &Table {
        if name.starts_with('#') {
            &self.own
        } else {
            &self.buckets
        }
    }

    fn table_mut(&mut self, name: &str) -> &mut Table {
        if name.starts_with('#') {
            &mut self.own
        } else {
            &mut self.buckets
        }
    }
}

/// A read view (a type of its own, so that the raw reads never shadow [`Store`]'s verified
/// ones on a `MemStore`).
struct MemView<S: Borrow<MemStore>>(S);

impl<S: Borrow<MemStore>> ReadTxn for MemView<S> {
    fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.0.borrow().meta.get(name).cloned())
    }

    fn get(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self
            .0
            .borrow()
            .table(table)
            .get(&(table.to_string(), start, key.to_vec()))
            .cloned())
    }

    fn scan(&self, table: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        if from >= to {
            return Ok(());
        }
        let lo = (table.to_string(), from, Vec::new());
        let hi = (table.to_string(), to, Vec::new());
        for ((_, s, k), v) in self.0.borrow().table(table).range(lo..hi) {
            f(k, *s, v);
        }
        Ok(())
    }

    fn page(
        &self,
        table: &str,
        start: u64,
        after: Option<&[u8]>,
        limit: usize,
        f: &mut Visit<'_>,
    ) -> Result<usize, StoreError> {
        Ok(page_of(
            self.0.borrow().table(table),
            table,
            start,
            after,
            limit,
            f,
        ))
    }

    fn next_start(&self, table: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError> {
        if from >= to {
            return Ok(None);
        }
        let lo = (table.to_string(), from, Vec::new());
        let hi = (table.to_string(), to, Vec::new());
        Ok(self
            .0
            .borrow()
            .table(table)
            .range(lo..hi)
            .next()
            .map(|((_, s, _), _)| *s))
    }
}

fn page_of(
    t: &Table,
    table: &str,
    start: u64,
    after: Option<&[u8]>,
    limit: usize,
    f: &mut Visit<'_>,
) -> usize {
    use std::ops::Bound;
    let lo = match after {
        Some(k) => Bound::Excluded((table.to_string(), start, k.to_vec())),
        None => Bound::Included((table.to_string(), start, Vec::new())),
    };
    let hi = Bound::Excluded((table.to_string(), start.saturating_add(1), Vec::new()));
    let mut n = 0;
    for ((_, s, k), v) in t.range((lo, hi)).take(limit) {
        f(k, *s, v);
        n += 1;
    }
    n
}

/// A write transaction: changes go straight into the store, with an undo log to roll them
/// back if the transaction fails.
struct MemTxn<'a> {
    store: &'a mut MemStore,
    undo: Vec<Undo>,
}

enum Undo {
    Entry((String, u64, Vec<u8>), Option<Vec<u8>>),
    Meta(String, Option<Vec<u8>>),
}

impl ReadTxn for MemTxn<'_> {
    fn meta(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        MemView(&*self.store).meta(name)
    }

    fn get(&self, table: &str, start: u64, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        MemView(&*self.store).get(table, start, key)
    }

    fn scan(&self, table: &str, from: u64, to: u64, f: &mut Visit<'_>) -> Result<(), StoreError> {
        MemView(&*self.store).scan(table, from, to, f)
    }

    fn page(
        &self,
        table: &str,
        start: u64,
        after: Option<&[u8]>,
        limit: usize,
        f: &mut Visit<'_>,
    ) -> Result<usize, StoreError> {
        MemView(&*self.store).page(table, start, after, limit, f)
    }

    fn next_start(&self, table: &str, from: u64, to: u64) -> Result<Option<u64>, StoreError> {
        MemView(&*self.store).next_start(table, from, to)
    }
}

impl Txn for MemTxn<'_> {
    fn put(
        &mut self,
        table: &str,
        start: u64,
        key: &[u8],
        bytes: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let k = (table.to_string(), start, key.to_vec());
        let old = self
            .store
            .table_mut(table)
            .insert(k.clone(), bytes.to_vec());
        self.undo.push(Undo::Entry(k, old.clone()));
        Ok(old)
    }

    fn remove(
        &mut self,
        table: &str,
        start: u64,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let k = (table.to_string(), start, key.to_vec());
        let old = self.store.table_mut(table).remove(&k);
        if old.is_some() {
            self.undo.push(Undo::Entry(k, old.clone()));
        }
        Ok(old)
    }

    fn remove_before(&mut self, table: &str, before: u64) -> Result<(), StoreError> {
        let lo = (table.to_string(), 0, Vec::new());
        let hi = (table.to_string(), before, Vec::new());
        let t = self.store.table_mut(table);
        let doomed: Vec<_> = t.range(lo..hi).map(|(k, _)| k.clone()).collect();
        for k in doomed {
            let old = t.remove(&k);
            self.undo.push(Undo::Entry(k, old));
        }
        Ok(())
    }

    fn set_meta(&mut self, name: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let old = self.store.meta.insert(name.to_string(), bytes.to_vec());
        self.undo.push(Undo::Meta(name.to_string(), old));
        Ok(())
    }
}

impl Store for MemStore {
    fn view(&self) -> Result<Box<dyn ReadTxn>, StoreError> {
        // A copy of the store as it is: later commits do not change it.
        Ok(Box::new(MemView(self.clone())))
    }

    fn read(
        &self,
        f: &mut dyn FnMut(&dyn ReadTxn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        f(&MemView(self))
    }

    fn write(
        &mut self,
        f: &mut dyn FnMut(&mut dyn Txn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut t = MemTxn {
            store: self,
            undo: Vec::new(),
        };
        let result = f(&mut t);
        if result.is_err() {
            for u in t.undo.into_iter().rev() {
                match u {
                    Undo::Entry(k, old) => {
                        let table = t.store.table_mut(&k.0);
                        match old {
                            Some(v) => table.insert(k, v),
                            None => table.remove(&k),
                        };
                    }
                    Undo::Meta(name, old) => {
                        match old {
                            Some(v) => t.store.meta.insert(name, v),
                            None => t.store.meta.remove(&name),
                        };
                    }
                }
            }
        }
        result
    }
}
