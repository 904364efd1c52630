//! After the first call of a given size, a sequential gradient allocates nothing.

use adjoint_core::prelude::*;
use adjoint_tape::{Tape, Var};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to `System` unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static A: Counting = Counting;

fn rosen<T: Real>(x: &[T]) -> T {
    x.windows(2)
        .map(|w| (w[1] - w[0] * w[0]).powi(2) * 100.0 + (T::cst(1.0) - w[0]).powi(2))
        .sum()
}

#[test]
fn steady_state_gradient_does_not_allocate() {
    let x: Vec<f64> = (0..1000).map(|i| (i as f64 * 0.01).sin()).collect();
    let mut g = vec![0.0; x.len()];
    let mut tape = Tape::new();
    tape.grad_into(|v: &[Var]| rosen(v), &x, &mut g);
    tape.grad_into(|v: &[Var]| rosen(v), &x, &mut g);
    let before = ALLOCS.load(Relaxed);
    let y = tape.grad_into(|v: &[Var]| rosen(v), &x, &mut g);
    let after = ALLOCS.load(Relaxed);
    assert_eq!(
        after - before,
        0,
        "allocations in a steady-state gradient call"
    );
    assert_eq!(y, rosen(&x));
    let f = adjoint_core::forward::gradient(|v| rosen(v), &x[..10]);
    let mut g10 = vec![0.0; 10];
    tape.grad_into(|v: &[Var]| rosen(v), &x[..10], &mut g10);
    for (a, b) in g10.iter().zip(&f) {
        assert!((a - b).abs() <= 1e-13 * b.abs().max(1.0), "{a} vs {b}");
    }
}
