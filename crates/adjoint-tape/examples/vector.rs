//! A profiling target: slice primitives on the tape (dot, matvec and seed 003's network, as the
//! bench's vector rows). `cargo run --release -p adjoint-tape --example vector [dot|matvec|network|network-tape]`
use adjoint_core::{vector, Real};
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

fn dense_relu<T: Real>(w: &[T], b: &[T], x: &[T]) -> Vec<T> {
    let mut a = vec![T::from(0.0); b.len()];
    vector::matvec(w, x, &mut a);
    a.iter().zip(b).map(|(&a, &b)| (a + b).max(0.0)).collect()
}

fn network<T: Real>(p: &[T]) -> T {
    let (w1, rest) = p.split_at(100 * 50);
    let (b1, rest) = rest.split_at(100);
    let (w2, rest) = rest.split_at(50 * 100);
    let (b2, x) = rest.split_at(50);
    let h = dense_relu(w2, b2, &dense_relu(w1, b1, x));
    let lse = vector::logsumexp(&h);
    let e: Vec<T> = h.iter().map(|&z| (z - lse).exp()).collect();
    vector::sum(&e)
}

fn main() {
    let only = std::env::args().nth(1).unwrap_or_default();
    let run = |name: &str| only.is_empty() || only.starts_with(name);
    if run("network") {
        let p: Vec<f64> = (0..10_200).map(|i| (i as f64 * 0.37).sin()).collect();
        let mut g = vec![0.0; p.len()];
        let mut tape = Tape::new();
        if only != "network-tape" {
            time("network primal", 20000, || {
                black_box(network(black_box(&p)));
            });
        }
        time("network tape", 20000, || {
            tape.grad_into(|v: &[Var]| network(v), black_box(&p), &mut g);
        });
    }
    if !(run("dot") || run("matvec")) {
        return;
    }
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
