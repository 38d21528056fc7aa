//! The module's memory comes from Redis's allocator once it is loaded (so `INFO memory` and
//! `maxmemory` see it), from the system's in a process without Redis (the tests). Every byte
//! handed out or given back is counted, so a command's net allocation is known without
//! walking the value it changed (`INFO tidemark`'s bytes per type).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

use redis_module::raw;

/// Bytes allocated and not yet freed, by this module's code, since it loaded.
static NET: AtomicI64 = AtomicI64::new(0);

/// Bytes this module holds now, as its allocator counts them.
pub fn net_bytes() -> i64 {
    NET.load(Ordering::Relaxed)
}

/// Redis's allocator when the module runs inside Redis, the system's otherwise.
pub struct TmAlloc;

// SAFETY: both arms are allocators that honour `Layout`. The choice cannot change between an
// allocation and its free: `RedisModule_Alloc`/`RedisModule_Free` are set once, by
// `RedisModule_Init` at the top of `RedisModule_OnLoad`, before this library allocates
// anything (the `redis_module!` load function copies the name to a stack buffer for that
// reason), and a process without Redis never sets them.
unsafe impl GlobalAlloc for TmAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: reading a function pointer written once before any allocation (above).
        let p = match unsafe { raw::RedisModule_Alloc } {
            Some(_) => unsafe { redis_module::alloc::RedisAlloc.alloc(layout) },
            None => unsafe { System.alloc(layout) },
        };
        if !p.is_null() {
            NET.fetch_add(layout.size() as i64, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        NET.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: as for `alloc`; `ptr` came from the same arm.
        match unsafe { raw::RedisModule_Free } {
            Some(_) => unsafe { redis_module::alloc::RedisAlloc.dealloc(ptr, layout) },
            None => unsafe { System.dealloc(ptr, layout) },
        }
    }
}
