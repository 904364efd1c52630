//! Loop shapes at the edge of the counted-loop detection: a `while` whose index steps by two,
//! a bound changed inside the body, a shadowed index, a `for` over a range whose bound is a
//! loop-carried value, and a `step_by`. Each gradient against forward mode over the untouched
//! user function written generically (not the macro's own `primal`).

#![allow(clippy::needless_range_loop, clippy::explicit_counter_loop)]

use adjoint_core::forward::{self, Dual};
use adjoint_core::Real;
use adjoint_ssa::differentiable;

mod common;
use common::{check, check_slice};

#[differentiable]
fn step_two(x: &[f64]) -> f64 {
    let mut s = 0.0;
    let mut i = 0;
    while i < x.len() {
        s += x[i] * x[i].sin();
        i += 2;
    }
    s
}
fn step_two_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    let mut i = 0;
    while i < x.len() {
        s += x[i] * x[i].sin();
        i += 2;
    }
    s
}

#[differentiable]
fn moving_bound(x: &[f64]) -> f64 {
    let mut s = 0.0;
    let mut n = x.len();
    let mut i = 0;
    while i < n {
        s = s * 0.5 + x[i].exp();
        if x[i] > 0.0 {
            n -= 1;
        }
        i += 1;
    }
    s
}
fn moving_bound_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    let mut n = x.len();
    let mut i = 0;
    while i < n {
        s = s * 0.5 + x[i].exp();
        if x[i] > 0.0 {
            n -= 1;
        }
        i += 1;
    }
    s
}

#[differentiable]
fn shadowed(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        let i = x.len() - 1 - i;
        s = s * x[i] + 1.0;
    }
    for i in 1..x.len() {
        let i = i - 1;
        s += x[i] * x[i + 1];
    }
    s
}
fn shadowed_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in 0..x.len() {
        let i = x.len() - 1 - i;
        s = s * x[i] + 1.0;
    }
    for i in 1..x.len() {
        let i = i - 1;
        s += x[i] * x[i + 1];
    }
    s
}

#[differentiable]
fn carried_bound(x: &[f64]) -> f64 {
    let mut s = 0.0;
    let mut m = 1;
    for _r in 0..3 {
        for i in 0..m {
            s += x[i] * s.cos();
        }
        m += 1;
    }
    s
}
fn carried_bound_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    let mut m = 1;
    for _r in 0..3 {
        for i in 0..m {
            s += x[i] * s.cos();
        }
        m += 1;
    }
    s
}

#[test]
fn loop_shapes_match_forward_mode_on_the_user_function() {
    for x in [
        vec![0.5, -0.25, 0.75, 0.1, 0.3],
        vec![-0.5, 0.25, -0.75, 0.9, 0.3, 0.2],
        vec![0.4, 0.6, 0.8],
    ] {
        check_slice("step_two", &x, step_two::grad, step_two, step_two_ref);
        check_slice(
            "moving_bound",
            &x,
            moving_bound::grad,
            moving_bound,
            moving_bound_ref,
        );
        check_slice("shadowed", &x, shadowed::grad, shadowed, shadowed_ref);
        check_slice(
            "carried_bound",
            &x,
            carried_bound::grad,
            carried_bound,
            carried_bound_ref,
        );
    }
}

#[differentiable]
fn stepped(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in (0..x.len()).step_by(2) {
        s = s * x[i] + x[i].cos();
    }
    for i in (0..x.len()).rev() {
        s = s * 0.5 + x[i] * s.sin();
    }
    s
}
fn stepped_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in (0..x.len()).step_by(2) {
        s = s * x[i] + x[i].cos();
    }
    for i in (0..x.len()).rev() {
        s = s * 0.5 + x[i] * s.sin();
    }
    s
}

#[test]
fn step_by_and_rev_ranges() {
    for x in [vec![0.5, -0.25, 0.75, 0.1, 0.3], vec![0.4, 0.6]] {
        check_slice("stepped", &x, stepped::grad, stepped, stepped_ref);
    }
}

/// ADBench GMM's triangular product with the row's value read once (`let xi = …` before the
/// inner loop): the generated code records `xi` once per row (see the syntax crate's
/// `loop_invariant_values_are_recorded_once_per_loop_run`); the gradient is unchanged.
#[differentiable]
fn triangular(x: &[f64], l: &[f64]) -> f64 {
    let d = x.len();
    let mut q = [0.0; 16];
    for j in 0..d {
        q[j] = x[j].exp();
    }
    for i in 0..d {
        let xi = q[i] * x[i];
        let base = i * (2 * d - i - 1) / 2;
        for r in i + 1..d {
            q[r] += l[base + r - i - 1] * xi;
        }
    }
    let mut s = 0.0;
    for j in 0..d {
        s += q[j] * q[j];
    }
    s
}
fn triangular_ref<T: Real>(x: &[T], l: &[T]) -> T {
    let d = x.len();
    let mut q = vec![T::zero(); d];
    for j in 0..d {
        q[j] = x[j].exp();
    }
    let mut li = 0;
    for i in 0..d {
        for r in i + 1..d {
            let qi = q[i];
            q[r] += l[li] * qi * x[i];
            li += 1;
        }
    }
    let mut s = T::zero();
    for j in 0..d {
        s += q[j] * q[j];
    }
    s
}

#[test]
fn triangular_product_with_a_hoisted_row_value() {
    for d in [1usize, 2, 5, 9] {
        let x: Vec<f64> = (0..d).map(|i| 0.3 * (i as f64 * 0.7).sin()).collect();
        let l: Vec<f64> = (0..d * (d - 1) / 2)
            .map(|i| (i as f64 * 0.37).cos())
            .collect();
        let (mut gx, mut gl) = (vec![0.0; d], vec![0.0; l.len()]);
        let v = triangular::grad(&x, &l, &mut gx, &mut gl);
        assert!((v - triangular(&x, &l)).abs() <= 1e-12 * v.abs());
        let mut all = x.clone();
        all.extend(&l);
        let want = forward::gradient(|z: &[Dual<f64>]| triangular_ref(&z[..d], &z[d..]), &all);
        check("triangular x", &gx, &want[..d]);
        check("triangular l", &gl, &want[d..]);
    }
}

/// Integers stepping by a constant beside a loop's counter (`li += 1`, `m -= 2`, a signed
/// one): the reverse sweep recomputes them from the replayed counter; gradients against
/// forward mode over the user function.
#[differentiable]
fn inductions(x: &[f64], l: &[f64]) -> f64 {
    let d = x.len();
    let mut s = 0.0;
    let mut li = 0;
    for i in 0..d {
        let mut m = 2 * d;
        let mut k: i64 = -3;
        for r in i + 1..d {
            s += l[li] * x[i] * x[r] + x[m / 2 - 1] * (k as f64);
            li += 1;
            m -= 2;
            k += 2;
        }
    }
    s
}
fn inductions_ref<T: Real>(x: &[T], l: &[T]) -> T {
    let d = x.len();
    let mut s = T::zero();
    let mut li = 0;
    for i in 0..d {
        let mut m = 2 * d;
        let mut k: i64 = -3;
        for r in i + 1..d {
            s += l[li] * x[i] * x[r] + x[m / 2 - 1] * (k as f64);
            li += 1;
            m -= 2;
            k += 2;
        }
    }
    s
}

#[test]
fn induction_variables_replayed() {
    for d in [1usize, 2, 4, 7] {
        let x: Vec<f64> = (0..d).map(|i| 0.4 * (i as f64 * 0.9).cos()).collect();
        let l: Vec<f64> = (0..d * (d - 1) / 2)
            .map(|i| (i as f64 * 0.23).sin())
            .collect();
        let (mut gx, mut gl) = (vec![0.0; d], vec![0.0; l.len()]);
        let v = inductions::grad(&x, &l, &mut gx, &mut gl);
        assert_eq!(v, inductions(&x, &l));
        let mut all = x.clone();
        all.extend(&l);
        let want = forward::gradient(|z: &[Dual<f64>]| inductions_ref(&z[..d], &z[d..]), &all);
        check("inductions x", &gx, &want[..d]);
        check("inductions l", &gl, &want[d..]);
    }
}

// Values the reverse sweep recomputes instead of popping: cheap arithmetic on loads (a
// stencil, whose two adjoint updates of `d_x` per iteration must not be merged into one
// overlapping vector access), and loads from a local array nothing writes afterwards. The
// result is `s²`, so the loop runs reversed (returning `s`, it would be a fused accumulation
// loop: `tests/fused.rs`).
#[differentiable]
fn stencil(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() - 1 {
        let t = x[i + 1] - x[i] * x[i];
        let u = 1.0 - x[i];
        s += t * t * 100.0 + u * u;
    }
    s * s
}
fn stencil_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in 0..x.len() - 1 {
        let t = x[i + 1] - x[i] * x[i];
        let u = T::from(1.0) - x[i]; // generic code cannot write `1.0 - x` (see `Real`)
        s += t * t * 100.0 + u * u;
    }
    s * s
}

#[differentiable]
fn settled(x: &[f64]) -> f64 {
    let n = x.len();
    let mut h = [0.0; 8];
    for i in 0..n {
        h[i] = (x[i] * 0.7).tanh();
    }
    let mut s = 0.0;
    for i in 0..n {
        for j in 0..n {
            s += x[j] * h[j] * h[i];
        }
        h[i] *= 0.5; // written after the loads of later rows: those are pushed
    }
    s
}
fn settled_ref<T: Real>(x: &[T]) -> T {
    let n = x.len();
    let mut h = [T::zero(); 8];
    for i in 0..n {
        h[i] = (x[i] * 0.7).tanh();
    }
    let mut s = T::zero();
    for i in 0..n {
        for j in 0..n {
            s += x[j] * h[j] * h[i];
        }
        h[i] *= 0.5;
    }
    s
}

#[differentiable]
fn settled_then_read(x: &[f64]) -> f64 {
    let n = x.len();
    let mut h = [0.0; 8];
    for i in 0..n {
        h[i] = (x[i] * 0.7).tanh();
    }
    let mut s = 0.0;
    for i in 0..n {
        for j in 0..n {
            s += x[j] * h[j] * h[i];
        }
    }
    s
}
fn settled_then_read_ref<T: Real>(x: &[T]) -> T {
    let n = x.len();
    let mut h = [T::zero(); 8];
    for i in 0..n {
        h[i] = (x[i] * 0.7).tanh();
    }
    let mut s = T::zero();
    for i in 0..n {
        for j in 0..n {
            s += x[j] * h[j] * h[i];
        }
    }
    s
}

#[test]
fn recomputed_values_match_forward_mode() {
    for x in [vec![0.5, -0.25, 0.75, 0.1, 0.3], vec![0.4, 0.6], vec![1.5]] {
        check_slice("stencil", &x, stencil::grad, stencil, stencil_ref);
        check_slice("settled", &x, settled::grad, settled, settled_ref);
        check_slice(
            "settled_then_read",
            &x,
            settled_then_read::grad,
            settled_then_read,
            settled_then_read_ref,
        );
    }
}

#[differentiable]
fn ignores_some(x: &[f64], y: f64, z: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..x.len() {
        s += x[i] * y;
    }
    s + z * 0.0
}

/// Adjoint locals start at −0.0 (the identity of `+`, so LLVM folds the first accumulation);
/// a gradient that receives nothing, or exact zeros, is still +0.0 in the caller's buffers.
#[test]
fn zero_gradients_are_positive_zero() {
    let x = [0.5, -0.25, 0.75];
    let mut g = vec![0.0; 3];
    let (mut dy, mut dz) = (0.0, 0.0);
    ignores_some::grad(&x, 0.0, 2.0, &mut g, &mut dy, &mut dz);
    for v in g.iter().chain([&dz]) {
        assert_eq!(v.to_bits(), 0.0f64.to_bits(), "{g:?} {dy} {dz}");
    }
    assert_eq!(dy, 1.0); // Σ x
}

/// A local array's cotangent is cleared to −0.0 where the reverse sweep passes a store (so the
/// clear and the next load's accumulation, `a[i] += …`, fold into one assignment); an element
/// overwritten by a constant still gives its input an exact +0.0 in the caller's buffer.
#[differentiable]
fn overwritten_local(x: &[f64]) -> f64 {
    let mut a = [0.0; 4];
    for i in 0..4 {
        a[i] = x[i] * x[i];
    }
    for i in 0..4 {
        a[i] += a[i] * x[i];
    }
    a[3] = 2.0;
    let mut s = 0.0;
    for i in 0..4 {
        s += a[i];
    }
    s
}

#[test]
fn local_array_cotangents_fold_and_zeros_stay_positive() {
    let x = [0.5, -0.25, 0.0, 0.75];
    let mut g = vec![0.0; 4];
    let v = overwritten_local::grad(&x, &mut g);
    assert_eq!(v, overwritten_local(&x));
    // d/dx (x² + x³) = 2x + 3x² for the three summed elements; x[3] is overwritten
    let want: Vec<f64> = x[..3].iter().map(|&t| 2.0 * t + 3.0 * t * t).collect();
    check("overwritten_local", &g[..3], &want);
    assert_eq!(g[3].to_bits(), 0.0f64.to_bits(), "{g:?}");
    assert_eq!(g[2].to_bits(), 0.0f64.to_bits(), "{g:?}");
}

/// The triangular product in ADBench's own spelling: `xc[i]` loaded inside the inner loop. Its
/// adjoint is added to `dxc[i]` once per row, in the row's last reversed iteration (rows with no
/// iteration add nothing); gradients against forward mode, including `d = 1` (no iteration).
#[differentiable]
fn triangular_inner(x: &[f64], l: &[f64]) -> f64 {
    let d = x.len();
    let mut xc = [0.0; 16];
    let mut q = [0.0; 16];
    for j in 0..d {
        xc[j] = x[j].sin();
        q[j] = x[j].exp() * xc[j];
    }
    let mut li = 0;
    for i in 0..d {
        for r in i + 1..d {
            q[r] += l[li] * xc[i] * x[r];
            li += 1;
        }
    }
    let mut s = 0.0;
    for j in 0..d {
        s += q[j] * q[j];
    }
    s
}
fn triangular_inner_ref<T: Real>(x: &[T], l: &[T]) -> T {
    let d = x.len();
    let xc: Vec<T> = x.iter().map(|v| v.sin()).collect();
    let mut q: Vec<T> = (0..d).map(|j| x[j].exp() * xc[j]).collect();
    let mut li = 0;
    for i in 0..d {
        for r in i + 1..d {
            q[r] += l[li] * xc[i] * x[r];
            li += 1;
        }
    }
    q.iter().fold(T::zero(), |s, &v| s + v * v)
}

#[test]
fn triangular_product_with_the_row_value_loaded_inside() {
    for d in [1usize, 2, 5, 9] {
        let x: Vec<f64> = (0..d).map(|i| 0.3 * (i as f64 * 0.7).sin() + 0.1).collect();
        let l: Vec<f64> = (0..d * (d - 1) / 2)
            .map(|i| (i as f64 * 0.37).cos())
            .collect();
        let (mut gx, mut gl) = (vec![0.0; d], vec![0.0; l.len()]);
        let v = triangular_inner::grad(&x, &l, &mut gx, &mut gl);
        assert_eq!(v, triangular_inner(&x, &l));
        let mut all = x.clone();
        all.extend(&l);
        let want = forward::gradient(
            |z: &[Dual<f64>]| triangular_inner_ref(&z[..d], &z[d..]),
            &all,
        );
        check("triangular_inner x", &gx, &want[..d]);
        check("triangular_inner l", &gl, &want[d..]);
    }
}

/// A `for` counter with unsuffixed literal bounds, used as an index only after an inner loop:
/// the index makes it a `usize` (it was typed `i32`, and the generated code did not compile).
/// Found by the compiled random programs (`tests/random_programs.rs`).
#[differentiable]
fn index_after_inner_loop(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for i in 0..2 {
        let mut c = 0;
        while c < 2 {
            c += 1;
            s += 0.5 * x[2];
        }
        if s > 1.0 {
            s += x[i] * x[i];
        } else {
            s += x[i];
        }
    }
    s
}
fn index_after_inner_loop_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for i in 0..2 {
        let mut c = 0;
        while c < 2 {
            c += 1;
            s += x[2] * 0.5;
        }
        if s.value() > 1.0 {
            s += x[i] * x[i];
        } else {
            s += x[i];
        }
    }
    s
}

#[test]
fn loop_counter_typed_by_a_later_index() {
    for x in [[0.3, -0.7, 0.4], [1.5, 2.0, 0.9]] {
        check_slice(
            "index after inner loop",
            &x,
            index_after_inner_loop::grad,
            index_after_inner_loop,
            |v| index_after_inner_loop_ref(v),
        );
    }
}

// Ranges of signed and typed integers taken backwards, stepped, skipped and zipped: the loop
// counts in `usize` while each item keeps the range's own type. (`(-3..2).rev()` once counted
// in `usize`, where −3 wrapped: the loop ran zero times and the value and gradient were 0 in a
// release build; a typed range such as `(0i64..5).rev()` did not compile.)
#[differentiable]
fn signed_ranges(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for k in (-3..2).rev() {
        s = s * 0.5 + x[(k + 3) as usize] * k as f64;
    }
    for k in (-2..=1).rev() {
        s += x[(k + 2) as usize].sin() * k as f64;
    }
    for k in (-4..1).step_by(2) {
        s += x[(k + 4) as usize] * x[0] * k as f64;
    }
    for k in (-3..2).skip(1) {
        s += x[(k + 3) as usize].cos() * k as f64;
    }
    for k in (-3..2).take(2) {
        s += x[(k + 4) as usize] * (k * k) as f64;
    }
    for (i, k) in (-3..0).rev().enumerate() {
        s += x[i] * x[i + 1] * k as f64;
    }
    for (v, k) in x.iter().zip(-2..3) {
        s += v * k as f64;
    }
    s
}
fn signed_ranges_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for k in (-3..2).rev() {
        s = s * 0.5 + x[(k + 3) as usize] * k as f64;
    }
    for k in (-2..=1).rev() {
        s += x[(k + 2) as usize].sin() * k as f64;
    }
    for k in (-4..1).step_by(2) {
        s += x[(k + 4) as usize] * x[0] * k as f64;
    }
    for k in (-3..2).skip(1) {
        s += x[(k + 3) as usize].cos() * k as f64;
    }
    for k in (-3..2).take(2) {
        s += x[(k + 4) as usize] * (k * k) as f64;
    }
    for (i, k) in (-3..0).rev().enumerate() {
        s += x[i] * x[i + 1] * k as f64;
    }
    for (&v, k) in x.iter().zip(-2..3) {
        s += v * k as f64;
    }
    s
}

#[differentiable]
fn typed_ranges(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for k in (0i64..5).rev() {
        s = s * 0.5 + x[k as usize] * (k - 2) as f64;
    }
    for k in (-6..2i32).step_by(2).rev() {
        s += x[(k + 6) as usize / 2] * k as f64;
    }
    for k in (0u8..4).rev() {
        s += x[k as usize].exp() * f64::from(k);
    }
    for k in (-5i16..-1).rev().step_by(2) {
        s += x[(k + 5) as usize] * x[4] * f64::from(k);
    }
    s
}
fn typed_ranges_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for k in (0i64..5).rev() {
        s = s * 0.5 + x[k as usize] * (k - 2) as f64;
    }
    for k in (-6..2i32).step_by(2).rev() {
        s += x[(k + 6) as usize / 2] * k as f64;
    }
    for k in (0u8..4).rev() {
        s += x[k as usize].exp() * f64::from(k);
    }
    for k in (-5i16..-1).rev().step_by(2) {
        s += x[(k + 5) as usize] * x[4] * f64::from(k);
    }
    s
}

#[test]
fn signed_and_typed_ranges_backwards_and_stepped() {
    let x = [0.3, -0.7, 1.1, 0.4, -0.2];
    check_slice(
        "signed",
        &x,
        signed_ranges::grad,
        signed_ranges,
        signed_ranges_ref,
    );
    check_slice(
        "typed",
        &x,
        typed_ranges::grad,
        typed_ranges,
        typed_ranges_ref,
    );
    // Not 0 (what the wrapped count gave): the loops ran.
    let mut g = [0.0; 5];
    assert!(signed_ranges::grad(&x, &mut g).abs() > 0.1);
    assert!(g.iter().all(|&v| v != 0.0), "{g:?}");
}

// `skip` and `take` after any adapter: `.enumerate().skip(1)` numbers from the start
// (indices begin at 1), `skip` past the end leaves nothing.
#[differentiable]
fn skipped(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for (i, v) in x.iter().enumerate().skip(1) {
        s += v * v * i as f64;
    }
    for (a, b) in x.iter().zip(x.iter().skip(1)).take(3) {
        s += a * b;
    }
    for v in x.iter().step_by(2).skip(1) {
        s += v.sin();
    }
    for (i, v) in x.iter().rev().enumerate().skip(2).take(2) {
        s += v.exp() * i as f64;
    }
    for (i, v) in x.iter().enumerate().skip(9) {
        s += v * i as f64;
    }
    s
}
fn skipped_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for (i, &v) in x.iter().enumerate().skip(1) {
        s += v * v * i as f64;
    }
    for (&a, &b) in x.iter().zip(x.iter().skip(1)).take(3) {
        s += a * b;
    }
    for v in x.iter().step_by(2).skip(1) {
        s += v.sin();
    }
    for (i, v) in x.iter().rev().enumerate().skip(2).take(2) {
        s += v.exp() * i as f64;
    }
    for (i, &v) in x.iter().enumerate().skip(9) {
        s += v * i as f64;
    }
    s
}

#[test]
fn skip_and_take_after_any_adapter() {
    let x = [0.3, -0.7, 1.1, 0.4, -0.2];
    check_slice("skipped", &x, skipped::grad, skipped, skipped_ref);
}

// Ranges of narrow signed integers with more items than the type's maximum: the length and
// the items are computed in `i64` (in the range's own type they overflowed: a panic in debug
// builds, and about 2⁶⁴ iterations in release ones when the type was fixed late).
#[differentiable]
fn wide_ranges(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for k in (-100i8..100).rev() {
        s += x[0] * f64::from(k);
    }
    let n = 100;
    let lo: i8 = -100;
    for k in (lo..n).rev().step_by(7) {
        s += x[1] * f64::from(k);
    }
    for k in (-100i8..100).skip(150) {
        s += x[2] * f64::from(k) * x[0];
    }
    for k in (-30000i16..30000).step_by(1000).rev() {
        s += x[3].sin() * f64::from(k);
    }
    s
}
fn wide_ranges_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for k in (-100i8..100).rev() {
        s += x[0] * f64::from(k);
    }
    let n = 100;
    let lo: i8 = -100;
    for k in (lo..n).rev().step_by(7) {
        s += x[1] * f64::from(k);
    }
    for k in (-100i8..100).skip(150) {
        s += x[2] * f64::from(k) * x[0];
    }
    for k in (-30000i16..30000).step_by(1000).rev() {
        s += x[3].sin() * f64::from(k);
    }
    s
}

#[test]
fn narrow_ranges_longer_than_their_type() {
    let x = [0.3, -0.7, 1.1, 0.4, -0.2];
    check_slice("wide", &x, wide_ranges::grad, wide_ranges, wide_ranges_ref);
}

// Inclusive ranges that end at their type's maximum (`0u8..=255`): the end one past it is
// computed in `i64` (in the range's own type it wrapped to 0 in release builds, and the loop
// did not run).
#[differentiable]
fn inclusive_to_max(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for k in 0u8..=255 {
        if k % 64 == 3 {
            s += x[0] * f64::from(k);
        }
    }
    for k in (-128i8..=127).rev().step_by(50) {
        s += x[1] * f64::from(k);
    }
    for k in (250u8..=255).skip(2) {
        s += x[2] * x[1] * f64::from(k);
    }
    for k in 0u16..=3 {
        s += x[3].sin() * f64::from(k);
    }
    s
}
fn inclusive_to_max_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::zero();
    for k in 0u8..=255 {
        if k % 64 == 3 {
            s += x[0] * f64::from(k);
        }
    }
    for k in (-128i8..=127).rev().step_by(50) {
        s += x[1] * f64::from(k);
    }
    for k in (250u8..=255).skip(2) {
        s += x[2] * x[1] * f64::from(k);
    }
    for k in 0u16..=3 {
        s += x[3].sin() * f64::from(k);
    }
    s
}

#[test]
fn inclusive_ranges_to_the_type_maximum() {
    let x = [0.3, -0.7, 1.1, 0.4, -0.2];
    check_slice(
        "inclusive",
        &x,
        inclusive_to_max::grad,
        inclusive_to_max,
        inclusive_to_max_ref,
    );
}

/// Branches whose arms have no reverse work (a passive counter, a check) record no tag; the
/// reverse sweep takes either edge (`TagMode::Any`).
#[differentiable]
fn passive_branches(x: &[f64]) -> f64 {
    let mut s = 1.0;
    let mut k = 0usize;
    for i in 0..x.len() {
        debug_assert!(x[i] < 100.0, "large input");
        if x[i] > 0.2 {
            k += 1;
        }
        s = s * x[i].sin() + k as f64;
    }
    s
}
fn passive_branches_ref<T: Real>(x: &[T]) -> T {
    let mut s = T::one();
    let mut k = 0usize;
    for i in 0..x.len() {
        if x[i] > 0.2 {
            k += 1;
        }
        s = s * x[i].sin() + k as f64;
    }
    s
}

#[test]
fn passive_branches_take_any_edge_back() {
    for x in [vec![0.5, -0.25, 0.75, 0.1, 0.3], vec![0.1, 0.6, 0.9]] {
        check_slice(
            "passive_branches",
            &x,
            passive_branches::grad,
            passive_branches,
            passive_branches_ref,
        );
    }
}
