//! Unchecked forward code skips uncomputing a routine whose writes (its callees' `__WRITES`
//! included) land only on ancillas that carry no gradient (issue #13 item 4): plain numbers, or
//! `GVar`s whose gradient is still zero. The results are the checked code's, a routine whose
//! callee writes an argument is still uncomputed, and a gradient that reached an ancilla (a
//! function run forward inside an inverse, `~f(…)`, during a gradient) still flows through the
//! uncomputation. Each gradient against forward mode.

// `x.clone()` of a `Copy` number: a copy as users write it in an `unlet` (the re-allocation
// cases below).
#![allow(clippy::clone_on_copy)]

use adjoint_core::forward::{self, Dual};
use adjoint_rev::prelude::*;
use adjoint_rev::value_and_grad_unchecked;

reversible! {
    /// `out += x²`: writes `out` only.
    fn square_into<T: RevReal>(out: &mut T, x: &mut T) {
        out += x * x;
    }

    /// `x += 1; out += x²`: writes `x` too, and leaves it changed.
    fn shift_square_into<T: RevReal>(out: &mut T, x: &mut T) {
        x += 1.0;
        out += x * x;
    }

    /// `y += sin(x²)` through an ancilla computed by a call (the routine may be skipped).
    fn via_square<T: RevReal>(y: &mut T, x: &mut T) {
        @routine {
            let n = T::zero();
            square_into(n, x);
        }
        y += n.sin();
        ~@routine;
    }

    /// `y -= sin(x²)`: `via_square` run forward on `GVar`s inside this function's inverse, with
    /// `y`'s gradient already on its ancilla when the routine would be uncomputed.
    fn minus_via_square<T: RevReal>(y: &mut T, x: &mut T) {
        ~via_square(y, x);
    }

    /// `y += sin((x + 1)²)`; the routine moves `x`, so it must be uncomputed.
    fn via_shift<T: RevReal>(y: &mut T, x: &mut T) {
        @routine {
            let n = T::zero();
            shift_square_into(n, x);
        }
        y += n.sin();
        ~@routine;
    }
}

type Run = fn(&mut f64, &mut f64) -> Result<(), InvertibilityError>;

/// Each pair (checked, unchecked) from `(y, x) = (0.25, x0)` leaves the same bits.
fn same_bits(x0: f64, pairs: [(Run, Run); 2]) {
    for (checked, unchecked) in pairs {
        let (mut y1, mut x1) = (0.25, x0);
        let (mut y2, mut x2) = (0.25, x0);
        checked(&mut y1, &mut x1).unwrap();
        unchecked(&mut y2, &mut x2).unwrap();
        assert_eq!(
            (y1.to_bits(), x1.to_bits()),
            (y2.to_bits(), x2.to_bits()),
            "x0 = {x0}"
        );
    }
}

#[test]
fn unchecked_calls_match_checked_ones() {
    for x0 in [0.3, -1.7, 2.5] {
        same_bits(
            x0,
            [
                (via_square::<f64>, via_square::call_unchecked::<f64>),
                (via_shift::<f64>, via_shift::call_unchecked::<f64>),
            ],
        );
        // `via_shift` restores `x` (to rounding: `x + 1 − 1`)
        let (mut y, mut x) = (0.0, x0);
        via_shift::call_unchecked(&mut y, &mut x).unwrap();
        assert!((x - x0).abs() <= 1e-15, "x = {x} after via_shift of {x0}");
        assert!((y - ((x0 + 1.0) * (x0 + 1.0)).sin()).abs() <= 1e-15);
    }
}

/// Unchecked inverses give the checked ones' results, bit for bit, also for the Petersen loss,
/// whose routine calls `i_dist` 45 times; on `GVar`s a gradient on the output flows back
/// through the routine's ancilla (forward mode's), and none moves when it has none.
#[test]
fn unchecked_uncalls_match_checked_ones() {
    use adjoint_rev::examples::i_petersen;
    use adjoint_rev::GVar;
    for x0 in [0.3, -1.7, 2.5] {
        same_bits(
            x0,
            [
                (
                    via_square::uncall::<f64>,
                    via_square::uncall_unchecked::<f64>,
                ),
                (via_shift::uncall::<f64>, via_shift::uncall_unchecked::<f64>),
            ],
        );
        let (mut y, mut x) = (0.25, x0);
        via_square::uncall_unchecked(&mut y, &mut x).unwrap();
        assert_eq!(x, x0);
        assert!((y - (0.25 - (x0 * x0).sin())).abs() <= 1e-15);
        for seed in [1.0, 0.0] {
            let (mut y, mut x) = (GVar::new(0.25, seed), GVar::new(x0, 0.0));
            via_square::uncall_unchecked(&mut y, &mut x).unwrap();
            let want = seed * forward::derivative(|x: Dual<f64>| (x * x).sin(), x0);
            assert_close(x.g, want);
        }
    }
    let k = 3;
    let x: Vec<f64> = (0..10 * k).map(|i| (0.7 * i as f64).sin()).collect();
    let (mut l1, mut x1, mut k1) = (1.5, x.clone(), k);
    let (mut l2, mut x2, mut k2) = (1.5, x.clone(), k);
    i_petersen::uncall(&mut l1, &mut x1, &mut k1).unwrap();
    i_petersen::uncall_unchecked(&mut l2, &mut x2, &mut k2).unwrap();
    assert_eq!(l1.to_bits(), l2.to_bits());
    assert_eq!(x1, x);
    assert_eq!(x2, x);
}

/// `got` within 1e-12 (relative, or absolute near 0) of forward mode's `want`.
fn assert_close(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-12 * (1.0 + want.abs()),
        "{got} vs {want}"
    );
}

#[test]
fn gradients_through_skippable_routines_match_forward_mode() {
    for x0 in [0.3, -1.7, 2.5] {
        let (_, g) = value_and_grad_unchecked(via_square {}, (0.0f64, x0), 0).unwrap();
        let want = forward::derivative(|x: Dual<f64>| (x * x).sin(), x0);
        assert_close(g.1, want);
        let (_, g) = value_and_grad_unchecked(via_shift {}, (0.0f64, x0), 0).unwrap();
        let want = forward::derivative(|x: Dual<f64>| ((x + 1.0) * (x + 1.0)).sin(), x0);
        assert_close(g.1, want);
    }
}

#[test]
fn a_gradient_on_the_ancilla_keeps_the_uncomputation() {
    for x0 in [0.3, -1.7, 2.5] {
        let (_, g) = value_and_grad_unchecked(minus_via_square {}, (0.0f64, x0), 0).unwrap();
        let want = forward::derivative(|x: Dual<f64>| -(x * x).sin(), x0);
        assert_close(g.1, want);
    }
}

/// `f::gradient_pass_unchecked` (for a function ending with `~@routine`) gives bit for bit what
/// `call_unchecked`, the seed and `uncall_unchecked` give on the same `GVar`s, and the gradient
/// of forward mode; the Petersen loss too (its routine calls `i_dist`).
#[test]
fn the_fused_gradient_pass_is_call_seed_uncall() {
    use adjoint_rev::examples::{i_petersen, petersen};
    use adjoint_rev::GVar;
    for x0 in [0.3, -1.7, 2.5] {
        let (mut y, mut x) = (GVar::new(0.5, 0.0), GVar::new(x0, 0.0));
        let mut seen = 0.0;
        via_square::gradient_pass_unchecked(&mut y, &mut x, |y, _| {
            seen = y.x;
            y.g = 1.0;
        })
        .unwrap();
        let (mut y2, mut x2) = (GVar::new(0.5, 0.0), GVar::new(x0, 0.0));
        via_square::call_unchecked(&mut y2, &mut x2).unwrap();
        assert_eq!(seen.to_bits(), y2.x.to_bits(), "the value at the seed");
        y2.g = 1.0;
        via_square::uncall_unchecked(&mut y2, &mut x2).unwrap();
        assert_eq!(
            (x.x.to_bits(), x.g.to_bits()),
            (x2.x.to_bits(), x2.g.to_bits())
        );
        assert_eq!(
            (y.x.to_bits(), y.g.to_bits()),
            (y2.x.to_bits(), y2.g.to_bits())
        );
        let want = forward::derivative(|x: Dual<f64>| (x * x).sin(), x0);
        assert!((x.g - want).abs() <= 1e-12 * (1.0 + want.abs()));
    }
    let k = 3;
    let x: Vec<f64> = (0..10 * k).map(|i| (0.7 * i as f64).sin()).collect();
    let mut loss = GVar::new(0.0, 0.0);
    let mut gx: Vec<GVar<f64>> = x.iter().map(|&v| GVar::new(v, 0.0)).collect();
    let mut kk = k;
    let mut value = 0.0;
    i_petersen::gradient_pass_unchecked(&mut loss, &mut gx, &mut kk, |l, _, _| {
        value = l.x;
        l.g = 1.0;
    })
    .unwrap();
    assert!((value - petersen(&x, k)).abs() <= 1e-12 * (1.0 + value.abs()));
    let want = forward::gradient(|v: &[Dual<f64>]| petersen(v, k), &x);
    for (g, w) in gx.iter().zip(&want) {
        assert!((g.g - w).abs() <= 1e-10 * (1.0 + w.abs()), "{} vs {w}", g.g);
    }
}

reversible! {
    /// `y += x` through an ancilla `u` that a loop variable of the routine shadows: the write to
    /// `u` after the loop is a write to the outer ancilla, so the routine must be uncomputed
    /// (unchecked code took `u` for the loop's local and skipped it: `y` came out 2x; a hunter).
    #[allow(unused_variables)]
    fn shadowed_by_loop_var<T: RevReal>(y: &mut T, x: &mut T) {
        let u = T::zero();
        @routine {
            for u in 0..1 {
                let z = T::zero();
                unlet z = T::zero();
            }
            u += x;
        }
        y += u;
        ~@routine;
        y += u;
        unlet u = T::zero();
    }
}

#[test]
fn a_loop_variable_shadowing_an_ancilla_does_not_make_the_routine_skippable() {
    for x0 in [0.5, -1.25] {
        let (mut y1, mut x1) = (0.0, x0);
        let (mut y2, mut x2) = (0.0, x0);
        shadowed_by_loop_var(&mut y1, &mut x1).unwrap();
        shadowed_by_loop_var::call_unchecked(&mut y2, &mut x2).unwrap();
        assert_eq!((y1, x1), (x0, x0));
        assert_eq!((y2, x2), (x0, x0));
        let (v, g) = value_and_grad_unchecked(shadowed_by_loop_var {}, (0.0f64, x0), 0).unwrap();
        assert_eq!(v, (x0, x0));
        assert_close(g.1, forward::derivative(|x: Dual<f64>| x, x0));
    }
}

reversible! {
    /// `y += x²` through an ancilla `s` that a routine deallocates and its uncomputation
    /// allocates again (a reviewer: such a routine counted as writing only its own ancillas, so
    /// unchecked code skipped or scoped away the re-allocation, and the old `s` gave its
    /// gradient twice: `4x`, not `2x`).
    fn unlet_outer<T: RevReal>(y: &mut T, x: &mut T) {
        let s = x.clone();
        @routine { unlet s = x.clone(); }
        ~@routine;
        y += s * s;
        unlet s = x.clone();
    }
    /// The same with an ancilla of the routine's own beside it.
    fn unlet_outer_t<T: RevReal>(y: &mut T, x: &mut T) {
        let s = x.clone();
        @routine { let t = T::zero(); t += x; unlet s = x.clone(); }
        y += t;
        ~@routine;
        y += s * s;
        unlet s = x.clone();
    }
    /// The same inside an inverse block.
    fn unlet_inv<T: RevReal>(y: &mut T, x: &mut T) {
        let s = x.clone();
        ~{ @routine { unlet s = x.clone(); } ~@routine; }
        y += s * s;
        unlet s = x.clone();
    }
    /// `y += x·sin x`, the re-allocation in a named routine inside one the body ends by
    /// uncomputing (its gradient pass kept nothing of the inner routine, and the gradient through
    /// `s` was lost: 0.5354, not 1.1796, at 0.7).
    fn unlet_mid<T: RevReal>(y: &mut T, x: &mut T) {
        @routine { let t = T::zero(); t += x.sin(); }
        let s = x.clone();
        @routine b { unlet s = x.clone(); }
        ~@routine b;
        y += s * t;
        unlet s = x.clone();
        ~@routine;
    }
    /// Plain numbers: the re-allocation sets `s` to the exact constant (`x` unused).
    #[allow(unused_variables)]
    fn relet_value(y: &mut f64, x: &mut f64) {
        let s = 0.1;
        s += 0.2;
        y += s;
        @routine { unlet s = 0.3; }
        ~@routine;
        s -= 0.2;
        unlet s = 0.1;
    }
}

#[test]
fn a_routine_that_deallocates_an_outer_ancilla_is_never_skipped() {
    use adjoint_rev::GVar;
    for x0 in [0.7, -1.3] {
        let square = forward::derivative(|x: Dual<f64>| x * x, x0);
        let (_, g) = value_and_grad_unchecked(unlet_outer {}, (0.0f64, x0), 0).unwrap();
        assert_close(g.1, square);
        let (_, g) = value_and_grad_unchecked(unlet_inv {}, (0.0f64, x0), 0).unwrap();
        assert_close(g.1, square);
        let (_, g) = value_and_grad_unchecked(unlet_outer_t {}, (0.0f64, x0), 0).unwrap();
        assert_close(g.1, forward::derivative(|x: Dual<f64>| x + x * x, x0));
        let want = forward::derivative(|x: Dual<f64>| x * x.sin(), x0);
        let (_, g) = value_and_grad_unchecked(unlet_mid {}, (0.0f64, x0), 0).unwrap();
        assert_close(g.1, want);
        let (mut y, mut x) = (GVar::new(0.0, 0.0), GVar::new(x0, 0.0));
        unlet_mid::gradient_pass_unchecked(&mut y, &mut x, |y, _| y.g = 1.0).unwrap();
        assert_close(x.g, want);
    }
    same_bits(
        0.5,
        [
            (relet_value, relet_value::call_unchecked),
            (relet_value::uncall, relet_value::uncall_unchecked),
        ],
    );
}
