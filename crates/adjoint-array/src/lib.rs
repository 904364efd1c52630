//! # adjoint-array
//!
//! A data-parallel array language in the style of Accelerate, with whole-program reverse-mode
//! AD (Smeding, *Reverse AD for Accelerate*, seed 004), run block-wise on all cores.
//!
//! **The language.** A [`Builder`] records an array program once. Arrays ([`Acc`]) have any
//! rank over `f64` or `f32` ([`DType`]); shapes and element types are static and checked when
//! the program is built. Combinators:
//! inputs ([`Builder::input`], [`Builder::constant_input`], [`Builder::use_array`];
//! `f32` ones with [`Builder::input_f32`] / [`Builder::input_with`] /
//! [`Builder::use_array_f32`], see below),
//! [`Builder::generate`] / [`Builder::generate_n`], [`Acc::map`], [`Acc::zip_with`] /
//! [`Builder::zip_with_n`], folds along the innermost axis ([`Acc::sum`], [`Acc::fold`],
//! [`Acc::fold1`], [`Acc::maximum`], [`Acc::minimum`], [`Acc::product`]), [`Acc::scanl`] /
//! [`Acc::scanr`], [`Builder::scan_n`] (a recurrence with a tuple state per lane, JAX's
//! `lax.scan` carry: an RNN's time loop is one kernel), [`Acc::permute`] (scatter with `+`, `max` or `min`), [`Acc::backpermute`]
//! (gather), [`Acc::replicate`], [`Acc::slice`], [`Acc::reshape`], [`Builder::acond`] (only
//! the branch taken runs), [`Builder::awhile`], [`Acc::matmul`] (a matrix product run as a
//! blocked, vectorised kernel over whole arrays: contractions, which a fused scalar kernel per
//! element runs several times slower), indexing inside expressions ([`Acc::at`],
//! [`Acc::the`], [`Acc::dim`]) and let-sharing (a handle used twice is one node, computed
//! once).
//! Scalar functions are Rust closures over [`Exp`]; each closure runs once, at build time,
//! and is captured into an expression DAG (Accelerate's `Exp`), with `select`/[`cond`],
//! comparisons, `floor`/`round`/`idiv` (derivative zero), `imod` (`x − c·⌊x/c⌋`, derivative 1
//! in `x`) and every primitive of
//! `adjoint_core::rules`.
//!
//! **Running.** [`Builder::build`] fuses element-wise producers into their consumers (a chain
//! of maps is one kernel; a `sum` over a `generate`/`map` never materialises it; shared
//! producers are stored unless they cost at most [`Builder::set_recompute_threshold`]
//! operations) and returns a [`Program`], run many times on new inputs
//! ([`Program::run`]). Each kernel evaluates its expression DAG over blocks of 64–1024
//! elements: a kernel over at least 2048 elements (of at most 1024 operations; `f32` ones too) is compiled to native code with
//! Cranelift on its first run (one loop over the block's elements, two at a time with their
//! arithmetic in `f64x2` registers, intermediates in registers); smaller ones are interpreted, one tight loop per node per block
//! ([`Builder::set_jit`] chooses; the values are the same). Work is split into chunks that
//! depend only on the sizes and combined in chunk order: results are bit-identical for any
//! number of threads. A run is one job on rayon's pool (a program of fewer than 8192 elements in
//! all runs on the calling thread instead), and large arrays it is done with are
//! kept for the next run (at most 1 GiB, process-wide; [`cache`] sets the limit) instead of
//! going back to the allocator.
//!
//! **On a GPU.** With the `cuda` cargo feature, [`Backend::cuda`] runs the same program on an
//! NVIDIA GPU ([`Program::run_on`], [`Program::gradient_on`]): generates, sums, folds with
//! `+ × max min` (the adjoints of `× max min` folds on the host), matrix products and their
//! adjoints, compiled at run time by NVRTC, in `f64`,
//! with every sum in a fixed order (bit-identical from run to run). Scans, permutes, `scan_n`,
//! `awhile` and general folds run on the host inside the GPU program; see [`Backend`].
//!
//! **Gradients.** [`Program::gradient_a`] (one scalar output) runs the primal pass, keeping the
//! arrays it materialised, then walks the nodes backwards accumulating adjoint arrays: an
//! element-wise kernel's adjoint is the reverse-mode transform of its expression DAG (partials
//! from the shared rule table, evaluated block-wise, recomputing the primal inside the same
//! kernel), parameters get dense adjoints and indexing gets a deterministic scatter-add; `sum`
//! broadcasts; folds and scans (any step function, also one that indexes arrays) use the
//! sequential semantics: the step's partials in one kernel, a linear recurrence per row, then
//! the step's full adjoint; `scan_n` runs its step's adjoint kernel once per step, backwards
//! from the stored states (state adjoints and contributions to the arrays it reads together),
//! reading the step's transcendental values stored by the primal pass
//! ([`Builder::set_scan_store`]);
//! `permute` gathers (`+`) or routes to the recorded winners
//! (`max`/`min`); `acond` differentiates the branch taken; `awhile` stores every iteration and
//! runs the body's adjoint backwards. [`gradient_e`] / [`jacobian_e`] differentiate an
//! expression inside a closure (Jacobian blocks in a `generate_n`). A zero adjoint sends
//! nothing back, even through an infinite partial (a branch not taken); an infinite adjoint
//! through a zero partial is `∞ · 0` = NaN, as in JAX and PyTorch (the norm `sqrt(x·x)` at
//! `x = 0`), where forward mode and the tape give 0.
//!
//! **`f32` arrays.** Declare an input `f32` ([`Builder::input_f32`]; a constant array:
//! [`Builder::use_array_f32`]) and everything computed from it is `f32`. Every combinator
//! takes `f32` arrays — `map`, `zip_with`, `generate` that reads them, `backpermute`,
//! `replicate`, `slice`, `reshape`, `sum`, `fold`, `fold1`, `maximum`, `minimum`, `product`,
//! `scanl`, `scanr`, `permute` (`+`, `max`, `min`), `acond`, `awhile` — and each operation is
//! done in `f32` (`+ − × ÷` and `sqrt` rounded once, `exp`/`sin`/… with Rust's `f32`
//! functions): results are bit-identical to the same loop written over `f32` in the same order
//! (folds and scans step sequentially along the row; `sum` and a `+` fold use four interleaved
//! accumulators, except that `sum` of a single long row sums fixed chunks so — at least 2048
//! elements each, sized by the row's length and the kernel computing the terms, so a fused
//! sum and the sum of a stored array may differ in the last bits, the same on every run and
//! thread count — and adds the chunks' sums in order; `permute` combines in source order). A
//! fold's or scan's step function gets an
//! `f32` accumulator and element, its result must be `f32` (a constant result is rounded), and
//! its initial value is rounded to `f32`. The gradient is computed in `f32` (partials of the
//! rule table evaluated in `f64` at the `f32` point and rounded; products and adjoint sums in
//! `f32`) and returned in `f32`; [`gradient_e`] / [`jacobian_e`] work on `f32` expressions. Run
//! with typed data: [`Program::run_typed`] / [`Program::gradient_typed`] take [`Input`]s
//! (`&[f32]` or `&[f64]`) and return [`Buffer`]s of each array's type. Mixing `f32` and `f64`
//! in one combinator (its operands, a `permute` default, an `awhile` body's result, or inside its
//! closure) is a build error ([`Error::DTypeMismatch`], naming the combinator and both types)
//! unless converted with [`Acc::cast_f32`] / [`Acc::cast_f64`] (differentiable: the adjoint of
//! a cast is the reverse cast). Constants in closures are weak, as in JAX; so are indices: a
//! `generate` that uses only its index and constants is `f64` (convert with
//! [`Exp::cast_f32`] inside, or [`Acc::cast_f32`]), and [`Builder::use_array`] is `f64`.
//! `f32` values are stored widened in the `f64` slots and buffers (every one is exactly an
//! `f32`), so the `f64` kernels are unchanged.
//!
//! ```
//! use adjoint_array::{Buffer, Builder};
//! let b = Builder::new();
//! let x = b.input_f32(&[3]);
//! let y = x.map(|v| (v * 0.5).exp()).sum();
//! let p = b.build_scalar(&y).unwrap();
//! let xs: &[f32] = &[0.0, 1.0, 2.0];
//! let g = p.gradient_typed(&[xs.into()]).unwrap();
//! let e: Vec<f32> = xs.iter().map(|v| (v * 0.5).exp()).collect();
//! assert_eq!(g.value, Buffer::F32(vec![e[0] + e[1] + e[2]]));
//! for (d, e) in g.grads[0].as_f32().unwrap().iter().zip(&e) {
//!     assert!((d - e * 0.5).abs() <= 1e-6 * e); // f32 partials
//! }
//! ```
//!
//! A running product and a maximum over `f32` rows, and the gradient of the product:
//!
//! ```
//! use adjoint_array::{Buffer, Builder};
//! let b = Builder::new();
//! let x = b.input_f32(&[2, 3]);
//! let running = x.scanl(1.0, |acc, v| acc * v); // shape [2, 4]
//! let peak = x.maximum(); // shape [2]
//! let p = b.build(&[&running, &peak]).unwrap();
//! let xs: &[f32] = &[1.5, 0.1, 3.0, -2.0, 0.7, 0.3];
//! let out = p.run_typed(&[xs.into()]).unwrap();
//! // the same loops over f32
//! let mut want = Vec::new();
//! for row in xs.chunks(3) {
//!     let mut acc = 1.0f32;
//!     want.push(acc);
//!     for &v in row {
//!         acc *= v;
//!         want.push(acc);
//!     }
//! }
//! assert_eq!(out[0], Buffer::F32(want));
//! assert_eq!(out[1], Buffer::F32(vec![3.0, 0.7]));
//!
//! let b = Builder::new();
//! let x = b.input_f32(&[3]);
//! let p = b.build_scalar(&x.product()).unwrap();
//! let g = p.gradient_typed(&[xs[..3].into()]).unwrap();
//! assert_eq!(g.value, Buffer::F32(vec![1.5f32 * 0.1 * 3.0]));
//! // ∂/∂xⱼ: the product of the others, in f32
//! assert_eq!(g.grads[0], Buffer::F32(vec![0.1f32 * 3.0, 3.0 * 1.5, 0.1f32 * 1.5]));
//! ```
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

mod buffers;
/// The arrays kept between runs: large arrays a run is done with are handed to the next run
/// instead of back to the allocator (fresh pages cost a page fault and a clearing each), up
/// to a process-wide limit.
pub mod cache {
    pub use crate::buffers::{clear, kept_bytes, limit, set_limit};
}
mod backend;
// The GPU backend (issue #17): code generation (always built, tested as C), the device layer
// and the executor (feature `cuda`). Without the feature only the tests use the generator.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod cuda;
mod error;
mod exec;
mod expr;
mod f32ops;
mod graph;
mod jit;
mod kernel;
mod matmul;
/// Benchmark programs written with the combinators: ADBench's GMM, LSTM and BA Jacobian blocks.
pub mod models;

pub use backend::Backend;
pub use error::{Error, Result};
pub use expr::{cond, gradient_e, jacobian_e, lit, Exp};
pub use graph::{
    Acc, Array, Buffer, Builder, Combine, DType, Gradient, Input, Program, Rep, Sl, TypedGradient,
};
