//! Forward-mode gradients and Hessians of every benchmark problem against closed forms, and the
//! closed forms themselves against finite differences.

use adjoint::check::{check_gradient, numeric_derivative};
use adjoint::forward;
use adjoint_bench::problems::*;

fn close(a: f64, b: f64, rtol: f64) -> bool {
    (a - b).abs() <= rtol * a.abs().max(b.abs()).max(1.0)
}

fn assert_vec_close(a: &[f64], b: &[f64], rtol: f64, what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(close(*x, *y, rtol), "{what}[{i}]: {x} vs {y}");
    }
}

fn assert_mat_close(a: &[Vec<f64>], b: &[Vec<f64>], rtol: f64, what: &str) {
    for (i, (r, s)) in a.iter().zip(b).enumerate() {
        assert_vec_close(r, s, rtol, &format!("{what}[{i}]"));
    }
}

/// Forward gradient == hand gradient, and hand gradient passes the finite-difference check.
fn gradient_agrees<O: Objective>(o: &O) {
    let x = o.input();
    let mut hand = vec![0.0; x.len()];
    assert!(o.hand_gradient(&x, &mut hand));
    let fwd = forward::gradient(|x| o.eval(x), &x);
    assert_vec_close(&fwd, &hand, 1e-12, o.name());
    if x.len() <= 200 {
        check_gradient(|x| o.eval(x), &x, &hand).assert_passed();
    }
}

#[test]
fn gradients_match_closed_forms() {
    gradient_agrees(&Rosenbrock { n: 2 });
    gradient_agrees(&Rosenbrock { n: 100 });
    gradient_agrees(&SinCos);
    gradient_agrees(&PowLoop { p: 1000 });
    gradient_agrees(&LogSumExp { n: 1000 });
    gradient_agrees(&Logistic::new(10, 100));
    gradient_agrees(&Mlp::new(30, 6, 4));
}

#[test]
fn mlp_hand_gradient_passes_finite_differences() {
    let o = Mlp::new(12, 5, 3);
    let x = o.input();
    let mut g = vec![0.0; x.len()];
    o.hand_gradient(&x, &mut g);
    check_gradient(|x| o.eval(x), &x, &g).assert_passed();
}

#[test]
fn rosenbrock_hessian_matches_closed_form() {
    for n in [2, 7] {
        let o = Rosenbrock { n };
        let x = o.input();
        let h = forward::hessian(|x| o.eval(x), &x);
        assert_mat_close(&h, &o.hessian(&x), 1e-12, "rosenbrock hessian");
    }
    // The textbook value at the minimum.
    let h = forward::hessian(|x| Rosenbrock { n: 2 }.eval(x), &[1.0, 1.0]);
    assert_eq!(h, vec![vec![802.0, -400.0], vec![-400.0, 200.0]]);
}

#[test]
fn scalar_second_derivatives_match_closed_forms() {
    let x = SinCos.input()[0];
    let h = forward::hessian(|v| SinCos.eval(v), &[x])[0][0];
    let exact = -(x.cos()).sin() * x.sin().powi(2) - x.cos().cos() * x.cos();
    assert!(close(h, exact, 1e-13), "{h} vs {exact}");

    let o = PowLoop { p: 50 };
    let x = 1.1;
    let h = forward::hessian(|v| o.eval(v), &[x])[0][0];
    assert!(close(h, 50.0 * 49.0 * x.powi(48), 1e-12));
}

#[test]
fn logsumexp_hessian_is_diag_p_minus_ppt() {
    let o = LogSumExp { n: 6 };
    let x = o.input();
    let h = forward::hessian(|v| o.eval(v), &x);
    let mut p = vec![0.0; x.len()];
    o.hand_gradient(&x, &mut p);
    let exact: Vec<Vec<f64>> = (0..x.len())
        .map(|i| {
            (0..x.len())
                .map(|j| if i == j { p[i] } else { 0.0 } - p[i] * p[j])
                .collect()
        })
        .collect();
    assert_mat_close(&h, &exact, 1e-13, "logsumexp hessian");
}

#[test]
fn logistic_hessian_matches_closed_form() {
    let o = Logistic::new(3, 20);
    let w = o.input();
    let h = forward::hessian(|v| o.eval(v), &w);
    // H = (1/m) Σ σ(z)(1 − σ(z)) x̃ x̃ᵀ with x̃ = [x, 1]
    let d = o.d;
    let mut exact = vec![vec![0.0; d + 1]; d + 1];
    for (row, _) in o.xs.chunks_exact(d).zip(&o.ys) {
        let xt: Vec<f64> = row.iter().copied().chain([1.0]).collect();
        let z: f64 = xt.iter().zip(&w).map(|(a, b)| a * b).sum();
        let s = 1.0 / (1.0 + (-z).exp());
        for i in 0..=d {
            for j in 0..=d {
                exact[i][j] += s * (1.0 - s) * xt[i] * xt[j] / o.m as f64;
            }
        }
    }
    assert_mat_close(&h, &exact, 1e-12, "logistic hessian");
}

#[test]
fn mlp_hessian_matches_differences_of_the_hand_gradient() {
    let o = Mlp::new(4, 3, 3);
    let x = o.input();
    let h = forward::hessian(|v| o.eval(v), &x);
    let n = x.len();
    for j in 0..n {
        for i in 0..n {
            let (fd, _) = numeric_derivative(
                |t| {
                    let mut y = x.clone();
                    y[j] = t;
                    let mut g = vec![0.0; n];
                    o.hand_gradient(&y, &mut g);
                    g[i]
                },
                x[j],
                0.1,
            );
            assert!(
                (h[i][j] - fd).abs() < 1e-8,
                "H[{i}][{j}] = {} vs {fd}",
                h[i][j]
            );
        }
    }
}
