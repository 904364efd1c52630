//! A profiling target: the per-call overhead of a tiny gradient.
use adjoint_tape::{Tape, Var};

fn main() {
    let mut tape = Tape::new();
    let mut g = [0.0; 2];
    let reps = 2_000_000;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        tape.grad_into(
            |v: &[Var]| v[0] * v[1],
            std::hint::black_box(&[1.5, -2.5]),
            &mut g,
        );
    }
    println!(
        "{:.1} ns per gradient",
        t.elapsed().as_secs_f64() / reps as f64 * 1e9
    );
}
