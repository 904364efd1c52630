//! Array engine of adjoint (work in progress): whole-program reverse AD of a data-parallel array
//! language in the style of Accelerate (seed 004).
#![warn(missing_docs)]

mod error;
mod exec;
mod expr;
mod graph;
mod kernel;

pub use error::{Error, Result};
pub use expr::{cond, gradient_e, jacobian_e, lit, Exp};
pub use graph::{Acc, Array, Builder, Combine, Gradient, Program, Rep, Sl};
/// Benchmark programs (ADBench GMM) written with the combinators.
pub mod models;
