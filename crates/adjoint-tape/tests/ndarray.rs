//! ndarray on active scalars: an array expression differentiated on the tape and in forward mode,
//! against finite differences and the closed form.
#![cfg(feature = "ndarray")]
#![allow(clippy::needless_range_loop)] // (i, j) indices read as in the formulas

use adjoint_core::check::check_gradient;
use adjoint_core::forward::{self, Dual64};
use adjoint_core::Real;
use adjoint_tape::{grad, Var};
use ndarray::{Array1, Array2, ArrayView1, LinalgScalar, ScalarOperand};

fn a() -> Array2<f64> {
    Array2::from_shape_fn((4, 3), |(i, j)| ((i * 3 + j) as f64 * 0.37).sin())
}

/// sum(tanh(A·x)) + s·(x·x) with s = x₀ an active scalar operand: ndarray's `.dot()`
/// (matrix–vector and vector–vector), `mapv`, `sum`, and array × scalar.
fn f<T: Real + LinalgScalar + ScalarOperand>(x: &[T]) -> T {
    let x = ArrayView1::from(x);
    let a = a().mapv(T::cst);
    let z = a.dot(&x);
    let t = z.mapv(|v| v.tanh()).sum();
    let scaled: Array1<T> = &x * x[0];
    t + scaled.dot(&x) * 0.1
}

const X: [f64; 3] = [0.4, -0.8, 1.3];

#[test]
fn ndarray_expression_gradient_tape_forward_and_fd() {
    let g = grad(|x: &[Var]| f(x), &X);
    let gf = forward::gradient(|x: &[Dual64]| f(x), &X);
    check_gradient(|x: &[f64]| f(x), &X, &g).assert_passed();
    for k in 0..3 {
        assert!((g[k] - gf[k]).abs() < 1e-13, "∂{k}: {} vs {}", g[k], gf[k]);
    }
    // Closed form: Aᵀ(1 − tanh²(Ax)) + 0.1·(e₀ (x·x) + 2 x₀ x).
    let x = Array1::from(X.to_vec());
    let z = a().dot(&x);
    let mut exact = a().t().dot(&z.mapv(|v| 1.0 - v.tanh().powi(2)));
    exact += &(&x * (0.2 * X[0]));
    exact[0] += 0.1 * x.dot(&x);
    for k in 0..3 {
        assert!(
            (g[k] - exact[k]).abs() < 1e-13,
            "∂{k}: {} vs {}",
            g[k],
            exact[k]
        );
    }
}

#[test]
fn matrix_products_and_mean() {
    // ∇ of mean(B·C) over the entries of B, C = B ᵀ: matrix–matrix `.dot()` and `mean()`.
    let b0 = [0.5, -1.0, 2.0, 0.25, 1.5, -0.75];
    let g = grad(
        |p: &[Var]| {
            let b = Array2::from_shape_vec((2, 3), p.to_vec()).unwrap();
            b.dot(&b.t()).mean().unwrap()
        },
        &b0,
    );
    // mean(B Bᵀ) = (1/4) Σᵢⱼ Σₖ BᵢₖBⱼₖ = (1/4) Σₖ (Σᵢ Bᵢₖ)²  ⇒  ∂/∂Bᵢₖ = (1/2) Σᵢ' Bᵢ'ₖ.
    for (idx, gi) in g.iter().enumerate() {
        let k = idx % 3;
        let col = b0[k] + b0[3 + k];
        assert!((gi - 0.5 * col).abs() < 1e-14);
    }
}

/// `y ← α·A·x + β·y` with an active `β` that is exactly 0: ndarray skips `β·y` where
/// `β.is_zero()`, and `is_zero` compared only the value, so `∂/∂β` (= Σy₀ = 7) came out 0 on
/// the tape and in forward mode (a hunter). `is_zero` is now zero in every component.
#[test]
fn an_active_beta_of_zero_keeps_its_derivative() {
    fn gemv<T: Real + LinalgScalar>(p: &[T]) -> T {
        let a = ndarray::array![[1.0, 2.0], [3.0, 4.0]].mapv(T::cst);
        let x = ndarray::array![0.5, -1.0].mapv(T::cst);
        let mut y = ndarray::array![3.0, 4.0].mapv(T::cst);
        ndarray::linalg::general_mat_vec_mul(T::cst(1.0), &a, &x, p[0], &mut y);
        y.sum()
    }
    fn gemm<T: Real + LinalgScalar>(p: &[T]) -> T {
        let a = ndarray::array![[1.0, 2.0], [3.0, 4.0]].mapv(T::cst);
        let mut c = ndarray::array![[1.0, 2.0], [3.0, 4.0]].mapv(T::cst);
        ndarray::linalg::general_mat_mul(T::cst(1.0), &a, &a, p[0], &mut c);
        c.sum()
    }
    for beta in [0.0, 0.5] {
        // Closed forms: Σy₀ = 7 and ΣC₀ = 10.
        assert_eq!(grad(|p: &[Var]| gemv(p), &[beta]), [7.0]);
        assert_eq!(forward::gradient(|p: &[Dual64]| gemv(p), &[beta]), [7.0]);
        assert_eq!(grad(|p: &[Var]| gemm(p), &[beta]), [10.0]);
        assert_eq!(forward::gradient(|p: &[Dual64]| gemm(p), &[beta]), [10.0]);
    }
    // A constant zero is still a zero (the product skips `β·y`), and a Dual with a moving
    // tangent is not.
    use adjoint_core::num_traits::Zero;
    assert!(Var::constant(0.0).is_zero());
    assert!(Dual64::new(0.0, 0.0).is_zero());
    assert!(!Dual64::new(0.0, 1.0).is_zero());
}
