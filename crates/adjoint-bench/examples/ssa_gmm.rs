//! Profiling target: the SSA transform's GMM data term, value and gradient
//! (`ssa_gmm [primal|grad] [d] [k]`, 1000 points).
use adjoint_bench::problems::uniform;
use adjoint_bench::ssabench::{gmm_data, gmm_qs};

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "grad".into());
    let d: usize = args.next().map_or(10, |s| s.parse().unwrap());
    let k: usize = args.next().map_or(25, |s| s.parse().unwrap());
    let n = 1000;
    let np = k + k * d + k * d * (d + 1) / 2;
    let p: Vec<f64> = uniform(3, np).iter().map(|v| 0.3 * v).collect();
    let x = uniform(5, n * d);
    let (mut qdiag, mut sum_qs) = (vec![0.0; k * d], vec![0.0; k]);
    gmm_qs(&p, d, k, &mut qdiag, &mut sum_qs);
    let (mut g, mut gq, mut gs) = (vec![0.0; np], vec![0.0; k * d], vec![0.0; k]);
    let reps = 300;
    let mut acc = 0.0;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        acc += match which.as_str() {
            "primal" => gmm_data(std::hint::black_box(&p), &qdiag, &sum_qs, &x, d, k),
            _ => gmm_data::grad(
                std::hint::black_box(&p),
                &qdiag,
                &sum_qs,
                &x,
                d,
                k,
                &mut g,
                &mut gq,
                &mut gs,
            ),
        };
    }
    let per = t.elapsed().as_secs_f64() / reps as f64 * 1e6;
    println!("{which} d{d} K{k}: {per:.0} µs per call ({acc:.3})");
}
