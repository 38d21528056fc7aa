//! Where commands find their keys: Redis's keyspace in the module, a map in tests.

use std::collections::HashMap;

use crate::value::Value;

/// What a key holds, as a command sees it.
pub enum Lookup<'a> {
    /// Nothing.
    Missing,
    /// A value that is not a TM type.
    Foreign,
    /// A TM value.
    Found(&'a mut Value),
}

/// A keyspace the commands run against.
pub trait Keyspace {
    /// The key's value.
    fn lookup(&mut self, key: &[u8]) -> Lookup<'_>;
    /// Sets the key to a TM value (the key is missing or holds a TM value).
    fn store(&mut self, key: &[u8], value: Value);
    /// Sets the key to a plain string; `false` if it holds a value other than a string.
    fn store_string(&mut self, key: &[u8], bytes: Vec<u8>) -> bool;
}

/// What a [`MemKeyspace`] key holds.
#[derive(Clone, Debug)]
pub enum Slot {
    /// A TM value.
    Tm(Box<Value>),
    /// A plain string (what `TM.DISTINCT.TOPF` writes).
    Str(Vec<u8>),
    /// Some other Redis type.
    Other,
}

/// An in-memory keyspace for tests and other servers.
#[derive(Clone, Debug, Default)]
pub struct MemKeyspace {
    /// The keys.
    pub keys: HashMap<Vec<u8>, Slot>,
}

impl Keyspace for MemKeyspace {
    fn lookup(&mut self, key: &[u8]) -> Lookup<'_> {
        match self.keys.get_mut(key) {
            None => Lookup::Missing,
            Some(Slot::Tm(v)) => Lookup::Found(v.as_mut()),
            Some(_) => Lookup::Foreign,
        }
    }

    fn store(&mut self, key: &[u8], value: Value) {
        self.keys.insert(key.to_vec(), Slot::Tm(Box::new(value)));
    }

    fn store_string(&mut self, key: &[u8], bytes: Vec<u8>) -> bool {
        match self.keys.get(key) {
            None | Some(Slot::Str(_)) => {
                self.keys.insert(key.to_vec(), Slot::Str(bytes));
                true
            }
            Some(_) => false,
        }
    }
}
