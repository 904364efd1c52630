//! The argmin adapter: the examples' optimisations converge to the known minima, and the tape
//! gradients and Hessians argmin sees agree with finite differences.
#![cfg(feature = "argmin")]
#![allow(clippy::needless_range_loop)] // (i, j) indices read as in the formulas

#[allow(dead_code)]
#[path = "../examples/logistic_lbfgs.rs"]
mod logistic;
#[allow(dead_code)]
#[path = "../examples/rosenbrock_newton.rs"]
mod rosenbrock;

use adjoint::argmin::{Matrix, Objective, Problem};
use adjoint::check::{check_gradient, numeric_gradient};
use argmin::core::{CostFunction, Executor, Gradient, Hessian, State};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::newton::NewtonCG;
use argmin::solver::quasinewton::LBFGS;
use argmin_math::ArgminInv;

#[test]
fn rosenbrock_newton_converges_to_one_one() {
    let (x, _) = rosenbrock::minimise(vec![-1.2, 1.0], 20).unwrap();
    assert!(
        (x[0] - 1.0).abs() < 1e-12 && (x[1] - 1.0).abs() < 1e-12,
        "{x:?}"
    );
    let (x, _) = rosenbrock::minimise(vec![0.5, 0.3, 0.8, 1.2, 0.9, 1.1], 30).unwrap();
    assert!(x.iter().all(|v| (v - 1.0).abs() < 1e-12), "{x:?}");
}

#[test]
fn rosenbrock_lbfgs_converges_to_one_one() {
    let solver = LBFGS::new(MoreThuenteLineSearch::new(), 5)
        .with_tolerance_grad(1e-12)
        .unwrap();
    let res = Executor::new(Problem::new(rosenbrock::Rosenbrock), solver)
        .configure(|s| s.param(vec![-1.2, 1.0]).max_iters(200))
        .run()
        .unwrap();
    let x = res.state().get_best_param().unwrap();
    assert!(
        (x[0] - 1.0).abs() < 1e-8 && (x[1] - 1.0).abs() < 1e-8,
        "{x:?}"
    );
}

#[test]
fn problem_derivatives_agree_with_finite_differences() {
    let p = Problem::new(rosenbrock::Rosenbrock);
    let x = vec![-0.7, 1.3, 0.4];
    let f = |v: &[f64]| rosenbrock::Rosenbrock.eval(v);
    assert_eq!(p.cost(&x).unwrap(), f(&x));
    let g = p.gradient(&x).unwrap();
    check_gradient(f, &x, &g).assert_passed();
    let Matrix(h) = p.hessian(&x).unwrap();
    for (i, row) in h.iter().enumerate() {
        let fd = numeric_gradient(|v| p.gradient(&v.to_vec()).unwrap()[i], &x);
        for j in 0..x.len() {
            assert!(
                (row[j] - fd[j]).abs() < 1e-6,
                "H[{i}][{j}] {} vs {}",
                row[j],
                fd[j]
            );
        }
    }
}

#[test]
fn logistic_lbfgs_reaches_a_stationary_point() {
    let model = logistic::Logistic::synthetic(500, &[0.5, 2.0, -1.0, 0.7], 1e-3);
    let (w, _) = logistic::fit(&model).unwrap();
    let p = Problem::new(&model);
    let g = p.gradient(&w).unwrap();
    let gnorm = g.iter().map(|v| v * v).sum::<f64>().sqrt();
    assert!(gnorm < 1e-8, "|∇| = {gnorm}");
    // The tape gradient argmin used agrees with finite differences, at the optimum (absolute:
    // the gradient is ~0 there) and away from it.
    let f = |v: &[f64]| model.eval(v);
    let fd = numeric_gradient(f, &w);
    assert!(
        g.iter().zip(&fd).all(|(a, b)| (a - b).abs() < 1e-8),
        "{g:?} vs {fd:?}"
    );
    let w1: Vec<f64> = w.iter().map(|v| v * 0.5 - 0.1).collect();
    check_gradient(f, &w1, &p.gradient(&w1).unwrap()).assert_passed();
    // A minimum: the Hessian is positive definite (Cholesky-free check: invertible, and a
    // Newton step from the optimum stays there).
    let h = p.hessian(&w).unwrap();
    let step: Vec<f64> = argmin_math::ArgminDot::dot(&h.inv().unwrap(), &g);
    assert!(step.iter().all(|s| s.abs() < 1e-8));
    // Newton-CG from the same start reaches the same weights.
    let res = Executor::new(
        Problem::new(&model),
        NewtonCG::new(MoreThuenteLineSearch::new()),
    )
    .configure(|s| s.param(vec![0.0; 4]).max_iters(50))
    .run()
    .unwrap();
    let wn = res.state().get_best_param().unwrap();
    assert!(
        w.iter().zip(wn).all(|(a, b)| (a - b).abs() < 1e-6),
        "{w:?} vs {wn:?}"
    );
}

#[test]
fn matrix_inverse_round_trips_and_refuses_singular_matrices() {
    let m = Matrix(vec![
        vec![0.0, 2.0, 1.0],
        vec![1.0, 1.0, 0.0],
        vec![3.0, 0.0, 1.0],
    ]);
    let inv = m.inv().unwrap();
    for i in 0..3 {
        for j in 0..3 {
            let v: f64 = (0..3).map(|k| m.0[i][k] * inv.0[k][j]).sum();
            assert!((v - f64::from(u8::from(i == j))).abs() < 1e-14);
        }
    }
    assert!(Matrix(vec![vec![1.0, 2.0], vec![2.0, 4.0]]).inv().is_err());
    assert!(Matrix(vec![vec![1.0, 2.0]]).inv().is_err());
}

#[test]
fn matrix_inverse_does_not_depend_on_scaling_and_refuses_what_it_cannot_invert() {
    // (A reviewer helper's hunt: a pivot test against the largest entry called these singular;
    // Newton on 1e8·x² + 1e-8·y² stopped on it.)
    for (a, b) in [(1e10, 1e-10), (1e16, 1.0), (2e8, 2e-8)] {
        let inv = Matrix(vec![vec![a, 0.0], vec![0.0, b]]).inv().unwrap();
        assert_eq!(inv.0, vec![vec![1.0 / a, 0.0], vec![0.0, 1.0 / b]]);
    }
    let m = Matrix(vec![vec![1e12, 3e12], vec![2e-6, 1e-6]]);
    let inv = m.inv().unwrap();
    for i in 0..2 {
        for j in 0..2 {
            // (A⁻¹·A)ᵢⱼ, scale-free
            let v: f64 = (0..2).map(|k| inv.0[i][k] * m.0[k][j]).sum();
            assert!((v - f64::from(u8::from(i == j))).abs() < 1e-14, "{v}");
        }
    }
    // Hilbert matrices: size 6 (condition ~1.5e7) inverts; size 12 (~1e16) is refused, where an
    // inverse 2.3 away from the identity came back before.
    let hilbert = |n: usize| {
        Matrix(
            (0..n)
                .map(|i| (0..n).map(|j| 1.0 / (i + j + 1) as f64).collect())
                .collect(),
        )
    };
    assert!(hilbert(6).inv().is_ok());
    let e = hilbert(12).inv().unwrap_err().to_string();
    assert!(e.contains("too ill-conditioned"), "{e}");
    // A non-finite entry is named as such, not as singularity.
    let e = Matrix(vec![vec![1.0, f64::NAN], vec![0.0, 1.0]])
        .inv()
        .unwrap_err()
        .to_string();
    assert!(e.contains("entry (0, 1) is NaN"), "{e}");
    // A subnormal diagonal entry: the exact inverse 1e310 is beyond f64. `Ok` with NaN entries
    // came back (the row's scale 2¹⁰³⁰ overflowed, and the residual's `f64::max` dropped the
    // NaN; a hunter). Subnormal entries whose inverse fits still invert.
    let e = Matrix(vec![vec![1e-310, 0.0], vec![0.0, 1.0]])
        .inv()
        .unwrap_err()
        .to_string();
    assert!(e.contains("beyond f64's range"), "{e}");
    let m = Matrix(vec![vec![1e-310, 1e-310], vec![0.0, 1e-300]]);
    let inv = m.inv().unwrap_err().to_string();
    assert!(inv.contains("beyond f64's range"), "{inv}");
    let tiny = 2f64.powi(-1000);
    let m = Matrix(vec![vec![tiny, 0.0], vec![0.0, 0.5]]);
    assert_eq!(
        m.inv().unwrap().0,
        vec![vec![2f64.powi(1000), 0.0], vec![0.0, 2.0]]
    );
    let m = Matrix(vec![vec![4e-300, 0.0], vec![0.0, 0.5]]);
    assert!((m.inv().unwrap().0[0][0] / 2.5e299 - 1.0).abs() < 1e-15);
}

#[test]
#[should_panic(expected = "Matrix::dot: row 0 has 2 entries but the vector has 3")]
fn a_matrix_times_a_vector_of_another_length_is_a_clear_panic() {
    use argmin_math::ArgminDot;
    // (a zip dropped the third entry and returned [3, 7])
    let m = adjoint::argmin::Matrix(vec![vec![1.0, 1.0], vec![3.0, 2.0]]);
    let _: Vec<f64> = m.dot(&vec![1.0, 2.0, 9.0]);
}
