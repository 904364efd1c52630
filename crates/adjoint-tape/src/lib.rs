//! # adjoint-tape
//!
//! The tape engine: reverse-mode AD by operator overloading, the efficient end point of Smeding &
//! Vákár's dual-numbers reverse AD (seed 003 §§6–10: staged backpropagators, defunctionalised
//! into contributions, are a tape) with its task-parallel extension (§12).
//!
//! Any code generic over [`adjoint_core::Real`] differentiates with it: loops, branches on
//! values, recursion, structs, closures, `Vec`s, iterator chains. No macro, no rewrite.
//!
//! ```
//! use adjoint_tape::{grad, hessian, join, Var};
//! use adjoint_core::Real;
//!
//! fn f<T: Real>(x: &[T]) -> T {
//!     let mut acc = T::cst(0.0);
//!     for (i, &v) in x.iter().enumerate() {
//!         acc += if v > 0.0 { v.ln_1p() } else { v * v } * (i as f64 + 1.0);
//!     }
//!     acc
//! }
//! let g = grad(|x: &[Var]| f(x), &[1.0, -2.0]);
//! assert_eq!(g, vec![0.5, -8.0]);
//! let h = hessian(|x| f(x), &[1.0, -2.0]);
//! assert_eq!(h, vec![vec![-0.25, 0.0], vec![0.0, 4.0]]);
//! ```
//!
//! ## How it works
//!
//! * **Recording.** [`Var`] is 16 bytes: value and an id, the start of an id range its job
//!   reserved plus its position on the job's tape. Ranges come from one process-wide 64-bit
//!   counter and are never reused, so a `Var` that outlives its recording is refused by every
//!   later one, however many recordings come in between (a clear panic, never a wrong number).
//!   Each primitive asks the shared rule table for its partials and appends one 24-byte entry
//!   `{partials: [f64; 2], operands: [u32; 2]}` to the current job's tape (struct of plain
//!   arrays; the result's index is implicit; a one-operand entry's second slot points at the
//!   entry itself with partial 0). Constants are never recorded.
//! * **Reverse.** One pass over each tape, last entry first: `adj[opᵢ] += partialᵢ · adj[k]`.
//!   No hashing, no allocation in steady state ([`Tape`] reuses its buffers).
//! * **Parallelism.** [`join`] and [`par_map`] run on rayon and record the job graph of seed 003
//!   §12 (a value's id is `base + position` in an id range its job reserved, and the owning
//!   job is found by range: seed 003's compound (job, position) ids). The reverse pass
//!   resolves it backwards, running independent tasks in parallel. Values from earlier jobs are imported into job-local slots;
//!   their adjoints flow back at the enclosing fork in a fixed order, so gradients are
//!   bit-for-bit identical for any number of threads (the paper's atomics are not).
//! * **Second order.** [`hvp`]/[`hessian`] run `f` on `Dual<Var>` (reverse over forward).
//! * **Memory.** [`checkpoint`] recomputes a region in the reverse pass instead of storing it.
//! * **Errors.** A `Var` used outside its recording panics with a message saying so;
//!   [`checked_grad`] / [`Tape::checked`] report the first primitive that produced a NaN or an
//!   infinity (the first in the program's sequential order, identical for any number of
//!   threads); a panic inside a parallel job propagates to the caller and the engine stays
//!   usable.
//! * **Parallel code inside a recording** must use [`join`] and [`par_map`]. A plain
//!   `rayon::join` or `par_iter` is not seen by the recording: a side that rayon runs on another
//!   thread panics with a message pointing to [`join`] (always so when the recording runs
//!   outside rayon's pool), while a side that happens to run on the recording thread is recorded
//!   as sequential code, correctly. Which of the two happens inside the pool depends on
//!   scheduling; making it deterministic is an open item.
//!
//! ## nalgebra and ndarray (features `nalgebra`, `ndarray`)
//!
//! With the `nalgebra` feature `Var` is a `nalgebra::RealField` (so is `Dual<Var>`, for
//! [`hessian`]): nalgebra matrices of `Var` multiply, solve (`lu`, `cholesky`, `qr`), invert and
//! take norms on the tape. With `ndarray`, arrays of `Var` do arithmetic, `mapv`, `sum` and
//! `.dot()`. The impls are adjoint-core's (`adjoint_core::interop`), shared with `Dual`: every
//! derivative comes from the rule table. Build the matrices inside the recording, from its
//! inputs and `f64` constants (a `Var` is only valid in the recording that made it).
//!
#![cfg_attr(feature = "nalgebra", doc = "```")]
#![cfg_attr(not(feature = "nalgebra"), doc = "```ignore")]
//! use adjoint_tape::{grad, Var};
//! use adjoint_core::prelude::*;
//! use nalgebra::{DMatrix, DVector};
//!
//! // ∇ of ln det A(x) for A(x) = [[x₀, x₁], [x₁, x₂]] (symmetric positive definite), by Cholesky.
//! let g = grad(|x: &[Var]| {
//!     let a = DMatrix::from_row_slice(2, 2, &[x[0], x[1], x[1], x[2]]);
//!     let l = a.cholesky().unwrap();
//!     l.l().diagonal().map(|d| d.ln()).sum() * 2.0
//! }, &[2.0, 1.0, 3.0]);
//! // d ln det A / dA = A⁻¹ = [[3, −1], [−1, 2]] / 5; x₁ sits in two entries.
//! let expect = [0.6, -0.4, 0.4];
//! assert!(g.iter().zip(expect).all(|(g, e)| (g - e).abs() < 1e-14));
//!
//! // ∇ of ‖A·x‖ for a constant A.
//! let g = grad(|x: &[Var]| {
//!     let a = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 0.0, 1.0]).map(Var::constant);
//!     (a * DVector::from_column_slice(x)).norm()
//! }, &[3.0, 4.0]);
//! // A·x = (11, 4); ∇ = Aᵀ(A·x) / ‖A·x‖ = (11, 26) / √137.
//! assert!((g[0] - 11.0 / 137f64.sqrt()).abs() < 1e-14 && (g[1] - 26.0 / 137f64.sqrt()).abs() < 1e-14);
//! ```
//!
#![cfg_attr(feature = "ndarray", doc = "```")]
#![cfg_attr(not(feature = "ndarray"), doc = "```ignore")]
//! use adjoint_tape::{grad, Var};
//! use adjoint_core::prelude::*;
//! use ndarray::{array, Array1};
//!
//! // ∇ of sum(tanh(A·x)).
//! let a = array![[1.0, 2.0], [-0.5, 0.25]];
//! let g = grad(|x: &[Var]| {
//!     let x = Array1::from(x.to_vec());
//!     a.mapv(Var::constant).dot(&x).mapv(|v| v.tanh()).sum()
//! }, &[0.3, -0.1]);
//! let z = a.dot(&array![0.3, -0.1]).mapv(|v: f64| 1.0 / v.cosh().powi(2));
//! assert!((g[0] - (z[0] * 1.0 + z[1] * -0.5)).abs() < 1e-14);
//! ```
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod api;
mod checkpoint;
mod interop;
mod record;
mod reverse;
mod var;

pub use api::{
    checked_grad, grad, hessian, hvp, jacobian, jacobian_into, value_and_grad, vjp, NonFinite,
    Pass, Tape,
};
pub use checkpoint::checkpoint;
#[doc(hidden)]
pub use record::__skip_ids;
pub use record::{join, par_map};
pub use var::Var;

/// Bytes of one tape entry (a binary operation; a unary operation uses the same slot).
pub const BYTES_PER_ENTRY: usize = std::mem::size_of::<record::Entry>();
