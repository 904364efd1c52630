//! `Var` in nalgebra and ndarray: the impls are adjoint-core's macros, written once for every
//! number type (see `adjoint_core::interop`).

use crate::Var;

adjoint_core::impl_from_primitive!([] Var);

#[cfg(feature = "nalgebra")]
adjoint_core::impl_nalgebra!([] Var);

#[cfg(feature = "ndarray")]
adjoint_core::impl_ndarray!([] Var);
