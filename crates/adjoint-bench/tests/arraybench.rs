//! The map-chain benchmark's array programs compute what the hand-fused loop computes, and the
//! gradient of the sum matches the hand derivative of the chain.

use adjoint::array::{DType, Input};
use adjoint_bench::arraybench::{self, chain_programs, chain_programs_of, hand_fused};
use adjoint_bench::registry;

#[test]
fn chain_program_equals_the_hand_fused_loop_and_its_gradient_the_hand_derivative() {
    let n = 5000;
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 1e-3).sin()).collect();
    let mut hand = vec![0.0; n];
    hand_fused(&x, &mut hand);
    let (objective, gradient) = chain_programs(n);
    assert_eq!(objective.run(&[&x]).unwrap()[0].data(), &hand[..]);
    let g = gradient.gradient_a(&[&x]).unwrap();
    for (i, (&gi, &xi)) in g.grads[0].iter().zip(&x).enumerate() {
        // d/dx of 3·max((1.5x + 0.25)² − 0.5, 0.1) − 1
        let u = 1.5 * xi + 0.25;
        let want = if u * u - 0.5 > 0.1 {
            3.0 * 2.0 * u * 1.5
        } else {
            0.0
        };
        assert!(
            (gi - want).abs() <= 1e-12 * want.abs().max(1.0),
            "{i}: {gi} vs {want}"
        );
    }
}

/// The `f32` chain computes the chain in plain `f32` (its constants rounded once), and its
/// gradient is the `f64` one to `f32` accuracy.
#[test]
fn the_f32_chain_is_plain_f32_arithmetic() {
    let n = 5000;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 * 1e-3).sin()).collect();
    let (objective, gradient) = chain_programs_of(n, DType::F32);
    let out = objective.run_typed(&[Input::F32(&x)]).unwrap();
    let want: Vec<f32> = x
        .iter()
        .map(|&v| {
            let v = v * 1.5 + 0.25;
            let v = v * v;
            let v = v - 0.5;
            let v = v.max(0.1);
            v * 3.0 - 1.0
        })
        .collect();
    assert_eq!(out[0].as_f32().unwrap(), &want[..]);
    let g = gradient.gradient_typed(&[Input::F32(&x)]).unwrap().grads[0].to_f64_vec();
    let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
    let g64 = chain_programs(n).1.gradient_a(&[&x64]).unwrap().grads[0].clone();
    for (i, (a, b)) in g.iter().zip(&g64).enumerate() {
        assert!(
            (a - b).abs() <= 1e-5 * b.abs().max(1.0),
            "{i}: f32 {a} vs f64 {b}"
        );
    }
}

/// The array column of the registered problems (Rosenbrock, the vector dot product) against
/// each problem's reference column (the hand gradient).
#[test]
fn array_column_agrees_with_the_reference_column_of_every_problem_it_has() {
    let mut n = 0;
    for p in registry(true) {
        let Some(mut col) = arraybench::column(&p) else {
            continue;
        };
        let x = p.input.clone();
        let mut g = vec![0.0; x.len()];
        (col.run)(&x, &mut g);
        let mut r = vec![0.0; x.len()];
        let mut reference = p.columns.into_iter().next().expect("a reference column");
        assert_eq!(reference.engine, "hand", "{} {}", p.name, p.size);
        (reference.run)(&x, &mut r);
        for (i, (a, b)) in g.iter().zip(&r).enumerate() {
            assert!(
                (a - b).abs() <= 1e-10 * b.abs().max(1.0),
                "{} {} [{i}]: array {a} vs hand {b}",
                p.name,
                p.size
            );
        }
        n += 1;
    }
    assert_eq!(n, 4, "Rosenbrock at three sizes and the vector dot product");
}
