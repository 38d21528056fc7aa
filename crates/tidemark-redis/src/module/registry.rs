//! The commands as Redis knows them: each registered from the command list with its flags
//! and key positions, its `COMMAND DOCS` entry (summary, complexity, arguments, key specs),
//! and a function of its own that runs it.

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use redis_module::{raw, Context, RedisString};

use super::clock::{arg_bytes, now_ms};
use super::keyspace::RedisKeyspace;
use super::reply::{has_doubles, is_resp3, reply, write_decimal};
use super::{alloc, c_text, stats};
use crate::command::usage::{self, ArgDoc, ArgType, BadUsage};
use crate::command::{key_positions_as, run_as, COMMANDS};
use crate::env::{Defaults, Env};
use crate::reply::Replicate;
use crate::types::{Clock, Keys, Spec};

type CommandFn = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// One function a command place: `command::<I>` runs the command at `I` in [`COMMANDS`]
/// without looking its name up. Room for more commands than there are (a build-time check
/// holds the list within it).
macro_rules! functions {
    ($($i:literal)*) => { [$(command::<$i>),*] };
}
const FUNCTIONS: [CommandFn; 48] = functions!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
    24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47
);
const _: () = assert!(COMMANDS.len() <= FUNCTIONS.len());

/// The defaults the module was loaded with.
static DEFAULTS: OnceLock<Defaults> = OnceLock::new();
/// Each command's keyspace event: its name in lower case (as Redis's own are).
static EVENTS: OnceLock<Vec<CString>> = OnceLock::new();

/// Fixes the defaults, once, when the module loads.
pub fn set_defaults(d: Defaults) {
    let _ = DEFAULTS.set(d);
}

/// Why the module could not register its commands (it then refuses to load).
#[derive(Debug)]
pub enum RegisterError {
    /// The server's module API lacks a function the module needs.
    MissingApi(&'static str),
    /// The server refused a command's name (taken by another module?).
    Refused(&'static str),
    /// A command's usage line does not parse (a defect of the command list).
    Usage {
        /// The command.
        command: &'static str,
        /// The parser's complaint.
        source: BadUsage,
    },
    /// The server refused a command's documentation.
    Undocumented(&'static str),
}

impl std::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RegisterError::MissingApi(api) => write!(f, "the module API lacks {api}"),
            RegisterError::Refused(name) => write!(f, "cannot register {name}"),
            RegisterError::Usage { command, source } => write!(f, "{command}: {source}"),
            RegisterError::Undocumented(name) => write!(f, "cannot document {name}"),
        }
    }
}

impl std::error::Error for RegisterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegisterError::Usage { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Registers every command (and, with `legacy`, its old name too, on the same function),
/// then tells Redis each command's documentation.
pub fn register(ctx: &Context, legacy: bool) -> Result<(), RegisterError> {
    let _ = EVENTS.set(
        COMMANDS
            .iter()
            .map(|c| c_text(&c.name.to_ascii_lowercase()))
            .collect(),
    );
    // SAFETY: called from `RedisModule_OnLoad` after `RedisModule_Init`, with the load
    // context; every string passed is NUL-terminated and alive across its call.
    unsafe {
        let Some(create) = raw::RedisModule_CreateCommand else {
            return Err(RegisterError::MissingApi("CreateCommand"));
        };
        for (i, c) in COMMANDS.iter().enumerate() {
            let (first, last, step) = c.key_range();
            let flags = c_text(&c.flags());
            for name in std::iter::once(c.name).chain(c.legacy.filter(|_| legacy)) {
                let cname = c_text(name);
                let ok = create(
                    ctx.ctx,
                    cname.as_ptr(),
                    Some(FUNCTIONS[i]),
                    flags.as_ptr(),
                    first,
                    last,
                    step,
                );
                if ok != raw::Status::Ok as c_int {
                    return Err(RegisterError::Refused(name));
                }
            }
            document(ctx, c)?;
        }
        #[cfg(feature = "bench-floor")]
        if create(
            ctx.ctx,
            c"TM.BENCHFLOOR".as_ptr(),
            Some(bench_floor),
            c"write deny-oom fast".as_ptr(),
            1,
            1,
            1,
        ) != raw::Status::Ok as c_int
        {
            return Err(RegisterError::Refused("TM.BENCHFLOOR"));
        }
    }
    Ok(())
}

/// Strings and arrays a command's documentation points into, alive until Redis has copied
/// them.
#[derive(Default)]
struct Arena {
    strings: Vec<CString>,
    arrays: Vec<Box<[raw::RedisModuleCommandArg]>>,
}

impl Arena {
    fn text(&mut self, s: &str) -> *const c_char {
        let c = c_text(s);
        // A CString's bytes stay where they are when the CString moves into the list.
        let p = c.as_ptr();
        self.strings.push(c);
        p
    }

    /// `args` as Redis's array of arguments, ended by a zeroed one; key arguments numbered
    /// from `*keys` (their key spec's index).
    fn args(&mut self, args: &[ArgDoc], keys: &mut c_int) -> *mut raw::RedisModuleCommandArg {
        let mut v: Vec<raw::RedisModuleCommandArg> =
            args.iter().map(|a| self.arg(a, keys)).collect();
        v.push(zeroed_arg());
        let mut b = v.into_boxed_slice();
        let p = b.as_mut_ptr();
        self.arrays.push(b);
        p
    }

    fn arg(&mut self, a: &ArgDoc, keys: &mut c_int) -> raw::RedisModuleCommandArg {
        let type_ = match a.kind {
            ArgType::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
            ArgType::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            ArgType::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            ArgType::Double => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
            ArgType::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
            ArgType::OneOf => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            ArgType::Block => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
        };
        let key_spec_index = if a.kind == ArgType::Key {
            *keys += 1;
            *keys - 1
        } else {
            -1
        };
        let mut flags = 0;
        if a.optional {
            flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
        }
        if a.multiple {
            flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
        }
        let mut arg = zeroed_arg();
        arg.name = self.text(&a.name);
        arg.type_ = type_;
        arg.key_spec_index = key_spec_index;
        arg.token = a
            .token
            .as_deref()
            .map_or(std::ptr::null(), |t| self.text(t));
        arg.flags = flags as c_int;
        if !a.subargs.is_empty() {
            arg.subargs = self.args(&a.subargs, keys);
        }
        arg
    }
}

fn zeroed_arg() -> raw::RedisModuleCommandArg {
    // SAFETY: every field is a pointer or an integer, for which zero is valid (null, 0).
    unsafe { MaybeUninit::zeroed().assume_init() }
}

/// One key spec: begin at argument `pos`, take keys to `lastkey` (relative; `-1`: to the
/// end), with `flags`.
fn key_spec(pos: c_int, lastkey: c_int, flags: u32) -> raw::RedisModuleCommandKeySpec {
    // SAFETY: as for `zeroed_arg`; the union fields written are plain integers.
    unsafe {
        let mut s: raw::RedisModuleCommandKeySpec = MaybeUninit::zeroed().assume_init();
        s.flags = u64::from(flags);
        s.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
        s.bs.index.pos = pos;
        s.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
        s.fk.range.lastkey = lastkey;
        s.fk.range.keystep = 1;
        s.fk.range.limit = 0;
        s
    }
}

/// Tells Redis a command's documentation: what `COMMAND DOCS` shows and `redis-cli` hints
/// from, and key specs from which cluster clients read where its keys are.
fn document(ctx: &Context, c: &Spec) -> Result<(), RegisterError> {
    let args = usage::parse(c.usage).map_err(|source| RegisterError::Usage {
        command: c.name,
        source,
    })?;
    let mut arena = Arena::default();
    let mut keys = 0;
    let args_ptr = arena.args(&args, &mut keys);
    let write = if c.writes() {
        raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE
    } else {
        raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS
    };
    let mut specs = match c.keys {
        Keys::First => vec![key_spec(1, 0, write)],
        Keys::FirstTwo => vec![
            key_spec(
                1,
                0,
                raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS,
            ),
            key_spec(
                2,
                0,
                raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_UPDATE,
            ),
        ],
        // Keys run to the first option: clients must ask the server (`COMMAND GETKEYS`).
        Keys::UntilOption(_) => vec![key_spec(1, -1, write | raw::REDISMODULE_CMD_KEY_INCOMPLETE)],
    };
    // SAFETY: zero is a valid key spec (the list's end).
    specs.push(unsafe { MaybeUninit::zeroed().assume_init() });
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let name = c_text(c.name);
    let info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: arena.text(c.summary),
        complexity: arena.text(c.complexity),
        since: arena.text("0.1.0"),
        history: std::ptr::null_mut(),
        tips: std::ptr::null(),
        arity: usage::arity(&args),
        key_specs: specs.as_mut_ptr(),
        args: args_ptr,
    };
    // SAFETY: after `RedisModule_Init`, with the load context; every pointer in `info` is
    // into `arena`, `specs`, `version` or `name`, alive across the call (Redis copies them).
    unsafe {
        let (Some(get), Some(set)) = (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo)
        else {
            // An older Redis without command docs: the commands work, undocumented.
            return Ok(());
        };
        let command = get(ctx.ctx, name.as_ptr());
        if command.is_null() || set(command, &info) != raw::Status::Ok as c_int {
            return Err(RegisterError::Undocumented(c.name));
        }
    }
    Ok(())
}

/// The function Redis calls for the command at `I` in [`COMMANDS`]. The arguments are read
/// where Redis keeps them (no vector of owned strings, no reference counts per argument): most
/// of a fast command's cost in the module is the module's own, so this path stays short.
unsafe extern "C" fn command<const I: usize>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let args: &[*mut raw::RedisModuleString] = match usize::try_from(argc) {
        // SAFETY: Redis passes `argc` live argument strings at `argv` for this call.
        Ok(n) if n > 0 && !argv.is_null() => unsafe { std::slice::from_raw_parts(argv, n) },
        _ => &[],
    };
    if let Err(e) = handle(&context, I, args) {
        context.reply_error_string(&e);
    }
    raw::Status::Ok as c_int
}

fn handle(ctx: &Context, index: usize, args: &[*mut raw::RedisModuleString]) -> Result<(), String> {
    let Some(spec) = COMMANDS.get(index) else {
        return Err("ERR tidemark: no such command".into());
    };
    // Most commands have a handful of arguments: keep their slices on the stack.
    let mut small: [&[u8]; 16] = [&[]; 16];
    let heap: Vec<&[u8]>;
    let argv: &[&[u8]] = if args.len() <= small.len() {
        for (s, a) in small.iter_mut().zip(arg_bytes(args)) {
            *s = a;
        }
        &small[..args.len()]
    } else {
        heap = arg_bytes(args).collect();
        &heap
    };
    if ctx.is_keys_position_request() {
        for pos in key_positions_as(index, argv) {
            ctx.key_at_pos(pos as i32);
        }
        return Ok(());
    }
    let mut ks = RedisKeyspace::new(ctx, args, argv);
    // The clock only for commands that can read it (`*` the filter did not stamp, and
    // filters that forget by it).
    let clock = spec.clock == Clock::Always || argv.iter().any(|a| *a == b"*");
    let env = Env {
        now_ms: if clock { now_ms() } else { 0 },
        defaults: DEFAULTS.get().copied().unwrap_or(Defaults::BUILT_IN),
    };
    let before = alloc::net_bytes();
    // The command layer never panics on any input (tests drive random vectors through it);
    // should an internal invariant break anyway, the client gets an error, not a dead server.
    let outcome = match catch_unwind(AssertUnwindSafe(|| run_as(&mut ks, env, index, argv))) {
        Ok(o) => o,
        Err(_) => return Err("ERR tidemark: internal error (a bug; please report it)".into()),
    };
    let wrote = outcome.replicate != Replicate::Nothing;
    if wrote {
        if let Some(event) = EVENTS.get().and_then(|e| e.get(index)) {
            ks.signal_written(event);
        }
    }
    match &outcome.replicate {
        Replicate::Nothing => {}
        Replicate::Verbatim => ctx.replicate_verbatim(),
        Replicate::WithTime { pos, time } => {
            let mut digits = [0u8; 24];
            let n = write_decimal(*time, &mut digits);
            let t = RedisString::create_from_slice(ctx.ctx, &digits[..n]);
            let rest: Vec<*mut raw::RedisModuleString> = args
                .iter()
                .enumerate()
                .skip(1)
                .map(|(i, a)| if i == *pos { t.inner } else { *a })
                .collect();
            replicate(ctx, argv[0], &rest);
        }
        Replicate::Rewritten(v) => {
            let strings: Vec<RedisString> = v
                .iter()
                .map(|a| RedisString::create_from_slice(ctx.ctx, a))
                .collect();
            if let Some((name, rest)) = v.split_first().zip(strings.split_first()) {
                let rest: Vec<*mut raw::RedisModuleString> =
                    rest.1.iter().map(|s| s.inner).collect();
                replicate(ctx, name.0, &rest);
            }
        }
    }
    let result = match outcome.reply {
        Ok(r) => {
            // The protocol matters only to doubles: ask for it only then.
            reply(ctx, &r, has_doubles(&r) && is_resp3(ctx));
            Ok(())
        }
        Err(e) => {
            if e.is_limit() {
                stats::refused_for_limits();
            }
            Err(e.to_string().replace(['\r', '\n'], " "))
        }
    };
    // What the command allocated and still holds, its reply and replication gone: the
    // growth of the value it changed.
    drop(outcome.replicate);
    if wrote {
        ks.count_growth(alloc::net_bytes() - before);
    }
    result
}

/// Replicates `name rest…` (RedisModule_Replicate with a vector of strings).
fn replicate(ctx: &Context, name: &[u8], rest: &[*mut raw::RedisModuleString]) {
    // The name as a C string, on the stack (every TM command name is short and has no NUL).
    let mut cname = [0u8; 48];
    if name.len() >= cname.len() || name.contains(&0) {
        return;
    }
    cname[..name.len()].copy_from_slice(name);
    // SAFETY: `Replicate` is set by `RedisModule_Init`; `cname` is NUL-terminated; "v" takes
    // an array of RedisModuleString pointers and its length, all alive across the call
    // (Redis retains what it keeps).
    unsafe {
        if let Some(f) = raw::RedisModule_Replicate {
            f(
                ctx.ctx,
                cname.as_ptr().cast(),
                c"v".as_ptr(),
                rest.as_ptr(),
                rest.len(),
            );
        }
    }
}

/// The keyspace event of the command at `index` (for tests: the name in lower case).
#[cfg(test)]
fn event_of(index: usize) -> Option<&'static std::ffi::CStr> {
    EVENTS
        .get()
        .and_then(|e| e.get(index))
        .map(CString::as_c_str)
}

/// `TM.BENCHFLOOR key time` (bench builds only): what a `TMCOUNT.ADD` costs the server with
/// the module's own work taken out. Redis dispatches it and the filter stamps its `*` as for
/// `TMCOUNT.ADD`; it opens its key for writing, closes it, and replies a fixed estimate of
/// three bulk strings. BENCHMARKS.md, "Redis module", compares it with `INCR`.
#[cfg(feature = "bench-floor")]
unsafe extern "C" fn bench_floor(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // SAFETY: the API functions are set by `RedisModule_Init`; Redis passes `argc` live
    // argument strings at `argv`; the key handle is closed before returning.
    unsafe {
        let (Some(open), Some(close), Some(array), Some(bulk)) = (
            raw::RedisModule_OpenKey,
            raw::RedisModule_CloseKey,
            raw::RedisModule_ReplyWithArray,
            raw::RedisModule_ReplyWithStringBuffer,
        ) else {
            return raw::Status::Err as c_int;
        };
        if argc < 2 || argv.is_null() {
            if let Some(f) = raw::RedisModule_WrongArity {
                f(ctx);
            }
            return raw::Status::Ok as c_int;
        }
        let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_WRITE) as c_int;
        close(open(ctx, *argv.add(1), mode));
        array(ctx, 3);
        for b in [&b"995904.5"[..], b"991809", b"1000000"] {
            bulk(ctx, b.as_ptr().cast(), b.len());
        }
    }
    raw::Status::Ok as c_int
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_has_a_function_flags_and_an_event() {
        let _ = EVENTS.set(
            COMMANDS
                .iter()
                .map(|c| c_text(&c.name.to_ascii_lowercase()))
                .collect(),
        );
        for (i, c) in COMMANDS.iter().enumerate() {
            let flags = c.flags();
            assert_eq!(
                flags.starts_with("write"),
                c.writes(),
                "{}: {flags}",
                c.name
            );
            assert_eq!(
                flags.contains("getkeys-api"),
                matches!(c.keys, Keys::UntilOption(_)),
                "{}: {flags}",
                c.name
            );
            let event = event_of(i).map(std::ffi::CStr::to_str);
            assert_eq!(event, Some(Ok(c.name.to_lowercase().as_str())));
        }
    }
}
