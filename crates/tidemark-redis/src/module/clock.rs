//! The server's clock for `*` times: a command filter stamps a timed write's `*` as `*<ms>`
//! when the command arrives ([`crate::args::Time::Clock`]), so the write replicates as it
//! stands and a replica or an AOF replay, holding the same state, resolves the same time.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::OnceLock;

use redis_module::raw;

use super::reply::write_decimal;
use crate::command::{is_name, COMMANDS};
use crate::types::Clock;

/// The names the filter stamps: every write whose argument 2 is a time, under its name and,
/// when registered, its legacy name (and in a bench build the floor command).
static STAMPED: OnceLock<Vec<&'static str>> = OnceLock::new();

/// Fixes the names the filter stamps, once, when the module loads.
pub fn stamp_names(legacy: bool) {
    let mut names: Vec<&'static str> = Vec::new();
    for c in COMMANDS
        .iter()
        .filter(|c| c.clock == Clock::TimeArg && c.writes())
    {
        names.push(c.name);
        if legacy {
            names.extend(c.legacy);
        }
    }
    if cfg!(feature = "bench-floor") {
        names.push("TM.BENCHFLOOR");
    }
    let _ = STAMPED.set(names);
}

fn stamped_names() -> &'static [&'static str] {
    STAMPED.get().map_or(&[], Vec::as_slice)
}

/// The command filter: a timed write's `*` becomes `*<ms>`, the server's clock as the command
/// arrives ([`crate::args::Time::Clock`]). The command then replicates verbatim — a
/// replica or an AOF replay reads the same number — instead of building a new argument vector
/// for `RedisModule_Replicate`, which cost a fast write about as much as the rest of its work.
/// Runs for every command the server receives (clients, `MULTI` at queue time, scripts and
/// `RedisModule_Call`); anything else passes untouched after an arity check and a name
/// comparison. Only AOF loading runs no filter, and it replays stamped times; a plain `*`
/// that reached a command anyway would still be resolved and replicated with its time
/// (`Replicate::WithTime`).
pub unsafe extern "C" fn stamp_clock(fctx: *mut raw::RedisModuleCommandFilterCtx) {
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
        if !stamped_names().iter().any(|w| is_name(name, w)) {
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

pub fn now_ms() -> u64 {
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
pub unsafe fn string_bytes<'a>(s: *mut raw::RedisModuleString) -> &'a [u8] {
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
pub fn arg_bytes(args: &[*mut raw::RedisModuleString]) -> impl Iterator<Item = &[u8]> {
    // SAFETY: every element is an argument string of the current call, which Redis keeps
    // unchanged until the call returns; the slices live as long as the borrow of the vector.
    args.iter().map(|a| unsafe { string_bytes(*a) })
}
