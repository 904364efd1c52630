//! `GVar`: a value with its gradient (seed 000 Section III, seed 001 Section 3.1). Running a
//! program's inverse on `GVar`s computes the value's inverse and the adjoint together.

use crate::error::Ancilla;
use crate::num::{Arith, RevReal, Scale};
use adjoint_core::rules::{self, Op1, Op2};
use adjoint_core::{Cotangent, Cotangents, Real};
use core::cmp::Ordering;

/// A value `x` and the gradient `g` of the loss with respect to it.
///
/// Every instruction on `GVar`s updates both: in the inverse direction (`y -= f(x)`),
/// `x.g += y.g · f′(x)`; in the forward direction the exact opposite, so the gradient program is
/// itself reversible. Equality and ordering look at the value only: a gradient is not part of a
/// value's identity, and an ancilla's gradient may be dropped (seed 000 Section III.C).
///
/// ```
/// use adjoint_rev::{Arith, GVar, Op2};
/// // y -= a * b, run on gradient-carrying values with ∂loss/∂y = 1:
/// let (mut y, mut a, mut b) = (GVar::new(6.0, 1.0), GVar::new(2.0, 0.0), GVar::new(3.0, 0.0));
/// Arith::acc_arith(&mut y, Op2::Mul, &mut a, &mut b, false);
/// assert_eq!((y.x, a.g, b.g), (0.0, 3.0, 2.0));
/// ```
///
/// The gradient may have lanes: `GVar<f64, Cotangents<f64, N>>` carries `N` gradients through
/// one inverse run (`N` rows of a Jacobian; lane `k` bit for bit what a run seeded with lane
/// `k` alone gives):
///
/// ```
/// use adjoint_rev::{Arith, Cotangents, GVar, Op2};
/// // y -= a * b with ∂l₀/∂y = 1 and ∂l₁/∂y = 2 in one instruction
/// let mut y = GVar::new(6.0, Cotangents([1.0, 2.0]));
/// let (mut a, mut b) = (GVar::new(2.0, Cotangents([0.0; 2])), GVar::new(3.0, Cotangents([0.0; 2])));
/// Arith::acc_arith(&mut y, Op2::Mul, &mut a, &mut b, false);
/// assert_eq!((a.g.0, b.g.0), ([3.0, 6.0], [2.0, 4.0]));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct GVar<T, G = T> {
    /// The value.
    pub x: T,
    /// The gradient (`T`, or several at once: [`Cotangents`]).
    pub g: G,
}

impl<T, G> GVar<T, G> {
    /// A value with a gradient.
    pub fn new(x: T, g: G) -> Self {
        GVar { x, g }
    }
}

/// What a [`GVar`]'s gradient can be: a [`Cotangent`] of its value type (`T` itself, or
/// [`Cotangents<T, N>`] for several gradients per run) whose zero can be recognised: every
/// instruction's gradient update is linear in it.
pub trait Gradient<T>: Cotangent<T> + ExactZero {
    /// `self · d` for an instruction's partial `d`, where a lane that is exactly zero sends
    /// nothing (it stays zero): a pass with that lane's cotangent alone skips the instruction's
    /// partials altogether (`exact_zero`), so `0 · ∞` must not be NaN in a lane either (the
    /// rows `jacobian_lanes` gives are then those of `jacobian`: `(√x, 2x)` at 0 had a NaN in
    /// the second row).
    fn scaled(self, d: T) -> Self;
}

/// One gradient: an instruction with a zero gradient skips its partials before this.
impl<T: Real + ExactZero> Gradient<T> for T {
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn scaled(self, d: T) -> Self {
        self * d
    }
}

impl<T: Real + ExactZero, const N: usize> Gradient<T> for Cotangents<T, N> {
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn scaled(self, d: T) -> Self {
        Cotangent::scale_by(self, d)
    }
}

impl<T: ExactZero, const N: usize> ExactZero for Cotangents<T, N> {
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn exact_zero(&self) -> bool {
        self.0.iter().all(ExactZero::exact_zero)
    }
}

impl<T: PartialEq, G> PartialEq for GVar<T, G> {
    fn eq(&self, other: &Self) -> bool {
        self.x == other.x
    }
}

impl<T: PartialOrd, G> PartialOrd for GVar<T, G> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.x.partial_cmp(&other.x)
    }
}

impl<T: PartialEq<f64>, G> PartialEq<f64> for GVar<T, G> {
    fn eq(&self, other: &f64) -> bool {
        self.x == *other
    }
}

impl<T: PartialOrd<f64>, G> PartialOrd<f64> for GVar<T, G> {
    fn partial_cmp(&self, other: &f64) -> Option<Ordering> {
        self.x.partial_cmp(other)
    }
}

/// `0.0 < g` as well as `g > 0.0`.
impl<T: PartialEq<f64>, G> PartialEq<GVar<T, G>> for f64 {
    fn eq(&self, other: &GVar<T, G>) -> bool {
        other.x == *self
    }
}

/// `0.0 < g` as well as `g > 0.0`.
impl<T: PartialOrd<f64>, G> PartialOrd<GVar<T, G>> for f64 {
    fn partial_cmp(&self, other: &GVar<T, G>) -> Option<Ordering> {
        other.x.partial_cmp(self).map(Ordering::reverse)
    }
}

/// Whether a gradient is exactly zero — every component, tangents included — so an instruction
/// can skip computing its partials: in the compute half of a routine, the ancillas' gradients
/// are still zero, and most of the adjoint work there would add `0 · ∂`.
pub trait ExactZero {
    /// `true` only if the value is exactly zero.
    fn exact_zero(&self) -> bool;
}

impl ExactZero for f64 {
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn exact_zero(&self) -> bool {
        *self == 0.0
    }
}

impl<T: ExactZero> ExactZero for adjoint_core::forward::Dual<T> {
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn exact_zero(&self) -> bool {
        self.re.exact_zero() && self.eps.exact_zero()
    }
}

impl<T: Real + Ancilla + ExactZero, G: Gradient<T>> Arith for GVar<T, G> {
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn non_finite(&self) -> Option<String> {
        let v = self.x.value();
        (!v.is_finite()).then(|| v.to_string())
    }
    fn from_f64(v: f64) -> Self {
        GVar {
            x: T::cst(v),
            g: <G as Cotangent<T>>::zero(),
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn magnitude(&self) -> f64 {
        self.x.value().abs()
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc_id(y: &mut Self, x: &mut Self, plus: bool) {
        if plus {
            y.x += x.x;
            x.g -= y.g;
        } else {
            y.x -= x.x;
            x.g += y.g;
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc_arith(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool) {
        Self::acc2_rule(y, op, a, b, plus);
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc_arith_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool) {
        Self::acc2_rule_same(y, op, a, plus);
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn neg(x: &mut Self) {
        x.x = -x.x;
        x.g = -x.g;
    }
}

impl<T: Real + Ancilla + ExactZero, G: Gradient<T>> GVar<T, G> {
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc2_rule(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool) {
        if y.g.exact_zero() {
            let v = rules::binary(op, a.x, b.x).value;
            if plus {
                y.x += v;
            } else {
                y.x -= v;
            }
            return;
        }
        let r = rules::binary(op, a.x, b.x);
        if plus {
            y.x += r.value;
            a.g -= y.g.scaled(r.dx);
            b.g -= y.g.scaled(r.dy);
        } else {
            y.x -= r.value;
            a.g += y.g.scaled(r.dx);
            b.g += y.g.scaled(r.dy);
        }
    }

    /// `y ±= op(a, a)`: one place in both operand slots (`y += x * x`). Both partials are
    /// computed first, then each contribution goes into the shared gradient in turn — the slot
    /// is read again after the first, so it receives `ȳ·(∂₁ + ∂₂)` (`2x·ȳ` for `x * x`), not
    /// one of them. The inverse direction undoes them in the opposite order.
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc2_rule_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool) {
        if y.g.exact_zero() {
            let v = rules::binary(op, a.x, a.x).value;
            if plus {
                y.x += v;
            } else {
                y.x -= v;
            }
            return;
        }
        let r = rules::binary(op, a.x, a.x);
        let (first, second) = (y.g.scaled(r.dx), y.g.scaled(r.dy));
        if plus {
            y.x += r.value;
            a.g -= first;
            a.g -= second;
        } else {
            y.x -= r.value;
            a.g += second;
            a.g += first;
        }
    }
}

impl<T: Real + Ancilla + ExactZero, G: Gradient<T>> RevReal for GVar<T, G> {
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc1(y: &mut Self, op: Op1, x: &mut Self, plus: bool) {
        if y.g.exact_zero() {
            let v = rules::unary(op, x.x).value;
            if plus {
                y.x += v;
            } else {
                y.x -= v;
            }
            return;
        }
        let r = rules::unary(op, x.x);
        if plus {
            y.x += r.value;
            x.g -= y.g.scaled(r.d);
        } else {
            y.x -= r.value;
            x.g += y.g.scaled(r.d);
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc2(y: &mut Self, op: Op2, a: &mut Self, b: &mut Self, plus: bool) {
        Self::acc2_rule(y, op, a, b, plus);
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn acc2_same(y: &mut Self, op: Op2, a: &mut Self, plus: bool) {
        Self::acc2_rule_same(y, op, a, plus);
    }
    /// Seed 000 Eq. 11: the adjoint of `ROT` rotates the gradients with the values and moves
    /// `θ̄` by the cross product `a·ḡ_b − b·ḡ_a` (invariant under the rotation itself).
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn rot(a: &mut Self, b: &mut Self, theta: &mut Self, inverse: bool) {
        let (s, c) = (Real::sin(theta.x), Real::cos(theta.x));
        let s = if inverse { -s } else { s };
        let cross = b.g * a.x - a.g * b.x;
        if inverse {
            theta.g += cross;
        } else {
            theta.g -= cross;
        }
        let (x, y) = (a.x, b.x);
        a.x = x * c - y * s;
        b.x = y * c + x * s;
        let (gx, gy) = (a.g, b.g);
        a.g = gx * c - gy * s;
        b.g = gy * c + gx * s;
    }
    fn value(&self) -> f64 {
        self.x.value()
    }
}

/// `y *= x` on gradients: the forward multiplies the value, divides the gradient and moves
/// `x̄ -= ȳ·y_old`; `/=` is its exact mirror.
impl<T: Real + Ancilla + ExactZero, G: Gradient<T>> Scale for GVar<T, G> {
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn scale(y: &mut Self, x: &mut Self, mul: bool) {
        if mul {
            let old = y.x;
            y.x = old * x.x;
            let yg = y.g;
            y.g /= x.x;
            if T::TANGENTS {
                // `ȳ · (y_old / x)`, not `(ȳ / x) · y_old`, where the number type is
                // differentiated (Hessians at `Dual`): the latter's derivative went through
                // `−ȳ/x²` alone, which under- or overflows at divisors beyond 1e±150 (the
                // Hessian of `y /= x` at (1e300, 1e200) was 1e-300 for 2e-300; a hunter)
                x.g -= yg * (old / x.x);
            } else {
                x.g -= y.g * old;
            }
        } else {
            y.x /= x.x;
            x.g += y.g * y.x;
            y.g *= x.x;
        }
    }
    #[cfg_attr(not(debug_assertions), inline(always))]
    #[cfg_attr(debug_assertions, inline)]
    fn try_scale(y: &mut Self, x: &mut Self, mul: bool) -> Result<(), String> {
        crate::num::try_scale_float(y, x, mul, |v| v.x.value())
    }
}
