//! The one scalar trait that generic user code is written against.

use core::fmt::{Debug, Display};
use core::iter::{Product, Sum};
use core::num::FpCategory;
use core::ops::{
    Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Rem, RemAssign, Sub, SubAssign,
};
use num_traits::{FloatConst, Num, ToPrimitive};

/// A real number type that every engine can differentiate through.
///
/// Write a numeric function once against `Real` and run it with `f64` (the plain program),
/// with [`Dual`](crate::forward::Dual) (forward mode, nestable for second derivatives) and with
/// each engine's active scalar. `use adjoint::Real` is the only import generic code needs: the
/// trait carries every method of `num_traits::Float` under the same name (`sin`, `exp`, `powi`,
/// `max`, `epsilon`, …), `T::zero()`/`T::one()`, the constants of `FloatConst` (`T::PI()`), and:
///
/// * constants: `T::from(3.0)` or `T::cst(3.0)` (the same thing; `Real` is deliberately *not*
///   `num_traits::NumCast`, so `T::from` is not ambiguous);
/// * `f64` operands wherever Rust lets a method or an operator take them: `x * 2.0`, `x + 1.0`,
///   `x -= 0.5`, `x % 2.0`, `x.max(0.0)`, `x.min(1.0)`, `x.powf(1.5)`, `x.clamp(0.0, 1.0)`,
///   `x.atan2(1.0)`, `x.hypot(3.0)`, `x.mul_add(2.0, 1.0)` (those methods take
///   `impl Into<Self>`, so `Self` arguments work as before);
/// * references: `x.iter().sum::<T>()`, `.product::<T>()`, `s += &v`, `s + &v`;
/// * comparisons with `Self` and with `f64` by primal value: `x < y`, `x > 0.0`, so branches in
///   user code just work (derivatives follow the branch taken);
/// * the special functions of the rule table that `Float` lacks: [`erf`](Real::erf),
///   [`lgamma`](Real::lgamma), [`polygamma`](Real::polygamma).
///
/// ```
/// use adjoint_core::{forward, Real};
///
/// fn f<T: Real>(x: &[T]) -> T {
///     let s = x[0] * x[1] + 1.0;
///     let total: T = x.iter().sum();
///     if s > 2.0 { s.ln() } else { T::from(2.0) - s + total.max(0.0) * 0.0 }
/// }
///
/// assert_eq!(f(&[1.0, 0.5]), 0.5);
/// let g = forward::gradient(|x| f(x), &[1.0, 0.5]);
/// assert_eq!(g, vec![-0.5, -1.0]);
/// ```
///
/// # Spellings Rust does not allow in generic code, and what to write instead
///
/// Concrete types (`f64`, [`Dual<f64>`](crate::forward::Dual), the tape's `Var`, …) accept all
/// of these; only code generic over `T: Real` is affected, because Rust cannot implement a
/// foreign trait for `f64` with a generic right operand, and does not carry bounds on `&T`
/// from a trait to its users:
///
/// | you write (generic `T`) | error | write instead |
/// |---|---|---|
/// | `2.0 * x`, `1.0 - x`, `1.0 / x` | E0277 `cannot multiply {float} by T` | `x * 2.0`, `T::from(1.0) - x`, `x.recip()` |
/// | `&a * &b`, `x.iter().map(\|v\| v * v)` | E0369 `cannot multiply &T by &T` | `*a * *b`, `x.iter().map(\|&v\| v * v)` |
/// | `0.0 < x` | E0308 mismatched types | `x > 0.0` |
/// | `T::from(3)` (an integer) | E0277 `From<{integer}>` | `T::from(3.0)` |
///
/// Two more, on every number type that is not `f64` (concrete ones too: there is no conversion
/// back to `f64`, and `0.0` is an `f64`):
///
/// | you write | error | write instead |
/// |---|---|---|
/// | `let v: f64 = x.into()`, `f64::from(x)` | E0277 `From<T>` | `x.value()` (the primal value) |
/// | `x.iter().fold(0.0, \|a, &b\| a + b)` | E0308 mismatched types | `fold(T::zero(), …)`, `Var::zero()` |
///
/// ```compile_fail,E0277
/// fn f<T: adjoint_core::Real>(x: T) -> T { 2.0 * x }
/// ```
/// ```compile_fail,E0369
/// fn f<T: adjoint_core::Real>(a: &T, b: &T) -> T { a * b }
/// ```
/// ```compile_fail,E0369
/// fn f<T: adjoint_core::Real>(x: &[T]) -> T { x.iter().map(|v| v * v).sum() }
/// ```
/// ```compile_fail,E0308
/// fn f<T: adjoint_core::Real>(x: T) -> bool { 0.0 < x }
/// ```
/// ```compile_fail,E0277
/// fn f<T: adjoint_core::Real>() -> T { T::from(3) }
/// ```
/// and what compiles instead:
/// ```
/// use adjoint_core::Real;
/// fn f<T: Real>(x: &[T]) -> T {
///     let a = x[0] * 2.0 + T::from(1.0) - x[1] + x[0].recip();
///     let b: T = x.iter().map(|&v| v * v).sum();
///     if x[0] > 0.0 { a + b * T::from(3.0) } else { a }
/// }
/// assert_eq!(f(&[1.0, 2.0]), 2.0 + 1.0 - 2.0 + 1.0 + 15.0);
/// ```
pub trait Real:
    Copy
    + Num
    + Neg<Output = Self>
    + ToPrimitive
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
    + Rem<f64, Output = Self>
    + for<'a> Add<&'a Self, Output = Self>
    + for<'a> Sub<&'a Self, Output = Self>
    + for<'a> Mul<&'a Self, Output = Self>
    + for<'a> Div<&'a Self, Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + RemAssign
    + AddAssign<f64>
    + SubAssign<f64>
    + MulAssign<f64>
    + DivAssign<f64>
    + RemAssign<f64>
    + for<'a> AddAssign<&'a Self>
    + for<'a> SubAssign<&'a Self>
    + for<'a> MulAssign<&'a Self>
    + for<'a> DivAssign<&'a Self>
    + PartialEq<f64>
    + PartialOrd
    + PartialOrd<f64>
    + Sum
    + Product
    + for<'a> Sum<&'a Self>
    + for<'a> Product<&'a Self>
{
    /// The primal value as a plain `f64` (for nested duals, the innermost value).
    fn value(&self) -> f64;

    /// A constant: `T::cst(2.0) - x`, the same as `T::from(2.0) - x`.
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

    // ---- num_traits::Float, method for method -------------------------------------------

    /// Not a number.
    fn nan() -> Self;
    /// +∞.
    fn infinity() -> Self;
    /// −∞.
    fn neg_infinity() -> Self;
    /// −0.
    fn neg_zero() -> Self;
    /// The most negative finite value.
    fn min_value() -> Self;
    /// The smallest positive normal value.
    fn min_positive_value() -> Self;
    /// The largest finite value.
    fn max_value() -> Self;
    /// Machine epsilon.
    fn epsilon() -> Self;

    /// Whether the primal value is NaN.
    fn is_nan(self) -> bool;
    /// Whether the primal value is ±∞.
    fn is_infinite(self) -> bool;
    /// Whether the primal value is finite.
    fn is_finite(self) -> bool;
    /// Whether the primal value is normal.
    fn is_normal(self) -> bool;
    /// Whether the primal value has a positive sign (including +0 and +NaN).
    fn is_sign_positive(self) -> bool;
    /// Whether the primal value has a negative sign (including −0 and −NaN).
    fn is_sign_negative(self) -> bool;
    /// The floating-point category of the primal value.
    fn classify(self) -> FpCategory;
    /// The primal value's mantissa, exponent and sign.
    fn integer_decode(self) -> (u64, i16, i8);

    /// Largest integer ≤ x (piecewise constant: derivative 0).
    fn floor(self) -> Self;
    /// Smallest integer ≥ x (derivative 0).
    fn ceil(self) -> Self;
    /// Nearest integer, halves away from zero (derivative 0).
    fn round(self) -> Self;
    /// Integer part (derivative 0).
    fn trunc(self) -> Self;
    /// Sign: ±1 or NaN (derivative 0).
    fn signum(self) -> Self;
    /// Fractional part `x − trunc(x)` (derivative 1).
    fn fract(self) -> Self;

    /// `|x|`.
    fn abs(self) -> Self;
    /// `1/x`.
    fn recip(self) -> Self;
    /// `√x`.
    fn sqrt(self) -> Self;
    /// `∛x`.
    fn cbrt(self) -> Self;
    /// `eˣ`.
    fn exp(self) -> Self;
    /// `2ˣ`.
    fn exp2(self) -> Self;
    /// `eˣ − 1`, accurate near 0.
    fn exp_m1(self) -> Self;
    /// `ln x`.
    fn ln(self) -> Self;
    /// `ln(1 + x)`, accurate near 0.
    fn ln_1p(self) -> Self;
    /// `log₂ x`.
    fn log2(self) -> Self;
    /// `log₁₀ x`.
    fn log10(self) -> Self;
    /// `sin x`.
    fn sin(self) -> Self;
    /// `cos x`.
    fn cos(self) -> Self;
    /// `tan x`.
    fn tan(self) -> Self;
    /// `asin x`.
    fn asin(self) -> Self;
    /// `acos x`.
    fn acos(self) -> Self;
    /// `atan x`.
    fn atan(self) -> Self;
    /// `sinh x`.
    fn sinh(self) -> Self;
    /// `cosh x`.
    fn cosh(self) -> Self;
    /// `tanh x`.
    fn tanh(self) -> Self;
    /// `asinh x`.
    fn asinh(self) -> Self;
    /// `acosh x`.
    fn acosh(self) -> Self;
    /// `atanh x`.
    fn atanh(self) -> Self;
    /// `(sin x, cos x)`.
    fn sin_cos(self) -> (Self, Self);
    /// Radians to degrees.
    fn to_degrees(self) -> Self;
    /// Degrees to radians.
    fn to_radians(self) -> Self;

    /// `xⁿ` for an integer `n`.
    fn powi(self, n: i32) -> Self;
    /// `xʸ`; `y` may be `Self` or `f64`: `x.powf(1.5)`.
    fn powf<Y: Into<Self>>(self, y: Y) -> Self;
    /// `log_base x`; `x.log(10.0)`.
    fn log<B: Into<Self>>(self, base: B) -> Self;
    /// The four-quadrant arctangent of `self / x`; `y.atan2(1.0)`.
    fn atan2<X: Into<Self>>(self, x: X) -> Self;
    /// `√(x² + y²)` without overflow; `x.hypot(3.0)`.
    fn hypot<Y: Into<Self>>(self, y: Y) -> Self;
    /// The larger of two values (the other one if either is NaN, as `f64::max`); `x.max(0.0)`.
    fn max<Y: Into<Self>>(self, y: Y) -> Self;
    /// The smaller of two values (the other one if either is NaN, as `f64::min`); `x.min(1.0)`.
    fn min<Y: Into<Self>>(self, y: Y) -> Self;
    /// `self` restricted to `[lo, hi]`; NaN stays NaN; `x.clamp(0.0, 1.0)`. At a bound
    /// (`self == lo` or `self == hi`) the value is `self`'s, and so is the derivative (1 in
    /// `self`, 0 in the bound); `x.max(lo).min(hi)` would split it in halves there, by `max`'s
    /// tie rule.
    ///
    /// # Panics
    /// If `lo > hi` or either bound is NaN (as `f64::clamp`).
    #[inline]
    fn clamp<L: Into<Self>, H: Into<Self>>(self, lo: L, hi: H) -> Self {
        let (lo, hi) = (lo.into(), hi.into());
        assert!(
            lo <= hi,
            "clamp: lower bound {lo} is not ≤ upper bound {hi}, or one is NaN"
        );
        if self < lo {
            lo
        } else if self > hi {
            hi
        } else {
            self
        }
    }
    /// `self · a + b` rounded once, as `f64::mul_add` (for active numbers too); `x.mul_add(2.0, 1.0)`.
    fn mul_add<A: Into<Self>, B: Into<Self>>(self, a: A, b: B) -> Self;
    /// `max(self − y, 0)`; where `self == y` it is the constant 0, derivative 0 in both (not
    /// `max`'s tie rule, which would split it in halves).
    fn abs_sub<Y: Into<Self>>(self, y: Y) -> Self;
    /// The total order of the primal values ([`f64::total_cmp`]), for sorting active numbers:
    /// `v.sort_by(|a, b| a.total_cmp(b))` (a positive NaN sorts after +∞).
    ///
    /// ```
    /// use adjoint_core::{forward::Dual64, Real};
    /// fn sorted<T: Real>(mut v: Vec<T>) -> Vec<T> {
    ///     v.sort_by(|a, b| a.total_cmp(b));
    ///     v
    /// }
    /// let v = sorted(vec![Dual64::new(2.0, 1.0), Dual64::new(-1.0, 0.0), Dual64::new(f64::NAN, 0.0)]);
    /// assert_eq!((v[0].re, v[0].eps, v[1].re, v[1].eps), (-1.0, 0.0, 2.0, 1.0));
    /// assert!(v[2].re.is_nan());
    /// ```
    #[inline]
    fn total_cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.value().total_cmp(&other.value())
    }
    /// The Euclidean remainder, as `f64::rem_euclid` computes it (`self % y`, plus `|y|` where
    /// that is negative: in `[0, |y|)`), for active numbers too; `angle.rem_euclid(TAU)`. Its
    /// derivatives are 1 in `self` and minus the integer quotient in `y` (a wrapped angle keeps
    /// its gradient).
    ///
    /// ```
    /// use adjoint_core::{forward, Real};
    /// fn wrapped<T: Real>(p: &[T]) -> T {
    ///     p[0].rem_euclid(p[1]).sin()
    /// }
    /// let g = forward::gradient(|p| wrapped(p), &[-7.5, 2.0]);
    /// let r = (-7.5f64).rem_euclid(2.0); // 0.5, quotient −4
    /// assert_eq!(g, [r.cos(), 4.0 * r.cos()]);
    /// ```
    #[inline]
    fn rem_euclid<Y: Into<Self>>(self, y: Y) -> Self {
        let y = y.into();
        let r = self % y;
        if r.value() < 0.0 {
            r + y.abs()
        } else {
            r
        }
    }
    /// `|self|` with the sign of `sign` (derivative ±1 in `self`, 0 in `sign`).
    #[inline]
    fn copysign<S: Into<Self>>(self, sign: S) -> Self {
        let sign = sign.into();
        if self.is_sign_negative() == sign.is_sign_negative() {
            self
        } else {
            -self
        }
    }

    /// Whether the value is zero in every component, so that a tangent equal to it moves
    /// nothing: forward mode then skips the partial it would multiply (`∞ · 0` is NaN where
    /// the directional derivative is 0). `f64`: `== 0.0`; `Dual`: both parts; an engine's
    /// active number: `false` (its value may carry a derivative).
    #[doc(hidden)]
    #[inline]
    fn exact_zero(&self) -> bool {
        false
    }
    /// Whether the rule table, evaluated at this type, is differentiated by it: forward mode's
    /// `Dual` (Hessians by nested duals, forward over reverse at `Dual`). The table then forms
    /// a few partials in a way whose derivative stays in range (`x / y` at a divisor beyond
    /// 1e±150); `f64` and the other types keep the plain form, with no test.
    #[doc(hidden)]
    const TANGENTS: bool = false;
    /// Whether every component is finite (`f64`: [`is_finite`](Real::is_finite), which looks at
    /// the value only; `Dual`: both parts, at every level): forward mode multiplies a partial by
    /// a zero tangent unguarded only when this holds.
    #[doc(hidden)]
    #[inline]
    fn finite_everywhere(&self) -> bool {
        self.is_finite()
    }
    /// A cotangent `self` times a partial `d`, where a cotangent that is exactly zero sends
    /// nothing, also through an infinite or NaN `d` ([`Cotangent::scale_by`](crate::Cotangent::scale_by)).
    /// Forward mode's duals apply the rule at every level: the value part of `Dual(0, 1) ·
    /// Dual(∞, t)` is 0, not `0 · ∞` (an SSA Hessian-vector product's gradient part was NaN
    /// where the gradient is 0; a hunter), its tangent `0 · t + 1 · ∞`.
    #[doc(hidden)]
    #[inline]
    fn scale_cotangent(self, d: Self) -> Self {
        if self.exact_zero() {
            self
        } else {
            self * d
        }
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
    /// `x` itself where `Self` is `f64`, else `None`: code generic over `Real` that holds
    /// `f64` data and must pass it as `&[Self]` copies it only for other number types (the SSA
    /// engine's calls with passive slices).
    #[doc(hidden)]
    #[inline]
    fn f64_slice_as_self(x: &[f64]) -> Option<&[Self]> {
        let _ = x;
        None
    }
}

/// `f64` methods forwarded to the inherent ones (`f64::sin`, …).
macro_rules! f64_forward {
    (@const $($m:ident)*) => { $( #[inline] fn $m() -> f64 { <f64 as num_traits::Float>::$m() } )* };
    (@pred $($m:ident)*) => { $( #[inline] fn $m(self) -> bool { f64::$m(self) } )* };
    (@un $($m:ident)*) => { $( #[inline] fn $m(self) -> f64 { f64::$m(self) } )* };
    (@bin $($m:ident)*) => { $( #[inline] fn $m<Y: Into<f64>>(self, y: Y) -> f64 { f64::$m(self, y.into()) } )* };
}

impl Real for f64 {
    #[inline]
    fn value(&self) -> f64 {
        *self
    }
    #[inline]
    fn f64_slice_as_self(x: &[f64]) -> Option<&[f64]> {
        Some(x)
    }
    #[inline]
    fn exact_zero(&self) -> bool {
        *self == 0.0
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

    f64_forward!(@const nan infinity neg_infinity neg_zero min_value min_positive_value
        max_value epsilon);
    f64_forward!(@pred is_nan is_infinite is_finite is_normal is_sign_positive
        is_sign_negative);
    f64_forward!(@un floor ceil round trunc signum fract abs recip sqrt cbrt exp exp2 exp_m1
        ln ln_1p log2 log10 sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh
        to_degrees to_radians);
    f64_forward!(@bin powf log atan2 hypot max min);

    #[inline]
    fn classify(self) -> FpCategory {
        f64::classify(self)
    }
    #[inline]
    fn integer_decode(self) -> (u64, i16, i8) {
        <f64 as num_traits::Float>::integer_decode(self)
    }
    #[inline]
    fn sin_cos(self) -> (f64, f64) {
        f64::sin_cos(self)
    }
    #[inline]
    fn powi(self, n: i32) -> f64 {
        f64::powi(self, n)
    }
    #[inline]
    fn mul_add<A: Into<f64>, B: Into<f64>>(self, a: A, b: B) -> f64 {
        f64::mul_add(self, a.into(), b.into())
    }
    #[inline]
    fn abs_sub<Y: Into<f64>>(self, y: Y) -> f64 {
        <f64 as num_traits::Float>::abs_sub(self, y.into())
    }
    #[inline]
    fn copysign<S: Into<f64>>(self, sign: S) -> f64 {
        f64::copysign(self, sign.into())
    }
}
