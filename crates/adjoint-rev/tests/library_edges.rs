//! The library at the edges of its domain, in checked code (a hunter): `i_logsumexp` with
//! masked (`−∞`) entries and entries whose difference from the largest overflows was refused
//! as a non-finite step; values and gradients against the closed forms and forward mode.

use adjoint_rev::library::i_logsumexp;
use adjoint_rev::prelude::*;
use adjoint_rev::{grad, hessian, value_and_grad, value_and_grad_unchecked};

reversible! {
    fn lse<T: RevReal>(out: &mut T, x: &mut Vec<T>) {
        i_logsumexp(out, x);
    }
}

fn lse_plain<T: adjoint_core::Real>(x: &[T]) -> T {
    adjoint_core::vector::logsumexp(x)
}

#[test]
fn logsumexp_takes_masked_and_far_entries() -> Result<(), InvertibilityError> {
    let inf = f64::INFINITY;
    for (x, value, g) in [
        (vec![0.0, -inf], 0.0, vec![1.0, 0.0]),
        (vec![-inf, 2.0, -inf], 2.0, vec![0.0, 1.0, 0.0]),
        (vec![-1e308, 1e308], 1e308, vec![0.0, 1.0]),
        (vec![1.0, 1.0 - 800.0], 1.0, vec![1.0, 0.0]),
    ] {
        let (out, grads) = value_and_grad(lse {}, (0.0, x.clone()), 0)?;
        assert_eq!(out.0, value, "{x:?}");
        assert_eq!(grads.1, g, "{x:?}");
        let (out_u, grads_u) = value_and_grad_unchecked(lse {}, (0.0, x.clone()), 0)?;
        assert_eq!((out_u.0, grads_u.1), (value, g));
    }
    // NaN still propagates.
    let (out, _) = value_and_grad_unchecked(lse {}, (0.0, vec![1.0, f64::NAN]), 0)?;
    assert!(out.0.is_nan());
    // Ordinary entries, with one 700 below: as forward mode, Hessian too.
    let x = vec![0.3, -1.2, 2.5, 2.5 - 700.0];
    let g = grad(lse {}, (0.0, x.clone()), 0)?;
    let gf = adjoint_core::forward::gradient(|v| lse_plain(v), &x);
    for i in 0..x.len() {
        assert!((g.1[i] - gf[i]).abs() < 1e-15, "{:?} vs {gf:?}", g.1);
    }
    let h = hessian(lse {}, (0.0, x[..3].to_vec()), 0)?;
    let hf = adjoint_core::forward::hessian(|v| lse_plain(v), &x[..3]);
    for i in 0..3 {
        for j in 0..3 {
            assert!((h[i + 1][j + 1] - hf[i][j]).abs() < 1e-14, "H[{i}][{j}]");
        }
    }
    Ok(())
}

/// A checked gradient whose inverse does not rebuild the inputs is an error, not a gradient
/// along another trajectory: the leapfrog integrator past its stability limit (k·dt² = 5 > 4)
/// amplifies the rounding of its inverse, which rebuilt x₀ = 1e-30 as 80 after 60 steps and
/// gave ∂x_T/∂k = 2.9e22 where forward mode gives 1.6e-8 (a hunter). Every checked route
/// (gradient, Jacobian, lanes, Hessian) now compares the rebuilt inputs with the given ones.
#[test]
fn a_checked_gradient_whose_inverse_does_not_rebuild_the_inputs_is_an_error() {
    use adjoint_rev::examples::{i_leapfrog, leapfrog};
    use adjoint_rev::InvertibilityError;
    let unstable = (1e-30f64, 0.0f64, 5e4f64, 60usize);
    let is_inputs = |e: InvertibilityError| {
        let text = e.to_string();
        assert!(
            matches!(e, InvertibilityError::Inputs { scalar: 0, .. }),
            "{text}"
        );
        assert!(
            text.contains("i_leapfrog") && text.contains("rebuild input scalar 0"),
            "{text}"
        );
    };
    is_inputs(adjoint_rev::value_and_grad(i_leapfrog {}, unstable, 0).unwrap_err());
    is_inputs(adjoint_rev::jacobian(i_leapfrog {}, unstable, &[0, 1]).unwrap_err());
    is_inputs(adjoint_rev::jacobian_lanes::<2, _>(i_leapfrog {}, unstable, &[0, 1]).unwrap_err());
    is_inputs(adjoint_rev::hessian(i_leapfrog {}, unstable, 0).unwrap_err());
    // Unchecked code does not look (documented), and a stable run passes and matches forward
    // mode.
    assert!(adjoint_rev::value_and_grad_unchecked(i_leapfrog {}, unstable, 0).is_ok());
    let stable = (0.8f64, -0.3f64, 1.7f64, 200usize);
    let (_, g) = adjoint_rev::value_and_grad(i_leapfrog {}, stable, 0).unwrap();
    let f = adjoint_core::forward::gradient(|q| leapfrog(q[0], q[1], q[2], 200), &[0.8, -0.3, 1.7]);
    for (a, b) in [g.0, g.1, g.2].iter().zip(&f) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
    }
}

reversible! {
    fn read_then_absorbed<T: RevReal>(w: &mut T, y: &mut T, x: &mut T) {
        w += y * x;
        y += 1e30;
    }
}

/// Why the rebuilt inputs are compared relative to the inputs, not to the largest value they
/// passed through (the crate docs): `y = 3` is absorbed by `1e30`, the inverse rebuilds it as 0,
/// and the gradient of `w += y * x` along that trajectory is ∂w/∂x = 0 where the closed form
/// gives `y = 3`. The checked route refuses it; the unchecked one (documented: checks nothing)
/// returns the 0.
#[test]
fn an_input_absorbed_and_read_is_refused() {
    let args = (0.0f64, 3.0f64, 2.0f64);
    // (`w` is the first input not rebuilt: `w -= y * x` with the rebuilt `y = 0` leaves 6)
    let err = grad(read_then_absorbed {}, args, 0).unwrap_err();
    assert!(
        matches!(err, InvertibilityError::Inputs { scalar: 0, .. }),
        "{err}"
    );
    let (_, g) = value_and_grad_unchecked(read_then_absorbed {}, args, 0).unwrap();
    assert_eq!(
        g.2, 0.0,
        "the unchecked gradient along the rebuilt trajectory"
    );
    // at a `y` the large term does not absorb, both agree with the closed form ∂w/∂x = y
    let args = (0.0f64, 2f64.powi(60), 2.0f64);
    let g = grad(read_then_absorbed {}, args, 0).unwrap();
    assert_eq!(g.2, 2f64.powi(60));
}

reversible! {
    fn sum_of<T: Arith>(out: &mut T, x: &mut Vec<T>) {
        adjoint_rev::library::i_sum(out, x);
    }
    fn norm_of<T: RevReal>(out: &mut T, sq: &mut T, x: &mut Vec<T>) {
        adjoint_rev::library::i_norm(out, sq, x);
    }
}

/// The library's documented limit (a hunter): a term absorbed by a sum comes back as the sum's
/// rounding, which checked code refuses (`i_mean`'s ancilla, the checked gradients); the
/// unchecked gradients are the closed forms (all ones; x/‖x‖), and the message names the cause.
#[test]
fn absorbed_terms_are_refused_in_checked_code_as_documented() {
    use adjoint_rev::library::i_mean;
    let (mut m, mut x) = (0.0, vec![1.0, 1e17]);
    let err = i_mean(&mut m, &mut x).unwrap_err();
    assert!(err.to_string().contains("ancilla `s`"), "{err}");
    // nothing is rolled back (documented): `out += s / n` ran before the failing `unlet`
    assert_eq!((m, &x[..]), (5e16, &[1.0, 1e17][..]));
    let err = grad(sum_of {}, (0.0, vec![1.0, 1e17]), 0).unwrap_err();
    assert!(
        matches!(err, InvertibilityError::Inputs { scalar: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("absorbed"), "{err}");
    assert!(grad(norm_of {}, (0.0, 0.0, vec![1.0, 1e9]), 0).is_err());
    let (_, g) = value_and_grad_unchecked(sum_of {}, (0.0, vec![1.0, 1e17]), 0).unwrap();
    assert_eq!(g.1, [1.0, 1.0]);
    let (_, g) = value_and_grad_unchecked(norm_of {}, (0.0, 0.0, vec![1.0, 1e9]), 0).unwrap();
    assert_eq!(g.2, [1e-9, 1.0]);
}

/// `i_complex_log` at |x| far from 1: its `|x|` was `sqrt(re² + im²)`, whose square underflows
/// below 1e-154 and overflows above 1e154 (a hunter: at (3e-160, 4e-160) ln|x| was 1.5e-8 off
/// and the gradient (inf, inf), with no error). Closed forms: ln|x| = ln 5 + e·ln 10,
/// ∂ln|x|/∂x = x/|x|², arg x = atan2(im, re).
#[test]
fn complex_log_far_from_one() -> Result<(), InvertibilityError> {
    use adjoint_rev::library::i_complex_log;
    for e in [-300.0f64, -160.0, -156.0, 0.0, 160.0, 300.0] {
        let s = 10f64.powf(e);
        let x = Complex::new(3.0 * s, 4.0 * s);
        let (out, g) = value_and_grad(i_complex_log {}, (Complex::new(0.0, 0.0), x), 0)?;
        let ln_abs = 5f64.ln() + e * 10f64.ln();
        assert!(
            (out.0.re - ln_abs).abs() <= 1e-14 * ln_abs.abs().max(1.0),
            "{e}: {}",
            out.0.re
        );
        assert!((out.0.im - 4f64.atan2(3.0)).abs() < 1e-15, "{e}");
        // ∂y.re/∂(x.re, x.im) = (3, 4) / (25 s)
        let (want_re, want_im) = (3.0 / (25.0 * s), 4.0 / (25.0 * s));
        assert!(
            (g.1.re - want_re).abs() <= 1e-14 * want_re,
            "{e}: {}",
            g.1.re
        );
        assert!(
            (g.1.im - want_im).abs() <= 1e-14 * want_im,
            "{e}: {}",
            g.1.im
        );
    }
    Ok(())
}
