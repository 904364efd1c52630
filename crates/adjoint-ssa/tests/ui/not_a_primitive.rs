use adjoint_ssa::differentiable;

#[differentiable]
fn f(x: f64) -> f64 {
    x.div_euclid(2.0)
}

fn main() {}
