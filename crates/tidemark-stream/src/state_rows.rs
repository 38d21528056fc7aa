//! The engine's state rows read back from a store: [`StoreRows`], the [`StateSource`] a run,
//! a restore and `tidemark check` use. It sits above both: the engine reads spilled state
//! through [`StateSource`] without knowing the store, the store keeps rows without knowing
//! the engine.

use crate::config::Config;
use crate::engine::{StateSource, StateTable};
use crate::store::{scan_verified, ReadTxn, StoreError, Visit};

/// Reads a config's state rows and closed buckets from a store's view (see
/// [`crate::store::Store::view`]: what the last checkpoint wrote).
pub struct StoreRows<'a> {
    store: &'a dyn ReadTxn,
    names: std::borrow::Cow<'a, TableNames>,
}

/// Per metric, the stored name of each of its tables ([`StateTable`]): built once a run.
#[derive(Clone, Debug)]
pub struct TableNames(Vec<[String; 4]>);

impl TableNames {
    /// The names of `config`'s metrics' tables.
    pub fn of(config: &Config) -> TableNames {
        let tables = [
            StateTable::Key,
            StateTable::Open,
            StateTable::Expiry,
            StateTable::Closed,
        ];
        TableNames(
            config
                .metrics
                .iter()
                .map(|m| tables.map(|t| t.name(&m.name)))
                .collect(),
        )
    }

    /// Metric `metric`'s `table`.
    pub fn name(&self, metric: usize, table: StateTable) -> &str {
        let names = &self.0[metric];
        match table {
            StateTable::Key => &names[0],
            StateTable::Open => &names[1],
            StateTable::Expiry => &names[2],
            StateTable::Closed => &names[3],
        }
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
        // The index is the store's to sweep, never read back.
        if table == StateTable::Expiry {
            return Ok(None);
        }
        self.store.get(self.names.name(metric, table), start, key)
    }

    fn keys(
        &mut self,
        table: StateTable,
        metric: usize,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(&[u8]),
    ) -> Result<(), StoreError> {
        if table == StateTable::Expiry {
            return Ok(());
        }
        let name = self.names.name(metric, table);
        self.store.scan(name, from, to, &mut |key, _, _| visit(key))
    }

    fn scan(
        &mut self,
        metric: usize,
        from: u64,
        to: u64,
        visit: &mut Visit<'_>,
    ) -> Result<(), StoreError> {
        let name = self.names.name(metric, StateTable::Closed);
        scan_verified(self.store, name, from, to, visit)
    }
}
