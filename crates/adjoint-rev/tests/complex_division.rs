//! Complex `z += a / b` (a hunter's finding): on integers the quotient is `num_complex`'s,
//! `(a · conj b) / |b|²` (it was `a · (1/b)`, and `1/b` truncated to 0); on fixed point and
//! floats it is Smith's algorithm, which never squares the divisor (`|b|²` wrapped in `I16F16`
//! from |b| ≈ 182, overflowed in `f64` from 1e154, and lost digits below 1e-154). Values against
//! `num_complex`'s quotient of the same numbers (or the exact one), gradients against forward
//! mode and central differences.

use adjoint_core::check::check_gradient;
use adjoint_rev::prelude::*;
use adjoint_rev::{grad, hessian, value_and_grad_unchecked};
use fixed::types::{I16F16, I32F32};
use num_complex::Complex;

type R = Result<(), InvertibilityError>;

reversible! {
    fn cdiv<T: Arith>(z: &mut Complex<T>, a: &mut Complex<T>, b: &mut Complex<T>) {
        z += a / b;
    }
    fn cdiv_self<T: Arith>(z: &mut Complex<T>, a: &mut Complex<T>) {
        z += a / a;
    }
    /// `loss += |a / b|²`'s real part through complex ancillas.
    fn cdiv_loss<T: RevReal>(loss: &mut T, a: &mut Complex<T>, b: &mut Complex<T>) {
        @routine {
            let q = Complex::new(T::zero(), T::zero());
            q += a / b;
        }
        loss += q.re * q.re;
        loss += q.im * q.im;
        loss += q.re;
        ~@routine;
    }
}

#[test]
fn integer_quotients_are_num_complex_s() -> R {
    for (a, b) in [
        ((6i64, 8), (3i64, 4)),
        ((4, 0), (2, 0)),
        ((7, -3), (2, 5)),
        ((-100, 37), (-6, -9)),
        ((1, 1), (0, 3)),
    ] {
        let (a, b) = (Complex::new(a.0, a.1), Complex::new(b.0, b.1));
        let (mut z, mut x, mut y) = (Complex::new(5i64, -2), a, b);
        cdiv(&mut z, &mut x, &mut y)?;
        assert_eq!(z, Complex::new(5, -2) + a / b, "{a} / {b}");
        cdiv::uncall(&mut z, &mut x, &mut y)?;
        assert_eq!((z, x, y), (Complex::new(5, -2), a, b));
    }
    let (mut z, mut a) = (Complex::new(0i32, 0), Complex::new(3, -4));
    cdiv_self(&mut z, &mut a)?;
    assert_eq!(z, Complex::new(1, 0));
    // A divisor of 0 is an error, not a panic.
    let (mut z, mut a, mut b) = (
        Complex::new(0i64, 0),
        Complex::new(1, 1),
        Complex::new(0, 0),
    );
    assert!(cdiv(&mut z, &mut a, &mut b).is_err());
    Ok(())
}

#[test]
fn fixed_point_quotients_do_not_square_the_divisor() -> R {
    let q = |a: (f64, f64), b: (f64, f64)| Complex::new(a.0, a.1) / Complex::new(b.0, b.1);
    for (a, b) in [
        ((100.0, 0.0), (200.0, 0.0)),
        ((100.0, 50.0), (200.0, -150.0)),
        ((-3.0, 7.5), (0.5, 300.0)),
    ] {
        let f = |v: f64| I16F16::from_num(v);
        let (mut z, mut x, mut y) = (
            Complex::new(f(0.0), f(0.0)),
            Complex::new(f(a.0), f(a.1)),
            Complex::new(f(b.0), f(b.1)),
        );
        cdiv(&mut z, &mut x, &mut y)?;
        let want = q(a, b);
        assert!(
            (z.re.to_num::<f64>() - want.re).abs() < 1e-3,
            "{a:?}/{b:?}: {z:?} vs {want}"
        );
        assert!(
            (z.im.to_num::<f64>() - want.im).abs() < 1e-3,
            "{a:?}/{b:?}: {z:?} vs {want}"
        );
    }
    let f = |v: f64| I32F32::from_num(v);
    let (mut z, mut x, mut y) = (
        Complex::new(f(0.0), f(0.0)),
        Complex::new(f(3.0), f(0.0)),
        Complex::new(f(70000.0), f(0.0)),
    );
    cdiv(&mut z, &mut x, &mut y)?;
    assert!((z.re.to_num::<f64>() - 3.0 / 70000.0).abs() < 1e-8, "{z:?}");
    Ok(())
}

#[test]
fn float_quotients_at_extreme_magnitudes() -> R {
    for (a, b, want) in [
        ((1e200, 0.0), (1e200, 0.0), (1.0, 0.0)),
        ((1e-160, 0.0), (1e-160, 0.0), (1.0, 0.0)),
        ((1e300, 1e300), (1e300, -1e300), (0.0, 1.0)),
        ((2.0, 0.0), (0.0, 1e-170), (0.0, -2e170)),
    ] {
        let (mut z, mut x, mut y) = (
            Complex::new(0.0, 0.0),
            Complex::new(a.0, a.1),
            Complex::new(b.0, b.1),
        );
        cdiv(&mut z, &mut x, &mut y)?;
        let close = |u: f64, v: f64| (u - v).abs() <= 1e-14 * v.abs().max(1e-300);
        assert!(
            close(z.re, want.0) && close(z.im, want.1),
            "{a:?}/{b:?}: {z}"
        );
    }
    // Ordinary values: as num_complex's quotient to rounding.
    let (a, b) = (Complex::new(0.3, -1.7), Complex::new(-2.2, 0.9));
    let (mut z, mut x, mut y) = (Complex::new(0.0, 0.0), a, b);
    cdiv(&mut z, &mut x, &mut y)?;
    assert!((z - a / b).norm() < 1e-15);
    cdiv::uncall(&mut z, &mut x, &mut y)?;
    assert!(z.norm() < 1e-15);
    Ok(())
}

/// The loss by the quotient's closed form `(a·conj b)/|b|²`, at any `Real` (forward mode's
/// reference).
fn loss_closed_form<T: adjoint_core::Real>(v: &[T]) -> T {
    let (a, b) = ((v[0], v[1]), (v[2], v[3]));
    let d = b.0 * b.0 + b.1 * b.1;
    let (qr, qi) = ((a.0 * b.0 + a.1 * b.1) / d, (a.1 * b.0 - a.0 * b.1) / d);
    qr * qr + qi * qi + qr
}

fn loss(p: &[f64]) -> f64 {
    let q = Complex::new(p[0], p[1]) / Complex::new(p[2], p[3]);
    q.norm_sqr() + q.re
}

#[test]
fn gradients_through_both_branches() -> R {
    // |b.re| ≥ |b.im| and the other way, and a quotient of one place by itself.
    for p in [
        [0.3, -1.7, -2.2, 0.9],
        [1.1, 0.4, 0.2, -1.5],
        [2.0, 0.5, 1.0, 1.0],
    ] {
        let (_, ga, gb) = grad(
            cdiv_loss {},
            (0.0, Complex::new(p[0], p[1]), Complex::new(p[2], p[3])),
            0,
        )?;
        let g = [ga.re, ga.im, gb.re, gb.im];
        check_gradient(loss, &p, &g).assert_passed();
        let reference = adjoint_core::forward::gradient(|v| loss_closed_form(v), &p);
        for i in 0..4 {
            assert!(
                (g[i] - reference[i]).abs() < 1e-12 * (1.0 + reference[i].abs()),
                "{g:?} vs {reference:?}"
            );
        }
        let (_, gu) = value_and_grad_unchecked(
            cdiv_loss {},
            (0.0, Complex::new(p[0], p[1]), Complex::new(p[2], p[3])),
            0,
        )?;
        assert_eq!((gu.1, gu.2), (ga, gb));
        let h = hessian(
            cdiv_loss {},
            (0.0, Complex::new(p[0], p[1]), Complex::new(p[2], p[3])),
            0,
        )?;
        let hf = adjoint_core::forward::hessian(|v| loss_closed_form(v), &p);
        for i in 0..4 {
            for j in 0..4 {
                let (u, v) = (h[i + 1][j + 1], hf[i][j]);
                assert!(
                    (u - v).abs() < 1e-10 * (1.0 + v.abs()),
                    "H[{i}][{j}] {u} vs {v}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn fixed_point_divisors_at_the_type_s_edges() {
    use fixed::types::I1F31;
    // Q31 has no 1: the check of the divisor used `1 / |b|` and panicked (a second hunter).
    let q = |v: f64| I1F31::from_num(v);
    let (mut z, mut a, mut b) = (
        Complex::new(q(0.0), q(0.0)),
        Complex::new(q(0.25), q(0.0)),
        Complex::new(q(0.5), q(0.25)),
    );
    cdiv(&mut z, &mut a, &mut b).unwrap();
    assert!(
        (z.re.to_num::<f64>() - 0.4).abs() < 1e-8 && (z.im.to_num::<f64>() + 0.2).abs() < 1e-8,
        "{z:?}"
    );
    // A divisor whose scaled part wraps to 0 is an error, not a panic.
    let f = |v: f64| I16F16::from_num(v);
    let (mut z, mut a, mut b) = (
        Complex::new(f(0.0), f(0.0)),
        Complex::new(f(1.0), f(0.0)),
        Complex::new(f(-32768.0), f(-32768.0)),
    );
    let err = cdiv(&mut z, &mut a, &mut b).unwrap_err();
    assert!(err.to_string().contains("division by zero"), "{err}");
}

#[test]
fn an_overflowing_scaled_divisor_is_an_error_in_checked_code() {
    // (1e308)/(1e308 + 1e308i) is 0.5 − 0.5i, but b.re + b.im·r overflows to ∞ and the
    // quotient came out 0 with no error (the reviewer); checked code refuses it.
    let (mut z, mut a, mut b) = (
        Complex::new(0.0, 0.0),
        Complex::new(1e308, 0.0),
        Complex::new(1e308, 1e308),
    );
    let err = cdiv(&mut z, &mut a, &mut b).unwrap_err();
    assert!(
        err.to_string().contains("scaled divisor overflows"),
        "{err}"
    );
    assert_eq!(z, Complex::new(0.0, 0.0));
}

#[test]
fn a_floating_point_division_by_zero_says_so() {
    // (1 + i)/(0 + 0i) was reported as "the scaled divisor overflows (NaN); scale both operands
    // down first", advice that cannot help (a hunter): it is a division by zero, in f64 and
    // f32 as in the integer types, and through the gradient too.
    let mut z = Complex::new(0.0, 0.0);
    let err = cdiv(
        &mut z,
        &mut Complex::new(1.0, 1.0),
        &mut Complex::new(0.0, 0.0),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("division by zero: (1.0 + 1.0i) / (0.0 + 0.0i)"),
        "{err}"
    );
    assert_eq!(z, Complex::new(0.0, 0.0));
    let mut z = Complex::new(0.0f32, 0.0);
    let err = cdiv(
        &mut z,
        &mut Complex::new(1.0, 1.0),
        &mut Complex::new(-0.0, 0.0),
    )
    .unwrap_err();
    assert!(err.to_string().contains("division by zero"), "{err}");
    let args = (
        Complex::new(0.0, 0.0),
        Complex::new(1.0, 1.0),
        Complex::new(0.0, 0.0),
    );
    let err = adjoint_rev::grad(cdiv {}, args, 0).unwrap_err();
    assert!(err.to_string().contains("division by zero"), "{err}");
    // The smallest divisors that are not 0 still divide.
    let mut z = Complex::new(0.0f64, 0.0);
    cdiv(
        &mut z,
        &mut Complex::new(1e-300, 0.0),
        &mut Complex::new(5e-324, 0.0),
    )
    .unwrap();
    assert!(z.re.is_finite() && z.re > 1e23, "{z:?}");
}
