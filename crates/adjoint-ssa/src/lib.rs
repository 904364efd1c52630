//! # adjoint-ssa: compiled adjoints of ordinary Rust functions
//!
//! The SSA source transform of seed 002 (Innes, "Don't unroll adjoint: differentiating
//! SSA-form programs"; Zygote) for Rust. `#[differentiable]` lowers a function to SSA form
//! (basic blocks with block arguments), builds its adjoint over the *reversed control-flow
//! graph* — not an unrolled trace — and generates Rust. Loop-carried values the adjoint needs
//! are pushed on typed stacks ([`Stack`]) in a reusable [`Workspace`]; branch choices are
//! recorded only where a block has several predecessors.
//!
//! ```
//! use adjoint_ssa::differentiable;
//!
//! #[differentiable]
//! fn pow(x: f64, n: usize) -> f64 {
//!     let mut r = 1.0;
//!     for _ in 0..n {
//!         r *= x;
//!     }
//!     r
//! }
//!
//! assert_eq!(pow(2.0, 3), 8.0);               // the function itself is unchanged
//! let mut dx = 0.0;
//! let value = pow::grad(2.0, 3, &mut dx);     // value and gradient
//! assert_eq!((value, dx), (8.0, 12.0));
//! ```
//!
//! # What is generated
//!
//! For `fn f(x: &[f64], y: f64, n: usize) -> f64`, a module `f` beside the function with
//!
//! * `f::primal<T: Real>(x: &[T], y: T, n: usize) -> T` — the function at any [`Real`] type
//!   (`Dual<f64>` gives forward mode);
//! * `f::pullback<T: Real>(ws: &mut Workspace<T>, x, y, n, d_x: &mut [T], d_y: &mut T, dret: T) -> T`
//!   — the vector-Jacobian product: runs `f`, then *adds* `dret · ∂f/∂x` to `d_x` and
//!   `dret · ∂f/∂y` to `d_y`. With `T = Dual<f64>` this is forward-over-reverse: Hessian-vector
//!   products;
//! * `f::pullback_vec<T: Real, A: Cotangent<T>>(ws, x, y, n, d_x: &mut [A], d_y: &mut A, dret: A)`
//!   — the same with adjoints of type `A`: `pullback` is `pullback_vec::<T, T>`; with
//!   [`Cotangents<T, N>`](Cotangents) one forward and one reverse sweep carry `N` cotangents,
//!   so `N` rows of a Jacobian cost one call (see *Jacobians* below). Not for functions
//!   with `#[derive(Differentiable)]` struct parameters or results (their `A` must be `Real`);
//! * `f::grad(x, y, n, d_x, d_y) -> f64` — value and gradient (buffers overwritten), with the
//!   thread's workspace; `f::grad_with(ws, …)` with yours. Steady-state calls allocate nothing.
//!   A function whose sweeps keep nothing (no loop that records, no calls) never touches a
//!   workspace: its `grad` uses none, and `&mut Workspace::new()` costs nothing in `pullback`.
//!
//! Parameters: `f64`, `&[f64]`, `[f64; N]`, tuples and `#[derive(Differentiable)]` structs are
//! differentiated (restrict with `#[differentiable(wrt(x))]`: data such as a batch of inputs
//! `xs: &[f64]` is otherwise differentiated too, and `grad` wants a buffer for it — rustc's
//! "argument #… of type `&mut [f64]` is missing" at the call means that); integers, `bool` and
//! `&[usize]` are passive; `&mut [f64]` are
//! in-place outputs: `pullback` takes their cotangent in `d_out` and leaves there the cotangent of
//! their initial contents. Functions with `&mut` outputs get `primal`, `pullback` and
//! `pullback_vec`, but no `grad`.
//!
//! ```
//! use adjoint_ssa::{differentiable, Workspace};
//!
//! #[differentiable]
//! fn scale(x: &[f64], a: f64, out: &mut [f64]) {
//!     for (o, &xi) in out.iter_mut().zip(x.iter()) {
//!         *o = a * xi.sin();
//!     }
//! }
//!
//! let (x, mut out) = ([0.1, 0.2], [0.0; 2]);
//! let (mut dx, mut da, mut dout) = ([0.0; 2], 0.0, [1.0, 0.0]); // cotangent of out
//! scale::pullback(&mut Workspace::new(), &x, 0.5, &mut out, &mut dx, &mut da, &mut dout);
//! assert_eq!(out[0], 0.5 * 0.1f64.sin());
//! assert_eq!((dx[0], dx[1], da), (0.5 * 0.1f64.cos(), 0.0, 0.1f64.sin()));
//! ```
//!
//! # Hessian-vector products
//!
//! `pullback` at `T = Dual<f64>` is forward over reverse: inputs `x + εv`, gradient buffers of
//! dual numbers and a constant seed give the gradient in `.re` and `H·v` in `.eps` (one forward
//! and one reverse sweep; `n` of them with the unit vectors give the Hessian).
//!
//! ```
//! use adjoint_core::forward::Dual64;
//! use adjoint_ssa::{differentiable, Workspace};
//!
//! #[differentiable]
//! fn f(x: &[f64]) -> f64 {
//!     x[0] * x[0] * x[1] + x[1].sin()
//! }
//!
//! let (x, v) = ([1.5, 0.5], [1.0, -2.0]);
//! let xd: Vec<Dual64> = x.iter().zip(&v).map(|(&a, &b)| Dual64::new(a, b)).collect();
//! let mut g = [Dual64::constant(0.0); 2];
//! f::pullback(&mut Workspace::new(), &xd, &mut g, Dual64::constant(1.0));
//! // H = [[2x₁, 2x₀], [2x₀, −sin x₁]]
//! let hv = [2.0 * x[1] * v[0] + 2.0 * x[0] * v[1], 2.0 * x[0] * v[0] - x[1].sin() * v[1]];
//! assert!((g[0].eps - hv[0]).abs() < 1e-12 && (g[1].eps - hv[1]).abs() < 1e-12);
//! assert_eq!(g[0].re, 2.0 * x[0] * x[1]); // the gradient
//! ```
//!
//! # Jacobians
//!
//! `pullback_vec` with [`Cotangents<f64, N>`](Cotangents) adjoints seeds `N` cotangents at once
//! (unit vectors give `N` Jacobian rows) and returns them lane by lane, each bit for bit what
//! `pullback` with that cotangent alone gives: both rows of a 2 × 2 Jacobian in one forward and
//! one reverse sweep.
//!
//! ```
//! use adjoint_ssa::{differentiable, Cotangents, Workspace};
//!
//! #[differentiable]
//! fn polar(r: f64, t: f64) -> (f64, f64) {
//!     (r * t.cos(), r * t.sin())
//! }
//!
//! # fn main() {
//! let (mut dr, mut dt) = (Cotangents([0.0; 2]), Cotangents([0.0; 2]));
//! let seed = (Cotangents::unit(0), Cotangents::unit(1));
//! let (x, y) = polar::pullback_vec(&mut Workspace::new(), 2.0, 0.5, &mut dr, &mut dt, seed);
//! assert_eq!((x, y), (2.0 * 0.5f64.cos(), 2.0 * 0.5f64.sin()));
//! assert_eq!(dr.0, [0.5f64.cos(), 0.5f64.sin()]); // ∂x/∂r, ∂y/∂r
//! assert_eq!(dt.0, [-2.0 * 0.5f64.sin(), 2.0 * 0.5f64.cos()]); // ∂x/∂t, ∂y/∂t
//! # }
//! ```
//!
//! # Arrays, tuples and structs
//!
//! Fixed-size arrays `[f64; N]`, `&[f64; N]`, `&mut [f64; N]` (`N` a literal or a `const`) are
//! parameters like slices, with gradients in `&mut [f64; N]` buffers. Tuples of `f64` and
//! `[f64; N]` (nested too) are parameters (gradient: a `&mut` tuple of the same type) and
//! results; an aggregate result's `pullback` takes its cotangent (a value of the result type)
//! as `dret` and returns the result. Structs of differentiable fields are written once over their
//! number type with [`derive(Differentiable)`](Differentiable): `Params` means `Params<f64>`
//! (values and gradients), and `primal`/`pullback` take `&Params<T>` at any [`Real`] `T`. An
//! array field or member is read through a reference (`&p.b`, `&t.1`: indexed, iterated, or
//! passed to a callee taking `&[f64]` or `&[f64; N]`) or copied by a `let` with its type
//! (`let mut c: [f64; 3] = p.b;`); `let b = p.b;` without the type reads a number.
//!
//! ```
//! use adjoint_ssa::{differentiable, Differentiable, Workspace};
//!
//! #[derive(Clone, Copy, Debug, PartialEq, Differentiable)]
//! struct Params<T = f64> {
//!     w: T,
//!     b: [T; 2],
//! }
//!
//! #[differentiable]
//! fn loss(p: &Params, x: [f64; 2]) -> f64 {
//!     let (u, v) = (p.w * x[0] + p.b[0], p.w * x[1] + p.b[1]);
//!     u * u + v * v
//! }
//!
//! #[differentiable]
//! fn polar(r: f64, t: f64) -> (f64, f64) {
//!     let (s, c) = t.sin_cos();
//!     (r * c, r * s)
//! }
//!
//! # fn main() {
//! let p = Params { w: 2.0, b: [0.5, -1.0] };
//! let (mut dp, mut dx) = (Params::zero(), [0.0; 2]); // the gradient is a `Params`
//! let value = loss::grad(&p, [1.0, 3.0], &mut dp, &mut dx);
//! assert_eq!(value, 2.5 * 2.5 + 5.0 * 5.0);
//! assert_eq!(dp, Params { w: 2.0 * 2.5 + 2.0 * 5.0 * 3.0, b: [5.0, 10.0] });
//!
//! let (mut dr, mut dt) = (0.0, 0.0);
//! let (x, y) = polar::pullback(&mut Workspace::new(), 2.0, 0.0, &mut dr, &mut dt, (0.0, 1.0));
//! assert_eq!((x, y, dr, dt), (2.0, 0.0, 0.0, 2.0)); // cotangent (0, 1): ∂y/∂r, ∂y/∂t
//! # }
//! ```
//!
//! In the body: `p.w` and `p.b[i]` on struct parameters (a field that is indexed, `.len()`-ed,
//! iterated, borrowed with `&` or copied by a `let` of array type is an array field, any other
//! read is a number), `t.0` and
//! `let (a, (b, c)) = t;` on tuples, tuple and struct literals (`Params { w, b }` as a result),
//! array literals `[a, b]`, `let b = a;` copying a local array, `x.sin_cos()`. Aggregates are
//! read-only values (destructure into `let mut` variables to change them). Not supported, each a
//! compile error saying what to write instead: structs whose fields are not `T` or `[T; N]`
//! (nested structs, references, integers), struct parameters by `&mut`, methods called on
//! structs, tuples or structs produced by `if`/`match` branches, tuples and struct literals
//! passed to calls of other `#[differentiable]` functions (pass their fields; a struct
//! parameter may be passed on as it is, `predict(p, x)`), structs returned from such calls.
//! The struct must be visible (with its fields) where the function is.
//!
//! # Calls of other `#[differentiable]` functions
//!
//! The macro sees one function at a time, so a call is written the way the caller's own types
//! say it, and it cannot see whether the callee is annotated: calling a plain Rust function
//! `g` gives rustc's "cannot find module or crate `g`" (``function `g` is not a crate or
//! module``; the generated code calls `g`'s derivative functions, which only `#[differentiable]`
//! defines). Annotate `g`, or give it a rule (below). Then:
//!
//! - *Results.* A tuple pattern takes a tuple of `f64`s (`let (x, y) = polar(r, t);`, nested
//!   `let ((a, b), c) = …` too); an array needs its type with a literal length (`let v: [f64;
//!   3] = cross(a, b);`, `let (u, n): ([f64; 2], f64) = unit(a);`). A function may end in such
//!   a call (`polar(r * r, t)` as the result of a function returning `(f64, f64)`). A result
//!   bound to one name without a type is one `f64`: reading a field or an element of it is a
//!   compile error saying to destructure it or write its type. A dropped result (`f(x);`, `let
//!   _ = f(x);`) runs and has no adjoint.
//! - *Arrays* are passed as Rust passes them: an array parameter `p: [f64; 3]` as `f(p)` or
//!   `f(&p)` to a callee taking `[f64; 3]`, `&[f64; 3]` or `&[f64]`, and a whole local array
//!   with a literal length as `f(v)` or `f(&v)`; its elements are read at the call, and the
//!   reverse sweep gives the callee those values even where the array changes later (in a
//!   loop, say). `&mut` slices and parts of local arrays are not passed on.
//! - *Integers.* A literal, or arithmetic of literals, takes the callee's parameter type
//!   (`poly(x, 3)` with `n: usize`, `scaled(x, 3_000_000_000)` with `n: u64`, `shifted(x,
//!   -3)`); any other integer passed on needs a type this function fixes (`let k: u64 = …`,
//!   `for k in 0..3usize`).
//! - *Passive arguments.* A passive slice (`wrt(p)` passing its data `&xs[a..b]` on) is given
//!   to the callee as it is at `f64`, and as lifted copies at other number types (`Dual` for
//!   forward-over-reverse); the callee's adjoint of it goes to a scratch buffer from a
//!   per-thread pool (no allocation in steady state, but it is zeroed, and at `Dual` the slice
//!   copied, at each call: pass the part the callee reads). A passive struct (`wrt(x)` for
//!   input sensitivities) is lifted with [`Differentiable::lift`].
//! - *Structs* are passed as written (`p`, `&p`, `*p`), once per call and not beside one of
//!   their array fields. One slice passed twice (`dot(x, x)`) works: the reverse sweep collects
//!   the second adjoint in a scratch buffer.
//! - The callee's `wrt` is not visible: call functions differentiated in all their float
//!   parameters (the default).
//!
//! ```
//! use adjoint_ssa::differentiable;
//!
//! #[differentiable]
//! fn moments(x: &[f64]) -> (f64, f64) {
//!     let n = x.len() as f64;
//!     let mean = x.iter().sum::<f64>() / n;
//!     let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
//!     (mean, var)
//! }
//!
//! #[differentiable]
//! fn zscore_of_first(x: &[f64]) -> f64 {
//!     let (mean, var) = moments(x);
//!     (x[0] - mean) / var.sqrt()
//! }
//!
//! # fn main() {
//! let x = [1.0, 2.0, 6.0];
//! let mut g = [0.0; 3];
//! let z = zscore_of_first::grad(&x, &mut g);
//! assert!((z - (1.0 - 3.0) / (14.0f64 / 3.0).sqrt()).abs() < 1e-12);
//! assert!(g.iter().sum::<f64>().abs() < 1e-12); // shifting every x leaves z unchanged
//! # }
//! ```
//!
//! # Loops that only accumulate
//!
//! A `for` loop over a range that is in no other loop, holds none, and only adds terms to its accumulators
//! (`s += f(i)`, `s -= g(i)`; nothing else in it reads `s`, stores into a slice or calls a
//! function; nothing after it writes a slice it reads), where the function's result depends on
//! each accumulator linearly with factors known before the loop (`s`, `s / m as f64`,
//! `2.0 * s + w * s`), is differentiated in one pass: every iteration's adjoint runs right after
//! the iteration, with the accumulators' adjoints known from the start, and nothing is recorded
//! for it. The result is the same gradient, in the order a hand-written one sums it:
//!
//! ```
//! use adjoint_ssa::differentiable;
//! #[differentiable]
//! fn mean_sq(x: &[f64]) -> f64 {
//!     let mut s = 0.0;
//!     for &v in x.iter() {
//!         s += v * v;
//!     }
//!     s / x.len() as f64
//! }
//! let mut g = [0.0; 2];
//! assert_eq!(mean_sq::grad(&[1.0, 3.0], &mut g), 5.0);
//! assert_eq!(g, [1.0, 3.0]); // 2 x / n
//! ```
//!
//! The iterator spelling is the same loop:
//!
//! ```
//! use adjoint_ssa::differentiable;
//! #[differentiable]
//! fn dot(x: &[f64], y: &[f64]) -> f64 {
//!     x.iter().zip(y).map(|(a, b)| a * b).sum()
//! }
//! let (mut dx, mut dy) = ([0.0; 2], [0.0; 2]);
//! assert_eq!(dot::grad(&[1.0, 2.0], &[3.0, 4.0], &mut dx, &mut dy), 11.0);
//! assert_eq!((dx, dy), ([3.0, 4.0], [1.0, 2.0]));
//! ```
//!
//! `ADJOINT_SSA_DUMP` marks such loops "fused".
//!
//! # `unsafe` in the generated code
//!
//! A reversed counted loop that indexes a slice at `base + counter` (the common `for i in 0..n`
//! over `x[i]` or `x[i * n + j]`) checks the whole range once when the pullback enters the loop
//! (`__private::check_range`, a panic before any access if it does not fit) and then indexes
//! with `get_unchecked` inside `unsafe` blocks. The forward sweep of a pullback does the same
//! on entering such a loop (`__private::check_loop_range`): an index past the end of a slice
//! panics there, before the loop runs, where the function itself panics at that index. Those blocks come from the macro, and rustc does
//! not apply the `unsafe_code` lint to code a proc macro generates, so a crate with
//! `#![forbid(unsafe_code)]` still compiles its `#[differentiable]` functions
//! (`tests/ranged.rs` is such a crate). `ADJOINT_SSA_DUMP=name` lists, per function, the
//! accesses compiled this way ("unchecked in both sweeps").
//!
//! # Supported Rust
//!
//! `let` (with tuples `let (a, b) = (x, y);`; `let y;` or `let k: usize;` assigned later, an
//! untyped one being an `f64`), `const` items of `f64` or integer type (declared in the function, or
//! read where their type is clear: `let k: usize = K;`, `x * K as f64`; not constant arrays), assignment
//! and compound assignment, destructuring assignment of numbers (`(a, b) = (b, a + b);`,
//! `(c, s) = polar(r, t);`, `(v[0], v[2]) = (v[2], v[0]);`), assignment of whole local arrays
//! (`v = [v[1], v[0]];`, `v = w;`, `v = rot(&v, t);`; the right side of any assignment is evaluated first, as in
//! Rust) and copies of arrays (`let mut a = x;` for `x: [f64; 3]`, `let mut b = *r;` for
//! `r: &[f64; 3]`, `let b = a;` for a local array, an array in a tuple literal `(a, k)`, a
//! tuple parameter's array member (`let mut c = t.1;`, `let (k, mut c) = t;`); a struct's
//! array field, whose length the macro does not know, is copied by a `let` with its type,
//! `let mut c: [f64; 2] = q.b;` or `= *r` for `let r = &q.b;`; a
//! reference `(&mut a, k)` names the array itself; an array that a reference also names is
//! neither assigned whole nor bound by name while both are in scope: write `*r`), `if`/`else` (also as expressions),
//! `match` on integers and bools, `while`, `loop` with labelled `break`/`continue` (and a value:
//! `let r = loop { … break v; };`, an `f64` or an integer of written type), `for` over
//! ranges of any integer type (`a..b`, `a..=b`, `.rev()`, `.step_by(k)`; `(-3..2).rev()` counts
//! down from 1; a 64-bit `a..=b` whose end is the type's `MAX` panics saying so; bounds whose
//! type only a later use decides — `let mut hi = 0; … hi = m;` with `m: u64` — are counted in
//! `i64` unless the loop variable meets that use, and a bound beyond `i64` then panics saying
//! so: declare such a variable's type, `let mut hi: u64 = 0;`) and slices (`.iter()`, `.iter_mut()`), with `.enumerate()`, `.zip()`, `.rev()`,
//! `.step_by(k)`, `.skip(n)`, `.take(n)` in any order (`.enumerate().skip(1)` numbers from 1),
//! over `x.windows(k)`, `x.chunks(k)` and `x.chunks_exact(k)` (each item a sub-slice), early
//! `return`; reductions of those iterators, `.sum()`, `.product()` (also `::<f64>`) and
//! `.fold(init, |acc, v| …)`, after an optional `.copied()` and `.map(|v| …)` — each is lowered to the loop it stands for, the closure's body inlined,
//! so `x.iter().zip(y).map(|(a, b)| a * b).sum()` is differentiated as the written-out loop (a
//! `return` inside such a closure is refused; a function's name works in place of a closure:
//! `x.iter().copied().map(f64::sin)`, `.fold(f64::MIN, f64::max)`: Rust wants the `.copied()`
//! there, as `iter()` yields `&f64`); closures bound to a name and called (`let sq =
//! |v: f64| v * v;`, `let at = |i: usize, j: usize| i * n + j;`), inlined where they are called,
//! over the variables as they were where the closure was defined (not `move`, no `return`, and not
//! assigning a variable they capture: return the new value instead); slice indexing and sub-slices
//! `&x[a..b]` (indexing one past its own end panics, as in Rust, even where the slice it was cut
//! from has the element), `x.len()`, `x.is_empty()`, `out.fill(v)` (also on `out[a..b]`), local
//! arrays `[v; N]` and `[a, b, c]` (in a `let`, or where an array value stands: a result, a
//! tuple's member, a struct field); `x.is_nan()`, `x.is_finite()`, `x.is_infinite()` in
//! conditions; `assert!`, `assert_eq!`, `assert_ne!` and their `debug_` forms (checked as written;
//! a message given as a literal is kept, a format string's arguments are not evaluated); tuples,
//! arrays and structs (above); every primitive of the shared rule table as a method (`x.sin()`,
//! `x.powi(2)`, `a.max(b)`, `x.powf(y)`, `x.erf()` with [`Real`] in scope, …) or as `f64::sin(x)`,
//! `a % b` on `f64` (IEEE `fmod`), `x.rem_euclid(y)` (as `std` computes it, bit for bit) and
//! `x.mul_add(a, b)` (rounded once, as in Rust);
//! piecewise-constant `floor`, `ceil`, `round`, `trunc`, `signum` (derivative 0); `k as f64` and
//! `f64::from(k)` (integers of at most 32 bits, as in Rust); calls to other
//! `#[differentiable]` functions, returning `f64`, tuples or arrays (above; their pullback runs in
//! the reverse sweep, recomputing the callee's forward: joint call-tree reversal); opaque functions
//! with user rules: `#[differentiable(rule(softplus = softplus_rule))]` where `fn softplus_rule<T:
//! Real>(x: T) -> (T, [T; 1])` returns value and partials (one per argument: another count is a
//! compile error at the rule's name). Write the rule over `T`, so that at `Dual` (forward mode,
//! Hessian-vector products) it differentiates too; a rule that can only compute in `f64`
//! (`T::cst(f(x.value()))`, an opaque C function) serves `grad` and `pullback` at `f64`, and at
//! `Dual` is a panic naming it rather than a wrong derivative. Integer arithmetic, comparisons and
//! indexing are passive. Anything else is a compile error at the offending tokens saying what to
//! write instead.
//!
//! *Infinite partials.* Where a primitive's partial can be infinite while its value is finite
//! ([`rules::Op1::partial_unbounded`](adjoint_core::rules::Op1::partial_unbounded): `sqrt` and
//! `cbrt` at 0, `asin` and `acos` at ±1, `acosh` at 1, `powf` at a zero base) and
//! for user rules, an adjoint that is exactly zero sends nothing ([`Cotangent::scale_by`]), as
//! on the tape: a pullback of `(x.sqrt(), 2.0 * x)` at 0 along (0, 1) is 2, not NaN, and so is
//! that row of `pullback_vec`'s Jacobian. *Overflow.* Other partials are multiplied by their
//! adjoints unguarded, as JAX and PyTorch do: where a partial is infinite (`ln 0`, `x / 0`,
//! `exp` of a large value, and where a finite partial overflows though the value does not:
//! `x / y` for |y| below ~1e-154, `ln x` at a subnormal `x`) and the result does not depend on it (the unchosen side of a `max`, a value
//! later overwritten, another output's row), the gradient is NaN (`0 · ∞`), where forward mode
//! and the tape give the finite answer. Guarding every multiply would cost each adjoint a
//! compare (guarding `/` cost BA's Jacobian 7 %) and was not done.
//!
//! Set `ADJOINT_SSA_DUMP=f` (or `*`) while compiling to print `f`'s SSA form, activity,
//! recording decisions and adjoint blocks.

pub use adjoint_core::Real;
pub use adjoint_ssa_macros::{differentiable, Differentiable};

/// A struct of differentiable fields, written once over its number type:
/// `#[derive(Differentiable)] struct Params<T = f64> { w: T, b: [T; 3] }` (every field `T` or
/// `[T; N]`). `Params` — that is `Params<f64>` — holds values *and* gradients;
/// `#[differentiable]` functions taking `&Params` get `primal` and `pullback` over
/// `Params<T>` for any [`Real`] `T` (`Params<Dual<f64>>` is forward mode). Implement it with the
/// derive, which checks the shape.
///
/// ```
/// use adjoint_ssa::{differentiable, Differentiable};
///
/// #[derive(Clone, Copy, Debug, PartialEq, Differentiable)]
/// struct Line<T = f64> {
///     w: T,
///     b: [T; 2],
/// }
///
/// #[differentiable(wrt(p))]
/// fn loss(p: &Line, x: f64) -> f64 {
///     let r = p.w * x + p.b[0] - p.b[1];
///     r * r
/// }
///
/// # fn main() {
/// let p = Line { w: 2.0, b: [0.5, 1.0] };
/// let mut dp = Line::zero(); // a gradient is a `Line` too
/// let v = loss::grad(&p, 3.0, &mut dp);
/// let r: f64 = 2.0 * 3.0 + 0.5 - 1.0;
/// assert_eq!(v, r * r);
/// assert_eq!(dp, Line { w: 2.0 * r * 3.0, b: [2.0 * r, -2.0 * r] });
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a `#[derive(Differentiable)]` struct",
    note = "write `#[derive(Differentiable)] struct Name<T = f64> {{ field: T, array: [T; N] }}`"
)]
pub trait Differentiable: Sized {
    /// The same struct over another number type.
    type Of<U: Real>: Differentiable;
    /// Every field zero.
    fn zero() -> Self;
    /// Set every field to zero (`grad` clears gradient buffers with it).
    fn set_zero(&mut self) {
        *self = Self::zero();
    }
    /// The same values over another number type, without derivative parts (`U::cst` of each
    /// field's value): how a function differentiated in other parameters passes a struct
    /// parameter on to a callee that runs at its own number type.
    ///
    /// ```
    /// use adjoint_core::forward::Dual;
    /// use adjoint_ssa::Differentiable;
    ///
    /// #[derive(Clone, Copy, Debug, PartialEq, Differentiable)]
    /// struct P<T = f64> {
    ///     w: T,
    ///     b: [T; 2],
    /// }
    ///
    /// let p = P { w: 2.0, b: [0.5, -1.0] };
    /// let d: P<Dual<f64>> = p.lift();
    /// assert_eq!((d.w.re, d.w.eps, d.b[1].re), (2.0, 0.0, -1.0));
    /// ```
    fn lift<U: Real>(&self) -> Self::Of<U>;
}

mod scratch;
mod workspace;
pub use adjoint_core::{Cotangent, Cotangents};
pub use workspace::{with_workspace, Cursor, Stack, Workspace};

#[doc(hidden)]
pub mod __private {
    pub use crate::scratch::{lift, Scratch};
    pub use adjoint_core::rules;
    use adjoint_core::Real;

    /// Rules for methods that have no primitive of their own in the rule table, called as user
    /// rules are (`rule(args) -> (value, partials)`).
    pub mod builtin {
        use adjoint_core::Real;

        /// `x.mul_add(a, b)`: one rounding (`Real::mul_add`, fused on `f64`), partials
        /// `(a, x, 1)`.
        #[inline(always)]
        pub fn mul_add<T: Real>(x: T, a: T, b: T) -> (T, [T; 3]) {
            (x.mul_add(a, b), [a, x, T::one()])
        }
    }

    /// After a user rule ran at a number type that carries derivatives (`Dual`: forward mode,
    /// and the forward sweep of a Hessian-vector product): its value must carry the derivative
    /// its partials give. A rule that computes in `f64` (`T::cst(f(x.value()))`) returns a
    /// value without one, which would be a silently wrong derivative: that is a panic naming
    /// the rule. At `f64` (no derivative to carry) this costs a few subtractions.
    #[inline]
    #[track_caller]
    pub fn check_rule<T: Real, const N: usize>(args: [T; N], r: &(T, [T; N]), rule: &str) {
        // Only at finite values (`∞ − ∞` is NaN, which would look like a tangent).
        let finite = |v: &T| v.value().is_finite();
        if !finite(&r.0) || !args.iter().all(finite) || !r.1.iter().all(finite) {
            return;
        }
        let moves = |v: T| !Real::exact_zero(&(v - T::cst(v.value())));
        if moves(r.0) || !args.iter().any(|&a| moves(a)) {
            return;
        }
        // The tangent the partials send, term by term (each term's value is 0).
        let terms = core::array::from_fn::<T, N, _>(|i| {
            let a = args[i];
            if moves(a) {
                (a - T::cst(a.value())) * r.1[i]
            } else {
                T::cst(0.0)
            }
        });
        let mut sent = T::cst(0.0);
        for &t in &terms {
            sent += t;
        }
        // A right rule whose derivative along this direction cancels (`x / y` along `(x, y)`)
        // returns an exact 0 where the terms' sum is a rounding error: a sum that one term,
        // scaled by 2²⁰, absorbs completely (`(b + sent) − b` exactly 0 in every component) is
        // below ~1e-10 of that term, and a value computed in `f64` would be as right.
        let negligible = || {
            terms.iter().any(|&t| {
                let b = t * 1_048_576.0;
                Real::exact_zero(&((b + sent) - b))
            })
        };
        if finite(&sent) && moves(sent) && !negligible() {
            rule_lost_derivative(rule)
        }
    }

    #[cold]
    #[inline(never)]
    #[track_caller]
    fn rule_lost_derivative(rule: &str) -> ! {
        panic!(
            "adjoint::ssa: the rule `{rule}` returned a value that carries no derivative at a \
             number type that differentiates (forward mode's `Dual`, or a Hessian-vector \
             product's forward sweep), though its partials are not zero: it computes in `f64` \
             (`T::cst(f(x.value()))`), or one of its branches returns a constant with a nonzero \
             partial (a saturated `T::one()` beside the partial `(-x).exp()`). Write the rule \
             over `T` (`x.powi(3)`, `x.exp()`) so that it differentiates, and give every branch \
             a value and partials that agree (`T::one() - (-x).exp()`, or the partial 0); a \
             rule that can only compute in `f64` serves `grad` and `pullback` at `f64` only"
        )
    }

    /// Checked once when a pullback enters a reversed counted loop that indexes a slice at
    /// `base + counter` (wrapping) without per-iteration checks, `counter` in `[lo, hi)`: the
    /// slice must hold all of `base + lo .. base + hi`. The forward sweep indexed the same
    /// elements, so this cannot fail unless the transform is wrong; it is what makes those
    /// unchecked accesses sound.
    #[inline]
    #[track_caller]
    pub fn check_range(base: usize, lo: usize, hi: usize, len: usize) {
        if !fits(base, lo, hi, len) {
            range_failed(base.wrapping_add(lo), hi.wrapping_sub(lo), len)
        }
    }

    /// Whether a slice of length `len` holds `base + lo .. base + hi` (`base + lo` wrapping, as
    /// the generated indices do; the end must not overflow).
    #[inline]
    fn fits(base: usize, lo: usize, hi: usize, len: usize) -> bool {
        let first = base.wrapping_add(lo);
        hi.checked_sub(lo)
            .and_then(|n| first.checked_add(n))
            .is_some_and(|end| end <= len)
    }

    /// On entering a counted loop in the forward sweep of a pullback: the loop indexes the slice
    /// at `base + counter` on every iteration, `counter` in `[lo, hi)`, so the slice must hold
    /// `base + lo .. base + hi`; checked once here, the iterations index without checks. Where
    /// it fails, the function itself panics at the first index past the end of the slice.
    #[inline]
    #[track_caller]
    pub fn check_loop_range(base: usize, lo: usize, hi: usize, len: usize) {
        if !fits(base, lo, hi, len) {
            loop_range_failed(base.wrapping_add(lo), hi.wrapping_sub(lo), len)
        }
    }

    /// A sub-slice indexed at or past its length (`Inst::Check`): where the function as
    /// written panics.
    #[cold]
    #[inline(never)]
    #[track_caller]
    pub fn sub_slice_index_failed(index: usize, len: usize) -> ! {
        panic!("index out of bounds: the len is {len} but the index is {index} (a sub-slice)")
    }

    /// A sub-slice `&x[lo..hi]` whose bounds are out of order (`lo` not below `hi + 1`) or past
    /// the end (`hi` not below `len + 1`) (`Inst::Check`).
    #[cold]
    #[inline(never)]
    #[track_caller]
    pub fn sub_slice_range_failed(a: usize, b: usize) -> ! {
        panic!(
            "range out of bounds: a sub-slice bound {a} is past {}: its start must not exceed its \
             end, nor its end the slice's length",
            b.wrapping_sub(1)
        )
    }

    #[cold]
    #[inline(never)]
    #[track_caller]
    fn loop_range_failed(first: usize, n: usize, len: usize) -> ! {
        panic!(
            "index out of bounds: a loop indexes {n} elements from {first} of a slice of length \
             {len} (checked on entering the loop in the gradient's forward sweep)"
        )
    }

    #[cold]
    #[inline(never)]
    #[track_caller]
    fn range_failed(first: usize, n: usize, len: usize) -> ! {
        panic!(
            "adjoint-ssa internal error: a reversed loop would index {n} elements from {first} \
             of a slice of length {len}, beyond what the forward sweep indexed; please report this"
        )
    }
}
