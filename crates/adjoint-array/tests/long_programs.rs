//! Programs of many arrays, as an unrolled loop writes them (a hunter): a chain of 2000 arrays
//! overflowed a pool thread's stack (the executor recursed once per operand), and fusing a
//! chain of maps kept a copy of everything upstream at every link. And `imod`, whose
//! derivative was 0 (a wrapped angle lost its gradient).

use adjoint_array::Builder;

#[test]
fn an_explicit_euler_loop_of_2000_steps_runs_and_differentiates() {
    // dx/dt = −x³, dt = 0.001: each step an array of its own (x is used twice: not fused away)
    let (steps, dt, x0) = (2000, 0.001, 0.5);
    let b = Builder::new();
    let xs = b.input(&[8]);
    let mut x = xs.clone();
    for _ in 0..steps {
        x = &x + &(x.map(|v| -v * v * v) * dt);
    }
    let p = b.build_scalar(&x.sum()).unwrap();
    // the same loop in plain Rust, and its derivative by the chain rule
    let (mut v, mut d) = (x0, 1.0);
    for _ in 0..steps {
        d *= 1.0 - 3.0 * dt * v * v;
        v += -v * v * v * dt;
    }
    let got = p.run(&[&[x0; 8]]).unwrap()[0].data()[0];
    assert!((got - 8.0 * v).abs() < 1e-12, "{got} vs {}", 8.0 * v);
    let g = p.gradient_a(&[&[x0; 8]]).unwrap();
    for gi in &g.grads[0] {
        assert!((gi - d).abs() < 1e-12, "{gi} vs {d}");
    }
}

#[test]
fn a_chain_of_3000_fused_maps() {
    let b = Builder::new();
    let x = b.input(&[4]);
    let mut y = x.clone();
    for _ in 0..3000 {
        y = y.map(|v| v * 0.9999 + 0.0001);
    }
    let p = b.build_scalar(&y.sum()).unwrap();
    let xs = [1.0, 2.0, 3.0, 4.0];
    let plain: f64 = xs
        .iter()
        .map(|&v| (0..3000).fold(v, |a, _| a * 0.9999 + 0.0001))
        .sum();
    let g = p.gradient_a(&[&xs]).unwrap();
    assert!((g.value - plain).abs() < 1e-12);
    for gi in &g.grads[0] {
        assert!((gi - 0.9999f64.powi(3000)).abs() < 1e-12);
    }
}

#[test]
fn imod_has_the_derivative_of_its_formula() {
    use std::f64::consts::PI;
    let b = Builder::new();
    let x = b.input(&[4]);
    let c = b.input(&[4]);
    let y = x.zip_with(&c, |v, m| v.imod(m).sin());
    let p = b.build_scalar(&y.sum()).unwrap();
    let (xs, cs) = ([1.0, 7.0, -2.0, 20.0], [2.0 * PI, 2.0 * PI, 2.0 * PI, 3.0]);
    let g = p.gradient_a(&[&xs, &cs]).unwrap();
    for i in 0..4 {
        let r = xs[i].rem_euclid(cs[i]);
        // d/dx sin(x − c⌊x/c⌋) = cos r; d/dc = −⌊x/c⌋ cos r
        assert!((g.grads[0][i] - r.cos()).abs() < 1e-12, "[{i}]");
        let k = (xs[i] / cs[i]).floor();
        assert!((g.grads[1][i] + k * r.cos()).abs() < 1e-12, "[{i}]");
    }
}
