//! After the first call of a given size, a sequential gradient (and a small Jacobian into a
//! buffer) allocates nothing.

use adjoint_core::prelude::*;
use adjoint_tape::{Tape, Var};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;
thread_local! {
    /// This thread's allocations (the tests run on several threads at once).
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

fn count() {
    // (`try_with`: not during the thread's teardown)
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: forwards every call to `System` unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
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
    let before = allocs();
    let y = tape.grad_into(|v: &[Var]| rosen(v), &x, &mut g);
    let after = allocs();
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

#[test]
fn steady_state_jacobian_into_does_not_allocate() {
    // a loop of 2 × 15 Jacobians, one per observation of a bundle adjustment
    fn residuals<T: Real>(v: &[T]) -> [T; 2] {
        let s: T = v.iter().copied().sum();
        [s.sin() * v[0], (v[14] * s).exp()]
    }
    let x: Vec<f64> = (0..15).map(|i| 0.1 * i as f64 - 0.4).collect();
    let mut tape = Tape::new();
    let mut j = [0.0; 30];
    tape.jacobian_into(|v: &[Var]| residuals(v), &x, &mut j);
    let before = allocs();
    for _ in 0..100 {
        tape.jacobian_into(|v: &[Var]| residuals(v), &x, &mut j);
    }
    assert_eq!(allocs() - before, 0, "allocations in 100 Jacobians");
    for row in 0..2 {
        let f = adjoint_core::forward::gradient(|v| residuals(v)[row], &x);
        for (a, b) in j[15 * row..15 * row + 15].iter().zip(&f) {
            assert!((a - b).abs() <= 1e-13 * b.abs().max(1.0), "{a} vs {b}");
        }
    }
}
