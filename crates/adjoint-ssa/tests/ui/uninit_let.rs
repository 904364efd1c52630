use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: &[f64]) -> f64 {
    let k;
    k = 1;
    x[k]
}

fn main() {}
