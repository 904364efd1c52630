//! The slice primitives of `adjoint_core::vector` on the tape: one entry per result, gradients
//! against forward mode and finite differences, and in every position a `Var` can be in
//! (inputs, intermediate results, constants, values imported from another job).

use adjoint_core::check::check_gradient;
use adjoint_core::prelude::*;
use adjoint_core::{forward, vector};
use adjoint_tape::{hvp, join, Tape, Var};

fn input(n: usize, seed: f64) -> Vec<f64> {
    (0..n)
        .map(|i| (seed + 0.37 * i as f64).sin() * 1.5)
        .collect()
}

/// A loss touching every primitive, with constants and intermediate results as operands.
fn loss<T: Real>(p: &[T]) -> T {
    let n = 6;
    let (m, rest) = p.split_at(3 * n); // 3 × 6 matrix
    let (x, y) = rest.split_at(n); // x: 6, y: 6
    let mut z = vec![T::cst(0.0); 3];
    vector::matvec(m, x, &mut z);
    let xs: Vec<T> = x.iter().map(|&v| v.sin()).collect();
    let mut w: Vec<T> = y.to_vec();
    vector::axpy(z[1], &xs, &mut w); // w = y + z₁ sin(x)
    let c: Vec<T> = (0..n).map(|i| T::cst(0.5 * i as f64)).collect();
    vector::dot(&w, &xs)
        + vector::logsumexp(&z) * vector::sum(&w)
        + vector::dot(&c, y)
        + vector::dot(x, x)
}

#[test]
fn every_primitive_matches_forward_mode_and_finite_differences() {
    let p = input(30, 0.3);
    let (v, g) = Tape::new().value_and_grad(|v: &[Var]| loss(v), &p);
    let reference = forward::gradient(|v| loss(v), &p);
    assert!(
        (v - loss(&p)).abs() <= 1e-12 * v.abs().max(1.0),
        "{v} vs {}",
        loss(&p)
    );
    for (i, (a, b)) in g.iter().zip(&reference).enumerate() {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{i}: {a} vs {b}");
    }
    check_gradient(|v| loss(v), &p, &g).assert_passed();
}

#[test]
fn one_entry_per_result() {
    let n = 1000;
    let x = input(2 * n, 1.0);
    let mut tape = Tape::new();
    let (_, g) = tape.value_and_grad(|v: &[Var]| vector::dot(&v[..n], &v[n..]), &x);
    // The sink, 2n inputs and one dot: no per-element entries.
    assert_eq!(tape.entries(), 1 + 2 * n + 1);
    assert_eq!(&g[..n], &x[n..]);
    assert_eq!(&g[n..], &x[..n]);
    // The scalar loop records 2n − 1 more.
    tape.value_and_grad(
        |v: &[Var]| {
            v[..n]
                .iter()
                .zip(&v[n..])
                .map(|(a, b)| *a * *b)
                .sum::<Var>()
        },
        &x,
    );
    assert!(tape.entries() >= 1 + 2 * n + 2 * n - 1);
    // matvec: one entry per row; logsumexp, sum: one each; axpy: one per element.
    let (r, c) = (7, 5);
    let p = input(r * c + c, 2.0);
    tape.value_and_grad(
        |v: &[Var]| {
            let mut out = vec![Var::constant(0.0); r];
            vector::matvec(&v[..r * c], &v[r * c..], &mut out);
            vector::logsumexp(&out) + vector::sum(&out)
        },
        &p,
    );
    assert_eq!(tape.entries(), 1 + p.len() + r + 2 + 1);
}

#[test]
fn vector_results_flow_through_joins() {
    let p = input(30, 0.9);
    let f = |v: &[Var]| {
        let (a, b) = join(
            || vector::dot(&v[..15], &v[15..]),
            || vector::logsumexp(&v[3..20]),
        );
        // Operands imported from the forked jobs and from the root's inputs.
        vector::dot(&[a, b, v[0]], &[b, v[1], a])
    };
    let plain = |v: &[f64]| {
        let (a, b) = (
            vector::dot(&v[..15], &v[15..]),
            vector::logsumexp(&v[3..20]),
        );
        vector::dot(&[a, b, v[0]], &[b, v[1], a])
    };
    let g = Tape::new().value_and_grad(f, &p).1;
    let reference = forward::gradient(
        |v| {
            let (a, b) = (
                vector::dot(&v[..15], &v[15..]),
                vector::logsumexp(&v[3..20]),
            );
            vector::dot(&[a, b, v[0]], &[b, v[1], a])
        },
        &p,
    );
    for (a, b) in g.iter().zip(&reference) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
    }
    check_gradient(plain, &p, &g).assert_passed();
}

#[test]
fn hessian_vector_products_through_the_primitives() {
    let p = input(30, 1.7);
    let v = input(30, -0.4);
    let h = hvp(|x| loss(x), &p, &v);
    let full = forward::hessian(|x| loss(x), &p);
    for (i, row) in full.iter().enumerate() {
        let hv: f64 = row.iter().zip(&v).map(|(a, b)| a * b).sum();
        assert!(
            (h[i] - hv).abs() <= 1e-10 * hv.abs().max(1.0),
            "{i}: {} vs {hv}",
            h[i]
        );
    }
}

#[test]
fn logsumexp_limits_and_checked_mode() {
    // Large inputs: stable.
    let g = Tape::new()
        .value_and_grad(|v: &[Var]| vector::logsumexp(v), &[1000.0, 1000.0])
        .1;
    assert_eq!(g, vec![0.5, 0.5]);
    // −∞ inputs get zero weight.
    let (y, g) =
        Tape::new().value_and_grad(|v: &[Var]| vector::logsumexp(v), &[f64::NEG_INFINITY, 0.0]);
    assert_eq!((y, g), (0.0, vec![0.0, 1.0]));
    // Checked mode names the primitive of a NaN produced from finite operands.
    let e = Tape::new()
        .checked()
        .try_value_and_grad(|v: &[Var]| vector::dot(&[v[0].ln()], &[v[1]]), &[-1.0, 2.0])
        .unwrap_err();
    assert_eq!(e.primitive, "Ln");
}

#[test]
fn length_mismatch_is_a_clear_panic() {
    let r = std::panic::catch_unwind(|| vector::dot(&[1.0, 2.0], &[1.0]));
    let msg = r.unwrap_err().downcast::<String>().unwrap();
    assert!(msg.contains("lengths 2 and 1 differ"), "{msg}");
}
