//! The problems written with the slice primitives: the same values as their scalar versions,
//! and tape gradients equal to forward mode and to the hand gradients.

use adjoint::{forward, tape};
use adjoint_bench::problems::{LogSumExp, Logistic, Mlp, Objective};
use adjoint_bench::sec13::{self, network_input};
use adjoint_bench::vectorised::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1.0)
}

fn check<O: Objective>(o: &O, scalar_value: Option<f64>, with_forward: bool) {
    let x = o.input();
    let v: f64 = o.eval(&x);
    if let Some(s) = scalar_value {
        assert!(close(v, s, 1e-12), "{}: {v} vs scalar {s}", o.name());
    }
    let (tv, g) = tape::value_and_grad(|p: &[tape::Var]| o.eval(p), &x);
    assert_eq!(tv, v, "{}: the tape's value is the f64 program's", o.name());
    if with_forward {
        let f = forward::gradient(|p| o.eval(p), &x);
        for (i, (a, b)) in g.iter().zip(&f).enumerate() {
            assert!(
                close(*a, *b, 1e-10),
                "{} [{i}]: tape {a} vs forward {b}",
                o.name()
            );
        }
    }
    let mut h = vec![0.0; x.len()];
    if o.hand_gradient(&x, &mut h) {
        for (i, (a, b)) in g.iter().zip(&h).enumerate() {
            assert!(
                close(*a, *b, 1e-10),
                "{} [{i}]: tape {a} vs hand {b}",
                o.name()
            );
        }
    }
}

#[test]
fn table2_vector_versions() {
    let l = LogSumExp { n: 1000 };
    check(&LogSumExpV { n: 1000 }, Some(l.eval(&l.input())), false);
    let lg = Logistic::new(10, 100);
    check(&LogisticV(lg.clone()), Some(lg.eval(&lg.input())), true);
    let m = Mlp::new(50, 8, 5);
    check(&MlpV(m.clone()), Some(m.eval(&m.input())), false);
}

#[test]
fn sec13_vector_versions() {
    let d = DotV { n: 1000 };
    check(&d, Some(sec13::dot(&d.input())), false);
    let m = MatvecV { n: 30 };
    check(&m, Some(sec13::matvec_sum(&m.input(), 30)), false);
    let x = network_input();
    check(&NetworkV, Some(sec13::network_sum(&x)), false);
    // The network has no hand gradient: compare with the scalar version on the tape.
    let g = tape::grad(|p: &[tape::Var]| NetworkV.eval(p), &x);
    let s = tape::grad(|p: &[tape::Var]| sec13::network_sum(p), &x);
    for (a, b) in g.iter().zip(&s) {
        assert!(close(*a, *b, 1e-10), "{a} vs {b}");
    }
}
