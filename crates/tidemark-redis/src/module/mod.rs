//! The shim between Redis and the command layer.
//!
//! - One native type, `tm-sketch` (encoding version [`ENCODING_VERSION`]), holds any
//!   [`Value`]. RDB stores [`Value::to_bytes`] as one string; `rdb_load` refuses an encoding
//!   version newer than this build's (Redis then refuses the file or the `RESTORE`) and reads
//!   every older one. The bytes go through the same validation as `TM.LOAD`, so a corrupted
//!   `RESTORE` payload is an error reply, never a crash.
//! - AOF rewrite emits `TM.LOAD key <bytes>`; `DUMP`/`RESTORE` use the RDB callbacks;
//!   `MEMORY USAGE` asks [`Value::bytes`]; `COPY` clones; `DEBUG DIGEST-VALUE` digests the
//!   value's bytes, so digest checks see a replica or a migrated key that differs.
//! - Commands ([`registry`]) are registered from the command list, each with a function of
//!   its own; timed writes have their `*` stamped by a command filter ([`clock`]).
//! - Replies go straight through Redis's reply API ([`reply`]); memory comes from Redis's
//!   allocator ([`alloc`]); `INFO tidemark` counts keys and bytes per type ([`stats`]).
#![allow(unsafe_code)] // Redis's C API: each block says why it is sound.

mod alloc;
mod clock;
mod keyspace;
mod registry;
mod reply;
mod stats;

use std::ffi::CString;
use std::os::raw::{c_int, c_void};
use std::panic::catch_unwind;

use redis_module::native_types::RedisType;
use redis_module::{raw, redis_module, Context, RedisString};

use crate::command::ModuleOptions;
use crate::types::Value;
use alloc::TmAlloc;
use stats::Held;

/// The RDB encoding version this build writes; it reads this one and every older one.
pub const ENCODING_VERSION: i32 = 1;

static TM_TYPE: RedisType = RedisType::new(
    "tm-sketch",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
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

/// The value behind a pointer this module handed Redis.
///
/// # Safety
/// `value` is a pointer this module stored with `set_value` or returned from `rdb_load` or
/// `copy` (a boxed [`Held`]), alive for `'a`.
unsafe fn held<'a>(value: *const c_void) -> &'a Held {
    // SAFETY: the caller's contract.
    unsafe { &*value.cast::<Held>() }
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    // SAFETY: Redis hands back a value of this type.
    let v = unsafe { held(value) };
    raw::save_slice(rdb, &v.value.to_bytes());
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    if encver > ENCODING_VERSION || encver < 1 {
        return std::ptr::null_mut();
    }
    let Ok(buf) = raw::load_string_buffer(rdb) else {
        return std::ptr::null_mut();
    };
    match catch_unwind(|| Value::from_bytes(buf.as_ref())) {
        Ok(Ok(v)) => Box::into_raw(Box::new(Held::new(v))).cast(),
        _ => std::ptr::null_mut(),
    }
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    // SAFETY: a value of this type.
    let bytes = unsafe { held(value) }.value.to_bytes();
    // SAFETY: `EmitAOF` is set after `RedisModule_Init`; "sb" takes a RedisModuleString* and a
    // (char*, size_t) buffer, which is what follows; `bytes` outlives the call.
    unsafe {
        if let Some(emit) = raw::RedisModule_EmitAOF {
            emit(
                aof,
                c"TM.LOAD".as_ptr(),
                c"sb".as_ptr(),
                key,
                bytes.as_ptr(),
                bytes.len(),
            );
        }
    }
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    // SAFETY: a value of this type.
    unsafe { held(value) }.value.bytes()
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    // SAFETY: a value of this type; the digest functions are set by `RedisModule_Init`, and
    // `bytes` outlives the call.
    unsafe {
        let bytes = held(value).value.to_bytes();
        if let (Some(add), Some(end)) = (
            raw::RedisModule_DigestAddStringBuffer,
            raw::RedisModule_DigestEndSequence,
        ) {
            add(md, bytes.as_ptr().cast(), bytes.len());
            end(md);
        }
    }
}

unsafe extern "C" fn free(value: *mut c_void) {
    if !value.is_null() {
        // SAFETY: Redis frees each value once; it was created by `Box::into_raw`.
        drop(unsafe { Box::from_raw(value.cast::<Held>()) });
    }
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    // SAFETY: a value of this type.
    Box::into_raw(Box::new(unsafe { held(value) }.clone())).cast()
}

/// Reads the load arguments, then asks Redis to hand RDB read errors to `rdb_load` instead of
/// stopping the server (a truncated or corrupted `RESTORE` payload must be an error reply)
/// and to leave the modified-key signal to the module (keys are opened for writing by reads
/// too, for the ring's cache; only writes may invalidate a WATCH); registers the commands,
/// the clock filter and the `INFO` section.
fn init(ctx: &Context, args: &[RedisString]) -> redis_module::Status {
    let words: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let options = match ModuleOptions::parse(&words) {
        Ok(o) => o,
        Err(e) => {
            ctx.log_warning(&format!("tidemark: {e}"));
            return redis_module::Status::Err;
        }
    };
    registry::set_defaults(options.defaults);
    stats::loaded_with(options.defaults, options.legacy_names);
    clock::stamp_names(options.legacy_names);
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
    if let Err(e) = registry::register(ctx, options.legacy_names) {
        ctx.log_warning(&format!("tidemark: {e}"));
        return redis_module::Status::Err;
    }
    // SAFETY: as above.
    unsafe {
        match raw::RedisModule_RegisterCommandFilter {
            Some(register) if !register(ctx.ctx, Some(clock::stamp_clock), 0).is_null() => {}
            _ => {
                ctx.log_warning("tidemark: cannot register the command filter for `*` times");
                return redis_module::Status::Err;
            }
        }
        if let Some(register) = raw::RedisModule_RegisterInfoFunc {
            if register(ctx.ctx, Some(stats::info)) != raw::Status::Ok as c_int {
                ctx.log_warning("tidemark: cannot register the INFO section");
                return redis_module::Status::Err;
            }
        }
    }
    redis_module::Status::Ok
}

/// The module's own text as a C string (a NUL inside, which none has, would become a space).
fn c_text(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

redis_module! {
    name: "tidemark",
    version: 1,
    allocator: (TmAlloc, TmAlloc),
    data_types: [TM_TYPE],
    init: init,
    // The commands are registered by `init` (a raw function each, `registry`).
    commands: [],
}
