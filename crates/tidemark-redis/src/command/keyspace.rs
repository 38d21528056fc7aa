//! Where commands find their keys: Redis's keyspace in the module, a map in tests.

use std::collections::HashMap;

use crate::types::Value;

/// What a key holds, as a command sees it.
pub enum Lookup<'a> {
    /// Nothing.
    Missing,
    /// A value that is not a TM type.
    Foreign,
    /// A TM value.
    Found(&'a mut Value),
}

/// What a key holds, as a command that writes a plain string there sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plain {
    /// Nothing.
    Missing,
    /// A plain string, these bytes.
    Str(Vec<u8>),
    /// Another type (a TM value included).
    Other,
}

/// A keyspace the commands run against.
pub trait Keyspace {
    /// The key's value; with `write`, a TM value found is reported written (the module
    /// signals it modified once the command has replicated).
    fn lookup(&mut self, key: &[u8], write: bool) -> Lookup<'_>;
    /// Sets the key to a TM value (the key is missing or holds a TM value); the key is written.
    fn store(&mut self, key: &[u8], value: Value);
    /// What the key holds, when it may be a plain string.
    fn plain(&mut self, key: &[u8]) -> Plain;
    /// Sets the key to a plain string; `false` if it holds a value other than a string.
    fn store_string(&mut self, key: &[u8], bytes: Vec<u8>) -> bool;
}

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
