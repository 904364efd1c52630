//! Informal timings: `cargo run --release -p adjoint-array --example perf`.
use adjoint_array::models::Gmm;
use adjoint_array::Builder;
use std::time::Instant;

fn best<R>(reps: usize, mut f: impl FnMut() -> R) -> (f64, R) {
    let mut t = f64::INFINITY;
    let mut r = f();
    for _ in 0..reps {
        let s = Instant::now();
        r = f();
        t = t.min(s.elapsed().as_secs_f64());
    }
    (t, r)
}

fn main() {
    let threads = rayon::current_num_threads();
    // Five element-wise maps over 1e7 elements vs a hand-fused loop.
    let n = 10_000_000;
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 1e-7).sin()).collect();
    let b = Builder::new();
    let a = b.input(&[n]);
    let y = a
        .map(|v| v * 1.5 + 0.25)
        .map(|v| v * v)
        .map(|v| v - 0.5)
        .map(|v| v.max(0.1))
        .map(|v| v * 3.0 - 1.0);
    let p = b.build(&[&y]).unwrap();
    if std::env::var("DESCRIBE").is_ok() {
        println!("{}", p.describe());
    }
    let (ta, out) = best(5, || p.run(&[&x]).unwrap());
    let (th, hand) = best(5, || {
        use rayon::prelude::*;
        let mut o = vec![0.0; n];
        o.par_chunks_mut(1 << 16)
            .zip(x.par_chunks(1 << 16))
            .for_each(|(o, x)| {
                for (o, &v) in o.iter_mut().zip(x) {
                    let v = v * 1.5 + 0.25;
                    let v = v * v;
                    let v = v - 0.5;
                    let v = v.max(0.1);
                    *o = v * 3.0 - 1.0;
                }
            });
        o
    });
    assert_eq!(out[0].data(), &hand[..]);
    println!(
        "threads={threads} five maps 1e7: array {:.2} ms, hand-fused {:.2} ms, ratio {:.2}",
        ta * 1e3,
        th * 1e3,
        ta / th
    );
    if std::env::var("ONLY_MAPS").is_ok() {
        return;
    }
    // GMM
    for &(n, d, k) in &[
        (1000usize, 10usize, 25usize),
        (10_000, 10, 25),
        (1000, 64, 200),
        (10_000, 2, 5),
    ] {
        let icf_sz = d * (d + 1) / 2;
        let mut s = 12345u64;
        let mut rnd = |sc: f64| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0) * sc
        };
        let alphas: Vec<f64> = (0..k).map(|_| rnd(1.0)).collect();
        let means: Vec<f64> = (0..k * d).map(|_| rnd(1.0)).collect();
        let icf: Vec<f64> = (0..k * icf_sz).map(|_| rnd(0.3)).collect();
        let xs: Vec<f64> = (0..n * d).map(|_| rnd(1.0)).collect();
        let t0 = Instant::now();
        let gmm = Gmm::new(n, d, k, 1.0, 0.0).unwrap();
        let tb = t0.elapsed().as_secs_f64();
        let reps = if n * k * d * d > 10_000_000 { 2 } else { 5 };
        let (to, _) = best(reps, || gmm.objective(&alphas, &means, &icf, &xs).unwrap());
        let (tg, _) = best(reps, || gmm.gradient(&alphas, &means, &icf, &xs).unwrap());
        println!("threads={threads} gmm n={n} d={d} K={k}: build {:.1} ms, objective {:.2} ms, gradient {:.2} ms, ratio {:.2}", tb * 1e3, to * 1e3, tg * 1e3, tg / to);
    }
}
