//! Interoperability with Rust's numeric crates: nalgebra and ndarray (cargo features).
//!
//! | feature | what you get | for which types |
//! |---|---|---|
//! | `nalgebra` | module `nalgebra`: nalgebra's scalar traits (`RealField`, `ComplexField`, `SimdValue`, `SubsetOf`/`SupersetOf<f64>`, `approx`'s comparisons, …): matrices, products, `LU`/`Cholesky`/`QR` solves, `norm()` | `Dual<T>`, `DualVec<N>`; `Var` (adjoint-tape's `nalgebra` feature) |
//! | `ndarray` | module `ndarray`: `ScalarOperand` (scalar × array) and, through it, `LinalgScalar` (`.dot()`) | the same types (adjoint-tape's `ndarray` feature for `Var`) |
//!
//! Every number type also implements `num_traits::FromPrimitive` (no feature needed; see
//! [`impl_from_primitive!`](crate::impl_from_primitive)), which nalgebra and ndarray use to
//! make constants (`mean`, `from_usize`).
//!
//! The impls are written once, as macros over the [`Lift`](crate::lift::Lift) contract
//! (`impl_nalgebra!`, `impl_ndarray!`, documented with their features), and
//! every engine invokes them: each nalgebra method calls the number type's own
//! `num_traits::Float` method, so every derivative comes from the shared rule table.
//! Comparisons (`approx`'s `relative_eq`, `PartialOrd`) look at primal values only;
//! `num_traits::Zero::is_zero` does not: it is true only for a number that is zero in every
//! component (a `Dual` whose tangent is 0 too, a constant `Var`), as in `num-dual`, because both
//! crates skip a term `β·y` where `β.is_zero()` and an active `β = 0` still has a derivative.
//! A tape `Var` 0 whose recorded derivative is exactly zero (`|a|` or `a²` at an active `a = 0`,
//! sums of those) counts as zero too, as a `Dual` with a zero tangent does: nalgebra's
//! Householder, Givens and eigenvalue steps then skip a zero as they do on `f64` (they divided
//! by it: NaN for a QR of `[[0, 1], [1, 0]]`). An active 0 that has a derivative (an input, a
//! pivot `a − b` at `a = b`) is nonzero, and nalgebra's solvers divide by it.
//!
//! ```
//! use adjoint_core::forward::Dual64;
//! use num_traits::FromPrimitive;
//!
//! let n = Dual64::from_usize(3).unwrap();
//! assert_eq!((n.re, n.eps), (3.0, 0.0));
//! ```

#[cfg(feature = "nalgebra")]
#[cfg_attr(docsrs, doc(cfg(feature = "nalgebra")))]
pub mod nalgebra;
#[cfg(feature = "ndarray")]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
pub mod ndarray;

use crate::forward::{Dual, DualVec};
use crate::Real;

/// Implement `num_traits::FromPrimitive` for a type that implements [`Lift`](crate::lift::Lift)
/// (and `From<f64>`, as [`impl_real!`](crate::impl_real) provides): every primitive number
/// becomes a constant through `f64`.
///
/// Syntax as [`impl_real!`](crate::impl_real): `impl_from_primitive!([T: Real] Dual<T>)`.
/// Every engine of this workspace already invokes it for its number type.
///
/// ```
/// use adjoint_core::forward::Dual;
/// use num_traits::FromPrimitive;
/// let x = Dual::<Dual<f64>>::from_i32(-2).unwrap();
/// assert_eq!(x.re.re, -2.0);
/// ```
#[macro_export]
macro_rules! impl_from_primitive {
    ([$($gen:tt)*] $ty:ty) => {
        impl<$($gen)*> $crate::num_traits::FromPrimitive for $ty {
            #[inline]
            fn from_i64(n: i64) -> Option<Self> {
                Some(<Self as ::core::convert::From<f64>>::from(n as f64))
            }
            #[inline]
            fn from_u64(n: u64) -> Option<Self> {
                Some(<Self as ::core::convert::From<f64>>::from(n as f64))
            }
            #[inline]
            fn from_i128(n: i128) -> Option<Self> {
                Some(<Self as ::core::convert::From<f64>>::from(n as f64))
            }
            #[inline]
            fn from_u128(n: u128) -> Option<Self> {
                Some(<Self as ::core::convert::From<f64>>::from(n as f64))
            }
            #[inline]
            fn from_f32(n: f32) -> Option<Self> {
                Some(<Self as ::core::convert::From<f64>>::from(f64::from(n)))
            }
            #[inline]
            fn from_f64(n: f64) -> Option<Self> {
                Some(<Self as ::core::convert::From<f64>>::from(n))
            }
        }
    };
}

crate::impl_from_primitive!([T: Real] Dual<T>);
crate::impl_from_primitive!([const N: usize] DualVec<N>);

#[cfg(feature = "nalgebra")]
crate::impl_nalgebra!([T: Real] Dual<T>);
#[cfg(feature = "nalgebra")]
crate::impl_nalgebra!([const N: usize] DualVec<N>);

#[cfg(feature = "ndarray")]
crate::impl_ndarray!([T: Real] Dual<T>);
#[cfg(feature = "ndarray")]
crate::impl_ndarray!([const N: usize] DualVec<N>);
