//! The slice primitives: `f64`'s vectorised kernels agree with the scalar definitions at every
//! length (tails included), and forward mode differentiates them correctly.

use adjoint_core::check::check_gradient;
use adjoint_core::{forward, vector};

fn v(n: usize, s: f64) -> Vec<f64> {
    (0..n).map(|i| (s + 1.3 * i as f64).sin()).collect()
}

#[test]
fn kernels_agree_with_the_scalar_definitions_at_every_length() {
    for n in [0, 1, 2, 7, 8, 9, 15, 16, 17, 100, 1001] {
        let (a, b) = (v(n, 0.1), v(n, 2.0));
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * y.abs().max(1.0);
        assert!(
            close(vector::dot(&a, &b), vector::scalar::dot(&a, &b)),
            "dot {n}"
        );
        assert!(close(vector::sum(&a), vector::scalar::sum(&a)), "sum {n}");
        if n > 0 {
            assert!(
                close(vector::logsumexp(&a), vector::scalar::logsumexp(&a)),
                "lse {n}"
            );
        } else {
            assert_eq!(vector::logsumexp(&a), f64::NEG_INFINITY);
        }
        let (mut y1, mut y2) = (b.clone(), b.clone());
        vector::axpy(0.7, &a, &mut y1);
        vector::scalar::axpy(0.7, &a, &mut y2);
        assert_eq!(y1, y2);
        let m = v(3 * n, 0.5);
        let (mut o1, mut o2) = (vec![0.0; 3], vec![0.0; 3]);
        vector::matvec(&m, &a, &mut o1);
        vector::scalar::matvec(&m, &a, &mut o2);
        assert!(o1.iter().zip(&o2).all(|(x, y)| close(*x, *y)), "matvec {n}");
    }
}

#[test]
fn forward_mode_gradients_match_finite_differences() {
    let f = |p: &[forward::Dual64]| {
        let (a, b) = p.split_at(9);
        let mut o = vec![forward::Dual64::from(0.0); 3];
        vector::matvec(&a[..9], &b[..3], &mut o);
        vector::logsumexp(&o) + vector::dot(a, &[b, b, b].concat()) * vector::sum(b)
    };
    let g_plain = |p: &[f64]| {
        let (a, b) = p.split_at(9);
        let mut o = vec![0.0; 3];
        vector::matvec(&a[..9], &b[..3], &mut o);
        vector::logsumexp(&o) + vector::dot(a, &[b, b, b].concat()) * vector::sum(b)
    };
    let p = v(12, 0.3);
    let g = forward::gradient(f, &p);
    check_gradient(g_plain, &p, &g).assert_passed();
}
