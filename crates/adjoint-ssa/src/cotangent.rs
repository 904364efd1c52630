//! Adjoint values of the generated pullbacks: one cotangent (`T` itself) or several carried
//! through one reverse sweep ([`Cotangents`], from `adjoint-core`).

use crate::Real;
pub use adjoint_core::Cotangents;
use std::ops::{AddAssign, Mul};

/// What a generated `pullback_vec` accumulates its adjoints in: `T` itself (one cotangent: a
/// vector-Jacobian product), or [`Cotangents<T, N>`] (`N` cotangents in one reverse sweep: `N`
/// rows of a Jacobian for the price of one forward sweep). The generated code only adds
/// adjoints and scales them by partial derivatives (`ā += ḡ · ∂`), so this is all it needs.
///
/// ```
/// use adjoint_ssa::{Cotangent, Cotangents};
///
/// let mut a = <Cotangents<f64, 2> as Cotangent<f64>>::neg_zero();
/// a += Cotangents([1.0, 2.0]) * 3.0;
/// assert_eq!(a, Cotangents([3.0, 6.0]));
/// assert_eq!(<f64 as Cotangent<f64>>::zero(), 0.0);
/// ```
///
/// Both rows of a 2 × 2 Jacobian in one forward and one reverse sweep:
///
/// ```
/// use adjoint_ssa::{differentiable, Cotangents, Workspace};
///
/// #[differentiable]
/// fn polar(r: f64, t: f64) -> (f64, f64) {
///     (r * t.cos(), r * t.sin())
/// }
///
/// # fn main() {
/// let (mut dr, mut dt) = (Cotangents([0.0; 2]), Cotangents([0.0; 2]));
/// let seed = (Cotangents::unit(0), Cotangents::unit(1));
/// let (x, y) = polar::pullback_vec(&mut Workspace::new(), 2.0, 0.5, &mut dr, &mut dt, seed);
/// assert_eq!((x, y), (2.0 * 0.5f64.cos(), 2.0 * 0.5f64.sin()));
/// assert_eq!(dr.0, [0.5f64.cos(), 0.5f64.sin()]); // ∂x/∂r, ∂y/∂r
/// assert_eq!(dt.0, [-2.0 * 0.5f64.sin(), 2.0 * 0.5f64.cos()]); // ∂x/∂t, ∂y/∂t
/// # }
/// ```
pub trait Cotangent<T>: Copy + AddAssign + Mul<T, Output = Self> {
    /// `+0.0` in every lane: what a gradient buffer is cleared to.
    fn zero() -> Self;
    /// `-0.0` in every lane: the exact identity of `+` (`-0.0 + v == v` for every `v`, also
    /// `v = -0.0`), which adjoints are reset to.
    fn neg_zero() -> Self;
}

impl<T: Real> Cotangent<T> for T {
    #[inline(always)]
    fn zero() -> Self {
        T::cst(0.0)
    }
    #[inline(always)]
    fn neg_zero() -> Self {
        T::cst(-0.0)
    }
}

impl<T: Real, const N: usize> Cotangent<T> for Cotangents<T, N> {
    #[inline(always)]
    fn zero() -> Self {
        Cotangents([T::cst(0.0); N])
    }
    #[inline(always)]
    fn neg_zero() -> Self {
        Cotangents([T::cst(-0.0); N])
    }
}
