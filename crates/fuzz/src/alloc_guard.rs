//! A global allocator that remembers, per thread, the largest single
//! request since the last [`reset`], so the runner can tell an input that
//! made a decoder reserve more than any input may ask for (a forged length
//! trusted before checking) from one that was merely refused.
//!
//! The fuzz binary installs it; unit tests do not, and [`active`] says so.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // Const-initialized and without a destructor, so reading it inside the
    // allocator never allocates.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, watched.
pub struct AllocationGuard;

fn note(size: usize) {
    // `try_with` fails only while the thread is being torn down.
    let _ = LARGEST.try_with(|l| {
        if size > l.get() {
            l.set(size);
        }
    });
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the bookkeeping touches only a thread-local `Cell`.
unsafe impl GlobalAlloc for AllocationGuard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's layout obligations pass through unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: as for `dealloc`; `new_size` is the caller's to uphold.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Forgets the largest request seen on this thread.
pub fn reset() {
    LARGEST.with(|l| l.set(0));
}

/// The largest single request on this thread since [`reset`] (0 when the
/// guard is not the global allocator).
pub fn largest() -> usize {
    LARGEST.with(Cell::get)
}

/// Whether [`AllocationGuard`] is the global allocator of this process.
pub fn active() -> bool {
    let before = largest();
    reset();
    let probe = std::hint::black_box(vec![0u8; 64]);
    let seen = largest() >= probe.len();
    LARGEST.with(|l| l.set(before));
    seen
}
