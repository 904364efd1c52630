//! Helpers shared by the integration tests.

/// `a` equals `b` to 1e-10 relative.
#[allow(dead_code)] // not every test file compares scalars
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-10 * (1.0 + a.abs().max(b.abs()))
}

/// Each gradient entry equals the reference to 1e-10 relative.
pub fn check(name: &str, g: &[f64], want: &[f64]) {
    assert_eq!(g.len(), want.len());
    for (i, (a, b)) in g.iter().zip(want).enumerate() {
        assert!(
            (a - b).abs() <= 1e-10 * (1.0 + b.abs()),
            "{name}[{i}]: {a} vs {b}"
        );
    }
}

/// A one-slice function: the macro's gradient, its value against the user function, and the
/// gradient against forward mode over the generic reference.
#[allow(dead_code)] // not every test file has one-slice functions
pub fn check_slice(
    name: &str,
    x: &[f64],
    grad: fn(&[f64], &mut [f64]) -> f64,
    primal: fn(&[f64]) -> f64,
    reference: fn(&[adjoint_core::forward::Dual<f64>]) -> adjoint_core::forward::Dual<f64>,
) {
    let mut g = vec![0.0; x.len()];
    let v = grad(x, &mut g);
    assert_eq!(v, primal(x), "{name}: value");
    check(name, &g, &adjoint_core::forward::gradient(reference, x));
}
