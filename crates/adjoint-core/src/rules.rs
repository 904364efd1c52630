//! The one table of primitive derivative rules.
//!
//! Every engine gets its derivatives from here and nowhere else: forward duals, the tape, the
//! reversible language, the source transform and the array engine all call [`unary`] or
//! [`binary`] and combine the partials they return with their own tangents or adjoints. A rule
//! returns the value, the first partials and the second partials (for Hessians) of one
//! primitive, evaluated at any [`Real`] type, so the table also differentiates itself: running a
//! rule at `Dual<f64>` gives third derivatives, and so on.
//!
//! The functions are `#[inline(always)]` and take the operation as a value; at a call site with a
//! constant operation the `match` folds away, and partials the caller never reads (the second
//! ones in a first-order engine) are removed by the optimiser. In builds with debug assertions
//! (`cargo build`, `cargo test` of a crate that uses adjoint) they are only `#[inline]`: there,
//! without optimisation, every inlined copy of the whole table kept its own stack slots (about
//! 400 KiB per reversible instruction on `GVar<Dual<f64>>`), and a Hessian of a function with a
//! few dozen instructions overflowed a test thread's 2 MiB stack. Nested number types multiplied
//! it (each operation of `Dual<Dual<f64>>` inside the table inlined the table again): rustc took
//! 7–9 GB and over a minute to compile a forward-over-forward Hessian of a two-instruction
//! reversible function, or a tape Hessian of an SSA function's `primal`, and the program
//! overflowed its 8 MiB main stack.
//!
//! # Non-differentiable points
//!
//! Decided once, here, for every engine:
//!
//! | primitive | point | value of the derivative |
//! |---|---|---|
//! | `abs` | `x = 0` | `0` (the symmetric subgradient; `d²=0` everywhere) |
//! | `max`, `min` | `x = y` | `0.5` to each argument (average of the one-sided choices) |
//! | `max`, `min` | one argument NaN | all to the argument that is returned (as `f64::max` does) |
//! | `sqrt`, `cbrt` | `x = 0` | `+∞` (the one-sided limit) |
//! | `hypot`, `atan2` | `(0, 0)` | `0` for first and second partials |
//! | `powf` | `x < 0` | every term with a derivative in `y` is 0 (`x^y` is real only at integer `y`) |
//! | `powf` | `x = 0` | `∂/∂y = 0` and every term with `ln x` is 0 (limit `x → 0⁺`, `y > 0`); at `y = 0` every partial is 0, at `y = 1` `∂²/∂x² = 0` (no `0·∞` NaN) |
//! | `powi` | `n = 0`, `n = 1` | exactly `0` / `1` (no `0·x⁻¹` NaN at `x = 0`) |
//! | `%` (`Rem`) | `x` a multiple of `y` (a jump) | the piece `fmod` took: `∂/∂x = 1`, `∂/∂y = −q` with `q = (x − x % y) / y`; `0` where `y` is infinite |
//! | `floor`, `ceil`, `round`, `trunc`, `signum` | everywhere | `0` (piecewise constant; not in the table, engines treat them as constants) |
//!
//! Outside a primitive's domain (`ln` of a negative number, `asin(2)`) the value is NaN, and the
//! partials are what the derivative's formula gives there, as in JAX and PyTorch: NaN where the
//! formula is undefined too (`asin(2)`, `sqrt(−1)`, `acosh` below 1), finite where it is not
//! (`ln`, `log2`, `log10` below 0, `ln_1p` below −1, `atanh` beyond ±1: `ln(−2)` has the
//! partial −0.5). The NaN value reaches every result computed from it, so a result is never
//! finite with such a partial behind it unless the NaN was discarded (a `max` that returned the
//! other argument, whose rule sends that operand nothing).
//!
//! An infinite partial meeting a zero derivative (the norm `√(x·x)` at `x = 0`: `sqrt`'s partial
//! is ∞, the derivative of `x·x` is 0) gives 0, not `∞ · 0` = NaN, in forward mode (a zero
//! tangent) and on the tape (a zero partial, or a zero adjoint). A zero that only two paths'
//! cancellation makes is not one the tape can see: `√(x − x)` sends ∞ back along both paths of
//! `x − x`, and `∞ − ∞` is NaN there, where forward mode's tangent `ẋ − ẋ` is 0 before it meets
//! the ∞ (JAX and PyTorch give NaN too); so does a one-pass or Welford standard deviation of
//! constant data (ndarray's `std`), where the two-pass `√(Σ(xᵢ − m)²/(n − 1))` gives 0 (its
//! squares' partials are 0). Likewise a zero partial meeting an overflowed tangent is 0 in
//! forward mode through quotients, `recip` and negative powers (the sigmoid `1/(1 + e⁻ᶻ)` at
//! z = −800), but NaN through `exp` and the smooth functions (`exp(−eˣ)`, `atan(sinh x)` at
//! 800: `Dual::lift1` keeps one multiply there), where the tape's zero partial gives 0. And
//! through `+ − × %`, whose partials are operand values, forward mode multiplies without a test
//! (for speed: `forward::plain`): `x · y` at `(1, ∞)` along `y`'s direction is `∞ · 0 + 1 · 1`,
//! NaN, where the tape gives 1 (its gradient is `[∞, 1]`, forward mode's `[∞, NaN]`).
//! The SSA transform, the array
//! engine and the reversible engine's gradients multiply as JAX and PyTorch do (NaN there:
//! `rev::grad` of a norm at 0 gives NaN where forward mode gives 0), which their docs say.
//!
//! Partials are stored numbers, so one that underflows loses what a large adjoint would have
//! made of it, in every reverse engine (as in JAX and PyTorch; forward mode's quotient rule
//! `(ẋ − v·ẏ)/y` does not form it): `x / (y·z)` at (1, 1e160, 1) has `∂/∂(y·z)` = −1e-320, a
//! subnormal with 4 digits, so `∂/∂z` comes out 1e-5 relative off (at 1e200 it is 0). Second
//! derivatives on the tape differentiate a rule's first partials as written (`atan2`'s
//! `x/h²`-like quotients; `hypot`'s unit vector as `(1, t)/√(1 + t²)`, so that its derivative
//! does not cancel), so where those overflow or cancel the Hessian does too (a subnormal `h`
//! gives NaN entries). Forward mode's `Dual` takes `recip`'s and the logarithms' tangents as
//! quotients (`ẋ / x`, not `(1/x) · ẋ`), so reverse over forward (`tape::hessian`) records no
//! partial `1/x` whose own partial `−1/x²` would underflow beyond |x| ≈ 1.3e154: the Hessian
//! of `(1e200·x).ln()` is −1, softplus's at x = 400 is 0 to 1e-16.
//!
//! ```
//! use adjoint_core::rules::{binary, unary, Op1, Op2};
//! let r = unary(Op1::Sin, 0.5_f64);
//! assert_eq!((r.value, r.d, r.dd), (0.5f64.sin(), 0.5f64.cos(), -0.5f64.sin()));
//! let m = binary(Op2::Mul, 3.0_f64, 4.0);
//! assert_eq!((m.value, m.dx, m.dy, m.dxy), (12.0, 4.0, 3.0, 1.0));
//! ```

use crate::Real;

/// A unary primitive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op1 {
    /// `-x`
    Neg,
    /// `1/x`
    Recip,
    /// `√x`
    Sqrt,
    /// `∛x`
    Cbrt,
    /// `xⁿ` for an integer `n`
    Powi(i32),
    /// `eˣ`
    Exp,
    /// `2ˣ`
    Exp2,
    /// `eˣ − 1`
    ExpM1,
    /// `ln x`
    Ln,
    /// `ln(1 + x)`
    Ln1p,
    /// `log₂ x`
    Log2,
    /// `log₁₀ x`
    Log10,
    /// `sin x`
    Sin,
    /// `cos x`
    Cos,
    /// `tan x`
    Tan,
    /// `asin x`
    Asin,
    /// `acos x`
    Acos,
    /// `atan x`
    Atan,
    /// `sinh x`
    Sinh,
    /// `cosh x`
    Cosh,
    /// `tanh x`
    Tanh,
    /// `asinh x`
    Asinh,
    /// `acosh x`
    Acosh,
    /// `atanh x`
    Atanh,
    /// `|x|`
    Abs,
    /// the error function
    Erf,
    /// `ln |Γ(x)|`
    Lgamma,
    /// ψ⁽ⁿ⁾(x)
    Polygamma(u32),
}

/// A binary primitive `f(x, y)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op2 {
    /// `x + y`
    Add,
    /// `x − y`
    Sub,
    /// `x · y`
    Mul,
    /// `x / y`
    Div,
    /// `xʸ`
    Powf,
    /// `atan2(x, y)`: the angle of the point `(y, x)`, as `f64::atan2(self = x, other = y)`
    Atan2,
    /// `min(x, y)`
    Min,
    /// `max(x, y)`
    Max,
    /// `√(x² + y²)`
    Hypot,
    /// `x % y`: IEEE `fmod`, `x − q·y` with `q` the integer quotient truncated toward 0
    /// (Rust's `%` on floats)
    Rem,
}

impl Op1 {
    /// Every unary primitive (with representative `Powi`/`Polygamma` orders), for tests and tools.
    pub const ALL: &'static [Op1] = &[
        Op1::Neg,
        Op1::Recip,
        Op1::Sqrt,
        Op1::Cbrt,
        Op1::Powi(-3),
        Op1::Powi(0),
        Op1::Powi(1),
        Op1::Powi(2),
        Op1::Powi(5),
        Op1::Exp,
        Op1::Exp2,
        Op1::ExpM1,
        Op1::Ln,
        Op1::Ln1p,
        Op1::Log2,
        Op1::Log10,
        Op1::Sin,
        Op1::Cos,
        Op1::Tan,
        Op1::Asin,
        Op1::Acos,
        Op1::Atan,
        Op1::Sinh,
        Op1::Cosh,
        Op1::Tanh,
        Op1::Asinh,
        Op1::Acosh,
        Op1::Atanh,
        Op1::Abs,
        Op1::Erf,
        Op1::Lgamma,
        Op1::Polygamma(0),
        Op1::Polygamma(1),
        Op1::Polygamma(2),
    ];

    /// The open interval on which the primitive is differentiable and finite (for ops with
    /// isolated singular points — `recip`, `tan`, `lgamma`, … — the interval stops short of them).
    pub fn domain(self) -> (f64, f64) {
        use core::f64::consts::FRAC_PI_2;
        match self {
            Op1::Sqrt | Op1::Ln | Op1::Log2 | Op1::Log10 | Op1::Lgamma | Op1::Polygamma(_) => {
                (0.0, f64::INFINITY)
            }
            Op1::Ln1p => (-1.0, f64::INFINITY),
            Op1::Asin | Op1::Acos | Op1::Atanh => (-1.0, 1.0),
            Op1::Acosh => (1.0, f64::INFINITY),
            Op1::Tan => (-FRAC_PI_2, FRAC_PI_2),
            Op1::Recip | Op1::Cbrt | Op1::Abs => (0.0, f64::INFINITY),
            Op1::Powi(n) if n < 0 => (0.0, f64::INFINITY),
            _ => (f64::NEG_INFINITY, f64::INFINITY),
        }
    }

    /// Whether the first partial can be infinite where the value is finite (a domain edge:
    /// `√x` and `∛x` at 0, `asin` and `acos` at ±1, `acosh` at 1). A reverse pass that
    /// multiplies every adjoint by its partial sends `0 · ∞ = NaN` there from a zero adjoint,
    /// though nothing depends on the value; the SSA transform guards these. (Elsewhere a
    /// partial is infinite only where the value is too, or where a finite partial overflows:
    /// `−x/y²` of `x / y` for |y| below ~1e-154, `1/x` of `ln x` at subnormal `x`.)
    ///
    /// ```
    /// use adjoint_core::rules::{unary, Op1};
    /// assert!(Op1::Sqrt.partial_unbounded() && unary(Op1::Sqrt, 0.0).d.is_infinite());
    /// assert!(!Op1::Ln.partial_unbounded()); // ln 0 = −∞ as well
    /// ```
    pub fn partial_unbounded(self) -> bool {
        matches!(
            self,
            Op1::Sqrt | Op1::Cbrt | Op1::Asin | Op1::Acos | Op1::Acosh
        )
    }

    /// Evaluate the primitive on a plain `f64` (no derivatives): the rule's value, computed
    /// alone (`sin` and `cos` are not evaluated together, as the rule's `sin_cos` does; its
    /// values are `(sin, cos)`, so the numbers are the same).
    pub fn eval(self, x: f64) -> f64 {
        match self {
            Op1::Sin => x.sin(),
            Op1::Cos => x.cos(),
            op => unary(op, x).value,
        }
    }
}

impl Op2 {
    /// Every binary primitive.
    pub const ALL: &'static [Op2] = &[
        Op2::Add,
        Op2::Sub,
        Op2::Mul,
        Op2::Div,
        Op2::Powf,
        Op2::Atan2,
        Op2::Min,
        Op2::Max,
        Op2::Hypot,
        Op2::Rem,
    ];

    /// [`Op1::partial_unbounded`] for binary primitives: `0^y` with 0 < y < 1 has the value 0
    /// and an infinite partial in the base.
    pub fn partial_unbounded(self) -> bool {
        matches!(self, Op2::Powf)
    }

    /// Evaluate the primitive on plain `f64`s (no derivatives).
    pub fn eval(self, x: f64, y: f64) -> f64 {
        binary(self, x, y).value
    }
}

/// Value, first and second derivative of a unary primitive at a point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule1<T> {
    /// `f(x)`
    pub value: T,
    /// `f'(x)`
    pub d: T,
    /// `f''(x)`
    pub dd: T,
}

/// Value, first and second partials of a binary primitive at a point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule2<T> {
    /// `f(x, y)`
    pub value: T,
    /// `∂f/∂x`
    pub dx: T,
    /// `∂f/∂y`
    pub dy: T,
    /// `∂²f/∂x²`
    pub dxx: T,
    /// `∂²f/∂x∂y`
    pub dxy: T,
    /// `∂²f/∂y²`
    pub dyy: T,
}

/// A second partial `x · (the first partial d)`: 0 at ±∞ where `d` is 0 there, not `∞ · 0`
/// (NaN in `atan`, `asinh`, `acosh` and `erf` at ±∞; the array engine reads it there, a
/// hunter). Where `d` is NaN (`acosh(−∞)`, outside the domain) it stays NaN. (The engines that
/// differentiate `d` instead get 0 or NaN by their own rules.)
#[inline(always)]
fn dd_to_zero_at_infinity<T: Real>(x: T, d: T, dd: impl FnOnce() -> T) -> T {
    if x.value().is_infinite() && d.value() == 0.0 {
        T::zero()
    } else {
        dd()
    }
}

#[inline(always)]
fn r1<T>(value: T, d: T, dd: T) -> Rule1<T> {
    Rule1 { value, d, dd }
}

#[inline(always)]
fn r2<T>(value: T, dx: T, dy: T, dxx: T, dxy: T, dyy: T) -> Rule2<T> {
    Rule2 {
        value,
        dx,
        dy,
        dxx,
        dxy,
        dyy,
    }
}

/// `1 − x²` for the partials of `asin`, `acos` and `atanh`: as `(1 − x)(1 + x)` from |x| = 1/2
/// on (near ±1 the rounding of `x²` is a relative error of up to ~4e-9 in `1 − x²`, at
/// x = 1 − 2⁻²⁷, while `1 − x` is exact there, Sterbenz), as `1 − x·x` below, where it is as
/// accurate and its derivative `−2x` does not cancel (a second-order engine differentiating the
/// product got `(1 − x) − (1 + x)`: 0 at x = 1e-17, where asin'' is 1e-17).
#[inline(always)]
fn one_minus_square<T: Real>(x: T) -> T {
    if x.abs() < 0.5 {
        T::cst(1.0) - x * x
    } else {
        (T::cst(1.0) - x) * (x + 1.0)
    }
}

/// The rule of a unary primitive at `x`.
///
/// ```
/// use adjoint_core::rules::{unary, Op1};
/// let r = unary(Op1::Sin, 0.5f64);
/// assert_eq!((r.value, r.d, r.dd), (0.5f64.sin(), 0.5f64.cos(), -0.5f64.sin()));
/// ```
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
pub fn unary<T: Real>(op: Op1, x: T) -> Rule1<T> {
    use core::f64::consts::{FRAC_2_SQRT_PI, LN_10, LN_2};
    let zero = T::zero();
    let one = T::one();
    match op {
        Op1::Neg => r1(-x, -one, zero),
        Op1::Recip => {
            let v = x.recip();
            r1(v, -(v * v), v * v * v * 2.0)
        }
        Op1::Sqrt => {
            let v = x.sqrt();
            // `+ 0`: at x = −0 (where sqrt gives −0) the partials are those at +0, the
            // one-sided limit `+∞` of the table above, not `−∞`
            let d = ((v + zero) * 2.0).recip();
            r1(v, d, -(d / ((x + zero) * 2.0)))
        }
        Op1::Cbrt => {
            let v = x.cbrt();
            let d = (v * v * 3.0).recip();
            r1(v, d, -(d * 2.0 / (x * 3.0)))
        }
        Op1::Powi(n) => match n {
            0 => r1(one, zero, zero),
            1 => r1(x, one, zero),
            _ => {
                // Each power by `powi` itself: the value is the plain program's `x.powi(n)` bit
                // for bit (`x^(n−2)·x·x` differed in the last bit for most n, and overflowed or
                // underflowed where `xⁿ` does not, for n < 0: NaN at x = 0).
                let nf = f64::from(n);
                let pm1 = n
                    .checked_sub(1)
                    .map_or_else(|| x.powi(n) / x, |m| x.powi(m));
                let pm2 = n.checked_sub(2).map_or_else(|| pm1 / x, |m| x.powi(m));
                r1(x.powi(n), pm1 * nf, pm2 * (nf * (nf - 1.0)))
            }
        },
        Op1::Exp => {
            let v = x.exp();
            r1(v, v, v)
        }
        Op1::Exp2 => {
            let v = x.exp2();
            r1(v, v * LN_2, v * (LN_2 * LN_2))
        }
        Op1::ExpM1 => {
            let e = x.exp();
            r1(x.exp_m1(), e, e)
        }
        Op1::Ln => {
            let d = x.recip();
            r1(x.ln(), d, -(d * d))
        }
        Op1::Ln1p => {
            let d = (x + 1.0).recip();
            r1(x.ln_1p(), d, -(d * d))
        }
        Op1::Log2 => {
            let d = (x * LN_2).recip();
            r1(x.log2(), d, -(d / x))
        }
        Op1::Log10 => {
            // 1/(x ln 10), formed so that neither step overflows: `x · ln 10` overflows beyond
            // x ≈ 7.8e307 and `1/x` below 5.6e-309, where 1/(x ln 10) is finite
            let d = if x.value().abs() < 1.0 {
                (x * LN_10).recip()
            } else {
                x.recip() / LN_10
            };
            r1(x.log10(), d, -(d / x))
        }
        Op1::Sin => {
            let (s, co) = x.sin_cos();
            r1(s, co, -s)
        }
        Op1::Cos => {
            let (s, co) = x.sin_cos();
            r1(co, -s, -co)
        }
        Op1::Tan => {
            let v = x.tan();
            let d = v * v + 1.0;
            r1(v, d, v * d * 2.0)
        }
        // `1 − x²` as `one_minus_square`
        Op1::Asin => {
            let d = one_minus_square(x).sqrt().recip();
            r1(x.asin(), d, x * d * d * d)
        }
        Op1::Acos => {
            let d = one_minus_square(x).sqrt().recip();
            r1(x.acos(), -d, -(x * d * d * d))
        }
        Op1::Atan => {
            // Beyond |x| = 2²⁷, where `x² + 1` rounds to `x²`, as `(1/x)²`: a second-order
            // engine differentiates `d`, and through `recip`'s partial `−1/(x²)²`, which
            // underflows, the tape's Hessian of `atan` was 0 beyond ~1e80 (−2e-270 at 1e90).
            let d = if x.value().abs() >= 134_217_728.0 {
                let r = x.recip();
                r * r
            } else {
                (x * x + 1.0).recip()
            };
            r1(
                x.atan(),
                d,
                dd_to_zero_at_infinity(x, d, || -(x * d * d * 2.0)),
            )
        }
        Op1::Sinh => r1(x.sinh(), x.cosh(), x.sinh()),
        Op1::Cosh => r1(x.cosh(), x.sinh(), x.cosh()),
        Op1::Tanh => {
            let v = x.tanh();
            // `1 − tanh²`, as JAX and PyTorch compute it: its relative error is ~2ε/(1 − tanh²),
            // 1e-8 at |x| = 10 (mpmath), and it is 0 beyond |x| ≈ 19.06, where tanh rounds to
            // ±1 (the derivative 4e^(−2|x|) is below 1e-16 there). The compiled array kernels
            // and the CUDA prelude compute it the same way, bit for bit.
            let d = T::cst(1.0) - v * v;
            r1(v, d, -(v * d * 2.0))
        }
        // (`x² ± 1` overflowed beyond |x| ≈ 1.3e154, where the derivative 1/|x| is not 0:
        // `hypot` and a product of two roots do not)
        Op1::Asinh => {
            let d = x.hypot(T::cst(1.0)).recip();
            r1(
                x.asinh(),
                d,
                dd_to_zero_at_infinity(x, d, || -(x * d * d * d)),
            )
        }
        Op1::Acosh => {
            let d = ((x - 1.0).sqrt() * (x + 1.0).sqrt()).recip();
            r1(
                x.acosh(),
                d,
                dd_to_zero_at_infinity(x, d, || -(x * d * d * d)),
            )
        }
        Op1::Atanh => {
            let d = one_minus_square(x).recip();
            r1(x.atanh(), d, x * d * d * 2.0)
        }
        Op1::Abs => {
            let s = if x > zero {
                one
            } else if x < zero {
                -one
            } else if x == zero {
                zero
            } else {
                x // NaN propagates
            };
            r1(x.abs(), s, zero)
        }
        Op1::Erf => {
            let d = (-(x * x)).exp() * FRAC_2_SQRT_PI;
            r1(x.erf(), d, dd_to_zero_at_infinity(x, d, || -(x * d * 2.0)))
        }
        Op1::Lgamma => r1(x.lgamma(), x.polygamma(0), x.polygamma(1)),
        Op1::Polygamma(n) => r1(x.polygamma(n), x.polygamma(n + 1), x.polygamma(n + 2)),
    }
}

/// Whether `powf`'s `∂/∂x` is taken as `y · x^y / x`: where `x^(y−1)` overflows alone (a
/// subnormal `x` at a tiny `y`), or where `x^(y−2)` does at a normal `x` (a second-order engine
/// differentiates `x^(y−1)`, whose derivative overflows with it). Only where `x^y` is a normal
/// number and `x` finite: at a subnormal `x^y` the quotient lost what `y · x^(y−1)` keeps (0
/// for 3.7e-7 at (1e-322, 1.02)), at `x = ∞` it is ∞/∞, and at a subnormal `x` a tape's
/// Hessian divided by it (NaN; a reviewer).
#[inline]
fn split_power(x: f64, v: f64, pm1_finite: bool, pm2_finite: bool) -> bool {
    x > 0.0
        && x.is_finite()
        && v.abs() >= f64::MIN_POSITIVE
        && v.is_finite()
        && (!pm1_finite || (!pm2_finite && x >= f64::MIN_POSITIVE))
}

/// The rule of `x.powf(y)`: out of line (three `powf` calls dwarf a call; its edge cases made
/// every caller of the inlined [`binary`] bigger, and forward mode's BA Jacobian 3–4 % slower).
#[inline(never)]
fn powf_rule<T: Real>(x: T, y: T) -> Rule2<T> {
    let zero = T::zero();
    let one = T::one();
    let rule = r2;
    let v = x.powf(y);
    let pm1 = x.powf(y - 1.0);
    let pm2 = x.powf(y - 2.0);
    // Where `x ≤ 0` the table gives `x^y` no derivative in `y` (below), so the `x`
    // partials take `y` as a constant too: a second-order engine differentiates `dx`
    // itself, and with an active `y` there it read ∂²/∂x∂y = x^(y−1) (4 at (−2, 3))
    // against the table's `dxy = 0`, a Hessian that depended on the order.
    let yk = if x <= zero { T::cst(y.value()) } else { y };
    // `y · x^(y−1)` is `0 · ∞` at `y = 0` where `x^(y−1)` overflows (x = 0, or a
    // subnormal x), and `y (y − 1) · x^(y−2)` at `y = 0` and `y = 1`: there `x^y` is
    // constant or linear, and the partial is 0. (Only there: at a finite `x^(y−1)` the
    // formula stands, so that a second-order engine still differentiates it in `y`.
    // Forward mode's Hessian of `x.powf(y)` at (1e-320, 2) was NaN: its `x^(y−2)` is
    // `x⁰`, whose partial overflowed.)
    // Where `x^(y−1)` or `x^(y−2)` overflows alone at a tiny `y` and a positive `x`, the
    // partials are finite: `∂/∂x` taken as `y · x^y / x` (a second-order engine
    // differentiates it, and `x^(y−1)`'s derivative overflows with `x^(y−2)`), `∂²/∂x²`
    // as `y (y − 1) · x^(y−1) / x`; ∂²/∂x² at (1e-160, 1e-20) was −∞ for −1e300 (a
    // hunter).
    let dx = if y == zero && !pm1.is_finite() {
        zero
    } else if split_power(x.value(), v.value(), pm1.is_finite(), pm2.is_finite()) {
        yk * v / x
    } else {
        yk * pm1
    };
    let dxx = if (y == zero || y == one) && !pm2.is_finite() {
        zero
    } else if !pm2.is_finite() && pm1.is_finite() && x > zero && x.value().is_finite() {
        yk * (yk - 1.0) * pm1 / x
    } else {
        // (`y (y − 1)` overflows only where |y| > 1.3e154, and there `x^(y−2)` is 0 or ∞ for
        // every |x| ≠ 1: where it is 0, so is the partial, not ∞ · 0 = NaN; a hunter.)
        let c = yk * (yk - 1.0);
        if pm2 == zero && !c.is_finite() {
            zero
        } else {
            c * pm2
        }
    };
    if x == zero {
        rule(v, dx, zero, dxx, zero, zero)
    } else if x < zero {
        // x^y is real only at integer y, so it has no derivative in y: those terms are
        // 0 (as at x = 0), and a constant exponent gives no `0 · NaN` (forward mode's
        // derivative of `x.powf(2.0)` at −2 was NaN)
        rule(v, dx, zero, dxx, zero, zero)
    } else {
        let l = x.ln();
        // `∂/∂y = x^y · ln x`; where `x^y` underflows (to 0 or a subnormal) and
        // `x^(y−1)` does not, as `x^(y−1) · (x · ln x)`: a second-order engine
        // differentiates the partial in x, and `x^y · ln x` lost the term
        // `x^y · (1/x) = x^(y−1)` (0.1 % off at (1e-200, 2)). (At a subnormal x, `1/x`
        // overflows: `ln`'s own derivative is ∞ there, and so are mixed partials.)
        // (Only below x = 1: above, `x^(y−1)` is the smaller and underflows first; at
        // (1e100, −3.1) it made ∂/∂y 0 for 2.3e-308, a reviewer.)
        let vl = if v.value().abs() < f64::MIN_POSITIVE && pm1.is_finite() && x < one {
            pm1 * (x * l)
        } else {
            v * l
        };
        rule(v, dx, vl, dxx, pm1 * (y * l + 1.0), vl * l)
    }
}

/// The rule of a binary primitive at `(x, y)`.
///
/// ```
/// use adjoint_core::rules::{binary, Op2};
/// let r = binary(Op2::Mul, 3.0f64, 4.0);
/// assert_eq!((r.value, r.dx, r.dy), (12.0, 4.0, 3.0));
/// assert_eq!((r.dxx, r.dxy, r.dyy), (0.0, 1.0, 0.0));
/// ```
#[cfg_attr(not(debug_assertions), inline(always))]
#[cfg_attr(debug_assertions, inline)]
pub fn binary<T: Real>(op: Op2, x: T, y: T) -> Rule2<T> {
    let zero = T::zero();
    let one = T::one();
    let rule = r2;
    match op {
        Op2::Add => rule(x + y, one, one, zero, zero, zero),
        Op2::Sub => rule(x - y, one, -one, zero, zero, zero),
        Op2::Mul => rule(x * y, y, x, zero, one, zero),
        Op2::Div => {
            // The value is `x / y`, not `x · (1/y)`: the latter differs from the plain
            // program's quotient in the last bit, and an engine's primal must equal it.
            let inv = y.recip();
            let v = x / y;
            // `−x/y²` as `−v · (1/y)`; where `1/y` overflows (|y| below ~5.6e-309) as `−v / y`:
            // at x = 0 the former is `0 · ∞ = NaN` where the partial is 0 (the tape's
            // gradient of `x / y` at (0, 1e-310) was NaN in `y`)
            // At a type that differentiates it (`Real::TANGENTS`), also as `−v / y` where `|y|`
            // is beyond 1e±150: `1/y`'s own derivative `−1/y²` under- or overflows there alone
            // (SSA and reversible Hessians of `x / y` at (1e300, 1e200) were 1e-300 for
            // 2e-300, ∞ at (1e-160, 1e-155); a hunter).
            let ya = y.value().abs();
            let (dy, dyy) = if inv.is_finite() && (!T::TANGENTS || (1e-150..=1e150).contains(&ya)) {
                (-(v * inv), v * inv * inv * 2.0)
            } else {
                let w = v / y;
                (-w, w / y * 2.0)
            };
            rule(v, inv, dy, zero, -(inv * inv), dyy)
        }
        Op2::Powf => powf_rule(x, y),
        Op2::Atan2 => {
            // From h = hypot(x, y) and the unit vector (x, y) / h: `x² + y²` underflowed to 0
            // at (1e-300, 1e-300), which took the (0, 0) rule (every partial 0 where ∂/∂x is
            // 5e299), and overflowed at (1e200, 1e200) (NaN second partials).
            let h = x.hypot(y);
            if h == zero {
                return rule(x.atan2(y), zero, zero, zero, zero, zero);
            }
            if h.is_infinite() {
                // Every partial is a multiple of 1/h → 0: at (1, ∞) the unit vector's ∞/∞ made
                // ∂/∂x NaN where the value is 0 (a hunter). (Finite arguments whose h overflows
                // have partials below 1e-308: 0 too.)
                return rule(x.atan2(y), zero, zero, zero, zero, zero);
            }
            let (ux, uy) = (x / h, y / h);
            let (sx, sy) = (ux / h, uy / h); // x / r², y / r²
            let sxy2 = sx * sy * 2.0;
            rule(
                x.atan2(y),
                sy,
                -sx,
                -sxy2,
                (ux * ux - uy * uy) / h / h,
                sxy2,
            )
        }
        Op2::Max | Op2::Min => {
            let take_x = if op == Op2::Max { x > y } else { x < y };
            let take_y = if op == Op2::Max { x < y } else { x > y };
            let (dx, dy) = if take_x {
                (one, zero)
            } else if take_y {
                (zero, one)
            } else if x == y {
                (T::cst(0.5), T::cst(0.5))
            } else if x.is_nan() {
                (zero, one)
            } else {
                (one, zero)
            };
            let v = if op == Op2::Max { x.max(y) } else { x.min(y) };
            rule(v, dx, dy, zero, zero, zero)
        }
        Op2::Rem => {
            // `r = x − q·y` exactly (fmod rounds nothing), with `q` an integer constant on each
            // piece: ∂/∂x = 1, ∂/∂y = −q, no second partials; at a jump (`r` = 0) the piece
            // that `%` took. (`x − trunc(x/y)·y` rounds the quotient: `1 % 0.1` is 0.0999…
            // with q = 9, where `trunc(1/0.1)` is 10.) `q` beyond f64's range is ±f64::MAX,
            // so the partial stays finite, and 0 where `y` is infinite (`x % ∞ = x`).
            let v = x % y;
            let (xv, vv, yv) = (x.value(), v.value(), y.value());
            if vv.is_nan() {
                // outside the domain (`x % 0`, `∞ % y`): value and partials NaN
                let n = T::cst(f64::NAN);
                return rule(v, n, n, n, n, n);
            }
            let q = if yv.is_infinite() {
                0.0
            } else {
                ((xv - vv) / yv).round().clamp(-f64::MAX, f64::MAX)
            };
            rule(v, one, T::cst(-q), zero, zero, zero)
        }
        Op2::Hypot => {
            let h = x.hypot(y);
            if h == zero {
                return rule(h, zero, zero, zero, zero, zero);
            }
            // From the unit vector (x, y) / h: `1/h³` overflowed or underflowed at extreme
            // magnitudes (NaN second partials at (1e200, 1e200), an infinite first partial at
            // (5e-324, 0)).
            if h.is_infinite() && !(x.is_infinite() && y.is_infinite()) {
                // The value is ∞, the unit vector (x, y)/h still defined: an infinite argument
                // is ±1 of it and a finite one beside it 0 (at (∞, 1) ∂/∂x was ∞/∞ = NaN; a
                // hunter); finite arguments past the range, scaled by the larger first. The
                // second partials are multiples of 1/h: 0. (Both infinite: no one direction,
                // NaN as before.)
                let (a, b) = if x.is_infinite() {
                    (x.signum(), zero)
                } else if y.is_infinite() {
                    (zero, y.signum())
                } else {
                    let m = x.abs().max(y.abs());
                    (x / m, y / m)
                };
                let n = a.hypot(b);
                return rule(h, a / n, b / n, zero, zero, zero);
            }
            // The unit vector as `(1, t)/√(1 + t²)` with `t` the smaller argument over the
            // larger (signs kept): engines that take second derivatives by differentiating the
            // first partials (forward mode, forward over reverse) differentiate this, whose
            // derivative is a product, where `x/h`'s is `1/h − x²/h³`, which cancels when one
            // argument is much larger: `x.hypot(1.0)`'s ∂²/∂x² was 2e-6 relative off at x = 1e5
            // and 0 past 1e8 (a hunter). `hypot(5e-324, 5e-324)` also gets its 1/√2 (x/h was 1).
            // The first partials are off by up to ~2.4 ulp this way (x/h: ~1.5; a reviewer's
            // 200 000 random points): kept, for the second derivatives.
            let (ux, uy) = if x.abs() >= y.abs() {
                let t = y / x;
                let s = (t * t + one).sqrt();
                (x.signum() / s, x.signum() * t / s)
            } else {
                let t = x / y;
                let s = (t * t + one).sqrt();
                (y.signum() * t / s, y.signum() / s)
            };
            rule(h, ux, uy, uy * uy / h, -(ux * uy) / h, ux * ux / h)
        }
    }
}
