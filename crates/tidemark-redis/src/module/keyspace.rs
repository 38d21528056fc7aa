//! Redis's keyspace as the command layer sees it. Keys stay open until the command ends; a
//! key named by an argument is opened through that argument's string (no copy), and a key
//! opened once is reused.

use std::collections::HashMap;

use redis_module::key::RedisKeyWritable;
use redis_module::{raw, Context, KeyType, RedisString};

use super::stats::Held;
use super::TM_TYPE;
use crate::types::Value;
use crate::types::{Keyspace, Lookup, Plain};

/// One open key.
struct OpenKey {
    /// The key's bytes (address, length): how an argument's key is found again.
    at: (*const u8, usize),
    handle: RedisKeyWritable,
    /// Its name as a Redis string (an argument, or one of `owned`).
    name: *mut raw::RedisModuleString,
    /// Reported written by the command (a lookup to change it, a store).
    written: bool,
    /// Given a new value by `store` (counted as it entered, not by the command's net
    /// allocation).
    stored: bool,
}

/// The keyspace of one command.
pub struct RedisKeyspace<'c> {
    ctx: &'c Context,
    args: &'c [*mut raw::RedisModuleString],
    /// The same arguments' bytes (a key is found among them by address, without asking Redis
    /// for each argument's bytes again).
    argv: &'c [&'c [u8]],
    // Most commands open one key: it stays inline, found by its bytes' address. Further ones
    // go to `more`, found by their bytes (a command of many keys may name one many times).
    first: Option<OpenKey>,
    more: Vec<OpenKey>,
    // Made at the first of `more` only: a command of one key (every fast write) pays nothing
    // for them (two maps' random seeds cost a call each).
    many: Option<Box<ManyKeys>>,
    // Names made for keys that are not an argument as such, alive until the command ends.
    owned: Vec<RedisString>,
}

/// The maps of a command that opens several keys: `more`'s entries by the key's bytes (a
/// command of many keys may name one many times), and the arguments' positions by their
/// bytes' address. With both, a command of n keys opens them in O(n), not O(n²).
struct ManyKeys {
    by_name: HashMap<Vec<u8>, usize>,
    arg_at: HashMap<(*const u8, usize), usize>,
}

impl<'c> RedisKeyspace<'c> {
    /// The keyspace for a command with these arguments (Redis's strings and their bytes).
    pub fn new(
        ctx: &'c Context,
        args: &'c [*mut raw::RedisModuleString],
        argv: &'c [&'c [u8]],
    ) -> Self {
        RedisKeyspace {
            ctx,
            args,
            argv,
            first: None,
            more: Vec::new(),
            many: None,
            owned: Vec::new(),
        }
    }

    fn open(&mut self, key: &[u8]) -> &mut OpenKey {
        let at = (key.as_ptr(), key.len());
        let i = if self.first.as_ref().is_some_and(|e| e.at == at) {
            None
        } else if self.first.is_none() {
            // The first key: its argument found by address, once.
            let arg = self
                .argv
                .iter()
                .zip(self.args)
                .find(|(a, _)| (a.as_ptr(), a.len()) == at)
                .map(|(_, &arg)| arg);
            self.first = Some(self.handle(at, key, arg));
            None
        } else if let Some(&i) = self.many.as_ref().and_then(|m| m.by_name.get(key)) {
            Some(i)
        } else {
            let argv = self.argv;
            let many = self.many.get_or_insert_with(|| {
                Box::new(ManyKeys {
                    by_name: HashMap::new(),
                    arg_at: argv
                        .iter()
                        .enumerate()
                        .map(|(i, a)| ((a.as_ptr(), a.len()), i))
                        .collect(),
                })
            });
            let arg = many.arg_at.get(&at).map(|&i| self.args[i]);
            let open = self.handle(at, key, arg);
            self.more.push(open);
            let i = self.more.len() - 1;
            if let Some(m) = self.many.as_mut() {
                m.by_name.insert(key.to_vec(), i);
            }
            Some(i)
        };
        match i {
            Some(i) => &mut self.more[i],
            None => self.first.as_mut().unwrap_or_else(|| {
                unreachable!("the first key is opened just above when none was")
            }),
        }
    }

    /// A handle on `key` and its name as a Redis string: the argument `arg` itself when the
    /// key is one (a reference count, no copy), else a string made for it.
    fn handle(
        &mut self,
        at: (*const u8, usize),
        key: &[u8],
        arg: Option<*mut raw::RedisModuleString>,
    ) -> OpenKey {
        let (handle, name) = match arg {
            Some(arg) => {
                let name = RedisString::new(None, arg);
                (self.ctx.open_key_writable(&name), arg)
            }
            None => {
                let name = RedisString::create_from_slice(self.ctx.ctx, key);
                let handle = self.ctx.open_key_writable(&name);
                let inner = name.inner;
                self.owned.push(name);
                (handle, inner)
            }
        };
        OpenKey {
            at,
            handle,
            name,
            written: false,
            stored: false,
        }
    }

    fn open_keys(&self) -> impl Iterator<Item = &OpenKey> {
        self.first.iter().chain(&self.more)
    }

    /// Tells Redis the keys a write changed (WATCH, client-side caching): the module asks
    /// Redis not to do it on its own, which it would for every key opened for writing, reads
    /// and a command's other keys included. Each also gets a keyspace notification of class
    /// `d` (module) named `event`, for `notify-keyspace-events` subscribers.
    pub fn signal_written(&self, event: &std::ffi::CStr) {
        for k in self.open_keys().filter(|k| k.written) {
            // SAFETY: set by `RedisModule_Init`; `name` is an argument of this call or a
            // string in `owned`, both alive; `event` is NUL-terminated.
            unsafe {
                if let Some(f) = raw::RedisModule_SignalModifiedKey {
                    f(self.ctx.ctx, k.name);
                }
                if let Some(f) = raw::RedisModule_NotifyKeyspaceEvent {
                    f(
                        self.ctx.ctx,
                        raw::REDISMODULE_NOTIFY_MODULE,
                        event.as_ptr(),
                        k.name,
                    );
                }
            }
        }
    }

    /// Moves the bytes counted for the one TM value a command changed in place by what the
    /// command allocated net (`delta`). A value a command stored was counted as it entered;
    /// a command that changed several keys in place (none does) is not split between them.
    pub fn count_growth(&mut self, delta: i64) {
        if delta == 0 {
            return;
        }
        let mut changed = self.open_keys().filter(|k| k.written && !k.stored);
        if let (Some(k), None) = (changed.next(), changed.next()) {
            if let Ok(Some(held)) = k.handle.get_value::<Held>(&TM_TYPE) {
                held.grew(delta);
            }
        }
    }
}

impl Keyspace for RedisKeyspace<'_> {
    fn lookup(&mut self, key: &[u8], write: bool) -> Lookup<'_> {
        let k = self.open(key);
        match k.handle.get_value::<Held>(&TM_TYPE) {
            Ok(Some(held)) => {
                k.written |= write;
                Lookup::Found(&mut held.value)
            }
            Ok(None) => Lookup::Missing,
            Err(_) => Lookup::Foreign,
        }
    }

    fn store(&mut self, key: &[u8], value: Value) {
        let k = self.open(key);
        k.written = true;
        k.stored = true;
        // The command layer stores only on a missing key or one of this type.
        let _ = k.handle.set_value(&TM_TYPE, Held::new(value));
    }

    fn plain(&mut self, key: &[u8]) -> Plain {
        let ctx = self.ctx;
        let k = self.open(key);
        match k.handle.key_type() {
            KeyType::Empty => Plain::Missing,
            KeyType::String => {
                // Read through a second, read-only handle (the writable one's string access
                // would unshare the string to write it).
                let name = RedisString::new(None, k.name);
                let reader = ctx.open_key(&name);
                match reader.read() {
                    Ok(Some(bytes)) => Plain::Str(bytes.to_vec()),
                    Ok(None) => Plain::Missing,
                    Err(_) => Plain::Other,
                }
            }
            _ => Plain::Other,
        }
    }

    fn store_string(&mut self, key: &[u8], bytes: Vec<u8>) -> bool {
        let k = self.open(key);
        if !matches!(k.handle.key_type(), KeyType::Empty | KeyType::String) {
            return false;
        }
        let ok = match k.handle.as_string_dma() {
            Ok(mut dma) => dma.write(&bytes).is_ok(),
            Err(_) => false,
        };
        k.written |= ok;
        ok
    }
}
