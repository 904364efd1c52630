use crate::interp::{self, ArgVal};
use crate::lower_str;
use adjoint_core::forward::Dual;

fn grad_check(src: &str, x: &[f64]) {
    let (f, p) = lower_str(src, "").unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}", crate::adjoint::dump(&f, &p));
    let mut args = vec![ArgVal::Floats(x.to_vec())];
    let mut adj = vec![ArgVal::Floats(vec![0.0; x.len()])];
    let (r, _) = interp::adjoint(&f, &p, &mut args, &mut adj, 1.0);
    let ArgVal::Floats(g) = &adj[0] else { panic!() };
    let pr = interp::primal::<f64>(&f, &mut [ArgVal::Floats(x.to_vec())]).unwrap();
    assert_eq!(r.unwrap(), pr);
    for (i, gi) in g.iter().enumerate() {
        let xd: Vec<Dual<f64>> = x
            .iter()
            .enumerate()
            .map(|(j, &v)| Dual::new(v, if i == j { 1.0 } else { 0.0 }))
            .collect();
        let fd = interp::primal::<Dual<f64>>(&f, &mut [ArgVal::Floats(xd)]).unwrap();
        let e = fd.eps;
        assert!(
            (gi - e).abs() <= 1e-10 * (1.0 + e.abs()),
            "coordinate {i}: adjoint {} vs forward {}",
            g[i],
            e
        );
    }
}

#[test]
fn pow_loop() {
    grad_check(
        "fn f(x: &[f64]) -> f64 { let mut r = 1.0; let mut n = 3; while n > 0 { r = r * x[0]; n -= 1; } r }",
        &[1.7],
    );
}

#[test]
fn branchy() {
    grad_check(
        "fn f(x: &[f64]) -> f64 { let mut s = 0.0; for i in 0..x.len() { if x[i] > 0.0 { s += x[i].sin() * x[i]; } else { s -= 0.01 * x[i]; } } s }",
        &[1.7, -0.3, 2.0],
    );
}
