//! A call argument computed from the function's variables is passed as a copy when it is a
//! plain number (an integer length, index or counter, or a float value taken with `.value()`):
//! no gradient could flow back through it. Arguments that could carry one (`[a, b]`, `h(x)`,
//! `x.clone().clone()`: passed as constants, their gradients silently 0 before; a hunter) are
//! compile errors (`tests/ui/computed_argument.rs`). These programs compiled before the check
//! and must still: the review of the first, parse-time version of it found them refused.

use adjoint_core::check::check_gradient;
use adjoint_rev::grad;
use adjoint_rev::prelude::*;

type R = Result<(), InvertibilityError>;

reversible! {
    /// `y += x^k` for a power passed as a copy.
    fn add_pow<T: RevReal>(y: &mut T, x: &mut T, k: &mut i32) {
        y += x.powi(k);
    }
    /// `y += x^(len)`, `y += x^(n + 1)`, `y += x^(s.0 − 1)`, `y += x^(t·2)` for an ancilla
    /// `let t = 0; t += n;` — integers computed from variables, as copies.
    fn powers<T: RevReal>(y: &mut T, x: &mut T, v: &mut Vec<T>, n: &mut i32, s: &mut (i64, i64)) {
        add_pow(y, x, v.len() as i32);
        add_pow(y, x, n + 1);
        add_pow(y, x, (s.0 - 1) as i32);
        let t = 0;
        t += n;
        add_pow(y, x, t * 2);
        t -= n;
        unlet t = 0;
    }
    /// `y += x` where a plain float computed from `w`'s value (`2w`) is positive: a constant.
    /// (`x.value()` would be refused: `x` is an argument of the call, which may change it.)
    fn add_if_positive<T: RevReal>(y: &mut T, x: &mut T, w: &mut T) {
        add_if(y, x, w.value() * 2.0);
    }
    fn add_if<T: RevReal>(y: &mut T, x: &mut T, c: &mut f64) {
        if (c > 0.0, c > 0.0) {
            y += x;
        }
    }
}

#[test]
fn integer_arguments_computed_from_variables_are_copies() -> R {
    let (y0, x0) = (0.25f64, 1.1f64);
    let (mut y, mut x, mut v, mut n, mut s) = (y0, x0, vec![0.0; 3], 2i32, (4i64, 0i64));
    powers(&mut y, &mut x, &mut v, &mut n, &mut s)?;
    // x³ + x³ + x³ + x⁴
    let f = |x: f64| 3.0 * x.powi(3) + x.powi(4);
    assert!((y - (y0 + f(x0))).abs() < 1e-14, "{y}");
    powers::uncall(&mut y, &mut x, &mut v, &mut n, &mut s)?;
    assert!((y - y0).abs() < 1e-15 && x == x0);
    let g = grad(powers {}, (y0, x0, vec![0.0; 3], 2i32, (4i64, 0i64)), 0)?;
    check_gradient(|p| p[0] + f(p[1]), &[y0, x0], &[g.0, g.1]).assert_passed();
    Ok(())
}

#[test]
fn a_plain_float_computed_from_a_value_is_a_constant() -> R {
    // y + x where 2w > 0, else y; nothing flows to w
    for w0 in [0.75f64, -0.75] {
        let g = grad(add_if_positive {}, (0.5f64, 0.3f64, w0), 0)?;
        let f = |p: &[f64]| if p[2] > 0.0 { p[0] + p[1] } else { p[0] };
        check_gradient(f, &[0.5, 0.3, w0], &[g.0, g.1, g.2]).assert_passed();
    }
    Ok(())
}

reversible! {
    fn add_square<T: RevReal>(a: &mut T, b: &mut T) {
        a += b * b;
    }
    /// Two fields of one element of a `Vec` as the arguments of a call (a bare E0499 before:
    /// two `&mut` through `IndexMut`; a new user).
    fn fields_of_an_element<T: RevReal>(z: &mut Vec<Complex<T>>, m: &mut [[T; 2]; 2]) {
        for i in 0..z.len() {
            add_square(z[i].re, z[i].im);
        }
        add_square(m[1][0], m[1][1]);
    }
}

#[test]
fn fields_of_one_element_of_a_vec_are_arguments_of_one_call() -> R {
    use adjoint_rev::Complex;
    let z0 = vec![Complex::new(0.5, 1.5), Complex::new(-1.0, 0.25)];
    let m0 = [[1.0, 2.0], [3.0, -0.5]];
    let (mut z, mut m) = (z0.clone(), m0);
    fields_of_an_element(&mut z, &mut m)?;
    assert_eq!(z[0].re, 0.5 + 1.5 * 1.5);
    assert_eq!(z[1].re, -1.0 + 0.25 * 0.25);
    assert_eq!(m[1][0], 3.0 + 0.25);
    fields_of_an_element::uncall(&mut z, &mut m)?;
    assert_eq!((z, m), (z0.clone(), m0));
    // the loss z[k].re (scalar 2k in `Differentiable` order) = re + im² of element k
    for k in 0..2 {
        let g = grad(fields_of_an_element {}, (z0.clone(), m0), 2 * k)?;
        let zs = [z0[0].re, z0[0].im, z0[1].re, z0[1].im];
        let got = [g.0[0].re, g.0[0].im, g.0[1].re, g.0[1].im];
        check_gradient(|p| p[2 * k] + p[2 * k + 1] * p[2 * k + 1], &zs, &got).assert_passed();
        assert_eq!(g.1, [[0.0; 2]; 2]);
    }
    // the loss m[1][0] (scalar 4 + 2) = m₁₀ + m₁₁²
    let g = grad(fields_of_an_element {}, (z0.clone(), m0), 6)?;
    assert_eq!(g.1, [[0.0, 0.0], [1.0, 2.0 * m0[1][1]]]);
    Ok(())
}

reversible! {
    fn add_first<T: RevReal>(a: &mut Vec<T>, b: &mut T) {
        a[0] += b;
    }
    /// Elements of two fields of one tuple: two collections, borrowed directly (not copied:
    /// a `Vec` row is not `Copy`; the first version of the copy rule refused this; a hunter).
    fn tuple_rows<T: RevReal>(s: &mut (Vec<Vec<T>>, Vec<T>)) {
        add_first(s.0[0], s.1[0]);
    }
}

#[test]
fn elements_of_two_fields_are_borrowed_directly() -> R {
    let s0 = (vec![vec![1.0, 2.0]], vec![0.5]);
    let mut s = s0.clone();
    tuple_rows(&mut s)?;
    assert_eq!(s.0[0], [1.5, 2.0]);
    tuple_rows::uncall(&mut s)?;
    assert_eq!(s, s0);
    // the loss s.0[0][0] = s.0[0][0] + s.1[0]
    let (g,) = grad(tuple_rows {}, (s0.clone(),), 0)?;
    check_gradient(
        |p| p[0] + p[2],
        &[1.0, 2.0, 0.5],
        &[g.0[0][0], g.0[0][1], g.1[0]],
    )
    .assert_passed();
    Ok(())
}
