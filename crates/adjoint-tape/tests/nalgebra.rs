//! nalgebra on active scalars: linear solves, log-determinants, inverses and norms differentiated
//! on the tape and in forward mode, against finite differences and closed forms.
#![cfg(feature = "nalgebra")]
#![allow(clippy::needless_range_loop)] // (i, j) indices read as in the formulas

use adjoint_core::check::check_gradient;
use adjoint_core::forward::{self, Dual, Dual64};
use adjoint_core::Real;
use adjoint_tape::{grad, hessian, Var};
use nalgebra::{ComplexField, DMatrix, DVector, RealField};

const N: usize = 3;

/// A fixed, well-conditioned base matrix.
fn a0() -> DMatrix<f64> {
    DMatrix::from_row_slice(N, N, &[4.0, 1.0, -0.5, 0.3, 3.0, 0.7, -0.2, 0.4, 5.0])
}

/// The direction matrices: A(x) = A0 + Σₖ xₖ Eₖ (so ∂A/∂xₖ = Eₖ).
fn e(k: usize) -> DMatrix<f64> {
    let mut m = DMatrix::zeros(N, N);
    match k {
        0 => {
            m[(0, 0)] = 1.0;
            m[(1, 2)] = 0.5;
        }
        1 => {
            m[(0, 1)] = 1.0;
            m[(2, 0)] = -1.0;
        }
        2 => {
            m[(2, 2)] = 2.0;
            m[(1, 0)] = 0.25;
        }
        _ => {
            m[(1, 1)] = -1.0;
            m[(0, 2)] = 0.75;
        }
    }
    m
}

fn b() -> DVector<f64> {
    DVector::from_column_slice(&[1.0, -2.0, 0.5])
}

/// A(x) for any scalar: constants embedded with `Real::cst`.
fn a_of<T: Real + RealField>(x: &[T]) -> DMatrix<T> {
    let mut a = a0().map(T::cst);
    for (k, &xk) in x.iter().enumerate() {
        a += e(k).map(|v| xk * v);
    }
    a
}

/// x ↦ sum(A(x)⁻¹ b) by LU with partial pivoting.
fn solve_sum<T: Real + RealField>(x: &[T]) -> T {
    let rhs = b().map(T::cst);
    a_of(x).lu().solve(&rhs).expect("A(x) is invertible").sum()
}

/// The same through QR and through the explicit inverse: three algorithms, one function.
fn solve_sum_qr<T: Real + RealField>(x: &[T]) -> T {
    let rhs = b().map(T::cst);
    a_of(x).qr().solve(&rhs).expect("A(x) is invertible").sum()
}
fn solve_sum_inv<T: Real + RealField>(x: &[T]) -> T {
    let rhs = b().map(T::cst);
    (a_of(x).try_inverse().expect("A(x) is invertible") * rhs).sum()
}

const X: [f64; 4] = [0.3, -0.7, 0.2, 0.9];

#[test]
fn linear_solve_gradient_tape_forward_fd_and_closed_form() {
    let g = grad(|x: &[Var]| solve_sum(x), &X);
    let gf = forward::gradient(|x: &[Dual64]| solve_sum(x), &X);
    check_gradient(|x: &[f64]| solve_sum(x), &X, &g).assert_passed();
    check_gradient(|x: &[f64]| solve_sum(x), &X, &gf).assert_passed();

    // Closed form: ∂/∂xₖ 1ᵀA⁻¹b = −(A⁻ᵀ1)ᵀ Eₖ (A⁻¹b).
    let a = a_of(&X);
    let z = a.clone().lu().solve(&b()).unwrap();
    let y = a
        .transpose()
        .lu()
        .solve(&DVector::from_element(N, 1.0))
        .unwrap();
    for k in 0..X.len() {
        let exact = -y.dot(&(e(k) * &z));
        assert!(
            (g[k] - exact).abs() < 1e-13,
            "tape ∂{k}: {} vs {exact}",
            g[k]
        );
        assert!(
            (gf[k] - exact).abs() < 1e-13,
            "fwd ∂{k}: {} vs {exact}",
            gf[k]
        );
    }
    // The value is the plain program's (to rounding: the rule table divides as x·(1/y)).
    let v = adjoint_tape::value_and_grad(|x: &[Var]| solve_sum(x), &X).0;
    assert!((v - solve_sum(&X)).abs() < 1e-14);
}

#[test]
fn qr_and_explicit_inverse_give_the_lu_gradient() {
    let g = grad(|x: &[Var]| solve_sum(x), &X);
    let gq = grad(|x: &[Var]| solve_sum_qr(x), &X);
    let gi = grad(|x: &[Var]| solve_sum_inv(x), &X);
    for k in 0..X.len() {
        assert!(
            (g[k] - gq[k]).abs() < 1e-12,
            "qr ∂{k}: {} vs {}",
            gq[k],
            g[k]
        );
        assert!(
            (g[k] - gi[k]).abs() < 1e-12,
            "inv ∂{k}: {} vs {}",
            gi[k],
            g[k]
        );
    }
}

/// The symmetric matrix whose upper triangle is `p` (row by row).
fn sym<T: Real + RealField>(p: &[T]) -> DMatrix<T> {
    let mut a = DMatrix::from_element(N, N, T::cst(0.0));
    let mut it = p.iter();
    for i in 0..N {
        for j in i..N {
            let v = *it.next().expect("N(N+1)/2 parameters");
            a[(i, j)] = v;
            a[(j, i)] = v;
        }
    }
    a
}

/// ln det A by Cholesky: 2 Σ ln Lᵢᵢ.
fn log_det<T: Real + RealField>(p: &[T]) -> T {
    let l = sym(p).cholesky().expect("A is positive definite").l();
    l.diagonal().map(ComplexField::ln).sum() * 2.0
}

/// Upper triangle of a positive definite matrix.
const P: [f64; 6] = [4.0, 1.0, -0.5, 3.0, 0.7, 5.0];

#[test]
fn log_det_cholesky_gradient_is_the_inverse() {
    let g = grad(|p: &[Var]| log_det(p), &P);
    let gf = forward::gradient(|p: &[Dual64]| log_det(p), &P);
    check_gradient(|p: &[f64]| log_det(p), &P, &g).assert_passed();
    check_gradient(|p: &[f64]| log_det(p), &P, &gf).assert_passed();

    // d ln det A / dA = A⁻ᵀ; an off-diagonal parameter sits in two entries.
    let inv = sym(&P).try_inverse().unwrap();
    let mut k = 0;
    for i in 0..N {
        for j in i..N {
            let exact = if i == j {
                inv[(i, j)]
            } else {
                2.0 * inv[(i, j)]
            };
            assert!(
                (g[k] - exact).abs() < 1e-13,
                "tape ({i},{j}): {} vs {exact}",
                g[k]
            );
            assert!(
                (gf[k] - exact).abs() < 1e-13,
                "fwd ({i},{j}): {} vs {exact}",
                gf[k]
            );
            k += 1;
        }
    }
    // The value: ln det by Cholesky equals ln of LU's determinant.
    assert!((log_det(&P) - sym(&P).determinant().ln()).abs() < 1e-13);
}

#[test]
fn log_det_hessian_reverse_over_forward_matches_nested_duals() {
    // tape::hessian runs the function on Dual<Var>, forward::hessian on Dual<Dual<f64>>: both
    // through nalgebra's Cholesky.
    let h = hessian(|p| log_det(p), &P);
    let hf = forward::hessian(|p| log_det(p), &P);
    // Closed form: ∂²/∂Aᵢⱼ∂Aₖₗ ln det A = −(A⁻¹)ₗᵢ (A⁻¹)ⱼₖ, summed over both positions of each
    // off-diagonal parameter.
    let inv = sym(&P).try_inverse().unwrap();
    let idx: Vec<(usize, usize)> = (0..N).flat_map(|i| (i..N).map(move |j| (i, j))).collect();
    let positions = |(i, j): (usize, usize)| {
        if i == j {
            vec![(i, j)]
        } else {
            vec![(i, j), (j, i)]
        }
    };
    for (r, &pr) in idx.iter().enumerate() {
        for (c, &pc) in idx.iter().enumerate() {
            let mut exact = 0.0;
            for (i, j) in positions(pr) {
                for (k, l) in positions(pc) {
                    exact -= inv[(l, i)] * inv[(j, k)];
                }
            }
            assert!(
                (h[r][c] - exact).abs() < 1e-12,
                "H[{r}][{c}] {} vs {exact}",
                h[r][c]
            );
            assert!(
                (hf[r][c] - exact).abs() < 1e-12,
                "Hf[{r}][{c}] {} vs {exact}",
                hf[r][c]
            );
        }
    }
}

#[test]
fn norms_products_and_conversions() {
    // ∇ ‖M x‖₂ = Mᵀ M x / ‖M x‖ for a constant M.
    let m = DMatrix::from_row_slice(2, 3, &[1.0, 2.0, 0.0, -1.0, 0.5, 3.0]);
    let x = [0.4, -1.1, 2.0];
    let g = grad(
        |x: &[Var]| (m.map(Var::constant) * DVector::from_column_slice(x)).norm(),
        &x,
    );
    let mx = &m * DVector::from_column_slice(&x);
    let exact = m.transpose() * &mx / mx.norm();
    for k in 0..3 {
        assert!((g[k] - exact[k]).abs() < 1e-14);
    }
    // Conversions: f64 in as a constant, the primal value out.
    let c: Dual64 = nalgebra::convert(2.5);
    assert_eq!((c.re, c.eps), (2.5, 0.0));
    let back: f64 = nalgebra::try_convert(Dual64::new(3.0, 1.0)).unwrap();
    assert_eq!(back, 3.0);
    let v: f64 = nalgebra::try_convert(Var::constant(-1.5)).unwrap();
    assert_eq!(v, -1.5);
}

/// `.norm()` of a zero vector plus another input: forward mode and central differences give 0
/// for the zero part; the tape did NaN (∞ adjoint × 0 partial).
#[test]
fn norm_at_the_zero_vector_matches_forward_mode() {
    let x = [0.0, 0.0, 1.0];
    let f = |v: &[Var]| DVector::from_column_slice(&v[..2]).norm() + v[2];
    let fd = |v: &[Dual64]| DVector::from_column_slice(&v[..2]).norm() + v[2];
    let g = grad(f, &x);
    assert_eq!(g, forward::gradient(fd, &x));
    assert_eq!(g, vec![0.0, 0.0, 1.0]);
}

/// Second order at the zero vector: `norm()²` has the Hessian 2I as a function, but the
/// program takes `√0`, whose infinite partial meets a tangent that is 0 there and depends on
/// `x`. Forward over forward gives NaN on the diagonal (and 0 off it); the tape gave 0 (a zero
/// partial sends nothing), a finite wrong number (a hunter). Its Hessian-vector products are
/// NaN now, whole, wherever `∇f·v` is, and right away from 0.
#[test]
fn hessian_of_the_squared_norm_at_zero_is_nan_not_zero() {
    let f = |v: &[Dual<Var>]| squared_norm(v);
    let ff = |v: &[Dual<Dual64>]| squared_norm(v);
    let h = hessian(f, &[0.0, 0.0]);
    let hf = forward::hessian(ff, &[0.0, 0.0]);
    assert!(hf[0][0].is_nan() && hf[1][1].is_nan(), "{hf:?}");
    assert!(h.iter().flatten().all(|v| v.is_nan()), "{h:?}");
    let h = hessian(f, &[0.3, -1.2]);
    for (i, row) in h.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            let want = if i == j { 2.0 } else { 0.0 };
            assert!((v - want).abs() < 1e-12, "H[{i}][{j}] = {v}");
        }
    }
}

/// `‖v‖²` as `norm()²`.
fn squared_norm<T: RealField + Copy>(v: &[T]) -> T {
    let n = DVector::from_column_slice(v).norm();
    n * n
}

/// `symmetric_eigen` on the tape (`Var`, and `Dual<Var>` for Hessians) agrees with forward mode,
/// where differentiating nalgebra's iteration gave Hessians wrong by 0.3 (off-diagonal entries
/// of 1e-7 beside eigenvalues 1, 2, 5; a hunter).
#[test]
fn symmetric_eigen_hessians_on_the_tape_match_forward_mode() {
    use adjoint_core::interop::nalgebra::symmetric_eigen;
    fn sym3<T: Real + nalgebra::Scalar>(x: &[T]) -> DMatrix<T> {
        DMatrix::from_row_slice(
            3,
            3,
            &[x[0], x[3], x[4], x[3], x[1], x[5], x[4], x[5], x[2]],
        )
    }
    for x in [
        [1.0, 2.0, 5.0, 1e-7, 5e-8, 3e-8],
        [1.0, -2.0, 0.5, 0.8, -0.3, 1.1],
    ] {
        for k in 0..3 {
            let g = grad(|v: &[Var]| symmetric_eigen(&sym3(v)).0[k], &x);
            let gf = forward::gradient(|v: &[Dual64]| symmetric_eigen(&sym3(v)).0[k], &x);
            let h = hessian(|v: &[Dual<Var>]| symmetric_eigen(&sym3(v)).0[k], &x);
            let hf = forward::hessian(|v: &[Dual<Dual64>]| symmetric_eigen(&sym3(v)).0[k], &x);
            for i in 0..6 {
                assert!(
                    (g[i] - gf[i]).abs() < 1e-12,
                    "λ{k} ∂{i}: {} vs {}",
                    g[i],
                    gf[i]
                );
                for j in 0..6 {
                    let (a, b) = (h[i][j], hf[i][j]);
                    assert!(
                        (a - b).abs() < 1e-9 * (1.0 + b.abs()),
                        "λ{k} H[{i}][{j}]: {a} vs {b}"
                    );
                }
            }
        }
    }
}

/// nalgebra's Householder, Givens and eigenvalue steps test `is_zero()` on values computed from
/// the entries (`|a₀₀|`, a column's squared norm) and skip the step on a zero, as `f64` does; on
/// the tape an active entry 0 made `|a|` a recorded zero that did not count, and they divided
/// by it: NaN values and gradients for non-singular matrices with a zero entry, and SVD/Schur
/// iterations that never ended (a hunter). Forward mode and finite differences are the
/// references; the value is `f64`'s.
#[test]
fn decompositions_of_matrices_with_zero_entries() {
    fn sym<T: Real + RealField>(x: &[T]) -> DMatrix<T> {
        DMatrix::from_fn(
            3,
            3,
            |i, j| if i >= j { x[i * 3 + j] } else { x[j * 3 + i] },
        )
    }
    fn qr_solve<T: Real + RealField>(x: &[T]) -> T {
        let b = DVector::from_fn(2, |i, _| T::from(i as f64 + 1.0));
        DMatrix::from_row_slice(2, 2, x)
            .qr()
            .solve(&b)
            .unwrap()
            .sum()
    }
    fn eig_cubes<T: Real + RealField>(x: &[T]) -> T {
        let e = sym(x).symmetric_eigenvalues();
        e.iter().map(|&l| l * l * l).sum::<T>()
    }
    fn sv_squares<T: Real + RealField>(x: &[T]) -> T {
        let s = DMatrix::from_row_slice(3, 3, x).singular_values();
        s.iter().map(|&v| v * v).sum::<T>()
    }
    fn schur_trace<T: Real + RealField>(x: &[T]) -> T {
        sym(x).schur().unpack().1.trace()
    }
    // the tape against forward mode, and the project's finite-difference checker; the value
    // is f64's, bit for bit
    macro_rules! check {
        ($name:expr, $f:ident, $x:expr) => {{
            let x: &[f64] = &$x;
            let (v, g) = adjoint_tape::value_and_grad(|v| $f(v), x);
            assert_eq!(v.to_bits(), $f(x).to_bits(), "{}: value", $name);
            let gf = forward::gradient(|v| $f(v), x);
            for (a, b) in g.iter().zip(&gf) {
                assert!(
                    (a - b).abs() <= 1e-10 * (1.0 + b.abs()),
                    "{}: {g:?} vs {gf:?}",
                    $name
                );
            }
            check_gradient(|v: &[f64]| $f(v), x, &g).assert_passed();
            g
        }};
    }
    let g = check!("qr solve", qr_solve, [0.0, 1.0, 1.0, 0.0]);
    // closed form: A⁻¹ = A, x = (2, 1), ∂(Σx)/∂A = −A⁻ᵀ 1 xᵀ
    for (gi, want) in g.iter().zip([-2.0, -1.0, -2.0, -1.0]) {
        assert!((gi - want).abs() < 1e-14, "{g:?}");
    }
    // a zero below the diagonal, then a diagonal matrix (every off-diagonal input 0)
    check!(
        "eigenvalues",
        eig_cubes,
        [2.0, 0.0, 1.0, 0.0, 3.0, 1.0, 1.0, 1.0, 4.0]
    );
    let d = [1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 5.0];
    check!("eigenvalues, diagonal", eig_cubes, d);
    check!("singular values, diagonal", sv_squares, d);
    check!("schur, diagonal", schur_trace, d);
    // an active β = 0 still counts as nonzero: ∂/∂β of β·y is y (the reason `is_zero` looks at
    // the derivative, not the value alone)
    let g = grad(
        |v| {
            let y = DVector::from_column_slice(&v[1..]);
            let mut z = y.clone();
            z.gemv(Var::from(1.0), &DMatrix::identity(2, 2), &y, v[0]);
            z.sum()
        },
        &[0.0, 1.0, 2.0],
    );
    assert_eq!(g, vec![3.0, 1.0, 1.0]);
}

/// At an exactly singular matrix with active entries an active zero pivot is not `is_zero` (so
/// that `β·y` with an active `β = 0` keeps `∂/∂β`), and nalgebra's LU divides by it: the
/// determinant of `diag(0, 1, 1, 1)` is not `f64`'s 0, and `try_inverse` of `[[0, 0], [0, 1]]`
/// is `Some` (a hunter). The documented contract (interop::nalgebra): never a finite wrong
/// value there — a non-finite one (or, should that change, `f64`'s own) — on the tape and in
/// forward mode alike; two equal rows (no zero pivot) stay exact.
#[test]
fn singular_matrices_give_f64_s_answer_or_a_non_finite_one() {
    fn det<T: Real + RealField>(x: &[T]) -> T {
        let n = (x.len() as f64).sqrt() as usize;
        DMatrix::from_row_slice(n, n, x).determinant()
    }
    let diag = [
        0., 0., 0., 0., 0., 1., 0., 0., 0., 0., 1., 0., 0., 0., 0., 1.,
    ];
    let rows = [
        2., 1., 0., 0., 0., 0., 0., 1., 0., 0., 0., 0., 0., 1., 0., 0., 0., 0., 0., 1., 0., 0., 1.,
        1., 1.,
    ];
    for x in [&diag[..], &rows[..]] {
        let plain = det(x);
        assert_eq!(plain, 0.0);
        let (v, _) = adjoint_tape::value_and_grad(|v: &[Var]| det(v), x);
        assert!(v == plain || !v.is_finite(), "tape: {v}");
        let xd: Vec<Dual64> = x.iter().map(|&v| Dual::variable(v)).collect();
        let d = det(&xd);
        assert!(d.re == plain || !d.re.is_finite(), "forward: {d:?}");
    }
    // equal rows: a nonzero pivot each step, the value exact
    let equal = [
        1., 2., 3., 4., 1., 2., 3., 4., 0., 1., 5., 2., 3., 0., 1., 1.,
    ];
    let (v, _) = adjoint_tape::value_and_grad(|v: &[Var]| det(v), &equal);
    assert_eq!(v, det(&equal[..]));
    grad(
        |v: &[Var]| {
            let m = DMatrix::from_row_slice(2, 2, v);
            match m.try_inverse() {
                None => {}
                Some(inv) => assert!(inv.iter().any(|e| !e.value().is_finite()), "{inv}"),
            }
            v[0]
        },
        &[0.0, 0.0, 0.0, 1.0],
    );
    assert!(DMatrix::from_row_slice(2, 2, &[0.0, 0.0, 0.0, 1.0])
        .try_inverse()
        .is_none());
}
