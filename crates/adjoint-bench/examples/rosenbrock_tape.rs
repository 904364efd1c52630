//! Profiling target: Rosenbrock (n = 10⁴) gradients on the tape against the plain program.
use adjoint_bench::problems::{Objective, Rosenbrock};
use adjoint_tape::{Tape, Var};

fn main() {
    let problem = Rosenbrock { n: 10_000 };
    let x = problem.input();
    let mut g = vec![0.0; x.len()];
    let mut tape = Tape::new();
    let reps = 2000;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        tape.grad_into(|v: &[Var]| problem.eval(v), &x, &mut g);
    }
    let grad = t.elapsed().as_secs_f64() / reps as f64;
    let t = std::time::Instant::now();
    let mut sum = 0.0;
    for _ in 0..reps {
        sum += problem.eval(std::hint::black_box(&x[..]));
    }
    let primal = t.elapsed().as_secs_f64() / reps as f64;
    println!(
        "grad {:.1} µs, primal {:.1} µs, ratio {:.1} ({sum})",
        grad * 1e6,
        primal * 1e6,
        grad / primal
    );
}
