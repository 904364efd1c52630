//! Property tests on random combinator programs (gradient vs finite differences), and
//! bit-identity of values and gradients across thread counts.

use adjoint_array::models::Gmm;
use adjoint_array::{lit, Acc, Builder, Combine, Program, Rep};
use adjoint_core::check::{check_gradient_with, CheckOptions};
use proptest::prelude::*;

mod common;
use common::{bits, in_pool};

/// A random program over one input of length `n`: a chain of steps chosen by `ops`, each
/// combining the current array with earlier ones, ending in a sum.
fn random_program(n: usize, ops: &[u8]) -> Program {
    let b = Builder::new();
    let x = b.input(&[n]);
    let mut pool: Vec<Acc> = vec![x.clone()];
    for (s, &op) in ops.iter().enumerate() {
        let cur = pool.last().unwrap().clone();
        let other = pool[s % pool.len()].clone();
        let next = match op % 10 {
            0 => cur.map(|v| v.sin() * 1.3 + 0.1),
            1 => cur.zip_with(&other, |p, q| p * q + p),
            2 => cur.map(|v| (v * 0.5).tanh()),
            3 => {
                let r = cur.replicate(&[Rep::New(3), Rep::All]);
                r.map(|v| v * v)
                    .sum()
                    .sum()
                    .map(|v| v * 0.3)
                    .reshape(&[1])
                    .replicate(&[Rep::All, Rep::New(n)])
                    .reshape(&[n])
                    .zip_with(&cur, |p, q| p * 0.1 + q)
            }
            4 => cur
                .scanl(0.0, |a, v| a + v)
                .backpermute(&[n], |i| vec![i[0] + 1.0])
                .map(|v| v * 0.2),
            5 => cur.backpermute(&[n], |i| vec![lit((n - 1) as f64) - i[0]]),
            6 => {
                let c2 = cur.clone();
                b.generate(&[n], |i| {
                    let j = (i[0] + 1.0).imod(n as f64);
                    c2.at(&[i[0]]) * 0.7 + c2.at(&[j]).cos()
                })
            }
            7 => {
                let d = b.generate(&[2], |_| lit(0.5));
                let h = cur.permute(Combine::Add, &d, |i| (lit(1.0), vec![i[0].imod(2.0)]));
                let h2 = h.clone();
                cur.map(|v| v * h2.at(&[lit(0.0)]) + h2.at(&[lit(1.0)]))
            }
            9 => {
                // a two-number recurrence per element, reading another array at a
                // step-dependent index
                let (c2, o2) = (cur.clone(), other.clone());
                let path = b.scan_n(
                    &[n],
                    3,
                    2,
                    |i| vec![c2.at(i), lit(0.5)],
                    |i, s| {
                        let j = (i[0] + i[1]).imod(n as f64);
                        vec![
                            s[0] * 0.6 + (s[1] * o2.at(&[j])).sin(),
                            s[1] * 0.9 + s[0] * 0.1,
                        ]
                    },
                );
                b.generate(&[n], |i| {
                    path.at(&[lit(3.0), i[0], lit(0.0)]) + path.at(&[lit(1.0), i[0], lit(1.0)])
                })
            }
            _ => {
                let m = cur.reshape(&[1, n]).fold(0.0, |a, v| a * 0.5 + v);
                let m2 = m.clone();
                cur.map(|v| v + m2.at(&[lit(0.0)]) * 0.1)
            }
        };
        pool.push(next);
    }
    let out = pool.last().unwrap().map(|v| v * v).sum();
    b.build_scalar(&out).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn random_programs_match_finite_differences(
        ops in prop::collection::vec(any::<u8>(), 1..6),
        x in prop::collection::vec(-1.0f64..1.0, 4..7),
    ) {
        let p = random_program(x.len(), &ops);
        let g = p.gradient_a(&[&x]).unwrap();
        let f = |v: &[f64]| p.run(&[v]).unwrap()[0].data()[0];
        prop_assert_eq!(f(&x), g.value);
        // Finite differences cancel in f's rounding: chains of `p·q + p` reach |f| ~ 10⁶, where
        // a coordinate with a small partial is only known to ~ε·|f|/h (forward mode agreed to
        // 16 digits on such a case, ops [127, 14, 145, 199, 91]). The absolute tolerance grows
        // with |f|; for |f| ~ 1 it is the default.
        let opts = CheckOptions {
            atol: 1e-8 + 1e-11 * g.value.abs(),
            ..CheckOptions::default()
        };
        let rep = check_gradient_with(f, &x, &g.grads[0], &opts);
        // Such chains also feed `sin` arguments ~10⁸, so f oscillates on a scale of 10⁻⁶ and
        // Ridders' steps from 0.1 down to 10⁻⁴ all straddle oscillations (ops [47, 117, 101,
        // 47, 109] at x = (0, 0, 0, 0.3033): ∂f/∂x₁ = 2.92689e8; central differences give
        // 3.16e6 at h = 10⁻², 2.85e8 at 10⁻⁶, 2.92598e8 at 10⁻⁷, 2.92688e8 at 10⁻⁸). Where the
        // default steps disagree, Ridders from 10⁻⁵ and from 10⁻⁷ are asked too: a wrong
        // partial disagrees with the true derivative at every step.
        let rep = if rep.passed() {
            rep
        } else {
            [1e-5, 1e-7]
                .into_iter()
                .map(|step| check_gradient_with(f, &x, &g.grads[0], &CheckOptions { step, ..opts.clone() }))
                .find(|r| r.passed())
                .unwrap_or(rep)
        };
        prop_assert!(rep.passed(), "{}", rep);
    }
}

#[test]
fn steep_and_oscillating_random_programs_match_small_step_differences() {
    // The two cases of `random_programs_match_finite_differences` whose default finite
    // differences were off (steep at x = 0, oscillating at 10⁻⁶ at the second point), against
    // Ridders from 10⁻⁷.
    let p = random_program(4, &[47, 117, 101, 47, 109]);
    for x in [[0.0; 4], [0.0, 0.0, 0.0, 0.30330058274509547]] {
        let g = p.gradient_a(&[&x]).unwrap();
        let f = |v: &[f64]| p.run(&[v]).unwrap()[0].data()[0];
        let opts = CheckOptions {
            step: 1e-7,
            atol: 1e-8 + 1e-11 * g.value.abs(),
            ..CheckOptions::default()
        };
        let rep = check_gradient_with(f, &x, &g.grads[0], &opts);
        assert!(rep.passed(), "{rep}");
    }
}

#[test]
fn gmm_is_bit_identical_for_any_thread_count() {
    let (n, d, k) = (3000, 4, 6);
    let icf_sz = d * (d + 1) / 2;
    let mut s = 7u64;
    let mut rnd = |sc: f64| {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0) * sc
    };
    let a: Vec<f64> = (0..k).map(|_| rnd(1.0)).collect();
    let m: Vec<f64> = (0..k * d).map(|_| rnd(1.0)).collect();
    let q: Vec<f64> = (0..k * icf_sz).map(|_| rnd(0.3)).collect();
    let x: Vec<f64> = (0..n * d).map(|_| rnd(1.0)).collect();
    let gmm = Gmm::new(n, d, k, 1.0, 0.0).unwrap();
    let run = || gmm.gradient(&a, &m, &q, &x).unwrap();
    let (v1, g1) = in_pool(1, run);
    for t in [2, 4] {
        let (v, g) = in_pool(t, run);
        assert_eq!(v.to_bits(), v1.to_bits(), "{t} threads");
        assert_eq!(bits(&g), bits(&g1), "{t} threads");
    }
}

#[test]
fn sums_scatters_and_scans_are_bit_identical_for_any_thread_count() {
    let n = 200_000;
    let b = Builder::new();
    let x = b.input(&[n]);
    let w = b.input(&[64]);
    let y = b.generate(&[n], |i| {
        let k = i[0].imod(64.0);
        (x.at(&[i[0]]) * w.at(&[k])).sin()
    });
    let s = y
        .reshape(&[400, 500])
        .scanl(0.0, |a, v| a + v)
        .sum()
        .map(|v| v * 1e-3);
    let h = y.permute(Combine::Add, &w, |i| (lit(1.0), vec![i[0].imod(64.0)]));
    let out = s.sum().zip_with(&h.map(|v| v * v).sum(), |p, q| p + q);
    let p = b.build_scalar(&out).unwrap();
    let xs: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let ws: Vec<f64> = (0..64).map(|i| 0.5 + i as f64 * 0.01).collect();
    let run = || p.gradient_a(&[&xs, &ws]).unwrap();
    let g1 = in_pool(1, run);
    for t in [2, 4] {
        let g = in_pool(t, run);
        assert_eq!(g.value.to_bits(), g1.value.to_bits());
        assert_eq!(bits(&g.grads[0]), bits(&g1.grads[0]));
        assert_eq!(bits(&g.grads[1]), bits(&g1.grads[1]));
    }
}

#[test]
fn errors_name_shapes_and_indices() {
    use adjoint_array::Error;
    let b = Builder::new();
    let a = b.input(&[3]);
    let c = b.input(&[4]);
    let z = a.zip_with(&c, |p, q| p + q);
    match b.build(&[&z]) {
        Err(Error::ShapeMismatch {
            combinator,
            left,
            right,
        }) => {
            assert_eq!((combinator, left, right), ("zip_with", vec![3], vec![4]));
        }
        other => panic!("{other:?}"),
    }
    // `zip_with_n` names itself (it said `zip_with`; a hunter): the first array's shape, then
    // the first that differs
    let b = Builder::new();
    let (x, y, z) = (b.input(&[3]), b.input(&[4]), b.input(&[3]));
    let w = b.zip_with_n(&[&x, &z, &y], |v| v[0] + v[1] + v[2]);
    match b.build(&[&w]) {
        Err(Error::ShapeMismatch {
            combinator,
            left,
            right,
        }) => {
            assert_eq!((combinator, left, right), ("zip_with_n", vec![3], vec![4]));
        }
        other => panic!("{other:?}"),
    }
    let b = Builder::new();
    let a = b.input(&[3]);
    let g = b.generate(&[3], |i| a.at(&[i[0] * 2.0]));
    let p = b.build(&[&g]).unwrap();
    match p.run(&[&[1.0, 2.0, 3.0]]) {
        Err(Error::OutOfBounds { index, shape, .. }) => {
            assert_eq!((index, shape), (vec![4.0], vec![3]));
        }
        other => panic!("{other:?}"),
    }
    let b = Builder::new();
    let a = b.input(&[3]);
    let d = b.generate(&[2], |_| lit(0.0));
    let h = a.permute(Combine::Add, &d, |i| (lit(1.0), vec![i[0]]));
    let p = b.build(&[&h]).unwrap();
    assert!(matches!(
        p.run(&[&[1.0, 2.0, 3.0]]),
        Err(Error::OutOfBounds {
            context: "permute",
            ..
        })
    ));
    let b = Builder::new();
    let a = b.input(&[3]);
    let m = a.map(|v| v * 2.0);
    assert!(matches!(b.build_scalar(&m), Err(Error::NonScalarOutput(_))));
    let p = b.build(&[&m]).unwrap();
    assert!(matches!(
        p.gradient_a(&[&[1.0, 2.0, 3.0]]),
        Err(Error::NonScalarOutput(_))
    ));
    assert!(matches!(p.run(&[&[1.0]]), Err(Error::InputSize { .. })));
    // A seed of the wrong size is the seed's error, not the input's.
    let e = p.vjp(&[&[1.0, 2.0, 3.0]], &[&[1.0]]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::SeedSize {
                index: 0,
                expected: 3,
                got: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("seed 0"), "{e}");
    let e = p.vjp(&[&[1.0, 2.0, 3.0]], &[]).unwrap_err();
    assert!(
        matches!(
            e,
            Error::SeedCount {
                expected: 1,
                got: 0
            }
        ),
        "{e}"
    );
}

#[test]
fn an_awhile_body_of_the_wrong_shape_names_the_array() {
    // The count, or the first state array whose shape changed, with both shapes (not every
    // shape run together, which read alike for different mistakes).
    let b = Builder::new();
    let x = b.input(&[2]);
    let y = b.input(&[3]);
    let o = b.awhile(
        &[&x, &y],
        &[],
        |s, _| s[0].sum().map(|t| t.lt(1.0)),
        |s, _| vec![s[0].map(|v| v + 1.0)],
    );
    let e = b.build(&[&o[0].sum()]).unwrap_err().to_string();
    assert!(e.contains("returned 1 arrays for a state of 2"), "{e}");
    let b = Builder::new();
    let x = b.input(&[2]);
    let y = b.input(&[3]);
    let o = b.awhile(
        &[&x, &y],
        &[],
        |s, _| s[0].sum().map(|t| t.lt(1.0)),
        |s, _| vec![s[0].map(|v| v + 1.0), s[0].map(|v| v * 2.0)],
    );
    let e = b.build(&[&o[0].sum()]).unwrap_err();
    assert!(
        matches!(&e, adjoint_array::Error::ShapeMismatch { left, right, .. } if *left == vec![3] && *right == vec![2]),
        "{e}"
    );
}

#[test]
fn build_once_run_many() {
    let b = Builder::new();
    let a = b.input(&[5]);
    let s = a.map(|v| v.exp()).sum();
    let p = b.build_scalar(&s).unwrap();
    for k in 0..5 {
        let x: Vec<f64> = (0..5).map(|i| (i + k) as f64 * 0.1).collect();
        let g = p.gradient_a(&[&x]).unwrap();
        let e: Vec<f64> = x.iter().map(|v| v.exp()).collect();
        assert_eq!(g.grads[0], e);
    }
}

#[test]
fn arrays_add_subtract_multiply_and_divide_with_operators() {
    // Σ ((x + y)·x − y / x): ∂/∂x = 2x + y + y/x², ∂/∂y = x − 1/x (closed forms).
    let b = Builder::new();
    let x = b.input(&[3]);
    let y = b.input(&[3]);
    let f = (&x + &y) * x.clone() - y.clone() / x.clone();
    let p = b.build_scalar(&f.sum()).unwrap();
    let (xv, yv) = ([1.0, 2.0, -3.0], [0.5, -0.25, 2.0]);
    let g = p.gradient_a(&[&xv, &yv]).unwrap();
    for i in 0..3 {
        let (a, c) = (xv[i], yv[i]);
        assert!((g.grads[0][i] - (2.0 * a + c + c / (a * a))).abs() < 1e-14);
        assert!((g.grads[1][i] - (a - 1.0 / a)).abs() < 1e-14);
    }
    // a shape mismatch names both shapes
    let b = Builder::new();
    let x = b.input(&[3]);
    let y = b.input(&[2]);
    let e = b.build_scalar(&(x + y).sum()).unwrap_err().to_string();
    assert!(e.contains("[3]") && e.contains("[2]"), "{e}");
}
