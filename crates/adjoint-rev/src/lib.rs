//! # adjoint-rev: a reversible language embedded in Rust (NiLang, seeds 000 and 001)
//!
//! A *reversible function* changes its arguments in place and can always be run backwards.
//! [`reversible!`] turns each function into two: `f` and its exact inverse `f::uncall`
//! (NiLang's `~f`). Gradients need no tape: run `f`, wrap the outputs in [`GVar`] (value and
//! gradient), seed the loss's gradient with 1 and run `f::uncall` — the inverse recomputes every
//! earlier value while the adjoint rules attached to each instruction move the gradients
//! ([`grad`], [`hessian`], [`jacobian`]).
//!
//! ```
//! use adjoint_rev::prelude::*;
//!
//! reversible! {
//!     /// y += a·b (seed 001 Listing 1).
//!     pub fn multiplier<T: Arith>(y: &mut T, a: &mut T, b: &mut T) {
//!         y += a * b;
//!     }
//! }
//! let (mut y, mut a, mut b) = (2, 3, 5);
//! multiplier(&mut y, &mut a, &mut b)?;
//! assert_eq!((y, a, b), (17, 3, 5));
//! multiplier::uncall(&mut y, &mut a, &mut b)?;          // ~multiplier
//! assert_eq!((y, a, b), (2, 3, 5));
//! // Gradient of y with respect to (y, a, b), at (0, 2, 3):
//! assert_eq!(adjoint_rev::grad(multiplier {}, (0.0, 2.0, 3.0), 0)?, (1.0, 3.0, 2.0));
//! # Ok::<(), adjoint_rev::InvertibilityError>(())
//! ```
//!
//! ## Why this syntax
//!
//! NiLang writes `x ← 0` / `x → 0` and `~f`; those are not Rust tokens. `reversible!` is a
//! function-like macro with its own statement parser, so its body reads as Rust where Rust has a
//! spelling (`+=`, `let`, `if`, `while`, `for … in a..b`, method calls) and borrows NiLang's where
//! it has none (`unlet`, `@routine`, `~`, `(pre, post)` conditions). Every parameter is `&mut`:
//! reversible code has no return values, only arguments changed in place. Each function returns
//! `Result<(), InvertibilityError>`: a failed reversibility check is an error value naming the
//! statement and the values seen, never a silent wrong answer. Nothing is rolled back: after an
//! error the arguments hold what the statements before the failing one made of them (the
//! failing statement writes nothing), so keep a copy of inputs you need again (the gradient
//! routes take theirs by value). The checked gradient routes
//! ([`grad`], [`jacobian`], [`jacobian_lanes`], [`hessian`]) also check that the inverse rebuilt
//! the inputs, to the deallocation check's tolerance (`1e-8` absolute plus relative; `1e-5` for
//! an `f32` input, since the inverse runs in `f64` from the forward call's `f32` results): floating-
//! point `+=`/`-=` undo each other only up to rounding, and an unstable inverse amplifies it
//! (a gradient along another trajectory is [`InvertibilityError::Inputs`]). Drifts below that
//! tolerance pass, as in ancillas; unchecked routes check nothing. The tolerance is relative to
//! the input, not to the largest value it passed through: a small input absorbed by a large
//! term (`y += 1e30`, or `sq += x·x` over `x = [1, 1e9]` with `sq` starting at 0: the 1 is lost
//! in 1e18) comes back as the rounding of that term and is refused, even where the function
//! never reads it again, because where it does (`w += y * x; y += 1e30;`), the inverse rebuilds `y` as 0 and `∂w/∂x`
//! would be 0, not `y`.
//!
//! ## The language: each statement and its inverse (seed 000 Table I)
//!
//! | statement | meaning | inverse |
//! |---|---|---|
//! | `y += f(args)` | accumulate an instruction's result (`args` may repeat a place, `y += x * x`; `y` may not be among them) | `y -= f(args)` |
//! | `y -= f(args)` | | `y += f(args)` |
//! | `y ^= a & b` (also or, xor, not, or a plain `a`) | XOR-accumulate (integers, `bool`); there are no shift instructions (a xorshift's `s ^= s >> 33` is refused): mix with `ROTL`/`ROTR` and `*=` by an odd constant | itself |
//! | `y *= x`, `y /= x` | scale ([`Scale`], which every [`RevReal`] has: exact for [`ULog`] over fixed point, and for odd `x` on wrapping integers, where `/=` undoes `*=`; an even factor is an error, and so is a floating-point factor of 0 or ±∞ or a product that overflows or underflows to 0, or a `ULog` factor whose log is not finite or a product whose log overflows, in checked and unchecked code) | `y /= x`, `y *= x` |
//! | `SWAP(a, b)`, `NEG(x)`, `CONJ(x)` | exchange, negate, conjugate | themselves |
//! | `ROT(a, b, θ)` / `IROT(a, b, θ)` | rotate `(a, b)` by `±θ` | `IROT` / `ROT` |
//! | `INC(x)` / `DEC(x)` | `x ± 1` | `DEC` / `INC` |
//! | `ROTL(x, k)` / `ROTR(x, k)` | rotate an integer's bits by `k: u32` | `ROTR` / `ROTL` |
//! | `NAME(args)` | your [`Instruction`] | its `inverse` |
//! | `g(args)` | call a reversible function (an argument `x.clone()` is a copy the callee may not change; what flows into it reaches `x`); a plain Rust `g` is rustc's error ``function `g` is not a crate or module`` (the call goes through `g::uncall` and friends, which only `reversible!` defines): use `@safe` for code outside the language | `~g(args)` (`g::uncall`) |
//! | `let x = v;` | allocate an ancilla (NiLang `x ← v`); where `v` is a variable, field or element (or its `.clone()`), `x` is a copy that starts without `v`'s gradient | `unlet x = v;` |
//! | `unlet x = v;` | check `x == v`, deallocate (NiLang `x → v`); a copy of a variable gives its gradient to `v`, as `x -= v; unlet x = 0;` would. Any other `v` is a constant: gradients do not flow into what it is computed from | `let x = v;` |
//! | `@routine { … }` … `~@routine;` | compute, use, uncompute (`@routine name { … }` … `~@routine name;` for named ones, undone in any order) | the same (the middle inverted) |
//! | `~{ … }` | the block's inverse, in place | `{ … }` |
//! | `if (pre, post) { A } else { B }` | branch on `pre`; check `post == pre` after | `if (post, pre) { ~A } else { ~B }` |
//! | `if (pre, ~) { … }`, `if pre { … }` | `post` is `pre` | |
//! | `while (pre, post) { S }` | `post` false on entry, true after every iteration | `while (post, pre) { ~S }` |
//! | `for i in a..b { S }` (`..=`, `(a..b).step_by(s)`, `.rev()`) | bounds and step must not change, and a step must be positive (checked code: an error before the loop); `i` is read-only (an operand or call argument gets a copy, an expression over it such as `T::from_f64(i as f64)` is a constant of the iteration; a target is a compile error; so is an `i` named as a parameter) | `for i in (a..b).rev() { ~S }` |
//! | `@safe stmt;` | external statement (printing, asserts) | itself |
//! | `@invcheckoff stmt` | `stmt` without run-time checks (alias checks stay); `@invcheckoff @routine { … }` runs the routine and its uncomputation without checks (`@invcheckoff ~@routine;` is a compile error: the uncomputation takes its checks from its routine) | likewise |
//!
//! **Conditions** are Rust `bool` expressions over the arguments. A comparison with an
//! unsuffixed float literal compares the value's primal, so generic code reads as NiLang's:
//! `if (x > 0.0, ~)`, `while (x < 10.0, n != 0.0)` work for every `T: RevReal` (on [`GVar`]s
//! too) without `.value()`; so does an unsuffixed integer literal (`if (x > 0, ~)`), which an
//! integer (`n == 1` for `n: &mut usize`) compares in its own type; comparisons between two
//! values use `PartialOrd` (`if (a < b, ~)`). The primal is compared as `f64` with the literal's
//! nearest `f64`, as NiLang compares in Julia: for `f32` values that differs from Rust, where
//! `x > 0.1` compares with `0.1f32` (`x = 0.1f32` is above `0.1` as `f64`: write `0.1f32`, or
//! compare with a variable, where the `f32` comparison is wanted). Literals in instructions are
//! rounded to the instruction's type once (`y += x * 0.1` adds `x · 0.1f32` for `f32`).
//!
//! **Instructions** (`y += …`): a variable, `a + b`, `a - b`, `a * b`, `a / b`, `-a`,
//! `identity(a)`, and every function of the shared rule table ([`adjoint_core::rules`]) in method
//! or function form: `x.exp()`/`exp(x)`, `ln`/`log`, `sqrt`, `cbrt`, `recip`, `powi(n)`,
//! `powf`, `sin`, `cos`, `tan`, `asin`, `acos`, `atan`, `atan2`, `sinh`, `cosh`, `tanh`,
//! `asinh`, `acosh`, `atanh`, `abs`, `erf`, `lgamma`, `digamma`, `exp2`, `exp_m1`, `ln_1p`,
//! `log2`, `log10`, `hypot`, `min`, `max`. Their derivatives come from the same table as every
//! other engine of adjoint. The exponent `n` of `powi(n)` is read, not differentiated, and may not
//! read the target (`y += x.powi(y.value() as i32)` is a compile error: the inverse would take
//! another power).
//!
//! **Operands** are *data views*: variables, struct fields (`s.a`), tuple fields (`t.0`), complex
//! parts (`z.re`, `z.im`), elements (`v[i]`, `m[i][j]`) — or constants (literals, or any
//! expression that mentions no variable of the function but loop variables, like
//! `T::from_f64(0.5)` or `T::from_f64(i as f64)`). A call gets its place arguments by reference
//! and every other argument (a constant, a loop variable, a `.clone()` of a place, or a value
//! computed from variables) as a copy, which the callee must leave as it was: a value written
//! into a copy would be lost, and the call could not be undone. A value computed from the
//! function's variables must be a plain number ([`PlainNumber`]: an integer, `bool`, `f32` or
//! `f64`, such as `rrfib(out, k - 1)`, `g(y, v.len())` or `g(y, x.value())`), since no
//! gradient could flow back through it; one of a type that may carry a gradient (`g(y, h(x))`
//! with `h(x): T`, `g(y, [a, b])`, `g(y, m!(x))`) is a compile error at the argument: compute
//! it into an ancilla with instructions first. So is one that reads a place the same call may
//! change (`addto(k, k + 1)`: undoing the call would recompute it from the changed `k`). A
//! built-in instruction given a constant where it writes (`SWAP(y, 1.0)`) is a compile error; a
//! call (or an instruction of yours) that changes a copy is an
//! [`InvertibilityError::Constant`] in checked code.
//!
//! **Literals** take the number type of the instruction, and keep their value: an integer literal
//! is exact in every integer width and in fixed point (`c += 0x9E37_79B9_7F4A_7C15` on `u64`,
//! `x += 2147483647` on `I32F32`); a decimal literal in fixed point is correctly rounded (exact
//! when representable: `0.00000000023283064365386962890625` is `I32F32::DELTA`); in floating
//! point a literal is its nearest `f64` (then `f32`). A suffixed literal keeps its type: `2u64`
//! is an operand of `u64` instructions only. A literal that does not fit — `256` in a `u8`
//! instruction, `-1` in an unsigned one, `2.5` in an integer one, `32768` in `I16F16`, `1e39` in
//! an `f32` one, `1e400` anywhere — is a compile error (when the function is compiled for that
//! type), never a rounding, a wrap or an infinity:
//!
//! ```compile_fail
//! adjoint_rev::reversible! {
//!     fn f(y: &mut f32, x: &mut f32) { y += x * 1e39; }
//! }
//! f(&mut 0.0, &mut 1.0).unwrap();
//! ```
//!
//! ```
//! adjoint_rev::reversible! {
//!     fn f(y: &mut f32, x: &mut f32) { y += x * 3.4028235e38; } // f32::MAX fits
//! }
//! let mut y = 0.0;
//! f(&mut y, &mut 0.5).unwrap();
//! assert_eq!(y, f32::MAX * 0.5);
//! ```
//!
//! ```compile_fail
//! adjoint_rev::reversible! {
//!     fn f(c: &mut u8, x: &mut u8) { c += x * 256; }
//! }
//! f(&mut 0, &mut 1).unwrap();
//! ```
//!
//! ```compile_fail
//! adjoint_rev::reversible! {
//!     fn f(c: &mut u64) { c -= -1; }
//! }
//! f(&mut 0).unwrap();
//! ```
//!
//! ```compile_fail
//! adjoint_rev::reversible! {
//!     fn f(c: &mut i64) { c += 2.5; }
//! }
//! f(&mut 0).unwrap();
//! ```
//!
//! ```compile_fail
//! adjoint_rev::reversible! {
//!     fn f(c: &mut fixed::types::I16F16) { c += 32768; }
//! }
//! f(&mut fixed::types::I16F16::ZERO).unwrap();
//! ```
//!
//! ```compile_fail
//! adjoint_rev::reversible! {
//!     fn f(y: &mut f64, x: &mut f64) { y += x * 2u64; }   // a `u64` literal in an `f64` instruction
//! }
//! ```
//!
//! **One place read twice** (`y += x * x`, `y += x.hypot(x)`, and `y += v[i] * v[j]` whenever
//! `i == j` at run time) is an instruction like any other: the value is computed from the place
//! read twice, and on [`GVar`]s the place's gradient receives both operands' contributions
//! (`2x·ȳ` for `x * x`), in checked and unchecked code, Hessians included.
//!
//! ```
//! use adjoint_rev::prelude::*;
//! reversible! {
//!     fn sum_squares<T: Arith>(loss: &mut T, y: &mut Vec<T>) {
//!         for i in 0..y.len() {
//!             loss += y[i] * y[i];
//!         }
//!     }
//! }
//! let (_, gy) = adjoint_rev::grad(sum_squares {}, (0.0, vec![0.5, -1.5, 2.0]), 0)?;
//! assert_eq!(gy, [1.0, -3.0, 4.0]); // 2y
//! # Ok::<(), adjoint_rev::InvertibilityError>(())
//! ```
//!
//! **Rejected at compile time**, with the error at the offending tokens (the errors of an
//! invocation are reported together, not only the first: every statement's syntax errors, then,
//! when there are none, every ancilla-lifetime error): a target that appears
//! among its own arguments (`y += y * x`), a call whose arguments alias (`g(x, x)`), an index
//! that reads what its statement may write (`i += v[i]`, `w[0] += w[w[0]]`, `g(v[i], i)`; lengths
//! such as `x[x.len() - 1 - i]` are fine: copy such an index into an ancilla first), nested
//! expressions (`z += f(g(x))`, `z += a * b * c`), plain assignment (`y = x`), re-allocating a
//! live ancilla, using or deallocating a deallocated one, an ancilla never deallocated, a `while`
//! without a post-condition (`while (pre, ~)` included: `pre` is false after the last iteration). A target that may be one of its arguments only at run time
//! (`v[i] += v[j] * x` when `i == j`), and arguments of an instruction or call that may alias only
//! at run time (`SWAP(x[i], x[j])`, `g(x[i], x[j])`), are checked at run time (an
//! [`InvertibilityError::Alias`]) — in checked and unchecked code alike: skipping these checks
//! could change the result, and each is a comparison of two addresses. Such call arguments are
//! then copied into and out of the call, so they must be `Copy` (numbers, arrays of numbers):
//! rows `m[i]`, `m[j]` of a `Vec<Vec<T>>` are a compile error saying so — pass `m` and the
//! indices instead. Different fields of one element (`g(v[i].pos, v[i].vel)`: the same index,
//! then different fields) are never the same storage: they are passed directly, through one
//! borrow of the element, whatever their type. A copied argument (`x.clone()`, `v[j].clone()`) of a place the callee may
//! change through another argument is an error before the call runs: a compile error (at
//! `cargo build`) where they are the same storage whatever the indices (`f(x, x.clone())`,
//! `f(v, v[0].clone())` where `f` writes its first argument), else an
//! [`InvertibilityError::AliasedCopy`] in both modes (`f(v[i], v[j].clone())` at `i == j`);
//! where the callee only reads that argument, the copy is fine.
//!
//! **Checked at run time** (an [`InvertibilityError`], which names the function, the statement as
//! written and the values): `unlet` finds a different value; an `if`'s post-condition disagrees
//! with its pre-condition; a `while`'s post-condition is true on entry or false after an
//! iteration; a `for` loop's bounds changed; an instruction takes its target from a finite value
//! to NaN or ±∞ (`y += x.ln()` at `x = 0`: no inverse can undo it); `y += a / b` on integers or
//! fixed point divides by zero (reported before it runs; unchecked, Rust's `/` panics there).
//! `@invcheckoff stmt` removes the checks from one
//! statement (and, for a call, from everything the callee runs); `f::call_unchecked` and
//! `f::uncall_unchecked` run a whole proven function without checks (except the alias checks
//! above, which guard the result rather than reversibility). Without checks, the
//! forward code also skips uncomputing a routine that writes only its own ancillas and whose
//! ancillas carry no gradient when it would start ([`Ancilla::no_gradient`]: plain numbers
//! always, a [`GVar`] whose gradient is still zero, as in the routines a gradient's inverse
//! pass runs forward) — they are dropped right after anyway, and the uncomputation would move
//! no gradient. An unchecked inverse (`f::uncall_unchecked`, `~f(…)` in unchecked code), which
//! computes the routine first and uncomputes it last, skips that last uncomputation alike when
//! the ancillas are plain numbers, so an uncall costs what a call costs. A call in the routine counts as writing the arguments its callee may
//! write (the callee's hidden `__WRITES` constants: targets and arguments of its instructions,
//! everything when it runs `@safe` code, and what its own calls may write, seen through up to
//! three levels of calls), so `i_dist(d[e], x, a, b, k)` into an ancilla `d` is skippable, and
//! so is `i_var`'s routine, whose `i_mean` → `i_sum` only read `x`. The optimiser may delete other dead uncomputation.
//!
//! A function whose last statement is `~@routine` also gets `f::gradient_pass_unchecked(args…,
//! seed)`: `f`, `seed(args…)` (set the results' cotangents) and `f`'s inverse in one pass on
//! [`GVar`]s, without checks. The routine `f` uncomputes at its end is exactly what its inverse
//! recomputes first, so both are left out and the routine runs once — when that routine writes
//! nothing but its own ancillas (else the seed would see arguments still holding the routine's
//! values, and the pass is `call_unchecked`, seed, `uncall_unchecked`); on arguments whose
//! gradients are zero on entry, the results are those of `call_unchecked`, `seed`,
//! `uncall_unchecked` (bit for bit where the inverse restores each routine's inputs exactly, as
//! when they are only read). The pass also keeps what its callees' routines compute (NiLang's
//! checkpointing on a stack, [`Kept`]): a call in its forward half to a function that ends by
//! uncomputing a routine writing only its own ancillas (the same test as skipping, through the
//! callees' `__WRITES`) leaves those ancillas on the stack instead, and the mirrored uncall in
//! the inverse half takes them back instead of recomputing the routine — for the Petersen loss,
//! each of its 45 `i_dist` calls computes its sum of squares once instead of twice. Only forward
//! halves keep (every gradient is zero there, so the kept values carry none: the compiler need
//! not compute them). The same holds for a routine uncomputed inside the pass's body or a
//! callee's (in a branch, say): its uncomputation keeps its ancillas and the inverse's
//! recomputation takes them back. Petersen gradient: 4.0–6.3 → 2.8–4.9 (the one pass) → 2.8–4.1× the plain program
//! (keeping; 2.87–3.30× since the twenty-third session's indexed operands, BENCHMARKS.md).
//!
//! ```
//! use adjoint_rev::prelude::*;
//! reversible! {
//!     fn f<T: RevReal>(y: &mut T, x: &mut T) {
//!         @routine { let n = T::zero(); n += x.exp(); }
//!         y += n.sin();
//!         ~@routine;
//!     }
//! }
//! let (mut y, mut x) = (GVar::new(0.0, 0.0), GVar::new(0.5, 0.0));
//! f::gradient_pass_unchecked(&mut y, &mut x, |y, _| y.g = 1.0).unwrap();
//! let want = 0.5f64.exp().cos() * 0.5f64.exp(); // d sin(eˣ)/dx
//! assert!((x.g - want).abs() < 1e-15);
//! ```
//!
//! **Number systems** (seed 001 Section 2): integers (wrapping, so `+=`/`-=` are exact), `f64`,
//! `f32`, fixed point (`fixed::FixedI32`/`FixedI64`, exact `+=`/`-=`), complex numbers
//! (`num_complex::Complex<T>`, built on `T`'s instructions: [`Arith`]'s `+ − × ÷`, `SWAP`,
//! `NEG`, `CONJ`, and `ROT` on the parts; no transcendental instructions — `z.exp()` is refused
//! — but the parts are real places, and [`library`] has a complex log), and [`ULog`] (exact
//! `*=`/`/=`).
//! Generic code names what it needs: [`Arith`] (`+ − × ÷`), [`RevReal`] (the rule table,
//! `ROT`), [`Scale`] (`*=`, `/=`).
//!
//! ## A worked gradient
//!
//! `y += log|x|` for complex `x`, written with an ancilla routine (seed 001 Listing 3), and its
//! gradient checked against the closed form `∂ln|x|/∂x = x/|x|²`:
//!
//! ```
//! use adjoint_rev::prelude::*;
//!
//! reversible! {
//!     pub fn log_abs<T: RevReal>(y: &mut T, x: &mut Complex<T>) {
//!         @routine {
//!             let n = T::zero();
//!             n += x.re.hypot(x.im);
//!         }
//!         y += n.ln();
//!         ~@routine;
//!     }
//! }
//! let x = Complex::new(1.0, 1.2);
//! // Forward and back: the inverse restores y (floating-point += and -= round).
//! let (mut y, mut z) = (0.5f64, x);
//! log_abs(&mut y, &mut z)?;
//! log_abs::uncall(&mut y, &mut z)?;
//! assert!((y - 0.5).abs() < 1e-15);
//! // Gradient of y: run forward, wrap in GVar, seed ∂y = 1, run the inverse.
//! let (_, gx) = adjoint_rev::grad(log_abs {}, (0.0, x), 0)?;
//! let n2 = x.norm_sqr();
//! assert!((gx.re - x.re / n2).abs() < 1e-15 && (gx.im - x.im / n2).abs() < 1e-15);
//! # Ok::<(), adjoint_rev::InvertibilityError>(())
//! ```
//!
//! Under the hood, `grad` ran `log_abs` on `f64`s, then `log_abs::uncall` on
//! `(GVar<f64>, Complex<GVar<f64>>)`: the uncall computes `n` again, runs `y -= n.ln()` — which
//! on `GVar`s also does `n.g += y.g / n` — and uncomputes `n`, whose `hypot` instruction passes
//! `n.g` on to `x.re.g` and `x.im.g`. No value was stored anywhere.
//!
//! In floating point, the gradient an ancilla holds when its routine has been undone is zero
//! only up to rounding: what its uses added and what its uncomputation took back are equal
//! sums computed twice. An ancilla declared inside a loop body (or a routine) starts each
//! iteration with no gradient and drops that residue when it is deallocated; one declared once
//! and reused by every iteration carries it into the next, where it is passed on to the inputs
//! (in a Gaussian mixture with a component `e^50` times steeper than another, a mean's
//! derivative came out −0.5 where it is 0). Declare per-iteration intermediates inside the
//! loop.
//!
//! ## What this crate is not
//!
//! Not a general AD tool for arbitrary Rust: code must be written in the reversible language
//! (use `adjoint::tape` for ordinary code). Floating-point `+=`/`-=` are treated as reversible,
//! as in NiLang; they are exactly reversible only for integers and fixed point.

#![warn(missing_docs)]

extern crate self as adjoint_rev;

mod ad;
mod error;
mod gvar;
mod instr;
mod kept;
mod lit;
mod num;
mod ulog;

pub mod examples;
pub mod library;

pub use ad::{
    grad, hessian, jacobian, jacobian_lanes, value_and_grad, value_and_grad_unchecked,
    Differentiable, Reversible,
};
pub use adjoint_core::rules::{Op1, Op2};
pub use adjoint_core::Cotangents;
pub use adjoint_rev_macros::reversible;
pub use error::{Ancilla, InvertibilityError, PlainNumber, Site};
pub use gvar::{ExactZero, GVar, Gradient};
pub use instr::{positive_step, steps, Instruction, RotateBits, Steps};
pub use kept::Kept;
pub use lit::Literals;
#[doc(hidden)]
pub use lit::{powi_exponent, PowiExponent};
pub use num::{Arith, RevReal, Scale};
pub use ulog::ULog;

/// The `fixed` crate (fixed-point numbers), re-exported so that its types are the ones this crate
/// implements its traits for, whatever version of `fixed` a user's `Cargo.toml` names.
///
/// ```
/// use adjoint_rev::prelude::*;
/// use adjoint_rev::fixed::types::I32F32;
///
/// reversible! {
///     fn step<T: Arith>(y: &mut T, a: &mut T, b: &mut T) { y += a * b; }
/// }
/// let (mut y, mut a, mut b) = (I32F32::ZERO, I32F32::from_num(1.5), I32F32::from_num(2));
/// step(&mut y, &mut a, &mut b)?;
/// assert_eq!(y, I32F32::from_num(3));
/// step::uncall(&mut y, &mut a, &mut b)?;
/// assert_eq!(y, I32F32::ZERO);
/// // The prelude names the complex type too.
/// let z: Complex<f64> = Complex::new(1.0, 2.0);
/// assert_eq!(z.re, 1.0);
/// # Ok::<(), adjoint_rev::InvertibilityError>(())
/// ```
pub use fixed;
/// Complex numbers (`num_complex::Complex`), re-exported: reversible code over `Complex<T>` uses
/// this type.
pub use num_complex::Complex;

#[doc(hidden)]
pub use ad::NotGeneric;
#[doc(hidden)]
pub use error::{
    computed_arg, copy_of, distinct, no_gradient, not_copied, passive, same, ShowDebug, ShowOther,
    Shown,
};
#[doc(hidden)]
pub use lit::{like, lit, literal_bits, shared_arg, CmpLit, CmpLitOther, CmpLitReal, SharedArg};

/// The built-in instructions, as types implementing [`Instruction`].
pub mod instr_types {
    pub use crate::instr::{CONJ, DEC, INC, IROT, NEG, ROT, ROTL, ROTR, SWAP};
}

/// What reversible code usually needs: the macro, the number traits, `GVar`, `ULog`, `Complex`
/// and the `fixed` crate.
pub mod prelude {
    pub use crate::{
        fixed, reversible, Ancilla, Arith, Complex, Cotangents, Differentiable, GVar, Instruction,
        InvertibilityError, RevReal, Scale, ULog,
    };
}
