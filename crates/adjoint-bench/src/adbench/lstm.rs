//! ADBench's LSTM objective (a diagonal LSTM over a bit sequence), written once over
//! [`Scalar`], and its gradient columns.
//!
//! The objective follows ADBench's reference C++ exactly: per layer
//! `f = σ(x·W_f + b_f)`, `i = σ(h·W_i + b_i)`, `o = σ(x·W_o + b_o)`, `c̃ = tanh(h·W_c + b_c)`,
//! `c ← c·f + i·c̃`, `h ← o·tanh(c)` (the layer's input `x` is the previous layer's new `h`, or
//! the character times the input weights); prediction `y = h_last·w_out + b_out`; loss
//! `−Σ_t Σ_j seq[t+1]_j · (y_j − ln(Σ exp(y) + 2)) / ((c − 1)·b)` (the `+ 2` is in every
//! implementation). The state is not differentiated.

use super::io::LstmInput;
use super::{c, Scalar};

fn sigmoid<T: Scalar>(x: T) -> T {
    c::<T>(1.0) / ((-x).exp() + 1.0)
}

/// The LSTM loss at parameters `main` (`8lb`) and `extra` (`3b`).
pub fn lstm_objective<T: Scalar>(g: &LstmInput, main: &[T], extra: &[T]) -> T {
    let (l, b) = (g.l, g.b);
    assert_eq!(main.len(), 8 * l * b, "LSTM main parameters");
    assert_eq!(extra.len(), 3 * b, "LSTM extra parameters");
    let mut state: Vec<T> = g.state.iter().map(|&v| c(v)).collect();
    let mut x0 = vec![c::<T>(0.0); b];
    let mut total = c::<T>(0.0);
    for t in 0..g.c - 1 {
        let chr = &g.seq[t * b..(t + 1) * b];
        for j in 0..b {
            x0[j] = extra[j] * chr[j];
        }
        for layer in 0..l {
            let w = &main[8 * layer * b..8 * layer * b + 4 * b];
            let bias = &main[8 * layer * b + 4 * b..8 * (layer + 1) * b];
            let (below, this) = state.split_at_mut(2 * layer * b);
            let x: &[T] = if layer == 0 {
                &x0
            } else {
                &below[2 * (layer - 1) * b..2 * (layer - 1) * b + b]
            };
            let (h, cell) = this[..2 * b].split_at_mut(b);
            for j in 0..b {
                let forget = sigmoid(x[j] * w[j] + bias[j]);
                let ingate = sigmoid(h[j] * w[b + j] + bias[b + j]);
                let outgate = sigmoid(x[j] * w[2 * b + j] + bias[2 * b + j]);
                let change = (h[j] * w[3 * b + j] + bias[3 * b + j]).tanh();
                cell[j] = cell[j] * forget + ingate * change;
                h[j] = outgate * cell[j].tanh();
            }
        }
        let top = &state[2 * (l - 1) * b..2 * (l - 1) * b + b];
        let y: Vec<T> = (0..b)
            .map(|j| top[j] * extra[b + j] + extra[2 * b + j])
            .collect();
        let lse = (y.iter().fold(c::<T>(0.0), |s, &v| s + v.exp()) + 2.0).ln();
        let gold = &g.seq[(t + 1) * b..(t + 2) * b];
        for j in 0..b {
            total = total + (y[j] - lse) * gold[j];
        }
    }
    total * (-1.0 / ((g.c - 1) * b) as f64)
}

/// The loss at ADBench's flat parameter vector (`main`, then `extra`).
pub fn lstm_loss<T: Scalar>(g: &LstmInput, p: &[T]) -> T {
    let (main, extra) = p.split_at(8 * g.l * g.b);
    lstm_objective(g, main, extra)
}

/// An LSTM gradient column as the runner sees it.
pub trait LstmColumn {
    /// Column name.
    fn name(&self) -> &'static str;
    /// The loss and its gradient (into `grad`) at parameters `p` (`main`, then `extra`).
    fn lstm(&self, g: &LstmInput, p: &[f64], grad: &mut [f64]) -> f64;
}

/// adjoint's tape engine.
pub struct Tape;

impl LstmColumn for Tape {
    fn name(&self) -> &'static str {
        "tape"
    }
    fn lstm(&self, g: &LstmInput, p: &[f64], grad: &mut [f64]) -> f64 {
        let (v, gr) = adjoint_tape::value_and_grad(|x| lstm_loss(g, x), p);
        grad.copy_from_slice(&gr);
        v
    }
}

/// The Rust peer `echidna`, running the same source.
pub struct Echidna;

impl LstmColumn for Echidna {
    fn name(&self) -> &'static str {
        "echidna"
    }
    fn lstm(&self, g: &LstmInput, p: &[f64], grad: &mut [f64]) -> f64 {
        let (v, gr) = echidna::vjp(|x| vec![lstm_loss(g, x)], p, &[1.0]);
        grad.copy_from_slice(&gr);
        v[0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adbench::io;

    #[test]
    fn tape_gradient_matches_forward_mode_and_finite_differences() {
        let g = io::generate_lstm(2, 6, 3, 7);
        let p = g.params();
        let mut grad = vec![0.0; p.len()];
        let v = Tape.lstm(&g, &p, &mut grad);
        assert!((v - lstm_loss(&g, &p)).abs() < 1e-14);
        let fwd = adjoint::forward::gradient(|x| lstm_loss(&g, x), &p);
        for (a, b) in grad.iter().zip(&fwd) {
            assert!((a - b).abs() < 1e-12 * (1.0 + b.abs()), "{a} vs {b}");
        }
        let report = adjoint::check::check_gradient(|x: &[f64]| lstm_loss(&g, x), &p, &grad);
        assert!(report.passed(), "{report:?}");
    }

    #[test]
    fn array_engine_matches_forward_mode() {
        for (l, c, b) in [(1, 4, 3), (3, 5, 2)] {
            let g = io::generate_lstm(l, c, b, 11);
            let p = g.params();
            let mut grad = vec![0.0; p.len()];
            let v = crate::adbench::array::ArrayLstm::default().lstm(&g, &p, &mut grad);
            assert!((v - lstm_loss(&g, &p)).abs() < 1e-13 * (1.0 + v.abs()));
            let fwd = adjoint::forward::gradient(|x| lstm_loss(&g, x), &p);
            for (a, b) in grad.iter().zip(&fwd) {
                assert!((a - b).abs() < 1e-12 * (1.0 + b.abs()), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn ssa_engine_matches_forward_mode() {
        for (l, c, b) in [(1, 4, 3), (3, 5, 2)] {
            let g = io::generate_lstm(l, c, b, 13);
            let p = g.params();
            let mut grad = vec![0.0; p.len()];
            let v = crate::ssabench::SsaLstm.lstm(&g, &p, &mut grad);
            assert!((v - lstm_loss(&g, &p)).abs() < 1e-13 * (1.0 + v.abs()));
            let fwd = adjoint::forward::gradient(|x| lstm_loss(&g, x), &p);
            for (a, b) in grad.iter().zip(&fwd) {
                assert!((a - b).abs() < 1e-12 * (1.0 + b.abs()), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn file_format_round_trips() {
        let g = io::generate_lstm(2, 5, 4, 3);
        let back = io::parse_lstm(&io::write_lstm(&g), "generated").unwrap();
        assert_eq!(g, back);
        assert_eq!(g.params().len(), 8 * 2 * 4 + 3 * 4);
        assert!(io::parse_lstm("2 1 3", "short").is_err());
        let err = io::parse_lstm("1 2 1\n0.5", "cut").unwrap_err().to_string();
        assert!(
            err.contains("cut: line 2, main parameters: the header asks for 8 values"),
            "{err}"
        );
    }
}
