//! A command as the module registers it ([`Spec`]): its name, how it treats its keys, where they
//! are, whether it reads the clock, its documentation and its function. Each type's file writes
//! its commands' specs; the command list gathers them.

use super::call::Call;
use crate::error::CmdError;
use crate::reply::Reply;

/// How a command treats its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads (a ring's merge cache may change, never its answers).
    Read,
    /// Writes, and may allocate: refused under `maxmemory` (`deny-oom`).
    Write,
    /// Writes, but only frees: allowed under `maxmemory`.
    Remove,
}

/// Where a command's keys are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// Argument 1.
    First,
    /// Arguments 1 (read) and 2 (written).
    FirstTwo,
    /// Arguments 1, 2, … up to the first of these options (any case).
    UntilOption(&'static [&'static str]),
}

/// Whether a command reads the server's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Never.
    No,
    /// Argument 2 is a time: `*` is the clock, which the module's filter stamps as `*<ms>`
    /// when the command arrives (so it replicates as it stands).
    TimeArg,
    /// Always (an expiring filter forgets by the clock).
    Always,
}

/// A command's function: reads its arguments, then acts.
pub type Run = fn(&mut Call<'_, '_>) -> Result<Reply, CmdError>;

/// One command.
#[derive(Clone, Copy)]
pub struct Spec {
    /// `PREFIX.COMMAND`.
    pub name: &'static str,
    /// The name builds before 2026-12-04 used (registered with `LEGACY-NAMES`).
    pub legacy: Option<&'static str>,
    /// How it treats its keys.
    pub access: Access,
    /// Whether Redis may call it fast (O(1) or O(log n), no allocation beyond its key).
    pub fast: bool,
    /// Where its keys are.
    pub keys: Keys,
    /// Whether it reads the clock.
    pub clock: Clock,
    /// Its arguments after the name ([`crate::command::usage`]).
    pub usage: &'static str,
    /// One line for `COMMAND DOCS`.
    pub summary: &'static str,
    /// Its cost, for `COMMAND DOCS`.
    pub complexity: &'static str,
    /// What it does.
    pub run: Run,
}

impl core::fmt::Debug for Spec {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Spec").field("name", &self.name).finish()
    }
}

impl Spec {
    /// Whether it writes.
    pub fn writes(&self) -> bool {
        self.access != Access::Read
    }

    /// The flags `RedisModule_CreateCommand` takes.
    pub fn flags(&self) -> String {
        let mut f = vec![match self.access {
            Access::Read => "readonly",
            Access::Write => "write deny-oom",
            Access::Remove => "write",
        }];
        if self.fast {
            f.push("fast");
        }
        // A command whose keys are found by reading its arguments tells Redis through the
        // get-keys API; the others' keys are fixed positions, which clients read from `COMMAND`
        // without asking the server again for each call.
        if matches!(self.keys, Keys::UntilOption(_)) {
            f.push("getkeys-api");
        }
        f.join(" ")
    }

    /// First key, last key (`-1`: to the end) and step, as `RedisModule_CreateCommand` takes
    /// them.
    pub fn key_range(&self) -> (i32, i32, i32) {
        match self.keys {
            Keys::First => (1, 1, 1),
            Keys::FirstTwo => (1, 2, 1),
            Keys::UntilOption(_) => (1, -1, 1),
        }
    }
}
