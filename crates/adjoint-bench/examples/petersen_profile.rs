//! Profile the reversible Petersen loss without checks (as benchmarked):
//! `perf record cargo run --release -p adjoint-bench --example petersen_profile`.
use adjoint::rev::examples::i_petersen;
use std::hint::black_box;

fn main() {
    let k = 10;
    let mut x = adjoint_bench::problems::uniform(17, 10 * k);
    let (mut loss, mut kk) = (0.0f64, k);
    for _ in 0..1_000_000 {
        i_petersen::call_unchecked(&mut loss, black_box(&mut x), &mut kk).unwrap();
    }
    println!("{loss}");
}
