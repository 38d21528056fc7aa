//! tidemark as a Redis module: `TM.*` commands over native types that Redis persists,
//! replicates and shards.
//!
//! Two layers:
//!
//! - [`command`]: pure. An argument vector is parsed into a typed command, executed on a
//!   [`command::Keyspace`] and answered with a [`command::Reply`]. Everything a user can send
//!   is validated here, and it is tested without Redis (unit tests against exact models, a
//!   property test of random argument vectors that must never panic).
//! - `module` (the cdylib): the shim over the `redis-module` crate. It turns Redis's arguments
//!   into byte slices, runs the command layer on Redis's keyspace, renders the reply in RESP2
//!   or RESP3, replicates writes (with `*` resolved to the server's clock), and registers the
//!   type's callbacks: RDB save/load, AOF rewrite through `TM.LOAD`, memory usage, free, copy.
//!
//! [`value`] holds the four types (count, distinct, freq, filter), their limits and their
//! bytes. `docs/redis.md` at the repository root is the user's guide.

pub mod command;
pub mod value;

mod module;
