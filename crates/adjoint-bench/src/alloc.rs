//! A counting global allocator: peak heap bytes of one call, for the "peak memory" column.
//!
//! The bench binary installs it with `#[global_allocator]`; tests that need to count
//! allocations install their own. It counts only inside [`peak_during`], which the harness calls
//! on a separate, untimed call: outside it, an allocation costs one relaxed load of a flag that
//! never changes during timing (a read-shared cache line), so timed calls do not pay for the
//! memory column. (Counting does three read-modify-writes on shared atomics per allocation; in
//! the timed path that serialised every parallel engine's allocations.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicUsize, Ordering::Relaxed};

/// The system allocator, counting live and peak bytes and allocation calls.
pub struct CountingAlloc;

/// Bytes allocated minus bytes freed since the current measurement started (negative when it
/// frees blocks allocated before).
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);
static CALLS: AtomicUsize = AtomicUsize::new(0);
/// On only during [`peak_during`].
static COUNTING: AtomicBool = AtomicBool::new(false);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the counters
// are plain atomics and never influence what is allocated.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() && COUNTING.load(Relaxed) {
            let size = layout.size() as isize;
            let live = LIVE.fetch_add(size, Relaxed) + size;
            PEAK.fetch_max(live, Relaxed);
            CALLS.fetch_add(1, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        if COUNTING.load(Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Relaxed);
        }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() && COUNTING.load(Relaxed) {
            if new_size >= layout.size() {
                let grow = (new_size - layout.size()) as isize;
                let live = LIVE.fetch_add(grow, Relaxed) + grow;
                PEAK.fetch_max(live, Relaxed);
            } else {
                LIVE.fetch_sub((layout.size() - new_size) as isize, Relaxed);
            }
            CALLS.fetch_add(1, Relaxed);
        }
        p
    }
}

/// Bytes allocated above the level at entry, at the peak during `f`, and the number of
/// allocation calls `f` made. Meaningful only when [`CountingAlloc`] is the global allocator
/// (otherwise both are 0). Counting is on only while `f` runs; not reentrant (the harness
/// measures one call at a time).
pub fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize, usize) {
    LIVE.store(0, Relaxed);
    PEAK.store(0, Relaxed);
    let calls = CALLS.load(Relaxed);
    COUNTING.store(true, Relaxed);
    let r = f();
    COUNTING.store(false, Relaxed);
    let peak = PEAK.load(Relaxed).max(0) as usize;
    (r, peak, CALLS.load(Relaxed) - calls)
}
