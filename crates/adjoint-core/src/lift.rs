//! How an engine's number type plugs into [`Real`]: implement [`Lift`], invoke [`impl_real!`](crate::impl_real).
//!
//! [`Lift`] is the whole contract between an engine and the rule table: what to do with the
//! partials of one unary or binary primitive. [`impl_real!`](crate::impl_real) then writes every
//! operator, `num_traits::Float` method, comparison and conversion in terms of it, so no engine
//! spells out `sin` or `*` by hand and all of them agree on every rule.
//!
//! Piecewise-constant functions (`floor`, `round`, `signum`, …) become constants, comparisons
//! compare primal values, and composite functions (`log(b)`, `to_degrees`) are built from the
//! primitives; `%` is the table's `Rem`, and `mul_add` has `f64::mul_add`'s value (one rounding)
//! with the derivative of `x·a + b`.

use crate::rules::{Op1, Op2};
use crate::Real;

/// The contract between an engine's number type and the rule table.
///
/// ```
/// use adjoint_core::lift::Lift;
/// use adjoint_core::rules::{self, Op1, Op2};
///
/// /// A number that counts how many primitives produced it (a toy engine).
/// #[derive(Clone, Copy, Debug)]
/// struct Counted { v: f64, ops: u32 }
///
/// impl Lift for Counted {
///     type Inner = f64;
///     fn primal(&self) -> f64 { self.v }
///     fn constant(v: f64) -> Self { Counted { v, ops: 0 } }
///     fn lift1(self, op: Op1) -> Self {
///         Counted { v: rules::unary(op, self.v).value, ops: self.ops + 1 }
///     }
///     fn lift2(self, o: Self, op: Op2) -> Self {
///         Counted { v: rules::binary(op, self.v, o.v).value, ops: self.ops + o.ops + 1 }
///     }
///     fn lift2_const_right(self, c: f64, op: Op2) -> Self { self.lift2(Self::constant(c), op) }
///     fn lift2_const_left(c: f64, x: Self, op: Op2) -> Self { Self::constant(c).lift2(x, op) }
/// }
/// adjoint_core::impl_real!([] Counted);
/// impl std::fmt::Display for Counted {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "{}", self.v) }
/// }
///
/// fn f<T: adjoint_core::Real>(x: T) -> T { (x * 2.0).sin() + x }
/// let y = f(Counted { v: 1.0, ops: 0 });
/// assert_eq!((y.v, y.ops), (2f64.sin() + 1.0, 3));
/// ```
pub trait Lift: Copy {
    /// The scalar type the rules are evaluated at (`f64`, or `Dual<f64>` for nested duals).
    type Inner: Real;
    /// The primal value.
    fn primal(&self) -> Self::Inner;
    /// A constant (derivative zero; an engine records nothing for it).
    fn constant(v: Self::Inner) -> Self;
    /// Apply a unary primitive.
    fn lift1(self, op: Op1) -> Self;
    /// Apply a binary primitive to two active operands.
    fn lift2(self, other: Self, op: Op2) -> Self;
    /// Apply a binary primitive whose right operand is a constant: `x * 2.0`.
    fn lift2_const_right(self, c: Self::Inner, op: Op2) -> Self;
    /// Apply a binary primitive whose left operand is a constant: `2.0 - x`.
    fn lift2_const_left(c: Self::Inner, x: Self, op: Op2) -> Self;

    /// [`Real::exact_zero`]: `false` unless every component is known to be zero (forward
    /// mode's duals override it).
    #[inline]
    fn lift_exact_zero(&self) -> bool {
        false
    }
    /// [`Real::TANGENTS`] (forward mode's `Dual` sets it).
    const TANGENTS: bool = false;
    /// [`Real::scale_cotangent`] where it differs from "`self` if exactly zero, else
    /// `self · d`" (forward mode's duals guard each level); `None`: that default.
    #[inline]
    fn lift_scale_cotangent(self, d: Self) -> Option<Self> {
        let _ = d;
        None
    }
    /// [`Real::finite_everywhere`]: the primal value's (forward mode's duals override it to
    /// look at their tangents too).
    #[inline]
    fn lift_finite_everywhere(&self) -> bool {
        self.primal().finite_everywhere()
    }
    /// [`vector::dot`](crate::vector::dot). The default runs the scalar definition through
    /// the primitives above; an engine overrides it to handle the call as a whole.
    #[inline]
    fn lift_dot(a: &[Self], b: &[Self]) -> Self
    where
        Self: Real,
    {
        crate::vector::scalar::dot(a, b)
    }
    /// [`vector::sum`](crate::vector::sum); see [`Lift::lift_dot`].
    #[inline]
    fn lift_sum(a: &[Self]) -> Self
    where
        Self: Real,
    {
        crate::vector::scalar::sum(a)
    }
    /// [`vector::matvec`](crate::vector::matvec); see [`Lift::lift_dot`].
    #[inline]
    fn lift_matvec(m: &[Self], x: &[Self], out: &mut [Self])
    where
        Self: Real,
    {
        crate::vector::scalar::matvec(m, x, out)
    }
    /// [`vector::logsumexp`](crate::vector::logsumexp); see [`Lift::lift_dot`].
    #[inline]
    fn lift_logsumexp(a: &[Self]) -> Self
    where
        Self: Real,
    {
        crate::vector::scalar::logsumexp(a)
    }
    /// [`vector::axpy`](crate::vector::axpy); see [`Lift::lift_dot`].
    #[inline]
    fn lift_axpy(alpha: Self, x: &[Self], y: &mut [Self])
    where
        Self: Real,
    {
        crate::vector::scalar::axpy(alpha, x, y)
    }
}

/// Implement arithmetic, comparisons, [`Real`], `num_traits::{Float, FloatConst, Num, NumCast, …}`
/// and inherent math methods for a type that implements [`Lift`].
///
/// Syntax: `impl_real!([generics] Type)`, e.g. `impl_real!([T: Real] Dual<T>)` or
/// `impl_real!([] Var)`. See [`Lift`] for a complete example. Besides the traits, the type gets
/// every math method of [`Real`] as an inherent method (so `x.sin()` and `x.max(0.0)` work on
/// the concrete type with no import and no ambiguity with `num_traits::Float`), operators on
/// references (`&a * &b`, `s += &v`), `f64` on either side of an operator or comparison
/// (`2.0 * x`, `0.0 < x`), and `Sum`/`Product` over values and references.
#[macro_export]
macro_rules! impl_real {
    ([$($gen:tt)*] $ty:ty) => {
        $crate::__impl_real_binop!([$($gen)*] $ty; Add add AddAssign add_assign Add);
        $crate::__impl_real_binop!([$($gen)*] $ty; Sub sub SubAssign sub_assign Sub);
        $crate::__impl_real_binop!([$($gen)*] $ty; Mul mul MulAssign mul_assign Mul);
        $crate::__impl_real_binop!([$($gen)*] $ty; Div div DivAssign div_assign Div);

        impl<$($gen)*> ::core::ops::Neg for $ty {
            type Output = Self;
            #[inline]
            fn neg(self) -> Self {
                $crate::lift::Lift::lift1(self, $crate::rules::Op1::Neg)
            }
        }

        impl<'a, $($gen)*> ::core::ops::Neg for &'a $ty {
            type Output = $ty;
            #[inline]
            fn neg(self) -> $ty {
                -*self
            }
        }

        // `x % y` is IEEE `fmod` as on `f64` (the rule table's `Op2::Rem`), with `f64` and
        // references on either side as the other operators (`2.0 % x` did not compile)
        $crate::__impl_real_binop!([$($gen)*] $ty; Rem rem RemAssign rem_assign Rem);

        impl<$($gen)*> ::core::convert::From<f64> for $ty {
            #[inline]
            fn from(v: f64) -> Self {
                <Self as $crate::lift::Lift>::constant(
                    <<Self as $crate::lift::Lift>::Inner as ::core::convert::From<f64>>::from(v),
                )
            }
        }

        impl<$($gen)*> ::core::default::Default for $ty {
            #[inline]
            fn default() -> Self {
                <Self as From<f64>>::from(0.0)
            }
        }

        impl<$($gen)*> ::core::cmp::PartialEq for $ty {
            #[inline]
            fn eq(&self, other: &Self) -> bool {
                $crate::lift::Lift::primal(self) == $crate::lift::Lift::primal(other)
            }
        }

        impl<$($gen)*> ::core::cmp::PartialOrd for $ty {
            #[inline]
            fn partial_cmp(&self, other: &Self) -> Option<::core::cmp::Ordering> {
                $crate::lift::Lift::primal(self).partial_cmp(&$crate::lift::Lift::primal(other))
            }
        }

        impl<$($gen)*> ::core::cmp::PartialEq<f64> for $ty {
            #[inline]
            fn eq(&self, other: &f64) -> bool {
                $crate::Real::value(&$crate::lift::Lift::primal(self)) == *other
            }
        }

        impl<$($gen)*> ::core::cmp::PartialOrd<f64> for $ty {
            #[inline]
            fn partial_cmp(&self, other: &f64) -> Option<::core::cmp::Ordering> {
                $crate::Real::value(&$crate::lift::Lift::primal(self)).partial_cmp(other)
            }
        }

        impl<$($gen)*> ::core::cmp::PartialEq<$ty> for f64 {
            #[inline]
            fn eq(&self, other: &$ty) -> bool {
                *self == $crate::Real::value(&$crate::lift::Lift::primal(other))
            }
        }

        impl<$($gen)*> ::core::cmp::PartialOrd<$ty> for f64 {
            #[inline]
            fn partial_cmp(&self, other: &$ty) -> Option<::core::cmp::Ordering> {
                self.partial_cmp(&$crate::Real::value(&$crate::lift::Lift::primal(other)))
            }
        }

        impl<$($gen)*> ::core::iter::Sum for $ty {
            fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
                let mut it = iter;
                match it.next() {
                    // (−0.0, as `f64`'s empty sum: `1.0 / empty.sum()` is −∞ on either)
                    None => <Self as From<f64>>::from(-0.0),
                    Some(first) => it.fold(first, |a, b| a + b),
                }
            }
        }

        impl<'a, $($gen)*> ::core::iter::Sum<&'a $ty> for $ty {
            fn sum<I: Iterator<Item = &'a $ty>>(iter: I) -> Self {
                iter.copied().sum()
            }
        }

        impl<$($gen)*> ::core::iter::Product for $ty {
            fn product<I: Iterator<Item = Self>>(iter: I) -> Self {
                let mut it = iter;
                match it.next() {
                    None => <Self as From<f64>>::from(1.0),
                    Some(first) => it.fold(first, |a, b| a * b),
                }
            }
        }

        impl<'a, $($gen)*> ::core::iter::Product<&'a $ty> for $ty {
            fn product<I: Iterator<Item = &'a $ty>>(iter: I) -> Self {
                iter.copied().product()
            }
        }

        impl<$($gen)*> $crate::num_traits::Zero for $ty {
            #[inline]
            fn zero() -> Self {
                <Self as From<f64>>::from(0.0)
            }
            /// Zero in every component ([`Lift::lift_exact_zero`](crate::lift::Lift::lift_exact_zero):
            /// a `Dual` whose tangent is 0 too, a constant `Var`), not only in value, as
            /// `num-dual`'s: ndarray and nalgebra skip `β·y` where `β.is_zero()`, which dropped
            /// `∂/∂β` at an active `β = 0` (a hunter). A tape `Var` whose recorded derivative
            /// is exactly zero counts (see [`Lift::lift_exact_zero`](crate::lift::Lift::lift_exact_zero)
            /// on `Var`); an active 0 with a derivative is a nonzero pivot to nalgebra's solvers.
            #[inline]
            fn is_zero(&self) -> bool {
                <Self as $crate::lift::Lift>::lift_exact_zero(self)
            }
        }

        impl<$($gen)*> $crate::num_traits::One for $ty {
            #[inline]
            fn one() -> Self {
                <Self as From<f64>>::from(1.0)
            }
        }

        impl<$($gen)*> $crate::num_traits::Num for $ty {
            type FromStrRadixErr = <f64 as $crate::num_traits::Num>::FromStrRadixErr;
            fn from_str_radix(s: &str, radix: u32) -> Result<Self, Self::FromStrRadixErr> {
                <f64 as $crate::num_traits::Num>::from_str_radix(s, radix)
                    .map(<Self as From<f64>>::from)
            }
        }

        impl<$($gen)*> $crate::num_traits::ToPrimitive for $ty {
            #[inline]
            fn to_i64(&self) -> Option<i64> {
                $crate::num_traits::ToPrimitive::to_i64(
                    &$crate::Real::value(&$crate::lift::Lift::primal(self)),
                )
            }
            #[inline]
            fn to_u64(&self) -> Option<u64> {
                $crate::num_traits::ToPrimitive::to_u64(
                    &$crate::Real::value(&$crate::lift::Lift::primal(self)),
                )
            }
            #[inline]
            fn to_i128(&self) -> Option<i128> {
                // (num-traits' default goes through `to_i64`: `1e20` gave `None`; a hunter)
                $crate::num_traits::ToPrimitive::to_i128(
                    &$crate::Real::value(&$crate::lift::Lift::primal(self)),
                )
            }
            #[inline]
            fn to_u128(&self) -> Option<u128> {
                $crate::num_traits::ToPrimitive::to_u128(
                    &$crate::Real::value(&$crate::lift::Lift::primal(self)),
                )
            }
            #[inline]
            fn to_f64(&self) -> Option<f64> {
                Some($crate::Real::value(&$crate::lift::Lift::primal(self)))
            }
        }

        impl<$($gen)*> $crate::num_traits::NumCast for $ty {
            #[inline]
            fn from<P: $crate::num_traits::ToPrimitive>(n: P) -> Option<Self> {
                n.to_f64().map(<Self as From<f64>>::from)
            }
        }

        impl<$($gen)*> $crate::num_traits::FloatConst for $ty {
            $crate::__impl_real_consts!(
                E FRAC_1_PI FRAC_1_SQRT_2 FRAC_2_PI FRAC_2_SQRT_PI FRAC_PI_2 FRAC_PI_3 FRAC_PI_4
                FRAC_PI_6 FRAC_PI_8 LN_10 LN_2 LOG10_E LOG2_E PI SQRT_2 TAU LOG10_2 LOG2_10
            );
        }

        /// The math methods of `Real` as inherent methods: they work on
        /// this type with no import (`x.sin()`, `x.max(0.0)`, `x.powf(1.5)`).
        impl<$($gen)*> $ty {
            $crate::__impl_real_methods!();
        }

        impl<$($gen)*> $crate::num_traits::Float for $ty {
            $crate::__impl_real_forward!(float);
        }

        impl<$($gen)*> $crate::Real for $ty {
            #[inline]
            fn value(&self) -> f64 {
                $crate::Real::value(&$crate::lift::Lift::primal(self))
            }
            #[inline]
            fn erf(self) -> Self {
                $crate::lift::Lift::lift1(self, $crate::rules::Op1::Erf)
            }
            #[inline]
            fn lgamma(self) -> Self {
                $crate::lift::Lift::lift1(self, $crate::rules::Op1::Lgamma)
            }
            #[inline]
            fn polygamma(self, n: u32) -> Self {
                $crate::lift::Lift::lift1(self, $crate::rules::Op1::Polygamma(n))
            }
            #[inline]
            fn exact_zero(&self) -> bool {
                <Self as $crate::lift::Lift>::lift_exact_zero(self)
            }
            const TANGENTS: bool = <Self as $crate::lift::Lift>::TANGENTS;
            #[inline]
            fn finite_everywhere(&self) -> bool {
                <Self as $crate::lift::Lift>::lift_finite_everywhere(self)
            }
            #[inline]
            fn scale_cotangent(self, d: Self) -> Self {
                match <Self as $crate::lift::Lift>::lift_scale_cotangent(self, d) {
                    Some(v) => v,
                    None if $crate::Real::exact_zero(&self) => self,
                    None => self * d,
                }
            }
            #[inline]
            fn slice_dot(a: &[Self], b: &[Self]) -> Self {
                <Self as $crate::lift::Lift>::lift_dot(a, b)
            }
            #[inline]
            fn slice_sum(a: &[Self]) -> Self {
                <Self as $crate::lift::Lift>::lift_sum(a)
            }
            #[inline]
            fn slice_matvec(m: &[Self], x: &[Self], out: &mut [Self]) {
                <Self as $crate::lift::Lift>::lift_matvec(m, x, out)
            }
            #[inline]
            fn slice_logsumexp(a: &[Self]) -> Self {
                <Self as $crate::lift::Lift>::lift_logsumexp(a)
            }
            #[inline]
            fn slice_axpy(alpha: Self, x: &[Self], y: &mut [Self]) {
                <Self as $crate::lift::Lift>::lift_axpy(alpha, x, y)
            }
            $crate::__impl_real_forward!(real);
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __impl_real_binop {
    ([$($gen:tt)*] $ty:ty; $Tr:ident $m:ident $TrA:ident $ma:ident $Op:ident) => {
        impl<$($gen)*> ::core::ops::$Tr for $ty {
            type Output = Self;
            #[inline(always)]
            fn $m(self, rhs: Self) -> Self {
                $crate::lift::Lift::lift2(self, rhs, $crate::rules::Op2::$Op)
            }
        }
        impl<$($gen)*> ::core::ops::$Tr<f64> for $ty {
            type Output = Self;
            #[inline(always)]
            fn $m(self, rhs: f64) -> Self {
                $crate::lift::Lift::lift2_const_right(
                    self,
                    <<Self as $crate::lift::Lift>::Inner as ::core::convert::From<f64>>::from(rhs),
                    $crate::rules::Op2::$Op,
                )
            }
        }
        impl<$($gen)*> ::core::ops::$Tr<$ty> for f64 {
            type Output = $ty;
            #[inline(always)]
            fn $m(self, rhs: $ty) -> $ty {
                <$ty as $crate::lift::Lift>::lift2_const_left(
                    <<$ty as $crate::lift::Lift>::Inner as ::core::convert::From<f64>>::from(self),
                    rhs,
                    $crate::rules::Op2::$Op,
                )
            }
        }
        impl<'a, $($gen)*> ::core::ops::$Tr<&'a $ty> for $ty {
            type Output = $ty;
            #[inline(always)]
            fn $m(self, rhs: &'a $ty) -> $ty {
                ::core::ops::$Tr::$m(self, *rhs)
            }
        }
        impl<'a, $($gen)*> ::core::ops::$Tr<$ty> for &'a $ty {
            type Output = $ty;
            #[inline(always)]
            fn $m(self, rhs: $ty) -> $ty {
                ::core::ops::$Tr::$m(*self, rhs)
            }
        }
        impl<'a, 'b, $($gen)*> ::core::ops::$Tr<&'b $ty> for &'a $ty {
            type Output = $ty;
            #[inline(always)]
            fn $m(self, rhs: &'b $ty) -> $ty {
                ::core::ops::$Tr::$m(*self, *rhs)
            }
        }
        impl<'a, $($gen)*> ::core::ops::$Tr<f64> for &'a $ty {
            type Output = $ty;
            #[inline(always)]
            fn $m(self, rhs: f64) -> $ty {
                ::core::ops::$Tr::$m(*self, rhs)
            }
        }
        impl<'a, $($gen)*> ::core::ops::$Tr<&'a $ty> for f64 {
            type Output = $ty;
            #[inline(always)]
            fn $m(self, rhs: &'a $ty) -> $ty {
                ::core::ops::$Tr::$m(self, *rhs)
            }
        }
        impl<$($gen)*> ::core::ops::$TrA for $ty {
            #[inline(always)]
            fn $ma(&mut self, rhs: Self) {
                *self = ::core::ops::$Tr::$m(*self, rhs);
            }
        }
        impl<'a, $($gen)*> ::core::ops::$TrA<&'a $ty> for $ty {
            #[inline(always)]
            fn $ma(&mut self, rhs: &'a $ty) {
                *self = ::core::ops::$Tr::$m(*self, *rhs);
            }
        }
        impl<$($gen)*> ::core::ops::$TrA<f64> for $ty {
            #[inline(always)]
            fn $ma(&mut self, rhs: f64) {
                *self = ::core::ops::$Tr::$m(*self, rhs);
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __impl_real_consts {
    ($($c:ident)*) => {
        $(
            #[inline]
            fn $c() -> Self {
                <Self as $crate::lift::Lift>::constant(
                    <<Self as $crate::lift::Lift>::Inner as $crate::num_traits::FloatConst>::$c(),
                )
            }
        )*
    };
}

/// The inherent math methods every `impl_real!` type gets (the bodies of `Real`'s methods).
#[doc(hidden)]
#[macro_export]
macro_rules! __impl_real_methods {
    () => {
        $crate::__impl_real_methods!(@const nan infinity neg_infinity neg_zero min_value
            min_positive_value max_value epsilon);
        $crate::__impl_real_methods!(@consts zero 0.0, one 1.0, E E, FRAC_1_PI FRAC_1_PI,
            FRAC_1_SQRT_2 FRAC_1_SQRT_2, FRAC_2_PI FRAC_2_PI, FRAC_2_SQRT_PI FRAC_2_SQRT_PI,
            FRAC_PI_2 FRAC_PI_2, FRAC_PI_3 FRAC_PI_3, FRAC_PI_4 FRAC_PI_4, FRAC_PI_6 FRAC_PI_6,
            FRAC_PI_8 FRAC_PI_8, LN_10 LN_10, LN_2 LN_2, LOG10_2 LOG10_2, LOG10_E LOG10_E,
            LOG2_10 LOG2_10, LOG2_E LOG2_E, PI PI, SQRT_2 SQRT_2, TAU TAU);
        /// `v` as a constant of the number type (as `Real::cst`, `From<f64>`).
        #[inline]
        pub fn cst(v: f64) -> Self {
            <Self as From<f64>>::from(v)
        }
        $crate::__impl_real_methods!(@pred is_nan is_infinite is_finite is_normal
            is_sign_positive is_sign_negative);
        $crate::__impl_real_methods!(@flat floor ceil round trunc signum);
        $crate::__impl_real_methods!(@un recip Recip sqrt Sqrt cbrt Cbrt exp Exp exp2 Exp2
            exp_m1 ExpM1 ln Ln ln_1p Ln1p log2 Log2 log10 Log10 sin Sin cos Cos tan Tan asin Asin
            acos Acos atan Atan sinh Sinh cosh Cosh tanh Tanh asinh Asinh acosh Acosh atanh Atanh
            abs Abs erf Erf lgamma Lgamma);
        $crate::__impl_real_methods!(@bin powf Powf atan2 Atan2 max Max min Min hypot Hypot);

        /// The floating-point category of the primal value.
        #[inline]
        pub fn classify(self) -> ::core::num::FpCategory {
            $crate::Real::classify($crate::lift::Lift::primal(&self))
        }
        /// The primal value's mantissa, exponent and sign.
        #[inline]
        pub fn integer_decode(self) -> (u64, i16, i8) {
            $crate::Real::integer_decode($crate::lift::Lift::primal(&self))
        }
        /// Fractional part `x − trunc(x)` (derivative 1).
        #[inline]
        pub fn fract(self) -> Self {
            self - self.trunc()
        }
        /// `self · a + b` with one rounding, as `f64::mul_add`: the derivative is that of
        /// `self · a + b`, the value the fused one. Where the two roundings of the unfused form
        /// give another value (cancellation: `x.mul_add(x, -x * x)` is the product's rounding
        /// error, the unfused form 0), the result is `v − (w − e)` with `e` the unfused
        /// expression, `w` its value and `v` the fused value as constants: `w − e` is +0 in
        /// value, so the value is `v` bit for bit and the derivative `e`'s.
        #[inline]
        pub fn mul_add<A: Into<Self>, B: Into<Self>>(self, a: A, b: B) -> Self {
            use $crate::lift::Lift;
            let (a, b) = (a.into(), b.into());
            let e = self * a + b;
            let v = $crate::Real::mul_add(self.primal(), a.primal(), b.primal());
            let w = e.primal();
            let (vv, wv) = ($crate::Real::value(&v), $crate::Real::value(&w));
            let k = <Self as Lift>::constant;
            if vv.to_bits() == wv.to_bits() || (vv.is_nan() && wv.is_nan()) {
                e
            } else if wv.is_finite() {
                k(v) - (k(w) - e)
            } else {
                // The unfused value overflowed or is NaN where the fused one is not (`w − e`
                // would be NaN): the value `v`, and the derivative from differences that are 0
                // in value, `(x − x₀)·a + x₀·(a − a₀) + (b − b₀)`, leaving out those of infinite
                // operands (the value is then infinite, or NaN as in `f64`); where even that
                // is not 0 in value, `v` alone.
                let (x0, a0, b0) = (self.primal(), a.primal(), b.primal());
                let diff = |u: Self, u0| {
                    if $crate::Real::value(&u0).is_finite() {
                        u - k(u0)
                    } else {
                        <Self as From<f64>>::from(0.0)
                    }
                };
                let d = diff(self, x0) * a + diff(a, a0) * k(x0) + diff(b, b0);
                if $crate::Real::value(&d) == 0.0 {
                    k(v) + d
                } else {
                    k(v)
                }
            }
        }
        /// `xⁿ` for an integer `n`.
        #[inline]
        pub fn powi(self, n: i32) -> Self {
            if n == 0 {
                // `x⁰ = 1` for every x, NaN included (as `f64::powi`): a constant, so no engine
                // multiplies the partial 0 by a NaN tangent
                return <Self as From<f64>>::from(1.0);
            }
            $crate::lift::Lift::lift1(self, $crate::rules::Op1::Powi(n))
        }
        /// The polygamma function ψ⁽ⁿ⁾(x).
        #[inline]
        pub fn polygamma(self, n: u32) -> Self {
            $crate::lift::Lift::lift1(self, $crate::rules::Op1::Polygamma(n))
        }
        /// `log_base x`.
        #[inline]
        pub fn log<B: Into<Self>>(self, base: B) -> Self {
            self.ln() / base.into().ln()
        }
        /// `max(self − y, 0)`; where `self == y` the constant 0 (derivative 0 in both).
        #[inline]
        pub fn abs_sub<Y: Into<Self>>(self, y: Y) -> Self {
            let y = y.into();
            // as `f64`'s (fdim): NaN when either is NaN
            if self <= y {
                <Self as From<f64>>::from(0.0)
            } else {
                self - y
            }
        }
        /// `(sin x, cos x)`.
        #[inline]
        pub fn sin_cos(self) -> (Self, Self) {
            (self.sin(), self.cos())
        }
        /// Radians to degrees.
        #[inline]
        pub fn to_degrees(self) -> Self {
            self * (180.0 / ::core::f64::consts::PI)
        }
        /// Degrees to radians.
        #[inline]
        pub fn to_radians(self) -> Self {
            self * (::core::f64::consts::PI / 180.0)
        }
        /// `self` restricted to `[lo, hi]`; NaN stays NaN. Panics if `lo > hi` or a bound is NaN.
        #[inline]
        pub fn clamp<L: Into<Self>, H: Into<Self>>(self, lo: L, hi: H) -> Self {
            <Self as $crate::Real>::clamp(self, lo, hi)
        }
        /// `|self|` with the sign of `sign`.
        #[inline]
        pub fn copysign<S: Into<Self>>(self, sign: S) -> Self {
            <Self as $crate::Real>::copysign(self, sign)
        }
        /// The Euclidean remainder, as `f64::rem_euclid` (see `Real::rem_euclid`).
        #[inline]
        pub fn rem_euclid<Y: Into<Self>>(self, y: Y) -> Self {
            <Self as $crate::Real>::rem_euclid(self, y)
        }
    };
    (@consts $($m:ident $v:tt),*) => {
        $(
            #[doc = concat!("The constant `", stringify!($m), "` of the number type (so concrete \
                code writes `Var::", stringify!($m), "()` as generic code writes `T::",
                stringify!($m), "()`).")]
            #[inline]
            #[allow(non_snake_case)]
            pub fn $m() -> Self {
                <Self as From<f64>>::from($crate::__impl_real_methods!(@value $v))
            }
        )*
    };
    (@value 0.0) => { 0.0 };
    (@value 1.0) => { 1.0 };
    (@value $c:ident) => { ::core::f64::consts::$c };
    (@const $($m:ident)*) => {
        $(
            #[doc = concat!("`", stringify!($m), "` of the number type (a constant).")]
            #[inline]
            pub fn $m() -> Self {
                <Self as $crate::lift::Lift>::constant(
                    <<Self as $crate::lift::Lift>::Inner as $crate::Real>::$m(),
                )
            }
        )*
    };
    (@pred $($m:ident)*) => {
        $(
            #[doc = concat!("`", stringify!($m), "` of the primal value.")]
            #[inline]
            pub fn $m(self) -> bool {
                $crate::Real::$m($crate::lift::Lift::primal(&self))
            }
        )*
    };
    (@flat $($m:ident)*) => {
        $(
            #[doc = concat!("`", stringify!($m), "`: piecewise constant, so the result is a constant (derivative 0).")]
            #[inline]
            pub fn $m(self) -> Self {
                <Self as $crate::lift::Lift>::constant(
                    $crate::Real::$m($crate::lift::Lift::primal(&self)),
                )
            }
        )*
    };
    (@un $($m:ident $op:ident)*) => {
        $(
            #[doc = concat!("`", stringify!($m), "`, differentiated by the shared rule table.")]
            #[inline(always)]
            pub fn $m(self) -> Self {
                $crate::lift::Lift::lift1(self, $crate::rules::Op1::$op)
            }
        )*
    };
    (@bin $($m:ident $op:ident)*) => {
        $(
            #[doc = concat!("`", stringify!($m), "`; the other operand may be `Self` or `f64`.")]
            #[inline]
            pub fn $m<Y: Into<Self>>(self, other: Y) -> Self {
                $crate::lift::Lift::lift2(self, other.into(), $crate::rules::Op2::$op)
            }
        )*
    };
}

/// `num_traits::Float` and `Real` forwarded to the inherent methods.
#[doc(hidden)]
#[macro_export]
macro_rules! __impl_real_forward {
    (float) => {
        $crate::__impl_real_forward!(@common);
        $crate::__impl_real_forward!(@bin_self powf log atan2 hypot max min abs_sub);
        #[inline]
        fn mul_add(self, a: Self, b: Self) -> Self {
            Self::mul_add(self, a, b)
        }
    };
    (real) => {
        $crate::__impl_real_forward!(@common);
        $crate::__impl_real_forward!(@bin_into powf log atan2 hypot max min abs_sub);
        #[inline]
        fn mul_add<A: Into<Self>, B: Into<Self>>(self, a: A, b: B) -> Self {
            Self::mul_add(self, a, b)
        }
    };
    (@common) => {
        $crate::__impl_real_forward!(@const nan infinity neg_infinity neg_zero min_value
            min_positive_value max_value epsilon);
        $crate::__impl_real_forward!(@pred is_nan is_infinite is_finite is_normal
            is_sign_positive is_sign_negative);
        $crate::__impl_real_forward!(@un floor ceil round trunc signum fract recip sqrt cbrt
            exp exp2 exp_m1 ln ln_1p log2 log10 sin cos tan asin acos atan sinh cosh tanh asinh
            acosh atanh abs to_degrees to_radians);
        #[inline]
        fn classify(self) -> ::core::num::FpCategory {
            Self::classify(self)
        }
        #[inline]
        fn integer_decode(self) -> (u64, i16, i8) {
            Self::integer_decode(self)
        }
        #[inline]
        fn powi(self, n: i32) -> Self {
            Self::powi(self, n)
        }
        #[inline]
        fn sin_cos(self) -> (Self, Self) {
            Self::sin_cos(self)
        }
    };
    (@const $($m:ident)*) => {
        $( #[inline] fn $m() -> Self { Self::$m() } )*
    };
    (@pred $($m:ident)*) => {
        $( #[inline] fn $m(self) -> bool { Self::$m(self) } )*
    };
    (@un $($m:ident)*) => {
        $( #[inline(always)] fn $m(self) -> Self { Self::$m(self) } )*
    };
    (@bin_self $($m:ident)*) => {
        $( #[inline] fn $m(self, other: Self) -> Self { Self::$m(self, other) } )*
    };
    (@bin_into $($m:ident)*) => {
        $( #[inline] fn $m<Y: Into<Self>>(self, other: Y) -> Self { Self::$m(self, other) } )*
    };
}
