#![allow(clippy::all, unused)]
use adjoint_core::check;
use adjoint_core::forward::{self, Dual};
use adjoint_ssa::{differentiable, Workspace};

fn fd(f: &dyn Fn(&[f64]) -> f64, x: &[f64]) -> Vec<f64> {
    let h = 1e-6;
    (0..x.len())
        .map(|i| {
            let mut a = x.to_vec();
            let mut b = x.to_vec();
            a[i] += h;
            b[i] -= h;
            (f(&a) - f(&b)) / (2.0 * h)
        })
        .collect()
}
fn cmp(name: &str, g: &[f64], w: &[f64]) {
    let ok = g
        .iter()
        .zip(w)
        .all(|(a, b)| (a - b).abs() < 1e-5 * (1.0 + b.abs()));
    println!(
        "{name}: {} got {g:?} want {w:?}",
        if ok { "OK" } else { "MISMATCH" }
    );
}

#[differentiable]
fn polar(r: f64, t: f64) -> (f64, f64) {
    (r * t.cos(), r * t.sin())
}

#[differentiable]
fn rot(x: f64, y: f64, t: f64) -> (f64, f64) {
    (x * t.cos() - y * t.sin(), x * t.sin() + y * t.cos())
}

// A: loop-carried call results
#[differentiable]
fn spin(x0: f64, t: f64) -> f64 {
    let mut x = x0;
    let mut y = 0.5 * x0;
    for _ in 0..4 {
        let (a, b) = rot(x, y, t);
        x = a * 1.01;
        y = b;
    }
    x * y
}
// B: results used only in branches
#[differentiable]
fn branchy(r: f64, t: f64) -> f64 {
    let (c, s) = polar(r, t);
    if r > 1.0 {
        s * s
    } else {
        c * 3.0
    }
}
// C: call in one branch, joined
#[differentiable]
fn joined(r: f64, t: f64) -> f64 {
    let mut a = r;
    let mut b = t;
    if t > 0.0 {
        let (x, y) = polar(r, t);
        a = x;
        b = y;
    }
    a * b
}
// D: second result used in/after loop, call in loop with second result carried out
#[differentiable]
fn after(x: &[f64], r: f64, t: f64) -> f64 {
    let (c, s) = polar(r, t);
    let mut acc = 0.0;
    for i in 0..x.len() {
        acc += x[i] * s;
    }
    acc + c * s
}
#[differentiable]
fn last_in_loop(x: &[f64]) -> f64 {
    let mut c = 0.0;
    let mut s = 0.0;
    for i in 0..x.len() {
        let (a, b) = polar(x[i], 0.3 * x[i]);
        c += a;
        s = b;
    }
    c * s
}
#[differentiable]
fn only_second_in_loop(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        let (_a, b) = polar(x[i], s + 0.1);
        s = s + b;
    }
    s
}
#[differentiable]
fn second_result_accum(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        let (_a, b) = polar(x[i], 0.7);
        s += b;
    }
    s
}
// F: reshape
#[differentiable]
fn swapcall(r: f64, t: f64) -> (f64, f64) {
    let (a, b) = polar(r, t);
    polar(b, a)
}
#[differentiable]
fn named_tail(r: f64, t: f64) -> (f64, f64) {
    let p = polar(r, t);
    p
}
#[differentiable]
fn use_swap(r: f64, t: f64) -> f64 {
    let (a, b) = swapcall(r, t);
    let (c, d) = named_tail(a, b);
    a + 2.0 * b + c * d
}
// G: Elems in loop with array rewritten
#[differentiable]
fn norm(v: &[f64]) -> f64 {
    v.iter().map(|a| a * a).sum::<f64>().sqrt()
}
#[differentiable]
fn sum3(v: [f64; 3]) -> f64 {
    v[0] + 2.0 * v[1] + 3.0 * v[2] * v[2]
}
#[differentiable]
fn evolve(x: &[f64]) -> f64 {
    let mut v = [x[0], x[1], x[2]];
    let mut s = 0.0;
    for k in 0..3 {
        let n = norm(&v);
        s += n;
        v[k] = v[k] * n;
        let m = sum3(v);
        v[(k + 1) % 3] = m * 0.1;
        s += m;
    }
    s + norm(&v)
}
#[differentiable]
fn elems_after(x: &[f64]) -> f64 {
    let mut v = [0.0; 3];
    v[0] = x[0];
    v[1] = x[1] * x[0];
    v[2] = x[2];
    let n = norm(&v);
    v[1] = n * x[2];
    v[0] += n;
    let m = norm(&v);
    n * m + v[1]
}
// array result then modified then passed
#[differentiable]
fn cross(a: &[f64], b: &[f64]) -> [f64; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
#[differentiable]
fn cross_chain(a: &[f64], b: &[f64]) -> f64 {
    let mut v: [f64; 3] = cross(a, b);
    for i in 0..3 {
        let w: [f64; 3] = cross(&v, b);
        v[i] = w[i] + v[i];
    }
    norm(&v)
}
// H: dot with same slice passed twice plus passive
#[differentiable]
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..a.len() {
        s += a[i] * b[i];
    }
    s
}
#[differentiable(wrt(w))]
fn wdot(w: &[f64], xs: &[f64]) -> f64 {
    dot(xs, xs) * dot(w, xs) + dot(w, w) + dot(&xs[1..], &w[1..])
}
// nested calls with passive and twice slices
#[differentiable(wrt(w))]
fn outer(w: &[f64], xs: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..2 {
        s += dot(w, xs) * dot(w, w) * dot(xs, xs) + dot(xs, w);
    }
    s
}

#[test]
fn review() {
    let g2 = |f: &dyn Fn(f64, f64) -> f64, a: f64, b: f64| fd(&|v: &[f64]| f(v[0], v[1]), &[a, b]);
    let (mut d0, mut d1) = (0.0, 0.0);
    spin::grad(0.7, 0.3, &mut d0, &mut d1);
    cmp("spin", &[d0, d1], &g2(&|a, b| spin(a, b), 0.7, 0.3));
    for r in [0.5, 1.5] {
        let (mut d0, mut d1) = (0.0, 0.0);
        branchy::grad(r, 0.3, &mut d0, &mut d1);
        cmp("branchy", &[d0, d1], &g2(&|a, b| branchy(a, b), r, 0.3));
    }
    for t in [-0.5, 0.5] {
        let (mut d0, mut d1) = (0.0, 0.0);
        joined::grad(1.2, t, &mut d0, &mut d1);
        cmp("joined", &[d0, d1], &g2(&|a, b| joined(a, b), 1.2, t));
    }
    let x = [0.3, -0.7, 1.1, 0.4];
    let (mut dx, mut dr, mut dt) = ([0.0; 4], 0.0, 0.0);
    after::grad(&x, 1.3, 0.4, &mut dx, &mut dr, &mut dt);
    cmp("after x", &dx, &fd(&|v| after(v, 1.3, 0.4), &x));
    cmp(
        "after rt",
        &[dr, dt],
        &g2(&|a, b| after(&x, a, b), 1.3, 0.4),
    );
    let mut g = [0.0; 4];
    last_in_loop::grad(&x, &mut g);
    cmp("last_in_loop", &g, &fd(&|v| last_in_loop(v), &x));
    let mut g = [0.0; 4];
    only_second_in_loop::grad(&x, &mut g);
    cmp(
        "only_second_in_loop",
        &g,
        &fd(&|v| only_second_in_loop(v), &x),
    );
    let mut g = [0.0; 4];
    second_result_accum::grad(&x, &mut g);
    cmp(
        "second_result_accum",
        &g,
        &fd(&|v| second_result_accum(v), &x),
    );
    let (mut d0, mut d1) = (0.0, 0.0);
    use_swap::grad(0.8, 0.3, &mut d0, &mut d1);
    cmp("use_swap", &[d0, d1], &g2(&|a, b| use_swap(a, b), 0.8, 0.3));
    let x3 = [0.3, -0.7, 1.1];
    let mut g = [0.0; 3];
    evolve::grad(&x3, &mut g);
    cmp("evolve", &g, &fd(&|v| evolve(v), &x3));
    let mut g = [0.0; 3];
    elems_after::grad(&x3, &mut g);
    cmp("elems_after", &g, &fd(&|v| elems_after(v), &x3));
    let b3 = [0.2, 0.5, -0.4];
    let mut ga = [0.0; 3];
    let mut gb = [0.0; 3];
    cross_chain::grad(&x3, &b3, &mut ga, &mut gb);
    cmp("cross_chain a", &ga, &fd(&|v| cross_chain(v, &b3), &x3));
    cmp("cross_chain b", &gb, &fd(&|v| cross_chain(&x3, v), &b3));
    let w = [0.5, -0.2, 0.9];
    let mut gw = [0.0; 3];
    wdot::grad(&w, &x3, &mut gw);
    cmp("wdot", &gw, &fd(&|v| wdot(v, &x3), &w));
    let mut gw = [0.0; 3];
    outer::grad(&w, &x3, &mut gw);
    cmp("outer", &gw, &fd(&|v| outer(v, &x3), &w));
}
