//! Conveniences NiLang users reach for (issue #13 item 5): conditions that compare values with
//! float literals without `.value()`.

use adjoint_core::check::check_gradient;
use adjoint_rev::grad;
use adjoint_rev::prelude::*;

reversible! {
    /// `y += x²` for positive `x`, `y -= x` below `-0.5`, `y += 3x` in between.
    fn piecewise<T: RevReal>(y: &mut T, x: &mut T) {
        if (x > 0.0, ~) {
            y += x * x;
        } else {
            if (-0.5 > x, ~) {
                y -= x;
            } else {
                y += x * 3.0;
            }
        }
    }

    /// Doubles `x` until it is at least 10 (reversibly: the loop counter is the post-condition).
    fn grow<T: RevReal>(x: &mut T, n: &mut T) {
        @safe assert!(n.value() == 0.0, "grow starts from n = 0");
        while (x < 10.0, n != 0.0) {
            x *= 2.0;
            n += 1.0;
        }
    }
}

fn piecewise_plain(x: f64) -> f64 {
    if x > 0.0 {
        x * x
    } else if -0.5 > x {
        -x
    } else {
        3.0 * x
    }
}

#[test]
fn float_literal_comparisons_in_conditions() {
    for x0 in [1.3, -0.2, -2.0] {
        let (mut y, mut x) = (0.0f64, x0);
        piecewise(&mut y, &mut x).unwrap();
        assert_eq!(y, piecewise_plain(x0));
        piecewise::uncall(&mut y, &mut x).unwrap();
        assert_eq!((y, x), (0.0, x0));
        // on gradient-carrying values, in the inverse run
        let (_, gx) = grad(piecewise {}, (0.0f64, x0), 0).unwrap();
        let r = check_gradient(|p| piecewise_plain(p[0]), &[x0], &[gx]);
        assert!(r.passed(), "x0 = {x0}: {r:?}");
    }
    let (mut x, mut n) = (0.7f64, 0.0f64);
    grow(&mut x, &mut n).unwrap();
    assert_eq!((x, n), (11.2, 4.0));
    grow::uncall(&mut x, &mut n).unwrap();
    assert_eq!((x, n), (0.7, 0.0));
    let (gx, _) = grad(grow {}, (0.7f64, 0.0f64), 0).unwrap();
    assert_eq!(gx, 16.0);
}

reversible! {
    fn rot8(x: &mut u8, k: &mut u32) {
        ROTL(x, k);
    }
    fn rot_i32(x: &mut i32, k: &mut u32) {
        ROTR(x, k);
        ROTL(x, 3);
    }
    fn rot128(x: &mut u128, k: &mut u32) {
        ROTL(x, k);
        x ^= 0xFFu128;
    }
}

#[test]
fn bit_rotations_are_exact_and_invertible_on_every_width() {
    for k0 in [0u32, 1, 7, 8, 13, 200] {
        let (mut x, mut k) = (0b1001_0110u8, k0);
        rot8(&mut x, &mut k).unwrap();
        assert_eq!(x, 0b1001_0110u8.rotate_left(k0));
        rot8::uncall(&mut x, &mut k).unwrap();
        assert_eq!(x, 0b1001_0110);

        let (mut y, mut k) = (-123_456_789i32, k0);
        rot_i32(&mut y, &mut k).unwrap();
        assert_eq!(y, (-123_456_789i32).rotate_right(k0).rotate_left(3));
        rot_i32::uncall(&mut y, &mut k).unwrap();
        assert_eq!(y, -123_456_789);

        let z0 = u128::MAX / 3;
        let (mut z, mut k) = (z0, k0);
        rot128(&mut z, &mut k).unwrap();
        assert_eq!(z, z0.rotate_left(k0) ^ 0xFF);
        rot128::uncall(&mut z, &mut k).unwrap();
        assert_eq!(z, z0);
    }
}

reversible! {
    fn scale_u64(h: &mut u64, f: &mut u64) {
        h *= f;
        h /= 0x0123_4567_89AB_CDEFu64;
    }
    fn scale_i8(h: &mut i8, f: &mut i8) {
        h *= f;
    }
    fn scale_u128(h: &mut u128, f: &mut u128) {
        h /= f;
    }
}

#[test]
fn odd_factors_scale_wrapping_integers_exactly_and_even_ones_are_errors() {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..200 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let (h0, f0) = (s, s.rotate_left(17) | 1);
        let (mut h, mut f) = (h0, f0);
        scale_u64(&mut h, &mut f).unwrap();
        // independent reference: (h·f)·c⁻¹ is h·f·c⁻¹, and ·c undoes ·c⁻¹
        assert_eq!(h.wrapping_mul(0x0123_4567_89AB_CDEF), h0.wrapping_mul(f0));
        scale_u64::uncall(&mut h, &mut f).unwrap();
        assert_eq!(h, h0);
        let (mut g, mut f) = (h0 as u128 * 3, (f0 as u128) << 64 | 1);
        scale_u128(&mut g, &mut f).unwrap();
        assert_eq!(g.wrapping_mul(f), h0 as u128 * 3);
    }
    for h0 in i8::MIN..=i8::MAX {
        for f0 in [-127i8, -3, -1, 1, 3, 101] {
            let (mut h, mut f) = (h0, f0);
            scale_i8(&mut h, &mut f).unwrap();
            assert_eq!(h, h0.wrapping_mul(f0));
            scale_i8::uncall(&mut h, &mut f).unwrap();
            assert_eq!(h, h0);
        }
    }
    // an even factor: an error naming the statement, checked or not, and nothing changed
    let (mut h, mut f) = (77u64, 6u64);
    let e = scale_u64(&mut h, &mut f).unwrap_err().to_string();
    assert!(e.contains("`h *= f`") && e.contains("by 6 on u64"), "{e}");
    let e = scale_u64::call_unchecked(&mut h, &mut f)
        .unwrap_err()
        .to_string();
    assert!(e.contains("only odd factors"), "{e}");
    assert_eq!((h, f), (77, 6));
}

reversible! {
    /// `s += 2·(0 + 1 + … + (n − 1))`, reading the loop variable as an operand and passing it
    /// to a call (both copies: a loop variable is read-only).
    fn index_sum(s: &mut usize, n: &mut usize) {
        for i in 0..n {
            s += i;
            add_into(s, i);
        }
    }

    fn add_into(s: &mut usize, a: &mut usize) {
        s += a;
    }

    /// `y += Σᵢ xᵢ²`, the loop variable passed on to pick the element.
    fn squares<T: RevReal>(y: &mut T, x: &mut Vec<T>) {
        for i in 0..x.len() {
            square_of(y, x, i);
        }
    }

    fn square_of<T: RevReal>(y: &mut T, x: &mut Vec<T>, i: &mut usize) {
        y += x[i] * x[i];
    }

    /// `y += Σᵢ (i + 1)·xᵢ` and `s += Σᵢ 2i`: expressions over the loop variable are constants
    /// of the iteration.
    fn ramp<T: RevReal>(y: &mut T, x: &mut Vec<T>, s: &mut usize) {
        for i in 0..x.len() {
            y += x[i] * T::from_f64((i + 1) as f64);
            s += i * 2;
        }
    }
}

#[test]
fn a_loop_variable_is_read_as_an_operand_and_passed_to_calls() {
    let (mut s, mut n) = (7usize, 5usize);
    index_sum(&mut s, &mut n).unwrap();
    assert_eq!(s, 7 + 2 * (1 + 2 + 3 + 4)); // i = 0 adds nothing
    index_sum::uncall(&mut s, &mut n).unwrap();
    assert_eq!((s, n), (7, 5));

    let x = vec![1.5, -0.5, 2.0, 3.0];
    let g = grad(squares {}, (0.0f64, x.clone()), 0).unwrap();
    let f = |x: &[f64]| x.iter().map(|a| a * a).sum::<f64>();
    check_gradient(f, &x, &g.1).assert_passed();
    assert_eq!(g.1, x.iter().map(|a| 2.0 * a).collect::<Vec<_>>()); // 2xᵢ, exactly

    let (_, g) = adjoint_rev::value_and_grad(ramp {}, (0.0f64, x.clone(), 0usize), 0).unwrap();
    assert_eq!(g.1, vec![1.0, 2.0, 3.0, 4.0]); // ∂/∂xᵢ = i + 1, exactly
    let (mut y, mut xv, mut s) = (0.5f64, x.clone(), 3usize);
    ramp(&mut y, &mut xv, &mut s).unwrap();
    assert_eq!(s, 3 + 2 * (1 + 2 + 3));
    ramp::uncall(&mut y, &mut xv, &mut s).unwrap();
    assert_eq!((y, s), (0.5, 3));
}

reversible! {
    /// Integer literals in conditions: a `RevReal` compares its value (`x > 0` as `x > 0.0`),
    /// integers in their own type; the literal on either side (issue #13 item 5; before, an
    /// integer literal against a `T` was a bare E0308).
    fn int_literal_conditions<T: RevReal>(y: &mut T, x: &mut T, n: &mut usize) {
        if (x > 0, ~) {
            y += x * x;
        } else {
            y -= x;
        }
        if (-1 >= x, ~) {
            y += 1.0;
        }
        if (n == 2, ~) {
            y += x;
        }
        let k = 0;
        while (k < 3, k > 0) {
            k += 1;
            y += x;
        }
        k -= 3;
        unlet k = 0;
    }
    fn concrete_float(y: &mut f64, x: &mut f64) {
        if (x > 0, ~) {
            y += x.exp();
        }
    }
}

#[test]
fn integer_literals_in_conditions() -> Result<(), InvertibilityError> {
    // y = (x > 0 ? x² : −x) + (x ≤ −1 ? 1 : 0) + (n = 2 ? x : 0) + 3x
    let f = |x: f64, n: usize| {
        (if x > 0.0 { x * x } else { -x })
            + if x <= -1.0 { 1.0 } else { 0.0 }
            + if n == 2 { x } else { 0.0 }
            + 3.0 * x
    };
    for (x, n) in [(0.5, 2usize), (-0.5, 1), (-2.0, 2), (0.0, 0)] {
        let (mut y, mut xx, mut nn) = (0.0f64, x, n);
        int_literal_conditions(&mut y, &mut xx, &mut nn)?;
        assert_eq!(y, f(x, n), "x = {x}, n = {n}");
        int_literal_conditions::uncall(&mut y, &mut xx, &mut nn)?;
        assert_eq!(y, 0.0);
        let g = adjoint_rev::grad(int_literal_conditions {}, (0.0, x, n), 0)?;
        let want = (if x > 0.0 { 2.0 * x } else { -1.0 }) + if n == 2 { 1.0 } else { 0.0 } + 3.0;
        assert_eq!(g.1, want, "x = {x}, n = {n}");
    }
    let (mut y, mut x) = (0.0, 1.0);
    concrete_float(&mut y, &mut x)?;
    assert_eq!(y, 1f64.exp());
    Ok(())
}

reversible! {
    /// Fixed point compares with an integer literal in its own type, exactly (as it did before
    /// integer literals were typed: fixed implements comparisons with integers).
    fn fixed_condition(y: &mut fixed::types::I16F16, x: &mut fixed::types::I16F16) {
        if (x > 1, ~) {
            y += x;
        }
    }
}

#[test]
fn integer_literals_in_fixed_point_conditions() -> Result<(), InvertibilityError> {
    use fixed::types::I16F16;
    for (x, want) in [(1.5, 1.5), (1.0, 0.0), (-3.0, 0.0)] {
        let (mut y, mut xx) = (I16F16::from_num(0), I16F16::from_num(x));
        fixed_condition(&mut y, &mut xx)?;
        assert_eq!(y, I16F16::from_num(want));
    }
    Ok(())
}
