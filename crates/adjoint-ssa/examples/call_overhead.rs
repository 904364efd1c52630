//! What a call between `#[differentiable]` functions costs: an RK4 integrator written with a
//! helper `field(x, y, a) -> (f64, f64)` called four times a step, against the same integrator
//! with the helper written out. Prints the primal's time and each gradient's, and their ratio.
//!
//! `cargo run --release -p adjoint-ssa --example call_overhead`

use adjoint_ssa::differentiable;
use std::hint::black_box;
use std::time::Instant;

#[differentiable]
fn field(x: f64, y: f64, a: f64) -> (f64, f64) {
    (y, -a * x - 0.1 * y * y * y)
}

#[differentiable]
fn rk4_calls(p: &[f64]) -> f64 {
    let (mut x, mut y, a) = (p[0], p[1], p[2]);
    let h = 0.05;
    for _ in 0..400 {
        let (k1x, k1y) = field(x, y, a);
        let (k2x, k2y) = field(x + 0.5 * h * k1x, y + 0.5 * h * k1y, a);
        let (k3x, k3y) = field(x + 0.5 * h * k2x, y + 0.5 * h * k2y, a);
        let (k4x, k4y) = field(x + h * k3x, y + h * k3y, a);
        x += h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x);
        y += h / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y);
    }
    x * x + y
}

#[differentiable]
fn rk4_inline(p: &[f64]) -> f64 {
    let (mut x, mut y, a) = (p[0], p[1], p[2]);
    let h = 0.05;
    for _ in 0..400 {
        let (k1x, k1y) = (y, -a * x - 0.1 * y * y * y);
        let (x2, y2) = (x + 0.5 * h * k1x, y + 0.5 * h * k1y);
        let (k2x, k2y) = (y2, -a * x2 - 0.1 * y2 * y2 * y2);
        let (x3, y3) = (x + 0.5 * h * k2x, y + 0.5 * h * k2y);
        let (k3x, k3y) = (y3, -a * x3 - 0.1 * y3 * y3 * y3);
        let (x4, y4) = (x + h * k3x, y + h * k3y);
        let (k4x, k4y) = (y4, -a * x4 - 0.1 * y4 * y4 * y4);
        x += h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x);
        y += h / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y);
    }
    x * x + y
}

/// The best of 30 rounds of 200 calls, in seconds per call.
fn time(mut f: impl FnMut() -> f64) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..30 {
        let t = Instant::now();
        for _ in 0..200 {
            black_box(f());
        }
        best = best.min(t.elapsed().as_secs_f64() / 200.0);
    }
    best
}

fn main() {
    let p = [1.0, 0.3, 2.0];
    let mut g = [0.0; 3];
    let primal = time(|| rk4_calls(black_box(&p)));
    let calls = time(|| rk4_calls::grad(black_box(&p), &mut g));
    let inline = time(|| rk4_inline::grad(black_box(&p), &mut g));
    println!("RK4, 400 steps, 4 calls of `field` a step (best of 30 rounds of 200)");
    println!("primal                  {:8.2} µs", primal * 1e6);
    println!(
        "gradient, with calls    {:8.2} µs  {:.2}× primal",
        calls * 1e6,
        calls / primal
    );
    println!(
        "gradient, written out   {:8.2} µs  {:.2}× primal",
        inline * 1e6,
        inline / primal
    );
}
