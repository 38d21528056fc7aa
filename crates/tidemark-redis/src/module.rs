//! The shim between Redis and the command layer: argument conversion, the keyspace, RESP
//! replies, replication, and the type's callbacks.
//!
//! - One native type, `tm-sketch` (encoding version [`ENCODING_VERSION`]), holds any
//!   [`Value`]. RDB stores [`Value::to_bytes`] as one string; `rdb_load` refuses an encoding
//!   version newer than this build's (Redis then refuses the file or the `RESTORE`) and reads
//!   every older one. The bytes go through the same validation as `TM.LOAD`, so a corrupted
//!   `RESTORE` payload is an error reply, never a crash.
//! - AOF rewrite emits `TM.LOAD key <bytes>`; `DUMP`/`RESTORE` use the RDB callbacks;
//!   `MEMORY USAGE` asks [`Value::bytes`]; `COPY` clones.
//! - Every command declares its keys through the get-keys API ([`key_positions`]), so Redis
//!   Cluster checks slots and cluster clients route by the first key.
//! - A write's `*` time is read when the command arrives: a command filter turns it into
//!   `*<ms>` ([`crate::command::Time::Clock`]), so the write replicates verbatim and a replica
//!   or an AOF replay resolves the same time. Only AOF loading runs no filter (it replays
//!   stamped times); a plain `*` that reached a command anyway would still replicate with its
//!   time resolved ([`Replicate::WithTime`]).
//! - Each command has its own raw function (`command::<I>`, [`REGISTERED`]), which knows its
//!   command without reading the name; arguments are read where Redis keeps them, without a
//!   vector of owned strings.
//! - Keys are opened for writing (a distinct ring's query updates its merge cache), so the
//!   module turns off Redis's implicit modified-key signal and signals the keys of writes
//!   itself: a read never aborts a `WATCH`.
//! - Replies go straight through Redis's reply API; RESP2 doubles are bulk strings written by
//!   Rust (integers and halves by hand), RESP3 doubles are doubles.
//! - Memory comes from Redis's allocator once the module is loaded (so `INFO memory` and
//!   `maxmemory` see it), from the system's in a process without Redis (the tests).
#![allow(unsafe_code)] // Redis's C API: each block says why it is sound.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{CStr, CString};
use std::os::raw::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use redis_module::key::RedisKeyWritable;
use redis_module::native_types::RedisType;
use redis_module::{raw, redis_module, Context, KeyType, RedisString};

use crate::command::{
    is_name, key_positions_as, run_as, Env, Keyspace, Lookup, Replicate, Reply, COMMANDS,
};
use crate::value::Value;

/// The RDB encoding version this build writes; it reads this one and every older one.
pub const ENCODING_VERSION: i32 = 1;

/// Redis's allocator when the module runs inside Redis, the system's otherwise.
struct TmAlloc;

// SAFETY: both arms are allocators that honour `Layout`. The choice cannot change between an
// allocation and its free: `RedisModule_Alloc`/`RedisModule_Free` are set once, by
// `RedisModule_Init` at the top of `RedisModule_OnLoad`, before this library allocates
// anything (the `redis_module!` load function copies the name to a stack buffer for that
// reason), and a process without Redis never sets them.
unsafe impl GlobalAlloc for TmAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: reading a function pointer written once before any allocation (above).
        match unsafe { raw::RedisModule_Alloc } {
            Some(_) => unsafe { redis_module::alloc::RedisAlloc.alloc(layout) },
            None => unsafe { System.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`; `ptr` came from the same arm.
        match unsafe { raw::RedisModule_Free } {
            Some(_) => unsafe { redis_module::alloc::RedisAlloc.dealloc(ptr, layout) },
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }
}

static TM_TYPE: RedisType = RedisType::new(
    "tm-sketch",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: None,
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save2: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        copy2: None,
        free_effort2: None,
        mem_usage2: None,
        unlink2: None,
    },
);

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis hands back a pointer this module stored with `set_value` (a boxed Value).
    let v = unsafe { &*value.cast::<Value>() };
    raw::save_slice(rdb, &v.to_bytes());
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if encver > ENCODING_VERSION || encver < 1 {
        return std::ptr::null_mut();
    }
    let Ok(buf) = raw::load_string_buffer(rdb) else {
        return std::ptr::null_mut();
    };
    match catch_unwind(|| Value::from_bytes(buf.as_ref())) {
        Ok(Ok(v)) => Box::into_raw(Box::new(v)).cast(),
        _ => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: `value` is a boxed Value of this type (as in `rdb_save`).
    let v = unsafe { &*value.cast::<Value>() };
    let bytes = v.to_bytes();
    let (Ok(cmd), Ok(fmt)) = (CString::new("TM.LOAD"), CString::new("sb")) else {
        return;
    };
    // SAFETY: `EmitAOF` is set after `RedisModule_Init`; "sb" takes a RedisModuleString* and a
    // (char*, size_t) buffer, which is what follows; `bytes` outlives the call.
    unsafe {
        if let Some(emit) = raw::RedisModule_EmitAOF {
            emit(
                aof,
                cmd.as_ptr(),
                fmt.as_ptr(),
                key,
                bytes.as_ptr(),
                bytes.len(),
            );
        }
    }
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: a boxed Value of this type.
    let v = unsafe { &*value.cast::<Value>() };
    v.bytes()
}

unsafe extern "C" fn free(value: *mut c_void) {
    if !value.is_null() {
        // SAFETY: Redis frees each value once; it was created by `Box::into_raw`.
        drop(unsafe { Box::from_raw(value.cast::<Value>()) });
    }
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: a boxed Value of this type.
    let v = unsafe { &*value.cast::<Value>() };
    Box::into_raw(Box::new(v.clone())).cast()
}

/// Redis's keyspace as the command layer sees it. Keys stay open until the command ends; a
/// key named by an argument is opened through that argument's string (no copy), and a key
/// opened once is reused.
struct RedisKeyspace<'c> {
    ctx: &'c Context,
    args: &'c [*mut raw::RedisModuleString],
    /// The same arguments' bytes (a key is found among them by address, without asking Redis
    /// for each argument's bytes again).
    argv: &'c [&'c [u8]],
    // Most commands open one key: it stays inline, found by its bytes' address. Further ones
    // go to `more`, found by their bytes (a command of many keys may name one many times).
    // Each entry: the key's bytes (address, length), its handle, its name as a Redis string.
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
    by_name: std::collections::HashMap<Vec<u8>, usize>,
    arg_at: std::collections::HashMap<(*const u8, usize), usize>,
}

type OpenKey = (
    *const u8,
    usize,
    RedisKeyWritable,
    *mut raw::RedisModuleString,
);

impl RedisKeyspace<'_> {
    fn open(&mut self, key: &[u8]) -> &RedisKeyWritable {
        let at = (key.as_ptr(), key.len());
        let is_first = |e: &OpenKey| (e.0, e.1) == at;
        let i = if self.first.as_ref().is_some_and(is_first) {
            None
        } else if self.first.is_none() {
            // The first key: its argument found by address, once.
            let arg = self
                .argv
                .iter()
                .zip(self.args)
                .find(|(a, _)| (a.as_ptr(), a.len()) == at)
                .map(|(_, &arg)| arg);
            let (handle, name) = self.handle(key, arg);
            self.first = Some((at.0, at.1, handle, name));
            None
        } else if let Some(&i) = self.many.as_ref().and_then(|m| m.by_name.get(key)) {
            Some(i)
        } else {
            let argv = self.argv;
            let many = self.many.get_or_insert_with(|| {
                Box::new(ManyKeys {
                    by_name: std::collections::HashMap::new(),
                    arg_at: argv
                        .iter()
                        .enumerate()
                        .map(|(i, a)| ((a.as_ptr(), a.len()), i))
                        .collect(),
                })
            });
            let arg = many.arg_at.get(&at).map(|&i| self.args[i]);
            let (handle, name) = self.handle(key, arg);
            self.more.push((at.0, at.1, handle, name));
            let i = self.more.len() - 1;
            if let Some(m) = self.many.as_mut() {
                m.by_name.insert(key.to_vec(), i);
            }
            Some(i)
        };
        match (i, &self.first) {
            (Some(i), _) => &self.more[i].2,
            (None, Some(e)) => &e.2,
            (None, None) => unreachable!("the first key is opened just above when none was"),
        }
    }

    /// A handle on `key` and its name as a Redis string: the argument `arg` itself when the
    /// key is one (a reference count, no copy), else a string made for it.
    fn handle(
        &mut self,
        key: &[u8],
        arg: Option<*mut raw::RedisModuleString>,
    ) -> (RedisKeyWritable, *mut raw::RedisModuleString) {
        match arg {
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
        }
    }

    /// Tells Redis the keys a write touched (WATCH, client-side caching). The module asks
    /// Redis not to do it on its own, which it would for every key opened for writing, reads
    /// included.
    ///
    /// Each key also gets a keyspace notification of class `d` (module) named after the
    /// command in lower case (`tm.count.add`), for `notify-keyspace-events` subscribers.
    fn signal_modified(&self, event: &[u8; EVENT_LEN]) {
        for (_, _, _, name) in self.first.iter().chain(&self.more) {
            // SAFETY: set by `RedisModule_Init`; `name` is an argument of this call or a
            // string in `owned`, both alive; `event` is NUL-terminated.
            unsafe {
                if let Some(f) = raw::RedisModule_SignalModifiedKey {
                    f(self.ctx.ctx, *name);
                }
                if let Some(f) = raw::RedisModule_NotifyKeyspaceEvent {
                    f(
                        self.ctx.ctx,
                        raw::REDISMODULE_NOTIFY_MODULE,
                        event.as_ptr().cast(),
                        *name,
                    );
                }
            }
        }
    }
}

impl Keyspace for RedisKeyspace<'_> {
    fn lookup(&mut self, key: &[u8]) -> Lookup<'_> {
        let k = self.open(key);
        match k.get_value::<Value>(&TM_TYPE) {
            Ok(Some(v)) => Lookup::Found(v),
            Ok(None) => Lookup::Missing,
            Err(_) => Lookup::Foreign,
        }
    }

    fn store(&mut self, key: &[u8], value: Value) {
        let k = self.open(key);
        // The command layer stores only on a missing key or one of this type.
        let _ = k.set_value(&TM_TYPE, value);
    }

    fn store_string(&mut self, key: &[u8], bytes: Vec<u8>) -> bool {
        let k = self.open(key);
        if !matches!(k.key_type(), KeyType::Empty | KeyType::String) {
            return false;
        }
        match k.as_string_dma() {
            Ok(mut dma) => dma.write(&bytes).is_ok(),
            Err(_) => false,
        }
    }
}

/// Writes a reply straight through Redis's reply API (no intermediate values): doubles are
/// RESP3 doubles, or in RESP2 bulk strings in Rust's shortest round-trip form (as ZSCORE
/// answers, without printf's cost).
fn reply(ctx: &Context, r: &Reply, resp3: bool) {
    let c = ctx.ctx;
    // SAFETY: the reply functions are set by `RedisModule_Init`; `c` is this call's context;
    // every buffer passed lives across its call.
    unsafe {
        match r {
            Reply::Ok => {
                if let Some(f) = raw::RedisModule_ReplyWithSimpleString {
                    f(c, c"OK".as_ptr());
                }
            }
            Reply::Integer(i) => {
                if let Some(f) = raw::RedisModule_ReplyWithLongLong {
                    f(c, *i);
                }
            }
            Reply::Double(d) if resp3 => {
                if let Some(f) = raw::RedisModule_ReplyWithDouble {
                    f(c, *d);
                }
            }
            Reply::Double(d) => {
                let mut buf = [0u8; 40];
                let n = format_double(*d, &mut buf);
                if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                    f(c, buf.as_ptr().cast(), n);
                }
            }
            Reply::Estimate(e) => {
                if let Some(f) = raw::RedisModule_ReplyWithArray {
                    f(c, 3);
                }
                e.iter().for_each(|x| reply(ctx, &Reply::Double(*x), resp3));
            }
            Reply::Bulk(b) => {
                if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                    f(c, b.as_ptr().cast(), b.len());
                }
            }
            Reply::Null => {
                if let Some(f) = raw::RedisModule_ReplyWithNull {
                    f(c);
                }
            }
            Reply::Array(a) => {
                if let Some(f) = raw::RedisModule_ReplyWithArray {
                    f(c, a.len() as std::os::raw::c_long);
                }
                a.iter().for_each(|x| reply(ctx, x, resp3));
            }
            Reply::Map(m) => {
                // A RESP3 map, or in RESP2 a flat array of field, value, … (Redis's rule).
                match raw::RedisModule_ReplyWithMap {
                    Some(f) => {
                        f(c, m.len() as std::os::raw::c_long);
                    }
                    None => {
                        if let Some(f) = raw::RedisModule_ReplyWithArray {
                            f(c, 2 * m.len() as std::os::raw::c_long);
                        }
                    }
                }
                for (k, v) in m {
                    if let Some(f) = raw::RedisModule_ReplyWithStringBuffer {
                        f(c, k.as_ptr().cast(), k.len());
                    }
                    reply(ctx, v, resp3);
                }
            }
        }
    }
}

/// Writes `d` with the fewest digits that read back as `d` bit for bit (plain between 1e-5
/// and 1e17, in exponent form beyond); integers and halves (every counter answer) without the
/// float formatter. Returns the length.
fn format_double(d: f64, buf: &mut [u8; 40]) -> usize {
    // Twice the value, when it is an integer below 2^51 in size: `d` is an integer or a
    // half, written by hand (the float formatter is the slow path). The conversion truncates,
    // so the comparison holds only when nothing was cut.
    let twice = d * 2.0;
    let t = twice as i64;
    if d.abs() < 1e15 && t as f64 == twice {
        let mut at = 0;
        if d.is_sign_negative() {
            buf[0] = b'-';
            at = 1;
        }
        let n = t.unsigned_abs();
        at += write_decimal(n / 2, &mut buf[at..]);
        if n % 2 == 1 {
            buf[at] = b'.';
            buf[at + 1] = b'5';
            at += 2;
        }
        return at;
    }
    use std::io::Write;
    let mut w = &mut buf[..];
    // Rust's plain form writes every digit of 1e300 or 1e-300 (hundreds of bytes): far from
    // 1 the shortest round-trip digits go in exponent form, which every RESP client parses.
    let _ = if d != 0.0 && !(1e-5..1e17).contains(&d.abs()) {
        write!(w, "{d:e}")
    } else {
        write!(w, "{d}")
    };
    40 - w.len()
}

/// Whether a reply holds a double, which RESP3 and RESP2 write differently.
fn has_doubles(r: &Reply) -> bool {
    match r {
        Reply::Double(_) | Reply::Estimate(_) => true,
        Reply::Array(a) => a.iter().any(has_doubles),
        Reply::Map(m) => m.iter().any(|(_, v)| has_doubles(v)),
        Reply::Ok | Reply::Integer(_) | Reply::Bulk(_) | Reply::Null => false,
    }
}

fn is_resp3(ctx: &Context) -> bool {
    // SAFETY: `GetContextFlags` is set by `RedisModule_Init`; `ctx.ctx` is this call's context.
    let flags = unsafe { raw::RedisModule_GetContextFlags.map_or(0, |f| f(ctx.ctx)) };
    flags as u32 & raw::REDISMODULE_CTX_FLAGS_RESP3 != 0
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

fn now_ms() -> u64 {
    // Redis's own clock (`mstime`, the wall clock in ms): about a third of what
    // `SystemTime::now` and its conversions cost, on every timed write.
    // SAFETY: set by `RedisModule_Init`; takes no arguments.
    if let Some(f) = unsafe { raw::RedisModule_Milliseconds } {
        return u64::try_from(unsafe { f() }).unwrap_or(0);
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| {
            d.as_secs()
                .saturating_mul(1000)
                .saturating_add(u64::from(d.subsec_millis()))
        })
}

/// The bytes of a Redis string.
///
/// # Safety
///
/// `s` is a live Redis string that nothing modifies or frees while the slice is used: the
/// caller picks `'a` no longer than that (an argument of the current call, or a filter's
/// argument before it is replaced).
unsafe fn string_bytes<'a>(s: *mut raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: `StringPtrLen` is set by `RedisModule_Init`; `s` is live and unchanged while
    // the slice is used (the caller's contract).
    unsafe {
        match raw::RedisModule_StringPtrLen {
            Some(f) => {
                let p = f(s, &mut len);
                if p.is_null() {
                    &[]
                } else {
                    std::slice::from_raw_parts(p.cast::<u8>(), len)
                }
            }
            None => &[],
        }
    }
}

/// The arguments of this call as byte slices, borrowed as long as the argument vector.
fn arg_bytes(args: &[*mut raw::RedisModuleString]) -> impl Iterator<Item = &[u8]> {
    // SAFETY: every element is an argument string of the current call, which Redis keeps
    // unchanged until the call returns; the slices live as long as the borrow of the vector.
    args.iter().map(|a| unsafe { string_bytes(*a) })
}

/// What Redis is told of a command at load time.
struct Registered {
    name: &'static CStr,
    /// The keyspace event a write notifies: the name in lower case, as Redis's own are,
    /// NUL-terminated (derived from `name` at compile time).
    event: [u8; EVENT_LEN],
    flags: &'static CStr,
    /// `command::<I>`, `I` the command's place in [`COMMANDS`]: each command has a function of
    /// its own, so a call never looks its name up again.
    function: CommandFn,
    /// That `I`, which [`registered`] sets with the function (so a row cannot pair one
    /// command's name with another's function: a test holds `index` to the row's place).
    index: usize,
}

/// The row of the command at `I` in [`COMMANDS`].
const fn registered<const I: usize>(name: &'static CStr, flags: &'static CStr) -> Registered {
    Registered {
        name,
        event: lower_case(name),
        flags,
        function: command::<I>,
        index: I,
    }
}

/// Room for the longest event name and its NUL (every TM name is under 20 bytes).
const EVENT_LEN: usize = 32;

/// `name` in lower case, NUL-terminated; a name too long for it fails the build.
const fn lower_case(name: &CStr) -> [u8; EVENT_LEN] {
    let bytes = name.to_bytes();
    assert!(
        bytes.len() < EVENT_LEN,
        "a command name longer than EVENT_LEN - 1"
    );
    let mut out = [0u8; EVENT_LEN];
    let mut i = 0;
    while i < bytes.len() {
        out[i] = bytes[i].to_ascii_lowercase();
        i += 1;
    }
    out
}

type CommandFn = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *mut *mut raw::RedisModuleString,
    c_int,
) -> c_int;

/// Every command, in the order of the command layer's [`COMMANDS`], whose key positions go
/// with them (a test holds the names equal).
const REGISTERED: [Registered; 19] = [
    registered::<0>(c"TM.COUNT.CREATE", c"write deny-oom getkeys-api"),
    registered::<1>(c"TM.COUNT.ADD", c"write deny-oom getkeys-api fast"),
    registered::<2>(c"TM.COUNT.GET", c"readonly getkeys-api fast"),
    registered::<3>(c"TM.DISTINCT.CREATE", c"write deny-oom getkeys-api"),
    registered::<4>(c"TM.DISTINCT.ADD", c"write deny-oom getkeys-api fast"),
    registered::<5>(c"TM.DISTINCT.COUNT", c"readonly getkeys-api"),
    registered::<6>(c"TM.DISTINCT.TOPF", c"write deny-oom getkeys-api"),
    registered::<7>(c"TM.FREQ.CREATE", c"write deny-oom getkeys-api"),
    registered::<8>(c"TM.FREQ.ADD", c"write deny-oom getkeys-api"),
    registered::<9>(c"TM.FREQ.QUERY", c"readonly getkeys-api"),
    registered::<10>(c"TM.FREQ.TOP", c"readonly getkeys-api"),
    registered::<11>(c"TM.FILTER.CREATE", c"write deny-oom getkeys-api"),
    registered::<12>(c"TM.FILTER.ADD", c"write deny-oom getkeys-api"),
    registered::<13>(c"TM.FILTER.ADDAT", c"write deny-oom getkeys-api"),
    registered::<14>(c"TM.FILTER.EXISTS", c"readonly getkeys-api"),
    registered::<15>(c"TM.FILTER.DEL", c"write getkeys-api"),
    registered::<16>(c"TM.INFO", c"readonly getkeys-api"),
    registered::<17>(c"TM.DUMP", c"readonly getkeys-api"),
    registered::<18>(c"TM.LOAD", c"write deny-oom getkeys-api"),
];

// Every command is registered, each once (a test holds each row to its place).
const _: () = assert!(REGISTERED.len() == COMMANDS.len());

/// The function Redis calls for the TM command at `I` in [`COMMANDS`]. The arguments are read
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

/// The write commands whose argument 2 is a time (`*` allowed).
const TIMED_WRITES: [&str; 4] = [
    "TM.COUNT.ADD",
    "TM.DISTINCT.ADD",
    "TM.FREQ.ADD",
    "TM.FILTER.ADDAT",
];

/// The commands the filter stamps: the timed writes, and in a bench build the floor command.
#[cfg(not(feature = "bench-floor"))]
const STAMPED: &[&str] = &TIMED_WRITES;
#[cfg(feature = "bench-floor")]
const STAMPED: &[&str] = &[
    TIMED_WRITES[0],
    TIMED_WRITES[1],
    TIMED_WRITES[2],
    TIMED_WRITES[3],
    "TM.BENCH.FLOOR",
];

/// `TM.BENCH.FLOOR key time` (bench builds only): what a `TM.COUNT.ADD` costs the server
/// with the module's own work taken out. Redis dispatches it and the filter stamps its `*` as
/// for `TM.COUNT.ADD`; it opens its key for writing, closes it, and replies a fixed estimate
/// of three bulk strings. BENCHMARKS.md, "Redis module", compares it with `INCR`.
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

/// The command filter: a timed write's `*` becomes `*<ms>`, the server's clock as the command
/// arrives ([`crate::command::Time::Clock`]). The command then replicates verbatim — a
/// replica or an AOF replay reads the same number — instead of building a new argument vector
/// for `RedisModule_Replicate`, which cost a fast write about as much as the rest of its work.
/// Runs for every command the server receives (clients, `MULTI` at queue time, scripts and
/// `RedisModule_Call`); anything else passes untouched after an arity check and a name
/// comparison. Only AOF loading runs no filter, and it replays stamped times; a plain `*`
/// that reached a command anyway would still be resolved and replicated with its time
/// (`Replicate::WithTime`).
unsafe extern "C" fn stamp_clock(fctx: *mut raw::RedisModuleCommandFilterCtx) {
    // SAFETY: the filter API is set by `RedisModule_Init`; `fctx` is the context Redis passes
    // for this call; positions are checked against the count first; one reference to the
    // stamp passes to Redis with `CommandFilterArgReplace` (which frees the one it replaces).
    unsafe {
        let (Some(count), Some(get), Some(replace)) = (
            raw::RedisModule_CommandFilterArgsCount,
            raw::RedisModule_CommandFilterArgGet,
            raw::RedisModule_CommandFilterArgReplace,
        ) else {
            return;
        };
        if count(fctx) < 3 {
            return;
        }
        // The argument first: other commands rarely have a `*` there, and it is one byte to
        // look at. Both slices are dropped before any argument is replaced.
        if string_bytes(get(fctx, 2)) != b"*" {
            return;
        }
        let name = string_bytes(get(fctx, 0));
        if !STAMPED.iter().any(|w| is_name(name, w)) {
            return;
        }
        let Some(stamped) = stamp_of(now_ms()) else {
            return;
        };
        if replace(fctx, 2, stamped) != raw::Status::Ok as c_int {
            // Not handed over (cannot happen after the count check): our reference to drop.
            if let Some(f) = raw::RedisModule_FreeString {
                f(std::ptr::null_mut(), stamped);
            }
        }
    }
}

/// The last stamp made and its millisecond: the commands of one millisecond share one string
/// (Redis counts its references), instead of formatting and allocating one each. Filters run
/// on Redis's main thread (or a thread holding the global lock), one at a time, so the two
/// need no more than relaxed order; statics, because a thread-local costs a `cdylib` a call
/// to find.
static LAST_STAMP_MS: AtomicU64 = AtomicU64::new(0);
static LAST_STAMP: AtomicPtr<raw::RedisModuleString> = AtomicPtr::new(std::ptr::null_mut());

/// The string `*<ms>` with one reference for the caller to hand over (the cache keeps its own).
///
/// # Safety
/// Called from the command filter, after `RedisModule_Init`, with Redis's global lock held
/// (the main thread, or a module thread that locked it): the cache's two statics are read and
/// written by one caller at a time.
unsafe fn stamp_of(ms: u64) -> Option<*mut raw::RedisModuleString> {
    // SAFETY: the string functions are set by `RedisModule_Init`; a NULL context makes plain
    // reference counts (no automatic memory), and the cached string stays alive while the
    // cache holds its reference.
    unsafe {
        let (Some(create), Some(retain), Some(free)) = (
            raw::RedisModule_CreateString,
            raw::RedisModule_RetainString,
            raw::RedisModule_FreeString,
        ) else {
            return None;
        };
        let (at, cached) = (
            LAST_STAMP_MS.load(Ordering::Relaxed),
            LAST_STAMP.load(Ordering::Relaxed),
        );
        if at == ms && !cached.is_null() {
            retain(std::ptr::null_mut(), cached);
            return Some(cached);
        }
        let mut buf = [0u8; 24];
        buf[0] = b'*';
        let n = 1 + write_decimal(ms, &mut buf[1..]);
        let stamped = create(std::ptr::null_mut(), buf.as_ptr().cast(), n);
        if stamped.is_null() {
            return None;
        }
        // One reference for the cache, one for the caller.
        retain(std::ptr::null_mut(), stamped);
        if !cached.is_null() {
            free(std::ptr::null_mut(), cached);
        }
        LAST_STAMP_MS.store(ms, Ordering::Relaxed);
        LAST_STAMP.store(stamped, Ordering::Relaxed);
        Some(stamped)
    }
}

/// The decimal digits of 0..=99, two bytes each.
const DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Writes `v` in decimal at the start of `buf` (at least 20 bytes), returning the length.
/// Two digits a division, from the end of a scratch buffer: a reply's three numbers are
/// written on every `TM.COUNT.ADD`.
fn write_decimal(mut v: u64, buf: &mut [u8]) -> usize {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + v as u8;
    }
    let len = digits.len() - at;
    buf[..len].copy_from_slice(&digits[at..]);
    len
}

fn handle(ctx: &Context, index: usize, args: &[*mut raw::RedisModuleString]) -> Result<(), String> {
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
    let mut ks = RedisKeyspace {
        ctx,
        args,
        argv,
        first: None,
        more: Vec::new(),
        many: None,
        owned: Vec::new(),
    };
    // The clock only for commands that can read it (`*` the filter did not stamp, and
    // filters with EXPIRE).
    let clock = argv.iter().any(|a| *a == b"*")
        || COMMANDS
            .get(index)
            .is_some_and(|c| c.0.starts_with("TM.FILTER."));
    let env = Env {
        now_ms: if clock { now_ms() } else { 0 },
    };
    // The command layer never panics on any input (tests drive random vectors through it);
    // should an internal invariant break anyway, the client gets an error, not a dead server.
    let outcome = match catch_unwind(AssertUnwindSafe(|| run_as(&mut ks, env, index, argv))) {
        Ok(o) => o,
        Err(_) => return Err("ERR tidemark: internal error (a bug; please report it)".into()),
    };
    if outcome.replicate != Replicate::Nothing {
        if let Some(r) = REGISTERED.get(index) {
            ks.signal_modified(&r.event);
        }
    }
    match outcome.replicate {
        Replicate::Nothing => {}
        Replicate::Verbatim => ctx.replicate_verbatim(),
        Replicate::WithTime { pos, time } => {
            let mut digits = [0u8; 24];
            let n = write_decimal(time, &mut digits);
            let t = RedisString::create_from_slice(ctx.ctx, &digits[..n]);
            let rest: Vec<*mut raw::RedisModuleString> = args
                .iter()
                .enumerate()
                .skip(1)
                .map(|(i, a)| if i == pos { t.inner } else { *a })
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
    drop(ks);
    match outcome.reply {
        Ok(r) => {
            // The protocol matters only to doubles: ask for it only then.
            reply(ctx, &r, has_doubles(&r) && is_resp3(ctx));
            Ok(())
        }
        Err(e) => Err(e.to_string().replace(['\r', '\n'], " ")),
    }
}

/// Asks Redis to hand RDB read errors to `rdb_load` instead of stopping the server (a
/// truncated or corrupted `RESTORE` payload must be an error reply), and to leave the
/// modified-key signal to the module (keys are opened for writing by reads too, for the ring's
/// cache; only writes may invalidate a WATCH).
fn init(ctx: &Context, _args: &[RedisString]) -> redis_module::Status {
    // SAFETY: called from `RedisModule_OnLoad` after `RedisModule_Init`, with the load context.
    unsafe {
        if let Some(set) = raw::RedisModule_SetModuleOptions {
            set(
                ctx.ctx,
                (raw::REDISMODULE_OPTIONS_HANDLE_IO_ERRORS
                    | raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED) as c_int,
            );
        }
    }
    // SAFETY: as above; every name and flag string is a NUL-terminated constant.
    unsafe {
        let Some(create) = raw::RedisModule_CreateCommand else {
            return redis_module::Status::Err;
        };
        for r in &REGISTERED {
            let Some(&(_, _, first, last, step)) = COMMANDS.get(r.index) else {
                return redis_module::Status::Err;
            };
            let ok = create(
                ctx.ctx,
                r.name.as_ptr(),
                Some(r.function),
                r.flags.as_ptr(),
                first,
                last,
                step,
            );
            if ok != raw::Status::Ok as c_int {
                ctx.log_warning(&format!("tidemark: cannot register {:?}", r.name));
                return redis_module::Status::Err;
            }
        }
        #[cfg(feature = "bench-floor")]
        if create(
            ctx.ctx,
            c"TM.BENCH.FLOOR".as_ptr(),
            Some(bench_floor),
            c"write deny-oom fast".as_ptr(),
            1,
            1,
            1,
        ) != raw::Status::Ok as c_int
        {
            return redis_module::Status::Err;
        }
        match raw::RedisModule_RegisterCommandFilter {
            Some(register) if !register(ctx.ctx, Some(stamp_clock), 0).is_null() => {}
            _ => {
                ctx.log_warning("tidemark: cannot register the command filter for `*` times");
                return redis_module::Status::Err;
            }
        }
    }
    redis_module::Status::Ok
}

redis_module! {
    name: "tidemark",
    version: 1,
    allocator: (TmAlloc, TmAlloc),
    data_types: [TM_TYPE],
    init: init,
    // The commands are registered by `init` (a raw function each, `REGISTERED`).
    commands: [],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_commands_are_the_command_layers() {
        assert_eq!(REGISTERED.len(), COMMANDS.len());
        for (k, (r, (cname, write, ..))) in REGISTERED.iter().zip(COMMANDS).enumerate() {
            assert_eq!(r.index, k, "{cname}: its function is another command's");
            assert_eq!(r.name.to_str(), Ok(*cname));
            let event = CStr::from_bytes_until_nul(&r.event).map(CStr::to_str);
            assert_eq!(event, Ok(Ok(cname.to_lowercase().as_str())));
            let flags = r.flags.to_str().unwrap_or_default();
            assert_eq!(flags.starts_with("write"), *write, "{cname}: {flags}");
            assert!(flags.contains("getkeys-api"), "{cname}: {flags}");
        }
        // Every timed write the filter stamps is a registered write command.
        for w in TIMED_WRITES {
            assert!(COMMANDS.iter().any(|c| c.0 == w && c.1));
        }
    }

    #[test]
    fn decimals_are_as_std_writes_them() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let edges = (0..20).flat_map(|k| {
            let p = 10u64.pow(k);
            [p - 1, p, p + 1]
        });
        let random = (0..10_000).map(|_| rng.random::<u64>() >> rng.random_range(0..64));
        for v in edges.chain([u64::MAX, 99, 100]).chain(random) {
            let mut buf = [0u8; 20];
            let n = write_decimal(v, &mut buf);
            assert_eq!(&buf[..n], v.to_string().as_bytes(), "{v}");
        }
    }

    #[test]
    fn doubles_read_back_exactly() {
        let cases = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            1.0,
            -1.0,
            2.5,
            995_904.5,
            1e15 - 0.5,
            1e15,
            -1e15,
            1e300,
            0.1,
            -3.25,
            1.0 / 3.0,
            f64::MIN_POSITIVE,
            123_456_789.75,
            4_503_599_627_370_496.0,
        ];
        let edges = [
            1e-5,
            9.999_999_999_999_999e-6,
            1e17,
            99_999_999_999_999_980.0,
            4_503_599_627_370_495.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            -f64::MIN_POSITIVE,
            5e-324,
        ];
        for d in cases.into_iter().chain(edges) {
            let mut buf = [0u8; 40];
            let n = format_double(d, &mut buf);
            let text = std::str::from_utf8(&buf[..n])
                .expect("format_double writes ASCII only: digits, '-', '.', 'e', inf, NaN");
            let back: f64 = text
                .parse()
                .expect("every form format_double writes is one Rust's f64 parser reads");
            // Bit for bit: -0.0 keeps its sign.
            assert_eq!(back.to_bits(), d.to_bits(), "{d} written as {text}");
            // The shortest form: Rust's own `{}` is the shortest that reads back.
            assert!(text.len() <= format!("{d}").len(), "{d} written as {text}");
        }
        let mut buf = [0u8; 40];
        let n = format_double(f64::NAN, &mut buf);
        assert_eq!(&buf[..n], b"NaN");
        let n = format_double(-0.0, &mut buf);
        assert_eq!(&buf[..n], b"-0");
        let n = format_double(-0.5, &mut buf);
        assert_eq!(&buf[..n], b"-0.5");
        let n = format_double(7.0, &mut buf);
        assert_eq!(&buf[..n], b"7");
    }

    #[test]
    fn decimals_are_written_in_full() {
        let mut buf = [0u8; 20];
        for v in [0, 9, 10, 99, 1_796_168_172_020, u64::MAX] {
            let n = write_decimal(v, &mut buf);
            assert_eq!(&buf[..n], v.to_string().as_bytes());
        }
    }
}
