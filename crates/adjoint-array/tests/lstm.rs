//! The array-language LSTM (its time loop one `scan_n`) against a plain-Rust port of
//! `adjoint-bench`'s `adbench::lstm` objective: value to 1e-12 relative, gradient against
//! forward mode, for 1 to 3 layers and sequences of 1 to 9 characters.

use adjoint_array::models::Lstm;
use adjoint_core::forward::{self, Dual64};
use adjoint_core::prelude::*;

mod common;

fn sigmoid<T: Real>(x: T) -> T {
    T::cst(1.0) / ((-x).exp() + 1.0)
}

/// `adbench::lstm::lstm_objective`, ported (generic over `Real`); `p` = main, then extra.
fn reference<T: Real>(l: usize, c: usize, b: usize, state0: &[f64], seq: &[f64], p: &[T]) -> T {
    let (main, extra) = p.split_at(8 * l * b);
    let mut state: Vec<T> = state0.iter().map(|&v| T::cst(v)).collect();
    let mut total = T::cst(0.0);
    for t in 0..c - 1 {
        let mut x: Vec<T> = (0..b).map(|j| extra[j] * seq[t * b + j]).collect();
        for layer in 0..l {
            let w = &main[8 * layer * b..8 * layer * b + 4 * b];
            let bias = &main[8 * layer * b + 4 * b..8 * (layer + 1) * b];
            for j in 0..b {
                let (h, cell) = (state[2 * layer * b + j], state[(2 * layer + 1) * b + j]);
                let forget = sigmoid(x[j] * w[j] + bias[j]);
                let ingate = sigmoid(h * w[b + j] + bias[b + j]);
                let outgate = sigmoid(x[j] * w[2 * b + j] + bias[2 * b + j]);
                let change = (h * w[3 * b + j] + bias[3 * b + j]).tanh();
                let cell = cell * forget + ingate * change;
                state[(2 * layer + 1) * b + j] = cell;
                state[2 * layer * b + j] = outgate * cell.tanh();
            }
            x = (0..b).map(|j| state[2 * layer * b + j]).collect();
        }
        let y: Vec<T> = (0..b)
            .map(|j| x[j] * extra[b + j] + extra[2 * b + j])
            .collect();
        let lse = (y.iter().fold(T::cst(0.0), |s, &v| s + v.exp()) + 2.0).ln();
        for j in 0..b {
            total += (y[j] - lse) * seq[(t + 1) * b + j];
        }
    }
    total * (-1.0 / ((c - 1) * b) as f64)
}

#[test]
fn lstm_value_and_gradient_match_forward_mode() {
    for (l, c, b) in [(1, 2, 3), (2, 6, 4), (3, 9, 2), (2, 1, 3)] {
        let lstm = Lstm::new(l, c, b).unwrap();
        let main = common::uniform(8 * l * b, 1, -1.0, 1.0);
        let extra = common::uniform(3 * b, 2, -1.0, 1.0);
        let state = common::uniform(2 * l * b, 3, 0.0, 1.0);
        let seq: Vec<f64> = (0..c * b)
            .map(|i| f64::from(u8::from((i * 7) % 3 == 0)))
            .collect();
        let (v, g) = lstm.gradient(&main, &extra, &state, &seq).unwrap();
        let p: Vec<f64> = [&main[..], &extra].concat();
        if c < 2 {
            // no prediction is made: the loss is 0 and so is its gradient
            assert_eq!(v, 0.0);
            assert!(g.iter().all(|&d| d == 0.0));
            continue;
        }
        let f = |q: &[Dual64]| reference(l, c, b, &state, &seq, q);
        let pd: Vec<Dual64> = p.iter().map(|&x| Dual64::constant(x)).collect();
        let want = f(&pd).re;
        assert!(
            (v - want).abs() <= 1e-12 * want.abs(),
            "(l, c, b) = ({l}, {c}, {b}): loss {v} vs {want}"
        );
        let gf = forward::gradient(f, &p);
        for (i, (a, e)) in g.iter().zip(&gf).enumerate() {
            assert!(
                (a - e).abs() <= 1e-11 * (1.0 + e.abs()),
                "(l, c, b) = ({l}, {c}, {b}): ∂/∂p{i} {a} vs forward {e}"
            );
        }
    }
}

#[test]
fn degenerate_sizes_are_errors_not_panics() {
    // (Lstm::new(0, 3, 2) overflowed `2l − 2`; Gmm::new with d = 0 indexed past an empty row)
    for (l, b) in [(0, 2), (2, 0)] {
        let e = Lstm::new(l, 3, b).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains(&format!("l = {l}, b = {b}")), "{e}");
    }
    for (d, k) in [(0, 2), (3, 0)] {
        let e = adjoint_array::models::Gmm::new(3, d, k, 1.0, 0.0)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("d = {d}, k = {k}")), "{e}");
    }
}
