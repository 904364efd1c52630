//! Second derivatives through `ln`, `ln_1p`, `log2`, `log10` where the rule's partial `1/u` is
//! below ~1e-154: reverse over forward (`tape::hessian`, `tape::hvp`: a `Dual<Var>`) recorded
//! that partial, whose own stored partial `−1/u²` underflowed to 0, dropping the term
//! `d′(u)·u̇²` of the second derivative: `(1e200·x).ln()` gave 0 for −1 and softplus at 400
//! gave 1 for 2e-174 (a hunter). Forward mode's tangent is now the quotient `u̇ / u`, whose
//! partials stay in range. References: closed forms.

use adjoint::forward;
use adjoint::tape;
use adjoint::Real;

fn close(got: f64, want: f64, rel: f64, abs: f64) -> bool {
    (got - want).abs() <= rel * want.abs() + abs
}

/// (name, f, x, ∂²f/∂x², absolute tolerance)
type Case<T> = (&'static str, fn(T) -> T, f64, f64, f64);

fn cases<T: Real>() -> Vec<Case<T>> {
    use std::f64::consts::{LN_10, LN_2};
    let sigma2 = |x: f64| (-x).exp() / (1.0 + (-x).exp()).powi(2);
    vec![
        ("ln(1e200 x)", |x| (x * 1e200).ln(), 1.0, -1.0, 0.0),
        ("ln(1e200 x)", |x| (x * 1e200).ln(), 0.5, -4.0, 0.0),
        (
            "log2(1e200 x)",
            |x| (x * 1e200).log2(),
            1.0,
            -1.0 / LN_2,
            0.0,
        ),
        (
            "log10(1e200 x)",
            |x| (x * 1e200).log10(),
            1.0,
            -1.0 / LN_10,
            0.0,
        ),
        (
            "log10(1e-200 x)",
            |x| (x * 1e-200).log10(),
            2.0,
            -0.25 / LN_10,
            0.0,
        ),
        ("ln_1p(1e200 x)", |x| (x * 1e200).ln_1p(), 1.0, -1.0, 0.0),
        // softplus: σ(x)(1 − σ(x)) = 1.9e-174 and 9.9e-305; the quotients' two terms of
        // ±0.95 cancel to the rounding of 0.95, not to 1.9e-174
        (
            "(1 + eˣ).ln()",
            |x| (x.exp() + 1.0).ln(),
            400.0,
            sigma2(400.0),
            1e-15,
        ),
        (
            "eˣ.ln_1p()",
            |x| x.exp().ln_1p(),
            400.0,
            sigma2(400.0),
            1e-15,
        ),
        (
            "eˣ.ln_1p()",
            |x| x.exp().ln_1p(),
            700.0,
            sigma2(700.0),
            1e-15,
        ),
        ("eˣ.ln()", |x| x.exp().ln(), 400.0, 0.0, 1e-15),
        // ordinary points: unchanged
        ("ln x", |x| x.ln(), 3.0, -1.0 / 9.0, 0.0),
        ("ln_1p x", |x| x.ln_1p(), 0.5, -1.0 / 2.25, 0.0),
    ]
}

#[test]
fn tape_hessians_through_logarithms() {
    for (name, f, x, want, abs) in cases() {
        let h = tape::hessian(|v| f(v[0]), &[x])[0][0];
        let hv = tape::hvp(|v| f(v[0]), &[x], &[1.0])[0];
        assert!(
            close(h, want, 1e-12, abs),
            "{name} at {x}: tape Hessian {h}, want {want}"
        );
        assert!(
            close(hv, want, 1e-12, abs),
            "{name} at {x}: tape hvp {hv}, want {want}"
        );
    }
}

#[test]
fn forward_hessians_through_logarithms() {
    for (name, f, x, want, abs) in cases() {
        let h = forward::hessian(|v| f(v[0]), &[x])[0][0];
        assert!(
            close(h, want, 1e-12, abs),
            "{name} at {x}: forward Hessian {h}, want {want}"
        );
    }
}

#[test]
fn the_log_of_a_squared_norm_at_1e80() {
    // ln(x² + y²): ∂² = 2(y² − x²)/r⁴, −4xy/r⁴, 2(x² − y²)/r⁴ with r⁴ = 625e320 (the tape was
    // 19–34 % off here, from |x| ≈ 1e78 on)
    let (x, y) = (3e80, 4e80);
    let want = [
        [14.0 / 625.0 * 1e-160, -48.0 / 625.0 * 1e-160],
        [-48.0 / 625.0 * 1e-160, -14.0 / 625.0 * 1e-160],
    ];
    let t = tape::hessian(|v| (v[0] * v[0] + v[1] * v[1]).ln(), &[x, y]);
    let fw = forward::hessian(|v| (v[0] * v[0] + v[1] * v[1]).ln(), &[x, y]);
    for i in 0..2 {
        for j in 0..2 {
            assert!(
                close(t[i][j], want[i][j], 1e-12, 0.0),
                "tape {t:?}, want {want:?}"
            );
            assert!(
                close(fw[i][j], want[i][j], 1e-12, 0.0),
                "forward {fw:?}, want {want:?}"
            );
        }
    }
}

#[adjoint::ssa::differentiable]
fn ln_scaled(x: f64) -> f64 {
    (x * 1e200).ln()
}

#[adjoint::ssa::differentiable]
fn softplus(x: f64) -> f64 {
    (x.exp() + 1.0).ln()
}

/// The SSA transform's pullback at `Dual` (forward over reverse): its partials are the rule
/// table's at `Dual`, so `ln`'s `1/x` is `recip`'s quotient there.
#[test]
fn ssa_second_derivatives_through_logarithms() {
    use adjoint::forward::Dual;
    use adjoint::ssa::Workspace;
    type Pullback =
        fn(&mut Workspace<Dual<f64>>, Dual<f64>, &mut Dual<f64>, Dual<f64>) -> Dual<f64>;
    let second = |pullback: Pullback, x: f64| {
        let mut d = Dual::constant(0.0);
        pullback(
            &mut Workspace::new(),
            Dual::new(x, 1.0),
            &mut d,
            Dual::constant(1.0),
        );
        d.eps
    };
    let s400 = (-400f64).exp() / (1.0 + (-400f64).exp()).powi(2);
    for (name, got, want, abs) in [
        (
            "ln(1e200 x) at 1",
            second(ln_scaled::pullback, 1.0),
            -1.0,
            0.0,
        ),
        (
            "softplus at 400",
            second(softplus::pullback, 400.0),
            s400,
            1e-15,
        ),
        (
            "softplus at 1",
            second(softplus::pullback, 1.0),
            (-1f64).exp() / (1.0 + (-1f64).exp()).powi(2),
            0.0,
        ),
    ] {
        assert!(
            close(got, want, 1e-12, abs),
            "{name}: SSA {got}, want {want}"
        );
    }
}
