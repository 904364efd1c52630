//! Logistic regression fitted by L-BFGS (argmin), with the gradient from adjoint's tape.
//!
//! The loss is written once, generically over `Real`; `adjoint::argmin::Problem` hands argmin
//! its value (`f64`) and its gradient (one reverse sweep). Run with
//! `cargo run -p adjoint --example logistic_lbfgs --features argmin`.

use adjoint::argmin::{Objective, Problem};
use adjoint::Real;
use argmin::core::{Error, Executor, State};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;

/// Mean logistic loss of a linear model with bias `w[0]` and weights `w[1..]`, plus
/// `l2/2 · ‖w[1..]‖²`.
pub struct Logistic {
    /// Feature rows.
    pub x: Vec<Vec<f64>>,
    /// Labels, 0 or 1.
    pub y: Vec<f64>,
    /// Ridge penalty on the weights (not the bias).
    pub l2: f64,
}

impl Objective for Logistic {
    fn eval<T: Real>(&self, w: &[T]) -> T {
        let mut loss = T::cst(0.0);
        for (xi, &yi) in self.x.iter().zip(&self.y) {
            let mut z = w[0];
            for (&wj, &xij) in w[1..].iter().zip(xi) {
                z += wj * xij;
            }
            // −log σ(z) for y = 1, −log(1 − σ(z)) for y = 0: softplus(z) − y·z, computed stably.
            let softplus = z.max(T::cst(0.0)) + (-z.abs()).exp().ln_1p();
            loss += softplus - z * yi;
        }
        let ridge: T = w[1..].iter().map(|&wj| wj * wj).sum();
        loss / self.y.len() as f64 + ridge * (0.5 * self.l2)
    }
}

impl Logistic {
    /// `n` samples of `true_w.len() − 1` features drawn from a fixed pseudo-random generator,
    /// labelled by Bernoulli draws from the model with weights `true_w` (so the classes overlap
    /// and the optimum is finite).
    pub fn synthetic(n: usize, true_w: &[f64], l2: f64) -> Logistic {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut uniform = move || {
            // splitmix64
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        };
        let d = true_w.len() - 1;
        let mut x = Vec::with_capacity(n);
        let mut y = Vec::with_capacity(n);
        for _ in 0..n {
            let row: Vec<f64> = (0..d).map(|_| 4.0 * uniform() - 2.0).collect();
            let z = true_w[0]
                + row
                    .iter()
                    .zip(&true_w[1..])
                    .map(|(a, b)| a * b)
                    .sum::<f64>();
            let p = 1.0 / (1.0 + (-z).exp());
            y.push(if uniform() < p { 1.0 } else { 0.0 });
            x.push(row);
        }
        Logistic { x, y, l2 }
    }
}

/// Fit by L-BFGS (memory 7, Moré–Thuente line search) from `w = 0`; returns the weights and the
/// number of iterations.
pub fn fit(model: &Logistic) -> Result<(Vec<f64>, u64), Error> {
    let dim = model.x[0].len() + 1;
    let solver = LBFGS::new(MoreThuenteLineSearch::new(), 7)
        .with_tolerance_grad(1e-10)?
        .with_tolerance_cost(0.0)?;
    let res = Executor::new(Problem::new(model), solver)
        .configure(|s| s.param(vec![0.0; dim]).max_iters(200))
        .run()?;
    let state = res.state();
    let w = state.get_best_param().expect("L-BFGS ran").clone();
    Ok((w, state.get_iter()))
}

#[allow(dead_code)] // The tests include this file for `Logistic` and `fit`.
fn main() -> Result<(), Error> {
    let true_w = [0.5, 2.0, -1.0, 0.7];
    let model = Logistic::synthetic(500, &true_w, 1e-3);
    let (w, iters) = fit(&model)?;
    let g = adjoint::tape::grad(|x: &[adjoint::tape::Var]| model.eval(x), &w);
    let gnorm = g.iter().map(|v| v * v).sum::<f64>().sqrt();
    println!("L-BFGS: {iters} iterations");
    println!("fitted w = {w:.4?} (data drawn from {true_w:?})");
    println!("loss = {:.6}, |∇loss| = {gnorm:.2e}", model.eval(&w));
    Ok(())
}
