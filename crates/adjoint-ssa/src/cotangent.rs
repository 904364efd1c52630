//! Adjoint values of the generated pullbacks: one cotangent (`T` itself) or several carried
//! through one reverse sweep ([`Cotangents`]).

use crate::Real;
use std::ops::{Add, AddAssign, Index, Mul};

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

/// `N` cotangents of one number type, propagated together through one reverse sweep
/// (lane-wise: lane `k` computes exactly what a pullback with cotangent `k` alone computes,
/// bit for bit). Seed the result's cotangent with unit vectors to get `N` Jacobian rows.
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
/// // both rows of the 2×2 Jacobian in one forward and one reverse sweep
/// let (mut dr, mut dt) = (Cotangents([0.0; 2]), Cotangents([0.0; 2]));
/// let seed = (Cotangents([1.0, 0.0]), Cotangents([0.0, 1.0]));
/// let (x, y) = polar::pullback_vec(&mut Workspace::new(), 2.0, 0.5, &mut dr, &mut dt, seed);
/// assert_eq!((x, y), (2.0 * 0.5f64.cos(), 2.0 * 0.5f64.sin()));
/// assert_eq!(dr.0, [0.5f64.cos(), 0.5f64.sin()]); // ∂x/∂r, ∂y/∂r
/// assert_eq!(dt.0, [-2.0 * 0.5f64.sin(), 2.0 * 0.5f64.cos()]); // ∂x/∂t, ∂y/∂t
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cotangents<T, const N: usize>(pub [T; N]);

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

impl<T: Real, const N: usize> Default for Cotangents<T, N> {
    /// Every lane `+0.0`.
    fn default() -> Self {
        <Self as Cotangent<T>>::zero()
    }
}

impl<T: Real, const N: usize> Mul<T> for Cotangents<T, N> {
    type Output = Self;
    #[inline(always)]
    fn mul(self, d: T) -> Self {
        Cotangents(self.0.map(|g| g * d))
    }
}

impl<T: Real, const N: usize> Add for Cotangents<T, N> {
    type Output = Self;
    #[inline(always)]
    fn add(mut self, o: Self) -> Self {
        self += o;
        self
    }
}

impl<T: Real, const N: usize> AddAssign for Cotangents<T, N> {
    #[inline(always)]
    fn add_assign(&mut self, o: Self) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a += b;
        }
    }
}

impl<T, const N: usize> Index<usize> for Cotangents<T, N> {
    type Output = T;
    fn index(&self, k: usize) -> &T {
        &self.0[k]
    }
}

impl<T: Real, const N: usize> Cotangents<T, N> {
    /// The `k`-th unit vector (`1` in lane `k`, `+0.0` elsewhere): the seed of Jacobian row `k`.
    ///
    /// ```
    /// use adjoint_ssa::Cotangents;
    /// assert_eq!(Cotangents::<f64, 3>::unit(1).0, [0.0, 1.0, 0.0]);
    /// ```
    pub fn unit(k: usize) -> Self {
        let mut c = [T::cst(0.0); N];
        c[k] = T::cst(1.0);
        Cotangents(c)
    }
}
