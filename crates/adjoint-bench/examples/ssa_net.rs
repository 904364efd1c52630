//! Profiling target: the network gradient of the SSA transform (`ssa_net [primal|grad]`).
use adjoint_bench::sec13::network_input;
use adjoint_bench::ssabench::network;

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "grad".into());
    let x = network_input();
    let mut g = vec![0.0; x.len()];
    let reps = 200_000;
    let mut acc = 0.0;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        acc += match which.as_str() {
            "primal" => network(std::hint::black_box(&x)),
            _ => network::grad(std::hint::black_box(&x), &mut g),
        };
    }
    let per = t.elapsed().as_secs_f64() / reps as f64 * 1e6;
    println!("{which}: {per:.2} µs per call ({acc:.3})");
}
