//! # adjoint-array
//!
//! A data-parallel array language in the style of Accelerate, with whole-program reverse-mode
//! AD (Smeding, *Reverse AD for Accelerate*, seed 004), run block-wise on all cores.
//!
//! **The language.** A [`Builder`] records an array program once. Arrays ([`Acc`]) have any
//! rank over `f64`; shapes are static and checked when the program is built. Combinators:
//! inputs ([`Builder::input`], [`Builder::constant_input`], [`Builder::use_array`]),
//! [`Builder::generate`] / [`Builder::generate_n`], [`Acc::map`], [`Acc::zip_with`] /
//! [`Builder::zip_with_n`], folds along the innermost axis ([`Acc::sum`], [`Acc::fold`],
//! [`Acc::fold1`], [`Acc::maximum`], [`Acc::product`]), [`Acc::scanl`] / [`Acc::scanr`],
//! [`Acc::permute`] (scatter with `+`, `max` or `min`), [`Acc::backpermute`] (gather),
//! [`Acc::replicate`], [`Acc::slice`], [`Acc::reshape`], [`Builder::acond`] (only the branch
//! taken runs), [`Builder::awhile`], indexing inside expressions ([`Acc::at`], [`Acc::the`],
//! [`Acc::dim`]) and let-sharing (a handle used twice is one node, computed once).
//! Scalar functions are Rust closures over [`Exp`]; each closure runs once, at build time,
//! and is captured into an expression DAG (Accelerate's `Exp`), with `select`/[`cond`],
//! comparisons, `floor`/`round`/`idiv`/`imod` (derivative zero) and every primitive of
//! `adjoint_core::rules`.
//!
//! **Running.** [`Builder::build`] fuses element-wise producers into their consumers (a chain
//! of maps is one kernel; a `sum` over a `generate`/`map` never materialises it; shared
//! producers are stored unless they cost at most [`Builder::set_recompute_threshold`]
//! operations) and returns a [`Program`], run many times on new inputs
//! ([`Program::run`]). Each kernel evaluates its expression DAG over blocks of 64–1024
//! elements, one small buffer per live node, so interpretation costs one dispatch per node per
//! block and the loops are tight. Work is split into chunks that depend only on the sizes and
//! combined in chunk order: results are bit-identical for any number of threads.
//!
//! **Gradients.** [`Program::gradient_a`] (one scalar output) runs the primal pass, keeping the
//! arrays it materialised, then walks the nodes backwards accumulating adjoint arrays: an
//! element-wise kernel's adjoint is the reverse-mode transform of its expression DAG (partials
//! from the shared rule table, evaluated block-wise, recomputing the primal inside the same
//! kernel), parameters get dense adjoints and indexing gets a deterministic scatter-add; `sum`
//! broadcasts; folds and scans (any step function, also one that indexes arrays) use the
//! sequential semantics: the step's partials in one kernel, a linear recurrence per row, then
//! the step's full adjoint; `permute` gathers (`+`) or routes to the recorded winners
//! (`max`/`min`); `acond` differentiates the branch taken; `awhile` stores every iteration and
//! runs the body's adjoint backwards. [`gradient_e`] / [`jacobian_e`] differentiate an
//! expression inside a closure (Jacobian blocks in a `generate_n`).
//!
//! ```
//! use adjoint_array::{Builder, Rep};
//! // f(w, x) = Σᵢ softplus(Σⱼ wⱼ xᵢⱼ)  for a 3×2 data matrix x
//! let b = Builder::new();
//! let w = b.input(&[2]);
//! let x = b.constant_input(&[3, 2]);
//! let wx = w.replicate(&[Rep::New(3), Rep::All]).zip_with(&x, |a, c| a * c).sum();
//! let f = wx.map(|z| z.exp().ln_1p()).sum();
//! let p = b.build_scalar(&f).unwrap();
//! let g = p.gradient_a(&[&[0.5, -1.0], &[1.0, 2.0, 0.0, 1.0, -1.0, 0.5]]).unwrap();
//! // ∂f/∂wⱼ = Σᵢ σ(zᵢ) xᵢⱼ
//! let s = |z: f64| 1.0 / (1.0 + (-z).exp());
//! let (z0, z1, z2) = (-1.5, -1.0, -1.0);
//! assert!((g.grads[0][0] - (s(z0) * 1.0 + s(z2) * -1.0)).abs() < 1e-14);
//! assert!((g.grads[0][1] - (s(z0) * 2.0 + s(z1) * 1.0 + s(z2) * 0.5)).abs() < 1e-14);
//! ```
#![warn(missing_docs)]

mod error;
mod exec;
mod expr;
mod f32ops;
mod graph;
mod kernel;
/// Benchmark programs (ADBench GMM) written with the combinators.
pub mod models;

pub use error::{Error, Result};
pub use expr::{cond, gradient_e, jacobian_e, lit, Exp};
pub use graph::{
    Acc, Array, Buffer, Builder, Combine, DType, Gradient, Input, Program, Rep, Sl, TypedGradient,
};
