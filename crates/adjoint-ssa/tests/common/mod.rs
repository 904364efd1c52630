//! Helpers shared by the integration tests.

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
