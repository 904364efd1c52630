use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum()
}

fn main() {}
