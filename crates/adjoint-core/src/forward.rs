//! Forward mode: dual numbers.
//!
//! [`Dual<T>`] carries a value and one tangent; [`DualVec<N>`] carries `N` tangents at once
//! (vector forward mode, [`jacobian`] in one pass). It implements [`Real`], so any generic function
//! runs on it unchanged, and it nests: `Dual<Dual<f64>>` carries second derivatives. The helpers
//! [`derivative`], [`jvp`], [`gradient`] and [`hessian`] cover the usual questions; gradient and
//! Hessian cost n and n(n+1)/2 sweeps, so they are meant for checking and small problems — use a
//! reverse-mode engine for large gradients.
//!
//! ```
//! use adjoint_core::{forward, Real};
//!
//! fn rosenbrock<T: Real>(x: &[T]) -> T {
//!     let (a, b) = (x[0], x[1]);
//!     (T::cst(1.0) - a).powi(2) + (b - a * a).powi(2) * 100.0
//! }
//!
//! let g = forward::gradient(|x| rosenbrock(x), &[1.0, 1.0]);
//! assert_eq!(g, vec![0.0, 0.0]);
//! let h = forward::hessian(|x| rosenbrock(x), &[1.0, 1.0]);
//! assert_eq!(h, vec![vec![802.0, -400.0], vec![-400.0, 200.0]]);
//! ```

use crate::lift::Lift;
use crate::rules::{self, Op1, Op2};
use crate::Real;
use core::fmt;

/// A dual number `re + eps·ε` with `ε² = 0`: a value and its directional derivative.
#[derive(Clone, Copy, Debug)]
pub struct Dual<T> {
    /// The value.
    pub re: T,
    /// The tangent (derivative along the seeded direction).
    pub eps: T,
}

/// The common first-order dual.
pub type Dual64 = Dual<f64>;
/// A second-order (hyper-)dual: `Dual<Dual<f64>>`.
pub type Dual2 = Dual<Dual<f64>>;

impl<T: Real> Dual<T> {
    /// A dual number with the given value and tangent.
    ///
    /// ```
    /// use adjoint_core::forward::Dual;
    /// let x = Dual::new(2.0, 1.0);
    /// let y = x * x;
    /// assert_eq!((y.re, y.eps), (4.0, 4.0));
    /// ```
    #[inline]
    pub fn new(re: T, eps: T) -> Self {
        Dual { re, eps }
    }

    /// The primal value as `f64` (the innermost value of a nested dual), as the tape's
    /// `Var::value` and [`Real::value`].
    ///
    /// ```
    /// use adjoint_core::forward::{Dual, Dual64};
    /// assert_eq!(Dual64::new(2.5, 1.0).value(), 2.5);
    /// assert_eq!(Dual::new(Dual64::new(2.5, 1.0), Dual64::new(0.0, 0.0)).value(), 2.5);
    /// ```
    #[inline]
    pub fn value(&self) -> f64 {
        self.re.value()
    }

    /// The independent variable `x` (tangent 1).
    ///
    /// ```
    /// use adjoint_core::forward::Dual;
    /// assert_eq!(Dual::variable(3.0).eps, 1.0);
    /// ```
    #[inline]
    pub fn variable(re: T) -> Self {
        Dual { re, eps: T::one() }
    }

    /// A constant (tangent 0).
    ///
    /// ```
    /// use adjoint_core::forward::Dual;
    /// assert_eq!(Dual::constant(3.0).eps, 0.0);
    /// ```
    #[inline]
    pub fn constant(re: T) -> Self {
        Dual { re, eps: T::zero() }
    }
}

impl<T: Real> Lift for Dual<T> {
    type Inner = T;
    const TANGENTS: bool = true;

    #[inline(always)]
    fn primal(&self) -> T {
        self.re
    }
    #[inline(always)]
    fn constant(v: T) -> Self {
        Dual::constant(v)
    }
    #[inline(always)]
    fn lift1(self, op: Op1) -> Self {
        if op == Op1::Recip {
            // `1.0 / x`'s quotient rule, not the table's `−v² · ẋ`: `v²` underflows at |x|
            // above ~1.3e154 where the tangent does not (`(x·x).recip()` at 1e100 had the
            // derivative 0 for −2e-300, and so had `atan`'s Hessian beyond 1e80, its partial
            // being `(x² + 1).recip()`)
            return Self::lift2_const_left(T::one(), self, Op2::Div);
        }
        if let Some(d) = log_quotient(op, self) {
            return d;
        }
        let r = rules::unary(op, self.re);
        Dual {
            re: r.value,
            // (a zero partial meeting an overflowed tangent: 0 through `tangent`, for `recip`
            // and negative powers; NaN through `smooth` operations and `exp` & co, which keep
            // one multiply: `atan(sinh x)`, `exp(−eˣ)` at 800 — a test of the product there cost
            // forward mode's logistic regression and logsumexp 3–6 % more)
            eps: if smooth(op) {
                r.d * self.eps
            } else if let Op1::Powi(..=-1) = op {
                // (a zero partial sends nothing of an overflowed tangent: `x.powi(-1)` at
                // x = e⁸⁰⁰; `op` is a constant where this is inlined)
                tangent(r.d, self.eps)
            } else if overflows(op) {
                // (a select, not a branch: `exp` in a loop stays as fast as `d · e`; testing the
                // partial for 0 too cost forward mode's logistic regression 5–8 %)
                if self.eps.exact_zero() {
                    T::zero()
                } else {
                    r.d * self.eps
                }
            } else {
                tangent(r.d, self.eps)
            },
        }
    }
    #[inline(always)]
    fn lift2(self, other: Self, op: Op2) -> Self {
        let r = rules::binary(op, self.re, other.re);
        Dual {
            re: r.value,
            eps: if op == Op2::Div {
                // (`tangent`: an infinite quotient times a divisor's zero tangent is 0)
                quotient(self.eps - tangent(r.value, other.eps), other.re)
            } else if plain(op) {
                r.dx * self.eps + r.dy * other.eps
            } else {
                tangent(r.dx, self.eps) + tangent(r.dy, other.eps)
            },
        }
    }
    #[inline(always)]
    fn lift2_const_right(self, c: T, op: Op2) -> Self {
        let r = rules::binary(op, self.re, c);
        Dual {
            re: r.value,
            eps: if op == Op2::Div {
                // (`quotient`: `x / 0.0` along a direction that does not move `x` is 0, not
                // `0 / 0`, as with `Dual::constant(0.0)` for the divisor)
                quotient(self.eps, c)
            } else if plain(op) {
                r.dx * self.eps
            } else {
                tangent(r.dx, self.eps)
            },
        }
    }
    #[inline(always)]
    fn lift2_const_left(c: T, x: Self, op: Op2) -> Self {
        let r = rules::binary(op, c, x.re);
        Dual {
            re: r.value,
            eps: if op == Op2::Div {
                quotient(-tangent(r.value, x.eps), x.re)
            } else if plain(op) {
                r.dy * x.eps
            } else {
                tangent(r.dy, x.eps)
            },
        }
    }
    #[inline(always)]
    fn lift_exact_zero(&self) -> bool {
        self.re.exact_zero() && self.eps.exact_zero()
    }
    #[inline(always)]
    fn lift_scale_cotangent(self, d: Self) -> Option<Self> {
        // (a + a′ε)(d + d′ε), each product guarded: a zero factor on the cotangent's side
        // sends nothing through an infinite partial, at every level
        Some(Dual {
            re: self.re.scale_cotangent(d.re),
            eps: self.re.scale_cotangent(d.eps) + self.eps.scale_cotangent(d.re),
        })
    }
    #[inline(always)]
    fn lift_finite_everywhere(&self) -> bool {
        self.re.finite_everywhere() && self.eps.finite_everywhere()
    }
}

/// A partial `d` times a tangent `e`: zero when `e` is exactly zero in every component (the
/// direction does not move this operand), whatever `d` is — `sqrt(x) + y` at x = 0 has the
/// derivative 1 along y, where `∞ · 0` made it NaN (and so every direction's, through `+`);
/// and zero when `d` is exactly zero, whatever `e` is, as the tape's zero partial sends nothing
/// back of an infinite adjoint — `1 / (1 + e⁸⁰⁰)` (a sigmoid at −800) has the derivative 0,
/// where its quotient 0 times the divisor's overflowed tangent ∞ made it NaN.
#[inline(always)]
fn tangent<T: Real>(d: T, e: T) -> T {
    // (finite in every component, as a nested dual's `1e300 + ∞ε` is not; the rare case out of
    // line: a select over all four tests cost forward mode's logistic regression 6–8 %)
    if d.finite_everywhere() && e.finite_everywhere() {
        d * e
    } else {
        tangent_through_infinity(d, e)
    }
}

/// `ln`, `ln_1p`, `log2`, `log10` with the tangent a quotient `ẋ / (x·c)`, not the table's
/// partial `1/(x·c)` times `ẋ`: reverse over forward (`tape::hessian`, a `Dual<Var>`) recorded
/// that partial, whose own stored partial `−1/(x·c)²` underflows beyond |x| ≈ 1.3e154, where
/// the second derivative's term `d′(u)·u̇²` does not (`(1e200·x).ln()` had the second
/// derivative 0 for −1, softplus `(1 + eˣ).ln()` at x = 400 had 1 for 2e-174; a hunter); the
/// quotient's partials are `1/(x·c)` and `−q/(x·c)`. At a non-finite argument or tangent, the
/// table's partial through [`tangent`] (a zero partial sends nothing of an infinite tangent).
/// At a subnormal `x·c` (below ~5.6e-309) `1/(x·c)` overflows: a reverse engine's derivatives
/// through it are infinite there (the tape's gradient of `(1e-320·x).ln()` too, through the
/// table's partial), while forward mode's quotient, and nested forward mode's second
/// derivative, stay finite (a reviewer). `None` for the other operations.
#[inline(always)]
fn log_quotient<T: Real>(op: Op1, x: Dual<T>) -> Option<Dual<T>> {
    use core::f64::consts::{LN_10, LN_2};
    if !matches!(op, Op1::Ln | Op1::Ln1p | Op1::Log2 | Op1::Log10) {
        return None;
    }
    if !(x.re.finite_everywhere() && x.eps.finite_everywhere()) {
        let r = rules::unary(op, x.re);
        return Some(Dual {
            re: r.value,
            eps: tangent(r.d, x.eps),
        });
    }
    let (re, eps) = match op {
        Op1::Ln => (x.re.ln(), quotient(x.eps, x.re)),
        Op1::Ln1p => (x.re.ln_1p(), quotient(x.eps, x.re + 1.0)),
        Op1::Log2 => (x.re.log2(), quotient(x.eps, x.re * LN_2)),
        // (as the table's partial: `x · ln 10` overflows beyond 7.8e307)
        _ if x.re.value().abs() < 1.0 => (x.re.log10(), quotient(x.eps, x.re * LN_10)),
        _ => (x.re.log10(), quotient(x.eps, x.re) / LN_10),
    };
    Some(Dual { re, eps })
}

/// [`tangent`] where `d` or `e` is not finite.
#[cold]
#[inline(never)]
fn tangent_through_infinity<T: Real>(d: T, e: T) -> T {
    if d.exact_zero() || e.exact_zero() {
        T::zero()
    } else {
        d * e
    }
}

/// Unary primitives whose partial is infinite only where their value overflows or their
/// argument is infinite (`eˣ`, `2ˣ`, `eˣ − 1`, `sinh`, `cosh`, `xⁿ` beyond n = 143): a zero
/// tangent gives 0 by a select on the tangent (no branch in a loop of `exp`s).
#[inline(always)]
fn overflows(op: Op1) -> bool {
    use Op1::*;
    matches!(op, Exp | Exp2 | ExpM1 | Sinh | Cosh | Powi(_))
}

/// A non-finite (or zero) partial `d` times a [`DualVec`]'s lanes, [`tangent`] per lane; out of
/// line, so that the common path stays small enough to inline.
#[cold]
#[inline(never)]
fn lanes_through_infinity<const N: usize>(d: f64, eps: &[f64; N]) -> [f64; N] {
    eps.map(|e| if e == 0.0 || d == 0.0 { 0.0 } else { d * e })
}

/// Unary primitives whose partial is finite at every argument, ±∞ included (so a zero tangent
/// gives 0 without a test). Not `sqrt`, `cbrt`, `asin`, `acos`, `acosh` at their edges, nor
/// those that are infinite at a point (`ln`, `recip`, `atanh`, `lgamma`, …), nor those whose
/// partial is infinite where their value overflows or their argument is infinite (`exp`,
/// `sinh`, `cosh`; `xⁿ` is kept, below): an overflow that a later operation makes finite again
/// (`1 / (1 + e⁸⁰⁰)` is 0) had `∞ · 0 = NaN` for every direction's tangent, the directions that
/// do not move `x` included. `op` is a constant where `lift1` is inlined.
#[inline(always)]
fn smooth(op: Op1) -> bool {
    use Op1::*;
    match op {
        Neg | Sin | Cos | Tanh | Atan | Asinh | Abs | Erf => true,
        // n·xⁿ⁻¹ is finite wherever xⁿ is for 0 ≤ n ≤ 143 (overflowing it needs nⁿ > f64::MAX;
        // beyond, 2¹⁰²³ has the infinite partial 1023·2¹⁰²²); it overflows where xⁿ does only
        // at |x| ≥ ~1e154 (`x.powi(3)` at 1e200), which is left to the fast path: `x.powi(2)`
        // is the common square, and a test there cost forward mode's BA Jacobian 15 %.
        Powi(n) => (0..=143).contains(&n),
        _ => false,
    }
}

/// `+ − × %`: partials that are operand values (or 1, −q), finite wherever the value is, so
/// their tangents need no test (a test per operation kept LLVM from pairing a `Dual`'s two
/// lanes: forward mode ran 2–3× slower; a finiteness test on the `f64` factor of `x * c` cost
/// logistic regression 50 %). So an infinite factor (`x * f64::INFINITY`, or an operand that
/// overflowed) times a direction that does not move the other operand is `∞ · 0 = NaN`, where
/// the tape gives 0. `op` is a constant where `lift2` is inlined, so the
/// choice costs nothing. `÷` has its own form, [`div_tangent`]: its partials 1/y and −x/y²
/// overflow at a subnormal `y` where `x/y` does not.
#[inline(always)]
fn plain(op: Op2) -> bool {
    matches!(op, Op2::Add | Op2::Sub | Op2::Mul | Op2::Rem)
}

/// The tangent of `v = x / y` from the operands' tangents, `(ẋ − v·ẏ) / y`: the quotient
/// rule without forming `1/y` or `x/y²`, which overflow at a subnormal `y` (`0 / 5e-324` has
/// the derivative 0 in `y`, where `∞ · 0` made it NaN) while `x/y` and its derivative are
/// finite or overflow only where the true derivative does.
/// Where the quotient is infinite (`1 / 0`, `x / 1e-310`) a divisor's zero tangent moves
/// nothing: `v · ẏ` is then 0, not NaN; and a direction that moves neither operand of `x / 0`
/// has the tangent 0, not `0 / 0`.
#[inline(always)]
fn div_tangent(v: f64, y: f64, ex: f64, ey: f64) -> f64 {
    quotient(ex - tangent(v, ey), y)
}

/// A quotient rule's `num / y`, 0 where both are 0 (see [`div_tangent`]).
#[inline(always)]
fn quotient<T: Real>(num: T, y: T) -> T {
    if y.value() == 0.0 && num.exact_zero() {
        T::zero()
    } else {
        num / y
    }
}

crate::impl_real!([T: Real] Dual<T>);

/// `re + epsε`, with the format's precision applied to both parts:
///
/// ```
/// use adjoint_core::forward::Dual64;
/// let x = Dual64::variable(1.0 / 3.0);
/// assert_eq!(format!("{:.3}", x * 3.0), "1.000 + 3.000ε");
/// assert_eq!(format!("{}", Dual64::variable(0.5)), "0.5 + 1ε");
/// ```
impl<T: Real> fmt::Display for Dual<T> {
    /// `re + epsε`; a nested dual's parts in parentheses (`(1 + 1ε) + (1 + 0ε)ε`: without them
    /// it read `1 + 1ε + 1 + 0εε`, which says nothing of which part is which).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let part = |v: &T| {
            let s = match f.precision() {
                Some(p) => format!("{v:.p$}"),
                None => format!("{v}"),
            };
            if s.contains(' ') {
                format!("({s})")
            } else {
                s
            }
        };
        write!(f, "{} + {}ε", part(&self.re), part(&self.eps))
    }
}

/// A value with `N` tangents: forward mode along `N` directions at once (vector forward mode).
///
/// One evaluation on `DualVec<N>` gives `N` columns of a Jacobian, with the shared rule table
/// evaluated once per primitive; for small `N` the tangent arithmetic vectorises. See
/// [`jacobian`]. Each tangent is the table's partial times the operand's tangent, as on the tape:
/// where the partial alone underflows (`recip`'s `−1/x²` beyond |x| ≈ 1.3e154) the lane is 0
/// even if the chain's product is not; [`Dual`] takes `recip` as the quotient `1.0 / x` (and
/// the logarithms as `ẋ / x`, …), and `a / b` is a quotient in both.
///
/// ```
/// use adjoint_core::forward::DualVec;
/// let x = DualVec::<2>::variable(3.0, 0);
/// let y = DualVec::<2>::variable(2.0, 1);
/// let z = (x * y).sin();
/// assert_eq!(z.eps, [2.0 * 6f64.cos(), 3.0 * 6f64.cos()]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DualVec<const N: usize> {
    /// The value.
    pub re: f64,
    /// The tangents.
    pub eps: [f64; N],
}

impl<const N: usize> DualVec<N> {
    /// The value as `f64`, as [`Dual::value`] and the tape's `Var::value`.
    ///
    /// ```
    /// use adjoint_core::forward::DualVec;
    /// assert_eq!(DualVec::<2>::variable(1.5, 0).value(), 1.5);
    /// ```
    #[inline]
    pub fn value(&self) -> f64 {
        self.re
    }

    /// A constant (all tangents 0).
    #[inline]
    pub fn constant(re: f64) -> Self {
        DualVec { re, eps: [0.0; N] }
    }

    /// The `i`-th independent variable: tangent `i` is 1, the others 0.
    ///
    /// # Panics
    /// If `i >= N`.
    #[inline]
    pub fn variable(re: f64, i: usize) -> Self {
        let mut eps = [0.0; N];
        eps[i] = 1.0;
        DualVec { re, eps }
    }
}

impl<const N: usize> Lift for DualVec<N> {
    type Inner = f64;

    #[inline(always)]
    fn primal(&self) -> f64 {
        self.re
    }
    #[inline(always)]
    fn constant(v: f64) -> Self {
        DualVec::constant(v)
    }
    #[inline(always)]
    fn lift1(self, op: Op1) -> Self {
        let r = rules::unary(op, self.re);
        DualVec {
            re: r.value,
            // (one test per operation, not per lane: the lanes' loop stays vectorisable)
            // (`recip` takes the table's `−v²` here, unlike `Dual`'s quotient `1.0 / x`: a
            // special case, inlined or not, cost the BA Jacobian 5–47 %; `DualVec` is first
            // order, and `v²` underflows only beyond |x| ≈ 1.3e154, as the tape's stored
            // partial does.)
            // (a zero partial of any operation but the smooth ones and `exp` & co sends nothing
            // of an infinite or NaN tangent, as in `Dual`: `eˣ.recip()` at 800, and
            // `eˣ.polygamma(1)` or `eˣ.ln()`'s … at 800 were NaN, a hunter; `op` is a constant
            // where this is inlined, so the smooth operations test nothing)
            eps: if smooth(op)
                || (r.d.is_finite()
                    && (r.d != 0.0 || (overflows(op) && !matches!(op, Op1::Powi(..=-1)))))
            {
                self.eps.map(|e| r.d * e)
            } else {
                lanes_through_infinity(r.d, &self.eps)
            },
        }
    }
    #[inline(always)]
    fn lift2(self, other: Self, op: Op2) -> Self {
        let r = rules::binary(op, self.re, other.re);
        let mut eps = [0.0; N];
        if op == Op2::Div {
            for (i, e) in eps.iter_mut().enumerate() {
                *e = div_tangent(r.value, other.re, self.eps[i], other.eps[i]);
            }
            return DualVec { re: r.value, eps };
        }
        for (i, e) in eps.iter_mut().enumerate() {
            *e = r.dx * self.eps[i] + r.dy * other.eps[i];
        }
        // (a zero partial sends nothing of a NaN or infinite tangent either: `max(NaN, y)` returns
        // `y`, and the NaN operand's lanes must not reach the result, as in `Dual` and on the tape)
        if !plain(op) && (!(r.dx.is_finite() && r.dy.is_finite()) || eps.iter().any(|e| e.is_nan()))
        {
            let (a, b) = (
                lanes_through_infinity(r.dx, &self.eps),
                lanes_through_infinity(r.dy, &other.eps),
            );
            for (i, e) in eps.iter_mut().enumerate() {
                *e = a[i] + b[i];
            }
        }
        DualVec { re: r.value, eps }
    }
    #[inline(always)]
    fn lift2_const_right(self, c: f64, op: Op2) -> Self {
        let r = rules::binary(op, self.re, c);
        DualVec {
            re: r.value,
            eps: if op == Op2::Div {
                self.eps.map(|e| quotient(e, c))
            } else if plain(op)
                || (r.dx.is_finite() && (r.dx != 0.0 || self.eps.iter().all(|e| e.is_finite())))
            {
                self.eps.map(|e| r.dx * e)
            } else {
                lanes_through_infinity(r.dx, &self.eps)
            },
        }
    }
    #[inline(always)]
    fn lift2_const_left(c: f64, x: Self, op: Op2) -> Self {
        let r = rules::binary(op, c, x.re);
        DualVec {
            re: r.value,
            eps: if op == Op2::Div {
                x.eps.map(|e| div_tangent(r.value, x.re, 0.0, e))
            } else if plain(op)
                || (r.dy.is_finite() && (r.dy != 0.0 || x.eps.iter().all(|e| e.is_finite())))
            {
                x.eps.map(|e| r.dy * e)
            } else {
                lanes_through_infinity(r.dy, &x.eps)
            },
        }
    }
    #[inline(always)]
    fn lift_exact_zero(&self) -> bool {
        self.re == 0.0 && self.eps.iter().all(|&e| e == 0.0)
    }
    #[inline(always)]
    fn lift_scale_cotangent(self, d: Self) -> Option<Self> {
        // as `Dual`'s, lane by lane
        let guard = |a: f64, b: f64| if a == 0.0 { a } else { a * b };
        let mut eps = [0.0; N];
        for (k, e) in eps.iter_mut().enumerate() {
            *e = guard(self.re, d.eps[k]) + guard(self.eps[k], d.re);
        }
        Some(DualVec {
            re: guard(self.re, d.re),
            eps,
        })
    }
    #[inline(always)]
    fn lift_finite_everywhere(&self) -> bool {
        self.re.is_finite() && self.eps.iter().all(|e| e.is_finite())
    }
}

crate::impl_real!([const N: usize] DualVec<N>);

/// `re + [eps…]ε`, with the format's precision applied to every part:
///
/// ```
/// use adjoint_core::forward::DualVec;
/// let x = DualVec::<2>::variable(1.0 / 3.0, 1);
/// assert_eq!(format!("{:.2}", x), "0.33 + [0.00, 1.00]ε");
/// ```
impl<const N: usize> fmt::Display for DualVec<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match f.precision() {
            Some(p) => write!(f, "{:.p$} + {:.p$?}ε", self.re, self.eps),
            None => write!(f, "{} + {:?}ε", self.re, self.eps),
        }
    }
}

/// The full Jacobian (rows = outputs) of a function of `N` inputs, in one evaluation on
/// [`DualVec<N>`].
///
/// ```
/// use adjoint_core::forward::jacobian;
/// let j = jacobian(|x| vec![x[0] * x[1], x[0].exp()], &[2.0, 3.0]);
/// assert_eq!(j, vec![[3.0, 2.0], [2f64.exp(), 0.0]]);
/// ```
pub fn jacobian<const N: usize, F>(f: F, x: &[f64; N]) -> Vec<[f64; N]>
where
    F: FnOnce(&[DualVec<N>]) -> Vec<DualVec<N>>,
{
    let xs: Vec<DualVec<N>> = (0..N).map(|i| DualVec::variable(x[i], i)).collect();
    f(&xs).into_iter().map(|y| y.eps).collect()
}

/// The derivative of a scalar function at `x`.
///
/// ```
/// use adjoint_core::forward::derivative;
/// let d = derivative(|x| x.sin() * x, 2.0);
/// assert!((d - (2f64.cos() * 2.0 + 2f64.sin())).abs() < 1e-15);
/// ```
pub fn derivative<F: FnOnce(Dual64) -> Dual64>(f: F, x: f64) -> f64 {
    f(Dual::variable(x)).eps
}

/// Jacobian-vector product: `(f(x), J(x)·v)` in one forward sweep.
///
/// ```
/// use adjoint_core::forward::jvp;
/// let (y, t) = jvp(|x| vec![x[0] * x[1], x[0].exp()], &[2.0, 3.0], &[1.0, 0.0]);
/// assert_eq!(y, vec![6.0, 2f64.exp()]);
/// assert_eq!(t, vec![3.0, 2f64.exp()]);
/// ```
///
/// # Panics
/// If `x` and `v` differ in length.
pub fn jvp<F>(f: F, x: &[f64], v: &[f64]) -> (Vec<f64>, Vec<f64>)
where
    F: FnOnce(&[Dual64]) -> Vec<Dual64>,
{
    assert_eq!(
        x.len(),
        v.len(),
        "jvp: point has {} coordinates but direction has {}",
        x.len(),
        v.len()
    );
    let xs: Vec<Dual64> = x.iter().zip(v).map(|(&a, &b)| Dual::new(a, b)).collect();
    f(&xs).into_iter().map(|d| (d.re, d.eps)).unzip()
}

/// The gradient of a scalar function by `n` forward sweeps.
///
/// ```
/// use adjoint_core::forward::gradient;
/// let g = gradient(|x| x[0] * x[1] * x[2], &[1.0, 2.0, 3.0]);
/// assert_eq!(g, vec![6.0, 3.0, 2.0]);
/// ```
pub fn gradient<F>(f: F, x: &[f64]) -> Vec<f64>
where
    F: Fn(&[Dual64]) -> Dual64,
{
    let mut xs: Vec<Dual64> = x.iter().map(|&a| Dual::constant(a)).collect();
    (0..x.len())
        .map(|i| {
            xs[i].eps = 1.0;
            let d = f(&xs).eps;
            xs[i].eps = 0.0;
            d
        })
        .collect()
}

/// The Hessian of a scalar function by `n(n+1)/2` sweeps of `Dual<Dual<f64>>`: for small `n`
/// or as a check; the cost grows as `n²` function evaluations (a log-sum-exp of 400 inputs took
/// 306 ms, against 8.4 ms for the tape's `hessian`, `n` reverse sweeps, and 7 µs for one
/// Hessian-vector product, on the 2-core development machine).
///
/// ```
/// use adjoint_core::forward::hessian;
/// let h = hessian(|x| x[0] * x[0] * x[1], &[3.0, 2.0]);
/// assert_eq!(h, vec![vec![4.0, 6.0], vec![6.0, 0.0]]);
/// ```
pub fn hessian<F>(f: F, x: &[f64]) -> Vec<Vec<f64>>
where
    F: Fn(&[Dual2]) -> Dual2,
{
    let n = x.len();
    let mut xs: Vec<Dual2> = x
        .iter()
        .map(|&a| Dual::constant(Dual::constant(a)))
        .collect();
    let mut h = vec![vec![0.0; n]; n];
    for i in 0..n {
        xs[i].eps.re = 1.0;
        for j in 0..=i {
            xs[j].re.eps = 1.0;
            let hij = f(&xs).eps.eps;
            xs[j].re.eps = 0.0;
            h[i][j] = hij;
            h[j][i] = hij;
        }
        xs[i].eps.re = 0.0;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_operands_and_comparisons() {
        let x = Dual::variable(3.0);
        let y = 2.0 - x;
        assert_eq!((y.re, y.eps), (-1.0, -1.0));
        let z = 1.0 / x;
        assert_eq!((z.re, z.eps), (1.0 / 3.0, -1.0 / 9.0));
        assert!(x > 2.0 && x < Dual::constant(4.0) && x == 3.0);
        let mut w = x;
        w *= 2.0;
        w += x;
        assert_eq!((w.re, w.eps), (9.0, 3.0));
        let s: Dual64 = [x, x, x].into_iter().sum();
        assert_eq!(s.eps, 3.0);
    }

    #[test]
    fn nested_dual_gives_second_derivative() {
        // f(x) = x³ → f'' = 6x
        let x: Dual2 = Dual::new(Dual::variable(2.0), Dual::constant(1.0));
        let y = x * x * x;
        assert_eq!(y.eps.eps, 12.0);
    }

    #[test]
    fn an_infinite_partial_does_not_reach_a_direction_that_does_not_move_its_operand() {
        // √x at 0 has an infinite partial; along y it moves nothing (a reviewer helper's hunt:
        // [inf, NaN], the NaN spreading through `+`). The rule table's dy of x^y at x = 0 is 0.
        assert_eq!(gradient(|v| v[0].sqrt() + v[1], &[0.0, 1.0])[1], 1.0);
        let g = gradient(|v| v[0].powf(v[1]) + v[1], &[0.0, 0.5]);
        assert_eq!((g[0], g[1]), (f64::INFINITY, 1.0));
        let j = jacobian(|v| vec![v[0].sqrt() * 2.0 + v[1], v[1] * 3.0], &[0.0, 1.0]);
        assert_eq!((j[0][1], j[1][0], j[1][1]), (1.0, 0.0, 3.0));
        // Second order: along y, ∂²/∂y² of √x + y² is 2 (Hessian row y), and the mixed
        // derivative 0; x's own row is infinite.
        let h = hessian(|v| v[0].sqrt() + v[1] * v[1], &[0.0, 1.0]);
        assert_eq!((h[1][1], h[0][1], h[1][0]), (2.0, 0.0, 0.0));
        // A nested tangent that is zero only in its value part still moves its operand.
        let x: Dual2 = Dual::new(Dual::variable(0.5), Dual::new(0.0, 1.0));
        let y = x.sin();
        assert_eq!(y.eps.eps, 0.5f64.cos());
    }

    #[test]
    fn division_by_a_subnormal_has_the_derivative_of_the_quotient() {
        // 1/y and x/y² overflow at a subnormal y where x/y and its derivative do not (a hunter
        // found NaN tangents with finite values): against the closed forms.
        let a = Dual::constant(0.0) / Dual::variable(5e-324); // ∂(0/y)/∂y = 0
        assert_eq!((a.re, a.eps), (0.0, 0.0));
        let b = Dual::variable(1e-310) / Dual::constant(1e-310); // 1/y = 1e310: +∞
        assert_eq!((b.re, b.eps), (1.0, f64::INFINITY));
        let c = Dual::constant(1e-310) / Dual::variable(1e-310); // −x/y² = −1e310: −∞
        assert_eq!((c.re, c.eps), (1.0, f64::NEG_INFINITY));
        let d = Dual::variable(3e-310) / 1e-300; // a constant divisor: 1/1e-300
        assert_eq!((d.re, d.eps), (3e-310 / 1e-300, 1.0 / 1e-300));
        let e = 1e-310 / Dual::variable(2e-310); // a constant dividend: −x/y² = −2.5e309 → −∞
        assert_eq!((e.re, e.eps), (0.5, f64::NEG_INFINITY));
        let v = DualVec::<2>::variable(0.0, 0) / DualVec::<2>::variable(5e-324, 1);
        assert_eq!((v.re, v.eps), (0.0, [f64::INFINITY, 0.0]));
        // At ordinary points the quotient rule, to rounding, in value, gradient and Hessian.
        let g = gradient(|v| v[0] / v[1], &[3.0, -7.0]);
        assert!((g[0] + 1.0 / 7.0).abs() < 1e-16 && (g[1] + 3.0 / 49.0).abs() < 1e-16);
        let h = hessian(|v| v[0] / v[1], &[3.0, -7.0]);
        let want = [[0.0, -1.0 / 49.0], [-1.0 / 49.0, -6.0 / 343.0]];
        for i in 0..2 {
            for j in 0..2 {
                assert!((h[i][j] - want[i][j]).abs() < 1e-16, "{h:?}");
            }
        }
    }

    #[test]
    fn values_are_those_of_f64() {
        // mul_add: f64's fused value where the unfused product overflows (it was NaN)
        let x = Dual::variable(1e300);
        let m = x.mul_add(x, Dual::constant(f64::NEG_INFINITY));
        assert_eq!(m.re, f64::mul_add(1e300, 1e300, f64::NEG_INFINITY));
        let m = x.mul_add(x, -(x * x));
        assert_eq!(m.re, f64::mul_add(1e300, 1e300, -(1e300 * 1e300)));
        // abs_sub (fdim) of a NaN is NaN (it was 0)
        assert!(Real::abs_sub(Dual::variable(f64::NAN), 1.0).re.is_nan());
        assert_eq!(Real::abs_sub(Dual::variable(3.0), 1.0).re, 2.0);
        assert_eq!(Real::abs_sub(Dual::variable(1.0), 3.0).re, 0.0);
    }

    #[test]
    fn piecewise_constant_functions_have_zero_derivative() {
        let x = Dual::variable(2.7);
        assert_eq!(x.floor().eps, 0.0);
        assert_eq!(x.round().eps, 0.0);
        assert_eq!(x.fract().eps, 1.0);
        assert_eq!((x % 1.0).eps, 1.0);
    }
}

#[cfg(test)]
mod dualvec_tests {
    use super::*;

    fn f<T: Real>(x: &[T]) -> Vec<T> {
        vec![
            (x[0] * x[1]).sin() + x[2].powi(3) / (x[0] + 2.0),
            x[1].atan2(x[2]).exp() * x[0].hypot(x[1]) - T::cst(1.0).max(x[2]),
        ]
    }

    #[test]
    fn dualvec_jacobian_equals_columns_of_dual() {
        let x = [0.7, -1.3, 0.4];
        let j = jacobian(|v| f(v), &x);
        for col in 0..3 {
            let mut e = [0.0; 3];
            e[col] = 1.0;
            let (_, t) = jvp(|v| f(v), &x, &e);
            for row in 0..2 {
                assert_eq!(j[row][col], t[row], "J[{row}][{col}]");
            }
        }
        let v = DualVec::<3>::variable(2.0, 1);
        assert_eq!(
            (v.exp().re, v.exp().eps),
            (2f64.exp(), [0.0, 2f64.exp(), 0.0])
        );
    }

    /// A zero partial meeting an infinite tangent (`eˣ` at 800 overflows, its tangent too):
    /// every lane of a `DualVec` is 0 as `Dual`'s tangent is (they were NaN for all but
    /// `recip` and negative powers; a hunter).
    #[test]
    fn dualvec_lanes_send_nothing_through_a_zero_partial() {
        fn g<T: Real>(x: T, k: usize) -> T {
            let e = x.exp(); // +∞ with an infinite tangent at 800
            match k {
                0 => e.ln(),
                1 => e.ln_1p(),
                2 => e.log2(),
                3 => e.log10(),
                4 => e.sqrt(),
                5 => e.cbrt(),
                6 => e.acosh(),
                7 => e.polygamma(1),
                8 => e.recip(),
                _ => e.powi(-2),
            }
        }
        for k in 0..10 {
            let d = g(Dual::variable(800.0), k);
            let v = g(DualVec::<2>::variable(800.0, 1), k);
            assert_eq!(d.eps, 0.0, "case {k}: Dual");
            assert_eq!(v.eps, [0.0, 0.0], "case {k}: DualVec");
            assert_eq!(d.re.to_bits(), v.re.to_bits(), "case {k}");
        }
    }

    #[test]
    fn nested_duals_display_their_parts() {
        let x: Dual2 = Dual::new(Dual::new(1.0, 1.0), Dual::new(1.0, 0.0));
        assert_eq!(format!("{x}"), "(1 + 1ε) + (1 + 0ε)ε");
        assert_eq!(format!("{x:.1}"), "(1.0 + 1.0ε) + (1.0 + 0.0ε)ε");
        assert_eq!(format!("{}", Dual::new(-2.5, 1.0)), "-2.5 + 1ε");
    }

    /// 128-bit conversions as `f64`'s (num-traits' default went through `to_i64`: `None` for
    /// 1e20; a hunter).
    #[test]
    fn conversions_to_128_bit_integers() {
        use num_traits::{NumCast, ToPrimitive};
        let x = Dual::variable(1e20);
        assert_eq!(x.to_i128(), 1e20f64.to_i128());
        assert_eq!(x.to_u128(), Some(100_000_000_000_000_000_000));
        assert_eq!(
            <i128 as NumCast>::from(Dual::variable(-3e30)),
            (-3e30f64).to_i128()
        );
        assert_eq!(Dual::variable(-1.0).to_u128(), None);
    }

    /// `Dual`'s logarithms take the tangent as a quotient `ẋ/(x·c)`: the same derivative as
    /// the table's partial times `ẋ` (to rounding), and the table's at the special points.
    #[test]
    fn logarithm_tangents_are_quotients() {
        use crate::rules::unary;
        for op in [Op1::Ln, Op1::Ln1p, Op1::Log2, Op1::Log10] {
            for x in [0.3, 2.5, 1e-5, 7e300, 1e-310, 0.0, -0.0, f64::INFINITY] {
                for e in [1.0, -3.5, 1e-300, 0.0] {
                    let got = Dual::new(x, e).lift1(op);
                    let r = unary(op, x);
                    let want = tangent(r.d, e);
                    assert_eq!(got.re.to_bits(), r.value.to_bits(), "{op:?}({x})");
                    assert!(
                        got.eps == want
                            || (got.eps - want).abs() <= 4.0 * f64::EPSILON * want.abs()
                            || (got.eps.is_nan() && want.is_nan()),
                        "{op:?}({x}) along {e}: {} vs {want}",
                        got.eps
                    );
                }
            }
        }
    }
}
