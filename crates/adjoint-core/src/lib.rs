//! # adjoint-core
//!
//! The foundation every adjoint engine shares:
//!
//! * [`Real`] — the one scalar trait generic user code is written against;
//! * [`rules`] — the one table of primitive derivative rules (value, first and second partials);
//! * [`lift`] — how an engine's number type applies those rules ([`Lift`](lift::Lift) and
//!   [`impl_real!`]);
//! * [`forward`] — forward-mode dual numbers, nestable for higher derivatives;
//! * [`check`] — finite-difference gradient checking with Richardson extrapolation;
//! * [`special`] — the polygamma functions behind `lgamma`'s derivatives;
//! * [`vector`] — slice-level primitives (`dot`, `sum`, `matvec`, `logsumexp`, `axpy`): `f64`
//!   runs vectorised kernels, the tape records `dot`, `sum`, `matvec` and `logsumexp` as one
//!   entry per result (`axpy` as two entries per element), `Dual` runs the scalar definitions;
//! * [`Cotangent`] / [`Cotangents`] — several adjoint lanes per value (a Jacobian's rows in one
//!   reverse sweep);
//! * [`interop`] — nalgebra (feature `nalgebra`) and ndarray (feature `ndarray`) support for every
//!   number type.
//!
//! Users normally reach these through the `adjoint` facade crate.
//!
//! ```
//! use adjoint_core::{check, forward, Real};
//!
//! fn logsumexp<T: Real>(x: &[T]) -> T {
//!     let m = x.iter().fold(T::neg_infinity(), |m, &v| m.max(v));
//!     m + x.iter().map(|&v| (v - m).exp()).sum::<T>().ln()
//! }
//!
//! let x = [0.5, -1.0, 2.0];
//! let g = forward::gradient(|x| logsumexp(x), &x);
//! check::check_gradient(|x| logsumexp(x), &x, &g).assert_passed();
//! ```
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod check;
mod cotangents;
pub mod forward;
pub mod interop;
pub mod lift;
mod real;
pub mod rules;
pub mod special;
pub mod vector;

pub use cotangents::{Cotangent, Cotangents};
pub use real::Real;

/// `use adjoint_core::prelude::*;` brings [`Real`], `num_traits::FloatConst` (`T::PI()`) and
/// `num_traits::Float`. Neither is needed for math methods any more: `Real` carries them for
/// generic code, and every engine type has them as inherent methods (`Dual64::variable(1.0).sin()`
/// with no import).
pub mod prelude {
    pub use crate::Real;
    pub use num_traits::{Float, FloatConst};
}

#[doc(hidden)]
pub use num_traits;

/// What the interop macros (`impl_nalgebra!`, `impl_ndarray!`) name from other crates, so that a
/// crate invoking them needs no direct dependency of its own.
#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "nalgebra")]
    pub use ::approx;
    #[cfg(feature = "ndarray")]
    pub use ::ndarray;
    #[cfg(feature = "nalgebra")]
    pub use ::simba;
}
