//! One command being run: its arguments, its keys, the server's clock and defaults, and how
//! it will replicate.

use super::keyspace::{Keyspace, Lookup, Plain};
use super::{Held, Value};
use crate::args::{show, Args, Time};
use crate::env::Env;
use crate::error::CmdError;
use crate::reply::Replicate;

/// What a command's function works with.
pub struct Call<'a, 'k> {
    /// Its arguments, after the name.
    pub args: Args<'a>,
    /// Its keys.
    pub keys: KeyAccess<'k>,
    /// The server's clock and defaults.
    pub env: Env,
    /// How it replicates (nothing until it says).
    pub rep: Replicate,
}

impl Call<'_, '_> {
    /// The command's name.
    pub fn name(&self) -> &'static str {
        self.args.cmd()
    }

    /// Replicates the command as the client sent it, with a `*` time at argument 2 resolved
    /// to `t`.
    pub fn replicate_time(&mut self, time: Time, t: u64) {
        self.rep = match time {
            Time::Now => Replicate::WithTime { pos: 2, time: t },
            Time::Clock(_) | Time::At(_) => Replicate::Verbatim,
        };
    }
}

/// The keyspace as one command reaches it: typed, with errors that name the command.
pub struct KeyAccess<'k> {
    ks: &'k mut dyn Keyspace,
    cmd: &'static str,
}

impl<'k> KeyAccess<'k> {
    /// The keyspace for command `cmd`.
    pub fn new(ks: &'k mut dyn Keyspace, cmd: &'static str) -> Self {
        KeyAccess { ks, cmd }
    }

    /// The key's TM value, of any type, to read (`write`: to change, and the key is reported
    /// written: its `WATCH`es abort, its keyspace event fires).
    pub fn any(&mut self, key: &[u8], write: bool) -> Result<&mut Value, CmdError> {
        let cmd = self.cmd;
        match self.ks.lookup(key, write) {
            Lookup::Found(v) => Ok(v),
            Lookup::Missing => Err(CmdError::NoSuchKey {
                cmd,
                key: show(key),
            }),
            Lookup::Foreign => Err(CmdError::WrongType {
                cmd,
                key: show(key),
                holds: None,
            }),
        }
    }

    fn typed<T: Held>(&mut self, key: &[u8], write: bool) -> Result<&mut T, CmdError> {
        let cmd = self.cmd;
        let v = self.any(key, write)?;
        let holds = v.type_name();
        T::peel(v).ok_or_else(|| CmdError::WrongType {
            cmd,
            key: show(key),
            holds: Some(holds),
        })
    }

    /// The key's value as `T`, to read (a ring's cache may still change).
    pub fn read<T: Held>(&mut self, key: &[u8]) -> Result<&mut T, CmdError> {
        self.typed(key, false)
    }

    /// The key's value as `T`, to change: the key is reported written.
    pub fn write<T: Held>(&mut self, key: &[u8]) -> Result<&mut T, CmdError> {
        self.typed(key, true)
    }

    /// Checks that `key` is free for a `CREATE`.
    pub fn vacant(&mut self, key: &[u8]) -> Result<(), CmdError> {
        let cmd = self.cmd;
        match self.ks.lookup(key, false) {
            Lookup::Missing => Ok(()),
            Lookup::Found(_) => Err(CmdError::KeyExists {
                cmd,
                key: show(key),
            }),
            Lookup::Foreign => Err(CmdError::WrongType {
                cmd,
                key: show(key),
                holds: None,
            }),
        }
    }

    /// Whether `key` holds something that is not a TM value.
    pub fn is_foreign(&mut self, key: &[u8]) -> bool {
        matches!(self.ks.lookup(key, false), Lookup::Foreign)
    }

    /// Sets the key to a value (the key is missing or holds a TM value).
    pub fn store(&mut self, key: &[u8], value: Value) {
        self.ks.store(key, value);
    }

    /// Sets the key to a plain string; `false` if it holds another type.
    pub fn store_string(&mut self, key: &[u8], bytes: Vec<u8>) -> bool {
        self.ks.store_string(key, bytes)
    }

    /// What a key that may hold a plain string holds.
    pub fn plain(&mut self, key: &[u8]) -> Plain {
        self.ks.plain(key)
    }
}
