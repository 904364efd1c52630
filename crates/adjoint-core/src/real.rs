//! The one scalar trait that generic user code is written against.

use core::fmt::{Debug, Display};
use core::iter::{Product, Sum};
use core::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Sub, SubAssign};
use num_traits::{Float, FloatConst};

/// A real number type that every engine can differentiate through.
///
/// Write a numeric function once against `Real` and run it with `f64` (the plain program),
/// with [`Dual`](crate::forward::Dual) (forward mode, nestable for second derivatives) and with
/// each engine's active scalar. It is `num_traits::Float` (all of `sin`, `exp`, `powi`,
/// `max`, …) plus:
///
/// * arithmetic with plain `f64` operands on the right: `x * 2.0`, `x + 1.0`, `x -= 0.5`;
/// * comparisons with `Self` and with `f64` by primal value: `x < y`, `x > 0.0`, so branches in
///   user code just work (derivatives follow the branch taken);
/// * [`Real::cst`] to lift a constant, for the operand order Rust cannot express generically:
///   `T::cst(2.0) - x` (concrete types also accept `2.0 - x` directly);
/// * the special functions of the rule table that `Float` lacks: [`erf`](Real::erf),
///   [`lgamma`](Real::lgamma), [`polygamma`](Real::polygamma).
///
/// ```
/// use adjoint_core::{forward, Real};
///
/// fn f<T: Real>(x: &[T]) -> T {
///     let s = x[0] * x[1] + 1.0;
///     if s > 2.0 { s.ln() } else { T::cst(2.0) - s }
/// }
///
/// assert_eq!(f(&[1.0, 0.5]), 0.5);
/// let g = forward::gradient(|x| f(x), &[1.0, 0.5]);
/// assert_eq!(g, vec![-0.5, -1.0]);
/// ```
pub trait Real:
    Float
    + FloatConst
    + From<f64>
    + Default
    + Debug
    + Display
    + Send
    + Sync
    + 'static
    + Add<f64, Output = Self>
    + Sub<f64, Output = Self>
    + Mul<f64, Output = Self>
    + Div<f64, Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + AddAssign<f64>
    + SubAssign<f64>
    + MulAssign<f64>
    + DivAssign<f64>
    + PartialEq<f64>
    + PartialOrd<f64>
    + Sum
    + Product
{
    /// The primal value as a plain `f64` (for nested duals, the innermost value).
    fn value(&self) -> f64;

    /// A constant: `T::cst(2.0) - x` is the generic spelling of `2.0 - x`.
    #[inline]
    fn cst(v: f64) -> Self {
        <Self as From<f64>>::from(v)
    }

    /// The error function `erf(x)`.
    fn erf(self) -> Self;

    /// `ln |Γ(x)|`, the logarithm of the absolute value of the gamma function.
    fn lgamma(self) -> Self;

    /// The polygamma function ψ⁽ⁿ⁾(x), the (n+1)-th derivative of `lgamma`.
    fn polygamma(self, n: u32) -> Self;

    /// The digamma function ψ(x) = d/dx ln Γ(x).
    #[inline]
    fn digamma(self) -> Self {
        self.polygamma(0)
    }

    /// [`vector::dot`](crate::vector::dot) for this number type (call that function instead;
    /// engines override this to record one entry per call).
    #[doc(hidden)]
    #[inline]
    fn slice_dot(a: &[Self], b: &[Self]) -> Self {
        crate::vector::scalar::dot(a, b)
    }
    /// See [`vector::sum`](crate::vector::sum).
    #[doc(hidden)]
    #[inline]
    fn slice_sum(a: &[Self]) -> Self {
        crate::vector::scalar::sum(a)
    }
    /// See [`vector::matvec`](crate::vector::matvec).
    #[doc(hidden)]
    #[inline]
    fn slice_matvec(m: &[Self], x: &[Self], out: &mut [Self]) {
        crate::vector::scalar::matvec(m, x, out)
    }
    /// See [`vector::logsumexp`](crate::vector::logsumexp).
    #[doc(hidden)]
    #[inline]
    fn slice_logsumexp(a: &[Self]) -> Self {
        crate::vector::scalar::logsumexp(a)
    }
    /// See [`vector::axpy`](crate::vector::axpy).
    #[doc(hidden)]
    #[inline]
    fn slice_axpy(alpha: Self, x: &[Self], y: &mut [Self]) {
        crate::vector::scalar::axpy(alpha, x, y)
    }
}

impl Real for f64 {
    #[inline]
    fn value(&self) -> f64 {
        *self
    }
    #[inline]
    fn slice_dot(a: &[f64], b: &[f64]) -> f64 {
        crate::vector::fast::dot(a, b)
    }
    #[inline]
    fn slice_sum(a: &[f64]) -> f64 {
        crate::vector::fast::sum(a)
    }
    #[inline]
    fn slice_matvec(m: &[f64], x: &[f64], out: &mut [f64]) {
        crate::vector::fast::matvec(m, x, out)
    }
    #[inline]
    fn slice_logsumexp(a: &[f64]) -> f64 {
        crate::vector::fast::logsumexp(a)
    }
    #[inline]
    fn slice_axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
        crate::vector::fast::axpy(alpha, x, y)
    }
    #[inline]
    fn erf(self) -> Self {
        libm::erf(self)
    }
    #[inline]
    fn lgamma(self) -> Self {
        libm::lgamma(self)
    }
    #[inline]
    fn polygamma(self, n: u32) -> Self {
        crate::special::polygamma(n, self)
    }
}
