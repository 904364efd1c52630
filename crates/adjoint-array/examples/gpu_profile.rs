//! Where a GMM gradient's time goes on the GPU (feature `cuda`):
//!
//! ```text
//! ADJOINT_CUDA_PROFILE=1 cargo run --release -p adjoint-array --features cuda --example gpu_profile
//! ```
//!
//! Two gradients each at ADBench's 1k d10 K25 and 10k d10 K200 sizes (ramp data), or at the
//! sizes given as `n,d,K` arguments (`gpu_profile 1000,64,25 1000,128,25`); with
//! `ADJOINT_CUDA_PROFILE=1` every launch is waited for and timed, and a profile per gradient is
//! printed (the second is the warm one). Without a GPU it says why and stops.
use adjoint_array::models::Gmm;
use adjoint_array::Backend;

fn ramp(n: usize, a: f64, b: f64) -> Vec<f64> {
    (0..n)
        .map(|i| a + (b - a) * i as f64 / n.max(2) as f64)
        .collect()
}

fn main() {
    let gpu = match Backend::cuda() {
        Ok(g) => g,
        Err(e) => {
            eprintln!("{e}");
            return;
        }
    };
    let mut sizes: Vec<(usize, usize, usize)> = std::env::args()
        .skip(1)
        .map(|a| {
            let v: Vec<usize> = a
                .split(',')
                .map(|x| x.parse().expect("a size is `n,d,K`"))
                .collect();
            match v[..] {
                [n, d, k] => (n, d, k),
                _ => panic!("a size is `n,d,K`, not `{a}`"),
            }
        })
        .collect();
    if sizes.is_empty() {
        sizes = vec![(1000, 10, 25), (10_000, 10, 200)];
    }
    for (n, d, k) in sizes {
        let gmm = Gmm::for_backend(n, d, k, 1.0, 0.0, &gpu).expect("the GMM program builds");
        let icf = d * (d + 1) / 2;
        let (alphas, means) = (ramp(k, -0.3, 0.4), ramp(k * d, -1.0, 1.0));
        let (icf, x) = (ramp(k * icf, -0.2, 0.3), ramp(n * d, -1.5, 1.5));
        for run in 0..2 {
            eprintln!("GMM n = {n}, d = {d}, K = {k}, gradient {run}:");
            let t = std::time::Instant::now();
            gmm.gradient_on(&gpu, &alphas, &means, &icf, &x)
                .expect("the gradient on the GPU");
            eprintln!("  {:.1} µs in all", t.elapsed().as_secs_f64() * 1e6);
        }
    }
}
