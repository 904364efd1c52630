//! The array-language GMM against a plain-Rust port of `adjoint-bench`'s `adbench::gmm`
//! objective: value to 1e-12 relative, gradient against forward mode.
#![allow(clippy::assign_op_pattern)] // the port keeps the reference's spelling

use adjoint_array::models::Gmm;
use adjoint_core::forward::{self, Dual64};
use adjoint_core::prelude::*;
use adjoint_core::vector::logsumexp;

mod common;

fn data(n: usize, seed: u64, scale: f64) -> Vec<f64> {
    common::uniform(n, seed, -scale, scale)
}

#[allow(clippy::approx_constant)]
const PI: f64 = 3.14159265359;

/// `adbench::gmm::gmm_objective`, ported verbatim (generic over `Real`).
fn reference<T: Real>(n: usize, d: usize, k: usize, gamma: f64, wm: f64, x: &[f64], p: &[T]) -> T {
    let icf_sz = d * (d + 1) / 2;
    let (alphas, rest) = p.split_at(k);
    let (means, icf) = rest.split_at(k * d);
    let c = |v: f64| T::cst(v);
    let sum_qs: Vec<T> = (0..k)
        .map(|ik| {
            icf[ik * icf_sz..ik * icf_sz + d]
                .iter()
                .fold(c(0.0), |a, &b| a + b)
        })
        .collect();
    let qdiags: Vec<T> = (0..k)
        .flat_map(|ik| icf[ik * icf_sz..ik * icf_sz + d].iter().map(|q| q.exp()))
        .collect();
    let mut main_term = vec![c(0.0); k];
    let mut xc = vec![c(0.0); d];
    let mut qxc = vec![c(0.0); d];
    let mut total = c(0.0);
    for ix in 0..n {
        let xi = &x[ix * d..(ix + 1) * d];
        for ik in 0..k {
            for j in 0..d {
                xc[j] = c(xi[j]) - means[ik * d + j];
            }
            for j in 0..d {
                qxc[j] = qdiags[ik * d + j] * xc[j];
            }
            let ltri = &icf[ik * icf_sz + d..(ik + 1) * icf_sz];
            let mut li = 0;
            for (i, &xv) in xc.iter().enumerate() {
                for q in &mut qxc[i + 1..] {
                    *q = *q + ltri[li] * xv;
                    li += 1;
                }
            }
            let sq = qxc.iter().fold(c(0.0), |a, &v| a + v * v);
            main_term[ik] = alphas[ik] + sum_qs[ik] - sq * 0.5;
        }
        total = total + logsumexp(&main_term);
    }
    let df = d as f64;
    let constant = -(n as f64) * df * 0.5 * (2.0 * PI).ln();
    let nn = df + wm + 1.0;
    let lgd = 0.25 * df * (df - 1.0) * PI.ln()
        + (1..=d)
            .map(|j| (0.5 * nn + 0.5 * (1.0 - j as f64)).lgamma())
            .sum::<f64>();
    let wishart_c = nn * df * (gamma.ln() - 0.5 * 2f64.ln()) - lgd;
    let mut prior = c(0.0);
    for ik in 0..k {
        let block = &icf[ik * icf_sz..(ik + 1) * icf_sz];
        let sum_q = block[..d].iter().fold(c(0.0), |a, &b| a + b);
        let frob: T = block[..d]
            .iter()
            .map(|q| {
                let e = q.exp();
                e * e
            })
            .chain(block[d..].iter().map(|&l| l * l))
            .fold(c(0.0), |a, b| a + b);
        prior = prior + frob * (0.5 * gamma * gamma) - sum_q * wm;
    }
    total + logsumexp(alphas) * -(n as f64) + prior + (constant - k as f64 * wishart_c)
}

#[test]
fn gmm_value_and_gradient_match_the_reference() {
    // d ≥ MATMUL_MIN_D computes Q_k x_i by a matrix product, smaller d by an unrolled kernel
    // (the squared norms unrolled or as sums over arrays: `arrays`)
    let cases = [
        (10, 3, 4, false),
        (7, 1, 2, false),
        (5, 5, 3, false),
        (6, 10, 3, false),
    ];
    let arrays = [
        (5, 5, 3, true),
        (6, 10, 3, true),
        (4, 64, 2, false),
        (4, 64, 2, true),
    ];
    for &(n, d, k, arrays) in cases.iter().chain(&arrays) {
        let (gamma, wm) = (1.0, 0.0);
        let icf_sz = d * (d + 1) / 2;
        let p = data(k + k * d + k * icf_sz, (n * 31 + d * 7 + k) as u64, 0.5);
        let x = data(n * d, 99, 1.0);
        let gmm = Gmm::with_norms_as_arrays(n, d, k, gamma, wm, arrays).unwrap();
        let (a, rest) = p.split_at(k);
        let (mu, icf) = rest.split_at(k * d);
        let v = gmm.objective(a, mu, icf, &x).unwrap();
        let r = reference::<f64>(n, d, k, gamma, wm, &x, &p);
        assert!(
            (v - r).abs() <= 1e-12 * r.abs(),
            "value {v} vs reference {r}"
        );
        let (v2, g) = gmm.gradient(a, mu, icf, &x).unwrap();
        assert_eq!(v, v2);
        let gf = forward::gradient(|q: &[Dual64]| reference(n, d, k, gamma, wm, &x, q), &p);
        for (i, (u, w)) in g.iter().zip(&gf).enumerate() {
            assert!(
                (u - w).abs() <= 1e-10 * (1.0 + w.abs()),
                "({n},{d},{k}, arrays {arrays}) ∂{i}: {u} vs {w}"
            );
        }
    }
}

#[test]
fn gmm_with_wishart_m() {
    let (n, d, k) = (6, 2, 3);
    let (gamma, wm) = (0.7, 2.0);
    let p = data(k + k * d + k * 3, 5, 0.4);
    let x = data(n * d, 6, 1.0);
    let gmm = Gmm::new(n, d, k, gamma, wm).unwrap();
    let (a, rest) = p.split_at(k);
    let (mu, icf) = rest.split_at(k * d);
    let (v, g) = gmm.gradient(a, mu, icf, &x).unwrap();
    let r = reference::<f64>(n, d, k, gamma, wm, &x, &p);
    assert!((v - r).abs() <= 1e-12 * r.abs());
    let gf = forward::gradient(|q: &[Dual64]| reference(n, d, k, gamma, wm, &x, q), &p);
    for (u, w) in g.iter().zip(&gf) {
        assert!((u - w).abs() <= 1e-10 * (1.0 + w.abs()));
    }
}

#[test]
fn gmm_through_matrix_products_at_compiled_sizes() {
    // Large enough for compiled kernels and windowed scatters (n·k = 9000 elements, the
    // products' [3000, 30] adjoint): the value against the reference, the gradient against
    // forward mode along one direction.
    let (n, d, k) = (3000, 10, 3);
    assert!(d >= adjoint_array::models::MATMUL_MIN_D);
    let (gamma, wm) = (1.0, 0.0);
    let icf_sz = d * (d + 1) / 2;
    let p = data(k + k * d + k * icf_sz, 17, 0.3);
    let x = data(n * d, 18, 1.0);
    let gmm = Gmm::new(n, d, k, gamma, wm).unwrap();
    let (a, rest) = p.split_at(k);
    let (mu, icf) = rest.split_at(k * d);
    let (v, g) = gmm.gradient(a, mu, icf, &x).unwrap();
    let dir = data(p.len(), 19, 1.0);
    let (r, jv) = forward::jvp(
        |q: &[Dual64]| vec![reference(n, d, k, gamma, wm, &x, q)],
        &p,
        &dir,
    );
    assert!(
        (v - r[0]).abs() <= 1e-12 * r[0].abs(),
        "value {v} vs {}",
        r[0]
    );
    let dot: f64 = g.iter().zip(&dir).map(|(g, v)| g * v).sum();
    assert!(
        (dot - jv[0]).abs() <= 1e-9 * (1.0 + jv[0].abs()),
        "{dot} vs {}",
        jv[0]
    );
}

#[test]
fn gmm_far_from_the_origin_keeps_its_digits() {
    // Points and means near 10⁶ with spreads near 1: the quadratic form of x − μ must not be
    // computed as the difference of two products of size 10⁶ (Q x − Q μ loses about six
    // digits); the matrix-product path centres the data first.
    let (n, d, k) = (40, 6, 3);
    assert!(d >= adjoint_array::models::MATMUL_MIN_D);
    let icf_sz = d * (d + 1) / 2;
    let mut p = data(k + k * d + k * icf_sz, 5, 0.5);
    for m in &mut p[k..k + k * d] {
        *m += 1.0e6;
    }
    let x: Vec<f64> = data(n * d, 6, 1.0).iter().map(|v| v + 1.0e6).collect();
    matches_the_reference((n, d, k), &p, &x, 1e-9);
}

/// The array GMM's value against the reference to 1e-12 relative, its gradient against forward
/// mode of the reference to `tol` (relative to 1 + |∂|); γ = 1, m = 0.
fn matches_the_reference((n, d, k): (usize, usize, usize), p: &[f64], x: &[f64], tol: f64) {
    let (gamma, wm) = (1.0, 0.0);
    let gmm = Gmm::new(n, d, k, gamma, wm).unwrap();
    let (a, rest) = p.split_at(k);
    let (mu, icf) = rest.split_at(k * d);
    let (v, g) = gmm.gradient(a, mu, icf, x).unwrap();
    let r = reference::<f64>(n, d, k, gamma, wm, x, p);
    assert!(
        (v - r).abs() <= 1e-12 * r.abs(),
        "value {v} vs reference {r}"
    );
    let gf = forward::gradient(|q: &[Dual64]| reference(n, d, k, gamma, wm, x, q), p);
    for (i, (u, w)) in g.iter().zip(&gf).enumerate() {
        assert!((u - w).abs() <= tol * (1.0 + w.abs()), "∂{i}: {u} vs {w}");
    }
}

#[test]
fn gmm_whose_first_point_is_an_outlier_keeps_its_digits() {
    // The product path centred on the first point: one first point 10⁶ away from the rest
    // made every other point's two products of size 10⁶, and the gradient was 1.6e-8 relative
    // off (10⁹: 2e-5; a far point elsewhere was harmless). It centres on the means' average.
    let (n, d, k) = (40, 6, 3);
    assert!(d >= adjoint_array::models::MATMUL_MIN_D);
    let icf_sz = d * (d + 1) / 2;
    let p = data(k + k * d + k * icf_sz, 7, 0.5);
    for far in [1.0e6, 1.0e9] {
        let mut x = data(n * d, 8, 1.0);
        for v in &mut x[..d] {
            *v += far;
        }
        matches_the_reference((n, d, k), &p, &x, 1e-10);
    }
}

#[test]
fn gmm_without_points() {
    // n = 0: only the priors remain, on both paths.
    for d in [3usize, 6] {
        let (n, k, gamma, wm) = (0, 2, 1.0, 0.0);
        let icf_sz = d * (d + 1) / 2;
        let p = data(k + k * d + k * icf_sz, 3, 0.5);
        let gmm = Gmm::new(n, d, k, gamma, wm).unwrap();
        let (a, rest) = p.split_at(k);
        let (mu, icf) = rest.split_at(k * d);
        let (v, g) = gmm.gradient(a, mu, icf, &[]).unwrap();
        let r = reference::<f64>(n, d, k, gamma, wm, &[], &p);
        assert!(
            (v - r).abs() <= 1e-12 * (1.0 + r.abs()),
            "d = {d}: {v} vs {r}"
        );
        let gf = forward::gradient(|q: &[Dual64]| reference(n, d, k, gamma, wm, &[], q), &p);
        for (i, (u, w)) in g.iter().zip(&gf).enumerate() {
            assert!(
                (u - w).abs() <= 1e-10 * (1.0 + w.abs()),
                "d = {d}, ∂{i}: {u} vs {w}"
            );
        }
    }
}

#[test]
fn gmm_prior_with_an_off_diagonal_entry_whose_exp_overflows() {
    // For d >= 4 the Wishart prior is one term per entry of icf, `exp(v)²` on the diagonal and
    // `v²` below it, chosen by `select`: the branch not taken (exp(400)² = ∞ for an
    // off-diagonal 400) must not reach the value or the gradient. n = 0 keeps the data term
    // out, so the prior is the whole objective.
    let (n, d, k, gamma, wm) = (0, 4, 2, 1.0, 1.0);
    let icf_sz = d * (d + 1) / 2;
    let mut p = data(k + k * d + k * icf_sz, 8, 0.5);
    let big = k + k * d + icf_sz + d + 1; // component 1, second off-diagonal entry
    p[big] = 400.0;
    let gmm = Gmm::new(n, d, k, gamma, wm).unwrap();
    let (a, rest) = p.split_at(k);
    let (mu, icf) = rest.split_at(k * d);
    let (v, g) = gmm.gradient(a, mu, icf, &[]).unwrap();
    let r = reference::<f64>(n, d, k, gamma, wm, &[], &p);
    assert!((v - r).abs() <= 1e-12 * r.abs(), "{v} vs {r}");
    let gf = forward::gradient(|q: &[Dual64]| reference(n, d, k, gamma, wm, &[], q), &p);
    // ∂/∂L of ½γ²L² is γ²L = 400, exactly.
    assert_eq!(gf[big], 400.0);
    for (i, (u, w)) in g.iter().zip(&gf).enumerate() {
        assert!(u.is_finite(), "∂{i} = {u}");
        assert!((u - w).abs() <= 1e-10 * (1.0 + w.abs()), "∂{i}: {u} vs {w}");
    }
}
