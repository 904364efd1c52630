//! Unoptimised builds (this package's tests run at `opt-level = 0`, as a user's `cargo test`
//! does): a Hessian of a function of a few dozen instructions, and of complex divisions, fits
//! a test thread's 2 MiB stack. Every instruction inlined the whole rule table, and without
//! optimisation each copy kept its own stack slots (~400 KiB per instruction on
//! `GVar<Dual<f64>>`): both Hessians below overflowed the stack (a hunter). The values are
//! checked against forward mode over forward mode.

use adjoint_rev::prelude::*;
use num_complex::Complex;

reversible! {
    fn cdiv3<T: RevReal>(z: &mut Complex<T>, a: &mut Complex<T>, b: &mut Complex<T>) {
        z += a / b;
        z += a * b;
        z -= b / a;
    }
    fn many<T: RevReal>(y: &mut T, x: &mut T, z: &mut T) {
        y += x.sin(); y += x * z; z += y.exp(); y += z.tanh(); y += x.cos(); z += x * y;
        y += x.sin(); y += x * z; z += y.exp(); y += z.tanh(); y += x.cos(); z += x * y;
        y += x.sin(); y += x * z; z += y.atan(); y += z.tanh(); y += x.cos(); z += x * y;
        y += x.sin(); y += x * z; z += y.atan(); y += z.tanh(); y += x.cos(); z += x * y;
    }
}

fn many_plain<T: adjoint_core::Real>(v: &[T]) -> T {
    let (mut y, x, mut z) = (v[0], v[1], v[2]);
    for k in 0..4 {
        y += x.sin();
        y += x * z;
        z += if k < 2 { y.exp() } else { y.atan() };
        y += z.tanh();
        y += x.cos();
        z += x * y;
    }
    y
}

#[test]
fn hessians_fit_a_test_thread_stack_unoptimised() -> Result<(), InvertibilityError> {
    let p = [0.0, 0.1, 0.2];
    let h = adjoint_rev::hessian(many {}, (p[0], p[1], p[2]), 0)?;
    let hf = adjoint_core::forward::hessian(|v| many_plain(v), &p);
    for i in 0..3 {
        for j in 0..3 {
            assert!((h[i][j] - hf[i][j]).abs() <= 1e-10 * (1.0 + hf[i][j].abs()), "H[{i}][{j}]: {} vs {}", h[i][j], hf[i][j]);
        }
    }
    let h = adjoint_rev::hessian(
        cdiv3 {},
        (Complex::new(0.0, 0.0), Complex::new(0.4, -0.9), Complex::new(1.1, 0.3)),
        0,
    )?;
    // z.re = Re(a/b + a·b − b/a) over (z.re, z.im, a.re, a.im, b.re, b.im).
    let hf = adjoint_core::forward::hessian(
        |v| {
            let (a, b) = (Complex::new(v[0], v[1]), Complex::new(v[2], v[3]));
            (a / b + a * b - b / a).re
        },
        &[0.4, -0.9, 1.1, 0.3],
    );
    for i in 0..4 {
        for j in 0..4 {
            let (u, w) = (h[i + 2][j + 2], hf[i][j]);
            assert!((u - w).abs() <= 1e-10 * (1.0 + w.abs()), "H[{i}][{j}]: {u} vs {w}");
        }
    }
    Ok(())
}
