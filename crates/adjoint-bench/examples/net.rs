//! Profiling target: the §13 network gradient on the tape.
use adjoint_bench::sec13::{network_input, network_sum};
use adjoint_tape::{Tape, Var};

fn main() {
    let x = network_input();
    let mut g = vec![0.0; x.len()];
    let mut tape = Tape::new();
    let reps = 3000;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        tape.grad_into(|v: &[Var]| network_sum(v), &x, &mut g);
    }
    println!(
        "{:.1} µs per gradient",
        t.elapsed().as_secs_f64() / reps as f64 * 1e6
    );
}
