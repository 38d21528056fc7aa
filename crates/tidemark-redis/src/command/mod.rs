//! The command layer: an argument vector runs as the command its name picks from
//! [`COMMANDS`] (which reads every argument, then acts on a [`Keyspace`]) and is answered with
//! a [`Reply`] — pure, and tested without Redis. Any server can put it behind a protocol; the
//! Redis module is one.
//!
//! # Decisions the commands share
//!
//! - **Missing keys.** Only `CREATE` and `TM.LOAD` make a key. Every other command on a
//!   missing key is an error (`ERR TMCOUNT.ADD: no such key 'k'; create it with
//!   TMCOUNT.CREATE`): a window, a precision or a capacity chosen silently by an `ADD` would
//!   be a wrong answer nobody asked for. `CREATE` on an existing key is an error too. A
//!   parameter a `CREATE` is not given is the server's default ([`Defaults`](crate::env::Defaults), set when the
//!   module loads), and the `CREATE` replicates with every parameter written out, so a replica
//!   loaded with other defaults builds the same value.
//! - **Times.** Milliseconds since the epoch; `*` is the server's clock, but never earlier
//!   than the key's latest time, so a clock stepping back a little never makes an `ADD` fail.
//!   In Redis a command filter stamps a write's `*` as `*<ms>` ([`Time::Clock`](crate::args::Time::Clock): that clock,
//!   never earlier than the key's latest time) before the command runs, so the write
//!   replicates as it stands and a replica or a replay, holding the same state, resolves the
//!   same time. A plain `*` that reaches the command layer replicates with the time resolved
//!   ([`Replicate::WithTime`]).
//! - **Order.** A counter's events come in time order (an explicit time before the latest is
//!   refused); ring values take a late event into its own bucket while the ring holds it.
//! - **Answers.** `[estimate, low, high]` as doubles (RESP3 doubles, RESP2 bulk strings, as
//!   `ZSCORE` answers); what the bracket promises is in `TM.INFO`.
//! - **Errors.** `ERR <COMMAND>: …` naming the argument and quoting what was given;
//!   `WRONGTYPE …` for a key of another type (another TM type included).
//!
//! ```
//! use tidemark_redis::command::{run, MemKeyspace};
//! use tidemark_redis::env::Env;
//! use tidemark_redis::reply::Reply;
//!
//! let mut ks = MemKeyspace::default();
//! let env = Env::at(1_000);
//! let argv = |s: &str| s.split(' ').map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
//! run(&mut ks, env, &argv("TMCOUNT.CREATE limiter WINDOW 60000")).reply.unwrap();
//! for t in 0..5u64 {
//!     run(&mut ks, env, &argv(&format!("TMCOUNT.ADD limiter {t}"))).reply.unwrap();
//! }
//! let got = run(&mut ks, env, &argv("TMCOUNT.GET limiter")).reply.unwrap();
//! assert_eq!(got, Reply::estimate(5.0, 5.0, 5.0));
//! ```

mod generic;
mod keyspace;
mod options;
mod table;
pub mod usage;

pub use keyspace::{MemKeyspace, Slot};
pub use options::ModuleOptions;
pub use table::{command_index, is_name, key_positions, key_positions_as, COMMANDS};

use crate::args::{show, Args};
use crate::env::Env;
use crate::error::CmdError;
use crate::reply::{Replicate, Reply};
use crate::types::{Call, KeyAccess, Keyspace};

/// A reply (or error) and how the command replicates.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// What the client gets.
    pub reply: Result<Reply, CmdError>,
    /// What replicas and the AOF get.
    pub replicate: Replicate,
}

/// Runs one argument vector (`argv[0]` the command's name, any case).
pub fn run(ks: &mut dyn Keyspace, env: Env, argv: &[Vec<u8>]) -> Outcome {
    let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    run_refs(ks, env, &refs)
}

/// [`run`] over borrowed arguments.
pub fn run_refs(ks: &mut dyn Keyspace, env: Env, argv: &[&[u8]]) -> Outcome {
    let name = argv.first().copied().unwrap_or(b"");
    match command_index(name) {
        Some(index) => run_as(ks, env, index, argv),
        None => Outcome {
            reply: Err(CmdError::UnknownCommand { name: show(name) }),
            replicate: Replicate::Nothing,
        },
    }
}

/// [`run_refs`] for the command at `index` in [`COMMANDS`], whatever `argv[0]` says: Redis
/// calls each registered command's own function, which knows its command. The command reads
/// every argument before it changes anything, so a refused command changes nothing (but a
/// filter that fills midway through its items, which keeps what it added and replicates it).
pub fn run_as(ks: &mut dyn Keyspace, env: Env, index: usize, argv: &[&[u8]]) -> Outcome {
    let Some(spec) = COMMANDS.get(index) else {
        return Outcome {
            reply: Err(CmdError::UnknownCommand {
                name: format!("#{index}"),
            }),
            replicate: Replicate::Nothing,
        };
    };
    let mut call = Call {
        args: Args::new(spec.name, argv),
        keys: KeyAccess::new(ks, spec.name),
        env,
        rep: Replicate::Nothing,
    };
    let reply = (spec.run)(&mut call);
    Outcome {
        reply,
        replicate: call.rep,
    }
}
