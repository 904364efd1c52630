//! The SSA transform's proc macro (work in progress).
