//! Fused accumulation loops: a top-level innermost counted loop that only accumulates (`s += f(i)`) and
//! whose accumulators' adjoints at its exit are known before it starts runs each iteration's
//! adjoint right after the iteration, in the forward sweep (see `adjoint_ssa_syntax::adjoint::
//! Fused`; `fused_loops_are_detected` in that crate checks which of these shapes fuse). Every
//! gradient here is checked against forward mode over a generic reference written as plain
//! Rust, the value against the user function; the shapes that must not fuse are checked too.

#![allow(
    clippy::needless_range_loop,
    clippy::assign_op_pattern,
    clippy::explicit_counter_loop
)] // `q = e + q`, `j += 1` beside the counter: shapes under test

use adjoint_core::forward::{self, Dual};
use adjoint_core::Real;
use adjoint_ssa::{differentiable, Cotangents, Workspace};

mod common;
use common::{check, check_slice};

fn input(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 0.3 + 0.17 * i as f64 - 0.011 * (i * i) as f64)
        .collect()
}

/// A stencil: two adjoint updates of `x` per iteration.
#[differentiable]
fn stencil(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() - 1 {
        let t = x[i + 1] - x[i] * x[i];
        let u = 1.0 - x[i];
        s += t * t * 100.0 + u * u;
    }
    s
}
fn stencil_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in 0..x.len() - 1 {
        let t = x[i + 1] - x[i] * x[i];
        let u = T::cst(1.0) - x[i];
        s += t * t * 100.0 + u * u;
    }
    s
}

/// An active initial value, a loop of zero iterations when `x.len() == 2`.
#[differentiable]
fn dot_halves(x: &[f64]) -> f64 {
    let n = x.len() / 2;
    let mut s = x[0] * x[n];
    for i in 1..n {
        s += x[i] * x[n + i];
    }
    s
}
fn dot_halves_ref<T: Real>(x: &[T]) -> T {
    let n = x.len() / 2;
    let mut s = x[0] * x[n];
    for i in 1..n {
        s += x[i] * x[n + i];
    }
    s
}

/// An inner loop (not fused: the two sweeps measured faster), a division by a cast after it.
#[differentiable]
fn softplus_mean(x: &[f64]) -> f64 {
    let d = 3;
    let m = (x.len() - 1) / d;
    let b = x[x.len() - 1];
    let mut total = 0.0;
    for i in 0..m {
        let mut z = b;
        for j in 0..d {
            z += x[i * d + j] * (j as f64 + 0.5);
        }
        let t = z * -1.5;
        total += t.max(0.0) + (-t.abs()).exp().ln_1p();
    }
    total / m as f64
}
fn softplus_mean_ref<T: Real>(x: &[T]) -> T {
    let d = 3;
    let m = (x.len() - 1) / d;
    let b = x[x.len() - 1];
    let mut total = T::zero();
    for i in 0..m {
        let mut z = b;
        for j in 0..d {
            z += x[i * d + j] * (j as f64 + 0.5);
        }
        let t = z * -1.5;
        total += t.max(T::zero()) + (-t.abs()).exp().ln_1p();
    }
    total / m as f64
}

/// A division by a cast computed after the loop, a loop of zero iterations for one input.
#[differentiable]
fn mean_exp(x: &[f64]) -> f64 {
    let m = x.len() / 2;
    let mut t = 0.0;
    for i in 0..m {
        t += (x[2 * i] * x[2 * i + 1]).exp();
    }
    t / (m + 1) as f64
}
fn mean_exp_ref<T: Real>(x: &[T]) -> T {
    let m = x.len() / 2;
    let mut t = T::zero();
    for i in 0..m {
        t += (x[2 * i] * x[2 * i + 1]).exp();
    }
    t / (m + 1) as f64
}

/// Two accumulators, `-=` and `e + s`, combined linearly after the loop with a constant, a
/// value computed before the loop and a cast computed after it.
#[differentiable]
fn two_sums(x: &[f64]) -> f64 {
    let w = x[0].sin();
    let mut s = 0.0;
    let mut q = 1.0;
    for i in 0..x.len() {
        s -= x[i].cos() * x[i];
        q = x[i] * x[i] + q;
    }
    let k = x.len() * 2;
    2.0 * s + s * w - q / k as f64 + -q
}
fn two_sums_ref<T: Real>(x: &[T]) -> T {
    let w = x[0].sin();
    let mut s = T::zero();
    let mut q = T::one();
    for i in 0..x.len() {
        s -= x[i].cos() * x[i];
        q = x[i] * x[i] + q;
    }
    let k = x.len() * 2;
    s * 2.0 + s * w - q / k as f64 + -q
}

/// A branch inside the body (a join with two incoming edges).
#[differentiable]
fn branchy(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        let t = if x[i] > 0.5 {
            x[i].sin()
        } else {
            x[i] * x[i] * 3.0
        };
        s += t * x[0];
    }
    s
}
fn branchy_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in 0..x.len() {
        let t = if x[i].value() > 0.5 {
            x[i].sin()
        } else {
            x[i] * x[i] * 3.0
        };
        s += t * x[0];
    }
    s
}

/// An inner `while` loop that is not counted (it pushes its values and tags) inside the body
/// (not fused).
#[differentiable]
fn inner_while(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        let mut q = x[i];
        let mut n = 0;
        while q.abs() < 4.0 && n < 6 {
            q = q * 1.5 + 0.1 * x[i];
            n += 1;
        }
        s += q.sin();
    }
    s
}
fn inner_while_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in 0..x.len() {
        let mut q = x[i];
        let mut n = 0;
        while q.value().abs() < 4.0 && n < 6 {
            q = q * 1.5 + x[i] * 0.1;
            n += 1;
        }
        s += q.sin();
    }
    s
}

/// Reads a local array filled before the loop.
#[differentiable]
fn local_array(x: &[f64]) -> f64 {
    let mut h = [0.0; 4];
    for k in 0..4 {
        h[k] = x[k].tanh();
    }
    let mut s = 0.0;
    for k in 0..4 {
        s += h[k] * x[k + 4] + h[0];
    }
    s * 0.5
}
fn local_array_ref<T: Real>(x: &[T]) -> T {
    let mut h = [T::zero(); 4];
    for k in 0..4 {
        h[k] = x[k].tanh();
    }
    let mut s = T::zero();
    for k in 0..4 {
        s += h[k] * x[k + 4] + h[0];
    }
    s * 0.5
}

/// The loop in one arm of an `if`; its accumulator reaches the result through the join.
#[differentiable]
fn in_branch(x: &[f64]) -> f64 {
    let mut s = x[1];
    if x[0] > 0.0 {
        for i in 0..x.len() {
            s += x[i].exp();
        }
    }
    s * 3.0
}
fn in_branch_ref<T: Real>(x: &[T]) -> T {
    let mut s = x[1];
    if x[0].value() > 0.0 {
        for i in 0..x.len() {
            s += x[i].exp();
        }
    }
    s * 3.0
}

/// Must not fuse: the accumulator's adjoint depends on its value (`ln`).
#[differentiable]
fn log_of_sum(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i] * x[i];
    }
    s.ln()
}
fn log_of_sum_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in 0..x.len() {
        s += x[i] * x[i];
    }
    s.ln()
}

/// Must not fuse: the array the loop reads is written after it.
#[differentiable]
fn written_after(x: &[f64]) -> f64 {
    let mut h = [0.0; 3];
    for k in 0..3 {
        h[k] = x[k] * x[k];
    }
    let mut s = 0.0;
    for k in 0..3 {
        s += h[k] * x[k + 3];
    }
    h[0] = s;
    h[0] * 2.0 + h[1]
}
fn written_after_ref<T: Real>(x: &[T]) -> T {
    let mut h = [T::zero(); 3];
    for k in 0..3 {
        h[k] = x[k] * x[k];
    }
    let mut s = T::zero();
    for k in 0..3 {
        s += h[k] * x[k + 3];
    }
    h[0] = s;
    h[0] * 2.0 + h[1]
}

/// Must not fuse (a loop inside a loop): double sum.
#[differentiable]
fn double_sum(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        for j in 0..i {
            s += x[i] * x[j].sin();
        }
    }
    s
}
fn double_sum_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in 0..x.len() {
        for j in 0..i {
            s += x[i] * x[j].sin();
        }
    }
    s
}

/// Two fused loops in a row, the second reading the first's result, with a load at an
/// invariant index (`x[0]`, whose adjoint the reversed loop would defer).
#[differentiable]
fn two_loops(x: &[f64]) -> f64 {
    let mut a = 0.0;
    for i in 0..x.len() {
        a += x[i] * x[0];
    }
    let mut b = 0.0;
    for i in 0..x.len() {
        b += (x[i] * a).sin();
    }
    b
}
fn two_loops_ref<T: Real>(x: &[T]) -> T {
    let mut a = T::zero();
    for i in 0..x.len() {
        a += x[i] * x[0];
    }
    let mut b = T::zero();
    for i in 0..x.len() {
        b += (x[i] * a).sin();
    }
    b
}

/// Stencils, each element's adjoint updated by several iterations: a second difference
/// (offsets 0, 1, 2), no iteration when `x.len() == 2`.
#[differentiable]
fn second_difference(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() - 2 {
        let t = x[i + 2] - 2.0 * x[i + 1] + x[i];
        s += t * t;
    }
    s
}
fn second_difference_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in 0..x.len() - 2 {
        let t = x[i + 2] - x[i + 1] * 2.0 + x[i];
        s += t * t;
    }
    s
}

/// Offsets 1 and 3, a loop from 1, which runs no iteration for `x.len() <= 4` (for 3, its
/// start is past its end).
#[differentiable]
fn gapped(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 1..x.len() - 3 {
        s += (x[i + 1] * x[i + 3]).sin();
    }
    s
}
fn gapped_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in 1..x.len() - 3 {
        s += (x[i + 1] * x[i + 3]).sin();
    }
    s
}

/// A stencil indexed by an induction variable beside the counter (`j += 1`): a constant
/// range base (`j + 1`) beside an induction (it did not compile: the base's literal had no
/// type), and a load at `j - 1` (not a range base: checked per iteration).
#[differentiable]
fn shifted_pairs(x: &[f64]) -> f64 {
    let mut s = 0.0;
    let mut j = 2;
    for _k in 0..x.len() - 3 {
        s += x[j] * x[j + 1] - x[j - 1] * x[j];
        j += 1;
    }
    s
}
fn shifted_pairs_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    let mut j = 2;
    for _k in 0..x.len() - 3 {
        s += x[j] * x[j + 1] - x[j - 1] * x[j];
        j += 1;
    }
    s
}

#[test]
fn stencils_match_forward_mode() {
    for n in [2, 3, 4, 5, 6, 11] {
        let x = input(n);
        check_slice("stencil", &x, stencil::grad, stencil, stencil_ref);
        check_slice(
            "second_difference",
            &x,
            second_difference::grad,
            second_difference,
            second_difference_ref,
        );
        if n >= 3 {
            check_slice("gapped", &x, gapped::grad, gapped, gapped_ref);
            check_slice(
                "shifted_pairs",
                &x,
                shifted_pairs::grad,
                shifted_pairs,
                shifted_pairs_ref,
            );
        }
    }
    // lanes: each is what one cotangent gives, bit for bit, on a reused workspace too
    let x = input(9);
    let mut ws = Workspace::new();
    for _ in 0..2 {
        let mut d: Vec<Cotangents<f64, 2>> = vec![Cotangents([0.0; 2]); x.len()];
        second_difference::pullback_vec(&mut ws, &x, &mut d, Cotangents([1.0, -2.5]));
        for (k, ct) in [1.0, -2.5].into_iter().enumerate() {
            let mut one = vec![0.0; x.len()];
            second_difference::pullback(&mut ws, &x, &mut one, ct);
            for i in 0..x.len() {
                assert_eq!(d[i][k].to_bits(), one[i].to_bits(), "lane {k}, x[{i}]");
            }
        }
    }
}

/// In-place outputs written before the loop and read in it (its cotangent is an input of
/// the pullback, its adjoint a mix of the loop's reads and the output's cotangent).
#[differentiable]
fn scaled_sum(x: &[f64], out: &mut [f64]) -> f64 {
    out[0] = out[0] * x[0] + out[1];
    out[1] = x[1] * 2.0;
    let mut s = 0.0;
    for i in 0..x.len() {
        s += out[0] * x[i].sin() + out[1];
    }
    s * 0.25
}
fn scaled_sum_ref<T: Real>(x: &[T], out: &mut [T]) -> T {
    out[0] = out[0] * x[0] + out[1];
    out[1] = x[1] * 2.0;
    let mut s = T::zero();
    for i in 0..x.len() {
        s += out[0] * x[i].sin() + out[1];
    }
    s * 0.25
}

#[test]
fn fused_with_an_in_place_output() {
    let x = input(5);
    let out0 = [0.7, -0.4];
    let (dret, dout0) = (1.5, [0.3, -2.0]);
    let mut out = out0;
    let mut dx = vec![0.0; x.len()];
    let mut dout = dout0;
    let v = scaled_sum::pullback(
        &mut Workspace::new(),
        &x,
        &mut out,
        &mut dx,
        &mut dout,
        dret,
    );
    let mut plain = out0;
    assert_eq!(v, scaled_sum(&x, &mut plain));
    assert_eq!(out, plain);
    // the vector-Jacobian product as the gradient of dret·f + dout·out_final over (x, out0)
    let n = x.len();
    let all: Vec<f64> = x.iter().chain(&out0).copied().collect();
    let want = forward::gradient(
        |v: &[Dual<f64>]| {
            let mut o = [v[n], v[n + 1]];
            let r = scaled_sum_ref(&v[..n], &mut o);
            r * dret + o[0] * dout0[0] + o[1] * dout0[1]
        },
        &all,
    );
    let got: Vec<f64> = dx.iter().chain(&dout).copied().collect();
    check("scaled_sum vjp", &got, &want);
}

#[test]
fn fused_shapes_match_forward_mode() {
    for n in [2, 3, 9] {
        let x = input(n);
        check_slice("stencil", &x, stencil::grad, stencil, stencil_ref);
        check_slice(
            "dot_halves",
            &x[..n / 2 * 2],
            dot_halves::grad,
            dot_halves,
            dot_halves_ref,
        );
        check_slice("two_sums", &x, two_sums::grad, two_sums, two_sums_ref);
        check_slice("branchy", &x, branchy::grad, branchy, branchy_ref);
        check_slice(
            "inner_while",
            &x,
            inner_while::grad,
            inner_while,
            inner_while_ref,
        );
        check_slice(
            "log_of_sum",
            &x,
            log_of_sum::grad,
            log_of_sum,
            log_of_sum_ref,
        );
        check_slice(
            "double_sum",
            &x,
            double_sum::grad,
            double_sum,
            double_sum_ref,
        );
        check_slice("two_loops", &x, two_loops::grad, two_loops, two_loops_ref);
        let neg: Vec<f64> = x.iter().map(|v| -v).collect();
        check_slice("in_branch", &x, in_branch::grad, in_branch, in_branch_ref);
        check_slice(
            "in_branch (not taken)",
            &neg,
            in_branch::grad,
            in_branch,
            in_branch_ref,
        );
    }
    for n in [1, 2, 7] {
        let x = input(n);
        check_slice("mean_exp", &x, mean_exp::grad, mean_exp, mean_exp_ref);
    }
    for n in [4, 7, 13] {
        let x = input(n);
        check_slice(
            "softplus_mean",
            &x,
            softplus_mean::grad,
            softplus_mean,
            softplus_mean_ref,
        );
    }
    let x = input(8);
    check_slice(
        "local_array",
        &x,
        local_array::grad,
        local_array,
        local_array_ref,
    );
    check_slice(
        "written_after",
        &x,
        written_after::grad,
        written_after,
        written_after_ref,
    );
}

/// The pullback scales by its cotangent, several cotangents at once give, lane by lane, what
/// one gives bit for bit, and a reused workspace gives the same gradient again.
#[test]
fn fused_pullbacks_with_cotangent_lanes() {
    let x = input(9);
    let mut ws = Workspace::new();
    let mut d: Vec<Cotangents<f64, 2>> = vec![Cotangents([0.0; 2]); x.len()];
    let v = two_sums::pullback_vec(&mut ws, &x, &mut d, Cotangents([1.0, -2.5]));
    assert_eq!(v, two_sums(&x));
    for (k, ct) in [1.0, -2.5].into_iter().enumerate() {
        let mut one = vec![0.0; x.len()];
        two_sums::pullback(&mut ws, &x, &mut one, ct);
        for i in 0..x.len() {
            assert_eq!(d[i][k].to_bits(), one[i].to_bits(), "lane {k}, x[{i}]");
        }
        let g = forward::gradient(two_sums_ref, &x);
        let want: Vec<f64> = g.iter().map(|v| v * ct).collect();
        check("two_sums pullback", &one, &want);
    }
    let (mut g1, mut g2) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    softplus_mean::grad_with(&mut ws, &x, &mut g1);
    softplus_mean::grad_with(&mut ws, &x, &mut g2);
    assert_eq!(g1, g2);
}

/// Forward over reverse through fused loops: Hessian-vector products against forward mode's
/// Hessian (the Rosenbrock-like stencil's Hessian is tridiagonal).
#[test]
fn fused_hessian_vector_products() {
    let x = input(6);
    for (name, pb, reference) in [
        (
            "stencil",
            (|ws, x, d, c| _ = stencil::pullback(ws, x, d, c))
                as fn(&mut Workspace<Dual<f64>>, &[Dual<f64>], &mut [Dual<f64>], Dual<f64>),
            stencil_ref::<forward::Dual2> as fn(&[forward::Dual2]) -> forward::Dual2,
        ),
        (
            "mean_exp",
            |ws, x, d, c| _ = mean_exp::pullback(ws, x, d, c),
            mean_exp_ref::<forward::Dual2>,
        ),
        (
            "two_sums",
            |ws, x, d, c| _ = two_sums::pullback(ws, x, d, c),
            two_sums_ref::<forward::Dual2>,
        ),
    ] {
        let h = forward::hessian(reference, &x);
        for dir in 0..x.len() {
            let xd: Vec<Dual<f64>> = x
                .iter()
                .enumerate()
                .map(|(i, &v)| Dual::new(v, if i == dir { 1.0 } else { 0.0 }))
                .collect();
            let mut d = vec![Dual::new(0.0, 0.0); x.len()];
            pb(&mut Workspace::new(), &xd, &mut d, Dual::new(1.0, 0.0));
            let got: Vec<f64> = d.iter().map(|v| v.eps).collect();
            let want: Vec<f64> = (0..x.len()).map(|i| h[i][dir]).collect();
            check(name, &got, &want);
        }
    }
}
