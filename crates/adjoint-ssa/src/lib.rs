//! SSA source-transform engine of adjoint (work in progress).
