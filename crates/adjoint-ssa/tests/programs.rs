//! Small programs as users write them, built from helper functions that return tuples and
//! arrays, take arrays and struct parameters, and are called in loops: a chain energy over
//! 3-vectors, an RK4 integrator, a small network trained with `wrt(p)`, a softmax
//! cross-entropy. Each gradient against finite differences of the function as written.

#![allow(clippy::needless_range_loop)]

use adjoint_core::check;
use adjoint_ssa::{differentiable, Differentiable};

// ---------- 3-vectors ----------
#[differentiable]
fn sub3(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

#[differentiable]
fn dot3(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

#[differentiable]
fn normalize(a: [f64; 3]) -> ([f64; 3], f64) {
    let n = (a[0] * a[0] + a[1] * a[1] + a[2] * a[2]).sqrt();
    ([a[0] / n, a[1] / n, a[2] / n], n)
}

/// Angle-ish energy of a chain of points.
#[differentiable]
fn chain_energy(x: &[f64]) -> f64 {
    let n = x.len() / 3;
    let mut e = 0.0;
    for i in 1..n - 1 {
        let p0 = [x[3 * i - 3], x[3 * i - 2], x[3 * i - 1]];
        let p1 = [x[3 * i], x[3 * i + 1], x[3 * i + 2]];
        let p2 = [x[3 * i + 3], x[3 * i + 4], x[3 * i + 5]];
        let a: [f64; 3] = sub3(p1, p0);
        let b: [f64; 3] = sub3(p2, p1);
        let (ua, la): ([f64; 3], f64) = normalize(a);
        let (ub, lb): ([f64; 3], f64) = normalize(b);
        let c = dot3(&ua, &ub);
        e += (1.0 - c) + 0.5 * (la - 1.0).powi(2) + 0.5 * (lb - 1.0).powi(2);
    }
    e
}

// ---------- RK4 of a 2-D ODE ----------
#[differentiable]
fn field(x: f64, y: f64, a: f64) -> (f64, f64) {
    (y, -a * x - 0.1 * y * y * y)
}

#[differentiable]
fn rk4(p: &[f64]) -> f64 {
    let (mut x, mut y, a) = (p[0], p[1], p[2]);
    let h = 0.05;
    for _ in 0..40 {
        let (k1x, k1y) = field(x, y, a);
        let (k2x, k2y) = field(x + 0.5 * h * k1x, y + 0.5 * h * k1y, a);
        let (k3x, k3y) = field(x + 0.5 * h * k2x, y + 0.5 * h * k2y, a);
        let (k4x, k4y) = field(x + h * k3x, y + h * k3y, a);
        x += h / 6.0 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x);
        y += h / 6.0 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y);
    }
    x * x + y
}

// ---------- a tiny MLP with struct params and helpers ----------
#[derive(Clone, Copy, Debug, PartialEq, adjoint_ssa::Differentiable)]
struct Net<T = f64> {
    w1: [T; 6],
    b1: [T; 3],
    w2: [T; 3],
    b2: T,
}

#[differentiable]
fn relu(x: f64) -> f64 {
    x.max(0.0)
}

#[differentiable]
fn hidden(p: &Net, x: &[f64]) -> [f64; 3] {
    let mut h = [0.0; 3];
    for j in 0..3 {
        let mut z = p.b1[j];
        for k in 0..2 {
            z += p.w1[2 * j + k] * x[k];
        }
        h[j] = relu(z).tanh();
    }
    h
}

#[differentiable]
fn out(p: &Net, x: &[f64]) -> f64 {
    let h: [f64; 3] = hidden(p, x);
    let mut o = p.b2;
    for j in 0..3 {
        o += p.w2[j] * h[j];
    }
    o
}

#[differentiable]
fn mse(p: &Net, xs: &[f64], ys: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..ys.len() {
        let e = out(p, &xs[2 * i..2 * i + 2]) - ys[i];
        s += e * e;
    }
    s / ys.len() as f64
}

#[differentiable(wrt(p))]
fn mse_p(p: &Net, xs: &[f64], ys: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..ys.len() {
        let e = out(p, &xs[2 * i..2 * i + 2]) - ys[i];
        s += e * e;
    }
    s / ys.len() as f64
}

// --------- logsumexp helper and a softmax cross-entropy ---------
#[differentiable]
fn lse(z: &[f64]) -> (f64, f64) {
    let m = z.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
    let s: f64 = z.iter().map(|v| (v - m).exp()).sum();
    (m + s.ln(), m)
}

#[differentiable]
fn xent(z: &[f64], label: usize) -> f64 {
    let (l, _m) = lse(z);
    l - z[label]
}

fn flat(p: &Net) -> Vec<f64> {
    let mut v = p.w1.to_vec();
    v.extend(p.b1);
    v.extend(p.w2);
    v.push(p.b2);
    v
}
fn unflat(v: &[f64]) -> Net {
    Net {
        w1: v[0..6].try_into().unwrap(),
        b1: v[6..9].try_into().unwrap(),
        w2: v[9..12].try_into().unwrap(),
        b2: v[12],
    }
}

#[test]
fn a_chain_energy_over_3_vectors() {
    let x: Vec<f64> = (0..15)
        .map(|i| (i as f64 * 0.7).sin() + 0.1 * i as f64)
        .collect();
    let mut g = vec![0.0; 15];
    assert_eq!(chain_energy::grad(&x, &mut g), chain_energy(&x));
    check::check_gradient(chain_energy, &x, &g).assert_passed();
}

#[test]
fn an_rk4_integrator() {
    let p = [1.0, 0.3, 2.0];
    let mut g = [0.0; 3];
    assert_eq!(rk4::grad(&p, &mut g), rk4(&p));
    check::check_gradient(rk4, &p, &g).assert_passed();
}

#[test]
fn a_small_network() {
    let v: Vec<f64> = (0..13)
        .map(|i| ((i * 7 % 11) as f64 - 5.0) * 0.17)
        .collect();
    let net = unflat(&v);
    let xs: Vec<f64> = (0..10).map(|i| (i as f64 * 1.3).cos()).collect();
    let ys = [0.1, -0.3, 0.5, 0.2, -0.1];
    let (mut dn, mut dxs, mut dys) = (Net::zero(), vec![0.0; 10], [0.0; 5]);
    mse::grad(&net, &xs, &ys, &mut dn, &mut dxs, &mut dys);
    check::check_gradient(|v| mse(&unflat(v), &xs, &ys), &flat(&net), &flat(&dn)).assert_passed();
    check::check_gradient(|v| mse(&net, v, &ys), &xs, &dxs).assert_passed();
    check::check_gradient(|v| mse(&net, &xs, v), &ys, &dys).assert_passed();
    // only the parameters: the same gradient
    let mut dp = Net::zero();
    assert_eq!(mse_p::grad(&net, &xs, &ys, &mut dp), mse(&net, &xs, &ys));
    assert_eq!(dp, dn);
}

#[test]
fn a_softmax_cross_entropy() {
    let z = [0.3, 2.0, -1.0, 0.5];
    for label in 0..4 {
        let mut g = [0.0; 4];
        xent::grad(&z, label, &mut g);
        check::check_gradient(|z| xent(z, label), &z, &g).assert_passed();
        // closed form: softmax(z) − e_label
        let s: f64 = z.iter().map(|v| v.exp()).sum();
        for i in 0..4 {
            let want = z[i].exp() / s - if i == label { 1.0 } else { 0.0 };
            assert!((g[i] - want).abs() < 1e-12, "{label} {i}");
        }
    }
}
