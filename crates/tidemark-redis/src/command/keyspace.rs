//! An in-memory [`Keyspace`], for tests and other servers (the module's is Redis's).

use std::collections::HashMap;

use crate::types::{Keyspace, Lookup, Plain, Value};

/// What a [`MemKeyspace`] key holds.
#[derive(Clone, Debug)]
pub enum Slot {
    /// A TM value.
    Tm(Box<Value>),
    /// A plain string (what `TMDISTINCT.TOPF` writes).
    Str(Vec<u8>),
    /// Some other Redis type.
    Other,
}

/// An in-memory keyspace for tests and other servers.
#[derive(Clone, Debug, Default)]
pub struct MemKeyspace {
    /// The keys.
    pub keys: HashMap<Vec<u8>, Slot>,
    /// The keys commands reported written, in order (cleared by the caller).
    pub written: Vec<Vec<u8>>,
}

impl Keyspace for MemKeyspace {
    fn lookup(&mut self, key: &[u8], write: bool) -> Lookup<'_> {
        match self.keys.get_mut(key) {
            None => Lookup::Missing,
            Some(Slot::Tm(v)) => {
                if write {
                    self.written.push(key.to_vec());
                }
                Lookup::Found(v.as_mut())
            }
            Some(_) => Lookup::Foreign,
        }
    }

    fn store(&mut self, key: &[u8], value: Value) {
        self.written.push(key.to_vec());
        self.keys.insert(key.to_vec(), Slot::Tm(Box::new(value)));
    }

    fn plain(&mut self, key: &[u8]) -> Plain {
        match self.keys.get(key) {
            None => Plain::Missing,
            Some(Slot::Str(s)) => Plain::Str(s.clone()),
            Some(_) => Plain::Other,
        }
    }

    fn store_string(&mut self, key: &[u8], bytes: Vec<u8>) -> bool {
        match self.keys.get(key) {
            None | Some(Slot::Str(_)) => {
                self.written.push(key.to_vec());
                self.keys.insert(key.to_vec(), Slot::Str(bytes));
                true
            }
            Some(_) => false,
        }
    }
}
