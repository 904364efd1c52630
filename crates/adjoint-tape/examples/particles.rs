//! A profiling and scaling target: the tape's parallel reverse pass on seed 003's particles,
//! 256 of them × 1000 steps in a balanced tree of `join`s (the bench's particles-large row), the
//! gradient alone, timed at the thread counts given:
//! `cargo run --release -p adjoint-tape --example particles -- 1 2 4 8 16`
//! (median and minimum of 20 calls after 5 warm-up calls on one reused `Tape`).
use adjoint_tape::{join, Tape, Var};
use std::time::Instant;

fn particle(s: &[Var]) -> Var {
    let (mut x, mut y, mut vx, mut vy) = (s[0], s[1], s[2], s[3]);
    let dt = 0.05;
    for _ in 0..1000 {
        let ax = x * -0.5 - vx * 0.2;
        let ay = y * -0.5 - vy * 0.2;
        vx += ax * dt;
        vy += ay * dt;
        x += vx * dt;
        y += vy * dt;
    }
    x * y
}

fn particles(s: &[Var]) -> Var {
    if s.len() == 4 {
        return particle(s);
    }
    let (l, r) = s.split_at(s.len() / 2);
    let (a, b) = join(|| particles(l), || particles(r));
    a + b
}

fn main() {
    let mut threads: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("thread counts"))
        .collect();
    if threads.is_empty() {
        threads = vec![1, 2];
    }
    let x: Vec<f64> = (1..=256)
        .flat_map(|i| [0.5 * i as f64, 0.1, 1.0, 1.0])
        .collect();
    let mut g = vec![0.0; x.len()];
    for &n in &threads {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .expect("a thread pool");
        let mut tape = Tape::new();
        let mut ms = Vec::new();
        pool.install(|| {
            for call in 0..25 {
                let t = Instant::now();
                tape.grad_into(particles, &x, &mut g);
                if call >= 5 {
                    ms.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
        });
        ms.sort_by(f64::total_cmp);
        println!(
            "{n:2} thread(s): median {:.3} ms, min {:.3} ms (dL/dx0 = {:e})",
            ms[ms.len() / 2],
            ms[0],
            g[0]
        );
    }
}
