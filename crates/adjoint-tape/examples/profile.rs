//! A profiling target: Rosenbrock gradients on the tape.
use adjoint_core::prelude::*;
use adjoint_tape::{Tape, Var};

fn rosen<T: Real>(x: &[T]) -> T {
    x.windows(2)
        .map(|w| {
            let t = w[1] - w[0] * w[0];
            let u = T::cst(1.0) - w[0];
            t * t * 100.0 + u * u
        })
        .sum()
}

fn main() {
    let x: Vec<f64> = (0..10_000).map(|i| (i as f64 * 0.01).sin()).collect();
    let mut g = vec![0.0; x.len()];
    let mut tape = Tape::new();
    let t = std::time::Instant::now();
    let reps = 2000;
    for _ in 0..reps {
        tape.grad_into(|v: &[Var]| rosen(v), &x, &mut g);
    }
    let per = t.elapsed().as_secs_f64() / reps as f64;
    let t = std::time::Instant::now();
    let mut s = 0.0;
    for _ in 0..reps {
        s += rosen(std::hint::black_box(&x));
    }
    let prim = t.elapsed().as_secs_f64() / reps as f64;
    println!(
        "grad {:.1} µs, primal {:.1} µs, ratio {:.1}, {s}",
        per * 1e6,
        prim * 1e6,
        per / prim
    );
}
