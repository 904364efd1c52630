//! Profile the reversible Petersen gradient pass without checks (as benchmarked):
//! `perf record cargo run --release -p adjoint-bench --example petersen_grad_profile [k]`.
use adjoint::rev::examples::{i_petersen, petersen};
use adjoint::rev::GVar;
use std::hint::black_box;

fn main() {
    let k: usize = std::env::args().nth(1).map_or(10, |s| s.parse().unwrap());
    let x = adjoint_bench::problems::uniform(17, 10 * k);
    let mut gx: Vec<GVar<f64>> = vec![GVar::default(); 10 * k];
    let reps = 500_000;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        for (gv, &v) in gx.iter_mut().zip(black_box(&x)) {
            *gv = GVar::new(v, 0.0);
        }
        let (mut gl, mut kk) = (GVar::new(0.0, 0.0), k);
        i_petersen::gradient_pass_unchecked(&mut gl, &mut gx, &mut kk, |l, _, _| l.g = 1.0)
            .unwrap();
    }
    let grad = t.elapsed().as_secs_f64() / reps as f64 * 1e9;
    let t = std::time::Instant::now();
    let mut acc = 0.0;
    for _ in 0..reps {
        acc += petersen(black_box(&x), k);
    }
    let primal = t.elapsed().as_secs_f64() / reps as f64 * 1e9;
    println!(
        "k = {k}: gradient {grad:.0} ns, plain {primal:.0} ns, ratio {:.2} ({acc:.1}, g0 {})",
        grad / primal,
        gx[0].g
    );
}
