//! User rules at number types that differentiate: a rule written over `T` gives forward mode
//! and Hessian-vector products; one that computes in `f64` is a panic there, not a silently
//! wrong derivative.

use adjoint_core::forward::Dual;
use adjoint_core::Real;
use adjoint_ssa::{differentiable, Workspace};

/// Stands for an opaque `f64`-only function (a C call) and its derivative.
fn cube_c(x: f64) -> f64 {
    x * x * x
}
fn cube_c_prime(x: f64) -> f64 {
    3.0 * x * x
}

fn cube(x: f64) -> f64 {
    cube_c(x)
}

/// A rule that can only compute in `f64`.
fn cube_rule<T: Real>(x: T) -> (T, [T; 1]) {
    let v = x.value();
    (T::cst(cube_c(v)), [T::cst(cube_c_prime(v))])
}

#[differentiable(rule(cube = cube_rule))]
fn g(x: f64) -> f64 {
    cube(x) * x
}

fn cube_generic(x: f64) -> f64 {
    x * x * x
}

/// The same rule written over `T`.
fn cube_generic_rule<T: Real>(x: T) -> (T, [T; 1]) {
    (x.powi(3), [x.powi(2) * 3.0])
}

#[differentiable(rule(cube_generic = cube_generic_rule))]
fn h(x: f64) -> f64 {
    cube_generic(x) * x
}

/// A generated `pullback` of a one-argument function, at `Dual`.
type Pullback = fn(&mut Workspace<Dual<f64>>, Dual<f64>, &mut Dual<f64>, Dual<f64>) -> Dual<f64>;

/// Forward over reverse: the pullback at `Dual` along the tangent 1 (`eps`: f″(x)).
fn hvp(pullback: Pullback, x: f64) -> Dual<f64> {
    let mut dd = Dual::constant(0.0);
    pullback(
        &mut Workspace::new(),
        Dual::new(x, 1.0),
        &mut dd,
        Dual::constant(1.0),
    );
    dd
}

fn panic_message(r: std::thread::Result<impl Sized>) -> String {
    let e = r.err().expect("a panic");
    e.downcast_ref::<String>().cloned().unwrap_or_default()
}

#[test]
fn an_f64_rule_serves_f64_gradients_and_is_refused_at_dual() {
    let x = 1.5f64;
    let mut d = 0.0;
    g::grad(x, &mut d);
    assert_eq!(d, 4.0 * x * x * x);
    // forward mode: the value's tangent was 3.375 (only the `· x` factor's), not 13.5
    let m = panic_message(std::panic::catch_unwind(|| g::primal(Dual::new(x, 1.0))));
    assert!(
        m.contains("the rule `cube_rule`") && m.contains("Write the rule over `T`"),
        "{m}"
    );
    // a Hessian-vector product: 6.75 instead of 27
    let m = panic_message(std::panic::catch_unwind(|| hvp(g::pullback, x)));
    assert!(m.contains("the rule `cube_rule`"), "{m}");
    // at a constant Dual (no tangent) nothing is lost
    assert_eq!(g::primal(Dual::constant(x)).re, x.powi(4));
}

#[test]
fn a_rule_over_t_gives_forward_mode_and_hvps() {
    let x = 1.5f64;
    assert_eq!(h::primal(Dual::new(x, 1.0)).eps, 4.0 * x * x * x);
    let dd = hvp(h::pullback, x);
    assert_eq!((dd.re, dd.eps), (4.0 * x * x * x, 12.0 * x * x));
}

fn softplus(x: f64) -> f64 {
    softplus_rule(x).0
}

fn softplus_rule<T: Real>(x: T) -> (T, [T; 1]) {
    let e = (-x.abs()).exp();
    (
        (e + 1.0).ln() + x.max(0.0),
        [T::cst(1.0) / ((-x).exp() + 1.0)],
    )
}

#[differentiable(rule(softplus = softplus_rule))]
fn sp(x: f64) -> f64 {
    softplus(x)
}

#[test]
fn a_rule_over_t_at_infinite_arguments_is_not_refused() {
    // (the check took `∞ − ∞ = NaN` for a tangent and refused a correct rule at ±∞, f64
    // included)
    assert_eq!(sp::primal(f64::NEG_INFINITY), 0.0);
    assert_eq!(sp::primal(f64::INFINITY), f64::INFINITY);
    assert_eq!(sp::primal(Dual::constant(f64::NEG_INFINITY)).re, 0.0);
    let _ = sp::primal(Dual::new(f64::INFINITY, 1.0));
    let mut d = 0.0;
    sp::grad(f64::NEG_INFINITY, &mut d);
    assert_eq!(d, 0.0);
}
