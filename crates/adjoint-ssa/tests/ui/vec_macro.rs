use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: &[f64]) -> f64 {
    let mut v = vec![0.0; x.len()];
    v[0] = x[0];
    v[0]
}

fn main() {}
