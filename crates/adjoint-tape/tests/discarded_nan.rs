//! A NaN operand that the function discards (`max(NaN, y)` is `y`, `NaN.powi(0)` is `1`) sends
//! nothing to the derivative: the rule table gives it the partial 0, and no engine may multiply
//! that 0 by the NaN tangent. `DualVec` did (`[NaN, 1.5]` where `Dual` and the tape give
//! `[0, 1.5]`), and so did every forward mode through `powi(0)` (a hunter). Closed forms.

use adjoint_core::forward::{self, DualVec};
use adjoint_core::Real;
use adjoint_tape as tape;

/// The gradient of the generic function `$f` at `$x` is `$want` (a closed form) in forward mode,
/// on the tape and through `DualVec`'s Jacobian.
macro_rules! every_engine {
    ($f:ident, $x:expr, $want:expr) => {
        let want = $want;
        assert_eq!(forward::gradient(|z| $f(z), &$x), want);
        assert_eq!(tape::grad(|z| $f(z), &$x), want);
        assert_eq!(
            forward::jacobian(|z: &[DualVec<2>]| vec![$f(z)], &$x)[0],
            want
        );
    };
}

/// `bad` is NaN (value and tangent) at `x₀ < 2`; `max`/`min` return the other argument.
fn f<T: Real>(x: &[T]) -> T {
    let bad = (x[0] - 2.0).sqrt();
    bad.max(x[1]) + x[1].min(bad) * 0.5 + bad.max(3.0)
}

#[test]
fn max_and_min_that_drop_a_nan_operand() {
    let x = [1.0, 0.7];
    assert_eq!(f::<f64>(&x), 0.7 + 0.35 + 3.0);
    // ∂/∂x₀ = 0 (it only reaches the result through the dropped NaN), ∂/∂x₁ = 1 + 0.5
    every_engine!(f, x, [0.0, 1.5]);
    // and with a constant operand (`max(NaN, 3)` alone, and `3.max(NaN)` is 3 too)
    let g = |z: &[DualVec<2>]| vec![(z[0] - 2.0).sqrt().max(3.0) * z[1]];
    assert_eq!(forward::jacobian(g, &x)[0], [0.0, 3.0]);
}

#[test]
fn powi_zero_of_a_nan_is_the_constant_one() {
    fn g<T: Real>(x: &[T]) -> T {
        (x[0] - 2.0).sqrt().powi(0) * x[1]
    }
    let x = [1.0, 0.7];
    assert_eq!(g::<f64>(&x), 0.7);
    every_engine!(g, x, [0.0, 1.0]);
    // x⁰ = 1 at ordinary points too: derivative 0, Hessian 0
    let y = [1.5, -0.25];
    assert_eq!(forward::gradient(|z| z[0].powi(0) + z[1], &y), [0.0, 1.0]);
}

#[test]
fn second_derivatives_past_a_dropped_nan() {
    fn h<T: Real>(x: &[T]) -> T {
        let bad = (x[0] - 2.0).sqrt();
        bad.max(x[1] * x[1]) + x[0].powf(0.0) * x[1] + (x[0] - 3.0).ln().powi(0)
    }
    let x = [1.0, 0.7];
    // h = x₁² + x₁ + 1 here: gradient (0, 2x₁ + 1), Hessian diag(0, 2)
    let want_g = [0.0, 2.0 * 0.7 + 1.0];
    assert_eq!(forward::gradient(|z| h(z), &x), want_g);
    assert_eq!(tape::grad(|z| h(z), &x), want_g);
    assert_eq!(
        forward::jacobian(|z: &[DualVec<2>]| vec![h(z)], &x)[0],
        want_g
    );
    let want_h = vec![vec![0.0, 0.0], vec![0.0, 2.0]];
    assert_eq!(forward::hessian(|z| h(z), &x), want_h);
    assert_eq!(tape::hessian(|z| h(z), &x), want_h);
}
