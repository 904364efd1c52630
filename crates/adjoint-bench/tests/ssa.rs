//! The SSA transform's bench column computes the same functions as the other engines: its
//! gradients against forward mode (via the problems' generic objectives) and the tape.

use adjoint::forward;
use adjoint_bench::adbench::{ba, gmm, io, Engine, Tape};
use adjoint_bench::registry;
use adjoint_bench::ssabench::{self, Ssa};

#[test]
fn ssa_column_agrees_with_the_reference_column_of_every_problem_it_has() {
    let mut n = 0;
    for mut p in registry(true) {
        let Some(mut col) = ssabench::column(&p) else {
            continue;
        };
        if p.input.len() > 200_000 {
            continue; // dot n = 10⁵ and matvec 1000²: same code as the smaller rows, slow in debug
        }
        let x = p.input.clone();
        let mut g = vec![0.0; x.len()];
        (col.run)(&x, &mut g);
        let mut r = vec![0.0; x.len()];
        (p.columns[0].run)(&x, &mut r);
        for (i, (a, b)) in g.iter().zip(&r).enumerate() {
            assert!(
                (a - b).abs() <= 1e-10 * b.abs().max(1.0),
                "{} {} [{i}]: ssa {a} vs {} {b}",
                p.name,
                p.size,
                p.columns[0].engine
            );
        }
        n += 1;
    }
    assert!(n >= 7, "only {n} problems have an SSA column");
}

#[test]
fn ssa_gmm_and_ba_agree_with_forward_mode_and_the_tape() {
    let g = io::generate_gmm(4, 3, 50, 9);
    let p = g.params();
    let mut a = vec![0.0; p.len()];
    let va = gmm::gmm_gradient(&Ssa, &g, &p, &mut a);
    let reference = forward::gradient(|v| gmm::gmm_objective(&g, v), &p);
    assert!((va - gmm::gmm_objective(&g, &p)).abs() <= 1e-10 * va.abs());
    for (x, y) in a.iter().zip(&reference) {
        assert!((x - y).abs() <= 1e-9 * y.abs().max(1.0), "{x} vs {y}");
    }
    let b = io::parse_ba(&io::write_ba(3, 5, 20), "t").unwrap();
    let (js, jt) = (ba::ba_jacobian(&Ssa, &b), ba::ba_jacobian(&Tape, &b));
    for (x, y) in js.vals.iter().zip(&jt.vals) {
        assert!((x - y).abs() <= 1e-10 * y.abs().max(1.0), "{x} vs {y}");
    }
    // The small-angle branch of the rotation (θ² = 0).
    let mut input = [0.3; 15];
    input[..3].copy_from_slice(&[0.0, 0.0, 0.0]);
    input[13] = 2.0;
    let feat = [0.1, 0.2];
    let (s, t) = (Ssa.ba_block(&input, &feat), Tape.ba_block(&input, &feat));
    for (x, y) in s.iter().flatten().zip(t.iter().flatten()) {
        assert!((x - y).abs() <= 1e-12 * y.abs().max(1.0), "{x} vs {y}");
    }
}

/// Every benchmark function of the SSA column against forward mode over its generated generic
/// `primal` and finite differences (independent of the other columns), at sizes small enough for
/// debug builds.
#[test]
fn ssa_benchmark_functions_match_forward_mode_and_finite_differences() {
    use adjoint::check::check_gradient;
    use adjoint_bench::problems::{uniform, Logistic, Mlp};
    use ssabench::*;
    let close = |g: &[f64], want: &[f64], what: &str| {
        for (i, (a, b)) in g.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-10 * b.abs().max(1.0),
                "{what} [{i}]: {a} vs {b}"
            );
        }
    };
    // sincos and the power loop: closed forms.
    let mut d = 0.0;
    assert_eq!(sincos::grad(0.7, &mut d), sincos(0.7));
    assert!((d + 0.7f64.cos().cos() * 0.7f64.sin()).abs() < 1e-15);
    let v = pow_loop::grad(1.0005, 1000, &mut d);
    assert!(
        (v - 1.0005f64.powi(1000)).abs() < 1e-12 && (d - 1000.0 * 1.0005f64.powi(999)).abs() < 1e-9
    );
    pow_loop::grad(3.0, 0, &mut d);
    assert_eq!(d, 0.0);
    // Slices.
    let x: Vec<f64> = uniform(1, 50).iter().map(|u| 0.5 + u).collect();
    let mut g = vec![0.0; 50];
    rosenbrock::grad(&x, &mut g);
    close(
        &g,
        &forward::gradient(|v| rosenbrock::primal(v), &x),
        "rosenbrock",
    );
    check_gradient(|v| rosenbrock(v), &x, &g).assert_passed();
    logsumexp::grad(&x, &mut g);
    close(
        &g,
        &forward::gradient(|v| logsumexp::primal(v), &x),
        "logsumexp",
    );
    let (a, b) = x.split_at(25);
    let (mut ga, mut gb) = (vec![0.0; 25], vec![0.0; 25]);
    dot::grad(a, b, &mut ga, &mut gb);
    close(&ga, b, "dot");
    close(&gb, a, "dot");
    let (m, v) = (uniform(2, 49), uniform(3, 7));
    let (mut gm, mut gv) = (vec![0.0; 49], vec![0.0; 7]);
    matvec_sum::grad(&m, &v, &mut gm, &mut gv);
    for i in 0..7 {
        close(&gm[i * 7..i * 7 + 7], &v, "matvec dM");
        let col: f64 = (0..7).map(|r| m[r * 7 + i]).sum();
        close(&[gv[i]], &[col], "matvec dv");
    }
    // Data-carrying problems.
    let l = Logistic::new(10, 100);
    let p = uniform(5, 11);
    let mut g = vec![0.0; 11];
    logistic::grad(&p, &l.xs, &l.ys, l.d, &mut g);
    close(
        &g,
        &forward::gradient(|p| logistic::primal(p, &l.xs, &l.ys, l.d), &p),
        "logistic",
    );
    let mlp_p = Mlp::new(20, 32, 10);
    let p: Vec<f64> = uniform(7, mlp_p.n_params())
        .iter()
        .map(|u| 0.2 * u)
        .collect();
    let mut g = vec![0.0; p.len()];
    mlp::grad(&p, &mlp_p.image, mlp_p.label, &mut g);
    check_gradient(|p| mlp(p, &mlp_p.image, mlp_p.label), &p, &g).assert_passed();
    let x = adjoint_bench::sec13::network_input();
    let mut g = vec![0.0; x.len()];
    network::grad(&x, &mut g);
    let idx = [0, 17, 5000, x.len() - 1];
    for &i in &idx {
        let mut e = vec![0.0; x.len()];
        e[i] = 1.0;
        let (_, t) = forward::jvp(|v| vec![network::primal(v)], &x, &e);
        close(&[g[i]], &t, "network");
    }
}
