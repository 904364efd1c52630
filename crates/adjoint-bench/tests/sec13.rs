//! The seed 003 §13 programs: tape gradients against forward mode and finite differences, the
//! particle gradient bit-identical across thread counts, and the peers' gradients in agreement.

use adjoint::check::{check_gradient, numeric_derivative};
use adjoint::forward::{self, Dual64};
use adjoint_bench::sec13::*;
use adjoint_tape::{Tape, Var};

fn close(a: f64, b: f64, rtol: f64) -> bool {
    (a - b).abs() <= rtol * a.abs().max(b.abs()).max(1.0)
}

fn assert_close(a: &[f64], b: &[f64], rtol: f64, what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(close(*x, *y, rtol), "{what}[{i}]: {x} vs {y}");
    }
}

fn tape_grad(f: impl FnOnce(&[Var]) -> Var, x: &[f64]) -> Vec<f64> {
    adjoint_tape::grad(f, x)
}

#[test]
fn scalar_dot_matvec_agree_with_forward_and_fd() {
    let x = [1.5, -2.5];
    let g = tape_grad(|v| scalar_mul(v), &x);
    assert_eq!(g, vec![-2.5, 1.5]);

    let x = adjoint_bench::problems::uniform(3, 200);
    let g = tape_grad(|v| dot(v), &x);
    assert_close(&g, &forward::gradient(|v| dot(v), &x), 1e-14, "dot");
    check_gradient(|v| dot(v), &x, &g).assert_passed();

    let n = 12;
    let x = adjoint_bench::problems::uniform(4, n * n + n);
    let g = tape_grad(|v| matvec_sum(v, n), &x);
    assert_close(
        &g,
        &forward::gradient(|v| matvec_sum(v, n), &x),
        1e-14,
        "matvec",
    );
    check_gradient(|v| matvec_sum(v, n), &x, &g).assert_passed();
}

#[test]
fn rotate_vec_by_quat_jacobian() {
    let x = [0.3, -1.2, 2.0, 0.9, 0.1, -0.3, 0.35];
    let j = adjoint_tape::jacobian(|v| rotate_vec_by_quat(v), &x);
    for col in 0..7 {
        let mut e = [0.0; 7];
        e[col] = 1.0;
        let (_, t) = forward::jvp(|v| rotate_vec_by_quat(v), &x, &e);
        for row in 0..3 {
            assert!(close(j[row][col], t[row], 1e-14));
        }
    }
    for (row, jr) in j.iter().enumerate() {
        check_gradient(|v| rotate_vec_by_quat(v)[row], &x, jr).assert_passed();
    }
    // A unit quaternion preserves length.
    let s = (0.9f64 * 0.9 + 0.1 * 0.1 + 0.3 * 0.3 + 0.35 * 0.35).sqrt();
    let xu = [0.3, -1.2, 2.0, 0.9 / s, 0.1 / s, -0.3 / s, 0.35 / s];
    let y = rotate_vec_by_quat(&xu);
    let n = |v: &[f64]| v.iter().map(|t| t * t).sum::<f64>();
    assert!((n(&y) - n(&xu[..3])).abs() < 1e-12);
}

/// The paper sums the softmax, which is constant; test a fixed weighted sum instead.
fn weighted_network<T: Num13>(p: &[T]) -> T {
    network(p)
        .into_iter()
        .enumerate()
        .map(|(k, s)| s.mul_c(1.0 + 0.1 * k as f64))
        .reduce(|a, b| a + b)
        .expect("outputs")
}

#[test]
fn network_gradient_matches_forward_and_fd() {
    let x = network_input();
    let g = tape_grad(|v| weighted_network(v), &x);
    // Forward mode on a deterministic sample of coordinates (all 10 200 would take n sweeps),
    // finite differences on a smaller sample.
    let mut xs: Vec<Dual64> = x.iter().map(|&t| Dual64::constant(t)).collect();
    for (k, i) in (0..x.len()).step_by(97).enumerate() {
        xs[i].eps = 1.0;
        let d = weighted_network(&xs).eps;
        xs[i].eps = 0.0;
        assert!(
            close(g[i], d, 1e-12),
            "coordinate {i}: tape {} forward {d}",
            g[i]
        );
        if k % 5 == 0 {
            let (fd, _) = numeric_derivative(
                |t| {
                    let mut y = x.clone();
                    y[i] = t;
                    weighted_network(&y)
                },
                x[i],
                1e-3,
            );
            assert!(
                (g[i] - fd).abs() < 1e-7,
                "coordinate {i}: tape {} fd {fd}",
                g[i]
            );
        }
    }
    assert!(
        g.iter().any(|v| v.abs() > 1e-6),
        "gradient is not trivially zero"
    );
}

#[test]
fn particles_gradient_matches_forward_and_fd() {
    let x = particles_input();
    let g = tape_grad(|v| particles(v, &|a, b| tape_join(a, b)), &x);
    assert_close(
        &g,
        &forward::gradient(|v| particles_seq(v), &x),
        1e-12,
        "particles",
    );
    check_gradient(|v| particles_seq(v), &x, &g).assert_passed();
    let y: f64 = particles(&x, &|a, b| rayon_join(a, b));
    assert_eq!(y, particles_seq(&x));
}

#[test]
fn particles_gradient_is_bit_identical_for_1_2_and_4_threads() {
    let x = particles_input();
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut tape = Tape::new();
        let mut g = vec![0.0; x.len()];
        // several runs per pool: scheduling differs between them
        let mut all = Vec::new();
        for _ in 0..5 {
            pool.install(|| tape.grad_into(|v| particles(v, &|a, b| tape_join(a, b)), &x, &mut g));
            all.push(g.iter().map(|t| t.to_bits()).collect::<Vec<u64>>());
        }
        all
    };
    let one = run(1);
    for threads in [2, 4] {
        for (k, bits) in run(threads).iter().enumerate() {
            assert_eq!(bits, &one[0], "{threads} threads, run {k}");
        }
    }
    // A program whose reverse pass merges shared contributions from many parallel jobs:
    // every particle reads the same shared friction coefficient.
    let shared = |v: &[Var]| {
        let k = v[16];
        let parts = adjoint_tape::par_map(&[0usize, 1, 2, 3, 4, 5, 6, 7], |&i| {
            let s = &v[(i % 4) * 4..(i % 4) * 4 + 4];
            particle(s) * k * (i as f64 + 1.0)
        });
        parts.into_iter().fold(Var::constant(0.0), |a, b| a + b)
    };
    let mut xk = x.clone();
    xk.push(0.7);
    let g = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| adjoint_tape::grad(shared, &xk))
            .iter()
            .map(|t| t.to_bits())
            .collect::<Vec<u64>>()
    };
    let g1 = g(1);
    assert_eq!(g(2), g1);
    assert_eq!(g(4), g1);
    // ... and that gradient is the right one (forward mode, same program without par_map).
    let fwd = forward::gradient(
        |v| {
            (0..8)
                .map(|i| {
                    let s = &v[(i % 4) * 4..(i % 4) * 4 + 4];
                    particle(s) * v[16] * (i as f64 + 1.0)
                })
                .fold(Dual64::constant(0.0), |a, b| a + b)
        },
        &xk,
    );
    let g1: Vec<f64> = g1.into_iter().map(f64::from_bits).collect();
    assert_close(&g1, &fwd, 1e-12, "shared par_map");
}

#[test]
fn peers_agree_with_the_tape() {
    let x = particles_input();
    let ours = tape_grad(|v| particles_seq(v), &x);
    let e = echidna::grad(|v| particles_seq(v), &x);
    assert_close(&e, &ours, 1e-12, "echidna");
    let tape = reverse::Tape::new();
    let vars = tape.add_vars(&x);
    use reverse::Gradient;
    let r = particles_seq(&vars).grad().wrt(&vars);
    assert_close(&r, &ours, 1e-12, "reverse");
    use ad_trait::reverse_ad::adr::adr;
    let vars: Vec<adr> = x
        .iter()
        .enumerate()
        .map(|(i, &v)| adr::new_variable(v, i == 0))
        .collect();
    let y = particles_seq(&vars);
    let gr = y.get_backwards_mode_grad();
    let a: Vec<f64> = vars.iter().map(|v| gr.wrt(v)).collect();
    assert_close(&a, &ours, 1e-12, "ad_trait");
}

#[test]
fn large_particles_gradient_matches_the_sequential_program_and_is_bit_identical_across_threads() {
    use adjoint_bench::sec13::{particles_input_n, PARTICLES_LARGE};
    let x = particles_input_n(PARTICLES_LARGE);
    let run = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| {
                let mut g = vec![0.0; x.len()];
                let y = adjoint_tape::Tape::new().grad_into(
                    |v| particles(v, &|a, b| tape_join(a, b)),
                    &x,
                    &mut g,
                );
                (y, g)
            })
    };
    let (y, g) = run(1);
    assert_eq!(y, particles_seq(&x));
    // Independent reference: echidna's reverse mode on the sequential program.
    let e = echidna::grad(|v| particles_seq(v), &x);
    for (a, b) in g.iter().zip(&e) {
        assert!((a - b).abs() <= 1e-10 * b.abs().max(1.0), "{a} vs {b}");
    }
    for threads in [2, 4] {
        let (y2, g2) = run(threads);
        assert_eq!(y2.to_bits(), y.to_bits());
        assert!(
            g2.iter().zip(&g).all(|(a, b)| a.to_bits() == b.to_bits()),
            "{threads} threads"
        );
    }
}
