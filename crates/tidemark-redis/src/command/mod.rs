//! The command layer: an argument vector is parsed into a typed [`Command`], executed on a
//! [`Keyspace`] and answered with a [`Reply`] — pure, and tested without Redis.
//!
//! # Decisions the commands share
//!
//! - **Missing keys.** Only `CREATE` and `TM.LOAD` make a key. Every other command on a
//!   missing key is an error (`ERR TM.COUNT.ADD: no such key 'k'; create it with
//!   TM.COUNT.CREATE`): a window, a precision or a capacity chosen silently by an `ADD` would
//!   be a wrong answer nobody asked for. `CREATE` on an existing key is an error too.
//! - **Times.** Milliseconds since the epoch; `*` is the server's clock, but never earlier
//!   than the key's latest time, so a clock stepping back a little never makes an `ADD` fail.
//!   In Redis a command filter stamps a write's `*` as `*<ms>` ([`Time::Clock`]: that clock,
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
//! use tidemark_redis::command::{run, Env, MemKeyspace, Reply};
//!
//! let mut ks = MemKeyspace::default();
//! let env = Env { now_ms: 1_000 };
//! let argv = |s: &str| s.split(' ').map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
//! run(&mut ks, env, &argv("TM.COUNT.CREATE limiter WINDOW 60000")).reply.unwrap();
//! for t in 0..5u64 {
//!     run(&mut ks, env, &argv(&format!("TM.COUNT.ADD limiter {t}"))).reply.unwrap();
//! }
//! let got = run(&mut ks, env, &argv("TM.COUNT.GET limiter")).reply.unwrap();
//! assert_eq!(got, Reply::estimate(5.0, 5.0, 5.0));
//! ```

mod args;
mod exec;
mod keyspace;
mod parse;

pub use args::{parse_u64, show, Args, Time};
pub use exec::execute;
pub use keyspace::{Keyspace, Lookup, MemKeyspace, Slot};
pub use parse::{
    command_index, is_name, key_positions, key_positions_as, parse, Command, DistinctShape,
    COMMANDS,
};

use core::fmt;

/// What the server supplies that the arguments do not: its clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Env {
    /// The server's clock, ms since the epoch (`*`).
    pub now_ms: u64,
}

/// A reply, before it becomes RESP.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// `+OK`.
    Ok,
    /// An integer.
    Integer(i64),
    /// A double (RESP3 `,`; RESP2 a bulk string).
    Double(f64),
    /// A bulk string.
    Bulk(Vec<u8>),
    /// `[estimate, low, high]`: an array of three doubles.
    Estimate([f64; 3]),
    /// An array.
    Array(Vec<Reply>),
    /// A map (RESP3 `%`; RESP2 a flat array of field, value, …), in this order.
    Map(Vec<(&'static str, Reply)>),
    /// Null.
    Null,
}

impl Reply {
    /// `[estimate, low, high]`.
    pub fn estimate(value: f64, low: f64, high: f64) -> Reply {
        Reply::Estimate([value, low, high])
    }

    /// A bulk string from text.
    pub fn text(s: impl Into<String>) -> Reply {
        Reply::Bulk(s.into().into_bytes())
    }
}

impl From<tidemark::Estimate> for Reply {
    fn from(e: tidemark::Estimate) -> Reply {
        Reply::estimate(e.value, e.low, e.high)
    }
}

/// How a write goes to replicas and the AOF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Replicate {
    /// Not at all: a read, or a write that changed nothing.
    Nothing,
    /// As the client sent it.
    Verbatim,
    /// As the client sent it, but with argument `pos` (a `*` time) replaced by `time`.
    WithTime {
        /// The argument's position in the vector (0: the command's name).
        pos: usize,
        /// The resolved time, ms.
        time: u64,
    },
    /// As this argument vector (the clock resolved).
    Rewritten(Vec<Vec<u8>>),
}

/// A reply (or error) and how the command replicates.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// What the client gets.
    pub reply: Result<Reply, CmdError>,
    /// What replicas and the AOF get.
    pub replicate: Replicate,
}

/// Parses and executes one argument vector (`argv[0]` the command's name).
pub fn run(ks: &mut dyn Keyspace, env: Env, argv: &[Vec<u8>]) -> Outcome {
    let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    run_refs(ks, env, &refs)
}

/// [`run`] over borrowed arguments.
pub fn run_refs(ks: &mut dyn Keyspace, env: Env, argv: &[&[u8]]) -> Outcome {
    finish(ks, env, parse(argv))
}

/// [`run_refs`] for the command at `index` in [`COMMANDS`], whatever `argv[0]` says
/// ([`parse::parse_as`]).
pub fn run_as(ks: &mut dyn Keyspace, env: Env, index: usize, argv: &[&[u8]]) -> Outcome {
    finish(ks, env, parse::parse_as(index, argv))
}

fn finish(ks: &mut dyn Keyspace, env: Env, parsed: Result<Command<'_>, CmdError>) -> Outcome {
    match parsed {
        Ok(cmd) => execute(ks, env, &cmd),
        Err(e) => Outcome {
            reply: Err(e),
            replicate: Replicate::Nothing,
        },
    }
}

/// A command refused, in Redis's error style: the first word is the error code.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CmdError {
    /// Not a TM command.
    UnknownCommand {
        /// The name given.
        name: String,
    },
    /// Too few (or too many) arguments.
    Arity {
        /// The command.
        cmd: &'static str,
    },
    /// An argument of the wrong form.
    BadArg {
        /// The command.
        cmd: &'static str,
        /// The argument's name.
        arg: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it was.
        got: String,
    },
    /// An argument that is no option of the command.
    Syntax {
        /// The command.
        cmd: &'static str,
        /// The argument.
        got: String,
    },
    /// A parameter refused with an explanation (a combination, a size).
    Param {
        /// The command.
        cmd: &'static str,
        /// Why.
        msg: String,
    },
    /// The key does not exist.
    NoSuchKey {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
    },
    /// `CREATE` on a key that exists.
    KeyExists {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
    },
    /// The key holds another type.
    WrongType {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
        /// What it holds (`None`: not a TM type).
        holds: Option<&'static str>,
    },
    /// A destination that holds another type than the string the command writes.
    NotAString {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
    },
    /// A time the key cannot take.
    Time {
        /// The command.
        cmd: &'static str,
        /// Why.
        msg: String,
    },
    /// An in-place filter that cannot grow any further.
    Full {
        /// The command.
        cmd: &'static str,
        /// The key.
        key: String,
        /// Items added before it filled.
        added: usize,
    },
    /// `TM.LOAD` bytes refused.
    Load {
        /// The command.
        cmd: &'static str,
        /// Why.
        msg: String,
    },
}

/// An error line as Redis can carry it: ASCII only (Redis's module API sends error text
/// byte by byte, and clients refuse invalid UTF-8), no line breaks. The core's messages use a
/// few mathematical signs; they are spelled out.
pub fn ascii(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\r' | '\n' => out.push(' '),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            'ε' => out.push_str("epsilon"),
            'δ' => out.push_str("delta"),
            'φ' => out.push_str("phi"),
            'σ' => out.push_str("sigma"),
            'λ' => out.push_str("lambda"),
            '≤' => out.push_str("<="),
            '≥' => out.push_str(">="),
            '≠' => out.push_str("!="),
            '−' => out.push('-'),
            '×' | '·' => out.push('*'),
            '…' => out.push_str("..."),
            '⌈' => out.push_str("ceil("),
            '⌉' => out.push(')'),
            '√' => out.push_str("sqrt"),
            '–' | '—' => out.push('-'),
            _ => out.push('?'),
        }
    }
    out
}

impl fmt::Display for CmdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        self.write_raw(&mut s)?;
        f.write_str(&ascii(&s))
    }
}

impl CmdError {
    fn write_raw(&self, f: &mut String) -> fmt::Result {
        use fmt::Write;
        match self {
            CmdError::UnknownCommand { name } => write!(f, "ERR unknown command '{name}'"),
            CmdError::Arity { cmd } => {
                write!(f, "ERR wrong number of arguments for '{}' command", cmd.to_ascii_lowercase())
            }
            CmdError::BadArg { cmd, arg, expected, got } => {
                write!(f, "ERR {cmd}: {arg} must be {expected}, got '{got}'")
            }
            CmdError::Syntax { cmd, got } => write!(f, "ERR {cmd}: syntax error at '{got}'"),
            CmdError::Param { cmd, msg } => write!(f, "ERR {cmd}: {msg}"),
            CmdError::NoSuchKey { cmd, key } => match cmd.rsplit_once('.') {
                Some((ty, _)) if ty != "TM" => {
                    write!(f, "ERR {cmd}: no such key '{key}'; create it with {ty}.CREATE")
                }
                _ => write!(f, "ERR {cmd}: no such key '{key}'"),
            },
            CmdError::KeyExists { cmd, key } => write!(f, "ERR {cmd}: key '{key}' already exists"),
            CmdError::NotAString { cmd, key } => write!(
                f,
                "WRONGTYPE {cmd}: key '{key}' holds another type than a string, which this \
                 command writes there"
            ),
            CmdError::WrongType { cmd, key, holds } => match holds {
                Some(t) => write!(
                    f,
                    "WRONGTYPE {cmd}: key '{key}' holds a TM {t} value, which this command does not take"
                ),
                None => write!(
                    f,
                    "WRONGTYPE {cmd}: key '{key}' holds a value that is not a tidemark type"
                ),
            },
            CmdError::Time { cmd, msg } => write!(f, "ERR {cmd}: {msg}"),
            CmdError::Full { cmd, key, added } => write!(
                f,
                "ERR {cmd}: filter '{key}' is full after {added} new item(s) of this call and cannot double again; create it with RESERVE bits or STACKED"
            ),
            CmdError::Load { cmd, msg } => write!(f, "ERR {cmd}: bytes refused: {msg}"),
        }
    }
}

impl std::error::Error for CmdError {}
