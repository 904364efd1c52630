//! Issue 10, item 1: the spellings a new user writes first compile, with only `use adjoint::Real`
//! in generic code and only the type's own module for concrete types, and give the right
//! derivatives (each checked against another engine or finite differences).
//!
//! The spellings Rust forbids in generic code (`2.0 * x`, `&a * &b`, `0.0 < x`, `T::from(3)`)
//! are `compile_fail` doctests on `adjoint::Real`, next to the spelling to use instead.

// The point of this file is that these spellings compile; clippy would rewrite some of them.
#![allow(clippy::op_ref)]

mod generic {
    use adjoint::Real;

    /// Constants: `T::from(3.0)` (not ambiguous: `Real` is not `NumCast`) and `T::cst`.
    pub fn constants<T: Real>(x: &[T]) -> T {
        let mut r = T::from(3.0) * x[0] + T::cst(0.5) * x[1] + T::zero() + T::one();
        r %= 2.0; // 3.75 at X wraps to 1.75 (derivative 1 either way: `% 2.0` is checked by value)
        r + T::PI() * x[2]
    }

    /// References: `iter().sum()`, `iter().product()`, `s += v` with `v: &T`, `a + &b`.
    pub fn references<T: Real>(x: &[T]) -> T {
        let s: T = x.iter().sum();
        let p: T = x.iter().product();
        let mut acc = T::zero();
        for v in x {
            acc += v;
            acc *= &x[0];
        }
        let q = x[0] + &x[1] - &x[2];
        let r = x[1] * &x[2] / &x[0];
        s + p + acc + q + r
    }

    /// `f64` operands: `max`, `min`, `powf`, `clamp`, `%`, `atan2`, `hypot`, `mul_add`, `log`,
    /// `rem_euclid` (of a negative number: −1.3 wraps to 0.7, derivative 1).
    pub fn mixed<T: Real>(x: &[T]) -> T {
        let a = x[0].max(0.0) + x[1].min(1.0) + x[2].powf(1.5);
        let b = x[0].clamp(0.0, 1.0) + x[1] % 2.0 + x[2].atan2(1.0) + x[0].hypot(3.0);
        let c = x[1].mul_add(2.0, 1.0) + x[2].log(10.0) + x[0].max(x[1]) + (-x[1]).rem_euclid(2.0);
        let d = if x[0] > 0.0 && x[1] < x[2] {
            x[0]
        } else {
            x[1]
        };
        a + b + c + d
    }

    /// Everything above, as the concrete modules below spell it in generic form.
    pub fn all<T: Real>(x: &[T]) -> T {
        constants(x) + references(x) + mixed(x)
    }
}

/// A point where every piece above is smooth (x₀ ∈ (0, 1), x₁ % 2 away from a jump, x₂ > 0).
const X: [f64; 3] = [0.7, 1.3, 2.1];

fn close(a: &[f64], b: &[f64]) {
    for (i, (p, q)) in a.iter().zip(b).enumerate() {
        assert!(
            (p - q).abs() <= 1e-12 * (1.0 + q.abs()),
            "component {i}: {p} vs {q}"
        );
    }
}

#[test]
fn generic_spellings_give_gradients_that_match_finite_differences() {
    use adjoint::{check, forward, tape};
    for f in [
        generic::constants::<f64> as fn(&[f64]) -> f64,
        generic::references::<f64>,
        generic::mixed::<f64>,
    ] {
        let _ = f(&X);
    }
    let c = generic::constants(&X);
    let want = (3.0 * X[0] + 0.5 * X[1] + 1.0) % 2.0 + std::f64::consts::PI * X[2];
    assert!((c - want).abs() < 1e-14, "{c} vs {want}");
    let g = tape::grad(|x| generic::all(x), &X);
    check::check_gradient(|x| generic::all(x), &X, &g).assert_passed();
    close(&g, &forward::gradient(|x| generic::all(x), &X));
}

/// The tape's `Var` with only `adjoint::tape` imported: methods are inherent, operators work on
/// references and with `f64` on either side, comparisons with `f64` on either side.
mod on_var {
    use adjoint::tape::{self, Var};

    fn f(x: &[Var]) -> Var {
        let a = &x[0] * &x[1] + x[2].sin().max(0.0) - 2.0 * x[0];
        let b: Var = x.iter().map(|v| v * v).sum();
        let c: Var = x.iter().product();
        let mut s = Var::from(1.0);
        for v in x {
            s += v;
        }
        let d = if 0.0 < x[0] { x[0].powf(1.5) } else { -x[0] };
        let e = x[1].clamp(0.0, 1.0) + x[2] % 2.0 + 1.0 / x[2] + x[0].min(x[2]);
        a + b + c + s + d + e + (-x[2]).rem_euclid(0.5)
    }

    fn reference<T: adjoint::Real>(x: &[T]) -> T {
        let a = x[0] * x[1] + x[2].sin().max(0.0) - x[0] * 2.0;
        let b = x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
        let c = x[0] * x[1] * x[2];
        let s = T::from(1.0) + x[0] + x[1] + x[2];
        let d = if x[0] > 0.0 { x[0].powf(1.5) } else { -x[0] };
        let e = x[1].clamp(0.0, 1.0) + x[2] % 2.0 + x[2].recip() + x[0].min(x[2]);
        // (−2.1 % 0.5 is −0.1, wrapped to 0.4)
        a + b + c + s + d + e + (-x[2]) % 0.5 + 0.5
    }

    /// Constants and the value on the concrete type, as generic code writes them on `T`.
    #[test]
    fn concrete_var_constants() {
        let (y, g) = tape::value_and_grad(
            |x: &[Var]| {
                let mut r = Var::zero() + Var::one() + Var::PI() * x[0] + Var::cst(2.0) * x[1];
                r %= 2.0; // 2.785… wraps to 0.785…
                r * Var::E() + Var::TAU() - Var::SQRT_2() + Var::from(x[0].value() * 4.0)
            },
            &[0.25, 0.5],
        );
        let (pi, e) = (std::f64::consts::PI, std::f64::consts::E);
        let r = (1.0 + pi * 0.25 + 1.0) % 2.0;
        let want = r * e + std::f64::consts::TAU - std::f64::consts::SQRT_2 + 1.0;
        assert!(r < 1.0 && (y - want).abs() < 1e-14, "{y} vs {want}");
        super::close(&g, &[pi * e, 2.0 * e]);
    }

    #[test]
    fn concrete_var_spellings_match_forward_mode() {
        let (y, g) = tape::value_and_grad(|x| f(x), &super::X);
        assert!((y - reference(&super::X)).abs() < 1e-12);
        super::close(&g, &adjoint::forward::gradient(|x| reference(x), &super::X));
    }
}

/// `Dual<f64>` with only `adjoint::forward` imported.
mod on_dual {
    use adjoint::forward::Dual64;

    #[test]
    fn concrete_dual_spellings_match_closed_forms() {
        let x = Dual64::variable(0.7);
        let y = 2.0 * x.sin() + &x * &x - x.max(0.0)
            + x.powf(2.5)
            + x.clamp(0.0, 1.0)
            + (x * 3.0).rem_euclid(-2.0);
        // (3·0.7 = 2.1 wraps to 0.1 with quotient −1: derivative 3)
        let dy = 2.0 * 0.7f64.cos() + 2.0 * 0.7 - 1.0 + 2.5 * 0.7f64.powf(1.5) + 1.0 + 3.0;
        assert!((y.eps - dy).abs() < 1e-14, "{} vs {dy}", y.eps);
        // the branch that adds |y|: −2.1 % 2 is −0.1, wrapped to 1.9 (derivative −3 in x,
        // minus the quotient −2 in the divisor)
        let (w, d) = (-x * 3.0, Dual64::variable(2.0));
        let (rx, rd) = (w.rem_euclid(2.0), Dual64::constant(-2.1).rem_euclid(d));
        assert_eq!((rx.re, rx.eps), ((-0.7f64 * 3.0).rem_euclid(2.0), -3.0));
        assert_eq!((rd.re, rd.eps), ((-2.1f64).rem_euclid(2.0), 2.0));
        assert!(0.0 < x && 1.0 > x && 0.7 == x);
        let s: Dual64 = [x, x, x].iter().sum();
        assert_eq!((s.re, s.eps), (0.7 + 0.7 + 0.7, 3.0));
        let c = Dual64::zero() + Dual64::one() + Dual64::PI() * x + Dual64::cst(2.0);
        assert_eq!(
            (c.value(), c.eps),
            (3.0 + std::f64::consts::PI * 0.7, std::f64::consts::PI)
        );
    }
}

/// Sorting active numbers by value (`sort_by(|a, b| a.total_cmp(b))` did not compile for a
/// generic `T: Real`; a hunter) and a median's gradient through it, against finite differences.
mod sorting {
    use adjoint::{check, tape, Real};

    fn median<T: Real>(x: &[T]) -> T {
        let mut v = x.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    }

    #[test]
    fn a_median_sorts_active_numbers_by_value() {
        let x = [0.3, -1.2, 2.5, 0.9, 0.1];
        let g = tape::grad(|v| median(v), &x);
        assert_eq!(g, [1.0, 0.0, 0.0, 0.0, 0.0]);
        check::check_gradient(|v| median(v), &x, &g).assert_passed();
        let gf = adjoint::forward::gradient(|v| median(v), &x);
        assert_eq!(gf, g);
    }
}

/// ndarray's `std` over active numbers, generic: the bound comes from the facade's re-export of
/// `num-traits` (no dependency of the user's own; a hunter).
#[cfg(feature = "ndarray")]
mod ndarray_std {
    use adjoint::num_traits::{Float, FromPrimitive};
    use adjoint::{forward, tape, Real};

    fn spread<T: Real + Float + FromPrimitive>(x: &[T]) -> T {
        ndarray::Array1::from_vec(x.to_vec()).std(T::one())
    }

    #[test]
    fn std_of_active_numbers_matches_the_closed_form() {
        let x = [1.0, 2.5, -0.5, 4.0];
        let g = tape::grad(|v| spread(v), &x);
        let gf = forward::gradient(|v| spread(v), &x);
        // ∂s/∂xᵢ = (xᵢ − m) / ((n − 1)·s)
        let n = x.len() as f64;
        let m = x.iter().sum::<f64>() / n;
        let s = (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        for (i, xi) in x.iter().enumerate() {
            let want = (xi - m) / ((n - 1.0) * s);
            assert!((g[i] - want).abs() < 1e-14, "{g:?}: [{i}] {want}");
            assert!((gf[i] - want).abs() < 1e-14, "{gf:?}: [{i}] {want}");
        }
    }
}
