//! `x / y` where `1/y` overflows (|y| below ~5.6e-309): the partial `−x/y²` is 0 at `x = 0`
//! and finite for a small enough `x`, on every engine (the tape's, the SSA transform's, the
//! array engine's and the reversible engine's gradient in `y` was `0 · ∞ = NaN` at
//! `(0, 1e-310)`). The references are closed forms, and forward mode, whose quotient rule
//! never forms `1/y`.

use adjoint::array::Builder;
use adjoint::forward::{self, Dual64};
use adjoint::rev::prelude::*;
use adjoint::rules::{binary, Op2};
use adjoint::ssa::differentiable;
use adjoint::tape;

/// (x, y, ∂/∂y) with `1/y` infinite; ∂/∂x = 1/y is +∞ (it overflows) at each.
const CASES: [(f64, f64, f64); 3] = [
    (0.0, 1e-310, 0.0),
    (-0.0, -1e-310, 0.0),
    // x / y² = 5e-324 / 1e-620 is finite: 4.94e296 (`(x/y)·(1/y)` was −∞)
    (5e-324, 1e-310, -5e-324 / 1e-310 / 1e-310),
];

fn same(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * b.abs()
}

#[differentiable]
fn quotient(x: &[f64]) -> f64 {
    x[0] / x[1]
}

reversible! {
    fn i_quotient<T: RevReal>(q: &mut T, x: &mut T, y: &mut T) {
        q += x / y;
    }
}

#[test]
fn the_rule_table_and_forward_mode() {
    for (x, y, dy) in CASES {
        let r = binary(Op2::Div, x, y);
        assert!(same(r.dy, dy), "dy at ({x:e}, {y:e}): {:e}", r.dy);
        assert_eq!(r.dx, f64::INFINITY.copysign(y));
        // ∂²/∂y² = 2x/y³: 0 at x = 0; infinite for the third case
        if x == 0.0 {
            assert_eq!(r.dyy, 0.0, "dyy at ({x:e}, {y:e})");
        } else {
            assert_eq!(r.dyy, f64::INFINITY);
        }
        let f = forward::gradient(|v| v[0] / v[1], &[x, y]);
        assert!(same(f[1], dy), "forward mode at ({x:e}, {y:e}): {f:?}");
        // the second derivative in y by forward over forward, at x = 0
        if x == 0.0 {
            let yy = adjoint::forward::Dual::<Dual64>::variable(Dual64::variable(y));
            let q = adjoint::forward::Dual::constant(Dual64::constant(x)) / yy;
            assert_eq!(q.eps.eps, 0.0);
        }
    }
}

#[test]
fn the_tape_and_the_ssa_transform() {
    for (x, y, dy) in CASES {
        let g = tape::grad(|v| v[0] / v[1], &[x, y]);
        assert!(same(g[1], dy), "tape at ({x:e}, {y:e}): {g:?}");
        assert_eq!(g[0], f64::INFINITY.copysign(y));
        let mut g = [0.0; 2];
        quotient::grad(&[x, y], &mut g);
        assert!(same(g[1], dy), "SSA at ({x:e}, {y:e}): {g:?}");
        // the tape's Hessian: ∂²/∂y² = 0 at x = 0
        if x == 0.0 {
            let h = tape::hessian(|v| v[0] / v[1], &[x, y]);
            assert_eq!(h[1][1], 0.0, "tape Hessian at ({x:e}, {y:e}): {h:?}");
        }
    }
}

#[test]
fn the_array_engine_compiled_and_interpreted() {
    // 4096 elements: the compiled kernel runs (both lanes of its vector code see the cases)
    let n = 4096;
    let mut xs = vec![1.0; n];
    let mut ys = vec![2.0; n];
    for (k, (x, y, _)) in CASES.iter().enumerate() {
        xs[k] = *x;
        ys[k] = *y;
        xs[n - 1 - k] = *x;
        ys[n - 1 - k] = *y;
    }
    for jit in [true, false] {
        let b = Builder::new();
        b.set_jit(jit);
        let (x, y) = (b.input(&[n]), b.input(&[n]));
        let p = b.build_scalar(&x.zip_with(&y, |a, c| a / c).sum()).unwrap();
        let g = p.gradient_a(&[&xs, &ys]).unwrap();
        for (k, (cx, cy, dy)) in CASES.iter().enumerate() {
            for e in [k, n - 1 - k] {
                assert!(
                    same(g.grads[1][e], *dy),
                    "array engine (jit {jit}) at ({cx:e}, {cy:e}): {:e}",
                    g.grads[1][e]
                );
            }
        }
        assert_eq!(g.grads[1][n / 2], -0.25); // −1/2² elsewhere
    }
}

#[test]
fn the_reversible_engine() {
    for (x, y, dy) in CASES {
        let (_, _, gy) = adjoint::rev::grad(i_quotient {}, (0.0f64, x, y), 0).unwrap();
        assert!(same(gy, dy), "reversible engine at ({x:e}, {y:e}): {gy:e}");
    }
}
