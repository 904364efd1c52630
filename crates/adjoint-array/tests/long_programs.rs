//! Programs of many arrays, as an unrolled loop writes them (a hunter): a chain of 2000 arrays
//! overflowed a pool thread's stack (the executor recursed once per operand), and fusing a
//! chain of maps kept a copy of everything upstream at every link (and then copied it at every
//! link: 2.4 s to build 4000 maps, 5 ms now). And `imod`, whose derivative was 0 (a wrapped
//! angle lost its gradient).

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

#[test]
fn fused_producers_keep_their_operands_in_place() {
    // Each producer below is used once, so it is moved into its consumer, whose parameters are
    // renumbered (the producer's first): the dying producer as the first and as the second
    // operand of a non-commutative `zip_with`, a producer of two arrays, and a consumer that
    // ignores the producer's value (copied instead, as nothing of it is reachable).
    let b = Builder::new();
    let (x, y, z) = (b.input(&[3]), b.input(&[3]), b.input(&[3]));
    let p = x.zip_with(&y, |u, v| u * v - v); // two parameters
    let q = z.map(|w| w.sin() + 2.0);
    let r = p.zip_with(&q, |a, c| a / c); // both operands die here: (p, q)
    let s = y.map(|v| v * v).zip_with(&r, |m, n| m - 3.0 * n); // dying first operand
    let t = x.zip_with(&s.map(|e| e.exp()), |a, e| a - e); // dying second operand
    let u = t.zip_with(&z.map(|w| w * 10.0), |a, _| a * 0.5); // ignored operand
    let prog = b.build_scalar(&u.sum()).unwrap();
    let f = |x: f64, y: f64, z: f64| {
        let r = (x * y - y) / (z.sin() + 2.0);
        0.5 * (x - (y * y - 3.0 * r).exp())
    };
    let (xs, ys, zs) = ([0.3, -0.7, 1.1], [0.5, 0.2, -0.4], [0.9, -1.3, 2.0]);
    let g = prog.gradient_a(&[&xs, &ys, &zs]).unwrap();
    let want: f64 = (0..3).map(|i| f(xs[i], ys[i], zs[i])).sum();
    assert!(
        (g.value - want).abs() < 1e-14 * want.abs().max(1.0),
        "{} vs {want}",
        g.value
    );
    // closed-form partials of f
    for i in 0..3 {
        let (x, y, z) = (xs[i], ys[i], zs[i]);
        let d = z.sin() + 2.0;
        let r = (x * y - y) / d;
        let e = (y * y - 3.0 * r).exp();
        let dx = 0.5 * (1.0 + 3.0 * e * y / d);
        let dy = -0.5 * e * (2.0 * y - 3.0 * (x - 1.0) / d);
        let dz = -0.5 * e * 3.0 * r * z.cos() / d;
        for (k, want) in [dx, dy, dz].into_iter().enumerate() {
            let got = g.grads[k][i];
            assert!(
                (got - want).abs() < 1e-12,
                "input {k}[{i}]: {got} vs {want}"
            );
        }
    }
}
