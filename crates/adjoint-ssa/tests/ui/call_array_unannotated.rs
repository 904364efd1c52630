use adjoint_ssa::differentiable;

#[differentiable]
fn with_norm(a: &[f64]) -> ([f64; 2], f64) {
    let n = (a[0] * a[0] + a[1] * a[1]).sqrt();
    ([a[0] / n, a[1] / n], n)
}

#[differentiable]
fn f(a: &[f64]) -> f64 {
    let (u, n) = with_norm(a);
    u[0] * n
}

fn main() {}
