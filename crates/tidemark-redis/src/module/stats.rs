//! What `INFO tidemark` reports: keys and bytes per type, commands refused for the module's
//! bounds, and the defaults it was loaded with.
//!
//! ```text
//! # tidemark_keys
//! count:keys=1000,bytes=2168000
//! distinct:keys=3,bytes=2214912
//! # tidemark_commands
//! refused_for_limits:2
//! # tidemark_config
//! epsilon:0.01
//! ...
//! ```
//!
//! A key's bytes are counted when its value is made (a `CREATE`, `TM.LOAD`, a load from RDB,
//! `COPY`) as its [`Value::bytes`], then moved by what each command that changes it in place
//! allocates and frees (the module's allocator counts every byte), and taken off when Redis
//! frees it. So the figure costs no walk of a value on any write; it may differ from the sum
//! of `MEMORY USAGE` by what reads leave in a ring's merge cache.

use std::ffi::CString;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use redis_module::raw;

use crate::env::Defaults;
use crate::types::{Value, TYPE_NAMES};

/// Room for every type's counters (a test holds the type list within it).
const TYPES: usize = 8;
#[allow(clippy::declare_interior_mutable_const)] // only as the array's initializer
const ZERO: AtomicI64 = AtomicI64::new(0);
static KEYS: [AtomicI64; TYPES] = [ZERO; TYPES];
static BYTES: [AtomicI64; TYPES] = [ZERO; TYPES];
static REFUSED_FOR_LIMITS: AtomicU64 = AtomicU64::new(0);

const _: () = assert!(TYPE_NAMES.len() <= TYPES);

/// A value as Redis holds it: the value, and the bytes counted for it.
#[derive(Debug)]
pub struct Held {
    /// The value.
    pub value: Value,
    counted: i64,
}

impl Held {
    /// A value entering the keyspace: one more key of its type, its bytes counted.
    pub fn new(value: Value) -> Held {
        let counted = value.bytes() as i64;
        let t = value.type_index();
        KEYS[t].fetch_add(1, Ordering::Relaxed);
        BYTES[t].fetch_add(counted, Ordering::Relaxed);
        Held { value, counted }
    }

    /// The value changed in place, its allocations moving by `delta` bytes.
    pub fn grew(&mut self, delta: i64) {
        // Never below nothing: a free of something allocated before the value was counted
        // (another thread's, say) must not make a key's bytes negative.
        let next = (self.counted + delta).max(0);
        BYTES[self.value.type_index()].fetch_add(next - self.counted, Ordering::Relaxed);
        self.counted = next;
    }
}

impl Clone for Held {
    fn clone(&self) -> Held {
        Held::new(self.value.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let t = self.value.type_index();
        KEYS[t].fetch_sub(1, Ordering::Relaxed);
        BYTES[t].fetch_sub(self.counted, Ordering::Relaxed);
    }
}

/// A command refused for one of the module's bounds.
pub fn refused_for_limits() {
    REFUSED_FOR_LIMITS.fetch_add(1, Ordering::Relaxed);
}

/// The defaults the module was loaded with, for the `config` section.
static LOADED: std::sync::OnceLock<(Defaults, bool)> = std::sync::OnceLock::new();

/// Remembers the load arguments for `INFO tidemark`.
pub fn loaded_with(defaults: Defaults, legacy_names: bool) {
    let _ = LOADED.set((defaults, legacy_names));
}

/// The `INFO` callback: Redis calls it for `INFO`, `INFO tidemark`, `INFO modules`, `INFO
/// everything`.
///
/// # Safety
/// Called by Redis with a live info context, after `RedisModule_Init`.
pub unsafe extern "C" fn info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    // SAFETY: the info functions are set by `RedisModule_Init`; every string passed is a
    // NUL-terminated buffer alive across its call.
    unsafe {
        let (Some(section), Some(dict), Some(end_dict), Some(int), Some(text)) = (
            raw::RedisModule_InfoAddSection,
            raw::RedisModule_InfoBeginDictField,
            raw::RedisModule_InfoEndDictField,
            raw::RedisModule_InfoAddFieldLongLong,
            raw::RedisModule_InfoAddFieldCString,
        ) else {
            return;
        };
        section(ctx, c"keys".as_ptr());
        for (t, name) in TYPE_NAMES.iter().enumerate() {
            let Ok(name) = CString::new(*name) else {
                continue;
            };
            dict(ctx, name.as_ptr());
            int(ctx, c"keys".as_ptr(), KEYS[t].load(Ordering::Relaxed));
            int(ctx, c"bytes".as_ptr(), BYTES[t].load(Ordering::Relaxed));
            end_dict(ctx);
        }
        section(ctx, c"commands".as_ptr());
        int(
            ctx,
            c"refused_for_limits".as_ptr(),
            REFUSED_FOR_LIMITS.load(Ordering::Relaxed) as i64,
        );
        section(ctx, c"config".as_ptr());
        let (d, legacy) = LOADED.get().copied().unwrap_or((Defaults::BUILT_IN, false));
        for (field, value) in [
            (c"epsilon", d.epsilon.to_string()),
            (c"precision", d.precision.to_string()),
            (c"delta", d.delta.to_string()),
            (c"phi", d.phi.to_string()),
            (c"alpha", d.alpha.to_string()),
            (
                c"legacy_names",
                (if legacy { "yes" } else { "no" }).to_string(),
            ),
        ] {
            if let Ok(v) = CString::new(value) {
                text(ctx, field.as_ptr(), v.as_ptr());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Counter, Value};

    #[test]
    fn keys_and_bytes_follow_values_in_and_out() {
        let hist = tidemark::window::ExpHistogram::ticks(60_000, 0.01).unwrap();
        let t = Value::Count(Counter { hist: hist.clone() }).type_index();
        let (k0, b0) = (
            KEYS[t].load(Ordering::Relaxed),
            BYTES[t].load(Ordering::Relaxed),
        );
        let a = Held::new(Value::Count(Counter { hist }));
        let mut b = a.clone();
        b.grew(100);
        b.grew(-1_000_000);
        assert_eq!(b.counted, 0, "never below nothing");
        assert_eq!(KEYS[t].load(Ordering::Relaxed) - k0, 2);
        assert_eq!(BYTES[t].load(Ordering::Relaxed) - b0, a.counted);
        drop(a);
        drop(b);
        assert_eq!(KEYS[t].load(Ordering::Relaxed), k0);
        assert_eq!(BYTES[t].load(Ordering::Relaxed), b0);
    }
}
