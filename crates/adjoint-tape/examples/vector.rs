//! A profiling target: slice primitives on the tape (dot and matvec, as the bench's vector rows).
use adjoint_core::vector;
use adjoint_tape::{Tape, Var};
use std::hint::black_box;
use std::time::Instant;

fn time(label: &str, reps: usize, mut f: impl FnMut()) {
    f();
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    println!(
        "{label}: {:.2} µs",
        t.elapsed().as_secs_f64() / reps as f64 * 1e6
    );
}

fn main() {
    let n = 100_000;
    let x: Vec<f64> = (0..2 * n)
        .map(|i| ((i * 7919) % 1000) as f64 / 1000.0)
        .collect();
    let mut g = vec![0.0; 2 * n];
    let mut tape = Tape::new();
    time("dot primal", 2000, || {
        black_box(vector::dot(&black_box(&x)[..n], &x[n..]));
    });
    time("dot tape", 200, || {
        tape.grad_into(
            |v: &[Var]| vector::dot(&v[..n], &v[n..]),
            black_box(&x),
            &mut g,
        );
    });
    let m = 1000;
    let x: Vec<f64> = (0..m * m + m)
        .map(|i| ((i * 7919) % 1000) as f64 / 1000.0)
        .collect();
    let mut g = vec![0.0; m * m + m];
    time("matvec primal", 200, || {
        let mut out = vec![0.0; m];
        vector::matvec(&black_box(&x)[..m * m], &x[m * m..], &mut out);
        black_box(vector::sum(&out));
    });
    time("matvec tape", 40, || {
        tape.grad_into(
            |v: &[Var]| {
                let mut out = vec![Var::constant(0.0); m];
                vector::matvec(&v[..m * m], &v[m * m..], &mut out);
                vector::sum(&out)
            },
            black_box(&x),
            &mut g,
        );
    });
}
