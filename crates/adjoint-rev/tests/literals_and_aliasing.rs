//! Issue 13, items 1 and 2. Literals keep their type and are exact for every integer width and
//! for fixed point (checked against wrapping Rust arithmetic on the same constants); an
//! instruction may read one place twice (`y += x * x`, `y[i] * y[j]` with `i == j`), in checked
//! and unchecked code, with both gradient contributions — checked against finite differences,
//! forward mode and closed forms; a target that aliases an argument is still refused, in
//! unchecked code too.

use adjoint_core::check::check_gradient;
use adjoint_core::forward::{self, Dual};
use adjoint_rev::prelude::*;
use adjoint_rev::{grad, hessian, value_and_grad, value_and_grad_unchecked, Op2, Reversible};
use fixed::types::{I16F16, I32F32};
use num_complex::Complex;

type R = Result<(), InvertibilityError>;

// ---------------------------------------------------------------------------------------------
// Item 1: literals.

reversible! {
    /// The example, suffixed and not.
    fn golden(c: &mut u64, d: &mut u64, x: &mut u64) {
        c += 0x9E37_79B9_7F4A_7C15u64;
        d += x * 0x9E37_79B9_7F4A_7C15;
    }
    fn edges_u64(c: &mut u64, x: &mut u64) {
        c += 18446744073709551615;
        c -= 18446744073709551614u64;
        c += x * 18446744073709551615;
        c -= x * 9007199254740993;
        c += x + 9007199254740993;
        c ^= 18446744073709551615;
    }
    fn edges_i64(c: &mut i64, x: &mut i64) {
        c += 9223372036854775807;
        c -= -9223372036854775808;
        c += x * -9223372036854775808i64;
        c -= x * 9223372036854775807;
        c += x / -9223372036854775807;
        c -= 9007199254740993;
        c ^= -9223372036854775808;
        c ^= 9223372036854775807i64;
    }
    fn edges_i32(c: &mut i32, x: &mut i32) {
        c += 2147483647;
        c -= -2147483648i32;
        c += x * -2147483648;
        c -= x * 2147483647;
        c ^= -2147483648;
        c ^= 2147483647;
    }
    fn edges_i128(c: &mut i128, d: &mut u128) {
        c += -170141183460469231731687303715884105728;
        c -= 170141183460469231731687303715884105727;
        d += 340282366920938463463374607431768211455;
    }
    fn edges_i32f32(c: &mut I32F32, x: &mut I32F32) {
        c += 2147483647.99999999976716935634613037109375;
        c -= -2147483648;
        c += x * 0.00000000023283064365386962890625;
        c -= x * 2147483647;
        c += x - 0.1;
        c += -2147483648.0;
        c -= 1073741824.00000000023283064365386962890625;
    }
    fn edges_i16f16(c: &mut I16F16, x: &mut I16F16) {
        c += 32767.9999847412109375;
        c -= x * -32768;
        c += x / 0.0000152587890625;
    }
    fn float_literals<T: RevReal>(y: &mut T, x: &mut T) {
        y += x * 0.1;
        y -= x + 3;
        y += 9007199254740993;
    }
}

#[test]
fn the_golden_ratio_constant_is_added_exactly() -> R {
    let (mut c, mut d, mut x) = (0u64, 0u64, 1u64);
    golden(&mut c, &mut d, &mut x)?;
    assert_eq!(c, 0x9E37_79B9_7F4A_7C15);
    assert_eq!(d, 0x9E37_79B9_7F4A_7C15);
    golden::uncall(&mut c, &mut d, &mut x)?;
    assert_eq!((c, d, x), (0, 0, 1));
    golden::call_unchecked(&mut c, &mut d, &mut x)?;
    assert_eq!((c, d), (0x9E37_79B9_7F4A_7C15, 0x9E37_79B9_7F4A_7C15));
    Ok(())
}

#[test]
fn integer_literals_are_exact_at_the_edges() -> R {
    for &(c0, x0) in &[
        (0u64, 1u64),
        (12345, 0xDEAD_BEEF_0000_0001),
        (u64::MAX, u64::MAX),
    ] {
        let (mut c, mut x) = (c0, x0);
        edges_u64(&mut c, &mut x)?;
        let mut want = c0.wrapping_add(u64::MAX);
        want = want.wrapping_sub(u64::MAX - 1);
        want = want.wrapping_add(x0.wrapping_mul(u64::MAX));
        want = want.wrapping_sub(x0.wrapping_mul(9007199254740993));
        want = want.wrapping_add(x0.wrapping_add(9007199254740993));
        want ^= u64::MAX;
        assert_eq!(c, want);
        edges_u64::uncall(&mut c, &mut x)?;
        assert_eq!((c, x), (c0, x0));
    }
    for &(c0, x0) in &[(0i64, 1i64), (-7, 3), (i64::MIN, i64::MAX)] {
        let (mut c, mut x) = (c0, x0);
        edges_i64(&mut c, &mut x)?;
        let mut want = c0.wrapping_add(i64::MAX);
        want = want.wrapping_sub(i64::MIN);
        want = want.wrapping_add(x0.wrapping_mul(i64::MIN));
        want = want.wrapping_sub(x0.wrapping_mul(i64::MAX));
        want = want.wrapping_add(x0.wrapping_div(-i64::MAX));
        want = want.wrapping_sub(9007199254740993);
        want ^= i64::MIN;
        want ^= i64::MAX;
        assert_eq!(c, want);
        edges_i64::uncall(&mut c, &mut x)?;
        assert_eq!((c, x), (c0, x0));
    }
    for &(c0, x0) in &[(0i32, 1i32), (-5, 77), (i32::MAX, i32::MIN)] {
        let (mut c, mut x) = (c0, x0);
        edges_i32(&mut c, &mut x)?;
        let mut want = c0.wrapping_add(i32::MAX);
        want = want.wrapping_sub(i32::MIN);
        want = want.wrapping_add(x0.wrapping_mul(i32::MIN));
        want = want.wrapping_sub(x0.wrapping_mul(i32::MAX));
        want ^= i32::MIN;
        want ^= i32::MAX;
        assert_eq!(c, want);
        edges_i32::uncall(&mut c, &mut x)?;
        assert_eq!((c, x), (c0, x0));
    }
    let (mut c, mut d) = (0i128, 0u128);
    edges_i128(&mut c, &mut d)?;
    assert_eq!(c, i128::MIN.wrapping_sub(i128::MAX));
    assert_eq!(d, u128::MAX);
    edges_i128::uncall(&mut c, &mut d)?;
    assert_eq!((c, d), (0, 0));
    Ok(())
}

#[test]
fn fixed_point_literals_are_exact_at_the_edges() -> R {
    // 0.1 in I32F32 is round(0.1 · 2³²) = 429496730 units: the literal correctly rounded, not
    // its nearest f64 rounded again.
    let tenth = I32F32::from_bits(429_496_730);
    for &(c0, x0) in &[(0.0, 1.0), (-3.25, 0.5), (1000.0, -2.0)] {
        let (c0, x0) = (I32F32::from_num(c0), I32F32::from_num(x0));
        let (mut c, mut x) = (c0, x0);
        edges_i32f32(&mut c, &mut x)?;
        let mut want = c0.wrapping_add(I32F32::MAX);
        want = want.wrapping_sub(I32F32::MIN);
        want = want.wrapping_add(x0.wrapping_mul(I32F32::DELTA));
        want = want.wrapping_sub(x0.wrapping_mul(I32F32::from_num(2147483647)));
        want = want.wrapping_add(x0.wrapping_sub(tenth));
        want = want.wrapping_add(I32F32::MIN);
        // 2³⁰ + 2⁻³²: exact in I32F32, but its nearest f64 is 2³⁰.
        want = want.wrapping_sub(I32F32::from_bits((1 << 62) + 1));
        assert_eq!(c.to_bits(), want.to_bits());
        edges_i32f32::uncall(&mut c, &mut x)?;
        assert_eq!((c.to_bits(), x.to_bits()), (c0.to_bits(), x0.to_bits()));
    }
    for &(c0, x0) in &[(0.0, 1.0), (-3.25, 0.5)] {
        let (c0, x0) = (I16F16::from_num(c0), I16F16::from_num(x0));
        let (mut c, mut x) = (c0, x0);
        edges_i16f16(&mut c, &mut x)?;
        let mut want = c0.wrapping_add(I16F16::MAX);
        want = want.wrapping_sub(x0.wrapping_mul(I16F16::MIN));
        want = want.wrapping_add(x0.wrapping_div(I16F16::DELTA));
        assert_eq!(c.to_bits(), want.to_bits());
        edges_i16f16::uncall(&mut c, &mut x)?;
        assert_eq!((c.to_bits(), x.to_bits()), (c0.to_bits(), x0.to_bits()));
    }
    Ok(())
}

#[test]
fn float_literals_are_the_nearest_float() -> R {
    let (mut y, mut x) = (0.0f64, 2.0f64);
    float_literals(&mut y, &mut x)?;
    // 2^53 + 1 has no f64: the nearest is 2^53 (floating point rounds; integers never do).
    assert_eq!(y, 2.0 * 0.1 - (2.0 + 3.0) + 9007199254740992.0);
    let (mut y, mut x) = (0.0f32, 2.0f32);
    float_literals(&mut y, &mut x)?;
    assert_eq!(y, 2.0f32 * 0.1f32 - 5.0 + 9007199254740992.0);
    // The literals are constants: the gradient is that of y + 0.1·x − x. Checked, it is refused:
    // 2^53 absorbs the small terms, so the inverse rebuilds y as −0.2, not 0 (the gradient
    // would come from another point; here, the function being affine, the same one).
    let err = grad(float_literals {}, (0.0f64, 2.0f64), 0).unwrap_err();
    assert!(
        matches!(err, InvertibilityError::Inputs { scalar: 0, .. }),
        "{err}"
    );
    let (_, (_, gx)) = value_and_grad_unchecked(float_literals {}, (0.0f64, 2.0f64), 0)?;
    assert!((gx - (0.1 - 1.0)).abs() < 1e-15);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Item 2: one place read twice.

reversible! {
    fn square<T: Arith>(y: &mut T, x: &mut T) {
        y += x * x;
    }
    fn sum_squares<T: Arith>(loss: &mut T, y: &mut Vec<T>) {
        for i in 0..y.len() {
            loss += y[i] * y[i];
        }
    }
    fn pair<T: Arith>(out: &mut T, v: &mut Vec<T>, i: &mut usize, j: &mut usize) {
        out += v[i] * v[j];
        out -= v[j] / v[i];
    }
    fn pair_rule<T: RevReal>(out: &mut T, v: &mut Vec<T>, i: &mut usize, j: &mut usize) {
        out += v[i].hypot(v[j]);
        out += v[j].powf(v[i]);
    }
    fn same_binary<T: RevReal>(y: &mut T, x: &mut T) {
        y += x.hypot(x);
        y += x.powf(x);
        y += atan2(x, x);
        y -= x / x;
        y += x + x;
        y -= x - x;
        y += x.max(x);
        y += x * x;
    }
    fn target_aliases<T: Arith>(v: &mut Vec<T>, i: &mut usize, j: &mut usize, k: &mut usize) {
        v[i] += v[j] * v[k];
    }
    fn complex_square<T: Arith>(w: &mut Complex<T>, z: &mut Complex<T>) {
        w += z * z;
        w -= z / z;
        w += z + z;
    }
}

/// `f` on plain numbers, returning scalar number `out` of the arguments after the call.
fn value<A: adjoint_rev::Differentiable + Clone, F: Reversible<A>>(args: &A, out: usize) -> f64 {
    let mut a = args.clone();
    F::call(&mut a).unwrap();
    let mut m = a.wrap(&mut |x| x);
    let mut k = 0;
    let mut v = f64::NAN;
    A::visit_mut(&mut m, &mut |x: &mut f64| {
        if k == out {
            v = *x;
        }
        k += 1;
    });
    v
}

#[test]
fn square_gradient_is_two_x_checked_and_unchecked() -> R {
    for &x in &[1.5f64, -0.75, 3.0] {
        for checked in [true, false] {
            let (out, g) = if checked {
                value_and_grad(square {}, (0.25, x), 0)?
            } else {
                value_and_grad_unchecked(square {}, (0.25, x), 0)?
            };
            assert_eq!(out, (0.25 + x * x, x));
            assert_eq!(g, (1.0, 2.0 * x), "checked: {checked}");
        }
        let (_, gx) = grad(square {}, (0.0, x), 0)?;
        check_gradient(
            |p| value::<(f64, f64), square>(&(p[0], p[1]), 0),
            &[0.0, x],
            &[1.0, gx],
        )
        .assert_passed();
    }
    // Integers: exact both ways.
    let (mut y, mut x) = (5i64, -3_000_000_000i64);
    square(&mut y, &mut x)?;
    assert_eq!(y, 5i64.wrapping_add(x.wrapping_mul(x)));
    square::uncall(&mut y, &mut x)?;
    assert_eq!((y, x), (5, -3_000_000_000));
    Ok(())
}

#[test]
fn sum_of_squares_gradient_is_two_y_checked_and_unchecked() -> R {
    let y = vec![0.5, -1.5, 2.0];
    let (out, g) = value_and_grad(sum_squares {}, (0.0, y.clone()), 0)?;
    assert_eq!(out.0, 0.25 + 2.25 + 4.0);
    assert_eq!(out.1, y);
    assert_eq!(g.1, vec![1.0, -3.0, 4.0]);
    let (out_u, g_u) = value_and_grad_unchecked(sum_squares {}, (0.0, y.clone()), 0)?;
    assert_eq!((out_u, g_u), (out, g.clone()));
    let mut all = vec![0.0];
    all.extend(&y);
    let mut ga = vec![g.0];
    ga.extend(&g.1);
    check_gradient(
        |p| value::<(f64, Vec<f64>), sum_squares>(&(p[0], p[1..].to_vec()), 0),
        &all,
        &ga,
    )
    .assert_passed();
    Ok(())
}

#[test]
fn elements_that_coincide_at_run_time_accumulate_both_contributions() -> R {
    let v = vec![0.7, -1.3, 2.1];
    for (i, j) in [(1, 1), (0, 2), (2, 2), (2, 0)] {
        for checked in [true, false] {
            let args = (0.0, v.clone(), i, j);
            let (out, g) = if checked {
                value_and_grad(pair {}, args.clone(), 0)?
            } else {
                value_and_grad_unchecked(pair {}, args.clone(), 0)?
            };
            assert_eq!(out.1, v);
            let mut x = vec![0.0];
            x.extend(&v);
            let mut ga = vec![g.0];
            ga.extend(&g.1);
            check_gradient(
                |p| value::<_, pair>(&(p[0], p[1..].to_vec(), i, j), 0),
                &x,
                &ga,
            )
            .assert_passed();
            // Closed form: ∂(vᵢvⱼ − vⱼ/vᵢ).
            let mut want = vec![0.0; 3];
            want[i] += v[j] + v[j] / (v[i] * v[i]);
            want[j] += v[i] - 1.0 / v[i];
            for (a, b) in g.1.iter().zip(&want) {
                assert!(
                    (a - b).abs() < 1e-14,
                    "{i} {j} checked {checked}: {:?} vs {want:?}",
                    g.1
                );
            }
            // hypot and powf (positive bases).
            let vp: Vec<f64> = v.iter().map(|a| a.abs()).collect();
            let args = (0.0, vp.clone(), i, j);
            let (_, gr) = if checked {
                value_and_grad(pair_rule {}, args.clone(), 0)?
            } else {
                value_and_grad_unchecked(pair_rule {}, args, 0)?
            };
            let mut xp = vec![0.0];
            xp.extend(&vp);
            let mut gra = vec![gr.0];
            gra.extend(&gr.1);
            check_gradient(
                |p| value::<_, pair_rule>(&(p[0], p[1..].to_vec(), i, j), 0),
                &xp,
                &gra,
            )
            .assert_passed();
        }
    }
    // Integers, i == j: exact and undone exactly.
    let (mut out, mut w, mut i, mut j) = (3i64, vec![5i64, -7, 11], 1usize, 1usize);
    pair(&mut out, &mut w, &mut i, &mut j)?;
    assert_eq!(out, 3 + 49 - 1);
    pair::uncall(&mut out, &mut w, &mut i, &mut j)?;
    assert_eq!((out, w), (3, vec![5, -7, 11]));
    Ok(())
}

#[test]
fn every_binary_instruction_may_take_one_place_twice() -> R {
    for &x in &[0.8f64, 1.3, 2.5] {
        for checked in [true, false] {
            let (_, g) = if checked {
                value_and_grad(same_binary {}, (0.0, x), 0)?
            } else {
                value_and_grad_unchecked(same_binary {}, (0.0, x), 0)?
            };
            // hypot(x, x) = √2·x, xˣ, atan2(x, x) = π/4, x/x = 1, 2x, 0, x, x².
            let want = 2f64.sqrt() + x.powf(x) * (x.ln() + 1.0) + 2.0 + 1.0 + 2.0 * x;
            assert!((g.1 - want).abs() < 1e-13, "{} vs {want}", g.1);
            check_gradient(
                |p| value::<(f64, f64), same_binary>(&(p[0], p[1]), 0),
                &[0.0, x],
                &[g.0, g.1],
            )
            .assert_passed();
        }
    }
    Ok(())
}

#[test]
fn complex_square_and_quotient_of_one_place() -> R {
    let z = Complex::new(0.6, -1.1);
    let (mut w, mut zz) = (Complex::new(0.5, 0.25), z);
    complex_square(&mut w, &mut zz)?;
    let want = Complex::new(0.5, 0.25) + z * z - Complex::new(1.0, 0.0) + z + z;
    assert!((w - want).norm() < 1e-15);
    complex_square::uncall(&mut w, &mut zz)?;
    assert!((w - Complex::new(0.5, 0.25)).norm() < 1e-15 && zz == z);
    for (out, checked) in [(0, true), (1, true), (0, false), (1, false)] {
        let args = (Complex::new(0.0, 0.0), z);
        let (_, g) = if checked {
            value_and_grad(complex_square {}, args, out)?
        } else {
            value_and_grad_unchecked(complex_square {}, args, out)?
        };
        let f = |p: &[f64]| {
            value::<(Complex<f64>, Complex<f64>), complex_square>(
                &(Complex::new(p[0], p[1]), Complex::new(p[2], p[3])),
                out,
            )
        };
        check_gradient(
            f,
            &[0.0, 0.0, z.re, z.im],
            &[g.0.re, g.0.im, g.1.re, g.1.im],
        )
        .assert_passed();
    }
    Ok(())
}

#[test]
fn hessians_through_gvar_dual_count_both_operands() -> R {
    // y += x·x: ∂²y/∂x² = 2.
    let h = hessian(square {}, (0.0, 1.7), 0)?;
    assert_eq!(h, vec![vec![0.0, 0.0], vec![0.0, 2.0]]);
    // Every binary instruction on one place: against forward mode (Dual<Dual<f64>>) on the same
    // program, which never runs through GVar.
    for &x in &[0.8f64, 1.9] {
        let h = hessian(same_binary {}, (0.0, x), 0)?;
        let reference = forward::hessian(
            |p| {
                let (mut y, mut xx) = (p[0], p[1]);
                same_binary(&mut y, &mut xx).unwrap();
                y
            },
            &[0.0, x],
        );
        let closed = x.powf(x) * ((x.ln() + 1.0).powi(2) + 1.0 / x) + 2.0;
        assert!((reference[1][1] - closed).abs() < 1e-12);
        for r in 0..2 {
            for c in 0..2 {
                assert!(
                    (h[r][c] - reference[r][c]).abs() < 1e-12,
                    "{h:?} vs {reference:?}"
                );
            }
        }
    }
    // out += v[i]·v[j] − v[j]/v[i] with i == j at run time and i ≠ j.
    let v = vec![0.7, -1.3, 2.1];
    for (i, j) in [(1usize, 1usize), (0, 2)] {
        let h = hessian(pair {}, (0.0, v.clone(), i, j), 0)?;
        let reference = forward::hessian(
            |p| {
                let (mut out, mut w) = (p[0], p[1..].to_vec());
                pair(&mut out, &mut w, &mut i.clone(), &mut j.clone()).unwrap();
                out
            },
            &[0.0, v[0], v[1], v[2]],
        );
        for r in 0..4 {
            for c in 0..4 {
                assert!(
                    (h[r][c] - reference[r][c]).abs() < 1e-12,
                    "{h:?} vs {reference:?}"
                );
            }
        }
        if i == j {
            assert!((h[1 + i][1 + i] - 2.0).abs() < 1e-12); // ∂²(v² − 1)/∂v² = 2
        }
    }
    // The instruction itself, on GVar<Dual>: ∂ȳ-weighted second derivative of x² is 2·ẋ.
    let mut y = GVar::new(Dual::new(0.0, 0.0), Dual::new(1.0, 0.0));
    let mut x = GVar::new(Dual::new(1.5, 1.0), Dual::new(0.0, 0.0));
    Arith::acc_arith_same(&mut y, Op2::Mul, &mut x, false);
    assert_eq!((x.g.re, x.g.eps), (3.0, 2.0));
    Ok(())
}

#[test]
fn a_target_that_aliases_an_argument_is_still_refused() -> R {
    let v = vec![1.0f64, 2.0, 3.0];
    // j == k: one place read twice, allowed.
    let (out, g) = value_and_grad(target_aliases {}, (v.clone(), 0, 1, 1), 0)?;
    assert_eq!(out.0, vec![1.0 + 4.0, 2.0, 3.0]);
    assert_eq!(g.0, vec![1.0, 4.0, 0.0]);
    // i == j or i == k: the target is an argument. Refused in every mode, values untouched.
    for (i, j, k) in [(0usize, 0usize, 1usize), (2, 1, 2), (1, 1, 1)] {
        let mut w = v.clone();
        let err = target_aliases(&mut w, &mut { i }, &mut { j }, &mut { k }).unwrap_err();
        assert!(matches!(err, InvertibilityError::Alias { .. }), "{err}");
        assert!(err.to_string().contains("must not alias"), "{err}");
        let err = target_aliases::call_unchecked(&mut w, &mut { i }, &mut { j }, &mut { k });
        assert!(matches!(err, Err(InvertibilityError::Alias { .. })));
        let err = target_aliases::uncall_unchecked(&mut w, &mut { i }, &mut { j }, &mut { k });
        assert!(matches!(err, Err(InvertibilityError::Alias { .. })));
        assert_eq!(w, v);
        let err = value_and_grad_unchecked(target_aliases {}, (v.clone(), i, j, k), 0);
        assert!(matches!(err, Err(InvertibilityError::Alias { .. })));
        let mut wi = vec![4i64, 5, 6];
        let err = target_aliases::call_unchecked(&mut wi, &mut { i }, &mut { j }, &mut { k });
        assert!(matches!(err, Err(InvertibilityError::Alias { .. })));
        assert_eq!(wi, vec![4, 5, 6]);
    }
    Ok(())
}

reversible! {
    fn xor_elems(v: &mut Vec<u64>, i: &mut usize, j: &mut usize) {
        v[i] ^= v[j];
    }
    fn scale_elems(v: &mut Vec<ULog<f64>>, i: &mut usize, j: &mut usize) {
        v[i] *= v[j];
    }
    fn rot_elems(v: &mut Vec<f64>, i: &mut usize, j: &mut usize, t: &mut f64) {
        ROT(v[i], v[j], t);
    }
    fn add_sin(a: &mut f64, b: &mut f64) {
        a += b.sin();
    }
    fn call_elems(v: &mut Vec<f64>, i: &mut usize, j: &mut usize) {
        add_sin(v[i], v[j]);
    }
    fn nocheck_elems(v: &mut Vec<f64>, i: &mut usize, j: &mut usize) {
        @invcheckoff v[i] += v[j].exp();
    }
}

#[test]
fn unchecked_code_keeps_the_alias_checks() {
    fn refused(r: Result<(), InvertibilityError>) -> bool {
        matches!(r, Err(InvertibilityError::Alias { .. }))
    }
    // `x ^= x` would zero the element; every statement kind refuses an aliased target or
    // argument pair in its unchecked forms as in its checked ones.
    let mut v = vec![7u64, 9];
    assert!(refused(xor_elems::call_unchecked(&mut v, &mut 1, &mut 1)));
    assert!(refused(xor_elems(&mut v, &mut 1, &mut 1)));
    assert_eq!(v, vec![7, 9]);
    xor_elems::call_unchecked(&mut v, &mut 0, &mut 1).unwrap();
    assert_eq!(v, vec![7 ^ 9, 9]);

    let mut u = vec![ULog::from_f64(2.0), ULog::from_f64(3.0)];
    assert!(refused(scale_elems::call_unchecked(&mut u, &mut 0, &mut 0)));
    assert!(refused(scale_elems::uncall_unchecked(
        &mut u, &mut 0, &mut 0
    )));

    let mut w = vec![1.0, 2.0];
    assert!(refused(rot_elems::call_unchecked(
        &mut w, &mut 1, &mut 1, &mut 0.3
    )));
    assert!(refused(call_elems::call_unchecked(&mut w, &mut 0, &mut 0)));
    assert!(refused(call_elems::uncall_unchecked(
        &mut w, &mut 0, &mut 0
    )));
    assert!(refused(nocheck_elems(&mut w, &mut 1, &mut 1)));
    assert_eq!(w, vec![1.0, 2.0]);
    call_elems::call_unchecked(&mut w, &mut 0, &mut 1).unwrap();
    assert_eq!(w, vec![1.0 + 2f64.sin(), 2.0]);
}

reversible! {
    fn bump<T: Arith>(x: &mut T) {
        INC(x);
        INC(x);
        DEC(x);
    }
}

#[test]
fn inc_and_dec_on_fixed_point_add_one_exactly() -> R {
    let mut x = I16F16::from_num(-0.75);
    bump(&mut x)?;
    assert_eq!(x, I16F16::from_num(0.25));
    bump::uncall(&mut x)?;
    assert_eq!(x, I16F16::from_num(-0.75));
    Ok(())
}

#[test]
#[should_panic(
    expected = "INC/DEC on I1F31: 1 is not a value of this type (it holds [-1, 1)), as a literal 1 would not compile"
)]
fn inc_on_a_fixed_point_type_without_one_says_so() {
    // I1F31 holds [-1, 1): `x += 1` does not compile, and INC panicked inside the `fixed`
    // crate with "1 overflows" (a hunter); now with the type and the reason.
    let mut x = fixed::types::I1F31::from_num(0.25);
    let _ = bump(&mut x);
}

reversible! {
    /// `y += x · (1 + 2⁻²⁴ + 2⁻⁶⁰)`: a literal just above a tie of `f32` whose nearest `f64` is
    /// the tie itself.
    fn above_an_f32_tie<T: RevReal>(y: &mut T, x: &mut T) {
        y += x * 1.000000059604644776257986737988403547205962240695953369140625;
    }
    /// The largest literal below the `f32` overflow threshold `2¹²⁸ − 2¹⁰³`, less than half an
    /// `f64` ulp below it: its nearest `f64` is the threshold, which rounds to infinity as `f32`.
    fn near_f32_max<T: RevReal>(y: &mut T) {
        y += 340282356779733661637539395458142568447;
    }
    /// The same region with an `f32` suffix, as a float literal: its nearest `f64` is the
    /// threshold too, and it was refused as out of range (a reviewer).
    fn near_f32_max_suffixed(y: &mut f32) {
        y += 340282356779733642748073463979561713664.0f32;
    }
}

/// An `f32` literal is the decimal rounded once, to `f32` (a hunter's finding): it went through
/// its nearest `f64` first, and a literal just above an `f32` tie became the tie, then rounded to
/// even — one `f32` ulp off what `1.000000059604644776257986737988403547205962240695953369140625f32`
/// is in plain Rust.
#[test]
fn f32_literals_are_rounded_once() -> R {
    let (mut y, mut x) = (0.0f32, 1.0f32);
    above_an_f32_tie(&mut y, &mut x)?;
    let want: f32 = "1.000000059604644776257986737988403547205962240695953369140625"
        .parse()
        .unwrap();
    assert_eq!(want, 1.0 + f32::EPSILON);
    assert_eq!(y, want);
    // in f64 the same literal is its nearest f64 (the tie)
    let (mut y, mut x) = (0.0f64, 1.0f64);
    above_an_f32_tie(&mut y, &mut x)?;
    assert_eq!(y, 1.0 + 2f64.powi(-24));

    let mut y = 0.0f32;
    near_f32_max(&mut y)?;
    assert_eq!(y, f32::MAX);
    let mut y = 0.0f32;
    near_f32_max_suffixed(&mut y)?;
    assert_eq!(y, 340282356779733642748073463979561713664.0f32);
    assert_eq!(y, f32::MAX);
    Ok(())
}
