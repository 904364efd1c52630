//! The number traits that reversible code runs on, and their implementations for integers,
//! floats, fixed point, complex numbers and forward-mode duals. Each instruction has one method;
//! the derivative-carrying types ([`GVar`](crate::GVar)) implement the same methods with their
//! adjoints attached.

use crate::error::Ancilla;
use crate::lit::Literals;
use adjoint_core::forward::Dual;
use adjoint_core::rules::{self, Op1, Op2};
use adjoint_core::Real;
use core::fmt::Debug;
use fixed::types::extra::{LeEqU32, LeEqU64};
use fixed::{FixedI32, FixedI64};
use num_complex::Complex;

/// Numbers with the reversible arithmetic instructions: `y ±= x`, `y ±= a ∘ b` for `∘ ∈ {+ − × ÷}`,
/// `NEG`, `CONJ`. Integers and fixed-point numbers wrap on overflow, so `+=` and `-=` are exactly
/// inverse; floats are inverse up to rounding.
///
/// ```
/// use adjoint_rev::Arith;
/// let (mut y, mut a, mut b) = (2, 3, 5);
/// i64::acc_arith(&mut y, adjoint_rev::Op2::Mul, &mut a, &mut b, true);   // y += a * b
/// assert_eq!(y, 17);
/// i64::acc_arith(&mut y, adjoint_rev::Op2::Mul, &mut a, &mut b, false);  // y -= a * b
/// assert_eq!(y, 2);
/// ```
pub trait Arith: Copy + Debug + PartialEq + Ancilla + 'static {
    /// The number nearest to `v`.
    fn from_f64(v: f64) -> Self;
    /// The value as text when it is not finite (NaN or ±∞): checked code reports a target
    /// that an instruction took from a finite value to one of these (`y += ln x` at `x = 0`),
    /// which no inverse can undo. `None` for finite values and for types without such values.
    #[doc(hidden)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn non_finite(&self) -> Option<String> {
        None
    }
    /// Why `a ∘ b` has no value in this type (`Some`: division by zero on integers and fixed
    /// point, where Rust's `/` panics): checked code reports it as an error naming the
    /// statement before running it. `None` for types where every operation has a value (floats
    /// give ±∞ or NaN, which [`non_finite`](Arith::non_finite) reports).
    #[doc(hidden)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn undefined(op: Op2, a: &Self, b: &Self) -> Option<String> {
        let _ = (op, a, b);
        None
    }
    /// How the literals of reversible code (`y += x * 3`) convert to this type: exactly for
    /// integers, correctly rounded for fixed point (both checked at compile time), through
    /// [`from_f64`](Arith::from_f64) for floating point (the default).
    const LITERALS: Literals = Literals::Float;
    /// `|self|` as an `f64`, to choose between equivalent formulas (complex division scales by
    /// the larger part of the divisor); NaN where the type has no such magnitude.
    #[doc(hidden)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn magnitude(&self) -> f64 {
        f64::NAN
    }
    /// A literal of reversible code: `neg` and `mag` are the sign and magnitude of its bits in
    /// this type as [`LITERALS`](Arith::LITERALS) describes them (the integer itself, the
    /// fixed-point bits, or an `f32`'s bits), already checked to fit; `value` is the literal's nearest `f64`. The
    /// default is `from_f64(value)`.
    fn from_literal(neg: bool, mag: u128, value: f64) -> Self {
        let _ = (neg, mag);
        Self::from_f64(value)
    }
    /// Zero.
    fn zero() -> Self {
        Self::from_f64(0.0)
    }
    /// One.
    fn one() -> Self {
        Self::from_f64(1.0)
    }
    /// `y += x` (`plus`) or `y -= x`.
    fn acc_id(y: &mut Self, x: &mut Self, plus: bool);
    /// `y ±= a ∘ b` for `op` ∈ {`Add`, `Sub`, `Mul`, `Div`}.
    fn acc_arith(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool);
    /// `y ±= a ∘ a`: [`acc_arith`](Arith::acc_arith) with both operands the same place
    /// (`y += x * x`). The value is the one `acc_arith` computes on two copies of `a`; a type
    /// that carries gradients must give `a` the sum of both operands' contributions.
    fn acc_arith_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool);
    /// `x = −x` (self-inverse).
    fn neg(x: &mut Self);
    /// Complex conjugate (self-inverse; the identity on real numbers).
    fn conj(x: &mut Self) {
        let _ = x;
    }
}

/// Real numbers with every instruction of the shared rule table
/// ([`adjoint_core::rules`]): `y ±= f(x)`, `y ±= f(a, b)`, the rotation `ROT`/`IROT`, and
/// `y *= x`, `y /= x` ([`Scale`]: every real type has it, so `fn f<T: RevReal>` may scale
/// without a second bound, which a user had to find from rustc's hint).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a real number of the reversible engine (`RevReal`: `f64`, `f32`, \
               `GVar`, `Dual`)",
    label = "a real number is needed here",
    note = "integers and fixed point have no transcendental instructions (`sin`, `exp`, …) and \
            compare with integer literals, not float ones: write `x > 0`, or compare with a \
            variable that holds the value (a parameter, or `let h = …;` … `unlet h = …;`)"
)]
pub trait RevReal: Arith + PartialOrd + Scale {
    /// `y ±= op(x)`.
    fn acc1(y: &mut Self, op: Op1, x: &mut Self, plus: bool);
    /// `y ±= op(a, b)`.
    fn acc2(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool);
    /// `y ±= op(a, a)`: [`acc2`](RevReal::acc2) with both operands the same place
    /// (`y += x.hypot(x)`); gradient-carrying types give `a` both contributions.
    fn acc2_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool);
    /// Rotate `(a, b)` by `θ` (`inverse`: by `−θ`).
    fn rot(a: &mut Self, b: &mut Self, theta: &mut Self, inverse: bool);
    /// The primal value as `f64` (a condition's comparison with a float literal, `x > 0.0`, reads
    /// it without being asked).
    fn value(&self) -> f64;
}

/// Numbers where `y *= x` and `y /= x` are instructions: exactly reversible for
/// [`ULog`](crate::ULog) over integers or fixed point, reversible up to rounding for floats, and
/// exactly reversible on wrapping integers for odd factors, where `y /= x` is the inverse of
/// `y *= x` (multiplication by `x`'s inverse modulo 2ⁿ, not floor division):
///
/// ```
/// adjoint_rev::reversible! {
///     fn mix(h: &mut u64) {
///         h *= 0x9E37_79B9_7F4A_7C15u64;   // odd: a bijection of u64
///         h ^= 0xFF;
///     }
///     fn halve(h: &mut u32) {
///         h *= 2;                          // even: no inverse
///     }
/// }
/// let mut h = 12345u64;
/// mix(&mut h).unwrap();
/// assert_eq!(h, (12345u64.wrapping_mul(0x9E37_79B9_7F4A_7C15)) ^ 0xFF);
/// mix::uncall(&mut h).unwrap();
/// assert_eq!(h, 12345);
/// let err = halve(&mut 7).unwrap_err().to_string();
/// assert_eq!(err, "in `halve`, statement `h *= 2`: `*=`/`/=` by 2 on u32 is not invertible: \
///     only odd factors have an inverse modulo 2^32");
/// ```
pub trait Scale: Copy {
    /// `y *= x` (`mul`) or `y /= x`.
    fn scale(y: &mut Self, x: &mut Self, mul: bool);
    /// [`scale`](Scale::scale), or why `x` has no exact inverse (then `y` is unchanged). The
    /// generated code calls this one, in checked and unchecked code alike.
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn try_scale(y: &mut Self, x: &mut Self, mul: bool) -> Result<(), String> {
        Self::scale(y, x, mul);
        Ok(())
    }
}

/// [`Scale::try_scale`] for floating point (`value`: the number's value): a factor of 0, or a
/// non-finite one, has no inverse, and neither has a product that overflows; then `y` and `x`
/// are unchanged. (`y *= 0.0` passed unnoticed, and its inverse `y /= 0.0` gave NaN.)
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
pub(crate) fn try_scale_float<S: Scale>(
    y: &mut S,
    x: &mut S,
    mul: bool,
    value: fn(&S) -> f64,
) -> Result<(), String> {
    let f = value(x);
    if f == 0.0 || !f.is_finite() {
        return Err(format!(
            "`*=`/`/=` by {f:?} is not invertible: a floating-point factor must be finite and \
             nonzero"
        ));
    }
    let (old_y, old_x) = (*y, *x);
    S::scale(y, x, mul);
    let (from, to) = (value(&old_y), value(y));
    // Overflow to ±∞, and underflow to 0 (`1e-200 *= 1e-200`): the inverse cannot bring the
    // value back. Nor from a subnormal product, which keeps only some of its bits (`1e-300 *=
    // 4e-24` is 5e-324, and `/=` brought back 1.235e-300, accepted by checked code; a hunter):
    // a tiny product is undone on copies, and refused where that is off by more than 1e-6
    // (a normal `f32` round trip is off by at most 2.4e-7, an `f64` one by 4.5e-16).
    let lossy = || {
        let (mut b, mut c) = (*y, *x);
        S::scale(&mut b, &mut c, !mul);
        (value(&b) - from).abs() > 1e-6 * from.abs()
    };
    if (from.is_finite() && !to.is_finite())
        || (from != 0.0 && to == 0.0)
        || (from.is_finite() && to != 0.0 && to.abs() < 1e-30 && lossy())
    {
        (*y, *x) = (old_y, old_x);
        return Err(format!(
            "`*=`/`/=` by {f:?} took {from:?} to {to:?}, which cannot be undone"
        ));
    }
    Ok(())
}

/// Wrapping integers: `y *= x` for odd `x` is a bijection (`x` is a unit modulo 2ⁿ); `y /= x`
/// multiplies by `x⁻¹ mod 2ⁿ`, found by Newton's iteration `v ← v·(2 − x·v)`, which doubles
/// the number of correct low bits from the 3 that `v = x` has for every odd `x`.
macro_rules! int_scale {
    ($($t:ty => $u:ty),*) => {$(
        impl Scale for $t {
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn scale(y: &mut Self, x: &mut Self, mul: bool) {
                if let Err(why) = Self::try_scale(y, x, mul) {
                    panic!("{why}");
                }
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn try_scale(y: &mut Self, x: &mut Self, mul: bool) -> Result<(), String> {
                if *x & 1 == 0 {
                    return Err(format!(
                        "`*=`/`/=` by {} on {} is not invertible: only odd factors have an \
                         inverse modulo 2^{}",
                        x,
                        stringify!($t),
                        <$t>::BITS
                    ));
                }
                let f = if mul {
                    *x
                } else {
                    let a = *x as $u;
                    let mut v = a;
                    for _ in 0..7 {
                        v = v.wrapping_mul((2 as $u).wrapping_sub(a.wrapping_mul(v)));
                    }
                    v as $t
                };
                *y = y.wrapping_mul(f);
                Ok(())
            }
        }
    )*};
}

int_scale!(u8 => u8, u16 => u16, u32 => u32, u64 => u64, u128 => u128, usize => usize,
    i8 => u8, i16 => u16, i32 => u32, i64 => u64, i128 => u128, isize => usize);

#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
fn arith<
    T: Copy
        + core::ops::Add<Output = T>
        + core::ops::Sub<Output = T>
        + core::ops::Mul<Output = T>
        + core::ops::Div<Output = T>,
>(
    op: Op2,
    a: T,
    b: T,
) -> T {
    match op {
        Op2::Add => a + b,
        Op2::Sub => a - b,
        Op2::Mul => a * b,
        Op2::Div => a / b,
        other => unreachable!("`{other:?}` is not an arithmetic instruction"),
    }
}

macro_rules! real_impls {
    ([$($g:tt)*] $t:ty, $from:expr) => {
        impl<$($g)*> Arith for $t {
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn non_finite(&self) -> Option<String> {
                let v = Real::value(self);
                (!v.is_finite()).then(|| v.to_string())
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn magnitude(&self) -> f64 {
                Real::value(self).abs()
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn acc_id(y: &mut Self, x: &mut Self, plus: bool) {
                if plus { *y += *x } else { *y -= *x }
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn acc_arith(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool) {
                let v = arith(op, *a, *b);
                if plus { *y += v } else { *y -= v }
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn acc_arith_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool) {
                Self::acc_arith(y, op, a, &mut { *a }, plus);
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn neg(x: &mut Self) {
                *x = -*x;
            }
        }

        impl<$($g)*> RevReal for $t {
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn acc1(y: &mut Self, op: Op1, x: &mut Self, plus: bool) {
                let v = rules::unary(op, *x).value;
                if plus { *y += v } else { *y -= v }
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn acc2(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool) {
                let v = rules::binary(op, *a, *b).value;
                if plus { *y += v } else { *y -= v }
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn acc2_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool) {
                Self::acc2(y, op, a, &mut { *a }, plus);
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn rot(a: &mut Self, b: &mut Self, theta: &mut Self, inverse: bool) {
                let (s, c) = (Real::sin(*theta), Real::cos(*theta));
                let s = if inverse { -s } else { s };
                let (x, y) = (*a, *b);
                *a = x * c - y * s;
                *b = y * c + x * s;
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn value(&self) -> f64 {
                Real::value(self)
            }
        }

        impl<$($g)*> Scale for $t {
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn scale(y: &mut Self, x: &mut Self, mul: bool) {
                if mul { *y *= *x } else { *y /= *x }
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn try_scale(y: &mut Self, x: &mut Self, mul: bool) -> Result<(), String> {
                try_scale_float(y, x, mul, |v| Real::value(v))
            }
        }
    };
}

real_impls!([] f64, |v| v);
real_impls!([T: Real + Ancilla] Dual<T>, |v| <Dual<T> as Real>::cst(v));

impl Arith for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn from_literal(neg: bool, mag: u128, _: f64) -> Self {
        // (`Literals::Float32`: the literal rounded once to `f32`, not through its `f64`)
        let v = f32::from_bits(mag as u32);
        if neg {
            -v
        } else {
            v
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn magnitude(&self) -> f64 {
        self.abs() as f64
    }
    const LITERALS: Literals = Literals::Float32;
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn non_finite(&self) -> Option<String> {
        (!self.is_finite()).then(|| self.to_string())
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc_id(y: &mut Self, x: &mut Self, plus: bool) {
        if plus {
            *y += *x
        } else {
            *y -= *x
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc_arith(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool) {
        let v = arith(op, *a, *b);
        if plus {
            *y += v
        } else {
            *y -= v
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc_arith_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool) {
        Self::acc_arith(y, op, a, &mut { *a }, plus);
    }
    fn neg(x: &mut Self) {
        *x = -*x;
    }
}

/// `f32` evaluates the rule table's functions in `f64` and rounds the result.
impl RevReal for f32 {
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc1(y: &mut Self, op: Op1, x: &mut Self, plus: bool) {
        let v = rules::unary(op, f64::from(*x)).value as f32;
        if plus {
            *y += v
        } else {
            *y -= v
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc2(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool) {
        let v = rules::binary(op, f64::from(*a), f64::from(*b)).value as f32;
        if plus {
            *y += v
        } else {
            *y -= v
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc2_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool) {
        Self::acc2(y, op, a, &mut { *a }, plus);
    }
    fn rot(a: &mut Self, b: &mut Self, theta: &mut Self, inverse: bool) {
        let (s, c) = theta.sin_cos();
        let s = if inverse { -s } else { s };
        let (x, y) = (*a, *b);
        *a = x * c - y * s;
        *b = y * c + x * s;
    }
    fn value(&self) -> f64 {
        f64::from(*self)
    }
}

impl Scale for f32 {
    fn scale(y: &mut Self, x: &mut Self, mul: bool) {
        if mul {
            *y *= *x
        } else {
            *y /= *x
        }
    }
    fn try_scale(y: &mut Self, x: &mut Self, mul: bool) -> Result<(), String> {
        try_scale_float(y, x, mul, |v| f64::from(*v))
    }
}

/// Integers and fixed point: every operation wraps, so `+=` and `-=` are exactly inverse
/// (seed 001 Section 2). One body for both; they differ only in how a literal converts: its
/// bits, checked at compile time to fit (`$bits` is the type of the raw bits).
macro_rules! wrapping_impls {
    ([$($g:tt)*] $t:ty, $from:expr, $to:expr, $lits:expr, $bits:ty, $from_bits:expr) => {
        impl<$($g)*> Arith for $t {
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn from_f64(v: f64) -> Self {
                $from(v)
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn magnitude(&self) -> f64 {
                let to: fn(&Self) -> f64 = $to;
                to(self).abs()
            }
            const LITERALS: Literals = $lits;
            /// One (`INC`, `DEC`); a fixed-point type with fewer than two integer bits has none,
            /// and saying so beats the `fixed` crate's "1 overflows" from deep inside.
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn one() -> Self {
                if let Literals::Fixed { bits, frac } = Self::LITERALS {
                    assert!(
                        frac + 2 <= bits,
                        "INC/DEC on I{}F{}: 1 is not a value of this type (it holds [-{}, {})), \
                         as a literal 1 would not compile; add a value it holds",
                        bits - frac,
                        frac,
                        0.5 * f64::from(1u32 << (bits - frac)),
                        0.5 * f64::from(1u32 << (bits - frac)),
                    );
                }
                Self::from_f64(1.0)
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn from_literal(neg: bool, mag: u128, _: f64) -> Self {
                // `literal_bits` checked that the magnitude fits: the cast and the negation are
                // exact (the most negative value is its own wrapping negation).
                let b = mag as $bits;
                $from_bits(if neg { b.wrapping_neg() } else { b })
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn undefined(op: Op2, a: &Self, b: &Self) -> Option<String> {
                (op == Op2::Div && *b == $from_bits(0)).then(|| {
                    format!("division by zero: {:?} / {:?} has no value in this type", a, b)
                })
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn acc_id(y: &mut Self, x: &mut Self, plus: bool) {
                *y = if plus { y.wrapping_add(*x) } else { y.wrapping_sub(*x) };
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn acc_arith(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool) {
                let v = match op {
                    Op2::Add => a.wrapping_add(*b),
                    Op2::Sub => a.wrapping_sub(*b),
                    Op2::Mul => a.wrapping_mul(*b),
                    Op2::Div => a.wrapping_div(*b),
                    other => unreachable!("`{other:?}` is not an arithmetic instruction"),
                };
                *y = if plus { y.wrapping_add(v) } else { y.wrapping_sub(v) };
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn acc_arith_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool) {
                Self::acc_arith(y, op, a, &mut { *a }, plus);
            }
            #[cfg_attr(not(debug_assertions), inline(always))]
            #[cfg_attr(debug_assertions, inline)]
            fn neg(x: &mut Self) {
                *x = x.wrapping_neg();
            }
        }
    };
}

macro_rules! int_impls {
    ($($t:ty),*) => {$(
        wrapping_impls!(
            [] $t,
            |v: f64| v as $t,
            |v: &$t| *v as f64,
            Literals::Int { signed: <$t>::MIN != 0, bits: <$t>::BITS },
            $t,
            |b: $t| b
        );
    )*};
}

int_impls!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);
wrapping_impls!(
    [F: LeEqU32 + 'static] FixedI32<F>,
    |v: f64| FixedI32::<F>::from_num(v),
    |v: &FixedI32<F>| v.to_num::<f64>(),
    Literals::Fixed { bits: 32, frac: FixedI32::<F>::FRAC_NBITS },
    i32,
    FixedI32::<F>::from_bits
);
wrapping_impls!(
    [F: LeEqU64 + 'static] FixedI64<F>,
    |v: f64| FixedI64::<F>::from_num(v),
    |v: &FixedI64<F>| v.to_num::<f64>(),
    Literals::Fixed { bits: 64, frac: FixedI64::<F>::FRAC_NBITS },
    i64,
    FixedI64::<F>::from_bits
);

/// Complex numbers: every instruction is built from the real part type's own instructions, so
/// `Complex<GVar<f64>>` carries gradients through complex code with no extra rules.
impl<T: Arith> Arith for Complex<T> {
    fn from_f64(v: f64) -> Self {
        Complex::new(T::from_f64(v), T::zero())
    }
    /// `a / b` is undefined where `T`'s own division by what `complex_div` divides by is: on
    /// integers `|b|²` (0 for `b = 0`, and where it wraps to 0), elsewhere `b`'s larger part
    /// (0 only for `b = 0`).
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn undefined(op: Op2, a: &Self, b: &Self) -> Option<String> {
        if op != Op2::Div {
            return None;
        }
        if !matches!(T::LITERALS, Literals::Int { .. })
            && !b.re.magnitude().is_nan()
            && !b.im.magnitude().is_nan()
        {
            // Smith's two divisors, `big` and `big + small·r`, computed as `complex_div` does
            // (the second can wrap to 0 in fixed point where `b` is near the type's edge).
            let (mut big, mut small) = if b.re.magnitude() >= b.im.magnitude() {
                (b.re, b.im)
            } else {
                (b.im, b.re)
            };
            // (a float divides by 0 without complaint; `b = 0` is refused here all the same,
            // where Smith's formula would make NaN of 0/0)
            let zero_div =
                |d: &T| T::undefined(Op2::Div, &T::zero(), d).is_some() || d.magnitude() == 0.0;
            let mut den = T::zero();
            if !zero_div(&big) {
                let mut r = T::zero();
                T::acc_arith(&mut r, Op2::Div, &mut small, &mut big, true);
                T::acc_id(&mut den, &mut big, true);
                T::acc_arith(&mut den, Op2::Mul, &mut small, &mut r, true);
            }
            if zero_div(&big) || zero_div(&den) {
                return Some(format!(
                    "division by zero: ({:?} + {:?}i) / ({:?} + {:?}i), whose divisor is 0 in \
                     this type or, scaled by its larger part, wraps to 0",
                    a.re, a.im, b.re, b.im
                ));
            }
            // (a scaled divisor `big + small·r` past the type's range gives a quotient of 0
            // where the true one is finite: refused in checked code)
            return den.non_finite().map(|d| {
                format!(
                    "({:?} + {:?}i) / ({:?} + {:?}i): the scaled divisor overflows ({d}); \
                     scale both operands down first",
                    a.re, a.im, b.re, b.im
                )
            });
        }
        let (mut re, mut im) = (b.re, b.im);
        let mut d = T::zero();
        T::acc_arith_same(&mut d, Op2::Mul, &mut re, true);
        T::acc_arith_same(&mut d, Op2::Mul, &mut im, true);
        T::undefined(Op2::Div, &T::one(), &d).map(|_| {
            format!(
                "division by zero: ({:?} + {:?}i) / ({:?} + {:?}i), whose divisor's |b|² is 0 in \
                 this type",
                a.re, a.im, b.re, b.im
            )
        })
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn non_finite(&self) -> Option<String> {
        match (self.re.non_finite(), self.im.non_finite()) {
            (None, None) => None,
            (re, im) => Some(format!(
                "{} + {}i",
                re.unwrap_or_else(|| format!("{:?}", self.re)),
                im.unwrap_or_else(|| format!("{:?}", self.im))
            )),
        }
    }
    const LITERALS: Literals = T::LITERALS;
    fn from_literal(neg: bool, mag: u128, value: f64) -> Self {
        Complex::new(T::from_literal(neg, mag, value), T::zero())
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc_id(y: &mut Self, x: &mut Self, plus: bool) {
        T::acc_id(&mut y.re, &mut x.re, plus);
        T::acc_id(&mut y.im, &mut x.im, plus);
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc_arith(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool) {
        match op {
            Op2::Add | Op2::Sub => {
                T::acc_arith(&mut y.re, op, &mut a.re, &mut b.re, plus);
                T::acc_arith(&mut y.im, op, &mut a.im, &mut b.im, plus);
            }
            Op2::Mul => complex_mul(y, a, b, plus),
            Op2::Div => complex_div(y, a, Some(b), plus),
            other => unreachable!("`{other:?}` is not an arithmetic instruction"),
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc_arith_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool) {
        match op {
            Op2::Add | Op2::Sub => {
                T::acc_arith_same(&mut y.re, op, &mut a.re, plus);
                T::acc_arith_same(&mut y.im, op, &mut a.im, plus);
            }
            Op2::Mul => complex_square(y, a, plus),
            Op2::Div => complex_div(y, a, None, plus),
            other => unreachable!("`{other:?}` is not an arithmetic instruction"),
        }
    }
    fn neg(x: &mut Self) {
        T::neg(&mut x.re);
        T::neg(&mut x.im);
    }
    fn conj(x: &mut Self) {
        T::neg(&mut x.im);
    }
}

/// `y ±= a · b` on complex numbers, as four real instructions (reversed order when subtracting,
/// so the two directions are mirror images).
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
fn complex_mul<T: Arith>(y: &mut Complex<T>, a: &mut Complex<T>, b: &mut Complex<T>, plus: bool) {
    let mut steps = [
        |y: &mut Complex<T>, a: &mut Complex<T>, b: &mut Complex<T>, p: bool| {
            T::acc_arith(&mut y.re, Op2::Mul, &mut a.re, &mut b.re, p)
        },
        |y: &mut Complex<T>, a: &mut Complex<T>, b: &mut Complex<T>, p: bool| {
            T::acc_arith(&mut y.re, Op2::Mul, &mut a.im, &mut b.im, !p)
        },
        |y: &mut Complex<T>, a: &mut Complex<T>, b: &mut Complex<T>, p: bool| {
            T::acc_arith(&mut y.im, Op2::Mul, &mut a.re, &mut b.im, p)
        },
        |y: &mut Complex<T>, a: &mut Complex<T>, b: &mut Complex<T>, p: bool| {
            T::acc_arith(&mut y.im, Op2::Mul, &mut a.im, &mut b.re, p)
        },
    ];
    if !plus {
        steps.reverse();
    }
    for s in steps {
        s(y, a, b, plus);
    }
}

/// `y ±= a · a` on complex numbers: [`complex_mul`] with `b` the same place as `a`, so each real
/// instruction takes each part of `a` as often as the product does.
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
fn complex_square<T: Arith>(y: &mut Complex<T>, a: &mut Complex<T>, plus: bool) {
    let mut steps = [
        |y: &mut Complex<T>, a: &mut Complex<T>, p: bool| {
            T::acc_arith_same(&mut y.re, Op2::Mul, &mut a.re, p)
        },
        |y: &mut Complex<T>, a: &mut Complex<T>, p: bool| {
            T::acc_arith_same(&mut y.re, Op2::Mul, &mut a.im, !p)
        },
        |y: &mut Complex<T>, a: &mut Complex<T>, p: bool| {
            T::acc_arith(&mut y.im, Op2::Mul, &mut a.re, &mut a.im, p)
        },
        |y: &mut Complex<T>, a: &mut Complex<T>, p: bool| {
            T::acc_arith(&mut y.im, Op2::Mul, &mut a.im, &mut a.re, p)
        },
    ];
    if !plus {
        steps.reverse();
    }
    for s in steps {
        s(y, a, plus);
    }
}

/// `y ±= a / b` on complex numbers (`b` is `None` when it is the same place as `a`).
///
/// - Integers: `(a · conj b) / |b|²`, each part divided once, as `num_complex` divides (a
///   quotient `(6 + 8i) / (3 + 4i)` of 2, where `1/b` would truncate to 0).
/// - Floating and fixed point: Smith's algorithm, scaled by the divisor's larger part so that
///   nothing squares it (`|b|²` overflows from |b| ≈ 1e154 in `f64`, and wraps at 182 in
///   `I16F16`): with `r = b.im / b.re` (|b.re| ≥ |b.im|), `a / b = ((a.re + a.im·r) +
///   (a.im − a.re·r)i) / (b.re + b.im·r)`, the other case mirrored. The intermediate sums reach
///   twice the operands' parts: parts above half the type's range overflow (`f64` beyond about
///   9e307: ∞ and a `NonFinite` error, or, where only the divisor overflows, a quotient of 0 —
///   an error in checked code, silent in unchecked code) or wrap (fixed point, silently), and
///   `I1F31` cannot hold `r = ±1`.
///
/// Every intermediate is an ancilla computed by the part type's own instructions and uncomputed,
/// so `Complex<GVar<f64>>` carries gradients through it; `b` is only read, and never in the same
/// instruction as `a`. (Types without a [`magnitude`](Arith::magnitude) take `a · (1/b)`, `1/b
/// = conj(b)/|b|²`.)
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
fn complex_div<T: Arith>(
    y: &mut Complex<T>,
    a: &mut Complex<T>,
    mut b: Option<&mut Complex<T>>,
    plus: bool,
) {
    macro_rules! b {
        () => {
            match b.as_deref_mut() {
                Some(b) => b,
                None => &mut *a,
            }
        };
    }
    if matches!(T::LITERALS, Literals::Int { .. }) {
        // (plain integers carry no gradient: copies will do)
        let (mut br, mut bi) = (b!().re, b!().im);
        let (mut ar, mut ai) = (a.re, a.im);
        let (mut d, mut nr, mut ni) = (T::zero(), T::zero(), T::zero());
        T::acc_arith_same(&mut d, Op2::Mul, &mut br, true);
        T::acc_arith_same(&mut d, Op2::Mul, &mut bi, true);
        T::acc_arith(&mut nr, Op2::Mul, &mut ar, &mut br, true);
        T::acc_arith(&mut nr, Op2::Mul, &mut ai, &mut bi, true);
        T::acc_arith(&mut ni, Op2::Mul, &mut ai, &mut br, true);
        T::acc_arith(&mut ni, Op2::Mul, &mut ar, &mut bi, false);
        T::acc_arith(&mut y.re, Op2::Div, &mut nr, &mut d, plus);
        T::acc_arith(&mut y.im, Op2::Div, &mut ni, &mut d, plus);
        return;
    }
    let (mr, mi) = (b!().re.magnitude(), b!().im.magnitude());
    if mr.is_nan() || mi.is_nan() {
        let mut d = T::zero();
        T::acc_arith_same(&mut d, Op2::Mul, &mut b!().re, true);
        T::acc_arith_same(&mut d, Op2::Mul, &mut b!().im, true);
        let mut c = Complex::new(T::zero(), T::zero());
        T::acc_arith(&mut c.re, Op2::Div, &mut b!().re, &mut d, true);
        T::acc_arith(&mut c.im, Op2::Div, &mut b!().im, &mut d, false);
        complex_mul(y, a, &mut c, plus);
        T::acc_arith(&mut c.im, Op2::Div, &mut b!().im, &mut d, true);
        T::acc_arith(&mut c.re, Op2::Div, &mut b!().re, &mut d, false);
        T::acc_arith_same(&mut d, Op2::Mul, &mut b!().im, false);
        T::acc_arith_same(&mut d, Op2::Mul, &mut b!().re, false);
        return;
    }
    // `big` is the divisor's larger part, `small` the other; `re_big` says which is which.
    let re_big = mr >= mi;
    let (mut r, mut den, mut tr, mut ti) = (T::zero(), T::zero(), T::zero(), T::zero());
    {
        let bb = b!();
        let (big, small) = if re_big {
            (&mut bb.re, &mut bb.im)
        } else {
            (&mut bb.im, &mut bb.re)
        };
        T::acc_arith(&mut r, Op2::Div, small, big, true);
        T::acc_id(&mut den, big, true);
        T::acc_arith(&mut den, Op2::Mul, small, &mut r, true);
    }
    // re_big: tr = a.re + a.im·r, ti = a.im − a.re·r; else tr = a.re·r + a.im, ti = a.im·r − a.re.
    if re_big {
        T::acc_id(&mut tr, &mut a.re, true);
        T::acc_arith(&mut tr, Op2::Mul, &mut a.im, &mut r, true);
        T::acc_id(&mut ti, &mut a.im, true);
        T::acc_arith(&mut ti, Op2::Mul, &mut a.re, &mut r, false);
    } else {
        T::acc_arith(&mut tr, Op2::Mul, &mut a.re, &mut r, true);
        T::acc_id(&mut tr, &mut a.im, true);
        T::acc_arith(&mut ti, Op2::Mul, &mut a.im, &mut r, true);
        T::acc_id(&mut ti, &mut a.re, false);
    }
    T::acc_arith(&mut y.re, Op2::Div, &mut tr, &mut den, plus);
    T::acc_arith(&mut y.im, Op2::Div, &mut ti, &mut den, plus);
    if re_big {
        T::acc_arith(&mut ti, Op2::Mul, &mut a.re, &mut r, true);
        T::acc_id(&mut ti, &mut a.im, false);
        T::acc_arith(&mut tr, Op2::Mul, &mut a.im, &mut r, false);
        T::acc_id(&mut tr, &mut a.re, false);
    } else {
        T::acc_id(&mut ti, &mut a.re, true);
        T::acc_arith(&mut ti, Op2::Mul, &mut a.im, &mut r, false);
        T::acc_id(&mut tr, &mut a.im, false);
        T::acc_arith(&mut tr, Op2::Mul, &mut a.re, &mut r, false);
    }
    let bb = b!();
    let (big, small) = if re_big {
        (&mut bb.re, &mut bb.im)
    } else {
        (&mut bb.im, &mut bb.re)
    };
    T::acc_arith(&mut den, Op2::Mul, small, &mut r, false);
    T::acc_id(&mut den, big, false);
    T::acc_arith(&mut r, Op2::Div, small, big, false);
}
