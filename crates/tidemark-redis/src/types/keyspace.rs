//! Where commands find their keys: the [`Keyspace`] trait, which Redis's keyspace implements in
//! the module and a map in tests, and what a key holds as a command sees it.

use super::Value;

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
