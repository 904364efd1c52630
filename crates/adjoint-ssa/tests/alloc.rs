//! A steady-state gradient call allocates nothing (counting global allocator). The count is
//! per thread, so tests running in parallel (and the harness) do not add to each other's.

#![allow(clippy::needless_range_loop)]

use adjoint_ssa::{differentiable, Differentiable, Workspace};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    /// Allocations made by this thread (const-initialised, no destructor: usable from the
    /// allocator at any point of a thread's life).
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

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

#[differentiable]
fn f(x: &[f64], y: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        let mut t = x[i] * y;
        let mut k = 0;
        while k < 3 {
            t = t.sin() + 0.5 * t;
            k += 1;
        }
        if t > 0.0 {
            s += t.exp();
        } else {
            s -= t;
        }
    }
    s
}

#[test]
fn steady_state_calls_allocate_nothing() {
    let x: Vec<f64> = (0..500).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut g = vec![0.0; x.len()];
    let mut dy = 0.0;
    let mut ws = Workspace::new();
    f::grad_with(&mut ws, &x, 0.8, &mut g, &mut dy); // warm-up grows the stacks
    f::grad(&x, 0.8, &mut g, &mut dy); // and the thread's workspace
    let before = allocs();
    for _ in 0..10 {
        f::grad_with(&mut ws, &x, 0.8, &mut g, &mut dy);
        f::grad(&x, 0.8, &mut g, &mut dy);
    }
    assert_eq!(allocs(), before, "a steady-state call allocated");
    assert!(ws.capacity_bytes() > 0);
}

#[derive(Clone, Copy, Differentiable)]
struct Layer<T = f64> {
    w: [T; 4],
    b: T,
}

/// A struct parameter, an array parameter and a tuple result, in a loop that pushes.
#[differentiable]
fn layer(p: &Layer, x: &[f64], scale: [f64; 2]) -> (f64, [f64; 2]) {
    let mut s = 0.0;
    let mut acc = [0.0; 2];
    for i in 0..x.len() {
        let mut t = p.b;
        for k in 0..4 {
            t = (t + p.w[k] * x[i]).tanh();
        }
        s += t * scale[0];
        acc[i % 2] += t * t * scale[1];
    }
    (s, acc)
}

#[test]
fn steady_state_struct_and_array_calls_allocate_nothing() {
    let x: Vec<f64> = (0..300).map(|i| (i as f64 * 0.21).cos()).collect();
    let p = Layer {
        w: [0.3, -0.2, 0.5, 0.1],
        b: 0.05,
    };
    let mut ws = Workspace::new();
    let (mut dp, mut dx, mut ds) = (Layer::zero(), vec![0.0; x.len()], [0.0; 2]);
    let mut run = |ws: &mut Workspace<f64>| {
        ws.clear();
        dp.set_zero();
        layer::pullback(
            ws,
            &p,
            &x,
            [1.5, 0.5],
            &mut dp,
            &mut dx,
            &mut ds,
            (1.0, [0.5, -0.25]),
        )
    };
    run(&mut ws); // warm-up grows the stacks
    let before = allocs();
    for _ in 0..10 {
        run(&mut ws);
    }
    assert_eq!(allocs(), before, "a steady-state call allocated");
    assert!(ws.capacity_bytes() > 0);
}

#[differentiable]
fn rotate(c: f64, s: f64, px: f64, py: f64) -> (f64, f64) {
    (px * c - py * s, px * s + py * c)
}

/// Calls with tuple results inside a loop that pushes: the callee's pullback runs per
/// iteration on the same workspace.
#[differentiable]
fn spin(t: &[f64]) -> f64 {
    let (mut px, mut py) = (1.0, 0.0);
    for i in 0..t.len() {
        let (a, b) = rotate(t[i].cos(), t[i].sin(), px, py);
        px = a;
        py = b;
    }
    px * py
}

#[test]
fn steady_state_tuple_result_calls_allocate_nothing() {
    let t: Vec<f64> = (0..200).map(|i| (i as f64 * 0.13).sin()).collect();
    let mut g = vec![0.0; t.len()];
    let mut ws = Workspace::new();
    spin::grad_with(&mut ws, &t, &mut g); // warm-up grows the stacks
    let before = allocs();
    for _ in 0..10 {
        spin::grad_with(&mut ws, &t, &mut g);
    }
    assert_eq!(allocs(), before, "a steady-state call allocated");
    // the gradient is right, too: ∂(cos a sin a)/∂tᵢ = cos 2a with a = Σt
    let a: f64 = t.iter().sum();
    assert!(g.iter().all(|gi| (gi - (2.0 * a).cos()).abs() < 1e-9));
}

#[differentiable]
fn weighted(w: &[f64], x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..w.len() {
        s += (w[i] * x[i]).tanh();
    }
    s
}

/// A passive slice passed to a call in a loop: its adjoint goes to a pooled scratch buffer;
/// and one slice passed twice, whose second adjoint does too.
#[differentiable(wrt(w))]
fn over_rows(w: &[f64], xs: &[f64]) -> f64 {
    let n = w.len();
    let mut s = 0.0;
    for r in 0..xs.len() / n {
        s += weighted(w, &xs[r * n..(r + 1) * n]);
    }
    s + 0.5 * weighted(w, w)
}

#[test]
fn steady_state_calls_with_passive_slices_allocate_nothing() {
    let w = [0.3, -0.2, 0.5, 0.1];
    let xs: Vec<f64> = (0..400).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut g = [0.0; 4];
    let mut ws = Workspace::new();
    over_rows::grad_with(&mut ws, &w, &xs, &mut g); // warm-up: stacks and the scratch pool
    let before = allocs();
    for _ in 0..10 {
        over_rows::grad_with(&mut ws, &w, &xs, &mut g);
    }
    assert_eq!(allocs(), before, "a steady-state call allocated");
    // and the gradient: Σ over rows of x (1 − tanh²(w·x)) per element, plus w (1 − tanh²(w²))
    for k in 0..4 {
        let want: f64 = xs
            .chunks(4)
            .map(|x| x[k] * (1.0 - (w[k] * x[k]).tanh().powi(2)))
            .sum::<f64>()
            + w[k] * (1.0 - (w[k] * w[k]).tanh().powi(2));
        assert!((g[k] - want).abs() < 1e-12 * (1.0 + want.abs()), "{k}");
    }
}

/// Loop-free with a branch (BA's projection is this shape): its sweeps keep nothing, so a
/// fresh `Workspace::new()` is never grown, not even by a first call, and `grad` leaves the
/// thread's workspace alone.
#[differentiable]
fn project(r: f64, x: f64, y: f64) -> f64 {
    let mut p = x * r;
    if r != 0.0 {
        let (s, c) = (r.sin(), r.cos());
        p = x * c - y * s;
    }
    p / (1.0 + y * y)
}

#[test]
fn a_function_that_keeps_nothing_uses_no_workspace() {
    let before = allocs();
    let (mut dr, mut dx, mut dy) = (0.0, 0.0, 0.0);
    for r in [0.0, 0.7] {
        let mut ws = Workspace::new();
        project::pullback(&mut ws, r, 1.5, -0.5, &mut dr, &mut dx, &mut dy, 1.0);
        assert_eq!(ws.capacity_bytes(), 0);
        let (mut gr, mut gx, mut gy) = (0.0, 0.0, 0.0);
        let v = project::grad(r, 1.5, -0.5, &mut gr, &mut gx, &mut gy);
        assert_eq!(v, project(r, 1.5, -0.5));
        // against forward mode
        use adjoint_core::forward::Dual;
        let d = |i: usize| {
            let e = |j: usize| if i == j { 1.0 } else { 0.0 };
            project::primal(
                Dual::new(r, e(0)),
                Dual::new(1.5, e(1)),
                Dual::new(-0.5, e(2)),
            )
            .eps
        };
        for (i, g) in [gr, gx, gy].into_iter().enumerate() {
            assert!(
                (g - d(i)).abs() <= 1e-14 * (1.0 + g.abs()),
                "∂{i}: {g} vs {}",
                d(i)
            );
        }
    }
    assert_eq!(allocs(), before, "a function that keeps nothing allocated");
    adjoint_ssa::with_workspace(|ws| assert_eq!(ws.capacity_bytes(), 0));
}
