//! Profile the reversible distance kernel of the Petersen loss, with and without checks:
//! `perf record cargo run --release --example petersen_profile`.
use adjoint::rev::examples::i_dist;
use adjoint::rev::prelude::*;
use std::hint::black_box;
use std::time::Instant;

reversible! {
    fn dist_unchecked<T: RevReal>(out: &mut T, x: &mut Vec<T>, a: &mut usize, b: &mut usize, k: &mut usize) {
        @invcheckoff {
            @routine {
                let s = T::zero();
                for d in 0..k {
                    let t = T::zero();
                    t += x[a * k + d] - x[b * k + d];
                    s += t.powi(2);
                    t -= x[a * k + d] - x[b * k + d];
                    unlet t = T::zero();
                }
            }
            out += s.sqrt();
            ~@routine;
        }
    }
}

fn plain(x: &[f64], a: usize, b: usize, k: usize) -> f64 {
    (0..k)
        .map(|d| (x[a * k + d] - x[b * k + d]).powi(2))
        .sum::<f64>()
        .sqrt()
}

fn main() {
    let k = 10;
    let mut x = adjoint_bench::problems::uniform(17, 10 * k);
    let n = 3_000_000;
    let t = Instant::now();
    let mut s = 0.0;
    for i in 0..n {
        s += plain(black_box(&x), i % 10, (i + 3) % 10, k);
    }
    println!(
        "plain      {:.1} ns  ({s})",
        t.elapsed().as_nanos() as f64 / n as f64
    );
    let (mut out, mut kk) = (0.0f64, k);
    let t = Instant::now();
    for i in 0..n {
        i_dist(
            &mut out,
            black_box(&mut x),
            &mut (i % 10),
            &mut ((i + 3) % 10),
            &mut kk,
        )
        .unwrap();
    }
    println!(
        "checked    {:.1} ns  ({out})",
        t.elapsed().as_nanos() as f64 / n as f64
    );
    let mut out = 0.0f64;
    let t = Instant::now();
    for i in 0..n {
        dist_unchecked(
            &mut out,
            black_box(&mut x),
            &mut (i % 10),
            &mut ((i + 3) % 10),
            &mut kk,
        )
        .unwrap();
    }
    println!(
        "unchecked  {:.1} ns  ({out})",
        t.elapsed().as_nanos() as f64 / n as f64
    );
    let mut out = 0.0f64;
    let t = Instant::now();
    for i in 0..n {
        i_dist::call_unchecked(
            &mut out,
            black_box(&mut x),
            &mut (i % 10),
            &mut ((i + 3) % 10),
            &mut kk,
        )
        .unwrap();
    }
    println!(
        "i_dist::call_unchecked  {:.1} ns  ({out})",
        t.elapsed().as_nanos() as f64 / n as f64
    );
}
