use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: f64) -> Option<f64> {
    Some(x)
}

fn main() {}
