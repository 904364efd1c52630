//! `pullback_vec` with [`Cotangents`]: several Jacobian rows in one forward and one reverse
//! sweep. Each lane is checked bit for bit against `pullback` with that cotangent alone, and the
//! Jacobian against vector forward mode over `primal` (an independent reference).

#![allow(clippy::needless_range_loop)]

use adjoint_core::forward::{self, Dual, DualVec};
use adjoint_core::Real;
use adjoint_ssa::{differentiable, Cotangents, Workspace};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-10 * (1.0 + a.abs().max(b.abs()))
}

/// A callee whose pullback the caller's reverse sweep runs (at the caller's cotangent type).
#[differentiable]
fn bump(a: f64, b: f64) -> f64 {
    a * b.sin() + b
}

fn softsign(x: f64) -> f64 {
    softsign_rule(x).0
}

fn softsign_rule<T: Real>(x: T) -> (T, [T; 1]) {
    let d = T::cst(1.0) + x.abs();
    (x / d, [T::cst(1.0) / (d * d)])
}

/// An in-place output written by a loop that pushes (a running product), a data-dependent
/// branch, a local array, a call and a user rule.
#[differentiable(rule(softsign = softsign_rule))]
fn mixer(x: &[f64], k: usize, out: &mut [f64]) {
    let mut acc = [0.0; 3];
    let mut r = 1.0;
    for i in 0..x.len() {
        r *= x[i] + 1.5;
        acc[i % 3] += r.tanh();
    }
    for j in 0..out.len() {
        let v = if acc[j % 3] > 0.2 {
            bump(acc[j % 3], x[(j + k) % x.len()])
        } else {
            acc[j % 3] * x[0]
        };
        out[j] = softsign(v) + out[j] * 0.5;
    }
}

/// A tuple result with an early `return` inside a loop.
#[differentiable]
fn two(x: &[f64], cap: f64) -> (f64, f64) {
    let (mut s, mut p) = (0.0, 1.0);
    for i in 0..x.len() {
        s += x[i].exp();
        p *= x[i].cos();
        if s > cap {
            return (s.ln(), p * s);
        }
    }
    (s.ln(), p)
}

const N: usize = 4;
const M: usize = 3;

#[test]
fn in_place_output_jacobian_in_one_sweep() {
    let x = [0.3, -0.2, 0.7, 0.1];
    let out0 = [0.5, -1.0, 0.25];
    for k in 0..3 {
        let mut ws = Workspace::new();
        // M rows at once: cotangent of out[j] is the j-th unit vector
        let mut out = out0;
        let mut dx = [Cotangents([0.0; M]); N];
        let mut dout: [Cotangents<f64, M>; M] = std::array::from_fn(Cotangents::unit);
        mixer::pullback_vec(&mut ws, &x, k, &mut out, &mut dx, &mut dout);
        let mut plain = out0;
        mixer(&x, k, &mut plain);
        assert_eq!(out, plain, "values");

        // lane j is bit for bit what `pullback` with cotangent e_j gives
        for j in 0..M {
            let (mut o, mut d1, mut d2) = (out0, [0.0; N], [0.0; M]);
            d2[j] = 1.0;
            mixer::pullback(&mut ws, &x, k, &mut o, &mut d1, &mut d2);
            for i in 0..N {
                assert_eq!(
                    dx[i][j].to_bits(),
                    d1[i].to_bits(),
                    "k {k} ∂out[{j}]/∂x[{i}]"
                );
            }
            for i in 0..M {
                assert_eq!(
                    dout[i][j].to_bits(),
                    d2[i].to_bits(),
                    "k {k} ∂out[{j}]/∂out0[{i}]"
                );
            }
        }

        // against vector forward mode over `primal`
        let jac = forward::jacobian(
            |xs: &[DualVec<N>]| {
                let mut o: Vec<DualVec<N>> = out0.iter().map(|&v| DualVec::constant(v)).collect();
                mixer::primal(xs, k, &mut o);
                o
            },
            &x,
        );
        for j in 0..M {
            for i in 0..N {
                assert!(
                    close(dx[i][j], jac[j][i]),
                    "k {k} J[{j}][{i}]: {} vs {}",
                    dx[i][j],
                    jac[j][i]
                );
            }
            // ∂out[j]/∂out0[i] = ½ δᵢⱼ
            for i in 0..M {
                assert_eq!(dout[i][j], if i == j { 0.5 } else { 0.0 });
            }
        }
    }
}

#[test]
fn tuple_result_jacobian_in_one_sweep() {
    let x = [0.4, -0.3, 0.9, 0.2];
    for cap in [1.5, 100.0] {
        let mut ws = Workspace::new();
        let mut dx = [Cotangents([0.0; 2]); N];
        let mut dcap = Cotangents([0.0; 2]);
        let seed = (Cotangents::unit(0), Cotangents::unit(1));
        let (a, b) = two::pullback_vec(&mut ws, &x, cap, &mut dx, &mut dcap, seed);
        assert_eq!((a, b), two(&x, cap));
        for (j, seed) in [(1.0, 0.0), (0.0, 1.0)].into_iter().enumerate() {
            let (mut d1, mut dc) = ([0.0; N], 0.0);
            two::pullback(&mut ws, &x, cap, &mut d1, &mut dc, seed);
            for i in 0..N {
                assert_eq!(
                    dx[i][j].to_bits(),
                    d1[i].to_bits(),
                    "cap {cap} row {j} x[{i}]"
                );
            }
            assert_eq!(dcap[j].to_bits(), dc.to_bits());
        }
        let jac = forward::jacobian(
            |xs: &[DualVec<N>]| {
                let (a, b) = two::primal(xs, DualVec::constant(cap));
                vec![a, b]
            },
            &x,
        );
        for j in 0..2 {
            for i in 0..N {
                assert!(close(dx[i][j], jac[j][i]), "cap {cap} J[{j}][{i}]");
            }
        }
    }
}

/// Cotangents over `Dual` numbers: forward-over-reverse gives the directional derivative of
/// every Jacobian row at once; lane by lane equal to `pullback::<Dual>`.
#[test]
fn cotangents_of_dual_numbers() {
    let x = [0.4, -0.3, 0.9, 0.2];
    let dir = [1.0, -0.5, 0.25, 2.0];
    let xd: Vec<Dual<f64>> = x.iter().zip(dir).map(|(&a, d)| Dual::new(a, d)).collect();
    let one = Dual::constant(1.0);
    let zero = Dual::constant(0.0);
    let mut ws = Workspace::new();
    let mut dx = [Cotangents([zero; 2]); N];
    let mut dcap = Cotangents([zero; 2]);
    let seed = (Cotangents([one, zero]), Cotangents([zero, one]));
    two::pullback_vec(
        &mut ws,
        &xd,
        Dual::constant(100.0),
        &mut dx,
        &mut dcap,
        seed,
    );
    for (j, seed) in [(one, zero), (zero, one)].into_iter().enumerate() {
        let (mut d1, mut dc) = ([zero; N], zero);
        two::pullback(&mut ws, &xd, Dual::constant(100.0), &mut d1, &mut dc, seed);
        for i in 0..N {
            assert_eq!(dx[i][j], d1[i], "row {j} x[{i}]");
        }
        // the tangent of row j is (Hessian of output j) · dir: check by finite differences
        // of the first-order pullback along dir
        let h = 1e-6;
        let row = |s: f64| {
            let xs: Vec<f64> = x.iter().zip(dir).map(|(&a, d)| a + s * d).collect();
            let (mut g, mut dc) = ([0.0; N], 0.0);
            let seed = if j == 0 { (1.0, 0.0) } else { (0.0, 1.0) };
            two::pullback(&mut Workspace::new(), &xs, 100.0, &mut g, &mut dc, seed);
            g
        };
        let (gp, gm) = (row(h), row(-h));
        for i in 0..N {
            let fd = (gp[i] - gm[i]) / (2.0 * h);
            assert!(
                (dx[i][j].eps - fd).abs() < 1e-6 * (1.0 + fd.abs()),
                "row {j} x[{i}]"
            );
        }
    }
}

/// Two outputs, the first with infinite partials and a finite value at (0, 1).
#[differentiable]
fn root_and_double(x: f64, y: f64) -> (f64, f64) {
    (x.sqrt() + y.acos() + x.cbrt() + x.powf(0.5), x * 2.0 + y)
}

#[test]
fn a_row_is_not_nan_where_another_output_has_an_infinite_partial() {
    // At (0, 1): ∂√x/∂x, ∂acos y/∂y, ∂∛x/∂x and ∂x^0.5/∂x are infinite, but the second
    // output's row is (2, 1) (forward mode). Its pullback multiplied the first output's zero
    // adjoint by them: NaN. A zero adjoint now sends nothing through such partials, as on the
    // tape.
    let fwd = forward::jacobian(
        |v| {
            let (a, b) = root_and_double::primal(v[0], v[1]);
            vec![a, b]
        },
        &[0.0, 1.0],
    );
    let want = (fwd[1][0], fwd[1][1]);
    assert_eq!(want, (2.0, 1.0));
    let (mut dx, mut dy) = (0.0, 0.0);
    root_and_double::pullback(
        &mut Workspace::new(),
        0.0,
        1.0,
        &mut dx,
        &mut dy,
        (0.0, 1.0),
    );
    assert_eq!((dx, dy), want);
    let (mut lx, mut ly) = (Cotangents([0.0; 2]), Cotangents([0.0; 2]));
    root_and_double::pullback_vec(
        &mut Workspace::new(),
        0.0,
        1.0,
        &mut lx,
        &mut ly,
        (Cotangents::unit(0), Cotangents::unit(1)),
    );
    assert_eq!((lx[1], ly[1]), want);
    // the first row keeps its infinite partials
    assert_eq!((lx[0], ly[0]), (f64::INFINITY, f64::NEG_INFINITY));
}
