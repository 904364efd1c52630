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
