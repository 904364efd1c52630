//! The README example, kept compiling and correct.
use adjoint::{check, forward, tape, Real};

fn loss<T: Real>(x: &[T]) -> T {
    let mut total = T::cst(0.0);
    for (i, w) in x.windows(2).enumerate() {
        let spring = (w[1] - w[0] - 1.0).powi(2);
        let damp = if w[0] > 0.0 { w[0].ln_1p() } else { w[0] * 0.5 };
        total += spring * (i as f64 + 1.0) + damp;
    }
    total.sqrt()
}

#[test]
fn readme_example() {
    let x = [0.2, 1.5, 2.1, 3.7];
    let g = tape::grad(|x: &[tape::Var]| loss(x), &x);
    let h = tape::hessian(|x| loss(x), &x);
    let gf = forward::gradient(|x| loss(x), &x);
    check::check_gradient(|x| loss(x), &x, &g).assert_passed();
    assert!((g[0] - gf[0]).abs() < 1e-12);
    // Row 0 of the Hessian against finite differences of the forward gradient.
    let fd = adjoint::check::numeric_gradient(|v| forward::gradient(|x| loss(x), v)[0], &x);
    for j in 0..4 {
        assert!((h[0][j] - fd[j]).abs() < 1e-7, "{} vs {}", h[0][j], fd[j]);
    }
}

// The README's reversible example.
use adjoint::rev::prelude::*;

reversible! {
    fn multiplier<T: Arith>(y: &mut T, a: &mut T, b: &mut T) {
        y += a * b;
    }
}

#[test]
fn readme_reversible_example() -> Result<(), InvertibilityError> {
    let (mut y, mut a, mut b) = (2, 3, 5);
    multiplier(&mut y, &mut a, &mut b)?; // (17, 3, 5)
    assert_eq!((y, a, b), (17, 3, 5));
    multiplier::uncall(&mut y, &mut a, &mut b)?; // back to (2, 3, 5)
    assert_eq!((y, a, b), (2, 3, 5));
    let g = adjoint::rev::grad(multiplier {}, (0.0, 2.0, 3.0), 0)?;
    assert_eq!(g, (1.0, 3.0, 2.0));
    Ok(())
}
