//! placeholder
pub use adjoint_core::*;
