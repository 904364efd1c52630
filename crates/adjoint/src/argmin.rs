//! argmin adapter (feature `argmin`): write an objective once over [`Real`], optimise it with
//! argmin's gradient and Hessian based solvers (L-BFGS, BFGS, conjugate gradient, Newton-CG,
//! trust region, …).
//!
//! A generic function cannot be passed as one closure, so the objective is a type implementing
//! [`Objective`]: one method, generic over the number type. [`Problem`] wraps it and implements
//! argmin's
//!
//! * `CostFunction` — the objective on `f64` (the plain program);
//! * `Gradient` — one reverse sweep on the tape ([`tape::grad`]);
//! * `Hessian` — reverse over forward ([`tape::hessian`], n sweeps),
//!
//! over argmin-math's `vec` backend: parameters and gradients are `Vec<f64>`; the Hessian is a
//! [`Matrix`] (rows of `Vec<f64>`) that adds the matrix inverse the `vec` backend lacks, so
//! argmin's `Newton`, `NewtonCG` and trust-region solvers (Steihaug, Cauchy point, dogleg) all
//! accept it.
//!
//! ```
//! use adjoint::argmin::{Objective, Problem};
//! use adjoint::Real;
//! use argmin::core::{Executor, State};
//! use argmin::solver::newton::Newton;
//!
//! struct Rosenbrock;
//! impl Objective for Rosenbrock {
//!     fn eval<T: Real>(&self, x: &[T]) -> T {
//!         (T::cst(1.0) - x[0]).powi(2) + (x[1] - x[0] * x[0]).powi(2) * 100.0
//!     }
//! }
//!
//! // Newton's method with exact Hessians: x ← x − H⁻¹∇f.
//! let res = Executor::new(Problem::new(Rosenbrock), Newton::<f64>::new())
//!     .configure(|s| s.param(vec![-1.2, 1.0]).max_iters(10))
//!     .run()?;
//! let x = res.state().get_best_param().unwrap();
//! assert!((x[0] - 1.0).abs() < 1e-12 && (x[1] - 1.0).abs() < 1e-12);
//! # Ok::<(), argmin::core::Error>(())
//! ```

use crate::tape::{self, Var};
use crate::Real;
use argmin::core::{ArgminError, CostFunction, Error, Gradient, Hessian};
use argmin_math::{ArgminDot, ArgminInv};

/// An objective function written once, for every number type: `f64` for its value, the tape's
/// `Var` for its gradient, `Dual<Var>` for its Hessian.
///
/// ```
/// use adjoint::argmin::Objective;
/// use adjoint::{tape, Real};
///
/// /// Least squares: ½ Σᵢ (a·x − bᵢ)² with data held by the objective.
/// struct LeastSquares { a: Vec<[f64; 2]>, b: Vec<f64> }
///
/// impl Objective for LeastSquares {
///     fn eval<T: Real>(&self, x: &[T]) -> T {
///         let mut s = T::cst(0.0);
///         for (ai, &bi) in self.a.iter().zip(&self.b) {
///             let r = x[0] * ai[0] + x[1] * ai[1] - bi;
///             s += r * r * 0.5;
///         }
///         s
///     }
/// }
///
/// let ls = LeastSquares { a: vec![[1.0, 0.0], [1.0, 1.0]], b: vec![1.0, 3.0] };
/// assert_eq!(ls.eval(&[1.0, 2.0]), 0.0);
/// let g = tape::grad(|x: &[tape::Var]| ls.eval(x), &[0.0, 0.0]);
/// assert_eq!(g, vec![-4.0, -3.0]);
/// ```
pub trait Objective {
    /// The objective's value at `x`, for any number type.
    fn eval<T: Real>(&self, x: &[T]) -> T;
}

impl<O: Objective + ?Sized> Objective for &O {
    fn eval<T: Real>(&self, x: &[T]) -> T {
        (**self).eval(x)
    }
}

/// An [`Objective`] as an argmin problem: `CostFunction`, `Gradient` (tape, reverse mode) and
/// `Hessian` (tape, reverse over forward) over `Vec<f64>`.
///
/// (Not to be confused with `argmin::core::Problem`, argmin's internal wrapper that counts
/// evaluations: pass this one to `Executor::new`.)
///
/// ```
/// use adjoint::argmin::{Objective, Problem};
/// use adjoint::Real;
/// use argmin::core::{CostFunction, Gradient, Hessian};
///
/// struct Quadratic;
/// impl Objective for Quadratic {
///     fn eval<T: Real>(&self, x: &[T]) -> T {
///         x[0] * x[0] * 3.0 + x[0] * x[1] + x[1] * x[1]
///     }
/// }
///
/// let p = Problem::new(Quadratic);
/// assert_eq!(p.cost(&vec![1.0, 2.0])?, 9.0);
/// assert_eq!(p.gradient(&vec![1.0, 2.0])?, vec![8.0, 5.0]);
/// assert_eq!(p.hessian(&vec![1.0, 2.0])?.0, vec![vec![6.0, 1.0], vec![1.0, 2.0]]);
/// # Ok::<(), argmin::core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Problem<O> {
    objective: O,
}

impl<O: Objective> Problem<O> {
    /// Wrap an objective.
    ///
    /// ```
    /// # use adjoint::{argmin::{Objective, Problem}, Real};
    /// struct Sphere;
    /// impl Objective for Sphere {
    ///     fn eval<T: Real>(&self, x: &[T]) -> T { x.iter().map(|&v| v * v).sum() }
    /// }
    /// let p = Problem::new(Sphere);
    /// assert_eq!(p.objective().eval(&[3.0, 4.0]), 25.0);
    /// ```
    pub fn new(objective: O) -> Self {
        Problem { objective }
    }

    /// The wrapped objective.
    ///
    /// ```
    /// # use adjoint::{argmin::{Objective, Problem}, Real};
    /// struct Scaled(f64);
    /// impl Objective for Scaled {
    ///     fn eval<T: Real>(&self, x: &[T]) -> T { x[0] * self.0 }
    /// }
    /// assert_eq!(Problem::new(Scaled(2.0)).objective().0, 2.0);
    /// ```
    pub fn objective(&self) -> &O {
        &self.objective
    }

    /// Unwrap the objective.
    ///
    /// ```
    /// # use adjoint::{argmin::{Objective, Problem}, Real};
    /// struct Scaled(f64);
    /// impl Objective for Scaled {
    ///     fn eval<T: Real>(&self, x: &[T]) -> T { x[0] * self.0 }
    /// }
    /// assert_eq!(Problem::new(Scaled(2.0)).into_inner().0, 2.0);
    /// ```
    pub fn into_inner(self) -> O {
        self.objective
    }
}

impl<O: Objective> CostFunction for Problem<O> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, param: &Vec<f64>) -> Result<f64, Error> {
        Ok(self.objective.eval(param))
    }
}

impl<O: Objective> Gradient for Problem<O> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;

    fn gradient(&self, param: &Vec<f64>) -> Result<Vec<f64>, Error> {
        Ok(tape::grad(|x: &[Var]| self.objective.eval(x), param))
    }
}

impl<O: Objective> Hessian for Problem<O> {
    type Param = Vec<f64>;
    type Hessian = Matrix;

    fn hessian(&self, param: &Vec<f64>) -> Result<Matrix, Error> {
        Ok(Matrix(tape::hessian(|x| self.objective.eval(x), param)))
    }
}

/// A dense matrix stored as rows: the Hessian type of [`Problem`].
///
/// It implements what argmin's Hessian-based solvers ask of a Hessian: `ArgminDot<Vec<f64>,
/// Vec<f64>>` (matrix × vector; `pᵀ H v` follows from argmin-math's blanket `ArgminWeightedDot`)
/// and `ArgminInv` (Gauss–Jordan elimination with partial pivoting after scaling rows and
/// columns by powers of two; an error for a singular matrix, a non-finite entry, one too
/// ill-conditioned for an inverse within 1e-6 of exact, `‖A·A⁻¹ − I‖∞` of the scaled matrix, or
/// one whose inverse is beyond `f64`'s range). argmin-math's `vec` backend has no inverse for `Vec<Vec<f64>>`, which argmin's
/// `Newton` and dogleg solvers need.
///
/// ```
/// use adjoint::argmin::Matrix;
/// use argmin_math::{ArgminDot, ArgminInv};
///
/// let h = Matrix(vec![vec![4.0, 1.0], vec![2.0, 3.0]]);
/// let v: Vec<f64> = h.dot(&vec![1.0, -1.0]);
/// assert_eq!(v, vec![3.0, -1.0]);
/// let inv = h.inv()?;
/// let back: Vec<f64> = inv.dot(&v);
/// assert!((back[0] - 1.0).abs() < 1e-15 && (back[1] + 1.0).abs() < 1e-15);
/// assert!(Matrix(vec![vec![1.0, 2.0], vec![2.0, 4.0]]).inv().is_err());
/// # Ok::<(), argmin::core::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Matrix(pub Vec<Vec<f64>>);

impl ArgminDot<Vec<f64>, Vec<f64>> for Matrix {
    /// The matrix-vector product.
    ///
    /// # Panics
    /// If a row's length is not the vector's (the trait returns no `Result`; a zip would drop
    /// the extra entries silently), naming both.
    fn dot(&self, v: &Vec<f64>) -> Vec<f64> {
        self.0
            .iter()
            .enumerate()
            .map(|(i, row)| {
                assert_eq!(
                    row.len(),
                    v.len(),
                    "Matrix::dot: row {i} has {} entries but the vector has {}",
                    row.len(),
                    v.len()
                );
                row.iter().zip(v).map(|(a, b)| a * b).sum()
            })
            .collect()
    }
}

impl ArgminInv<Matrix> for Matrix {
    fn inv(&self) -> Result<Matrix, Error> {
        let n = self.0.len();
        let invalid = |text: String| -> Error { ArgminError::InvalidParameter { text }.into() };
        if self.0.iter().any(|row| row.len() != n) {
            return Err(invalid("Matrix::inv: the matrix is not square".into()));
        }
        for (i, row) in self.0.iter().enumerate() {
            if let Some((j, v)) = row.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                return Err(invalid(format!(
                    "Matrix::inv: entry ({i}, {j}) is {v}, not a finite number"
                )));
            }
        }
        // Equilibrated first, A' = R·A·C with R, C powers of two that bring each row's and then
        // each column's largest entry into [1, 2) (exact), so that neither the pivot test nor
        // the residual test below depends on how rows and variables are scaled (a test against
        // the largest entry of A called diag(1e10, 1e-10) singular); then A⁻¹ = C·A'⁻¹·R.
        // (The exponent kept within f64's: 2¹⁰³⁰ for a subnormal row is ∞, and `∞ · 0` made
        // the scaled matrix NaN.)
        let pow2 = |m: f64| {
            if m > 0.0 {
                (-m.log2().floor()).clamp(-1022.0, 1023.0).exp2()
            } else {
                1.0
            }
        };
        let r: Vec<f64> = self
            .0
            .iter()
            .map(|row| pow2(row.iter().fold(0.0f64, |m, v| m.max(v.abs()))))
            .collect();
        let c: Vec<f64> = (0..n)
            .map(|j| pow2((0..n).fold(0.0f64, |m, i| m.max((self.0[i][j] * r[i]).abs()))))
            .collect();
        let scaled: Vec<Vec<f64>> = (0..n)
            .map(|i| (0..n).map(|j| self.0[i][j] * r[i] * c[j]).collect())
            .collect();
        let singular = || invalid("Matrix::inv: the matrix is singular".into());
        // [A' | I] → [I | A'⁻¹] by Gauss–Jordan elimination with partial pivoting.
        let mut a = scaled.clone();
        let mut inv: Vec<Vec<f64>> = (0..n)
            .map(|i| (0..n).map(|j| if i == j { 1.0 } else { 0.0 }).collect())
            .collect();
        for col in 0..n {
            let pivot = (col..n)
                .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
                .expect("col < n");
            if a[pivot][col].abs() <= f64::EPSILON * n as f64 {
                return Err(singular());
            }
            a.swap(col, pivot);
            inv.swap(col, pivot);
            let d = a[col][col];
            for j in 0..n {
                a[col][j] /= d;
                inv[col][j] /= d;
            }
            for i in 0..n {
                if i != col {
                    let f = a[i][col];
                    if f != 0.0 {
                        for j in 0..n {
                            a[i][j] -= f * a[col][j];
                            inv[i][j] -= f * inv[col][j];
                        }
                    }
                }
            }
        }
        // An inverse too inaccurate to use is an error, not a result: ‖A'·A'⁻¹ − I‖∞.
        let residual = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        let s: f64 = (0..n).map(|k| scaled[i][k] * inv[k][j]).sum();
                        (s - if i == j { 1.0 } else { 0.0 }).abs()
                    })
                    .sum::<f64>()
            })
            // (NaN kept: `f64::max` drops it, and a NaN inverse passed the test; a hunter)
            .fold(0.0f64, |m, r| if r > m || r.is_nan() { r } else { m });
        if residual.is_nan() || residual > MAX_INVERSE_RESIDUAL {
            return Err(invalid(format!(
                "Matrix::inv: the matrix is too ill-conditioned to invert in f64: \
                 ‖A·A⁻¹ − I‖∞ = {residual:.1e} (after scaling rows and columns; at most \
                 {MAX_INVERSE_RESIDUAL:e} is accepted)"
            )));
        }
        let inverse: Vec<Vec<f64>> = (0..n)
            .map(|i| (0..n).map(|j| c[i] * inv[i][j] * r[j]).collect())
            .collect();
        for (i, row) in inverse.iter().enumerate() {
            if let Some((j, v)) = row.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                return Err(invalid(format!(
                    "Matrix::inv: entry ({i}, {j}) of the inverse is {v}: beyond f64's range"
                )));
            }
        }
        Ok(Matrix(inverse))
    }
}

/// The largest `‖A·A⁻¹ − I‖∞` (of the equilibrated matrix) that [`Matrix`]'s inverse returns
/// rather than reports: about what a condition number of 10¹⁰ leaves in `f64`.
const MAX_INVERSE_RESIDUAL: f64 = 1e-6;
