//! The benchmark functions (seed 002 Table 2, Rosenbrock, dot, matvec, a small network, ADBench
//! GMM), written as users write them; every gradient is checked against forward mode over the
//! generated `primal`, a hand gradient or finite differences.

// Index loops and the reference implementation's π are written on purpose, as in gmm.rs.
#![allow(clippy::needless_range_loop, clippy::approx_constant)]
use adjoint_core::{check, forward, Real};
use adjoint_ssa::{differentiable, Workspace};

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()))
}

fn assert_grad(name: &str, g: &[f64], want: &[f64], tol: f64) {
    assert_eq!(g.len(), want.len());
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(close(*a, *b, tol), "{name}: coordinate {i}: {a} vs {b}");
    }
}

fn uniform(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

// ---- seed 002 Table 2 ----

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

#[differentiable(wrt(p))]
pub fn logistic(p: &[f64], xs: &[f64], ys: &[f64], d: usize) -> f64 {
    let m = ys.len();
    let b = p[d];
    let mut total = 0.0;
    for i in 0..m {
        let mut z = b;
        for j in 0..d {
            z += p[j] * xs[i * d + j];
        }
        let t = -ys[i] * z;
        total += t.max(0.0) + (-t.abs()).exp().ln_1p();
    }
    total / m as f64
}

pub const HIDDEN: usize = 32;
pub const CLASSES: usize = 10;

/// Two-layer perceptron (tanh hidden layer), softmax cross-entropy; `p = [W1, b1, W2, b2]`.
#[differentiable(wrt(p))]
pub fn mlp(p: &[f64], image: &[f64], label: usize) -> f64 {
    let n_in = image.len();
    let mut h = [0.0; HIDDEN];
    for k in 0..HIDDEN {
        let mut a = p[HIDDEN * n_in + k];
        let row = &p[k * n_in..(k + 1) * n_in];
        for (&w, &x) in row.iter().zip(image.iter()) {
            a += w * x;
        }
        h[k] = a.tanh();
    }
    let w2 = HIDDEN * n_in + HIDDEN;
    let b2 = w2 + CLASSES * HIDDEN;
    let mut z = [0.0; CLASSES];
    let mut zmax = f64::NEG_INFINITY;
    for c in 0..CLASSES {
        let mut a = p[b2 + c];
        for k in 0..HIDDEN {
            a += p[w2 + c * HIDDEN + k] * h[k];
        }
        z[c] = a;
        zmax = zmax.max(a);
    }
    let mut s = 0.0;
    for c in 0..CLASSES {
        s += (z[c] - zmax).exp();
    }
    s.ln() + zmax - z[label]
}

// ---- the other benchmark functions ----

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

/// `Σᵢ Σⱼ Mᵢⱼ vⱼ` with `M` row-major `n × n`.
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

/// A small network 4-8-1 with softplus hidden units and a squared error, parameters
/// `[W1 (8×4), b1 (8), w2 (8), b2]`.
#[differentiable(wrt(p))]
pub fn small_nn(p: &[f64], x: &[f64], target: f64) -> f64 {
    let mut out = p[48];
    for k in 0..8 {
        let mut a = p[32 + k];
        for j in 0..4 {
            a += p[k * 4 + j] * x[j];
        }
        let h = if a > 0.0 {
            a + (-a).exp().ln_1p()
        } else {
            a.exp().ln_1p()
        };
        out += p[40 + k] * h;
    }
    let e = out - target;
    0.5 * e * e
}

// ---- ADBench GMM (the objective of adjoint-bench's adbench/gmm.rs) ----

/// GMM objective for `n` points of dimension `d`, `k` components, parameters
/// `p = [α (k), μ (k·d), icf (k·(d + d(d−1)/2))]`; `wishart` = (γ, m); `lgd` = the constant
/// log Γ_d term; `scratch` holds `k` main terms. Written like gmm.rs, with loops.
#[differentiable(wrt(p))]
pub fn gmm(p: &[f64], x: &[f64], d: usize, k: usize, gamma: f64, wm: f64, lgd: f64) -> f64 {
    let n = x.len() / d;
    let icf_sz = d * (d + 1) / 2;
    let means = k;
    let icf = k + k * d;
    let mut main_term = [0.0; 16];
    let mut xc = [0.0; 16];
    let mut qxc = [0.0; 16];
    let mut total = 0.0;
    for ix in 0..n {
        for ik in 0..k {
            for j in 0..d {
                xc[j] = x[ix * d + j] - p[means + ik * d + j];
            }
            let mut sum_q = 0.0;
            for j in 0..d {
                let q = p[icf + ik * icf_sz + j];
                sum_q += q;
                qxc[j] = q.exp() * xc[j];
            }
            let mut li = 0;
            for i in 0..d {
                for r in i + 1..d {
                    qxc[r] += p[icf + ik * icf_sz + d + li] * xc[i];
                    li += 1;
                }
            }
            let mut sq = 0.0;
            for j in 0..d {
                sq += qxc[j] * qxc[j];
            }
            main_term[ik] = p[ik] + sum_q - 0.5 * sq;
        }
        let mut mx = f64::NEG_INFINITY;
        for ik in 0..k {
            mx = mx.max(main_term[ik]);
        }
        let mut se = 0.0;
        for ik in 0..k {
            se += (main_term[ik] - mx).exp();
        }
        total += se.ln() + mx;
    }
    // −n·logsumexp(α) + Wishart prior + constants
    let mut amax = f64::NEG_INFINITY;
    for ik in 0..k {
        amax = amax.max(p[ik]);
    }
    let mut ase = 0.0;
    for ik in 0..k {
        ase += (p[ik] - amax).exp();
    }
    let lse_alpha = ase.ln() + amax;
    let df = d as f64;
    let pi: f64 = 3.14159265359;
    let constant = -(n as f64) * df * 0.5 * (2.0 * pi).ln();
    let nn = df + wm + 1.0;
    let wishart_c = nn * df * (gamma.ln() - 0.5 * 2.0f64.ln()) - lgd;
    let mut prior = 0.0;
    for ik in 0..k {
        let base = icf + ik * icf_sz;
        let mut sum_q = 0.0;
        let mut frob = 0.0;
        for j in 0..d {
            sum_q += p[base + j];
            let e = p[base + j].exp();
            frob += e * e;
        }
        for j in d..icf_sz {
            frob += p[base + j] * p[base + j];
        }
        prior += frob * (0.5 * gamma * gamma) - sum_q * wm;
    }
    total - (n as f64) * lse_alpha + prior + (constant - k as f64 * wishart_c)
}

// ---- tests ----

#[test]
fn sincos_gradient() {
    let mut dx = 0.0;
    let v = sincos::grad(0.7, &mut dx);
    assert_eq!(v, sincos(0.7));
    assert!(close(dx, -(0.7f64.cos().cos()) * 0.7f64.sin(), 1e-14));
}

#[test]
fn pow_loop_gradient() {
    let mut dx = 0.0;
    let v = pow_loop::grad(1.0005, 1000, &mut dx);
    assert!(close(v, pow_loop(1.0005, 1000), 1e-14));
    assert!(close(dx, 1000.0 * 1.0005f64.powi(999), 1e-12));
    // p = 0: no iterations
    let v = pow_loop::grad(3.0, 0, &mut dx);
    assert_eq!((v, dx), (1.0, 0.0));
}

#[test]
fn logsumexp_gradient() {
    let x: Vec<f64> = uniform(2, 1000).iter().map(|u| 3.0 * u).collect();
    let mut g = vec![0.0; x.len()];
    let v = logsumexp::grad(&x, &mut g);
    assert!(close(v, logsumexp(&x), 1e-14));
    let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = x.iter().map(|v| (v - m).exp()).sum();
    let want: Vec<f64> = x.iter().map(|v| (v - m).exp() / s).collect();
    assert_grad("logsumexp", &g, &want, 1e-12);
}

#[test]
fn logistic_gradient() {
    let (d, m) = (10, 100);
    let xs = uniform(3, m * d);
    let ys: Vec<f64> = uniform(4, m)
        .iter()
        .map(|u| if *u >= 0.0 { 1.0 } else { -1.0 })
        .collect();
    let p = uniform(5, d + 1);
    let mut g = vec![0.0; d + 1];
    let v = logistic::grad(&p, &xs, &ys, d, &mut g);
    assert!(close(v, logistic(&p, &xs, &ys, d), 1e-14));
    let want = forward::gradient(|p| logistic::primal(p, &xs, &ys, d), &p);
    assert_grad("logistic", &g, &want, 1e-10);
    check::check_gradient(|p| logistic(p, &xs, &ys, d), &p, &g).assert_passed();
}

#[test]
fn mlp_gradient() {
    let n_in = 784;
    let image: Vec<f64> = uniform(6, n_in).iter().map(|u| 0.5 + 0.5 * u).collect();
    let np = HIDDEN * n_in + HIDDEN + CLASSES * HIDDEN + CLASSES;
    let scale = 1.0 / (n_in as f64).sqrt();
    let p: Vec<f64> = uniform(7, np).iter().map(|u| u * scale).collect();
    let mut g = vec![0.0; np];
    let v = mlp::grad(&p, &image, 3, &mut g);
    assert!(close(v, mlp(&p, &image, 3), 1e-13));
    // forward mode on a few coordinates (the full gradient would be 25k sweeps)
    for &i in &[0usize, 5, 1000, 784 * 32 + 3, np - 12, np - 1, np - 7] {
        let d = forward::derivative(
            |t| {
                let q: Vec<_> = p
                    .iter()
                    .enumerate()
                    .map(|(j, &v)| {
                        if j == i {
                            t
                        } else {
                            adjoint_core::forward::Dual::constant(v)
                        }
                    })
                    .collect();
                mlp::primal(&q, &image, 3)
            },
            p[i],
        );
        assert!(close(g[i], d, 1e-10), "mlp coordinate {i}: {} vs {d}", g[i]);
    }
}

#[test]
fn rosenbrock_gradient() {
    for n in [2usize, 3, 100] {
        let x: Vec<f64> = uniform(1, n).iter().map(|u| 0.5 + u).collect();
        let mut g = vec![0.0; n];
        let v = rosenbrock::grad(&x, &mut g);
        assert!(close(v, rosenbrock(&x), 1e-14));
        let mut want = vec![0.0; n];
        for i in 0..n - 1 {
            let t = x[i + 1] - x[i] * x[i];
            want[i] += -400.0 * x[i] * t - 2.0 * (1.0 - x[i]);
            want[i + 1] += 200.0 * t;
        }
        assert_grad("rosenbrock", &g, &want, 1e-12);
    }
}

#[test]
fn dot_and_matvec_gradients() {
    let (x, y) = (uniform(8, 50), uniform(9, 50));
    let (mut gx, mut gy) = (vec![0.0; 50], vec![0.0; 50]);
    let v = dot::grad(&x, &y, &mut gx, &mut gy);
    assert!(close(v, dot(&x, &y), 1e-14));
    assert_grad("dot x", &gx, &y, 0.0);
    assert_grad("dot y", &gy, &x, 0.0);

    let n = 12;
    let (m, v) = (uniform(10, n * n), uniform(11, n));
    let (mut gm, mut gv) = (vec![0.0; n * n], vec![0.0; n]);
    let r = matvec::grad(&m, &v, &mut gm, &mut gv);
    assert!(close(r, matvec(&m, &v), 1e-14));
    for i in 0..n {
        for j in 0..n {
            assert!(close(gm[i * n + j], v[j], 0.0));
        }
    }
    for j in 0..n {
        let col: f64 = (0..n).map(|i| m[i * n + j]).sum();
        assert!(close(gv[j], col, 1e-14));
    }
}

#[test]
fn small_nn_gradient() {
    let p = uniform(12, 49);
    let x = [0.3, -0.2, 0.8, 0.1];
    let mut g = vec![0.0; 49];
    let mut dt = 0.0;
    let _ = &mut dt;
    let v = small_nn::grad(&p, &x, 0.25, &mut g);
    assert!(close(v, small_nn(&p, &x, 0.25), 1e-14));
    let want = forward::gradient(|p| small_nn::primal(p, &x, 0.25), &p);
    assert_grad("small_nn", &g, &want, 1e-10);
    check::check_gradient(|p| small_nn(p, &x, 0.25), &p, &g).assert_passed();
}

fn lgamma_d(a: f64, d: usize) -> f64 {
    let df = d as f64;
    0.25 * df * (df - 1.0) * 3.14159265359f64.ln()
        + (1..=d)
            .map(|j| (a + 0.5 * (1.0 - j as f64)).lgamma())
            .sum::<f64>()
}

#[test]
fn gmm_gradient() {
    let (d, k, n) = (3usize, 4usize, 20usize);
    let icf_sz = d * (d + 1) / 2;
    let np = k + k * d + k * icf_sz;
    let p: Vec<f64> = uniform(13, np).iter().map(|u| 0.5 * u).collect();
    let x = uniform(14, n * d);
    let (gamma, wm) = (1.0, 0.0);
    let lgd = lgamma_d(0.5 * (d as f64 + wm + 1.0), d);
    let mut g = vec![0.0; np];
    let v = gmm::grad(&p, &x, d, k, gamma, wm, lgd, &mut g);
    assert!(close(v, gmm(&p, &x, d, k, gamma, wm, lgd), 1e-13));
    let want = forward::gradient(|p| gmm::primal(p, &x, d, k, gamma, wm, lgd), &p);
    assert_grad("gmm", &g, &want, 1e-10);
    check::check_gradient(|p| gmm(p, &x, d, k, gamma, wm, lgd), &p, &g).assert_passed();
}

#[test]
fn workspace_reuse_gives_identical_results() {
    let x: Vec<f64> = uniform(1, 100).iter().map(|u| 0.5 + u).collect();
    let mut ws = Workspace::new();
    let (mut g1, mut g2) = (vec![0.0; 100], vec![0.0; 100]);
    let a = rosenbrock::grad_with(&mut ws, &x, &mut g1);
    let b = rosenbrock::grad_with(&mut ws, &x, &mut g2);
    assert_eq!(a, b);
    assert_eq!(g1, g2);
}
