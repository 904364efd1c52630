//! nalgebra's scalar traits for adjoint's number types (feature `nalgebra`, nalgebra 0.35).
//!
//! With this feature [`Dual<T>`](crate::forward::Dual) (any nesting depth),
//! [`DualVec<N>`](crate::forward::DualVec) and, with adjoint-tape's `nalgebra` feature, the
//! tape's `Var` implement `nalgebra::RealField` and everything it needs (`ComplexField`,
//! `Field`, `SimdValue`, `SubsetOf`/`SupersetOf<f64>` and `<f32>`, `num_traits::Signed` and
//! `FromPrimitive`, `approx`'s `AbsDiffEq`/`RelativeEq`/`UlpsEq`). So nalgebra matrices of
//! active numbers add, multiply, solve (`lu()`, `cholesky()`, `qr()`), invert and take norms, and
//! the derivative flows through nalgebra's own algorithm: you get the exact derivative of the
//! floating-point program nalgebra runs.
//!
//! Semantics worth knowing:
//!
//! * every math method calls the number type's `num_traits::Float` method, so derivatives come
//!   from the shared rule table ([`rules`](crate::rules));
//! * comparisons (`PartialOrd`, `relative_eq`, pivoting by `abs`) look at primal values, so a
//!   pivoting decomposition differentiates the branch it took;
//! * `is_zero` does not (see [`interop`](crate::interop)): at an exactly singular matrix with
//!   active entries an active zero pivot counts as nonzero, and the LU divides by it —
//!   `determinant()` (n ≥ 4; 2 × 2 and 3 × 3 are closed forms) is NaN where `f64`'s is 0, and
//!   `try_inverse()` / `lu().solve()` return `Some` with infinite or NaN entries where `f64`'s
//!   return `None` (a value, never a finite wrong number). To branch as the `f64` program
//!   does, test singularity on the primal values first (`m.map(|v| v.value())`); the
//!   determinant's derivative there is its cofactor matrix, which a skipped pivot would not
//!   give either;
//! * `f64`/`f32` embed as constants (`SupersetOf::from_subset`); `to_subset` returns the primal
//!   value and drops the derivative, like [`Real::value`](crate::Real::value);
//! * it is a real field: `imaginary()` is 0, `conjugate()` is the identity, `argument()` is 0 or
//!   π (a constant);
//! * iterative decompositions (`symmetric_eigen`, `svd`) are differentiated as the iteration
//!   they run. Deflation (an entry below a tolerance, compared on primal values, replaced by a
//!   constant zero) drops derivatives at and near reducible matrices (diagonal, block
//!   diagonal), and the rotations' second-order parts cancel: second derivatives of
//!   eigenvalues, and eigenvector and singular-vector derivatives, lose accuracy like
//!   `ε‖A‖²/δ²` for off-diagonal entries of size `δ` (Hessian entries wrong by 0.3 at
//!   `δ = 1e-7` beside eigenvalues 1, 2, 5). First derivatives of eigenvalues are right. `svd`
//!   does the same at and near rank-deficient matrices, its smallest singular value `σ` in
//!   `δ`'s part: even `svd(true, true).recompose()`, the identity, has first derivatives wrong
//!   by about `ε‖A‖²/σ²` (1e-4 at `σ = 1e-6`, 100 at `σ = 1e-9`, singular values near 1
//!   otherwise; 0.04 at rank 2 exactly, a 3 × 3 matrix). For symmetric eigen-decompositions use
//!   [`symmetric_eigen`] (derivatives of the function, to every order that matters); for
//!   singular values and vectors, differentiate away from such matrices.
//!
//! ```
//! use adjoint_core::forward::{self, Dual64};
//! use nalgebra::{DMatrix, DVector};
//!
//! // d/dt of sum(A(t)⁻¹ b) with A(t) = [[2 + t, 1], [1, 3]], b = [1, 2], by one forward sweep.
//! let d = forward::derivative(
//!     |t: Dual64| {
//!         let a = DMatrix::from_row_slice(2, 2, &[t + 2.0, 1.0.into(), 1.0.into(), 3.0.into()]);
//!         let b = DVector::from_vec(vec![1.0.into(), 2.0.into()]);
//!         a.lu().solve(&b).unwrap().sum()
//!     },
//!     0.0,
//! );
//! // x = A⁻¹b = (0.2, 0.6); d(A⁻¹b)/dt = −A⁻¹ (dA/dt) x = −A⁻¹ (0.2, 0) = (−0.12, 0.04).
//! assert!((d - (-0.08)).abs() < 1e-15);
//! ```

/// Implement nalgebra's scalar traits (`RealField`, `ComplexField`, `Field`, `SimdValue`,
/// `SubsetOf`/`SupersetOf<f64>`/`<f32>`, `num_traits::Signed`, `approx`'s comparisons) for a
/// type that implements [`Lift`](crate::lift::Lift) and [`impl_real!`](crate::impl_real) and
/// [`impl_from_primitive!`](crate::impl_from_primitive) (feature `nalgebra`).
///
/// Syntax as [`impl_real!`](crate::impl_real): `impl_nalgebra!([T: Real] Dual<T>)`,
/// `impl_nalgebra!([] Var)`. adjoint's own number types already invoke it; an engine outside
/// this workspace invokes it for its type (its crate needs `nalgebra` 0.35 and `approx` 0.5).
/// Each method calls the type's `num_traits::Float` (or [`Real`](crate::Real)) method, so no
/// derivative is written here.
///
/// ```
/// # use adjoint_core::lift::Lift;
/// # use adjoint_core::rules::{self, Op1, Op2};
/// # #[derive(Clone, Copy, Debug)]
/// # struct Counted { v: f64, ops: u32 }
/// # impl Lift for Counted {
/// #     type Inner = f64;
/// #     fn primal(&self) -> f64 { self.v }
/// #     fn constant(v: f64) -> Self { Counted { v, ops: 0 } }
/// #     fn lift1(self, op: Op1) -> Self {
/// #         Counted { v: rules::unary(op, self.v).value, ops: self.ops + 1 }
/// #     }
/// #     fn lift2(self, o: Self, op: Op2) -> Self {
/// #         Counted { v: rules::binary(op, self.v, o.v).value, ops: self.ops + o.ops + 1 }
/// #     }
/// #     fn lift2_const_right(self, c: f64, op: Op2) -> Self { self.lift2(Self::constant(c), op) }
/// #     fn lift2_const_left(c: f64, x: Self, op: Op2) -> Self { Self::constant(c).lift2(x, op) }
/// # }
/// # impl std::fmt::Display for Counted {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "{}", self.v) }
/// # }
/// // `Counted` is the toy engine of `Lift`'s example: a number that counts its primitives.
/// adjoint_core::impl_real!([] Counted);
/// adjoint_core::impl_from_primitive!([] Counted);
/// adjoint_core::impl_nalgebra!([] Counted);
///
/// let c = |v| Counted { v, ops: 0 };
/// let v = nalgebra::Vector2::new(c(3.0), c(4.0));
/// let n = v.norm();
/// assert_eq!(n.v, 5.0);
/// assert!(n.ops >= 3); // two squares, one sum, one square root: all through `Lift`
/// ```
#[macro_export]
#[cfg_attr(docsrs, doc(cfg(feature = "nalgebra")))]
macro_rules! impl_nalgebra {
    ([$($gen:tt)*] $ty:ty) => {
        const _: () = {
            use $crate::__private::simba::scalar::{ComplexField, Field, RealField, SubsetOf};
            use $crate::__private::simba::simd::SimdValue;
            use $crate::__private::approx::{AbsDiffEq, RelativeEq, UlpsEq};
            use $crate::num_traits::{Float, FloatConst, Signed};

            impl<$($gen)*> SimdValue for $ty {
                const LANES: usize = 1;
                type Element = Self;
                type SimdBool = bool;

                #[inline(always)]
                fn splat(val: Self) -> Self {
                    val
                }
                #[inline(always)]
                fn extract(&self, _: usize) -> Self {
                    *self
                }
                // `unsafe` only because simba's trait declares it so: the body is safe.
                #[inline(always)]
                unsafe fn extract_unchecked(&self, _: usize) -> Self {
                    *self
                }
                #[inline(always)]
                fn replace(&mut self, _: usize, val: Self) {
                    *self = val;
                }
                #[inline(always)]
                unsafe fn replace_unchecked(&mut self, _: usize, val: Self) {
                    *self = val;
                }
                #[inline(always)]
                fn select(self, cond: bool, other: Self) -> Self {
                    if cond {
                        self
                    } else {
                        other
                    }
                }
            }

            impl<$($gen)*> Field for $ty {}

            impl<$($gen)*> SubsetOf<$ty> for $ty {
                #[inline]
                fn to_superset(&self) -> Self {
                    *self
                }
                #[inline]
                fn from_superset_unchecked(element: &Self) -> Self {
                    *element
                }
                #[inline]
                fn is_in_subset(_: &Self) -> bool {
                    true
                }
            }

            /// `f64` embeds as a constant; back to `f64` is the primal value.
            impl<$($gen)*> SubsetOf<$ty> for f64 {
                #[inline]
                fn to_superset(&self) -> $ty {
                    <$ty as ::core::convert::From<f64>>::from(*self)
                }
                #[inline]
                fn from_superset_unchecked(element: &$ty) -> f64 {
                    $crate::Real::value(element)
                }
                #[inline]
                fn is_in_subset(_: &$ty) -> bool {
                    true
                }
            }

            /// `f32` embeds as a constant; back to `f32` rounds the primal value.
            impl<$($gen)*> SubsetOf<$ty> for f32 {
                #[inline]
                fn to_superset(&self) -> $ty {
                    <$ty as ::core::convert::From<f64>>::from(f64::from(*self))
                }
                #[inline]
                fn from_superset_unchecked(element: &$ty) -> f32 {
                    $crate::Real::value(element) as f32
                }
                #[inline]
                fn is_in_subset(_: &$ty) -> bool {
                    true
                }
            }

            impl<$($gen)*> Signed for $ty {
                #[inline]
                fn abs(&self) -> Self {
                    <Self as Float>::abs(*self)
                }
                #[inline]
                fn abs_sub(&self, other: &Self) -> Self {
                    #[allow(deprecated)]
                    <Self as Float>::abs_sub(*self, *other)
                }
                #[inline]
                fn signum(&self) -> Self {
                    <Self as Float>::signum(*self)
                }
                #[inline]
                fn is_positive(&self) -> bool {
                    $crate::Real::value(self) > 0.0
                }
                #[inline]
                fn is_negative(&self) -> bool {
                    $crate::Real::value(self) < 0.0
                }
            }

            impl<$($gen)*> AbsDiffEq for $ty {
                type Epsilon = Self;
                #[inline]
                fn default_epsilon() -> Self {
                    <Self as ::core::convert::From<f64>>::from(f64::EPSILON)
                }
                #[inline]
                fn abs_diff_eq(&self, other: &Self, epsilon: Self) -> bool {
                    $crate::Real::value(self).abs_diff_eq(
                        &$crate::Real::value(other),
                        $crate::Real::value(&epsilon),
                    )
                }
            }

            impl<$($gen)*> RelativeEq for $ty {
                #[inline]
                fn default_max_relative() -> Self {
                    <Self as ::core::convert::From<f64>>::from(f64::EPSILON)
                }
                #[inline]
                fn relative_eq(&self, other: &Self, epsilon: Self, max_relative: Self) -> bool {
                    $crate::Real::value(self).relative_eq(
                        &$crate::Real::value(other),
                        $crate::Real::value(&epsilon),
                        $crate::Real::value(&max_relative),
                    )
                }
            }

            impl<$($gen)*> UlpsEq for $ty {
                #[inline]
                fn default_max_ulps() -> u32 {
                    4
                }
                #[inline]
                fn ulps_eq(&self, other: &Self, epsilon: Self, max_ulps: u32) -> bool {
                    $crate::Real::value(self).ulps_eq(
                        &$crate::Real::value(other),
                        $crate::Real::value(&epsilon),
                        max_ulps,
                    )
                }
            }

            impl<$($gen)*> ComplexField for $ty {
                type RealField = Self;

                #[inline]
                fn from_real(re: Self) -> Self {
                    re
                }
                #[inline]
                fn real(self) -> Self {
                    self
                }
                #[inline]
                fn imaginary(self) -> Self {
                    <Self as ::core::convert::From<f64>>::from(0.0)
                }
                #[inline]
                fn modulus(self) -> Self {
                    <Self as Float>::abs(self)
                }
                #[inline]
                fn modulus_squared(self) -> Self {
                    self * self
                }
                #[inline]
                fn argument(self) -> Self {
                    let pi = if $crate::Real::value(&self) < 0.0 { ::core::f64::consts::PI } else { 0.0 };
                    <Self as ::core::convert::From<f64>>::from(pi)
                }
                #[inline]
                fn norm1(self) -> Self {
                    <Self as Float>::abs(self)
                }
                #[inline]
                fn scale(self, factor: Self) -> Self {
                    self * factor
                }
                #[inline]
                fn unscale(self, factor: Self) -> Self {
                    self / factor
                }
                #[inline]
                fn signum(self) -> Self {
                    <Self as Float>::signum(self)
                }
                #[inline]
                fn floor(self) -> Self {
                    <Self as Float>::floor(self)
                }
                #[inline]
                fn ceil(self) -> Self {
                    <Self as Float>::ceil(self)
                }
                #[inline]
                fn round(self) -> Self {
                    <Self as Float>::round(self)
                }
                #[inline]
                fn trunc(self) -> Self {
                    <Self as Float>::trunc(self)
                }
                #[inline]
                fn fract(self) -> Self {
                    <Self as Float>::fract(self)
                }
                #[inline]
                fn mul_add(self, a: Self, b: Self) -> Self {
                    <Self as Float>::mul_add(self, a, b)
                }
                #[inline]
                fn abs(self) -> Self {
                    <Self as Float>::abs(self)
                }
                #[inline]
                fn hypot(self, other: Self) -> Self {
                    <Self as Float>::hypot(self, other)
                }
                #[inline]
                fn recip(self) -> Self {
                    <Self as Float>::recip(self)
                }
                #[inline]
                fn conjugate(self) -> Self {
                    self
                }
                #[inline]
                fn sin(self) -> Self {
                    <Self as Float>::sin(self)
                }
                #[inline]
                fn cos(self) -> Self {
                    <Self as Float>::cos(self)
                }
                #[inline]
                fn sin_cos(self) -> (Self, Self) {
                    <Self as Float>::sin_cos(self)
                }
                #[inline]
                fn tan(self) -> Self {
                    <Self as Float>::tan(self)
                }
                #[inline]
                fn asin(self) -> Self {
                    <Self as Float>::asin(self)
                }
                #[inline]
                fn acos(self) -> Self {
                    <Self as Float>::acos(self)
                }
                #[inline]
                fn atan(self) -> Self {
                    <Self as Float>::atan(self)
                }
                #[inline]
                fn sinh(self) -> Self {
                    <Self as Float>::sinh(self)
                }
                #[inline]
                fn cosh(self) -> Self {
                    <Self as Float>::cosh(self)
                }
                #[inline]
                fn tanh(self) -> Self {
                    <Self as Float>::tanh(self)
                }
                #[inline]
                fn asinh(self) -> Self {
                    <Self as Float>::asinh(self)
                }
                #[inline]
                fn acosh(self) -> Self {
                    <Self as Float>::acosh(self)
                }
                #[inline]
                fn atanh(self) -> Self {
                    <Self as Float>::atanh(self)
                }
                #[inline]
                fn log(self, base: Self) -> Self {
                    <Self as Float>::log(self, base)
                }
                #[inline]
                fn log2(self) -> Self {
                    <Self as Float>::log2(self)
                }
                #[inline]
                fn log10(self) -> Self {
                    <Self as Float>::log10(self)
                }
                #[inline]
                fn ln(self) -> Self {
                    <Self as Float>::ln(self)
                }
                #[inline]
                fn ln_1p(self) -> Self {
                    <Self as Float>::ln_1p(self)
                }
                #[inline]
                fn sqrt(self) -> Self {
                    <Self as Float>::sqrt(self)
                }
                #[inline]
                fn exp(self) -> Self {
                    <Self as Float>::exp(self)
                }
                #[inline]
                fn exp2(self) -> Self {
                    <Self as Float>::exp2(self)
                }
                #[inline]
                fn exp_m1(self) -> Self {
                    <Self as Float>::exp_m1(self)
                }
                #[inline]
                fn powi(self, n: i32) -> Self {
                    <Self as Float>::powi(self, n)
                }
                #[inline]
                fn powf(self, n: Self) -> Self {
                    <Self as Float>::powf(self, n)
                }
                #[inline]
                fn powc(self, n: Self) -> Self {
                    <Self as Float>::powf(self, n)
                }
                #[inline]
                fn cbrt(self) -> Self {
                    <Self as Float>::cbrt(self)
                }
                #[inline]
                fn is_finite(&self) -> bool {
                    <Self as Float>::is_finite(*self)
                }
                #[inline]
                fn try_sqrt(self) -> Option<Self> {
                    if $crate::Real::value(&self) >= 0.0 {
                        Some(<Self as Float>::sqrt(self))
                    } else {
                        None
                    }
                }
            }

            impl<$($gen)*> RealField for $ty {
                #[inline]
                fn is_sign_positive(&self) -> bool {
                    <Self as Float>::is_sign_positive(*self)
                }
                #[inline]
                fn is_sign_negative(&self) -> bool {
                    <Self as Float>::is_sign_negative(*self)
                }
                #[inline]
                fn copysign(self, sign: Self) -> Self {
                    <Self as Float>::copysign(self, sign)
                }
                #[inline]
                fn max(self, other: Self) -> Self {
                    <Self as Float>::max(self, other)
                }
                #[inline]
                fn min(self, other: Self) -> Self {
                    <Self as Float>::min(self, other)
                }
                #[inline]
                fn clamp(self, min: Self, max: Self) -> Self {
                    // `Real::clamp`'s rule (all of the derivative to `self` at a bound, a panic
                    // for min > max); `min(max(…))` split it between `self` and the bound
                    <Self as $crate::Real>::clamp(self, min, max)
                }
                #[inline]
                fn atan2(self, other: Self) -> Self {
                    <Self as Float>::atan2(self, other)
                }
                #[inline]
                fn min_value() -> Option<Self> {
                    Some(<Self as Float>::min_value())
                }
                #[inline]
                fn max_value() -> Option<Self> {
                    Some(<Self as Float>::max_value())
                }
                #[inline]
                fn pi() -> Self {
                    <Self as FloatConst>::PI()
                }
                #[inline]
                fn two_pi() -> Self {
                    <Self as FloatConst>::TAU()
                }
                #[inline]
                fn frac_pi_2() -> Self {
                    <Self as FloatConst>::FRAC_PI_2()
                }
                #[inline]
                fn frac_pi_3() -> Self {
                    <Self as FloatConst>::FRAC_PI_3()
                }
                #[inline]
                fn frac_pi_4() -> Self {
                    <Self as FloatConst>::FRAC_PI_4()
                }
                #[inline]
                fn frac_pi_6() -> Self {
                    <Self as FloatConst>::FRAC_PI_6()
                }
                #[inline]
                fn frac_pi_8() -> Self {
                    <Self as FloatConst>::FRAC_PI_8()
                }
                #[inline]
                fn frac_1_pi() -> Self {
                    <Self as FloatConst>::FRAC_1_PI()
                }
                #[inline]
                fn frac_2_pi() -> Self {
                    <Self as FloatConst>::FRAC_2_PI()
                }
                #[inline]
                fn frac_2_sqrt_pi() -> Self {
                    <Self as FloatConst>::FRAC_2_SQRT_PI()
                }
                #[inline]
                fn e() -> Self {
                    <Self as FloatConst>::E()
                }
                #[inline]
                fn log2_e() -> Self {
                    <Self as FloatConst>::LOG2_E()
                }
                #[inline]
                fn log10_e() -> Self {
                    <Self as FloatConst>::LOG10_E()
                }
                #[inline]
                fn ln_2() -> Self {
                    <Self as FloatConst>::LN_2()
                }
                #[inline]
                fn ln_10() -> Self {
                    <Self as FloatConst>::LN_10()
                }
            }
        };
    };
}

/// Eigenvalues (ascending) and eigenvectors (the columns, in the same order) of the symmetric
/// matrix whose lower triangle is `a`'s (any nalgebra matrix: `DMatrix`, `Matrix3`, a view), with derivatives that are those of the mathematical
/// function, not of an iteration: use it instead of nalgebra's `symmetric_eigen` wherever
/// derivatives of an eigen-decomposition matter, above all second ones (Hessians).
///
/// Differentiating nalgebra's own iteration gives the derivatives of its floating-point steps:
/// first derivatives of eigenvalues are right, but second derivatives lose accuracy like
/// `ε‖A‖²/δ²` where `δ` is the size of the off-diagonal entries the iteration removes (at
/// `δ = 1e-7` beside diagonal entries of order 1, Hessian entries were wrong by 0.3, and not
/// symmetric), and eigenvector derivatives likewise.
///
/// How: the decomposition `A₀ = V Λ Vᵀ` of the primal values is computed in `f64` (nalgebra),
/// then `B = Vᵀ A V` is formed in `T` (its primal part diagonal up to rounding, its derivative
/// parts not), and three cyclic Jacobi sweeps in `T` rotate `B` to diagonal form, each rotation
/// zeroing its entry exactly, as a function of the inputs. Off the diagonal what remains is of
/// order `d⁸` in a perturbation `d` of `A`, so the eigenvalues' derivatives are exact to order
/// 15 and the eigenvectors' to order 7 (to rounding), at any nesting of [`Dual`](crate::forward::Dual)
/// and on any engine's number (`Dual<Var>` for tape Hessians). Cost: about `20 n³` operations
/// in `T` after the `f64` decomposition.
///
/// At a repeated eigenvalue the values are still right, but the derivatives of the repeated
/// eigenvalues and of their eigenvectors do not exist (a rotation between the eigenvectors is
/// as good as any other): those derivative parts are not meaningful, while the other
/// eigenvalues' are still right, to first and second order. Eigenvector signs are those of
/// nalgebra's `f64` decomposition. (The tests check derivatives to third order; the orders
/// above follow from the sweeps' quadratic convergence.)
///
/// ```
/// use adjoint_core::forward;
/// use adjoint_core::interop::nalgebra::symmetric_eigen;
/// use adjoint_core::Real;
/// use nalgebra::DMatrix;
///
/// // The smallest eigenvalue of [[1, x, 0], [x, 2, 0], [0, 0, 5]] is (3 − √(1 + 4x²)) / 2:
/// // its second derivative at x = 1e-7 is −2 (to 1e-13).
/// fn lambda_min<T: Real + nalgebra::Scalar>(x: &[T]) -> T {
///     let (c, z) = (T::cst, T::zero());
///     let a = DMatrix::from_row_slice(3, 3, &[c(1.0), x[0], z, x[0], c(2.0), z, z, z, c(5.0)]);
///     symmetric_eigen(&a).0[0]
/// }
/// assert!((lambda_min(&[1e-7]) - (3.0 - (1.0 + 4e-14f64).sqrt()) / 2.0).abs() < 1e-15);
/// let h = forward::hessian(|x| lambda_min(x), &[1e-7]);
/// assert!((h[0][0] + 2.0).abs() < 1e-9, "{h:?}");
/// ```
///
/// # Panics
/// If `a` is not square.
pub fn symmetric_eigen<T, R, C, S>(
    a: &nalgebra::Matrix<T, R, C, S>,
) -> (nalgebra::DVector<T>, nalgebra::DMatrix<T>)
where
    T: crate::Real + nalgebra::Scalar,
    R: nalgebra::Dim,
    C: nalgebra::Dim,
    S: nalgebra::RawStorage<T, R, C>,
{
    let n = a.nrows();
    assert_eq!(
        a.ncols(),
        n,
        "symmetric_eigen: a square matrix, not {n}×{}",
        a.ncols()
    );
    // the lower triangle, as nalgebra's `symmetric_eigen` reads it
    let at = |i: usize, j: usize| if i >= j { a[(i, j)] } else { a[(j, i)] };
    let e =
        nalgebra::SymmetricEigen::new(nalgebra::DMatrix::from_fn(n, n, |i, j| at(i, j).value()));
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| e.eigenvalues[i].total_cmp(&e.eigenvalues[j]));
    let v = |i: usize, j: usize| e.eigenvectors[(i, order[j])];
    // B = Vᵀ A V (W = A V first), symmetric
    let w: Vec<T> = (0..n * n)
        .map(|ij| {
            let (i, j) = (ij / n, ij % n);
            (0..n).fold(T::zero(), |s, k| s + at(i, k) * v(k, j))
        })
        .collect();
    let mut b = vec![T::zero(); n * n];
    for i in 0..n {
        for j in 0..=i {
            let s = (0..n).fold(T::zero(), |s, k| s + w[k * n + j] * v(k, i));
            b[i * n + j] = s;
            b[j * n + i] = s;
        }
    }
    // X = V · (the rotations), row-major
    let mut x: Vec<T> = (0..n * n).map(|ij| T::cst(v(ij / n, ij % n))).collect();
    for _sweep in 0..3 {
        for p in 0..n {
            for q in p + 1..n {
                let bpq = b[p * n + q];
                let g = b[q * n + q] - b[p * n + p];
                // nothing to rotate; or a repeated eigenvalue whose entry is 0 in value (a
                // rotation there is 0/0: NaN values everywhere; its derivatives do not exist)
                if bpq.exact_zero() || (g.value() == 0.0 && bpq.value() == 0.0) {
                    continue;
                }
                // tan θ of the rotation that zeroes b_pq, the smaller of the two (|θ| ≤ π/4):
                // 2b / (g ± √(g² + 4b²)) with g = b_qq − b_pp, smooth in b where g ≠ 0
                let r = (g * g + bpq * bpq * 4.0).sqrt();
                let t = if g.value() >= 0.0 {
                    bpq * 2.0 / (g + r)
                } else {
                    bpq * 2.0 / (g - r)
                };
                let c = (t * t + 1.0).sqrt().recip();
                let s = t * c;
                for k in (0..n).filter(|&k| k != p && k != q) {
                    let (bkp, bkq) = (b[k * n + p], b[k * n + q]);
                    let (np, nq) = (bkp * c - bkq * s, bkp * s + bkq * c);
                    b[k * n + p] = np;
                    b[p * n + k] = np;
                    b[k * n + q] = nq;
                    b[q * n + k] = nq;
                }
                b[p * n + p] -= t * bpq;
                b[q * n + q] += t * bpq;
                b[p * n + q] = T::zero();
                b[q * n + p] = T::zero();
                for k in 0..n {
                    let (xp, xq) = (x[k * n + p], x[k * n + q]);
                    x[k * n + p] = xp * c - xq * s;
                    x[k * n + q] = xp * s + xq * c;
                }
            }
        }
    }
    (
        nalgebra::DVector::from_fn(n, |i, _| b[i * n + i]),
        nalgebra::DMatrix::from_fn(n, n, |i, j| x[i * n + j]),
    )
}
