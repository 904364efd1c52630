//! Reversibility errors: what the generated checks report.

use core::fmt;

/// Where a check failed: the reversible function, the user's statement as written, and whether
/// the function was running backwards (`uncall`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// The reversible function.
    pub function: &'static str,
    /// The statement, as written in the function's source.
    pub statement: &'static str,
    /// `true` when the failure happened in `uncall` (the inverse), which runs the statement's
    /// inverse.
    pub backwards: bool,
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dir = if self.backwards {
            " (running backwards)"
        } else {
            ""
        };
        write!(
            f,
            "in `{}`{dir}, statement `{}`",
            self.function, self.statement
        )
    }
}

/// A reversibility check failed: the program would not be undone exactly by its inverse.
///
/// Reversible functions return `Result<(), InvertibilityError>`; the error names the function,
/// the statement and the values seen. `@invcheckoff` removes the checks from proven code.
///
/// ```
/// adjoint_rev::reversible! {
///     fn leak(x: &mut f64) {
///         let t = 0.0;
///         t += x.exp();       // never uncomputed
///         unlet t = 0.0;
///     }
/// }
/// let err = leak(&mut 1.0).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "in `leak`, statement `unlet t = 0.0`: ancilla `t` should be 0.0 when deallocated, but is 2.718281828459045"
/// );
/// ```
///
/// New kinds of check may be added (`#[non_exhaustive]`): a `match` needs a `_` arm.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvertibilityError {
    /// `unlet x = v` found `x ≠ v`.
    Deallocation {
        /// Where.
        site: Site,
        /// The ancilla.
        variable: &'static str,
        /// The value declared in `unlet`.
        expected: String,
        /// The value found.
        found: String,
    },
    /// An `if (pre, post)` whose post-condition disagrees with the pre-condition.
    Condition {
        /// Where.
        site: Site,
        /// The condition that chose the branch (the pre-condition as written; running
        /// backwards, the post-condition).
        pre: bool,
        /// The condition checked after the branch (the post-condition as written; running
        /// backwards, the pre-condition).
        post: bool,
        /// What the condition checked after the branch read, and its values then
        /// (`"x = 0.5, n = 3"`; empty where it read nothing but constants).
        values: String,
    },
    /// A `while (pre, post)` entered with its exit check already true: the post-condition
    /// running forwards; running backwards (`while (post, pre)`), the pre-condition.
    LoopEntry {
        /// Where.
        site: Site,
        /// The condition that was checked, as written (`post` forwards, `pre` backwards); it was
        /// `true` and should have been `false`.
        condition: &'static str,
        /// What the condition read (`"i = 0"`).
        values: String,
    },
    /// A `while (pre, post)` whose exit check is false after an iteration: the post-condition
    /// running forwards; running backwards, the pre-condition.
    LoopIteration {
        /// Where.
        site: Site,
        /// The condition that was checked, as written (`post` forwards, `pre` backwards); it was
        /// `false` and should have been `true`.
        condition: &'static str,
        /// What the condition read (`"i = 0"`).
        values: String,
    },
    /// A `for` loop whose bounds changed while it ran.
    Bounds {
        /// Where.
        site: Site,
        /// The bounds (and step) before the loop.
        before: String,
        /// The bounds after the loop.
        after: String,
    },
    /// `y *= x` / `y /= x` with a factor that has no exact inverse (an even factor on a
    /// wrapping integer).
    Scale {
        /// Where.
        site: Site,
        /// Why the factor is not invertible.
        why: String,
    },
    /// An instruction took its target from a finite value to NaN or ±∞ (checked code): no
    /// inverse can undo that (`y += ln x` at `x = 0`, then `y -= ln x` gives NaN).
    NonFinite {
        /// Where.
        site: Site,
        /// The value the target took.
        value: String,
    },
    /// An instruction on a target that was ±∞ whose inverse does not bring it back (checked
    /// code): `y += x` at `y = x = −∞` leaves `−∞`, and `y −= x` then gives NaN; `+∞ += −∞`
    /// gives NaN. From ±∞ only a finite increment can be undone. Nothing was changed.
    InfiniteTarget {
        /// Where.
        site: Site,
        /// The target's value before the step.
        value: String,
        /// What undoing the step gave.
        undone: String,
    },
    /// An instruction whose operation has no value in the number type (checked code): integer
    /// or fixed-point division by zero. Nothing was changed.
    Undefined {
        /// Where.
        site: Site,
        /// What has no value.
        why: String,
    },
    /// A call (or an instruction of the user's) changed an argument that was a constant, a
    /// literal or a loop variable, passed as a copy: the value it wrote is lost, so the
    /// statement cannot be undone (checked code).
    Constant {
        /// Where.
        site: Site,
        /// The argument, as written.
        argument: &'static str,
        /// Its value.
        expected: String,
        /// The value the callee left in the copy.
        found: String,
    },
    /// A checked gradient, Jacobian or Hessian: running the inverse on gradient-carrying values
    /// did not rebuild an input (to the deallocation check's tolerance, `f32`'s for an `f32`
    /// input: the inverse runs in `f64` from the forward call's `f32` results). Floating-point `+=` and
    /// `-=` undo each other only up to rounding, and an unstable inverse (a leapfrog integrator
    /// past its stability limit, say) amplifies that: the gradient would have been computed
    /// along another trajectory. A term absorbed by a much larger running value (`0 + 1 + 1e17`
    /// is `1e17`; undone, `−1`) comes back as that rounding too: see the crate docs for why it
    /// is refused even where the function does not read it again.
    Inputs {
        /// Where: the function, run backwards.
        site: Site,
        /// The input scalar, in [`Differentiable`](crate::Differentiable) order.
        scalar: usize,
        /// Its value as given.
        expected: String,
        /// The value the inverse rebuilt.
        found: String,
    },
    /// Two arguments of an instruction or call are the same element.
    Alias {
        /// Where.
        site: Site,
        /// One argument.
        a: &'static str,
        /// The other argument.
        b: &'static str,
    },
    /// A call or instruction argument copies (`v[j].clone()`) a place that it may change
    /// through another argument (`f(v[i], v[j].clone())` at `i == j`). Where the two are the
    /// same storage whatever the indices (`f(x, x.clone())`, `f(v, v[0].clone())`,
    /// `ROT(a, b, a.clone())`) and the callee writes that argument, it is a compile error (at
    /// `cargo build`, not `cargo check`: the callee's write table is a constant evaluated then):
    ///
    /// ```compile_fail,E0080
    /// use adjoint_rev::prelude::*;
    /// reversible! {
    ///     fn add_square<T: RevReal>(a: &mut T, b: &mut T) {
    ///         a += b * b;
    ///     }
    ///     // `x += x²` cannot be undone
    ///     fn self_square<T: RevReal>(x: &mut T) {
    ///         add_square(x, x.clone());
    ///     }
    /// }
    /// let _ = self_square(&mut 3.0f64);
    /// ```
    ///
    /// while a copy of what the callee only reads is fine:
    ///
    /// ```
    /// use adjoint_rev::prelude::*;
    /// reversible! {
    ///     fn add_product<T: RevReal>(y: &mut T, a: &mut T, b: &mut T) {
    ///         y += a * b;
    ///     }
    ///     fn add_square<T: RevReal>(y: &mut T, x: &mut T) {
    ///         add_product(y, x, x.clone());
    ///     }
    /// }
    /// let (mut y, mut x) = (1.0f64, 3.0f64);
    /// add_square(&mut y, &mut x)?;
    /// assert_eq!(y, 10.0);
    /// # Ok::<(), InvertibilityError>(())
    /// ```
    AliasedCopy {
        /// Where.
        site: Site,
        /// The place the callee may change.
        place: &'static str,
        /// The copy of it.
        copy: &'static str,
    },
}

impl InvertibilityError {
    #[doc(hidden)]
    pub fn deallocation(
        site: Site,
        variable: &'static str,
        expected: String,
        found: String,
    ) -> Self {
        Self::Deallocation {
            site,
            variable,
            expected,
            found,
        }
    }
    #[doc(hidden)]
    pub fn constant(site: Site, argument: &'static str, expected: String, found: String) -> Self {
        Self::Constant {
            site,
            argument,
            expected,
            found,
        }
    }
    #[doc(hidden)]
    pub fn condition(site: Site, pre: bool, post: bool, values: String) -> Self {
        Self::Condition {
            site,
            pre,
            post,
            values,
        }
    }
    #[doc(hidden)]
    pub fn loop_entry(site: Site, condition: &'static str, values: String) -> Self {
        Self::LoopEntry {
            site,
            condition,
            values,
        }
    }
    #[doc(hidden)]
    pub fn loop_iteration(site: Site, condition: &'static str, values: String) -> Self {
        Self::LoopIteration {
            site,
            condition,
            values,
        }
    }
    #[doc(hidden)]
    pub fn bounds(site: Site, before: String, after: String) -> Self {
        Self::Bounds {
            site,
            before,
            after,
        }
    }

    #[doc(hidden)]
    pub fn scale(site: Site, why: String) -> Self {
        Self::Scale { site, why }
    }
    #[doc(hidden)]
    pub fn non_finite(site: Site, value: String) -> Self {
        Self::NonFinite { site, value }
    }
    #[doc(hidden)]
    pub fn infinite_target(site: Site, value: String, undone: String) -> Self {
        Self::InfiniteTarget {
            site,
            value,
            undone,
        }
    }
    #[doc(hidden)]
    pub fn undefined(site: Site, why: String) -> Self {
        Self::Undefined { site, why }
    }

    /// Where the check failed.
    pub fn site(&self) -> &Site {
        match self {
            Self::Deallocation { site, .. }
            | Self::Condition { site, .. }
            | Self::LoopEntry { site, .. }
            | Self::LoopIteration { site, .. }
            | Self::Bounds { site, .. }
            | Self::Scale { site, .. }
            | Self::NonFinite { site, .. }
            | Self::InfiniteTarget { site, .. }
            | Self::Undefined { site, .. }
            | Self::Constant { site, .. }
            | Self::Inputs { site, .. }
            | Self::Alias { site, .. }
            | Self::AliasedCopy { site, .. } => site,
        }
    }
}

/// `"; now x = 0.5"`, or nothing where a condition read only constants.
fn now(values: &str) -> String {
    if values.is_empty() {
        String::new()
    } else {
        format!("; now {values}")
    }
}

/// A value shown in an error message by its `Debug` text, or as `…` where its type has none
/// (autoref specialisation: `(&Shown(&v)).show()` finds [`ShowDebug`] on `Shown` first, and
/// [`ShowOther`] on `&Shown` only where `v` is not `Debug`). The generated code of a failed
/// condition check uses it for what the condition read.
#[doc(hidden)]
pub struct Shown<'a, T: ?Sized>(pub &'a T);

#[doc(hidden)]
pub trait ShowDebug {
    fn show(&self) -> String;
}

impl<T: fmt::Debug + ?Sized> ShowDebug for Shown<'_, T> {
    fn show(&self) -> String {
        format!("{:?}", self.0)
    }
}

#[doc(hidden)]
pub trait ShowOther {
    fn show(&self) -> String;
}

impl<T: ?Sized> ShowOther for &Shown<'_, T> {
    fn show(&self) -> String {
        "…".into()
    }
}

impl fmt::Display for InvertibilityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deallocation { site, variable, expected, found } => {
                write!(f, "{site}: ancilla `{variable}` should be {expected} when deallocated, but is {found}")
            }
            // Backwards, the branch is chosen by the post-condition as written, and the
            // pre-condition is checked after it.
            Self::Condition {
                site,
                pre,
                post,
                values,
            } if site.backwards => write!(
                f,
                "{site}: running backwards, the post-condition was {pre} but the pre-condition is \
                 {post} after the branch (they must agree for the branch to be undone){}",
                now(values)
            ),
            Self::Condition {
                site,
                pre,
                post,
                values,
            } => write!(
                f,
                "{site}: the pre-condition was {pre} but the post-condition is {post} after the branch \
                 (they must agree for the branch to be undone){}",
                now(values)
            ),
            Self::LoopEntry {
                site,
                condition,
                values,
            } if site.backwards => write!(
                f,
                "{site}: the pre-condition `{condition}` is true before the loop runs backwards \
                 (running backwards, `{condition}` must be false on entry: the loop ran forwards until it was){}",
                now(values)
            ),
            Self::LoopEntry {
                site,
                condition,
                values,
            } => write!(
                f,
                "{site}: the post-condition `{condition}` is true before the loop (it must be false on entry){}",
                now(values)
            ),
            Self::LoopIteration {
                site,
                condition,
                values,
            } if site.backwards => write!(
                f,
                "{site}: the pre-condition `{condition}` is false after an iteration backwards \
                 (running backwards, `{condition}` must be true after every iteration: it was true before each one forwards){}",
                now(values)
            ),
            Self::LoopIteration {
                site,
                condition,
                values,
            } => write!(
                f,
                "{site}: the post-condition `{condition}` is false after an iteration (it must be true after every iteration){}",
                now(values)
            ),
            Self::Bounds { site, before, after } => {
                write!(f, "{site}: the loop's range changed while it ran: {before} before, {after} after")
            }
            Self::Scale { site, why } => write!(f, "{site}: {why}"),
            Self::NonFinite { site, value } => write!(
                f,
                "{site}: the target went from a finite value to {value}, which no inverse can undo"
            ),
            Self::InfiniteTarget {
                site,
                value,
                undone,
            } => write!(
                f,
                "{site}: the target was {value}, and undoing this step there gives {undone}: from \
                 ±∞ only a finite amount can be added and taken back"
            ),
            Self::Undefined { site, why } => write!(f, "{site}: {why}"),
            Self::Constant { site, argument, expected, found } => write!(
                f,
                "{site}: the argument `{argument}` is a constant passed as a copy, and the call changed it \
                 from {expected} to {found}: that value is lost, so the call cannot be undone. Pass a variable \
                 (an ancilla holding the value: `let t = …;` … `unlet t = …;`)"
            ),
            Self::Inputs { site, scalar, expected, found } => write!(
                f,
                "{site}: the inverse did not rebuild input scalar {scalar}: it was {expected} and \
                 came back as {found}, so the gradient would come from another trajectory \
                 (floating-point += and -= undo each other only up to rounding: a term absorbed \
                 by a much larger running value comes back as that rounding, and an unstable \
                 inverse amplifies it)"
            ),
            Self::Alias { site, a, b } => {
                write!(f, "{site}: `{a}` and `{b}` are the same element; the arguments of a reversible statement must not alias")
            }
            Self::AliasedCopy { site, place, copy } => write!(
                f,
                "{site}: `{copy}` copies what this statement may change through its argument \
                 `{place}`: the copy would no longer equal it afterwards, so the statement could \
                 not be undone and its gradient would be wrong. Write the result into a variable \
                 the copy does not come from. (A user's instruction counts as changing every \
                 argument, and a call as changing what it passes on more than three calls deep; \
                 where it only reads `{place}`, pass `{place}` as a copy too)"
            ),
        }
    }
}

impl std::error::Error for InvertibilityError {}

/// Values that can be ancillas: `unlet x = v;` asks `x.restored(&v)`.
///
/// Integers, fixed point and `bool` compare exactly. `f64` compares within `1e-8` absolute plus
/// `1e-8` relative, like NiLang's deallocation check (`f32`: `1e-5`) (and a NaN is a NaN again): floating-point `+=` followed by `-=` of the
/// same value can be off by an ulp. `GVar` and `Dual` compare their values; containers compare
/// element by element.
///
/// **Your own types** implement [`restored`](Ancilla::restored); if they hold numbers that
/// carry gradients (a struct generic over `T: RevReal`) and are copied (`let c = p;`, or a call
/// argument `p.clone()`), implement [`clear_gradient`](Ancilla::clear_gradient) and
/// [`give_gradient`](Ancilla::give_gradient) too, field by field: their defaults do nothing,
/// so the copy's gradient would not reach `p`.
///
/// ```
/// use adjoint_rev::Ancilla;
/// assert!((0.1 + 0.2 - 0.3f64).restored(&0.0));
/// assert!(!1u8.restored(&0));
/// ```
pub trait Ancilla {
    /// Is `self` back to `value`?
    fn restored(&self, value: &Self) -> bool;

    /// Whether the type carries no derivative information (plain numbers and containers of
    /// them). Unchecked forward code skips uncomputing a routine whose ancillas are all passive
    /// and about to be dropped; a [`GVar`](crate::GVar) ancilla's uncomputation moves gradients
    /// and is kept.
    const PASSIVE: bool = false;

    /// Whether no gradient rides on `self` right now: always for a passive type; for a
    /// [`GVar`](crate::GVar), when its gradient is exactly zero (every lane and tangent).
    /// Unchecked forward code also skips uncomputing a routine whose ancillas all carry no
    /// gradient when it would start: every instruction of the uncomputation writes an ancilla
    /// whose gradient is zero, so it moves no gradient (a zero gradient skips the partials), and
    /// the ancillas' values are dropped right after.
    ///
    /// ```
    /// use adjoint_rev::{Ancilla, GVar};
    /// assert!(1.5f64.no_gradient());
    /// assert!(GVar::new(2.0, 0.0).no_gradient());
    /// assert!(!GVar::new(2.0, 1.0).no_gradient());
    /// assert!(![GVar::new(2.0, 0.0), GVar::new(1.0, -0.5)].no_gradient());
    /// ```
    #[inline(always)]
    fn no_gradient(&self) -> bool {
        Self::PASSIVE
    }

    /// Drop the gradient riding on `self`: a [`GVar`](crate::GVar)'s becomes `+0.0` (every
    /// lane), containers clear their elements', other types keep theirs. A gradient pass keeps
    /// routine values this way in its forward half, where every gradient is zero anyway: it
    /// tells the compiler so, which then need not compute them.
    ///
    /// ```
    /// use adjoint_rev::{Ancilla, GVar};
    /// let mut v = [GVar::new(2.0, 0.5), GVar::new(1.0, -1.0)];
    /// v.clear_gradient();
    /// assert_eq!((v[0].x, v[0].g, v[1].x, v[1].g), (2.0, 0.0, 1.0, 0.0));
    /// ```
    #[inline(always)]
    fn clear_gradient(&mut self) {}

    /// Add the gradient riding on `self` to `to`'s: a [`GVar`](crate::GVar)'s gradient (every
    /// lane), containers element by element, nothing for other types. An ancilla initialised as
    /// a copy of a variable (`let a = x;` or `let a = x.clone();`) starts with no gradient and
    /// gives its gradient to that variable where it is deallocated (`unlet a = x;`), as
    /// `let a = 0; a += x;` … `a -= x; unlet a = 0;` would: what flowed into the copy reaches
    /// `x`.
    ///
    /// ```
    /// use adjoint_rev::{Ancilla, GVar};
    /// let mut x = GVar::new(3.0, 1.0);
    /// GVar::new(3.0, 0.5).give_gradient(&mut x);
    /// assert_eq!((x.x, x.g), (3.0, 1.5));
    /// ```
    #[inline(always)]
    fn give_gradient(&self, to: &mut Self) {
        let _ = to;
    }
}

/// An ancilla copied from a variable: its value, without the variable's gradient (used by
/// generated code for `let a = x;`).
#[doc(hidden)]
#[inline(always)]
pub fn copy_of<T: Ancilla>(mut a: T) -> T {
    a.clear_gradient();
    a
}

/// A plain number: what a call argument computed from the function's variables must be
/// (`g(out, n - 1)` with an integer `n`, `g(y, v.len())`, `g(y, x.value())`), since no gradient
/// could flow back through it. A computed argument of a number type that may carry one (`T`,
/// an array or tuple of it) is a compile error at the argument.
///
/// ```
/// use adjoint_rev::prelude::*;
/// reversible! {
///     fn add_pow<T: RevReal>(y: &mut T, x: &mut T, k: &mut i32) {
///         y += x.powi(k);
///     }
///     /// `y += x^(n + 1)`: `n + 1` is an `i32` computed from `n`, passed as a copy.
///     fn add_next_pow<T: RevReal>(y: &mut T, x: &mut T, n: &mut i32) {
///         add_pow(y, x, n + 1);
///     }
/// }
/// let (mut y, mut x, mut n) = (0.0, 2.0, 2);
/// add_next_pow(&mut y, &mut x, &mut n)?;
/// assert_eq!(y, 8.0);
/// // ∂/∂x x³ = 3x² = 12
/// let (_, gx, _) = adjoint_rev::grad(add_next_pow {}, (0.0, 2.0, 2), 0)?;
/// assert_eq!(gx, 12.0);
/// # Ok::<(), adjoint_rev::InvertibilityError>(())
/// ```
///
/// A computed value of the number type is refused: no gradient could flow back through it.
///
/// ```compile_fail,E0277
/// use adjoint_rev::prelude::*;
/// reversible! {
///     fn add<T: RevReal>(y: &mut T, x: &mut T) {
///         y += x;
///     }
///     fn add_twice<T: RevReal>(y: &mut T, x: &mut T) {
///         add(y, x.clone() + x.clone());
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "a call argument computed from variables must be a plain number (an integer, `bool`, `f32` or `f64`), not `{Self}`, which may carry a gradient",
    label = "computed from the function's variables: no gradient could flow back through it",
    note = "compute it into an ancilla with instructions first (`let t = T::zero(); t += …;`), pass `t`, then uncompute it; or pass variables, fields, elements, or copies of them (`x.clone()`)"
)]
pub trait PlainNumber: Copy {}

macro_rules! plain_numbers {
    ($($t:ty),*) => {$( impl PlainNumber for $t {} )*};
}
plain_numbers!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, bool, f32, f64);

/// A computed call argument, checked to be a [`PlainNumber`] (used by generated code).
#[doc(hidden)]
#[inline(always)]
pub fn computed_arg<P: PlainNumber>(v: P) -> P {
    v
}

/// `T::PASSIVE` for a value (used by generated code).
#[doc(hidden)]
#[inline(always)]
pub fn passive<T: Ancilla>(_: &T) -> bool {
    T::PASSIVE
}

/// [`Ancilla::no_gradient`] (used by generated code).
#[doc(hidden)]
#[inline(always)]
pub fn no_gradient<T: Ancilla>(a: &T) -> bool {
    T::PASSIVE || a.no_gradient()
}

/// NiLang's tolerance for deallocating floating-point ancillas.
const ATOL: f64 = 1e-8;

macro_rules! exact {
    ($($t:ty),*) => {$(
        impl Ancilla for $t {
            #[inline(always)]
            fn restored(&self, value: &Self) -> bool {
                self == value
            }
            const PASSIVE: bool = true;
        }
    )*};
}
exact!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, bool);

impl Ancilla for f64 {
    #[inline(always)]
    fn restored(&self, value: &Self) -> bool {
        // (NaN is NaN again: a constant NaN passed to a call that only reads it is unchanged)
        self == value
            || (self.is_nan() && value.is_nan())
            || (self - value).abs() <= ATOL * (1.0 + self.abs().max(value.abs()))
    }
    const PASSIVE: bool = true;
}

/// `f32` ancillas compare within `1e-5` absolute plus relative: a few `f32` roundings.
impl Ancilla for f32 {
    #[inline(always)]
    fn restored(&self, value: &Self) -> bool {
        self == value
            || (self.is_nan() && value.is_nan())
            || (self - value).abs() <= 1e-5 * (1.0 + self.abs().max(value.abs()))
    }
    const PASSIVE: bool = true;
}

impl<F> Ancilla for fixed::FixedI32<F> {
    fn restored(&self, value: &Self) -> bool {
        self.to_bits() == value.to_bits()
    }
    const PASSIVE: bool = true;
}

impl<F> Ancilla for fixed::FixedI64<F> {
    fn restored(&self, value: &Self) -> bool {
        self.to_bits() == value.to_bits()
    }
    const PASSIVE: bool = true;
}

impl<T: Ancilla, G: crate::gvar::ExactZero + adjoint_core::Cotangent<T>> Ancilla
    for crate::GVar<T, G>
{
    #[inline(always)]
    fn restored(&self, value: &Self) -> bool {
        self.x.restored(&value.x)
    }
    #[inline(always)]
    fn no_gradient(&self) -> bool {
        self.g.exact_zero() && self.x.no_gradient()
    }
    #[inline(always)]
    fn clear_gradient(&mut self) {
        self.g = G::zero();
        self.x.clear_gradient();
    }
    #[inline(always)]
    fn give_gradient(&self, to: &mut Self) {
        to.g += self.g;
        self.x.give_gradient(&mut to.x);
    }
}

impl<T: Ancilla> Ancilla for adjoint_core::forward::Dual<T> {
    #[inline(always)]
    fn restored(&self, value: &Self) -> bool {
        self.re.restored(&value.re)
    }
    /// Tangents flow from operands to targets, so an uncomputation that writes only ancillas
    /// changes only their tangents.
    #[inline(always)]
    fn no_gradient(&self) -> bool {
        self.re.no_gradient() && self.eps.no_gradient()
    }
    #[inline(always)]
    fn clear_gradient(&mut self) {
        self.re.clear_gradient();
        self.eps.clear_gradient();
    }
    #[inline(always)]
    fn give_gradient(&self, to: &mut Self) {
        self.re.give_gradient(&mut to.re);
        self.eps.give_gradient(&mut to.eps);
    }
}

impl<T: Ancilla> Ancilla for num_complex::Complex<T> {
    fn restored(&self, value: &Self) -> bool {
        self.re.restored(&value.re) && self.im.restored(&value.im)
    }
    const PASSIVE: bool = T::PASSIVE;
    #[inline(always)]
    fn clear_gradient(&mut self) {
        self.re.clear_gradient();
        self.im.clear_gradient();
    }
    #[inline(always)]
    fn give_gradient(&self, to: &mut Self) {
        self.re.give_gradient(&mut to.re);
        self.im.give_gradient(&mut to.im);
    }
}

impl<T: Ancilla> Ancilla for crate::ULog<T> {
    fn restored(&self, value: &Self) -> bool {
        self.log.restored(&value.log)
    }
    const PASSIVE: bool = T::PASSIVE;
    #[inline(always)]
    fn clear_gradient(&mut self) {
        self.log.clear_gradient();
    }
    #[inline(always)]
    fn give_gradient(&self, to: &mut Self) {
        self.log.give_gradient(&mut to.log);
    }
}

impl<T: Ancilla> Ancilla for Vec<T> {
    fn restored(&self, value: &Self) -> bool {
        self.len() == value.len() && self.iter().zip(value).all(|(a, b)| a.restored(b))
    }
    const PASSIVE: bool = T::PASSIVE;
    fn no_gradient(&self) -> bool {
        T::PASSIVE || self.iter().all(Ancilla::no_gradient)
    }
    #[inline(always)]
    fn clear_gradient(&mut self) {
        if !T::PASSIVE {
            self.iter_mut().for_each(Ancilla::clear_gradient);
        }
    }
    #[inline(always)]
    fn give_gradient(&self, to: &mut Self) {
        if !T::PASSIVE {
            self.iter()
                .zip(to.iter_mut())
                .for_each(|(a, b)| a.give_gradient(b));
        }
    }
}

impl<T: Ancilla, const N: usize> Ancilla for [T; N] {
    fn restored(&self, value: &Self) -> bool {
        self.iter().zip(value).all(|(a, b)| a.restored(b))
    }
    const PASSIVE: bool = T::PASSIVE;
    #[inline(always)]
    fn no_gradient(&self) -> bool {
        T::PASSIVE || self.iter().all(Ancilla::no_gradient)
    }
    #[inline(always)]
    fn clear_gradient(&mut self) {
        if !T::PASSIVE {
            self.iter_mut().for_each(Ancilla::clear_gradient);
        }
    }
    #[inline(always)]
    fn give_gradient(&self, to: &mut Self) {
        if !T::PASSIVE {
            self.iter()
                .zip(to.iter_mut())
                .for_each(|(a, b)| a.give_gradient(b));
        }
    }
}

/// Whether two places share memory: their byte ranges overlap (for two values of one type, that
/// is the same place). Generated code asks it about operands that differ only in an index
/// (`x[i]`, `x[j]`).
#[doc(hidden)]
#[inline(always)]
pub fn same<A: ?Sized, B: ?Sized>(a: &A, b: &B) -> bool {
    let (pa, pb) = (
        a as *const A as *const u8 as usize,
        b as *const B as *const u8 as usize,
    );
    let (na, nb) = (core::mem::size_of_val(a), core::mem::size_of_val(b));
    // The ranges overlap when `pb − na < pa < pb + nb`: `pa − pb + na − 1` lies in
    // `0..na + nb − 1`, one unsigned comparison (the wrapping arithmetic is exact: both are
    // addresses of live values). Generated code asks this in inner loops, where the two-sided
    // form's two comparisons and branches cost 15–20 % of the Petersen gradient.
    na > 0 && nb > 0 && pa.wrapping_sub(pb).wrapping_add(na - 1) < na + nb - 1
}

/// The run-time alias check for arguments that differ only in an index (`x[i]`, `x[j]`). It runs
/// in checked and unchecked code alike: an aliased target or call argument would give a wrong
/// result, not merely an irreversible one.
#[doc(hidden)]
#[inline(always)]
pub fn distinct<A: ?Sized, B: ?Sized>(
    a: &A,
    b: &B,
    site: Site,
    na: &'static str,
    nb: &'static str,
) -> Result<(), InvertibilityError> {
    if same(a, b) {
        Err(InvertibilityError::Alias { site, a: na, b: nb })
    } else {
        Ok(())
    }
}

/// The run-time check that a copied argument (`v[j].clone()`) is not a place the statement may
/// change through another argument (`v[i]` where `i == j`): `aliased` is the generated code's
/// verdict (the callee may write that argument, and the two places' steps agree). Like
/// [`distinct`], it runs in checked and unchecked code alike.
#[doc(hidden)]
#[inline(always)]
pub fn not_copied(
    aliased: bool,
    site: Site,
    place_text: &'static str,
    copy_text: &'static str,
) -> Result<(), InvertibilityError> {
    if aliased {
        Err(InvertibilityError::AliasedCopy {
            site,
            place: place_text,
            copy: copy_text,
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::same;

    /// `same` against the two-sided overlap test, for every pair of sub-slices of one buffer
    /// (byte ranges of different lengths at every offset, empty ones included) and for
    /// elements of one slice.
    #[test]
    fn same_is_byte_range_overlap() {
        let buf = [0u8; 12];
        for (i, na) in (0..12).flat_map(|i| (0..=12 - i).map(move |n| (i, n))) {
            for (j, nb) in (0..12).flat_map(|j| (0..=12 - j).map(move |n| (j, n))) {
                let want = na > 0 && nb > 0 && i < j + nb && j < i + na;
                assert_eq!(
                    same(&buf[i..i + na], &buf[j..j + nb]),
                    want,
                    "[{i}, {}) against [{j}, {})",
                    i + na,
                    j + nb
                );
            }
        }
        let x = [1.0f64, 2.0, 3.0];
        for i in 0..3 {
            for j in 0..3 {
                assert_eq!(same(&x[i], &x[j]), i == j);
            }
        }
        // Different types: an element inside a wider view, and a value elsewhere.
        assert!(same(&x[1], &x[..]));
        assert!(!same(&x[2], &x[..2]));
        assert!(!same(&x[0], &buf));
    }
}
