//! A small network and the whole ADBench GMM objective (with its prior), written as users write
//! them; gradients against forward mode over the generated `primal` and finite differences. (The
//! benchmark functions themselves — Table 2, Rosenbrock, dot, matvec, network — live in
//! `adjoint-bench`'s `ssabench` and are tested there.)

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
    // One workspace across calls at different points gives what a fresh one gives, and the
    // gradient is forward mode's.
    let x = [0.3, -0.2, 0.9, 0.1];
    let mut ws = Workspace::new();
    for seed in 1..4 {
        let p: Vec<f64> = uniform(seed, 49).iter().map(|u| 0.5 * u).collect();
        let (mut g1, mut g2) = (vec![0.0; 49], vec![0.0; 49]);
        let a = small_nn::grad_with(&mut ws, &p, &x, 0.25, &mut g1);
        let b = small_nn::grad(&p, &x, 0.25, &mut g2);
        assert_eq!((a, &g1), (b, &g2));
        let want = forward::gradient(|p| small_nn::primal(p, &x, 0.25), &p);
        assert_grad("small_nn (reused workspace)", &g1, &want, 1e-12);
    }
}
