use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: Vec<f64>) -> f64 {
    x[0]
}

fn main() {}
