//! Gradient time over primal time for a few benchmark functions:
//! `cargo run --release -p adjoint-ssa --example ratio`.

use adjoint_ssa::{differentiable, Workspace};
use std::hint::black_box;
use std::time::Instant;

#[differentiable]
pub fn sincos(x: f64) -> f64 {
    x.cos().sin()
}

#[differentiable]
pub fn pow_loop(x: f64, p: usize) -> f64 {
    let mut r = 1.0;
    for _ in 0..p {
        r *= x;
    }
    r
}

#[differentiable]
pub fn logsumexp(x: &[f64]) -> f64 {
    let mut m = f64::NEG_INFINITY;
    for &v in x.iter() {
        m = m.max(v);
    }
    let mut s = 0.0;
    for &v in x.iter() {
        s += (v - m).exp();
    }
    s.ln() + m
}

#[differentiable]
pub fn rosenbrock(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() - 1 {
        let t = x[i + 1] - x[i] * x[i];
        let u = 1.0 - x[i];
        s += 100.0 * t * t + u * u;
    }
    s
}

#[differentiable]
pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    let mut s = 0.0;
    for (a, b) in x.iter().zip(y.iter()) {
        s += a * b;
    }
    s
}

#[differentiable]
pub fn matvec(m: &[f64], v: &[f64]) -> f64 {
    let n = v.len();
    let mut total = 0.0;
    for i in 0..n {
        let mut acc = 0.0;
        for j in 0..n {
            acc += m[i * n + j] * v[j];
        }
        total += acc;
    }
    total
}

fn time(mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    let mut best = f64::INFINITY;
    for _ in 0..7 {
        let mut reps = 1u64;
        loop {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            let e = t.elapsed().as_secs_f64();
            if e > 0.02 {
                best = best.min(e / reps as f64);
                break;
            }
            reps *= 2;
        }
    }
    best
}

fn row(name: &str, p: f64, g: f64) {
    println!(
        "{name:<22} primal {:>10.3} µs   grad {:>10.3} µs   ratio {:>5.2}",
        p * 1e6,
        g * 1e6,
        g / p
    );
}

fn main() {
    let mut ws = Workspace::new();
    let mut d = 0.0;
    row(
        "sincos",
        time(|| {
            black_box(sincos(black_box(0.7)));
        }),
        time(|| {
            black_box(sincos::grad_with(&mut ws, black_box(0.7), &mut d));
        }),
    );
    row(
        "loop p=1000",
        time(|| {
            black_box(pow_loop(black_box(1.0005), black_box(1000)));
        }),
        time(|| {
            black_box(pow_loop::grad_with(
                &mut ws,
                black_box(1.0005),
                black_box(1000),
                &mut d,
            ));
        }),
    );
    let x: Vec<f64> = (0..1000)
        .map(|i| ((i * 7919) % 1000) as f64 / 333.0)
        .collect();
    let mut g = vec![0.0; x.len()];
    row(
        "logsumexp n=1000",
        time(|| {
            black_box(logsumexp(black_box(&x)));
        }),
        time(|| {
            black_box(logsumexp::grad_with(&mut ws, black_box(&x), &mut g));
        }),
    );
    for n in [100usize, 10_000] {
        let x: Vec<f64> = (0..n)
            .map(|i| 0.5 + ((i * 7919) % 1000) as f64 / 1000.0)
            .collect();
        let mut g = vec![0.0; n];
        row(
            &format!("rosenbrock n={n}"),
            time(|| {
                black_box(rosenbrock(black_box(&x)));
            }),
            time(|| {
                black_box(rosenbrock::grad_with(&mut ws, black_box(&x), &mut g));
            }),
        );
    }
    let (x, y): (Vec<f64>, Vec<f64>) = (0..10_000)
        .map(|i| (i as f64 * 1e-4, 1.0 - i as f64 * 1e-4))
        .unzip();
    let (mut gx, mut gy) = (vec![0.0; x.len()], vec![0.0; y.len()]);
    row(
        "dot n=10000",
        time(|| {
            black_box(dot(black_box(&x), black_box(&y)));
        }),
        time(|| {
            black_box(dot::grad_with(
                &mut ws,
                black_box(&x),
                black_box(&y),
                &mut gx,
                &mut gy,
            ));
        }),
    );
    let n = 100;
    let m: Vec<f64> = (0..n * n).map(|i| (i % 17) as f64 * 0.1).collect();
    let v: Vec<f64> = (0..n).map(|i| i as f64 * 0.01).collect();
    let (mut gm, mut gv) = (vec![0.0; n * n], vec![0.0; n]);
    row(
        "matvec n=100",
        time(|| {
            black_box(matvec(black_box(&m), black_box(&v)));
        }),
        time(|| {
            black_box(matvec::grad_with(
                &mut ws,
                black_box(&m),
                black_box(&v),
                &mut gm,
                &mut gv,
            ));
        }),
    );
}

#[inline(never)]
#[no_mangle]
pub fn probe_pow_loop(ws: &mut Workspace<f64>, x: f64, p: usize, d: &mut f64) -> f64 {
    pow_loop::grad_with(ws, x, p, d)
}
