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

// The README's SSA example.
use adjoint::ssa::differentiable;

#[differentiable]
fn rosenbrock(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() - 1 {
        let t = x[i + 1] - x[i] * x[i];
        s += 100.0 * t * t + (1.0 - x[i]) * (1.0 - x[i]);
    }
    s
}

#[test]
fn readme_ssa_example() {
    let x = [0.5, 1.5, -0.3];
    let mut g = [0.0; 3];
    let y = rosenbrock::grad(&x, &mut g);
    assert_eq!(y, rosenbrock(&x));
    assert!((g[2] - 200.0 * (x[2] - x[1] * x[1])).abs() < 1e-12);
    // Every component against finite differences.
    check::check_gradient(|v| rosenbrock::primal(v), &x, &g).assert_passed();
}

// The README's array example.
#[test]
fn readme_array_example() -> adjoint::array::Result<()> {
    use adjoint::array::Builder;
    let b = Builder::new();
    let x = b.input(&[4]);
    let loss = x.map(|v| (v * v).sin()).sum();
    let program = b.build_scalar(&loss)?;
    let xs = [0.1, 0.2, 0.3, 0.4];
    let g = program.gradient_a(&[&xs])?;
    assert!((g.grads[0][1] - 2.0 * 0.2 * (0.04f64).cos()).abs() < 1e-15);
    let reference = forward::gradient(|v| v.iter().map(|&t| (t * t).sin()).sum(), &xs);
    for (a, r) in g.grads[0].iter().zip(&reference) {
        assert!((a - r).abs() < 1e-14);
    }
    Ok(())
}
