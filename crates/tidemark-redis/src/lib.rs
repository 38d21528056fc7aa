//! tidemark as a Redis module: windowed counters, distinct counts, frequencies, quantiles and
//! filters as native types that Redis persists, replicates and shards, under one-dot command
//! names every client routes (`TMCOUNT.ADD`, `TMDISTINCT.COUNT`, `TMQUANTILE.QUANTILE`, …).
//!
//! Three layers:
//!
//! - [`command`]: pure. An argument vector runs as the command its name picks from the one
//!   command list ([`command::COMMANDS`]) on a [`command::Keyspace`] and is answered with a
//!   [`command::Reply`]. Everything a user can send is validated here, and it is tested
//!   without Redis (unit tests against exact models, a property test of random argument
//!   vectors that must never panic).
//! - [`types`]: the value types a key holds, a file each with its commands, limits and bytes.
//! - `module` (the cdylib): the shim over the `redis-module` crate. It runs the command layer
//!   on Redis's keyspace, renders replies in RESP2 or RESP3, replicates writes (with `*`
//!   resolved to the server's clock), documents every command for `COMMAND DOCS`, reports
//!   `INFO tidemark`, and registers the type's callbacks: RDB save/load, AOF rewrite through
//!   `TM.LOAD`, digest, memory usage, free, copy.
//!
//! `docs/redis.md` at the repository root is the user's guide.

pub mod command;
pub mod types;

mod module;
