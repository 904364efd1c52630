//! # adjoint
//!
//! Exact derivatives of real Rust programs — loops, branches, recursion, structs, arrays — by
//! automatic differentiation. Write a numeric function once, generically over [`Real`], and run
//! it on `f64`, forward mode and the tape; the SSA transform takes the same code written on
//! `f64`, and the reversible and array engines have languages of their own. Five engines:
//!
//! | module | engine | use it for |
//! |---|---|---|
//! | [`forward`] | forward-mode dual numbers | directional derivatives, small gradients and Hessians, checking |
//! | [`tape`] | reverse mode on a compact tape, parallel reverse pass (Smeding & Vákár) | gradients of any generic Rust code, Jacobians, Hessian-vector products, fork-join parallel programs |
//! | [`rev`] | a reversible language (NiLang): every function has an exact inverse; gradients by running the inverse, no tape | in-place and memory-bound code, reversible algorithms, gradients and Hessians with no stored intermediates |
//! | [`ssa`] | SSA source transform (Zygote): `#[differentiable]` compiles the adjoint of a plain `f64` function | hot numeric loops over slices where the gradient must cost close to the primal (no tape at run time); small Jacobians, several rows per sweep (`pullback_vec`) |
//! | [`array`](mod@array) | data-parallel array language (Accelerate AD): programs built from combinators, differentiated as a whole | array-shaped models (maps, reductions, scans, gathers) built once and differentiated many times on all cores |
//!
//! Shared pieces: [`rules`] (the one table of derivative rules, which every engine reads),
//! [`check`] (finite-difference gradient checking), [`Real`] (the scalar trait of generic code:
//! `f64`, forward mode, the tape) and [`vector`] (slice primitives for that generic code —
//! `dot`, `sum`, `matvec`, `logsumexp`, `axpy` — which `f64` runs as vectorised kernels and the
//! tape records as one entry per result, `axpy` excepted).
//!
//! **Which engine?** Generic code over [`Real`] with structs, recursion or closures: [`tape`]
//! (reverse) or [`forward`] (few inputs, or checking). A plain `f64` function with loops over
//! slices that you differentiate in a hot loop: [`ssa`]. Bulk array code: [`array`](mod@array). Code that
//! must run backwards, or whose intermediates do not fit in memory: [`rev`].
//!
//! ## Writing generic code (`f64`, forward mode, the tape): five spellings
//!
//! Generic code needs one import, `use adjoint::Real`; concrete code on an engine's number type
//! (`tape::Var`, `forward::Dual64`) needs only that type's module: math methods are inherent.
//!
//! 1. **Constants**: `T::from(3.0)` (or `T::cst(3.0)`), `T::zero()`, `T::one()`, `T::PI()`;
//!    concrete types have the same as inherent functions (`Var::zero()`, `Dual64::PI()`), and
//!    `x.value()` is the `f64` value.
//! 2. **`f64` on the right**: `x * 2.0`, `x + 1.0`, `x % 2.0`, `x.max(0.0)`, `x.powf(1.5)`,
//!    `x.clamp(0.0, 1.0)`. On the left, generic code writes `T::from(1.0) - x` (Rust cannot
//!    implement `f64 - T` for a generic `T`); concrete types accept `1.0 - x` and `2.0 * x`.
//! 3. **Iterators and references**: `x.iter().sum::<T>()`, `.product::<T>()`, `s += &v`,
//!    `a + &b`; in a closure over `&T`, take the value: `x.iter().map(|&v| v * v)` (generic
//!    code cannot multiply `&T` by `&T`; concrete types can).
//! 4. **Branches** compare by primal value, with `Self` or `f64`: `if x > 0.0 { … }`,
//!    `if a < b { … }`; derivatives follow the branch taken.
//! 5. **Arrays**: write `&[T]` inputs and `Vec<T>` locals; use [`vector`] (`dot`, `sum`,
//!    `matvec`, `logsumexp`, `axpy`) for slice-level work, which the tape records as one entry
//!    per result (`dot`, `sum`, `matvec`, `logsumexp`; `axpy` as two entries per element).
//!
//! ```
//! use adjoint::Real;
//!
//! fn loss<T: Real>(w: &[T], xs: &[[f64; 2]], ys: &[f64]) -> T {
//!     let mut total = T::zero();
//!     for (x, &y) in xs.iter().zip(ys) {
//!         let z = w[0] * x[0] + w[1] * x[1] + w[2];          // f64 on the right
//!         let p = T::one() / (T::one() + (-z).exp());         // constants
//!         let p = p.clamp(1e-12, 1.0 - 1e-12);                 // mixed-operand methods
//!         total -= if y > 0.5 { p.ln() } else { (T::one() - p).ln() };
//!     }
//!     total / xs.len() as f64 + w.iter().map(|&v| v * v).sum::<T>() * 1e-3
//! }
//!
//! let (xs, ys) = ([[0.5, 1.0], [-1.0, 0.3], [2.0, -0.5]], [1.0, 0.0, 1.0]);
//! let w = [0.1, -0.2, 0.05];
//! let g = adjoint::tape::grad(|w| loss(w, &xs, &ys), &w);
//! adjoint::check::check_gradient(|w| loss(w, &xs, &ys), &w, &g).assert_passed();
//! ```
//!
//! The spellings Rust forbids in generic code, with the error each gives and what to write
//! instead, are listed on [`Real`].
//!
//! ## Forward mode
//!
//! ```
//! use adjoint::{check, forward, Real};
//!
//! // Written once, for every number type.
//! fn energy<T: Real>(x: &[T]) -> T {
//!     let mut e = T::cst(0.0);
//!     for w in x.windows(2) {
//!         let d = w[1] - w[0];
//!         e += if d > 0.0 { d * d } else { d.abs() } + w[0].sin();
//!     }
//!     e
//! }
//!
//! let x = [0.3, 1.2, 0.7, 2.0];
//! let y: f64 = energy(&x);                                 // the plain program
//! let g = forward::gradient(|x| energy(x), &x);            // n forward sweeps
//! let h = forward::hessian(|x| energy(x), &x);             // Dual<Dual<f64>>
//! check::check_gradient(|x| energy(x), &x, &g).assert_passed();
//! // ∂²/∂x₀² of (x₁ − x₀)² + sin x₀ is 2 − sin x₀.
//! assert!(y > 0.0 && (h[0][0] - (2.0 - 0.3f64.sin())).abs() < 1e-14);
//! ```
//!
//! ## Tape (reverse mode)
//!
//! ```
//! use adjoint::{prelude::*, tape};
//!
//! fn energy<T: Real>(x: &[T]) -> T {
//!     x.windows(2).map(|w| (w[1] - w[0]).powi(2) + w[0].sin()).sum()
//! }
//! let x = [0.3, 1.2, 0.7, 2.0];
//! let g = tape::grad(|x: &[tape::Var]| energy(x), &x);          // one reverse sweep
//! let (a, b) = (x[0], x[1]);
//! assert!((g[0] - (-2.0 * (b - a) + a.cos())).abs() < 1e-14);
//! // Fork-join parallel code: the reverse pass runs the two halves in parallel too.
//! let gp = tape::grad(|x: &[tape::Var]| {
//!     let (l, r) = tape::join(|| energy(&x[..2]), || energy(&x[2..]));
//!     l + r + (x[2] - x[1]).powi(2)
//! }, &x);
//! assert!((gp[0] - g[0]).abs() < 1e-14);
//! ```
//!
//! ## Reversible functions
//!
//! ```
//! use adjoint::rev::prelude::*;
//!
//! reversible! {
//!     fn polar<T: RevReal>(r: &mut T, t: &mut T, x: &mut T, y: &mut T) {
//!         r += x.hypot(y);
//!         t += y.atan2(x);
//!     }
//! }
//! let (mut r, mut t, mut x, mut y) = (0.0f64, 0.0f64, 3.0f64, 4.0f64);
//! polar(&mut r, &mut t, &mut x, &mut y)?;          // r = 5
//! polar::uncall(&mut r, &mut t, &mut x, &mut y)?;  // the exact inverse: r = t = 0 again
//! assert_eq!((r, t), (0.0, 0.0));
//! let g = adjoint::rev::grad(polar {}, (0.0f64, 0.0f64, 3.0f64, 4.0f64), 0)?;
//! assert!((g.2 - 0.6).abs() < 1e-15 && (g.3 - 0.8).abs() < 1e-15); // ∂r/∂(x, y)
//! # Ok::<(), adjoint::rev::InvertibilityError>(())
//! ```
//!
//! ## Using adjoint with nalgebra, ndarray and argmin
//!
//! Three cargo features connect the engines to Rust's numeric crates; `--all-features` turns on
//! all three.
//!
//! | feature | what works | where |
//! |---|---|---|
//! | `nalgebra` (0.35; needs Rust ≥ 1.89, the rest of adjoint 1.85) | `forward::Dual<T>`, `DualVec<N>` and `tape::Var` are `nalgebra::RealField`: matrices, products, `lu`/`cholesky`/`qr` solves, `try_inverse`, `determinant`, `norm` | [`interop`] |
//! | `ndarray` (0.17) | arrays of `Dual`/`Var`: arithmetic, `mapv`, `sum`, `mean`, `.dot()` (`ScalarOperand`, `LinalgScalar`) | [`interop`] |
//! | `argmin` (0.11, argmin-math's `vec` backend) | an objective written once over [`Real`] is an argmin problem with tape gradients and Hessians | `adjoint::argmin` |
//!
//! The nalgebra and ndarray impls are written once in `adjoint-core` on top of the
//! [`Lift`](lift::Lift) contract, for every engine's number type: nalgebra's `ln` or `sqrt` on a
//! `Var` is the `Var`'s own, so every derivative still comes from the one rule table. The
//! derivative is that of the floating-point algorithm nalgebra runs (pivot choices compare primal
//! values, like any branch). Iterative decompositions (`symmetric_eigen`, `svd`) are
//! differentiated as their iteration, whose second derivatives are inaccurate near a reducible
//! matrix: for eigen-decompositions, `interop::nalgebra::symmetric_eigen` gives the function's
//! own derivatives (Hessians included). In a function bounded by both `Real` and `RealField`, a method
//! both traits have (`ln`, `sqrt`, `sin`, `abs`, `max`, …) is ambiguous (E0034): write
//! `Real::ln(x)`, or bound by one of the two traits.
//!
#![cfg_attr(feature = "nalgebra", doc = "```")]
#![cfg_attr(not(feature = "nalgebra"), doc = "```ignore")]
//! use adjoint::{check, forward, tape, Real};
//! use nalgebra::{DMatrix, DVector, RealField};
//!
//! // sum(A(x)⁻¹ b) + ln(1 + x₀), written once for f64, Dual and Var.
//! fn f<T: Real + RealField>(x: &[T]) -> T {
//!     let a = DMatrix::from_row_slice(2, 2, &[x[0] + 3.0, x[1], x[1], T::from(2.0) - x[0]]);
//!     let b = DVector::from_vec(vec![T::from(1.0), T::from(2.0)]);
//!     // `ln` is a method of both `Real` and nalgebra's `ComplexField`: name the trait.
//!     a.lu().solve(&b).unwrap().sum() + Real::ln(x[0] + 1.0)
//! }
//! let x = [0.2, 0.5];
//! let g = tape::grad(|x: &[tape::Var]| f(x), &x);
//! let gf = forward::gradient(|x| f(x), &x);
//! check::check_gradient(|x| f(x), &x, &g).assert_passed();
//! assert!((g[1] - gf[1]).abs() < 1e-14);
//! ```
//!
#![cfg_attr(feature = "argmin", doc = "```")]
#![cfg_attr(not(feature = "argmin"), doc = "```ignore")]
//! use adjoint::argmin::{Objective, Problem};
//! use adjoint::Real;
//! use argmin::core::{Executor, State};
//! use argmin::solver::{linesearch::MoreThuenteLineSearch, quasinewton::LBFGS};
//!
//! struct Bowl;
//! impl Objective for Bowl {
//!     fn eval<T: Real>(&self, x: &[T]) -> T {
//!         (x[0] - 1.0).powi(2) + (x[1] + 2.0).powi(4) + x[0] * x[1] * 0.1
//!     }
//! }
//! let lbfgs = LBFGS::new(MoreThuenteLineSearch::new(), 5);
//! let res = Executor::new(Problem::new(Bowl), lbfgs)
//!     .configure(|s| s.param(vec![0.0, 0.0]).max_iters(200))
//!     .run()?;
//! let x = res.state().get_best_param().unwrap();
//! let g = adjoint::tape::grad(|x: &[adjoint::tape::Var]| Bowl.eval(x), x);
//! assert!(g.iter().all(|gi| gi.abs() < 1e-4));
//! # Ok::<(), argmin::core::Error>(())
//! ```
//!
//! Worked examples: `cargo run -p adjoint --example logistic_lbfgs --features argmin` (logistic
//! regression by L-BFGS), `--example rosenbrock_newton` (Newton's method with exact Hessians).
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The `num-traits` adjoint's number types implement (`Float`, `FromPrimitive`, …), for generic
/// code that needs one of its traits besides [`Real`], without a dependency of your own:
/// ndarray's `mean` asks for `T: Real + num_traits::FromPrimitive`, its `var` and `std` for
/// `num_traits::Float` too.
pub use adjoint_core::num_traits;
pub use adjoint_core::{check, impl_real, interop, lift, prelude, rules, special, vector, Real};

#[cfg(feature = "argmin")]
#[cfg_attr(docsrs, doc(cfg(feature = "argmin")))]
pub mod argmin;

/// The reversible eDSL (NiLang, seeds 000 and 001): [`reversible!`](rev::reversible) functions,
/// their inverses, and gradients by reverse computing. See the module docs for the language.
pub mod rev {
    #[doc(inline)]
    pub use adjoint_rev::*;
}

/// The array engine (Accelerate AD, seed 004): array programs built from data-parallel
/// combinators, differentiated as a whole and run on all cores. See the `adjoint-array` crate.
pub mod array {
    #[doc(inline)]
    pub use adjoint_array::*;
}

/// The SSA source transform (Zygote, seed 002): compiled adjoints of ordinary Rust functions.
/// See the `adjoint-ssa` crate.
pub mod ssa {
    #[doc(inline)]
    pub use adjoint_ssa::*;
}

/// Forward-mode AD with dual numbers ([`Dual`](forward::Dual), nestable for higher order).
pub mod forward {
    pub use adjoint_core::forward::*;
}

/// Reverse-mode AD on a compact tape with a parallel reverse pass: [`grad`](tape::grad),
/// [`jacobian`](tape::jacobian), [`hvp`](tape::hvp), [`join`](tape::join),
/// [`checkpoint`](tape::checkpoint), … See the `adjoint-tape` crate.
pub mod tape {
    pub use adjoint_tape::*;
}
