//! Forward mode: dual numbers.
//!
//! [`Dual<T>`] carries a value and one tangent. It implements [`Real`], so any generic function
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
        let r = rules::unary(op, self.re);
        Dual {
            re: r.value,
            eps: r.d * self.eps,
        }
    }
    #[inline(always)]
    fn lift2(self, other: Self, op: Op2) -> Self {
        let r = rules::binary(op, self.re, other.re);
        Dual {
            re: r.value,
            eps: r.dx * self.eps + r.dy * other.eps,
        }
    }
    #[inline(always)]
    fn lift2_const_right(self, c: T, op: Op2) -> Self {
        let r = rules::binary(op, self.re, c);
        Dual {
            re: r.value,
            eps: r.dx * self.eps,
        }
    }
    #[inline(always)]
    fn lift2_const_left(c: T, x: Self, op: Op2) -> Self {
        let r = rules::binary(op, c, x.re);
        Dual {
            re: r.value,
            eps: r.dy * x.eps,
        }
    }
}

crate::impl_real!([T: Real] Dual<T>);

impl<T: Real> fmt::Display for Dual<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} + {}ε", self.re, self.eps)
    }
}

/// The derivative of a scalar function at `x`.
///
/// ```
/// use adjoint_core::forward::derivative;
/// use adjoint_core::prelude::*;
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
/// use adjoint_core::prelude::*;
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

/// The Hessian of a scalar function by `n(n+1)/2` sweeps of `Dual<Dual<f64>>`.
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
    fn piecewise_constant_functions_have_zero_derivative() {
        use num_traits::Float;
        let x = Dual::variable(2.7);
        assert_eq!(x.floor().eps, 0.0);
        assert_eq!(x.round().eps, 0.0);
        assert_eq!(x.fract().eps, 1.0);
        assert_eq!((x % 1.0).eps, 1.0);
    }
}
