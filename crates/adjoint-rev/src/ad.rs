//! AD by reverse computing (seed 001 Section 3): run `f`, wrap its outputs in [`GVar`], seed the
//! loss's gradient with 1 and run `f`'s inverse. No tape: the inverse recomputes every earlier
//! value as it goes. Hessians by forward over reverse: the same inverse on `GVar<Dual<f64>>`.

use crate::error::{Ancilla, InvertibilityError, Site};
use crate::gvar::GVar;
use crate::ulog::ULog;
use adjoint_core::forward::Dual;
use adjoint_core::Cotangents;
use num_complex::Complex;

/// A reversible function over the argument tuple `Args` (the macro implements it for every
/// function whose arguments are sized values, on the zero-sized type of the same name).
///
/// Gradients run the function on [`GVar`]s, so [`grad`] and friends need it generic over its
/// number type: `fn f<T: RevReal>(y: &mut T, x: &mut T)`, not `fn f(y: &mut f64, x: &mut f64)`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot run on `{Args}`: a reversible function that is differentiated must be generic over its number type",
    label = "`{Self}` is not reversible over `{Args}`",
    note = "gradients run the function on `GVar`s (value and gradient): write it as `fn f<T: RevReal>(y: &mut T, …)` (or `T: Arith`) instead of over `f64`"
)]
pub trait Reversible<Args> {
    /// Run the function on the arguments in place.
    fn call(args: &mut Args) -> Result<(), InvertibilityError>;
    /// Run its inverse.
    fn uncall(args: &mut Args) -> Result<(), InvertibilityError>;
    /// Run the function without reversibility checks (the macro's `f::call_unchecked`).
    fn call_unchecked(args: &mut Args) -> Result<(), InvertibilityError> {
        Self::call(args)
    }
    /// Run the inverse without reversibility checks.
    fn uncall_unchecked(args: &mut Args) -> Result<(), InvertibilityError> {
        Self::uncall(args)
    }
}

/// An argument tuple no function is called with: the macro implements [`Reversible`] for it on
/// every non-generic function too, so that a non-generic function handed to [`grad`] is reported
/// as not generic (the trait's diagnostic) rather than as a type mismatch of
/// `Differentiable::Map`.
#[doc(hidden)]
pub enum NotGeneric {}

/// Data whose `f64` scalars can be swapped for other scalars (`GVar<f64>`, `GVar<Dual<f64>>`),
/// so that the same reversible function runs on values and on gradients. Scalars are visited
/// depth first, left to right: that order numbers them for `loss` and `outputs` arguments.
/// Integer arguments are constants: they keep their type, and their gradient is zero.
///
/// Implement it for your own argument types by forwarding to the fields:
///
/// ```
/// use adjoint_rev::Differentiable;
/// #[derive(Clone, Debug, PartialEq)]
/// struct Point { x: f64, y: f64 }
/// #[derive(Clone, Copy)]
/// struct PointOf<S> { x: S, y: S }
/// impl Differentiable for Point {
///     type Map<S: Copy> = PointOf<S>;
///     fn wrap<S: Copy>(&self, f: &mut impl FnMut(f64) -> S) -> PointOf<S> {
///         PointOf { x: f(self.x), y: f(self.y) }
///     }
///     fn unwrap<S: Copy>(&self, m: &PointOf<S>, f: &mut impl FnMut(&S) -> f64) -> Self {
///         Point { x: f(&m.x), y: f(&m.y) }
///     }
///     fn visit_mut<S: Copy>(m: &mut PointOf<S>, f: &mut impl FnMut(&mut S)) {
///         f(&mut m.x);
///         f(&mut m.y);
///     }
/// }
/// assert_eq!(Point { x: 1.0, y: 2.0 }.scalar_count(), 2);
/// ```
pub trait Differentiable: Sized {
    /// The same shape with every `f64` replaced by `S`.
    type Map<S: Copy>;
    /// Replace every scalar `v` by `f(v)`.
    fn wrap<S: Copy>(&self, f: &mut impl FnMut(f64) -> S) -> Self::Map<S>;
    /// Rebuild `Self` with every scalar from `f` (a gradient: the built-in integer types, which
    /// carry none, give 0).
    fn unwrap<S: Copy>(&self, m: &Self::Map<S>, f: &mut impl FnMut(&S) -> f64) -> Self;
    /// Visit every scalar of a mapped value.
    fn visit_mut<S: Copy>(m: &mut Self::Map<S>, f: &mut impl FnMut(&mut S));
    /// The number of `f64` scalars (integers carry none: `[1usize, 2].scalar_count()` is 0).
    /// Not called `len`: the prelude brings this trait into scope, and arrays, which have no
    /// inherent `len`, would resolve `a.len()` to it.
    fn scalar_count(&self) -> usize {
        let mut n = 0;
        let _ = self.wrap(&mut |_| n += 1);
        n
    }
}

impl Differentiable for f64 {
    type Map<S: Copy> = S;
    fn wrap<S: Copy>(&self, f: &mut impl FnMut(f64) -> S) -> S {
        f(*self)
    }
    fn unwrap<S: Copy>(&self, m: &S, f: &mut impl FnMut(&S) -> f64) -> Self {
        f(m)
    }
    fn visit_mut<S: Copy>(m: &mut S, f: &mut impl FnMut(&mut S)) {
        f(m)
    }
}

impl Differentiable for f32 {
    type Map<S: Copy> = S;
    fn wrap<S: Copy>(&self, f: &mut impl FnMut(f64) -> S) -> S {
        f(f64::from(*self))
    }
    fn unwrap<S: Copy>(&self, m: &S, f: &mut impl FnMut(&S) -> f64) -> Self {
        f(m) as f32
    }
    fn visit_mut<S: Copy>(m: &mut S, f: &mut impl FnMut(&mut S)) {
        f(m)
    }
}

macro_rules! constant {
    ($($t:ty),*) => {$(
        impl Differentiable for $t {
            type Map<S: Copy> = $t;
            fn wrap<S: Copy>(&self, _: &mut impl FnMut(f64) -> S) -> $t {
                *self
            }
            fn unwrap<S: Copy>(&self, _: &$t, _: &mut impl FnMut(&S) -> f64) -> Self {
                <$t>::default()
            }
            fn visit_mut<S: Copy>(_: &mut $t, _: &mut impl FnMut(&mut S)) {}
        }
    )*};
}
constant!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, bool);

impl Differentiable for Complex<f64> {
    type Map<S: Copy> = Complex<S>;
    fn wrap<S: Copy>(&self, f: &mut impl FnMut(f64) -> S) -> Complex<S> {
        Complex::new(f(self.re), f(self.im))
    }
    fn unwrap<S: Copy>(&self, m: &Complex<S>, f: &mut impl FnMut(&S) -> f64) -> Self {
        Complex::new(f(&m.re), f(&m.im))
    }
    fn visit_mut<S: Copy>(m: &mut Complex<S>, f: &mut impl FnMut(&mut S)) {
        f(&mut m.re);
        f(&mut m.im);
    }
}

impl Differentiable for ULog<f64> {
    type Map<S: Copy> = ULog<S>;
    fn wrap<S: Copy>(&self, f: &mut impl FnMut(f64) -> S) -> ULog<S> {
        ULog::new(f(self.log))
    }
    fn unwrap<S: Copy>(&self, m: &ULog<S>, f: &mut impl FnMut(&S) -> f64) -> Self {
        ULog::new(f(&m.log))
    }
    fn visit_mut<S: Copy>(m: &mut ULog<S>, f: &mut impl FnMut(&mut S)) {
        f(&mut m.log);
    }
}

impl<X: Differentiable> Differentiable for Vec<X> {
    type Map<S: Copy> = Vec<X::Map<S>>;
    fn wrap<S: Copy>(&self, f: &mut impl FnMut(f64) -> S) -> Self::Map<S> {
        self.iter().map(|x| x.wrap(f)).collect()
    }
    fn unwrap<S: Copy>(&self, m: &Self::Map<S>, f: &mut impl FnMut(&S) -> f64) -> Self {
        self.iter().zip(m).map(|(x, m)| x.unwrap(m, f)).collect()
    }
    fn visit_mut<S: Copy>(m: &mut Self::Map<S>, f: &mut impl FnMut(&mut S)) {
        m.iter_mut().for_each(|m| X::visit_mut(m, f));
    }
}

impl<X: Differentiable, const N: usize> Differentiable for [X; N] {
    type Map<S: Copy> = [X::Map<S>; N];
    fn wrap<S: Copy>(&self, f: &mut impl FnMut(f64) -> S) -> Self::Map<S> {
        core::array::from_fn(|i| self[i].wrap(f))
    }
    fn unwrap<S: Copy>(&self, m: &Self::Map<S>, f: &mut impl FnMut(&S) -> f64) -> Self {
        core::array::from_fn(|i| self[i].unwrap(&m[i], f))
    }
    fn visit_mut<S: Copy>(m: &mut Self::Map<S>, f: &mut impl FnMut(&mut S)) {
        m.iter_mut().for_each(|m| X::visit_mut(m, f));
    }
}

macro_rules! tuple {
    ($($x:ident $i:tt),+) => {
        impl<$($x: Differentiable),+> Differentiable for ($($x,)+) {
            type Map<S: Copy> = ($($x::Map<S>,)+);
            fn wrap<S: Copy>(&self, f: &mut impl FnMut(f64) -> S) -> Self::Map<S> {
                ($(self.$i.wrap(f),)+)
            }
            fn unwrap<S: Copy>(&self, m: &Self::Map<S>, f: &mut impl FnMut(&S) -> f64) -> Self {
                ($(self.$i.unwrap(&m.$i, f),)+)
            }
            fn visit_mut<S: Copy>(m: &mut Self::Map<S>, f: &mut impl FnMut(&mut S)) {
                $($x::visit_mut(&mut m.$i, f);)+
            }
        }
    };
}
tuple!(A 0);
tuple!(A 0, B 1);
tuple!(A 0, B 1, C 2);
tuple!(A 0, B 1, C 2, D 3);
tuple!(A 0, B 1, C 2, D 3, E 4);
tuple!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// Add `seed` to the gradient of scalar number `index` (in [`Differentiable`] order; every
/// gradient starts at zero): an output listed twice in one group of lanes gets both lanes'
/// seeds (setting it kept only the last, and the other row came out zero).
fn seed<A: Differentiable, T: Copy, G: Copy + core::ops::Add<Output = G>>(
    m: &mut A::Map<GVar<T, G>>,
    index: usize,
    seed: G,
    len: usize,
) {
    assert!(
        index < len,
        "scalar index {index} is out of range: the arguments hold {len} differentiable scalars"
    );
    let mut k = 0;
    A::visit_mut(m, &mut |v: &mut GVar<T, G>| {
        if k == index {
            v.g = v.g + seed;
        }
        k += 1;
    });
}

/// The outputs of `f` and the gradient of one output scalar (the loss, numbered in
/// [`Differentiable`] order) with respect to every input scalar, by running `f` forward and its
/// inverse on [`GVar`]s.
///
/// ```
/// use adjoint_rev::{reversible, Arith};
/// reversible! {
///     fn multiplier<T: Arith>(y: &mut T, a: &mut T, b: &mut T) { y += a * b; }
/// }
/// let (out, g) = adjoint_rev::value_and_grad(multiplier {}, (0.0, 2.0, 3.0), 0).unwrap();
/// assert_eq!(out, (6.0, 2.0, 3.0));
/// assert_eq!(g, (1.0, 3.0, 2.0));   // ∂y/∂(y, a, b)
/// ```
pub fn value_and_grad<F, A>(f: F, args: A, loss: usize) -> Result<(A, A), InvertibilityError>
where
    A: Differentiable,
    F: Reversible<A> + Reversible<A::Map<GVar<f64>>>,
{
    reverse(f, args, loss, true)
}

/// [`value_and_grad`] without reversibility checks, for proven code: the forward call and the
/// inverse run `call_unchecked` / `uncall_unchecked`.
///
/// ```
/// use adjoint_rev::{reversible, RevReal};
/// reversible! {
///     fn f<T: RevReal>(y: &mut T, x: &mut T) { y += x.sin(); }
/// }
/// let (_, g) = adjoint_rev::value_and_grad_unchecked(f {}, (0.0f64, 0.5f64), 0).unwrap();
/// assert_eq!(g.1, 0.5f64.cos());
/// ```
pub fn value_and_grad_unchecked<F, A>(
    f: F,
    args: A,
    loss: usize,
) -> Result<(A, A), InvertibilityError>
where
    A: Differentiable,
    F: Reversible<A> + Reversible<A::Map<GVar<f64>>>,
{
    reverse(f, args, loss, false)
}

fn reverse<F, A>(f: F, args: A, loss: usize, checks: bool) -> Result<(A, A), InvertibilityError>
where
    A: Differentiable,
    F: Reversible<A> + Reversible<A::Map<GVar<f64>>>,
{
    let _ = f;
    let inputs = if checks {
        checked_inputs(&args)
    } else {
        Vec::new()
    };
    let mut out = args;
    if checks {
        <F as Reversible<A>>::call(&mut out)?;
    } else {
        <F as Reversible<A>>::call_unchecked(&mut out)?;
    }
    let mut g = out.wrap(&mut |x| GVar::new(x, 0.0));
    seed::<A, f64, f64>(&mut g, loss, 1.0, out.scalar_count());
    if checks {
        <F as Reversible<A::Map<GVar<f64>>>>::uncall(&mut g)?;
        rebuilt::<F, A, _>(&inputs, &mut g, |v: &GVar<f64>| v.x)?;
    } else {
        <F as Reversible<A::Map<GVar<f64>>>>::uncall_unchecked(&mut g)?;
    }
    let grad = out.unwrap(&g, &mut |v: &GVar<f64>| v.g);
    Ok((out, grad))
}

/// The scalars of `args`, in [`Differentiable`] order.
fn scalars<A: Differentiable>(args: &A) -> Vec<f64> {
    let mut v = Vec::with_capacity(args.scalar_count());
    let _ = args.wrap(&mut |x| {
        v.push(x);
        x
    });
    v
}

/// The scalars of `args` a checked gradient compares after the inverse: each with whether its
/// type stores it in single precision. The inverse runs in `f64`, so an `f32` input comes back
/// within `f32`'s rounding of the forward pass, not `f64`'s: it is compared within `f32`'s
/// tolerance ([`Ancilla::restored`]). Which scalars those are: rebuilt from a value an `f32`
/// cannot hold (`1 + 2⁻⁴⁰`), they do not keep it (so a user type's `f32` fields count too).
fn checked_inputs<A: Differentiable>(args: &A) -> Vec<(f64, bool)> {
    const P: f64 = 1.0 + 1.0 / (1u64 << 40) as f64;
    let probe = args.unwrap(&args.wrap(&mut |_| ()), &mut |_: &()| P);
    let single = scalars(&probe).into_iter().map(|v| v != P);
    scalars(args).into_iter().zip(single).collect()
}

/// Checked gradients: the inverse, run on gradient-carrying values, must have rebuilt the
/// inputs (to the deallocation check's tolerance, [`Ancilla::restored`]); where it did not
/// (an unstable inverse amplifying rounding), the gradient was computed along another
/// trajectory, and that is an [`InvertibilityError::Inputs`], not a silent wrong number.
fn rebuilt<F, A: Differentiable, S: Copy>(
    inputs: &[(f64, bool)],
    g: &mut A::Map<S>,
    value: impl Fn(&S) -> f64,
) -> Result<(), InvertibilityError> {
    let mut bad = None;
    let mut k = 0;
    A::visit_mut(g, &mut |v: &mut S| {
        let found = value(v);
        let (given, single) = inputs[k];
        let back = if single {
            (found as f32).restored(&(given as f32))
        } else {
            found.restored(&given)
        };
        if bad.is_none() && !back {
            bad = Some((k, found));
        }
        k += 1;
    });
    match bad {
        None => Ok(()),
        Some((scalar, found)) => {
            let name = core::any::type_name::<F>();
            Err(InvertibilityError::Inputs {
                site: Site {
                    function: name.rsplit("::").next().unwrap_or(name),
                    statement: "(the whole function, for the gradient)",
                    backwards: true,
                },
                scalar,
                expected: format!("{:?}", inputs[scalar].0),
                found: format!("{found:?}"),
            })
        }
    }
}

/// The gradient of one output scalar (`loss`, in [`Differentiable`] order) with respect to every
/// input scalar. See [`value_and_grad`].
pub fn grad<F, A>(f: F, args: A, loss: usize) -> Result<A, InvertibilityError>
where
    A: Differentiable,
    F: Reversible<A> + Reversible<A::Map<GVar<f64>>>,
{
    value_and_grad(f, args, loss).map(|(_, g)| g)
}

/// The Jacobian of the scalars numbered `outputs` (after the call) with respect to every input
/// scalar: one row per output, each one forward call and one inverse on `GVar`s.
///
/// ```
/// use adjoint_rev::{reversible, RevReal};
/// reversible! {
///     fn polar<T: RevReal>(x: &mut T, y: &mut T, r: &mut T, t: &mut T) {
///         r += x.hypot(y);
///         t += y.atan2(x);
///     }
/// }
/// let j = adjoint_rev::jacobian(polar {}, (3.0, 4.0, 0.0, 0.0), &[2, 3]).unwrap();
/// assert!((j[0][0] - 0.6).abs() < 1e-15 && (j[0][1] - 0.8).abs() < 1e-15);   // ∂r/∂(x, y)
/// assert!((j[1][0] + 0.16).abs() < 1e-15 && (j[1][1] - 0.12).abs() < 1e-15); // ∂θ/∂(x, y)
/// ```
pub fn jacobian<F, A>(f: F, args: A, outputs: &[usize]) -> Result<Vec<Vec<f64>>, InvertibilityError>
where
    A: Differentiable,
    F: Reversible<A> + Reversible<A::Map<GVar<f64>>>,
{
    let _ = f;
    let inputs = checked_inputs(&args);
    let mut out = args;
    <F as Reversible<A>>::call(&mut out)?;
    let n = out.scalar_count();
    let mut rows = Vec::with_capacity(outputs.len());
    for &o in outputs {
        let mut g = out.wrap(&mut |x| GVar::new(x, 0.0));
        seed::<A, f64, f64>(&mut g, o, 1.0, n);
        <F as Reversible<A::Map<GVar<f64>>>>::uncall(&mut g)?;
        rebuilt::<F, A, _>(&inputs, &mut g, |v: &GVar<f64>| v.x)?;
        let mut row = Vec::with_capacity(n);
        A::visit_mut(&mut g, &mut |v: &mut GVar<f64>| row.push(v.g));
        rows.push(row);
    }
    Ok(rows)
}

/// [`jacobian`] with `N` rows per inverse run: the gradients are [`Cotangents<f64, N>`]
/// (lane `k` seeded at output `k` of a group of `N`), so `m` rows cost one forward call and
/// `⌈m / N⌉` inverse runs instead of `m`. Each row is bit for bit the one [`jacobian`] gives,
/// but for the sign of a zero (an entry can be `0.0` where [`jacobian`] has `−0.0`).
///
/// ```
/// use adjoint_rev::{reversible, RevReal};
/// reversible! {
///     fn polar<T: RevReal>(x: &mut T, y: &mut T, r: &mut T, t: &mut T) {
///         r += x.hypot(y);
///         t += y.atan2(x);
///     }
/// }
/// let args = (3.0, 4.0, 0.0, 0.0);
/// let j = adjoint_rev::jacobian_lanes::<2, _>(polar {}, args, &[2, 3]).unwrap();
/// assert_eq!(j, adjoint_rev::jacobian(polar {}, args, &[2, 3]).unwrap());
/// ```
///
/// # Panics
/// If `N` is 0.
pub fn jacobian_lanes<const N: usize, A: Differentiable>(
    f: impl Reversible<A> + Reversible<A::Map<GVar<f64, Cotangents<f64, N>>>>,
    args: A,
    outputs: &[usize],
) -> Result<Vec<Vec<f64>>, InvertibilityError> {
    assert!(
        N > 0,
        "jacobian_lanes::<0>: at least one lane per inverse run"
    );
    // `impl Trait` here keeps the call spelling `jacobian_lanes::<N, _>`; the helper names the
    // function's type for the `<F as Reversible<_>>` calls.
    jacobian_lanes_of(f, args, outputs)
}

fn jacobian_lanes_of<const N: usize, F, A>(
    f: F,
    args: A,
    outputs: &[usize],
) -> Result<Vec<Vec<f64>>, InvertibilityError>
where
    A: Differentiable,
    F: Reversible<A> + Reversible<A::Map<GVar<f64, Cotangents<f64, N>>>>,
{
    let _ = f;
    let inputs = checked_inputs(&args);
    let mut out = args;
    <F as Reversible<A>>::call(&mut out)?;
    let n = out.scalar_count();
    let mut rows = Vec::with_capacity(outputs.len());
    for group in outputs.chunks(N) {
        let mut g = out.wrap(&mut |x| GVar::new(x, Cotangents::<f64, N>::zero()));
        for (lane, &o) in group.iter().enumerate() {
            seed::<A, f64, Cotangents<f64, N>>(&mut g, o, Cotangents::unit(lane), n);
        }
        <F as Reversible<A::Map<GVar<f64, Cotangents<f64, N>>>>>::uncall(&mut g)?;
        rebuilt::<F, A, _>(&inputs, &mut g, |v: &GVar<f64, Cotangents<f64, N>>| v.x)?;
        let mut lanes = vec![Vec::with_capacity(n); group.len()];
        A::visit_mut(&mut g, &mut |v: &mut GVar<f64, Cotangents<f64, N>>| {
            for (lane, row) in lanes.iter_mut().enumerate() {
                row.push(v.g[lane]);
            }
        });
        rows.extend(lanes);
    }
    Ok(rows)
}

/// The Hessian of one output scalar (`loss`) with respect to every input scalar, by forward over
/// reverse (seed 001 Section 3.2): column `j` runs the gradient program on `GVar<Dual<f64>>` with
/// the inputs' tangents set to the `j`-th unit vector. "Every input scalar" includes the output
/// slot itself (a reversible function's arguments are its inputs and outputs): for
/// `f(y, x₁, …, xₙ)` the matrix is `(n + 1) × (n + 1)`, row and column 0 those of `y` (zero
/// for `y += g(x)`).
///
/// The forward call runs on `GVar`s whose gradients are all zero, which leaves them zero and the
/// values identical to a plain call.
///
/// ```
/// use adjoint_rev::{reversible, RevReal};
/// reversible! {
///     fn f<T: RevReal>(y: &mut T, a: &mut T, b: &mut T) { y += a * b; y += a.sin(); }
/// }
/// let h = adjoint_rev::hessian(f {}, (0.0, 0.5, 2.0), 0).unwrap();
/// assert!((h[1][1] + 0.5f64.sin()).abs() < 1e-15);       // ∂²y/∂a² = −sin a
/// assert_eq!((h[1][2], h[2][1], h[2][2]), (1.0, 1.0, 0.0));
/// ```
pub fn hessian<F, A>(f: F, args: A, loss: usize) -> Result<Vec<Vec<f64>>, InvertibilityError>
where
    A: Differentiable,
    F: Reversible<A::Map<GVar<Dual<f64>>>>,
{
    let _ = f;
    let n = args.scalar_count();
    let inputs = checked_inputs(&args);
    let mut h = vec![vec![0.0; n]; n];
    #[allow(clippy::needless_range_loop)] // `j` picks the tangent direction and the column
    for j in 0..n {
        let mut k = 0;
        let mut m = args.wrap(&mut |x| {
            let t = if k == j { 1.0 } else { 0.0 };
            k += 1;
            GVar::new(Dual::new(x, t), Dual::new(0.0, 0.0))
        });
        <F as Reversible<_>>::call(&mut m)?;
        seed::<A, Dual<f64>, Dual<f64>>(&mut m, loss, Dual::new(1.0, 0.0), n);
        <F as Reversible<_>>::uncall(&mut m)?;
        rebuilt::<F, A, _>(&inputs, &mut m, |v: &GVar<Dual<f64>>| v.x.re)?;
        let mut i = 0;
        A::visit_mut(&mut m, &mut |v: &mut GVar<Dual<f64>>| {
            h[i][j] = v.g.eps;
            i += 1;
        });
    }
    Ok(h)
}
