//! What reverse passes accumulate gradients in: one cotangent (`T` itself) or several carried
//! together ([`Cotangents`]: `N` rows of a Jacobian for the price of one pass). The SSA
//! transform's `pullback_vec` adjoints and the reversible engine's `GVar` gradients are any
//! [`Cotangent`].

use crate::Real;
use std::fmt::Debug;
use std::ops::{Add, AddAssign, DivAssign, Index, IndexMut, Mul, MulAssign, Neg, Sub, SubAssign};

/// A gradient value of a reverse pass over numbers of type `T`: `T` itself, or
/// [`Cotangents<T, N>`]. Reverse passes only add, subtract and negate gradients and scale them
/// by partial derivatives of type `T` (`ā += ḡ · ∂`), so this is all they need.
///
/// ```
/// use adjoint_core::{Cotangent, Cotangents};
///
/// let mut a = <Cotangents<f64, 2> as Cotangent<f64>>::neg_zero();
/// a += Cotangents([1.0, 2.0]) * 3.0;
/// assert_eq!(a, Cotangents([3.0, 6.0]));
/// assert_eq!(<f64 as Cotangent<f64>>::zero(), 0.0);
/// ```
pub trait Cotangent<T>:
    Copy
    + Debug
    + 'static
    + Add<Output = Self>
    + Sub<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + Mul<T, Output = Self>
    + MulAssign<T>
    + DivAssign<T>
{
    /// `+0.0` in every lane: what a gradient buffer is cleared to.
    fn zero() -> Self;
    /// `-0.0` in every lane: the exact identity of `+` (`-0.0 + v == v` for every `v`, also
    /// `v = -0.0`), which adjoints are reset to.
    fn neg_zero() -> Self;
    /// `self · d`, except that a cotangent (lane) that is exactly zero sends nothing: it stays
    /// zero where `d` is infinite or NaN (`0 · ∞` would be NaN). A reverse pass uses it for
    /// partials that can be infinite where the value is finite (`√x` at 0), so that another
    /// output's Jacobian row, whose cotangent there is 0, is not NaN.
    ///
    /// ```
    /// use adjoint_core::{Cotangent, Cotangents};
    /// assert_eq!(Cotangent::scale_by(0.0, f64::INFINITY), 0.0);
    /// assert_eq!(Cotangent::scale_by(2.0, 3.0), 6.0);
    /// let c = Cotangents([0.0, 2.0]).scale_by(f64::INFINITY);
    /// assert_eq!(c.0, [0.0, f64::INFINITY]);
    /// // at forward mode's duals, level by level: a zero value sends nothing through ∞, its
    /// // tangent does
    /// use adjoint_core::forward::Dual64;
    /// let c = Dual64::new(0.0, 1.0).scale_by(Dual64::new(f64::INFINITY, 2.0));
    /// assert_eq!((c.re, c.eps), (0.0, f64::INFINITY));
    /// ```
    ///
    /// The default is `self · d` (unguarded), for cotangent types outside this crate.
    #[inline(always)]
    fn scale_by(self, d: T) -> Self {
        self * d
    }
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
    #[inline(always)]
    fn scale_by(self, d: T) -> Self {
        Real::scale_cotangent(self, d)
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
    #[inline(always)]
    fn scale_by(self, d: T) -> Self {
        Cotangents(self.0.map(|g| g.scale_by(d)))
    }
}

/// `N` cotangents of one number type, propagated together (lane-wise: lane `k` computes
/// exactly what a pass with cotangent `k` alone computes, bit for bit). Seed the outputs'
/// cotangents with unit vectors ([`Cotangents::unit`]) to get `N` Jacobian rows.
///
/// ```
/// use adjoint_core::Cotangents;
///
/// let mut a = Cotangents([1.0, 2.0]) * 3.0;
/// a += Cotangents::unit(1);
/// assert_eq!(a, Cotangents([3.0, 7.0]));
/// assert_eq!(a[1], 7.0);
/// a[0] = 0.5;
/// assert_eq!(a.0, [0.5, 7.0]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cotangents<T, const N: usize>(pub [T; N]);

impl<T: Real, const N: usize> Cotangents<T, N> {
    /// Every lane `+0.0`.
    pub fn zero() -> Self {
        Cotangents([T::cst(0.0); N])
    }

    /// The `k`-th unit vector (`1` in lane `k`, `+0.0` elsewhere): the seed of Jacobian row `k`.
    ///
    /// ```
    /// use adjoint_core::Cotangents;
    /// assert_eq!(Cotangents::<f64, 3>::unit(1).0, [0.0, 1.0, 0.0]);
    /// ```
    pub fn unit(k: usize) -> Self {
        let mut c = [T::cst(0.0); N];
        c[k] = T::cst(1.0);
        Cotangents(c)
    }
}

impl<T: Real, const N: usize> Default for Cotangents<T, N> {
    /// Every lane `+0.0`.
    fn default() -> Self {
        Self::zero()
    }
}

impl<T: Real, const N: usize> Mul<T> for Cotangents<T, N> {
    type Output = Self;
    #[inline(always)]
    fn mul(self, d: T) -> Self {
        Cotangents(self.0.map(|g| g * d))
    }
}

impl<T: Real, const N: usize> MulAssign<T> for Cotangents<T, N> {
    #[inline(always)]
    fn mul_assign(&mut self, d: T) {
        for g in &mut self.0 {
            *g *= d;
        }
    }
}

impl<T: Real, const N: usize> DivAssign<T> for Cotangents<T, N> {
    #[inline(always)]
    fn div_assign(&mut self, d: T) {
        for g in &mut self.0 {
            *g /= d;
        }
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

impl<T: Real, const N: usize> Sub for Cotangents<T, N> {
    type Output = Self;
    #[inline(always)]
    fn sub(mut self, o: Self) -> Self {
        self -= o;
        self
    }
}

impl<T: Real, const N: usize> Neg for Cotangents<T, N> {
    type Output = Self;
    #[inline(always)]
    fn neg(self) -> Self {
        Cotangents(self.0.map(|g| -g))
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

impl<T: Real, const N: usize> SubAssign for Cotangents<T, N> {
    #[inline(always)]
    fn sub_assign(&mut self, o: Self) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a -= b;
        }
    }
}

impl<T, const N: usize> Index<usize> for Cotangents<T, N> {
    type Output = T;
    fn index(&self, k: usize) -> &T {
        &self.0[k]
    }
}

impl<T, const N: usize> IndexMut<usize> for Cotangents<T, N> {
    fn index_mut(&mut self, k: usize) -> &mut T {
        &mut self.0[k]
    }
}
