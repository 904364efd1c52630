//! The map-chain benchmark's array programs compute what the hand-fused loop computes, and the
//! gradient of the sum matches the hand derivative of the chain.

use adjoint_bench::arraybench::{chain_programs, hand_fused};

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
