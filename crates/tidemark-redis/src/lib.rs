//! tidemark as a Redis module: windowed counters, distinct counts, frequencies, quantiles and
//! filters as native types that Redis persists, replicates and shards, under one-dot command
//! names every client routes (`TMCOUNT.ADD`, `TMDISTINCT.COUNT`, `TMQUANTILE.QUANTILE`, …).
//!
//! Layers, each using only those below it:
//!
//! - `module` (the cdylib), on top: the shim over the `redis-module` crate. It runs the command layer
//!   on Redis's keyspace, renders replies in RESP2 or RESP3, replicates writes (with `*`
//!   resolved to the server's clock), documents every command for `COMMAND DOCS`, reports
//!   `INFO tidemark`, and registers the type's callbacks: RDB save/load, AOF rewrite through
//!   `TM.LOAD`, digest, memory usage, free, copy.
//! - [`command`]: pure. An argument vector runs as the command its name picks from the one
//!   command list ([`command::COMMANDS`]) on a [`types::Keyspace`] and is answered with a
//!   [`reply::Reply`]. Everything a user can send is validated here, and it is tested
//!   without Redis (unit tests against exact models, a property test of random argument
//!   vectors that must never panic).
//! - [`types`]: the value types a key holds, a file each with its commands, limits and bytes,
//!   and what those commands are written against: [`types::Call`] (a command's arguments and
//!   keys) and [`types::Spec`] (a command as the module registers it).
//! - [`error`], [`args`], [`reply`], [`env`](mod@env), [`limits`]: what knows no value type — a
//!   refused command, argument parsing, replies and replication, the server's clock and
//!   defaults, the bounds every key is held to.
//!
//! `docs/redis.md` at the repository root is the user's guide.

pub mod args;
pub mod command;
pub mod env;
pub mod error;
pub mod limits;
pub mod reply;
pub mod types;

mod module;
