//! The names and attributes the macro generates stay out of the user's way: a raw identifier
//! works as an ancilla, parameters and loop variables may be called `seed` or `before`, an
//! outer `#[cfg]` removes every generated item with the function, and `^=` on an element with a
//! computed index borrows like `+=`. Gradients against central finite differences.

use adjoint_rev::prelude::*;
use adjoint_rev::{value_and_grad, value_and_grad_unchecked, GVar};

/// `f′(x)` by central finite differences.
fn central(f: impl Fn(f64) -> f64, x: f64) -> f64 {
    let h = 1e-6;
    (f(x + h) - f(x - h)) / (2.0 * h)
}

/// `got` within `1e-6` (relative, or absolute near 0) of the finite difference `want`.
fn assert_close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-6 * (1.0 + want.abs()),
        "{got} vs {want}"
    );
}

reversible! {
    /// `y += sin(exp(x))` through an ancilla named with a raw identifier (the macro panicked:
    /// "`\"r#ref\"` is not a valid identifier").
    fn raw_ancilla<T: RevReal>(y: &mut T, x: &mut T) {
        @routine {
            let r#ref = T::zero();
            r#ref += x.exp();
        }
        y += r#ref.sin();
        ~@routine;
    }
}

#[test]
fn a_raw_identifier_works_as_a_routine_ancilla() {
    for x0 in [0.3, -1.7, 1.1] {
        let want = f64::exp(x0).sin();
        for call in [
            raw_ancilla::<f64> as fn(&mut f64, &mut f64) -> _,
            raw_ancilla::call_unchecked::<f64>,
        ] {
            let (mut y, mut x) = (0.25, x0);
            call(&mut y, &mut x).unwrap();
            assert!((y - 0.25 - want).abs() <= 1e-15, "{y} at {x0}");
            assert_eq!(x, x0);
            raw_ancilla::uncall(&mut y, &mut x).unwrap();
            assert!((y - 0.25).abs() <= 1e-15 && x == x0);
        }
        let fd = central(|x| x.exp().sin(), x0);
        let (_, g) = value_and_grad(raw_ancilla {}, (0.0f64, x0), 0).unwrap();
        assert_close(g.1, fd);
        let (_, g) = value_and_grad_unchecked(raw_ancilla {}, (0.0f64, x0), 0).unwrap();
        assert_close(g.1, fd);
        let (mut y, mut x) = (GVar::new(0.0, 0.0), GVar::new(x0, 0.0));
        raw_ancilla::gradient_pass_unchecked(&mut y, &mut x, |y, _| y.g = 1.0).unwrap();
        assert_close(x.g, fd);
    }
}

reversible! {
    /// Not compiled: its types do not even exist (every generated item must go with it).
    #[cfg(any())]
    fn switched_off(y: &mut NoSuchType, x: &mut NoSuchType) {
        y += x;
    }

    /// Not compiled either: generic, ending with `~@routine` (a gradient pass is generated).
    #[cfg(any())]
    fn switched_off_generic<T: RevReal>(y: &mut T, x: &mut T) {
        @routine {
            let a = T::zero();
            a += x.exp();
        }
        y += a.sin();
        ~@routine;
    }

    /// Compiled: `y += x³`.
    #[cfg(all())]
    #[cfg_attr(all(), allow(clippy::needless_range_loop))]
    fn switched_on<T: RevReal>(y: &mut T, x: &mut T) {
        y += x.powi(3);
    }
}

/// A function of the same name as a switched-off one: only one of them exists.
#[cfg(not(any()))]
fn switched_off() -> u8 {
    7
}

#[test]
fn cfg_removes_the_whole_function_or_keeps_it() {
    assert_eq!(switched_off(), 7);
    let (mut y, mut x) = (1.0, 2.0);
    switched_on(&mut y, &mut x).unwrap();
    assert_eq!(y, 9.0);
    switched_on::uncall(&mut y, &mut x).unwrap();
    assert_eq!(y, 1.0);
    for x0 in [0.3, -1.7, 1.1] {
        let (_, g) = value_and_grad(switched_on {}, (0.0f64, x0), 0).unwrap();
        assert_close(g.1, central(|x| x * x * x, x0));
    }
}

reversible! {
    /// `y += sin(exp(seed))`: a parameter named `seed` in a function with a gradient pass (whose
    /// own last parameter was called `seed`: E0415).
    fn with_seed<T: RevReal>(y: &mut T, seed: &mut T) {
        @routine {
            let a = T::zero();
            a += seed.exp();
        }
        y += a.sin();
        ~@routine;
    }
}

#[test]
fn a_parameter_may_be_called_seed() {
    for x0 in [0.3, -1.7, 1.1] {
        let fd = central(|x| x.exp().sin(), x0);
        let (out, g) = value_and_grad(with_seed {}, (0.0f64, x0), 0).unwrap();
        assert!((out.0 - x0.exp().sin()).abs() <= 1e-15);
        assert_close(g.1, fd);
        let (mut y, mut x) = (GVar::new(0.0, 0.0), GVar::new(x0, 0.0));
        with_seed::gradient_pass_unchecked(&mut y, &mut x, |y, _| y.g = 1.0).unwrap();
        assert_close(x.g, fd);
    }
}

reversible! {
    /// `y += x^before` (checked code bound `before`, a `String`, around the exponent: E0277).
    fn powi_before<T: RevReal>(y: &mut T, x: &mut T, before: &mut i32) {
        y += x.powi(before);
    }

    /// `y += x + x² + … + x^n`, the exponent a loop variable called `before`.
    fn powi_loop_before<T: RevReal>(y: &mut T, x: &mut T, n: &mut i32) {
        for before in 1..=n {
            y += x.powi(before);
        }
    }
}

#[test]
fn an_exponent_may_be_called_before() {
    for x0 in [0.3, -1.7, 1.1] {
        let (out, g) = value_and_grad(powi_before {}, (0.0f64, x0, 3), 0).unwrap();
        assert!((out.0 - x0.powi(3)).abs() <= 1e-12);
        assert_close(g.1, central(|x| x.powi(3), x0));
        let (out, g) = value_and_grad(powi_loop_before {}, (0.0f64, x0, 4), 0).unwrap();
        let poly = |x: f64| (1..=4).map(|k| x.powi(k)).sum::<f64>();
        assert!((out.0 - poly(x0)).abs() <= 1e-12);
        assert_close(g.1, central(poly, x0));
    }
    // a target that is infinite runs the undo inside the `Some(before)` arm
    let (mut y, mut x, mut n) = (f64::INFINITY, 2.0, 2);
    powi_before(&mut y, &mut x, &mut n).unwrap();
    assert_eq!(y, f64::INFINITY);
}

reversible! {
    /// `v[last] ^= k` (E0502: `v.len()` read inside the mutable borrow of `v`).
    fn last_xor(v: &mut Vec<u32>, k: &mut u32) {
        v[v.len() - 1] ^= k;
    }

    /// `m[i][last] ^= m[0][0]`, indices computed at two levels.
    fn nested_xor(m: &mut Vec<Vec<u32>>, i: &mut usize) {
        m[i + 1][m[0].len() - 1] ^= 5u32;
    }
}

#[test]
fn xor_into_an_element_with_a_computed_index() {
    let (mut v, mut k) = (vec![1u32, 2, 12], 10u32);
    last_xor(&mut v, &mut k).unwrap();
    assert_eq!(v, [1, 2, 6]);
    last_xor::call_unchecked(&mut v, &mut k).unwrap();
    assert_eq!(v, [1, 2, 12]);
    last_xor(&mut v, &mut k).unwrap();
    last_xor::uncall(&mut v, &mut k).unwrap();
    assert_eq!((v, k), (vec![1, 2, 12], 10));

    let (mut m, mut i) = (vec![vec![0u32, 1], vec![2, 3], vec![4, 6]], 1usize);
    nested_xor(&mut m, &mut i).unwrap();
    assert_eq!(m, [vec![0, 1], vec![2, 3], vec![4, 3]]);
    nested_xor::uncall(&mut m, &mut i).unwrap();
    assert_eq!(m, [vec![0, 1], vec![2, 3], vec![4, 6]]);
}
