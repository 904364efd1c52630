//! The array engine (`adjoint::array`, seed 004) as an ADBench GMM column: the objective written
//! with the combinators ([`adjoint::array::models::Gmm`]), built once per input size (JAX's
//! `jit` model: building is not timed, as compilation is not for JAX) and differentiated as a
//! whole program on rayon's threads.

use super::io::{GmmInput, LstmInput};
use super::lstm::LstmColumn;
use super::GmmColumn;
use adjoint::array::models::{Gmm, Lstm};
use std::cell::RefCell;

/// What a built program depends on: `(n, d, K, γ bits, m bits)`.
type Sizes = (usize, usize, usize, u64, u64);

/// The array engine's GMM column.
#[derive(Default)]
pub struct Array {
    /// The program built for the last input's sizes `(n, d, K, γ, m)`.
    built: RefCell<Option<(Sizes, Gmm)>>,
}

impl GmmColumn for Array {
    fn name(&self) -> &'static str {
        "array"
    }
    fn gmm(&self, g: &GmmInput, p: &[f64], grad: &mut [f64]) -> f64 {
        let key = (g.n, g.d, g.k, g.gamma.to_bits(), g.m.to_bits());
        let mut built = self.built.borrow_mut();
        if built.as_ref().is_none_or(|(k, _)| *k != key) {
            let program = Gmm::new(g.n, g.d, g.k, g.gamma, g.m)
                .unwrap_or_else(|e| panic!("array GMM for d = {}, K = {}: {e}", g.d, g.k));
            *built = Some((key, program));
        }
        let (_, program) = built.as_ref().expect("built above");
        let (k, d) = (g.k, g.d);
        let (alphas, rest) = p.split_at(k);
        let (means, icf) = rest.split_at(k * d);
        let (v, gr) = program
            .gradient(alphas, means, icf, &g.x)
            .unwrap_or_else(|e| panic!("array GMM gradient: {e}"));
        grad.copy_from_slice(&gr);
        v
    }
}

/// The array engine's LSTM column: [`adjoint::array::models::Lstm`], the time loop unrolled,
/// built once per `(l, c, b)`.
#[derive(Default)]
pub struct ArrayLstm {
    built: RefCell<Option<((usize, usize, usize), Lstm)>>,
}

impl LstmColumn for ArrayLstm {
    fn name(&self) -> &'static str {
        "array"
    }
    fn lstm(&self, g: &LstmInput, p: &[f64], grad: &mut [f64]) -> f64 {
        let key = (g.l, g.c, g.b);
        let mut built = self.built.borrow_mut();
        if built.as_ref().is_none_or(|(k, _)| *k != key) {
            let program = Lstm::new(g.l, g.c, g.b)
                .unwrap_or_else(|e| panic!("array LSTM for l = {}, c = {}: {e}", g.l, g.c));
            *built = Some((key, program));
        }
        let (_, program) = built.as_ref().expect("built above");
        let (main, extra) = p.split_at(8 * g.l * g.b);
        let (v, gr) = program
            .gradient(main, extra, &g.state, &g.seq)
            .unwrap_or_else(|e| panic!("array LSTM gradient: {e}"));
        grad.copy_from_slice(&gr);
        v
    }
}
