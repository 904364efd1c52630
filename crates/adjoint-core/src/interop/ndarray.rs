//! ndarray support for adjoint's number types (feature `ndarray`, ndarray 0.17).
//!
//! With this feature [`Dual<T>`](crate::forward::Dual), [`DualVec<N>`](crate::forward::DualVec)
//! and, with adjoint-tape's `ndarray` feature, the tape's `Var` implement
//! `ndarray::ScalarOperand`, so an array of active numbers can be scaled by an active number
//! (`&a * x`, `&a + x`); `ndarray::LinalgScalar` then holds by ndarray's blanket impl, so
//! `.dot()` (matrix–matrix, matrix–vector, vector–vector) works, and elementwise arithmetic,
//! `mapv`, `sum`, `fold`, `mean`, `var` and `std` (through `num_traits::FromPrimitive`) work as
//! on `f64`. Scaling by a plain `f64` (`&a * 2.0`) works without anything from this module.
//!
//! Not available: `ndarray::NdFloat` (ndarray allows only `f32` and `f64` there), hence the
//! methods that need it, and ndarray-linalg's BLAS/LAPACK routines. `.dot()` on
//! active numbers runs ndarray's generic loop (not the BLAS-like `f64` kernel): one
//! multiplication and one addition per term, each through the rule table.
//!
//! ```
//! use adjoint_core::forward::{self, Dual64};
//! use ndarray::{array, Array1};
//!
//! // d/dt sum(tanh(A·(t, 1))) by one forward sweep.
//! let d = forward::derivative(
//!     |t: Dual64| {
//!         let a = array![[1.0, 2.0], [-0.5, 0.25]].mapv(Dual64::from);
//!         let x: Array1<Dual64> = array![t, Dual64::from(1.0)];
//!         a.dot(&x).mapv(|v| num_traits::Float::tanh(v)).sum()
//!     },
//!     0.3,
//! );
//! let expect = 1.0 / (2.3f64).cosh().powi(2) - 0.5 / (0.1f64).cosh().powi(2);
//! assert!((d - expect).abs() < 1e-14);
//! ```

/// Implement `ndarray::ScalarOperand` for a number type (feature `ndarray`); with it
/// `ndarray::LinalgScalar` holds by ndarray's blanket impl, so arrays of the type support
/// `.dot()` and scaling by an element.
///
/// Syntax as [`impl_real!`](crate::impl_real): `impl_ndarray!([T: Real] Dual<T>)`,
/// `impl_ndarray!([] Var)`. adjoint's own number types already invoke it.
///
/// ```
/// use adjoint_core::forward::Dual64;
/// use ndarray::array;
///
/// // `Dual64` invokes `impl_ndarray!`, so an array of duals is scaled by a dual:
/// let x = Dual64::variable(2.0);
/// let a = array![Dual64::from(1.0), Dual64::from(3.0)];
/// let y = &a * x;
/// assert_eq!((y[1].re, y[1].eps), (6.0, 3.0));
/// ```
#[macro_export]
#[cfg_attr(docsrs, doc(cfg(feature = "ndarray")))]
macro_rules! impl_ndarray {
    ([$($gen:tt)*] $ty:ty) => {
        impl<$($gen)*> $crate::__private::ndarray::ScalarOperand for $ty {}
    };
}
