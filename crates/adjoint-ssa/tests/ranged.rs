//! Reversed counted loops that index slices by `base + counter` without per-iteration checks
//! (the range is checked once on entry; see `Plan::ranged`): bases on either side of the `+`,
//! from an outer counter (`i * n`), constant offsets, loops starting above zero, empty loops,
//! local arrays, stores into `&mut` outputs, and accesses under a branch (checked as before).
//! Gradients against forward mode over generic twins of the functions.

#![allow(clippy::needless_range_loop, clippy::explicit_counter_loop)]
// `j += 1` beside the counter: a shape under test
// The generated unchecked accesses do not trip a user's `forbid(unsafe_code)`.
#![forbid(unsafe_code)]

use adjoint_core::forward::{self, Dual};
use adjoint_core::Real;
use adjoint_ssa::{differentiable, Workspace};

mod common;
use common::check;

const W: usize = 8;

#[differentiable]
fn mix(m: &[f64], v: &[f64], n: usize) -> f64 {
    let rows = m.len() / n;
    let mut s = 0.0;
    let mut buf = [0.0; W];
    for i in 0..rows {
        let mut acc = 0.0;
        for j in 1..n {
            acc += m[i * n + j] * v[j - 1];
            acc += m[j + i * n] * v[j];
        }
        for j in i..i {
            acc += v[j];
        }
        for j in 0..W.min(n) {
            buf[j] = acc * v[j] + buf[j] * 0.5;
        }
        for j in 0..n - 1 {
            s += v[j + 1] * buf[j % W];
            if v[j] > 0.0 {
                s += m[i * n + j].sin();
            }
        }
    }
    for j in 0..W {
        s += buf[j] * buf[j];
    }
    s
}

fn mix_ref<T: Real>(m: &[T], v: &[T], n: usize) -> T {
    let rows = m.len() / n;
    let mut s = T::zero();
    let mut buf = [T::zero(); W];
    for i in 0..rows {
        let mut acc = T::zero();
        for j in 1..n {
            acc += m[i * n + j] * v[j - 1];
            acc += m[j + i * n] * v[j];
        }
        for j in 0..W.min(n) {
            buf[j] = acc * v[j] + buf[j] * 0.5;
        }
        for j in 0..n - 1 {
            s += v[j + 1] * buf[j % W];
            if v[j].value() > 0.0 {
                s += m[i * n + j].sin();
            }
        }
    }
    for j in 0..W {
        s += buf[j] * buf[j];
    }
    s
}

#[test]
fn ranged_loads_and_local_stores() {
    for (rows, n) in [(3, 5), (2, 1), (4, 10), (1, 2)] {
        let m: Vec<f64> = (0..rows * n)
            .map(|k| ((k * 7 % 11) as f64 - 5.0) * 0.1)
            .collect();
        let v: Vec<f64> = (0..n).map(|k| ((k * 5 % 7) as f64 - 3.0) * 0.2).collect();
        let (mut dm, mut dv) = (vec![0.0; m.len()], vec![0.0; n]);
        let val = mix::grad(&m, &v, n, &mut dm, &mut dv);
        assert_eq!(val, mix(&m, &v, n));
        let mv: Vec<f64> = m.iter().chain(&v).copied().collect();
        let want = forward::gradient(|x| mix_ref(&x[..m.len()], &x[m.len()..], n), &mv);
        check(&format!("mix {rows}×{n} dm"), &dm, &want[..m.len()]);
        check(&format!("mix {rows}×{n} dv"), &dv, &want[m.len()..]);
    }
}

/// Stores into an in-place output at `i * n + j`: the reverse sweep reads and clears the
/// output's cotangent there without per-iteration checks.
#[differentiable]
fn scale_rows(m: &[f64], v: &[f64], out: &mut [f64]) {
    let n = v.len();
    for i in 0..out.len() / n {
        for j in 0..n {
            out[i * n + j] = m[i * n + j] * v[j] + out[i * n + j] * 0.5;
        }
    }
}

fn scale_rows_ref<T: Real>(m: &[T], v: &[T], out: &mut [T]) {
    let n = v.len();
    for i in 0..out.len() / n {
        for j in 0..n {
            out[i * n + j] = m[i * n + j] * v[j] + out[i * n + j] * 0.5;
        }
    }
}

#[test]
fn ranged_stores_into_an_output() {
    let (rows, n) = (3, 4);
    let m: Vec<f64> = (0..rows * n).map(|k| (k as f64).sin()).collect();
    let v: Vec<f64> = (0..n).map(|k| (k as f64 + 0.5).cos()).collect();
    let out0: Vec<f64> = (0..rows * n).map(|k| 0.1 * k as f64).collect();
    let c: Vec<f64> = (0..rows * n).map(|k| 1.0 - 0.05 * k as f64).collect();
    let mut out = out0.clone();
    let (mut dm, mut dv, mut dout) = (vec![0.0; m.len()], vec![0.0; n], c.clone());
    scale_rows::pullback(
        &mut Workspace::new(),
        &m,
        &v,
        &mut out,
        &mut dm,
        &mut dv,
        &mut dout,
    );
    let mut plain = out0.clone();
    scale_rows(&m, &v, &mut plain);
    assert_eq!(out, plain);
    // forward mode of c · out(m, v, out0)
    let all: Vec<f64> = m.iter().chain(&v).chain(&out0).copied().collect();
    let (km, kv) = (m.len(), m.len() + n);
    let want = forward::gradient(
        |x: &[Dual<f64>]| {
            let mut o = x[kv..].to_vec();
            scale_rows_ref(&x[..km], &x[km..kv], &mut o);
            o.iter()
                .zip(&c)
                .fold(Dual::constant(0.0), |s, (o, c)| s + *o * *c)
        },
        &all,
    );
    check("scale_rows dm", &dm, &want[..km]);
    check("scale_rows dv", &dv, &want[km..kv]);
    check("scale_rows dout", &dout, &want[kv..]);
}

/// A triangular product as ADBench's GMM writes it: `l[li]` with `li += 1` beside the counter
/// `r` (an induction: index `li_entry − (i + 1) + r`, below zero before the counter is added
/// when `i + 1 > li_entry`, so the base wraps).
#[differentiable]
fn tri(l: &[f64], x: &[f64]) -> f64 {
    let d = x.len();
    let mut q = [0.0; W];
    let mut li = 0;
    for i in 0..d {
        for r in i + 1..d {
            q[r] += l[li] * x[i];
            li += 1;
        }
    }
    let mut s = 0.0;
    for r in 0..d {
        s += q[r] * q[r] * l[r];
    }
    s
}

fn tri_ref<T: Real>(l: &[T], x: &[T]) -> T {
    let d = x.len();
    let mut q = [T::zero(); W];
    let mut li = 0;
    for i in 0..d {
        for r in i + 1..d {
            q[r] += l[li] * x[i];
            li += 1;
        }
    }
    let mut s = T::zero();
    for r in 0..d {
        s += q[r] * q[r] * l[r];
    }
    s
}

#[test]
fn ranged_induction_indices() {
    for d in [1, 2, 5, 8] {
        let nl = (d * (d - 1) / 2).max(d);
        let l: Vec<f64> = (0..nl).map(|k| 0.3 + 0.1 * (k as f64).cos()).collect();
        let x: Vec<f64> = (0..d).map(|k| 1.0 - 0.2 * k as f64).collect();
        let (mut dl, mut dx) = (vec![0.0; nl], vec![0.0; d]);
        let v = tri::grad(&l, &x, &mut dl, &mut dx);
        assert_eq!(v, tri(&l, &x));
        let lx: Vec<f64> = l.iter().chain(&x).copied().collect();
        let want = forward::gradient(|z| tri_ref(&z[..nl], &z[nl..]), &lx);
        check(&format!("tri d{d} dl"), &dl, &want[..nl]);
        check(&format!("tri d{d} dx"), &dx, &want[nl..]);
    }
}

/// An induction beside the counter read at a constant offset (`x[j + 1]`) in a loop that is
/// not fused (its sum goes through `ln`): the reverse sweep's range base `1 + j₀ − start` did
/// not compile before (the literal `1` had no type for `wrapping_add`).
#[differentiable]
fn shifted_log(x: &[f64]) -> f64 {
    let mut s = 1.0;
    let mut j = 1;
    for _k in 0..x.len() - 2 {
        let t = x[j] - x[j + 1] * x[j - 1];
        s += t * t;
        j += 1;
    }
    s.ln()
}

fn shifted_log_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::one();
    let mut j = 1;
    for _k in 0..x.len() - 2 {
        let t = x[j] - x[j + 1] * x[j - 1];
        s += t * t;
        j += 1;
    }
    s.ln()
}

#[test]
fn ranged_induction_at_a_constant_offset() {
    for n in [2, 3, 7] {
        let x: Vec<f64> = (0..n).map(|k| 0.4 + 0.3 * (k as f64).sin()).collect();
        let mut g = vec![0.0; n];
        let v = shifted_log::grad(&x, &mut g);
        assert_eq!(v, shifted_log(&x));
        check(
            &format!("shifted_log n{n}"),
            &g,
            &forward::gradient(|z| shifted_log_ref(z), &x),
        );
    }
}

/// The check made on entering a reversed loop is what makes its unchecked accesses sound:
/// it panics (never indexes out of bounds) when a range does not fit.
#[test]
#[should_panic(expected = "beyond what the forward sweep indexed")]
fn the_entry_check_panics_on_a_range_that_does_not_fit() {
    adjoint_ssa::__private::check_range(6, 0, 5, 10);
}

#[test]
#[should_panic(expected = "beyond what the forward sweep indexed")]
fn the_entry_check_catches_overflow() {
    adjoint_ssa::__private::check_range(usize::MAX, 0, 1, usize::MAX);
}

#[test]
fn the_entry_check_accepts_the_exact_range() {
    adjoint_ssa::__private::check_range(5, 0, 5, 10);
    adjoint_ssa::__private::check_range(0, 0, 0, 0);
    // a base below zero (wrapping) whose range starts at an index ≥ 0
    adjoint_ssa::__private::check_range(usize::MAX - 2, 3, 7, 4);
}

/// Rows `p[i·n .. i·n + n]` times the vector `p[x .. x + n]` of one packed slice: the reversed
/// inner loop updates `d_p` at two bases (its bases pass through `black_box`, so LLVM checks
/// their overlap on each entry). The vector lies after the rows, inside them (so it overlaps
/// some rows at run time) or is the first row itself.
#[differentiable]
fn packed_rows(p: &[f64], rows: usize, n: usize, x: usize) -> f64 {
    let mut s = 0.0;
    for i in 0..rows {
        let mut a = p[x];
        for j in 0..n {
            a += p[i * n + j] * p[x + j];
        }
        s += a * a;
    }
    s
}

fn packed_rows_ref<T: Real>(p: &[T], rows: usize, n: usize, x: usize) -> T {
    let mut s = T::zero();
    for i in 0..rows {
        let mut a = p[x];
        for j in 0..n {
            a += p[i * n + j] * p[x + j];
        }
        s += a * a;
    }
    s
}

#[test]
fn two_bases_of_one_slice_disjoint_or_overlapping() {
    let (rows, n) = (5, 9);
    let p: Vec<f64> = (0..rows * n + n)
        .map(|k| ((k * 7 % 13) as f64 - 6.0) * 0.05)
        .collect();
    for x in [rows * n, n + 3, 2 * n, 0] {
        let mut g = vec![0.0; p.len()];
        let val = packed_rows::grad(&p, rows, n, x, &mut g);
        assert_eq!(val, packed_rows(&p, rows, n, x));
        let want = forward::gradient(|q: &[Dual<f64>]| packed_rows_ref(q, rows, n, x), &p);
        check(&format!("packed rows, vector at {x}"), &g, &want);
    }
}

/// `x[o + j]` for `j` in `0..n`: the forward sweep of the gradient checks `o + n <= x.len()`
/// once on entering the loop and then indexes without checks.
#[differentiable]
fn window(x: &[f64], o: usize, n: usize) -> f64 {
    let mut s = 0.0;
    for j in 0..n {
        s += x[o + j] * x[o + j];
    }
    s
}

#[test]
fn forward_loops_check_their_range_on_entry() {
    let x = [0.5, -1.0, 2.0, 3.0];
    for (o, n) in [(0, 4), (1, 3), (3, 1), (4, 0), (100, 0)] {
        let mut g = [0.0; 4];
        let v = window::grad(&x, o, n, &mut g);
        assert_eq!(v, window(&x, o, n));
        let want: Vec<f64> = (0..4)
            .map(|i| if i >= o && i < o + n { 2.0 * x[i] } else { 0.0 })
            .collect();
        check(&format!("window {o} {n}"), &g, &want);
    }
}

#[test]
#[should_panic(expected = "a loop indexes 3 elements from 2 of a slice of length 4")]
fn a_forward_range_past_the_end_panics_on_entry() {
    let mut g = [0.0; 4];
    window::grad(&[0.5, -1.0, 2.0, 3.0], 2, 3, &mut g);
}

/// A base so large that `base + n` overflows: the entry check reports it (the function itself
/// panics at `x[o + j]`) instead of wrapping around into the slice.
#[test]
#[should_panic(expected = "a loop indexes 2 elements from")]
fn a_forward_range_whose_end_overflows_panics_on_entry() {
    let mut g = [0.0; 4];
    window::grad(&[0.5, -1.0, 2.0, 3.0], usize::MAX, 2, &mut g);
}
