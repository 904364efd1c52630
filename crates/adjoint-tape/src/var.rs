//! The active scalar.

use crate::record::{
    record1, record2, record_dot, record_matvec, record_nary, record_run, WithConst, CONST_ID,
};
use adjoint_core::lift::Lift;
use adjoint_core::rules::{self, Op1, Op2};
use adjoint_core::vector::fast;
use core::fmt;

/// The tape engine's active scalar: a value and its position on the tape.
///
/// `Var` implements [`adjoint_core::Real`], so any function generic over `Real` runs on it.
/// Arithmetic on `Var`s records one 24-byte entry (the operands' partials from the shared rule
/// table and their positions); arithmetic with `f64` constants, and on constants, records
/// nothing. A `Var` is only valid inside the recording that created it (see
/// [`grad`](crate::grad)); using it after that recording finished, or in another one, panics
/// with a message saying so.
///
/// ```
/// use adjoint_tape::{grad, Var};
/// let g = grad(|x: &[Var]| (x[0] * x[1]).sin() + 1.0, &[2.0, 3.0]);
/// assert!((g[0] - 3.0 * 6f64.cos()).abs() < 1e-15);
/// ```
#[derive(Clone, Copy)]
pub struct Var {
    pub(crate) v: f64,
    /// Where the value is on its tape, as an id no other value of this process has: ids come in
    /// ranges a job reserves (see [`reserve_ids`](crate::record::reserve_ids)), position `p` of
    /// a job whose range starts at `base` has id `base + p`, and no range is ever reserved
    /// twice. [`CONST_ID`] for constants. 16 bytes in all, passed in two registers.
    pub(crate) id: u64,
}

impl Var {
    /// A constant: it never appears on the tape and has no gradient.
    ///
    /// ```
    /// use adjoint_tape::Var;
    /// assert!(Var::constant(2.0).is_constant());
    /// ```
    #[inline]
    pub fn constant(v: f64) -> Var {
        Var { v, id: CONST_ID }
    }

    #[inline(always)]
    pub(crate) fn at(v: f64, id: u64) -> Var {
        Var { v, id }
    }

    /// The primal value.
    ///
    /// ```
    /// use adjoint_tape::Var;
    /// assert_eq!(Var::constant(2.5).value(), 2.5);
    /// ```
    #[inline]
    pub fn value(&self) -> f64 {
        self.v
    }

    /// Whether this is a constant (not on any tape).
    #[inline]
    pub fn is_constant(&self) -> bool {
        self.id == CONST_ID
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_constant() {
            write!(f, "Var({} const)", self.v)
        } else {
            write!(f, "Var({} @ id {})", self.v, self.id)
        }
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.v, f)
    }
}

impl Lift for Var {
    type Inner = f64;

    #[inline(always)]
    fn primal(&self) -> f64 {
        self.v
    }
    #[inline(always)]
    fn constant(v: f64) -> Self {
        Var::constant(v)
    }
    /// A constant zero is exactly zero, and so is a recorded zero whose derivative is exactly
    /// zero as recorded (`record::zero_derivative`: `|x|` at an
    /// active 0); a recorded value may be zero with a nonzero derivative (an input at 0), and
    /// is not. Forward-over-reverse (`hvp`, `hessian`) then takes an infinite partial times a
    /// constant zero tangent (`acos(−1)` of a constant) as 0, as forward mode does, not NaN;
    /// `is_zero()` is this, so nalgebra's and ndarray's `β.is_zero()` keeps `∂/∂β` at an active
    /// `β = 0`, while nalgebra's decompositions skip a step on a zero that carries no gradient,
    /// as `f64` does.
    #[inline(always)]
    fn lift_exact_zero(&self) -> bool {
        self.v == 0.0 && (self.is_constant() || crate::record::zero_derivative(self.id))
    }
    #[inline(always)]
    fn lift1(self, op: Op1) -> Self {
        let r = rules::unary(op, self.v);
        if self.is_constant() {
            return Var::constant(r.value);
        }
        record1(self, r.d, r.value, op)
    }
    #[inline(always)]
    fn lift2(self, other: Self, op: Op2) -> Self {
        let r = rules::binary(op, self.v, other.v);
        match (self.is_constant(), other.is_constant()) {
            (false, false) => record2(self, r.dx, other, r.dy, r.value, op),
            (false, true) => with_constant(self, r.dx, r.value, op, other.v, false),
            (true, false) => with_constant(other, r.dy, r.value, op, self.v, true),
            (true, true) => Var::constant(r.value),
        }
    }
    #[inline(always)]
    fn lift2_const_right(self, c: f64, op: Op2) -> Self {
        let r = rules::binary(op, self.v, c);
        if self.is_constant() {
            return Var::constant(r.value);
        }
        with_constant(self, r.dx, r.value, op, c, false)
    }
    #[inline(always)]
    fn lift2_const_left(c: f64, x: Self, op: Op2) -> Self {
        let r = rules::binary(op, c, x.v);
        if x.is_constant() {
            return Var::constant(r.value);
        }
        with_constant(x, r.dy, r.value, op, c, true)
    }

    // Slice primitives: one tape entry per result, operands in runs (see `record_nary`).

    fn lift_dot(a: &[Self], b: &[Self]) -> Self {
        dot_named(a, b, "dot")
    }

    fn lift_sum(a: &[Self]) -> Self {
        let value = fast::sum_by(a, |x| x.v);
        if let Some(v) = record_run(value, a, |p| p.resize(p.len() + a.len(), 1.0)) {
            return v;
        }
        record_nary(value, || a.iter().map(|x| (*x, 1.0)), "sum")
    }

    fn lift_matvec(m: &[Self], x: &[Self], out: &mut [Self]) {
        let cols = x.len();
        if cols == 0 {
            out.iter_mut().for_each(|o| *o = Var::constant(0.0));
            return;
        }
        if record_matvec(m, x, out) {
            return;
        }
        for (o, row) in out.iter_mut().zip(m.chunks_exact(cols)) {
            // (named `matvec` in checked mode's messages: the user called no `dot`)
            *o = dot_named(row, x, "matvec (a row)");
        }
    }

    fn lift_logsumexp(a: &[Self]) -> Self {
        let m = a.iter().map(|x| x.v).fold(f64::NEG_INFINITY, f64::max);
        if !m.is_finite() {
            // Empty, all −∞, or a non-finite input: the scalar definition's limits (+∞
            // entries: the value +∞ and softmax's limit as the partials).
            return adjoint_core::vector::scalar::logsumexp(a);
        }
        let s = fast::sum_by(a, |x| (x.v - m).exp());
        let fill = |p: &mut Vec<f64>| p.extend(a.iter().map(|x| (x.v - m).exp() / s));
        if let Some(v) = record_run(s.ln() + m, a, fill) {
            return v;
        }
        // The value as `f64`'s kernel computes it; ∂/∂aᵢ = softmax(a)ᵢ = exp(aᵢ − m) / s.
        record_nary(
            s.ln() + m,
            || a.iter().map(|x| (*x, (x.v - m).exp() / s)),
            "logsumexp",
        )
    }

    // `axpy` keeps the default: it has one result per element, and two fast-path scalar entries
    // per element cost less than one many-operand entry.
}

adjoint_core::impl_real!([] Var);

/// `a · b` as one record (`name` is what checked mode's messages call it).
fn dot_named(a: &[Var], b: &[Var], name: &'static str) -> Var {
    if let Some(v) = record_dot(a, b) {
        return v;
    }
    let value = fast::dot_by(a, b, |x| x.v, |y| y.v);
    let ops = || {
        let first = a.iter().zip(b).map(|(x, y)| (*x, y.v));
        first.chain(a.iter().zip(b).map(|(x, y)| (*y, x.v)))
    };
    record_nary(value, ops, name)
}

/// The result of a binary operation with one constant operand, whose partial in the other is
/// `pa`: a constant when `pa` is exactly zero and the value finite (`x · 0`), else recorded. An
/// entry with a zero partial sends every adjoint nothing (a zero partial times any adjoint, ∞
/// included, is 0 in the sweep), so the constant is the same to the gradient, and it is an
/// exact zero (`lift_exact_zero`) where its value is 0. That keeps forward over reverse
/// (`hessian`: `Dual<Var>`, whose tangents start as constants) from multiplying an infinite
/// partial by a tangent that is a recorded zero: `x·0` along a direction that does not move
/// `x`. `√(x₀²)·x₁ + x₁²` at (0, 1) had a NaN in ∂²/∂x₁², which is 2. (Only here, not in every
/// recording: the test there cost GMM's tape gradient 3–4 %.) `a` is checked as recorded
/// first, so a stale `Var` still panics.
#[inline(always)]
fn with_constant(a: Var, pa: f64, value: f64, op: Op2, c: f64, left: bool) -> Var {
    let v = record1(a, pa, value, WithConst { op, c, left });
    if pa == 0.0 && value.is_finite() {
        return Var::constant(value);
    }
    v
}
