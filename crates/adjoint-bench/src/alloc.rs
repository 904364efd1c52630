//! A counting global allocator: peak heap bytes of one call, for the "peak memory" column.
//!
//! The bench binary installs it with `#[global_allocator]`; tests that need to count
//! allocations install their own. Counting costs two relaxed atomic operations per allocation,
//! the same for every engine.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The system allocator, counting live and peak bytes and allocation calls.
pub struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the counters
// are plain atomics and never influence what is allocated.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(live, Relaxed);
            CALLS.fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                let grow = new_size - layout.size();
                let live = LIVE.fetch_add(grow, Relaxed) + grow;
                PEAK.fetch_max(live, Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Relaxed);
            }
            CALLS.fetch_add(1, Relaxed);
        }
        p
    }
}

/// Bytes allocated above the level at entry, at the peak during `f`, and the number of
/// allocation calls `f` made. Meaningful only when [`CountingAlloc`] is the global allocator
/// (otherwise both are 0).
pub fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize, usize) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let calls = CALLS.load(Relaxed);
    let r = f();
    let peak = PEAK.load(Relaxed).saturating_sub(base);
    (r, peak, CALLS.load(Relaxed) - calls)
}
