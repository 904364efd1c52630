//! The logic of adjoint's SSA transform (work in progress).
