use adjoint_ssa::differentiable;

#[differentiable(wrt(z))]
fn f(x: f64) -> f64 {
    x
}

fn main() {}
