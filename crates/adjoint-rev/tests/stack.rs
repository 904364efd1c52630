//! Unoptimised builds (this package's tests run at `opt-level = 0`, as a user's `cargo test`
//! does). Every instruction inlined the whole rule table, and without optimisation each copy
//! kept its own stack slots (~400 KiB per instruction on `GVar<Dual<f64>>`), nested number
//! types inlining it again inside it: Hessians of a few dozen instructions, or of complex
//! divisions, overflowed a test thread's 2 MiB stack, and forward over forward through two
//! instructions took rustc 7–9 GB to compile (two hunters). Values against forward over forward
//! or closed forms.

use adjoint_rev::prelude::*;
use num_complex::Complex;

reversible! {
    fn cdiv3<T: RevReal>(z: &mut Complex<T>, a: &mut Complex<T>, b: &mut Complex<T>) {
        z += a / b;
        z += a * b;
        z -= b / a;
    }
    /// 72 complex instructions (a second hunter: still 2 MiB too many after the first fix),
    /// written out: a loop would inline each instruction once.
    fn c72<T: RevReal>(z: &mut Complex<T>, a: &mut Complex<T>, b: &mut Complex<T>) {
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
        z += a / b;
        z -= b * a;
        z += b / a;
    }
    fn two<T: RevReal>(y: &mut T, a: &mut T, b: &mut T) {
        y += a * b;
        y += a.sin();
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
            assert!(
                (h[i][j] - hf[i][j]).abs() <= 1e-10 * (1.0 + hf[i][j].abs()),
                "H[{i}][{j}]: {} vs {}",
                h[i][j],
                hf[i][j]
            );
        }
    }
    let h = adjoint_rev::hessian(
        cdiv3 {},
        (
            Complex::new(0.0, 0.0),
            Complex::new(0.4, -0.9),
            Complex::new(1.1, 0.3),
        ),
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
            assert!(
                (u - w).abs() <= 1e-10 * (1.0 + w.abs()),
                "H[{i}][{j}]: {u} vs {w}"
            );
        }
    }
    Ok(())
}

#[test]
fn forward_over_forward_through_reversible_code_builds_and_runs_unoptimised() {
    // `Dual<Dual<f64>>` through the instructions: before, compiling this test took 7–9 GB of
    // memory and the program overflowed its stack (a hunter).
    let h = adjoint_core::forward::hessian(
        |p| {
            let (mut y, mut a, mut b) = (p[0], p[1], p[2]);
            two(&mut y, &mut a, &mut b).unwrap();
            y
        },
        &[0.0, 1.3, 0.7],
    );
    let want = [
        [0.0, 0.0, 0.0],
        [0.0, -(1.3f64.sin()), 1.0],
        [0.0, 1.0, 0.0],
    ];
    for i in 0..3 {
        for j in 0..3 {
            assert!(
                (h[i][j] - want[i][j]).abs() < 1e-14,
                "H[{i}][{j}] = {}",
                h[i][j]
            );
        }
    }
}

#[test]
fn long_complex_programs_fit_unoptimised() -> Result<(), InvertibilityError> {
    let args = (
        Complex::new(0.1, 0.2),
        Complex::new(0.5, -0.3),
        Complex::new(1.2, 0.4),
    );
    let h = adjoint_rev::hessian(c72 {}, args, 0)?;
    let plain = |v: &[adjoint_core::forward::Dual2]| {
        let (a, b) = (Complex::new(v[0], v[1]), Complex::new(v[2], v[3]));
        let mut z = Complex::new(v[0] * 0.0, v[0] * 0.0);
        for _ in 0..24 {
            z = z + a / b - b * a + b / a;
        }
        z.re
    };
    let hf = adjoint_core::forward::hessian(|v| plain(v), &[0.5, -0.3, 1.2, 0.4]);
    for i in 0..4 {
        for j in 0..4 {
            let (u, w) = (h[i + 2][j + 2], hf[i][j]);
            assert!(
                (u - w).abs() <= 1e-9 * (1.0 + w.abs()),
                "H[{i}][{j}]: {u} vs {w}"
            );
        }
    }
    let j4 = adjoint_rev::jacobian_lanes::<4, _>(c72 {}, args, &[0, 1])?;
    let j1 = adjoint_rev::jacobian(c72 {}, args, &[0, 1])?;
    for (r4, r1) in j4.iter().zip(&j1) {
        for (u, w) in r4.iter().zip(r1) {
            assert_eq!(u, w);
        }
    }
    Ok(())
}
