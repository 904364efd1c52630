use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: f64) -> f64 {
    x.sin_cos().0
}

fn main() {}
