//! The engine's state rows read back from a store: [`StoreRows`], the [`StateSource`] a run,
//! a restore and `tidemark check` use.

use super::{apply, ReadTxn, StoreError, Visit};
use crate::config::Config;
use crate::engine::{StateSource, StateTable};

/// Reads a config's state rows and closed buckets from a store's view (see
/// [`super::Store::view`]: what the last checkpoint wrote).
pub struct StoreRows<'a> {
    store: &'a dyn ReadTxn,
    names: std::borrow::Cow<'a, TableNames>,
}

/// Per metric: the table names of its key rows, open rows and closed buckets.
#[derive(Clone, Debug)]
pub struct TableNames(Vec<[String; 3]>);

impl TableNames {
    /// The names of `config`'s state tables.
    pub fn of(config: &Config) -> TableNames {
        TableNames(
            config
                .metrics
                .iter()
                .map(|m| {
                    [
                        StateTable::Key.name(&m.name),
                        StateTable::Open.name(&m.name),
                        m.name.clone(),
                    ]
                })
                .collect(),
        )
    }
}

impl<'a> StoreRows<'a> {
    /// Rows of `config`'s metrics in `store`.
    pub fn new(store: &'a dyn ReadTxn, config: &Config) -> StoreRows<'a> {
        StoreRows {
            store,
            names: std::borrow::Cow::Owned(TableNames::of(config)),
        }
    }

    /// Rows in `store` under names already built (cheap: for one event).
    pub fn with(store: &'a dyn ReadTxn, names: &'a TableNames) -> StoreRows<'a> {
        StoreRows {
            store,
            names: std::borrow::Cow::Borrowed(names),
        }
    }
}

impl StateSource for StoreRows<'_> {
    fn row(
        &mut self,
        table: StateTable,
        metric: usize,
        start: u64,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let names = &self.names.0[metric];
        let name = match table {
            StateTable::Key => &names[0],
            StateTable::Open => &names[1],
            StateTable::Closed => &names[2],
            // The index is the store's to sweep, never read back.
            StateTable::Expiry => return Ok(None),
        };
        self.store.get(name, start, key)
    }

    fn keys(
        &mut self,
        table: StateTable,
        metric: usize,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreError> {
        let names = &self.names.0[metric];
        let name = match table {
            StateTable::Key => &names[0],
            StateTable::Open => &names[1],
            StateTable::Closed => &names[2],
            StateTable::Expiry => return Ok(()),
        };
        self.store.scan(name, from, to, &mut |key, _, _| visit(key))
    }

    fn scan(
        &mut self,
        metric: usize,
        from: u64,
        to: u64,
        visit: &mut Visit<'_>,
    ) -> Result<(), StoreError> {
        apply::scan_verified(self.store, &self.names.0[metric][2], from, to, visit)
    }
}
