//! Forward mode where a partial is infinite but the direction does not move its operand: the
//! tangent is 0 there (the module's promise), as on the tape. A hunter found NaNs.

use adjoint_core::forward::{self, Dual64};
use adjoint_core::rules::{unary, Op1};

#[test]
fn an_infinite_quotient_with_a_fixed_divisor_has_a_finite_tangent_in_the_other_direction() {
    // (ẋ − v·ẏ)/y with v = ∞ and ẏ = 0 was NaN
    assert_eq!(
        forward::gradient(|v| 1.0 / v[0] + v[1], &[0.0, 1.0]),
        vec![f64::NEG_INFINITY, 1.0]
    );
    let g = forward::gradient(|v| v[0] / v[1], &[1.0, 0.0]);
    assert_eq!(g[0], f64::INFINITY);
    let a = Dual64::variable(1.0) / Dual64::constant(0.0);
    assert_eq!(a.eps, f64::INFINITY);
    // a subnormal divisor whose quotient overflows
    let g = forward::gradient(|v| v[0] / v[1], &[1.0, 1e-310]);
    assert_eq!(g[0], f64::INFINITY);
    let j = forward::jacobian(|v| vec![1.0 / v[0] + v[1]], &[0.0, 1.0]);
    assert_eq!(j, vec![[f64::NEG_INFINITY, 1.0]]);
}

#[test]
fn a_high_power_whose_partial_overflows_sends_nothing_through_a_zero_tangent() {
    // 2¹⁰²³ is finite, its partial 1023·2¹⁰²² is not; the second input's gradient was NaN
    assert_eq!(
        forward::gradient(|v| v[0].powi(1023) + v[1], &[2.0, 1.0]),
        vec![f64::INFINITY, 1.0]
    );
    let j = forward::jacobian(|v| vec![v[0].powi(1023) + v[1]], &[2.0, 1.0]);
    assert_eq!(j, vec![[f64::INFINITY, 1.0]]);
}

#[test]
fn log10_has_a_finite_derivative_at_tiny_arguments() {
    // 1/x overflowed below 5.6e-309, where 1/(x ln 10) = 1.4476e308 is finite
    let x = 3e-309;
    let want = 1.0 / (x * std::f64::consts::LN_10);
    assert!(want.is_finite());
    assert_eq!(unary(Op1::Log10, x).d, want);
    assert_eq!(forward::derivative(|x| x.log10(), x), want);
    // and beyond 7.8e307, where x ln 10 overflows (the case the other form is for)
    let x = 1e308;
    assert!((unary(Op1::Log10, x).d - 1.0 / x / std::f64::consts::LN_10).abs() < 1e-320);
}

#[test]
fn dualvec_lanes_at_an_infinite_quotient_are_dual_s() {
    use adjoint_core::forward::DualVec;
    // lane k of a DualVec is what a Dual along direction k gives
    for (x, y) in [(1.0, 0.0), (0.0, 0.0), (1.0, 1e-310), (3.0, 2.0)] {
        let q = DualVec::<2>::variable(x, 0) / DualVec::<2>::variable(y, 1);
        let d0 = Dual64::variable(x) / Dual64::constant(y);
        let d1 = Dual64::constant(x) / Dual64::variable(y);
        assert_eq!(
            format!("{:?}", q.eps),
            format!("{:?}", [d0.eps, d1.eps]),
            "{x} / {y}"
        );
        let c = 1.0 / DualVec::<2>::variable(y, 1);
        let e = 1.0 / Dual64::variable(y);
        assert_eq!(format!("{:?}", c.eps[1]), format!("{:?}", e.eps), "1 / {y}");
    }
}

#[test]
fn dividing_by_an_f64_zero_moves_nothing_along_a_direction_that_fixes_the_dividend() {
    // `x / 0.0 + y`: ∂/∂y = 1 (`self.eps / c` was 0/0 = NaN for the direction along y), as
    // with `Dual::constant(0.0)` for the divisor and on the tape (a hunter)
    let g = forward::gradient(|v| v[0] / 0.0 + v[1], &[1.0, 2.0]);
    assert_eq!(g, vec![f64::INFINITY, 1.0]);
    assert_eq!(
        g,
        forward::gradient(|v| v[0] / Dual64::constant(0.0) + v[1], &[1.0, 2.0])
    );
    assert_eq!(Dual64::constant(1.0) / 0.0, Dual64::constant(f64::INFINITY));
    assert_eq!((Dual64::constant(1.0) / 0.0).eps, 0.0);
    // DualVec lanes, as Dual's
    let j = forward::jacobian(|v| vec![v[0] / 0.0 + v[1]], &[1.0, 2.0]);
    assert_eq!(j, vec![[f64::INFINITY, 1.0]]);
}

#[test]
fn an_overflow_made_finite_again_leaves_the_other_directions_alone() {
    // e⁸⁰⁰ overflows and 1/(1 + e⁸⁰⁰) is 0 again; the direction along y does not move x, so
    // ∂/∂y is 1 (it was NaN: `exp`'s infinite partial times the zero tangent; a hunter). Each
    // against the closed form ∂/∂y = 1, in Dual and DualVec lanes; ∂/∂x, through the
    // overflowed value, is 0 where a quotient, `recip` or a negative power meets the overflow
    // (the closed forms underflow: e⁻⁸⁰⁰, −2x·e⁻ˣ², …; it was NaN: a zero partial times the
    // infinite tangent, which the tape drops at zero partials); through `exp(−eˣ)` and
    // `atan(sinh x)` (cases 1 and 2) it is still NaN: those operations keep one multiply
    // (`Dual::lift1`).
    // (Not covered, and documented at `plain`: an infinite factor of `*`, `x * f64::INFINITY`,
    // whose test cost too much.)
    use adjoint_core::Real;
    fn cases<T: Real>(k: usize, v: &[T]) -> T {
        let (x, y) = (v[0], v[1]);
        match k {
            0 => (T::one() + (-x).exp()).recip() + y,
            1 => (-x.exp()).exp() + y,
            2 => x.sinh().atan() + y,
            3 => (x * x).exp().recip() + y,
            4 => x.exp2().recip() + y,
            5 => x.cosh().recip() + y,
            _ => x.powi(3).recip() + y,
        }
    }
    let at = [
        [-800.0, 1.0],
        [800.0, 1.0],
        [800.0, 1.0],
        [30.0, 1.0],
        [1100.0, 1.0],
        [800.0, 1.0],
        [1e103, 1.0],
    ];
    for (k, p) in at.iter().enumerate() {
        assert!(cases(k, p).is_finite(), "case {k}: the value is finite");
        let g = forward::gradient(|v| cases(k, v), p);
        assert_eq!(g[1], 1.0, "case {k}: {g:?}");
        if k != 1 && k != 2 {
            assert_eq!(g[0], 0.0, "case {k}: {g:?}");
        }
        let j = forward::jacobian(|v| vec![cases(k, v)], p);
        assert_eq!(j[0][1], 1.0, "case {k} (DualVec): {j:?}");
    }
}

#[test]
#[allow(clippy::op_ref)] // the point: these spellings compile
fn remainder_takes_f64_and_references_on_either_side() {
    // `2.0 % y` did not compile (only `Dual % f64` did), though the other operators take `f64`
    // on either side (a hunter). ∂(x % y)/∂y = −trunc(x / y): −1 at (2, 1.5); ∂/∂x = 1.
    let y = Dual64::variable(1.5);
    let r = 2.0 % y;
    assert_eq!((r.re, r.eps), (2.0 % 1.5, -1.0));
    let r = 2.0 % &y;
    assert_eq!((r.re, r.eps), (0.5, -1.0));
    let x = Dual64::variable(2.0);
    assert_eq!(x % &Dual64::constant(1.5), x % 1.5);
    assert_eq!((&x % 1.5).eps, 1.0);
    let mut z = x;
    z %= &Dual64::constant(1.5);
    assert_eq!((z.re, z.eps), (0.5, 1.0));
}

#[test]
fn powf_at_a_subnormal_base_with_a_constant_or_linear_exponent() {
    // x⁰ is constant and x¹ linear, but `y · x^(y−1)` and `y (y − 1) x^(y−2)` were `0 · ∞` where
    // x^(y−1) or x^(y−2) overflows (a subnormal x): the rule table's ∂/∂x of x^0 at 1e-320 was
    // NaN (a hunter's Hessian led here). Closed forms: 0, and 0 for the second partials.
    use adjoint_core::rules::{binary, Op2};
    let r = binary(Op2::Powf, 1e-320, 0.0);
    assert_eq!((r.value, r.dx, r.dxx), (1.0, 0.0, 0.0));
    let r = binary(Op2::Powf, 1e-320, 1.0);
    assert_eq!((r.dx, r.dxx), (1.0, 0.0));
    let g = forward::gradient(|v| v[0].powf(v[1]) + v[1], &[1e-320, 0.0]);
    assert_eq!(g[0], 0.0, "{g:?}");
    // At ordinary points the formula stands, so that its y-derivative is kept where y = 0 or
    // 1: ∂²(x^y)/∂x∂y = x^(y−1)(1 + y ln x) is 1/2 at (2, 0) and 1 + ln 2 at (2, 1).
    let h = forward::hessian(|v| v[0].powf(v[1]), &[2.0, 0.0]);
    assert!((h[0][1] - 0.5).abs() < 1e-15, "{h:?}");
    let h = forward::hessian(|v| v[0].powf(v[1]), &[2.0, 1.0]);
    assert!((h[0][1] - (1.0 + 2f64.ln())).abs() < 1e-15, "{h:?}");
    assert_eq!(h[0][0], 0.0);
}

#[test]
fn nested_duals_send_nothing_through_a_zero_tangent_when_a_partial_is_infinite_inside() {
    // In a Hessian the partial is itself a dual: x² as powf at x = 1e-310 has the partial
    // 2x + 2ε (finite), but ln's partial 1/x at 1e-300 is 1e300 − 1e600ε = 1e300 − ∞ε, finite in
    // its value only: multiplied by the other direction's zero tangent it made NaN (a hunter).
    // Reference: the closed forms, and the tape's Hessians where they agree.
    assert_eq!(
        forward::hessian(|v| v[0].powf(2.0), &[1e-310]),
        vec![vec![2.0]]
    );
    assert_eq!(
        forward::hessian(|v| v[0].powf(2.0), &[5e-324]),
        vec![vec![2.0]]
    );
    let h = forward::hessian(|v| v[0].ln() + v[1] * v[1], &[1e-300, 1.0]);
    assert_eq!(h[0][1], 0.0, "{h:?}");
    assert_eq!(h[1][0], 0.0, "{h:?}");
    assert_eq!(h[1][1], 2.0, "{h:?}");
    assert_eq!(h[0][0], f64::NEG_INFINITY, "{h:?}"); // −1/x² overflows
                                                     // ∂²(y ln x)/∂x∂y = 1/x
    let h = forward::hessian(|v| v[0].ln() * v[1], &[1e-300, 1.0]);
    assert!((h[0][1] - 1e300).abs() <= 1e285, "{h:?}");
    assert!((h[1][0] - 1e300).abs() <= 1e285, "{h:?}");
    assert_eq!(h[1][1], 0.0, "{h:?}");
    // atan2(y, x) at (1e-300, 0): ∂²/∂y² = −2xy/(x²+y²)² = 0 with x = 0
    let h = forward::hessian(|v| v[0].atan2(v[1]), &[1e-300, 0.0]);
    assert_eq!(h[0][0], 0.0, "{h:?}");
}

#[test]
fn second_derivatives_of_asin_acos_atanh_near_zero_do_not_cancel() {
    // A Hessian differentiates the rule's partial 1/√((1 − x)(1 + x)): the product's derivative
    // (1 − x) − (1 + x) cancelled, so asin'' at 1e-17 was 0 for 1e-17 (8e-8 relative at 1e-10;
    // a hunter). Closed forms: asin'' = x(1 − x²)^−3/2 = −acos'', atanh'' = 2x/(1 − x²)².
    for x in [
        1e-17, 1e-13, 1e-10, 1e-5, 0.3, 0.49, 0.51, 0.9, -0.2, -1e-12,
    ] {
        let s = 1.0 - x * x;
        let cases: [(&str, f64, f64); 3] = [
            (
                "asin",
                forward::hessian(|v| v[0].asin(), &[x])[0][0],
                x / (s * s.sqrt()),
            ),
            (
                "acos",
                forward::hessian(|v| v[0].acos(), &[x])[0][0],
                -x / (s * s.sqrt()),
            ),
            (
                "atanh",
                forward::hessian(|v| v[0].atanh(), &[x])[0][0],
                2.0 * x / (s * s),
            ),
        ];
        for (name, got, want) in cases {
            assert!(
                (got - want).abs() <= 4e-16 * want.abs(),
                "{name}''({x}) = {got}, want {want}"
            );
        }
    }
}

#[test]
fn recip_keeps_a_derivative_whose_partial_alone_underflows() {
    // `recip`'s partial −1/x² underflows beyond |x| ≈ 1.3e154 while the chain's product does
    // not; forward mode multiplied by it first: 0 where `1.0 / x` gave the derivative (a hunter).
    let rel = |a: f64, b: f64| (a - b).abs() <= 1e-14 * b.abs();
    let d = forward::derivative(|x: Dual64| (x * x).recip(), 1e100);
    assert!(rel(d, -2e-300), "{d:e}");
    assert_eq!(d, forward::derivative(|x: Dual64| 1.0 / (x * x), 1e100));
    // the logistic sigmoid written with `recip`, against mpmath
    #[allow(clippy::excessive_precision)]
    let want = 1.915169596714005695019839778654264350742e-174;
    let d = forward::derivative(|x: Dual64| (1.0 + (-x).exp()).recip(), -400.0);
    assert!(rel(d, want), "{d:e}");
    // (`DualVec`, first order, multiplies by the table's −v², as the tape does: 0 there. Its
    // special case cost the BA Jacobian 5–15 %.) A zero lane stays 0 at x = 0 (1/x is ∞).
    let j = forward::jacobian(|v| vec![v[0].recip() + v[1]], &[0.0, 1.0]);
    assert_eq!(j, vec![[f64::NEG_INFINITY, 1.0]]);
    assert_eq!(
        forward::gradient(|v| v[0].recip() + v[1], &[0.0, 1.0]),
        vec![f64::NEG_INFINITY, 1.0]
    );
}

#[test]
fn atan_second_derivative_at_large_arguments() {
    // −2x/(1 + x²)², through the partial `(x² + 1).recip()`: 0 beyond ~1e80 (a hunter)
    for (x, want) in [
        (1e80, -2e-240),
        (1e90, -2e-270),
        (1e100, -2e-300),
        (3.0, -0.06),
    ] {
        let h = forward::hessian(|v| v[0].atan(), &[x])[0][0];
        assert!(
            (h - want).abs() <= 1e-14 * want.abs(),
            "{x:e}: {h:e} vs {want:e}"
        );
    }
}

#[test]
fn powf_partials_where_a_power_of_x_overflows_alone() {
    // y (y − 1) x^(y−2) with x^(y−2) beyond f64 and y tiny: −∞ for −1e300 (a hunter; mpmath)
    use adjoint_core::rules::{binary, Op2};
    #[allow(clippy::excessive_precision)]
    for (x, y, want) in [
        (
            1e-160,
            1e-20,
            -9.999999999999999963058638512095269123955e299,
        ),
        (1e-200, 1e-100, -1.0e300),
        (1e-300, 1e-300, -1.0e300),
    ] {
        let r = binary(Op2::Powf, x, y);
        assert!(
            (r.dxx - want).abs() <= 1e-14 * want.abs(),
            "({x:e}, {y:e}): {:e}",
            r.dxx
        );
        let h = forward::hessian(|v| v[0].powf(v[1]), &[x, y]);
        assert!(
            (h[0][0] - want).abs() <= 1e-14 * want.abs(),
            "({x:e}, {y:e}): {h:?}"
        );
        let h = forward::hessian(|v| v[0].powf(y), &[x]);
        assert!(
            (h[0][0] - want).abs() <= 1e-14 * want.abs(),
            "({x:e}, {y:e}): {h:?}"
        );
    }
    // y · x^(y−1) at a subnormal x: x^(y−1) overflows, the partial is y / x · x^y ≈ 1e290
    let x = 1e-310;
    let want = 1e-20 / x;
    let r = binary(Op2::Powf, x, 1e-20);
    assert!(
        (r.dx - want).abs() <= 1e-14 * want,
        "{:e} vs {want:e}",
        r.dx
    );
    // ... and nowhere else (a reviewer): at x = ∞ (∞/∞), at a subnormal x^y (the quotient lost
    // it: 0 at (1e-322, 1.02)), and ∂/∂y above x = 1, where x^(y−1) underflows first
    assert_eq!(binary(Op2::Powf, f64::INFINITY, 2.0).dx, f64::INFINITY);
    assert_eq!(
        forward::gradient(|v| v[0].powf(2.0), &[f64::INFINITY]),
        vec![f64::INFINITY]
    );
    for (x, y) in [(1e-322, 1.02), (1e-318, 1.001), (1e-320, 0.99)] {
        let (r, want) = (binary(Op2::Powf, x, y), y * x.powf(y - 1.0));
        assert!(
            (r.dx - want).abs() <= 1e-15 * want,
            "({x:e}, {y}): {:e} vs {want:e}",
            r.dx
        );
    }
    for (x, y) in [(1e100, -3.1), (1e10, -31.5), (1e10, -31.0)] {
        let (r, want) = (binary(Op2::Powf, x, y), x.powf(y) * x.ln());
        assert!(
            want != 0.0 && r.dy == want,
            "({x:e}, {y}): {:e} vs {want:e}",
            r.dy
        );
    }
}

/// A zero partial passes nothing of an overflowed tangent (a hunter): the sigmoid
/// `1 / (1 + e⁻ᶻ)` at z = −800 has the derivative σ(1 − σ) = e⁻⁸⁰⁰ (0 in f64), where the quotient
/// 0 times the divisor's tangent ∞ made it NaN in every forward path (and in the tape's
/// Hessians, which run forward mode inside); so were `1/eˣ`, `eˣ.recip()` and `eˣ.powi(-1)` at
/// 800 (closed form −e⁻⁸⁰⁰: 0), and a logistic loss −ln(1 − σ(1000·w₀ + w₁)) at w₀ = −0.8,
/// whose gradient 1000·σ, σ (0 in f64) the tape and finite differences give.
#[test]
fn a_zero_partial_passes_nothing_of_an_overflowed_tangent() {
    use adjoint_core::check;
    use adjoint_core::Real;
    fn sigmoid<T: Real>(z: T) -> T {
        T::one() / (T::one() + (-z).exp())
    }
    fn loss<T: Real>(w: &[T]) -> T {
        -(T::one() - sigmoid(w[0] * 1000.0 + w[1])).ln()
    }
    assert_eq!(forward::derivative(sigmoid, -800.0), 0.0);
    assert_eq!(forward::derivative(|x| 1.0 / x.exp(), 800.0), 0.0);
    assert_eq!(forward::derivative(|x| x.exp().recip(), 800.0), 0.0);
    assert_eq!(forward::derivative(|x| x.exp().powi(-1), 800.0), 0.0);
    assert_eq!(
        forward::hessian(|v| sigmoid(v[0]), &[-800.0]),
        vec![vec![0.0]]
    );
    let w = [-0.8, 0.0];
    let g = forward::gradient(|v| loss(v), &w);
    assert_eq!(g, check::numeric_gradient(|v| loss(v), &w));
    assert_eq!(g, vec![0.0, 0.0]);
    let h = forward::hessian(|v| loss(v), &w);
    assert!(h.iter().flatten().all(|v| *v == 0.0), "{h:?}");
    // a softmax weight e₀ / (e₀ + e₁) with e₁ = e⁸⁰⁰: ∂/∂x₁ = −e₀e₁/(e₀ + e₁)² → 0
    let s = forward::gradient(
        |x| {
            let e: Vec<_> = x.iter().map(|v| v.exp()).collect();
            e[0] / (e[0] + e[1])
        },
        &[1.0, 800.0],
    );
    assert_eq!(s, vec![0.0, 0.0]);
    // and in vector forward mode (`DualVec` lanes), a Jacobian's rows
    let j = forward::jacobian(
        |v| vec![sigmoid(v[0]), v[1].exp().recip(), v[1].exp().powi(-2)],
        &[-800.0, 800.0],
    );
    assert_eq!(j, vec![[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]);
    // where the partial is not zero, an overflowed tangent still comes through as ∞
    assert_eq!(forward::derivative(|x| x.exp() * 2.0, 800.0), f64::INFINITY);
}

/// `hypot`'s Hessian where one argument is much larger than the other, against the closed form
/// `[[y², −xy], [−xy, x²]] / h³`: differentiating the unit vector `x/h` cancelled
/// (`1/h − x²/h³`), 2e-6 relative off at (1e5, 1) and 0 past 1e8 (a hunter); both argument
/// orders and signs.
#[test]
fn hypot_second_derivatives_do_not_cancel() {
    for (x, y) in [
        (20.0, 1.0),
        (1e5, 1.0),
        (1.1e8, -1.0),
        (-3e12, 2.0),
        (1.0, 1e-20),
        (1e-300, 1e-160),
        (0.3, 0.4),
    ] {
        for (a, b) in [(x, y), (y, x)] {
            let h = forward::hessian(|v| v[0].hypot(v[1]), &[a, b]);
            let r = a.hypot(b);
            let (ua, ub) = (a / r, b / r); // (no cancellation here: no derivative taken)
            let want = [[ub * ub / r, -ua * ub / r], [0.0, ua * ua / r]];
            for (i, j) in [(0, 0), (0, 1), (1, 1)] {
                let (got, w) = (h[i][j], want[i][j]);
                assert!(
                    (got - w).abs() <= 1e-15 * w.abs(),
                    "hypot({a}, {b}) H[{i}][{j}]: {got:e} vs {w:e}"
                );
            }
        }
    }
    // (5e-324, 5e-324): h rounds to 5e-324, and x/h was 1; the unit vector is (1, 1)/√2
    let g = forward::gradient(|v| v[0].hypot(v[1]), &[5e-324, 5e-324]);
    for d in g {
        assert!((d - std::f64::consts::FRAC_1_SQRT_2).abs() < 2e-16, "{d}");
    }
}
