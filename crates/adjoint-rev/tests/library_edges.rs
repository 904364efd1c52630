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
