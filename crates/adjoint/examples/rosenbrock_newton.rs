//! Rosenbrock's function minimised by Newton's method (argmin's `Newton`: x ← x − H⁻¹∇f), with
//! exact gradients and Hessians from adjoint's tape (Hessian: reverse over forward).
//!
//! The Hessian reaches argmin as an `adjoint::argmin::Matrix`, which supplies the inverse that
//! argmin's `Newton` needs. Run with
//! `cargo run -p adjoint --example rosenbrock_newton --features argmin`.

use adjoint::argmin::{Objective, Problem};
use adjoint::Real;
use argmin::core::{Error, Executor, State};
use argmin::solver::newton::Newton;

/// The extended Rosenbrock function Σᵢ (1 − xᵢ)² + 100 (xᵢ₊₁ − xᵢ²)²; minimum 0 at (1, …, 1).
pub struct Rosenbrock;

impl Objective for Rosenbrock {
    fn eval<T: Real>(&self, x: &[T]) -> T {
        x.windows(2)
            .map(|w| (T::cst(1.0) - w[0]).powi(2) + (w[1] - w[0] * w[0]).powi(2) * 100.0)
            .sum()
    }
}

/// Minimise from `x0` by `iters` full Newton steps; returns the last iterate and the number of
/// iterations.
pub fn minimise(x0: Vec<f64>, iters: u64) -> Result<(Vec<f64>, u64), Error> {
    let res = Executor::new(Problem::new(Rosenbrock), Newton::<f64>::new())
        .configure(|s| s.param(x0).max_iters(iters))
        .run()?;
    let state = res.state();
    Ok((state.get_param().expect("ran").clone(), state.get_iter()))
}

#[allow(dead_code)] // The tests include this file for `Rosenbrock` and `minimise`.
fn main() -> Result<(), Error> {
    for x0 in [vec![-1.2, 1.0], vec![0.5, 0.3, 0.8, 1.2, 0.9, 1.1]] {
        let (x, iters) = minimise(x0.clone(), 20)?;
        let f = Rosenbrock.eval(&x);
        println!("from {x0:?}: x = {x:.12?} after {iters} Newton steps, f = {f:.3e}");
    }
    Ok(())
}
